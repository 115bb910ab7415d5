/* The MPI exchange's costs between two ranks of this node, measured for
 * `lanefs calibrate` (crates/calibrate/src/mpi.rs compiles it with mpicc
 * and runs it under mpirun -np 2):
 *
 *   latency:   half the round trip of an 8-byte message, ping-pong;
 *   bandwidth: 4 MiB messages streamed from rank 0 to rank 1, a window of
 *              them in flight (the receiver has a buffer for each);
 *   message:   the sender's time per message in a stream of 8-byte
 *              non-blocking sends, a window in flight (LogP's overhead: at
 *              this size the gap between messages is the CPU's work on
 *              each, not the bytes').
 *   test:      rank 0's time per MPI_Test of a receive not yet sent (what
 *              lanefs's ranks do between sleeps in a wait), as many tests
 *              as small messages.
 *
 * Usage: mpi_probe ROUND_TRIPS LARGE_MESSAGES SMALL_MESSAGES
 * Prints one line on rank 0:
 *   lanefs-mpi-probe latency_us=L bandwidth_gib_s=B message_cpu_us=M test_us=T
 *
 * Usage: mpi_probe test TESTS
 * Times the tests alone (run under `--mca mpi_yield_when_idle 1`, Open
 * MPI's default on a node with more ranks than cores, each test that
 * finds nothing to do yields the core: opal_progress calls sched_yield).
 * Prints one line on rank 0:
 *   lanefs-mpi-probe test_us=T
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SMALL_BYTES 8
#define LARGE_BYTES (4L << 20)
#define WINDOW 8
#define SMALL_WINDOW 64
#define WARMUP 100

static double ping_pong(int rank, long trips)
{
    char message[SMALL_BYTES] = {0};
    int peer = 1 - rank;
    MPI_Barrier(MPI_COMM_WORLD);
    double began = MPI_Wtime();
    for (long i = 0; i < trips; i++) {
        if (rank == 0) {
            MPI_Send(message, SMALL_BYTES, MPI_CHAR, peer, 0, MPI_COMM_WORLD);
            MPI_Recv(message, SMALL_BYTES, MPI_CHAR, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(message, SMALL_BYTES, MPI_CHAR, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(message, SMALL_BYTES, MPI_CHAR, peer, 0, MPI_COMM_WORLD);
        }
    }
    return MPI_Wtime() - began;
}

/* Streams `count` messages of `bytes` from rank 0 to rank 1, `window` in
 * flight, and returns rank 0's time until rank 1 has them all. */
static double stream(int rank, long count, long bytes, int window, char **buffers)
{
    MPI_Request requests[SMALL_WINDOW];
    char ack = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double began = MPI_Wtime();
    for (long sent = 0; sent < count; sent += window) {
        int n = count - sent < window ? (int)(count - sent) : window;
        for (int i = 0; i < n; i++) {
            if (rank == 0)
                MPI_Isend(buffers[0], (int)bytes, MPI_CHAR, 1, 1, MPI_COMM_WORLD, &requests[i]);
            else
                MPI_Irecv(buffers[i], (int)bytes, MPI_CHAR, 0, 1, MPI_COMM_WORLD, &requests[i]);
        }
        MPI_Waitall(n, requests, MPI_STATUSES_IGNORE);
    }
    if (rank == 0)
        MPI_Recv(&ack, 1, MPI_CHAR, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else
        MPI_Send(&ack, 1, MPI_CHAR, 0, 2, MPI_COMM_WORLD);
    return MPI_Wtime() - began;
}

/* Rank 0's time per MPI_Test of a receive rank 1 sends only once rank 0
 * has done `tests` of them. */
static double test_cost(int rank, long tests)
{
    char message[SMALL_BYTES] = {0};
    char go = 0;
    double per_test = 0.0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        MPI_Request request;
        int done = 0;
        MPI_Irecv(message, SMALL_BYTES, MPI_CHAR, 1, 3, MPI_COMM_WORLD, &request);
        double began = MPI_Wtime();
        for (long i = 0; i < tests; i++)
            MPI_Test(&request, &done, MPI_STATUS_IGNORE);
        per_test = (MPI_Wtime() - began) / (double)tests;
        MPI_Send(&go, 1, MPI_CHAR, 1, 4, MPI_COMM_WORLD);
        if (!done)
            MPI_Wait(&request, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(&go, 1, MPI_CHAR, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(message, SMALL_BYTES, MPI_CHAR, 0, 3, MPI_COMM_WORLD);
    }
    return per_test;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int tests_only = argc == 3 && strcmp(argv[1], "test") == 0;
    if (size != 2 || (argc != 4 && !tests_only)) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -np 2 %s ROUND_TRIPS LARGE_MESSAGES SMALL_MESSAGES | test TESTS\n",
                    argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (tests_only) {
        long tests = atol(argv[2]);
        test_cost(rank, WARMUP);
        double test_s = test_cost(rank, tests);
        if (rank == 0)
            printf("lanefs-mpi-probe test_us=%.4f\n", test_s * 1e6);
        MPI_Finalize();
        return 0;
    }
    long trips = atol(argv[1]), large = atol(argv[2]), small = atol(argv[3]);
    char *buffers[SMALL_WINDOW];
    for (int i = 0; i < SMALL_WINDOW; i++) {
        long bytes = i < WINDOW ? LARGE_BYTES : SMALL_BYTES;
        buffers[i] = malloc(bytes);
        if (buffers[i] == NULL) {
            fprintf(stderr, "mpi_probe: out of memory\n");
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        memset(buffers[i], rank + 1, bytes);
    }
    ping_pong(rank, WARMUP);
    double latency = ping_pong(rank, trips) / (double)trips / 2.0;
    stream(rank, WINDOW, LARGE_BYTES, WINDOW, buffers);
    double large_s = stream(rank, large, LARGE_BYTES, WINDOW, buffers);
    stream(rank, WARMUP, SMALL_BYTES, SMALL_WINDOW, buffers);
    double small_s = stream(rank, small, SMALL_BYTES, SMALL_WINDOW, buffers);
    test_cost(rank, WARMUP);
    double test_s = test_cost(rank, small);
    if (rank == 0)
        printf("lanefs-mpi-probe latency_us=%.4f bandwidth_gib_s=%.4f message_cpu_us=%.4f test_us=%.4f\n",
               latency * 1e6, (double)large * LARGE_BYTES / large_s / (double)(1L << 30),
               small_s / (double)small * 1e6, test_s * 1e6);
    for (int i = 0; i < SMALL_WINDOW; i++)
        free(buffers[i]);
    MPI_Finalize();
    return 0;
}
