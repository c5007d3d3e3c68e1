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

/* Each source is first moved above every target (a dup2 onto itself would
 * keep close-on-exec, and one pair's target may be another's source). */
static int setup_fds(posix_spawn_file_actions_t *fa, const int *src, const struct child_fd *fds,
		     unsigned n, int err_fd)
{
	int ret = posix_spawn_file_actions_addopen(fa, 0, "/dev/null", O_RDONLY, 0) ||
		  posix_spawn_file_actions_addopen(fa, 1, "/dev/null", O_WRONLY, 0) ||
		  posix_spawn_file_actions_adddup2(fa, err_fd, 2);
	for (unsigned i = 0; i < n && !ret; i++)
		ret = posix_spawn_file_actions_adddup2(fa, src[i], fds[i].as);
	return ret;
}

int child_spawn(struct child *c, const char *const *argv, const struct child_fd *fds, unsigned n,
		int err_fd, struct err *e)
{
	posix_spawn_file_actions_t fa;
	int src[CHILD_MAX_FDS], top = 2, ret = 0;
	memset(c, 0, sizeof(*c));
	c->pidfd = -1;
	snprintf(c->name, sizeof(c->name), "%s", argv[0]);
	if (n > CHILD_MAX_FDS)
		return err_set(e, ERR_HOST, "%s: %u descriptors to pass", argv[0], n);
	for (unsigned i = 0; i < n; i++)
		top = fds[i].as > top ? fds[i].as : top;
	unsigned moved = 0;
	for (; moved < n && !ret; moved++)
		if ((src[moved] = fcntl(fds[moved].fd, F_DUPFD_CLOEXEC, top + 1)) < 0)
			ret = errno;
	if (!ret && posix_spawn_file_actions_init(&fa))
		ret = errno;
	if (!ret) {
		ret = setup_fds(&fa, src, fds, n, err_fd)
			  ? errno
			  : posix_spawn(&c->pid, argv[0], &fa, NULL, (char *const *)argv, environ);
		posix_spawn_file_actions_destroy(&fa);
	}
	for (unsigned i = 0; i < moved; i++)
		if (src[i] >= 0)
			close(src[i]);
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
