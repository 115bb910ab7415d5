/*
 * lanefs_user.h: lanefs's ioctls on files under a lanefs mount.
 *
 * FUSE carries only ioctls whose argument has a fixed size, so lanefs has
 * its own numbers (type 'L') for what Lustre does with LL_IOC_LADVISE (a
 * variable-length array of advices) and LL_IOC_GROUP_LOCK (a gid passed by
 * value): one advice per call, and the gid through a pointer. Advice,
 * flag and mode values are Lustre's (lustre_user.h).
 */
#ifndef LANEFS_USER_H
#define LANEFS_USER_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define LANEFS_LADVISE_WILLREAD     1 /* LU_LADVISE_WILLREAD: OSSes read the range into their cache */
#define LANEFS_LADVISE_DONTNEED     2 /* LU_LADVISE_DONTNEED: OSSes drop it from their cache */
#define LANEFS_LADVISE_LOCKNOEXPAND 3 /* LU_LADVISE_LOCKNOEXPAND */
#define LANEFS_LADVISE_LOCKAHEAD    4 /* LU_LADVISE_LOCKAHEAD */

#define LANEFS_LF_ASYNC 0x1 /* LF_ASYNC: do not wait for the lock or the OSSes' answers */
#define LANEFS_LF_UNSET 0x2 /* LF_UNSET: clear lock-no-expand */

#define LANEFS_MODE_READ_USER  1 /* MODE_READ_USER */
#define LANEFS_MODE_WRITE_USER 2 /* MODE_WRITE_USER */

/* What an asynchronous lockahead did (LLA_RESULT_*). */
#define LANEFS_LLA_RESULT_SENT      0
#define LANEFS_LLA_RESULT_DIFFERENT 1
#define LANEFS_LLA_RESULT_SAME      2

/* One advice on the open file, 32 bytes, in the host's byte order. */
struct lanefs_ladvise {
	__u32 lla_advice; /* LANEFS_LADVISE_* */
	__u32 lla_flags;  /* LANEFS_LF_* */
	__u32 lla_mode;   /* LANEFS_MODE_*, for lockahead */
	__u32 lla_result; /* out: LANEFS_LLA_RESULT_*, for asynchronous lockahead */
	__u64 lla_start;  /* first byte */
	__u64 lla_end;    /* last byte, inclusive (a lock's extent) */
};

#define LANEFS_IOC_LADVISE      _IOWR('L', 1, struct lanefs_ladvise)
/* Take and release a group lock of gid *arg on every object of the file. */
#define LANEFS_IOC_GROUP_LOCK   _IOW('L', 2, __u64)
#define LANEFS_IOC_GROUP_UNLOCK _IOW('L', 3, __u64)

/*
 * On a directory (opened O_RDONLY | O_DIRECTORY): create the file lcf_name
 * in it with this striping, as `lfs setstripe` creates one (Lustre's
 * LL_IOC_LOV_SETSTRIPE on a new file, which FUSE cannot carry). Fields at
 * 0 (a count or size) or -1 (the first OST) are inherited from the
 * directory. EEXIST if the name is taken (the file keeps its layout).
 * 280 bytes, in the host's byte order.
 */
struct lanefs_create {
	__u64 lcf_stripe_size;   /* bytes, a multiple of 64 KiB; 0: inherited */
	__s32 lcf_stripe_count;  /* -1: every OST; 0: inherited */
	__s32 lcf_stripe_offset; /* the first OST; -1: the MDS chooses */
	__u32 lcf_mode;          /* permission bits, the caller's umask applied already */
	__u32 lcf_padding;
	char lcf_name[256];      /* NUL-terminated */
};

#define LANEFS_IOC_CREATE_STRIPED _IOW('L', 4, struct lanefs_create)

#endif
