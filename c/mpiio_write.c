/* Collective MPI-IO by the MPI library's own layer (OMPIO or ROMIO, as
 * Open MPI's `--mca io` picks), on any file system, a lanefs mount
 * included: every rank writes its blocks of IOR's segmented layout with
 * MPI_File_write_at_all, one transfer per call, syncs and closes; then
 * every rank reads the blocks of the next rank back with
 * MPI_File_read_at_all and checks each byte. Rank 0 prints one JSON line:
 * the write bandwidth (open to close, MPI_Wtime, as IOR's) and whether
 * every byte was right.
 *
 *   mpirun -np N mpiio_write FILE BLOCK_MIB TRANSFER_KIB SEGMENTS
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char byte_at(int rank, uint64_t offset) {
    return (unsigned char)((offset * 2654435761u) ^ (uint64_t)(rank + 1) * 40503u);
}

static void fill(unsigned char *buf, size_t len, int rank, uint64_t offset) {
    for (size_t i = 0; i < len; i++) buf[i] = byte_at(rank, offset + i);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 5) {
        if (rank == 0) fprintf(stderr, "usage: mpiio_write FILE BLOCK_MIB TRANSFER_KIB SEGMENTS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *path = argv[1];
    uint64_t block = strtoull(argv[2], NULL, 10) << 20;
    uint64_t transfer = strtoull(argv[3], NULL, 10) << 10;
    uint64_t segments = strtoull(argv[4], NULL, 10);
    if (block == 0 || transfer == 0 || segments == 0 || block % transfer != 0) {
        if (rank == 0) fprintf(stderr, "mpiio_write: BLOCK must be a positive multiple of TRANSFER\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    unsigned char *buf = malloc(transfer), *expected = malloc(transfer);
    MPI_File fh;
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    int rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "mpiio_write: rank %d cannot open %s\n", rank, path);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (uint64_t s = 0; s < segments; s++) {
        for (uint64_t t = 0; t < block / transfer; t++) {
            uint64_t offset = (s * (uint64_t)size + (uint64_t)rank) * block + t * transfer;
            fill(buf, transfer, rank, offset);
            rc = MPI_File_write_at_all(fh, (MPI_Offset)offset, buf, (int)transfer, MPI_BYTE, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS) {
                fprintf(stderr, "mpiio_write: rank %d: write at %llu failed\n", rank, (unsigned long long)offset);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
    }
    MPI_File_sync(fh);
    MPI_File_close(&fh);
    double elapsed = MPI_Wtime() - start, slowest;
    MPI_Reduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    /* Read the next rank's blocks back, collectively, and check them. */
    int other = (rank + 1) % size, bad = 0, any_bad = 0;
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    for (uint64_t s = 0; s < segments; s++) {
        for (uint64_t t = 0; t < block / transfer; t++) {
            uint64_t offset = (s * (uint64_t)size + (uint64_t)other) * block + t * transfer;
            MPI_File_read_at_all(fh, (MPI_Offset)offset, buf, (int)transfer, MPI_BYTE, MPI_STATUS_IGNORE);
            fill(expected, transfer, other, offset);
            if (memcmp(buf, expected, transfer) != 0) bad = 1;
        }
    }
    MPI_File_close(&fh);
    MPI_Reduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        double mib = (double)(block * segments * (uint64_t)size) / (1 << 20);
        printf("{\"write_mib_s\": %.1f, \"seconds\": %.4f, \"verified\": %s}\n", mib / slowest, slowest,
               any_bad ? "false" : "true");
    }
    free(buf);
    free(expected);
    MPI_Finalize();
    return any_bad ? 1 : 0;
}
