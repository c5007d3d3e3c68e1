#include "vmm/host/child.h"

#include "vmm/base/err.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int setup_fds(posix_spawn_file_actions_t *fa, int fd, int as_fd, int err_fd)
{
	return posix_spawn_file_actions_addopen(fa, 0, "/dev/null", O_RDONLY, 0) ||
	       posix_spawn_file_actions_addopen(fa, 1, "/dev/null", O_WRONLY, 0) ||
	       posix_spawn_file_actions_adddup2(fa, err_fd, 2) ||
	       posix_spawn_file_actions_adddup2(fa, fd, as_fd);
}

int child_spawn(struct child *c, const char *const *argv, int fd, int as_fd, int err_fd,
		struct err *e)
{
	posix_spawn_file_actions_t fa;
	memset(c, 0, sizeof(*c));
	c->pidfd = -1;
	snprintf(c->name, sizeof(c->name), "%s", argv[0]);
	/* dup2 onto itself would keep close-on-exec: move fd out of the way. */
	int src = fd == as_fd ? fcntl(fd, F_DUPFD_CLOEXEC, as_fd + 1) : fd;
	if (src < 0 || posix_spawn_file_actions_init(&fa))
		return err_set(e, ERR_HOST, "%s: %s", argv[0], strerror(errno));
	int ret = setup_fds(&fa, src, as_fd, err_fd)
		      ? errno
		      : posix_spawn(&c->pid, argv[0], &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (src != fd)
		close(src);
	if (ret) {
		c->pid = 0;
		return err_set(e, ERR_HOST, "cannot start %s: %s", argv[0], strerror(ret));
	}
	c->pidfd = pidfd_open_(c->pid);
	if (c->pidfd < 0) {
		int saved = errno;
		kill(c->pid, SIGTERM);
		c->pid = 0;
		return err_set(e, ERR_HOST, "%s: pidfd_open: %s", argv[0], strerror(saved));
	}
	return 0;
}

void child_stop(struct child *c)
{
	if (c->pidfd >= 0) {
		syscall(SYS_pidfd_send_signal, c->pidfd, SIGTERM, NULL, 0);
		close(c->pidfd);
	}
	c->pidfd = -1;
	c->pid = 0;
}
