/*
 * Boxes without a usable /dev/kvm: ./vmm runs the same command on the
 * emulated KVM host (QEMU TCG with nested SVM), through scripts/vmm-host
 * (README "Without /dev/kvm"; scripts/vmmtools/emuhost/).
 */
#ifndef VMM_EMULATED_HOST_H
#define VMM_EMULATED_HOST_H

#include "vmm/base/err.h"

/* Replaces this process with `vmm-host exec --why WHY -- THIS-VMM ARGS`
 * (argv[1..] unchanged), with VMM_HOST=kvm so the command does not move
 * again; the helper says where it runs and exits as the command exits.
 * Returns only when the helper cannot be started, with `e` set. */
int emulated_host_exec(char **argv, const char *why, struct err *e);

#endif
