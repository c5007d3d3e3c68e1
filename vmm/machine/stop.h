/*
 * How a machine's stop is judged: the exit code and the stop kind of each
 * reason the layers below give (enum machine_stop_reason,
 * vmm/base/machine_ctl.h). The codes are the process's table
 * (vmm/host/exit_code.h); the machine's own stops (--timeout, a signal,
 * Ctrl-A x) and the stop line are in vmm/machine/stop.c, the one place
 * that decides how the VM stops and what is reported.
 */
#ifndef VMM_STOP_H
#define VMM_STOP_H

#include "vmm/base/machine_ctl.h"
#include "vmm/host/exit_code.h"

#include <stdint.h>

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
