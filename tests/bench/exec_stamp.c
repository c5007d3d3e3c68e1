/*
 * exec_stamp: runs a program with tests/bench/kvmrun_shim preloaded and
 * the exec time stamped, for the footprint comparison of scripts/vmm-bench:
 *
 *   exec_stamp SHIM.so OUT.jsonl PROGRAM [ARGS...]
 *
 * sets LD_PRELOAD=SHIM.so, KVMRUN_SHIM_OUT=OUT.jsonl and
 * KVMRUN_SHIM_EXEC_NS=<CLOCK_MONOTONIC in ns> and exec()s PROGRAM, the
 * stamp taken just before the execve, so the shim's "exec to first
 * KVM_RUN" includes the dynamic loader and everything the VMM does before
 * it runs a vCPU. Exits 127 if the exec fails.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char stamp[32];
	struct timespec ts;

	if (argc < 4) {
		fprintf(stderr, "usage: exec_stamp SHIM.so OUT.jsonl PROGRAM [ARGS...]\n");
		return 2;
	}
	if (setenv("LD_PRELOAD", argv[1], 1) || setenv("KVMRUN_SHIM_OUT", argv[2], 1)) {
		perror("exec_stamp: setenv");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(stamp, sizeof(stamp), "%llu",
		 (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec);
	setenv("KVMRUN_SHIM_EXEC_NS", stamp, 1);
	execvp(argv[3], argv + 3);
	fprintf(stderr, "exec_stamp: %s: %s\n", argv[3], strerror(errno));
	return 127;
}
