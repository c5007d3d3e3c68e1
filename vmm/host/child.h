/*
 * A helper process the VMM starts for a device (virtiofsd for --fs) and
 * stops with the VM: spawned at set-up, before the seccomp filters, with
 * one descriptor passed at a fixed number; watched through a pidfd (it
 * becomes readable when the process exits) and stopped with a signal
 * through it, so no process-wide wait is needed.
 */
#ifndef VMM_HOST_CHILD_H
#define VMM_HOST_CHILD_H

#include <sys/types.h>

struct err;

struct child {
	pid_t pid; /* 0: none */
	int pidfd; /* readable once the process exited; -1: none */
	char name[32];
};

/* A descriptor the child gets, at a fixed number (3 or above). */
struct child_fd {
	int fd, as;
};
#define CHILD_MAX_FDS 4

/* Runs argv (argv[0] a path) with each of fds[0..n) at its number and no
 * other of the VMM's (they are close-on-exec), stdin and stdout /dev/null,
 * stderr `err_fd` (a pipe the VMM reads). 0, or -1 with an error naming
 * the program. */
int child_spawn(struct child *c, const char *const *argv, const struct child_fd *fds, unsigned n,
		int err_fd, struct err *e);
/* SIGTERM through the pidfd (the process may be gone: nothing), then
 * closes the pidfd. The zombie is the VMM's until it exits. */
void child_stop(struct child *c);

#endif
