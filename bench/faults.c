/* What a first write into a page of shared memory costs, as a lanefs
 * client's first copy into a frame of its page arena does, alone and with
 * the rest of a one-host cluster's work beside it: `lanefs calibrate`'s
 * `page_first_touch_us` (crates/calibrate/src/frames.rs) takes it alone.
 *
 *   cc -O2 -pthread bench/faults.c -o /tmp/faults
 *   /tmp/faults MIB alone          nothing else runs
 *   /tmp/faults MIB writer DIR     another thread writes a file in DIR into
 *                                  the page cache (1 MiB pwrites, synced
 *                                  every 512 MiB), as an OST does
 *   /tmp/faults MIB spin           another thread spins on a core
 *
 * Each of 3 rounds copies MIB of a new memfd mapping in 1 MiB blocks
 * twice; the first pass's thread CPU time less the second's, per page, is
 * the fault's cost (the zeroed page, its accounting, the mapping).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define BLOCK (1 << 20)
#define ROUNDS 3

static atomic_int stop;

static double thread_cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *writer(void *arg) {
    char path[4096];
    snprintf(path, sizeof path, "%s/faults-writer", (const char *)arg);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_NOFOLLOW, 0600);
    char *buf = malloc(BLOCK);
    if (fd < 0 || !buf) {
        perror(path);
        exit(1);
    }
    memset(buf, 7, BLOCK);
    for (long n = 0; !atomic_load(&stop); n++) {
        if (pwrite(fd, buf, BLOCK, (n % 512) * (long)BLOCK) != BLOCK) {
            perror("pwrite");
            exit(1);
        }
        if (n % 512 == 511 && fdatasync(fd) != 0) {
            perror("fdatasync");
            exit(1);
        }
    }
    close(fd);
    unlink(path);
    free(buf);
    return NULL;
}

static void *spinner(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) {
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[2], "writer") == 0 && argc < 4)) {
        fprintf(stderr, "usage: %s MIB alone|spin|writer DIR\n", argv[0]);
        return 2;
    }
    long bytes = atol(argv[1]) * BLOCK;
    if (bytes <= 0) {
        fprintf(stderr, "%s: MIB must be a positive number, not %s\n", argv[0], argv[1]);
        return 2;
    }
    pthread_t other;
    int with = strcmp(argv[2], "alone") != 0;
    if (strcmp(argv[2], "writer") == 0) {
        pthread_create(&other, NULL, writer, argv[3]);
    } else if (strcmp(argv[2], "spin") == 0) {
        pthread_create(&other, NULL, spinner, NULL);
    } else if (with) {
        fprintf(stderr, "%s: %s is not alone, spin or writer\n", argv[0], argv[2]);
        return 2;
    }
    usleep(100000);
    char *source = malloc(BLOCK);
    memset(source, 3, BLOCK);
    for (int round = 0; round < ROUNDS; round++) {
        int fd = memfd_create("faults", MFD_CLOEXEC);
        if (fd < 0 || ftruncate(fd, bytes) != 0) {
            perror("memfd");
            return 1;
        }
        char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
        double a = thread_cpu();
        for (long at = 0; at < bytes; at += BLOCK) memcpy(p + at, source, BLOCK);
        double b = thread_cpu();
        for (long at = 0; at < bytes; at += BLOCK) memcpy(p + at, source, BLOCK);
        double c = thread_cpu();
        printf("%s, round %d: first pass %.1f ms, second %.1f ms: %.2f us a page\n", argv[2], round,
               (b - a) * 1e3, (c - b) * 1e3, ((b - a) - (c - b)) * 1e6 / (bytes / 4096));
        munmap(p, bytes);
        close(fd);
    }
    atomic_store(&stop, 1);
    if (with) pthread_join(other, NULL);
    free(source);
    return 0;
}
