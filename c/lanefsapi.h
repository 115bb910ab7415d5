/*
 * liblanefsapi: lanefs's controls on files under a lanefs mount, in the
 * spirit of Lustre's liblustreapi. Link with -llanefsapi (make -C c).
 *
 * Every function returns 0 (or a non-negative result) on success and
 * -errno on failure.
 */
#ifndef LANEFSAPI_H
#define LANEFSAPI_H

#include <stdint.h>
#include "lanefs_user.h"

/* Lockahead on the open file fd: a lock of mode (LANEFS_MODE_READ_USER or
 * LANEFS_MODE_WRITE_USER) on bytes start..end (inclusive), taken by the
 * mount's client. Without LANEFS_LF_ASYNC in flags it returns once the
 * lock is granted; with it, at once, with LANEFS_LLA_RESULT_*. */
int lanefs_lockahead(int fd, uint32_t mode, uint64_t start, uint64_t end, uint32_t flags);

/* Lock-no-expand on fd: the client's next locks are not expanded by the
 * server (clear it with LANEFS_LF_UNSET in flags). */
int lanefs_locknoexpand(int fd, uint32_t flags);

/* A group lock of gid on every object of the open file, and its release. */
int lanefs_group_lock(int fd, uint64_t gid);
int lanefs_group_unlock(int fd, uint64_t gid);

/* A file's layout, read from its lustre.lov extended attribute. */
struct lanefs_layout {
	uint32_t stripe_size;
	uint16_t stripe_count;
	uint32_t ost[64];     /* the OST of each stripe (the first 64) */
	uint64_t object[64];  /* the object id on it */
};
int lanefs_get_layout(const char *path, struct lanefs_layout *layout);

#endif
