/*
 * Process exit codes: the one table (README "Exit codes", --help), and the
 * code of an error that ends ./vmm before or instead of a run. What a
 * stopping machine exits with is the machine's call (vmm/machine/stop.h):
 * nothing below the machine picks a code.
 */
#ifndef VMM_EXIT_CODE_H
#define VMM_EXIT_CODE_H

#include "vmm/base/err.h"

enum vmm_exit_code {
	EXIT_GUEST_OFF = 0,	 /* guest reset or shut down */
	EXIT_USAGE = 2,		 /* bad input or usage */
	EXIT_GUEST_CRASH = 4,	 /* triple fault, emulation failure, panic */
	EXIT_TIMEOUT = 6,	 /* --timeout expired */
	EXIT_HOST = 8,		 /* host problem: /dev/kvm, capability, host I/O */
	EXIT_INTERRUPTED = 10,	 /* SIGINT/SIGTERM or Ctrl-A x */
	EXIT_SECCOMP = 12,	 /* a system call the seccomp filter forbids */
	EXIT_EMULATED_HOST = 14, /* the emulated KVM host failed (scripts/vmm-host) */
};

/* ERR_INPUT -> 2, ERR_HOST, ERR_NO_KVM (or no kind recorded) -> 8. */
int exit_code_for_err(const struct err *e);

#endif
