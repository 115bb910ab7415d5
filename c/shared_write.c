/*
 * shared_write: N processes write one shared file, each its own blocks
 * (block i of every round goes to process i), optionally taking a write
 * lockahead lock on each of its blocks first, as Cray's MPI-IO does for
 * its aggregators. Give the file once per process, for example the same
 * file through different lanefs mounts (different clients), so that
 * without lockahead their expanding locks conflict and call each other
 * back, and with it they do not.
 *
 *   shared_write [-l] [-b BLOCK_BYTES] [-r ROUNDS] FILE [FILE...]
 */
#include "lanefsapi.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int writer(const char *path, int rank, int ranks, size_t block, int rounds, int lockahead)
{
	char *buf = malloc(block);
	int fd = open(path, O_WRONLY | O_CREAT, 0644);
	int r;

	if (!buf || fd < 0) {
		perror(path);
		return 1;
	}
	memset(buf, 'a' + rank % 26, block);
	if (lockahead) {
		/* As Cray's MPI-IO does: locks this client takes beyond its
		 * lockahead ones are not expanded over the others' blocks. */
		int rc = lanefs_locknoexpand(fd, 0);
		if (rc < 0) {
			fprintf(stderr, "%s: lock-no-expand: %s\n", path, strerror(-rc));
			return 1;
		}
		for (r = 0; r < rounds; r++) {
			uint64_t start = ((uint64_t)r * ranks + rank) * block;
			int rc = lanefs_lockahead(fd, LANEFS_MODE_WRITE_USER, start, start + block - 1, 0);
			if (rc < 0) {
				fprintf(stderr, "%s: lockahead: %s\n", path, strerror(-rc));
				return 1;
			}
		}
	}
	for (r = 0; r < rounds; r++) {
		off_t at = ((off_t)r * ranks + rank) * (off_t)block;
		if (pwrite(fd, buf, block, at) != (ssize_t)block) {
			perror("pwrite");
			return 1;
		}
	}
	if (close(fd) != 0) {
		perror("close");
		return 1;
	}
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	size_t block = 1 << 20;
	int rounds = 8, lockahead = 0, opt, i, failed = 0;

	while ((opt = getopt(argc, argv, "lb:r:")) != -1) {
		switch (opt) {
		case 'l': lockahead = 1; break;
		case 'b': block = strtoul(optarg, NULL, 0); break;
		case 'r': rounds = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-l] [-b BLOCK_BYTES] [-r ROUNDS] FILE [FILE...]\n", argv[0]);
			return 2;
		}
	}
	if (optind >= argc || block == 0 || rounds <= 0) {
		fprintf(stderr, "usage: %s [-l] [-b BLOCK_BYTES] [-r ROUNDS] FILE [FILE...]\n", argv[0]);
		return 2;
	}
	for (i = optind; i < argc; i++) {
		pid_t pid = fork();
		if (pid == 0)
			_exit(writer(argv[i], i - optind, argc - optind, block, rounds, lockahead));
		if (pid < 0) {
			perror("fork");
			return 1;
		}
	}
	for (i = optind; i < argc; i++) {
		int status;
		if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
			failed = 1;
	}
	return failed;
}
