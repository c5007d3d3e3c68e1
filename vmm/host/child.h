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

/* Runs argv (argv[0] a path) with `fd` as descriptor `as_fd` and no other
 * of the VMM's (they are close-on-exec), stdin and stdout /dev/null, stderr
 * `err_fd` (a pipe the VMM reads). 0, or -1 with an error naming the
 * program. */
int child_spawn(struct child *c, const char *const *argv, int fd, int as_fd, int err_fd,
		struct err *e);
/* SIGTERM through the pidfd (the process may be gone: nothing), then
 * closes the pidfd. The zombie is the VMM's until it exits. */
void child_stop(struct child *c);

#endif
