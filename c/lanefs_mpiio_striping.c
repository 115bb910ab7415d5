/* liblanefs-mpiio-striping: MPI-IO striping hints for unmodified MPI
 * programs on a lanefs mount.
 *
 * ROMIO's Lustre driver sets a new file's striping from the hints
 * striping_factor, striping_unit and striping_offset with Lustre's
 * LL_IOC_LOV_SETSTRIPE, which a FUSE mount cannot carry (its argument
 * points at a variable-length layout), and on a FUSE mount ROMIO picks its
 * UFS driver, which ignores them. Preloaded (LD_PRELOAD), this library
 * takes MPI_File_open through MPI's profiling interface: when a file is
 * opened with MPI_MODE_CREATE and one of those hints, rank 0 of the
 * communicator creates it first with that striping
 * (LANEFS_IOC_CREATE_STRIPED on its directory), then every rank opens it
 * as the program asked. A file that exists keeps its layout, as on
 * Lustre; a file not under a lanefs mount is left to the MPI library.
 * Where the striping cannot be set, rank 0 says why on stderr and the
 * open goes on with the directory's default: never silently.
 *
 *   mpicc -shared -fPIC -O2 -I../include lanefs_mpiio_striping.c -o liblanefs-mpiio-striping.so
 *   LD_PRELOAD=.../liblanefs-mpiio-striping.so mpirun -np N program
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lanefs_user.h"

/* The integer value of hint `key`, or `missing`. */
static long long hint(MPI_Info info, const char *key, long long missing, int *given) {
    char value[MPI_MAX_INFO_VAL + 1];
    int flag = 0;
    if (info == MPI_INFO_NULL || MPI_Info_get(info, key, MPI_MAX_INFO_VAL, value, &flag) != MPI_SUCCESS || !flag)
        return missing;
    char *end = NULL;
    errno = 0;
    long long n = strtoll(value, &end, 10);
    if (errno != 0 || end == value || *end != '\0') {
        fprintf(stderr, "lanefs: MPI-IO hint %s=%s is not a number: ignored\n", key, value);
        return missing;
    }
    *given = 1;
    return n;
}

/* Rank 0's part: create `filename` with the striping the hints give.
 * Returns 0, or an errno said on stderr. */
static int create_striped(const char *filename, MPI_Info info) {
    int given = 0;
    long long factor = hint(info, "striping_factor", 0, &given);
    long long unit = hint(info, "striping_unit", 0, &given);
    long long offset = hint(info, "striping_offset", -1, &given);
    if (!given) return 0;
    /* ROMIO's file-system prefixes ("lustre:", "ufs:") name no directory. */
    const char *colon = strchr(filename, ':');
    if (colon && colon - filename > 1 && memchr(filename, '/', (size_t)(colon - filename)) == NULL)
        filename = colon + 1;
    if (access(filename, F_OK) == 0) return 0; /* exists: its layout stays */
    char dir[PATH_MAX];
    const char *slash = strrchr(filename, '/');
    const char *name = slash ? slash + 1 : filename;
    if (slash) {
        size_t len = (size_t)(slash - filename);
        if (len == 0) len = 1; /* "/file" */
        if (len >= sizeof dir) return ENAMETOOLONG;
        memcpy(dir, filename, len);
        dir[len] = '\0';
    } else {
        strcpy(dir, ".");
    }
    struct lanefs_create request;
    memset(&request, 0, sizeof request);
    if (strlen(name) >= sizeof request.lcf_name) return ENAMETOOLONG;
    strcpy(request.lcf_name, name);
    request.lcf_stripe_size = unit > 0 ? (__u64)unit : 0;
    request.lcf_stripe_count = (__s32)factor;
    request.lcf_stripe_offset = (__s32)offset;
    mode_t mask = umask(0);
    umask(mask);
    request.lcf_mode = 0666 & ~mask;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno;
    int rc = ioctl(fd, LANEFS_IOC_CREATE_STRIPED, &request);
    int error = rc < 0 ? errno : 0;
    close(fd);
    if (error == ENOTTY) return 0; /* not under a lanefs mount: the MPI library's */
    if (error == EEXIST) return 0; /* made meanwhile: its layout stays */
    if (error != 0)
        fprintf(stderr,
                "lanefs: MPI-IO striping hints for %s not applied (striping_factor=%lld striping_unit=%lld): %s; "
                "the file gets its directory's default striping (lanefs setstripe sets it)\n",
                filename, factor, unit, strerror(error));
    return error;
}

int MPI_File_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh) {
    if ((amode & MPI_MODE_CREATE) && info != MPI_INFO_NULL) {
        int rank = 0;
        PMPI_Comm_rank(comm, &rank);
        if (rank == 0) create_striped(filename, info);
        /* Every rank opens the file rank 0 made. */
        PMPI_Barrier(comm);
    }
    return PMPI_File_open(comm, filename, amode, info, fh);
}
