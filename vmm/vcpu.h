/*
 * vCPU threads: set-up (CPUID, MSRs, LAPIC LINT0/1, FPU, 64-bit boot
 * state), KVM_RUN, and the exit dispatcher onto the port and MMIO buses.
 * An emulation failure goes to the ring-0 fallbacks (vmm/vcpu_fallback.h),
 * whose uses each vCPU counts here, or to the crash report
 * (vmm/vcpu_diag.h).
 */
#ifndef VMM_VCPU_H
#define VMM_VCPU_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

struct vm;
struct kvm_run;
struct err;

/* Instructions the emulating host's ring 0 does not know, and we do. */
enum vcpu_fallback {
	VCPU_FALLBACK_INT3,  /* inject #BP */
	VCPU_FALLBACK_CLAC,  /* clear RFLAGS.AC */
	VCPU_FALLBACK_STAC,  /* set RFLAGS.AC */
	VCPU_FALLBACK_FWAIT, /* x87 sync: #NM, #MF or nothing */
	VCPU_FALLBACK_LDMXCSR,
	VCPU_FALLBACK_STMXCSR,
	VCPU_FALLBACK_COUNT,
};
extern const char *const vcpu_fallback_names[VCPU_FALLBACK_COUNT];

struct vcpu_stats {
	atomic_uint_fast64_t exits, io_exits, mmio_exits;
	atomic_uint_fast64_t fallbacks[VCPU_FALLBACK_COUNT];
};

struct vcpu {
	struct vm *vm;
	unsigned id;
	int fd;
	struct kvm_run *run;
	pthread_t thread;
	int thread_started;
	struct vcpu_stats stats;
};

int vcpu_create(struct vm *vm, struct vcpu *v, unsigned id, struct err *e);
/* Registers for the boot CPU at the 64-bit entry: RIP, RSI = zero page. */
int vcpu_set_boot_state(struct vcpu *v, uint64_t rip, uint64_t rsi, struct err *e);
int vcpu_start(struct vcpu *v, struct err *e);
/* Interrupts KVM_RUN (signal); the thread exits once the VM is stopping. */
void vcpu_kick(struct vcpu *v);
void vcpu_join(struct vcpu *v);
void vcpu_destroy(struct vcpu *v);
/* Handles the exit in v->run (the vCPU thread calls it after each KVM_RUN;
 * tests/bench/exit_dispatch_loop.c calls it on a fake run area). */
void vcpu_dispatch(struct vcpu *v);

/* The signal that kicks vCPUs out of KVM_RUN; blocked outside KVM_RUN. */
#define VCPU_KICK_SIGNAL SIGUSR1

#endif
