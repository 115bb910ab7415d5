/* liblanefsapi: see lanefsapi.h. */
#include "lanefsapi.h"

#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/xattr.h>

static int advise(int fd, uint32_t advice, uint32_t mode, uint64_t start, uint64_t end, uint32_t flags)
{
	struct lanefs_ladvise a;

	memset(&a, 0, sizeof(a));
	a.lla_advice = advice;
	a.lla_flags = flags;
	a.lla_mode = mode;
	a.lla_start = start;
	a.lla_end = end;
	if (ioctl(fd, LANEFS_IOC_LADVISE, &a) != 0)
		return -errno;
	return (int)a.lla_result;
}

int lanefs_lockahead(int fd, uint32_t mode, uint64_t start, uint64_t end, uint32_t flags)
{
	return advise(fd, LANEFS_LADVISE_LOCKAHEAD, mode, start, end, flags);
}

int lanefs_locknoexpand(int fd, uint32_t flags)
{
	return advise(fd, LANEFS_LADVISE_LOCKNOEXPAND, 0, 0, 0, flags);
}

int lanefs_group_lock(int fd, uint64_t gid)
{
	return ioctl(fd, LANEFS_IOC_GROUP_LOCK, &gid) == 0 ? 0 : -errno;
}

int lanefs_group_unlock(int fd, uint64_t gid)
{
	return ioctl(fd, LANEFS_IOC_GROUP_UNLOCK, &gid) == 0 ? 0 : -errno;
}

int lanefs_get_layout(const char *path, struct lanefs_layout *layout)
{
	unsigned char buf[32 + 24 * 64];
	ssize_t n = getxattr(path, "lustre.lov", buf, sizeof(buf));
	uint32_t magic;
	unsigned i;

	if (n < 0)
		return errno == ERANGE ? -E2BIG : -errno;
	if (n < 32)
		return -EPROTO;
	memcpy(&magic, buf, 4);
	if (magic != 0x0BD10BD0) /* LOV_USER_MAGIC_V1 */
		return -EPROTO;
	memset(layout, 0, sizeof(*layout));
	memcpy(&layout->stripe_size, buf + 24, 4);
	memcpy(&layout->stripe_count, buf + 28, 2);
	for (i = 0; i < layout->stripe_count && i < 64 && 32 + 24 * (i + 1) <= (size_t)n; i++) {
		memcpy(&layout->object[i], buf + 32 + 24 * i, 8);
		memcpy(&layout->ost[i], buf + 32 + 24 * i + 20, 4);
	}
	return 0;
}
