/*
 * Process exit codes: the one table (README "Exit codes", --help), and the
 * machine's mapping onto it of what lower layers report: an error's kind,
 * a device's stop reason. Nothing below the machine picks a code.
 */
#ifndef VMM_EXIT_CODE_H
#define VMM_EXIT_CODE_H

#include "vmm/base/err.h"
#include "vmm/base/machine_ctl.h"

#include <stdint.h>

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
/* Reset -> 0, panic -> 4, a debug-exit value v -> (v << 1) | 1 as the shell
 * sees it (the low 8 bits: always odd, never one of the codes above), a
 * status-port byte -> itself (the guest command's status, which may be
 * any of the codes above: -v says which it was). */
int exit_code_for_stop(enum machine_stop_reason reason, uint32_t value);
/* Who ended the VM, as the stop line names it ("stop: KIND"): the kind
 * comes from the reason, never from the exit code, which a guest may pick
 * through the status port (any byte, the VMM's own codes included). */
const char *stop_kind_for(enum machine_stop_reason reason);
#define STOP_KIND_RESET	       "reset"
#define STOP_KIND_PANIC	       "panic"
#define STOP_KIND_DEBUG_EXIT   "debug-exit"
#define STOP_KIND_GUEST_STATUS "guest-status"
#define STOP_KIND_CRASH	       "crash"
#define STOP_KIND_HOST	       "host"
#define STOP_KIND_TIMEOUT      "timeout"
#define STOP_KIND_INTERRUPTED  "interrupted"

#endif
