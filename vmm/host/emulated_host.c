#include "vmm/host/emulated_host.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef VMM_HOST_HELPER
#define VMM_HOST_HELPER "scripts/vmm-host"
#endif

int emulated_host_exec(char **argv, const char *why, struct err *e)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return err_set(e, ERR_HOST, "%s; and /proc/self/exe is unreadable: %s", why,
			       strerror(errno));
	self[n] = '\0';
	const char *helper = getenv("VMM_HOST_HELPER");
	if (!helper || !*helper)
		helper = VMM_HOST_HELPER;
	int argc = 0;
	while (argv[argc])
		argc++;
	char **args = calloc((size_t)argc + 6, sizeof(*args));
	if (!args)
		return err_set(e, ERR_HOST, "out of memory");
	int i = 0;
	args[i++] = (char *)helper;
	args[i++] = "exec";
	args[i++] = "--why";
	args[i++] = (char *)why;
	args[i++] = "--";
	args[i++] = self;
	for (int j = 1; j < argc; j++)
		args[i++] = argv[j];
	args[i] = NULL;
	/* The helper relays signals: it gets them unblocked and with their
	 * default actions, not the VMM's (blocked for the signalfd, SIGPIPE
	 * ignored), which exec would otherwise hand on. */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	setenv("VMM_HOST", "kvm", 1);
	execv(helper, args);
	int err = errno;
	free(args);
	return err_set(e, ERR_HOST, "%s, and the emulated KVM host cannot start: %s: %s", why,
		       helper, strerror(err));
}
