/* The shape of lanefs's write path with no protocol at all: 8 writer
 * threads copy 1 MiB at a time into rings of frames (a client's page
 * cache) and hand them to 4 threads that pwrite them into files (the
 * OSTs); against 8 threads pwrite-ing straight from their own buffer (the
 * local-file ceiling of bench/fs.py). What is left between lanefs and this
 * pipeline is the protocol; what is left between this pipeline and the
 * direct writes is the second copy, and the cold source of the last one.
 *
 *   gcc -O2 -pthread bench/pipeline.c -o /tmp/pipeline
 *   /tmp/pipeline RING_MIB DIR     (RING_MIB 0: the direct writes)
 *
 * Each run writes 8 x 256 MiB into DIR (use tmpfs, as bench/fs.py does);
 * -DSEGMENTS=N makes it 8 x N MiB.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MIB (1 << 20)
#define WRITERS 8
#define OSTS 4
#ifndef SEGMENTS
#define SEGMENTS 256
#endif

static int ring;
static char dir[256];

struct item {
    char *buf;
    int fd;
    long off;
    int *done;
};

struct queue {
    pthread_mutex_t m;
    pthread_cond_t c;
    int head, tail;
    struct item q[4096];
};

static struct queue queues[OSTS];

static void push(struct queue *q, struct item it) {
    pthread_mutex_lock(&q->m);
    q->q[q->tail++ % 4096] = it;
    pthread_cond_signal(&q->c);
    pthread_mutex_unlock(&q->m);
}

static void *ost(void *arg) {
    struct queue *q = arg;
    for (;;) {
        pthread_mutex_lock(&q->m);
        while (q->head == q->tail) pthread_cond_wait(&q->c, &q->m);
        struct item it = q->q[q->head++ % 4096];
        pthread_mutex_unlock(&q->m);
        if (pwrite(it.fd, it.buf, MIB, it.off) != MIB) abort();
        __atomic_fetch_add(it.done, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static int open_file(long writer, int object) {
    char path[512];
    snprintf(path, sizeof path, "%s/f%ld_%d", dir, writer, object);
    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (fd < 0) abort();
    return fd;
}

static void *writer(void *arg) {
    long id = (long)arg;
    char *app = malloc(MIB);
    memset(app, (int)id, MIB);
    if (ring == 0) { /* the ceiling: straight from the caller's buffer */
        int fd = open_file(id, 0);
        for (int s = 0; s < SEGMENTS; s++)
            if (pwrite(fd, app, MIB, (long)s * MIB) != MIB) abort();
        close(fd);
        return NULL;
    }
    int fds[OSTS];
    for (int o = 0; o < OSTS; o++) fds[o] = open_file(id, o);
    char *frames = mmap(NULL, (long)ring * MIB, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset(frames, 0, (long)ring * MIB); /* faulted in beforehand: only the copies are measured */
    int done = 0;
    for (int s = 0; s < SEGMENTS; s++) {
        while (s - __atomic_load_n(&done, __ATOMIC_ACQUIRE) >= ring) sched_yield();
        char *b = frames + (long)(s % ring) * MIB;
        memcpy(b, app, MIB);
        push(&queues[s % OSTS], (struct item){b, fds[s % OSTS], (long)(s / OSTS) * MIB, &done});
    }
    while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) < SEGMENTS) sched_yield();
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s RING_MIB DIR (RING_MIB 0: direct writes)\n", argv[0]);
        return 2;
    }
    ring = atoi(argv[1]);
    strncpy(dir, argv[2], sizeof dir - 1);
    pthread_t osts[OSTS], writers[WRITERS];
    for (int i = 0; ring > 0 && i < OSTS; i++) {
        pthread_mutex_init(&queues[i].m, NULL);
        pthread_cond_init(&queues[i].c, NULL);
        pthread_create(&osts[i], NULL, ost, &queues[i]);
    }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < WRITERS; i++) pthread_create(&writers[i], NULL, writer, (void *)i);
    for (int i = 0; i < WRITERS; i++) pthread_join(writers[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    printf("%s: %.0f MiB/s\n", ring ? "pipeline" : "direct", WRITERS * SEGMENTS / s);
    return 0;
}
