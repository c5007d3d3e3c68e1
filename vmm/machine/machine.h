/*
 * The machine builder: what ./vmm and the harnesses build a machine with,
 * from one options struct (vmm/options/options.h): built by vmm/machine/build.c,
 * run by vmm/machine/run.c, stopped by vmm/machine/stop.c. The machine itself
 * (struct vm, vmm/machine/vm.h) is private to those files; everything else gets a
 * narrow context (struct vcpu_env, struct io_thread_env, struct device_host).
 */
#ifndef VMM_MACHINE_H
#define VMM_MACHINE_H

#include <stdint.h>

struct err;
struct irq_sink_ops;
struct vcpu_env;
struct vm;
struct vm_options;

/* Where the machine's interrupts go and who runs it: NULL for KVM (what
 * ./vmm builds); otherwise no /dev/kvm is opened, no vCPU is made, the
 * interrupt door goes to `irq_sink` and notifications reach the queues'
 * loops without ioeventfds: the exit-dispatch harness
 * (tests/bench/exit_dispatch_loop.c) dispatches exits on it itself. */
struct machine_backend {
	const struct irq_sink_ops *irq_sink;
	void *irq_sink_ctx;
};

/* Builds the whole machine of `o`; NULL with e set (nothing left behind). */
struct vm *machine_create(const struct vm_options *o, uint64_t start_ns,
			  const struct machine_backend *backend, struct err *e);
/* Runs until the guest stops; returns the process exit code, or -1 with e
 * set. */
int machine_run(struct vm *vm, struct err *e);
void machine_destroy(struct vm *vm);
/* What a vCPU of this machine gets (a harness dispatches exits with it). */
const struct vcpu_env *machine_vcpu_env(struct vm *vm);

#endif
