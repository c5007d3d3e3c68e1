/* ./vmm: parse the command line, build the machine, run it, exit with the
 * code the README's table gives. */
#include "vmm/base/clock.h"
#include "vmm/base/err.h"
#include "vmm/cpu/vcpu.h"
#include "vmm/host/emulated_host.h"
#include "vmm/host/exit_code.h"
#include "vmm/kinds/registry.h"
#include "vmm/machine/machine.h"
#include "vmm/options/options.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef VMM_VERSION
#define VMM_VERSION "unknown"
#endif

static void vmm_kick_handler(int sig)
{
	(void)sig; /* only interrupts KVM_RUN */
}

/* Signals are taken by the event loop (signalfd) and the vCPU kick; block
 * them in every thread before any is created. */
static void vmm_setup_signals(void)
{
	struct sigaction sa;
	sigset_t set;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = vmm_kick_handler;
	sigemptyset(&sa.sa_mask);
	sigaction(VCPU_KICK_SIGNAL, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, VCPU_KICK_SIGNAL);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

int main(int argc, char **argv)
{
	uint64_t start_ns = clock_now_ns();
	struct vm_options opts;
	struct err e = {0};
	int code;
	/* The command line as given, for the emulated host: option parsing
	 * cuts device options (",ro", ",queues=2") in place. Static: it lives
	 * as long as the process. */
	static char **given;
	given = calloc((size_t)argc + 1, sizeof(*given));
	for (int i = 0; given && i < argc; i++)
		given[i] = strdup(argv[i]);

	if (options_parse(&opts, argc, argv, device_kinds, &e)) {
		fprintf(stderr, "vmm: %s\n", e.msg);
		return EXIT_USAGE;
	}
	if (opts.help) {
		options_print_help(stdout, "./vmm", device_kinds);
		return 0;
	}
	if (opts.version) {
		printf("vmm %s\n", VMM_VERSION);
		return 0;
	}
	vmm_setup_signals();
	/* The time zone is read now: under the seccomp filters no thread may
	 * open /etc/localtime when the RTC first asks for local time. */
	tzset();
	struct vm *vm = machine_create(&opts, start_ns, NULL, &e);
	code = vm ? machine_run(vm, &e) : -1;
	machine_destroy(vm);
	if (code < 0 && e.kind == ERR_NO_KVM) {
		/* The inputs were good: the same command on the emulated host. */
		char why[sizeof(e.msg)];
		snprintf(why, sizeof(why), "%s", e.msg);
		memset(&e, 0, sizeof(e));
		emulated_host_exec(given ? given : argv, why, &e);
		fprintf(stderr, "vmm: %s\n", e.msg);
		return EXIT_EMULATED_HOST;
	}
	if (code < 0) {
		fprintf(stderr, "vmm: %s\n", e.msg[0] ? e.msg : "failed (no detail)");
		return exit_code_for_err(&e);
	}
	return code;
}
