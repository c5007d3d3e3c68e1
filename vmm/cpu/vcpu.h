/*
 * vCPU threads: set-up (CPUID, MSRs, LAPIC LINT0/1, FPU, 64-bit boot
 * state), KVM_RUN, and the exit dispatcher onto the port and MMIO buses.
 * An emulation failure goes to the ring-0 fallbacks (vmm/cpu/vcpu_fallback.h),
 * whose uses each vCPU counts here, or to the crash report
 * (vmm/cpu/vcpu_diag.h).
 */
#ifndef VMM_VCPU_H
#define VMM_VCPU_H

#include "vmm/base/machine_ctl.h"
#include "vmm/cpu/cpu_model.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct bus;
struct err;
struct guest_mem;
struct kvm;
struct kvm_run;
struct log;
struct vmm_seccomp;

/* What a vCPU needs of the machine, and nothing more (no struct vm). */
struct vcpu_env {
	const struct kvm *kvm; /* the VM fd, the run-area size, the host's tables and kind */
	struct guest_mem *mem;
	struct bus *pio, *mmio;
	struct log *log;
	const struct vmm_seccomp *seccomp; /* NULL: --seccomp off */
	unsigned nvcpus;		   /* in the machine (CPUID topology) */
	enum cpu_pv_policy kvm_pv;	   /* --kvm-pv */
	uint32_t kvm_pv_mask;
	struct machine_ctl ctl; /* stop the machine, with a reason */
	/* True once the machine is stopping: the thread leaves KVM_RUN. */
	bool (*stopping)(void *ctx);
	/* Called on the first KVM_RUN of any vCPU (--boot-timer). */
	void (*first_run)(void *ctx);
	void *ctx;
};

/* Instructions the emulating host's ring 0 does not know, and we do. */
enum vcpu_fallback {
	VCPU_FALLBACK_INT3,  /* inject #BP */
	VCPU_FALLBACK_CLAC,  /* clear RFLAGS.AC */
	VCPU_FALLBACK_STAC,  /* set RFLAGS.AC */
	VCPU_FALLBACK_FWAIT, /* x87 sync: #NM, #MF or nothing */
	VCPU_FALLBACK_LDMXCSR,
	VCPU_FALLBACK_STMXCSR,
	VCPU_FALLBACK_USER_UD, /* CPL 3, unknown to KVM: #UD to the process */
	VCPU_FALLBACK_COUNT,
};
extern const char *const vcpu_fallback_names[VCPU_FALLBACK_COUNT];

struct vcpu_stats {
	atomic_uint_fast64_t exits, io_exits, mmio_exits;
	atomic_uint_fast64_t fallbacks[VCPU_FALLBACK_COUNT];
};

struct vcpu {
	const struct vcpu_env *env;
	unsigned id;
	int fd;
	struct kvm_run *run;
	pthread_t thread;
	int thread_started;
	struct vcpu_stats stats;
};

int vcpu_create(const struct vcpu_env *env, struct vcpu *v, unsigned id, struct err *e);
/* Registers for the boot CPU: at the 64-bit entry (RIP, RSI = zero page;
 * the long-mode state of vmm/cpu/long_mode.h over vmm/boot's GDT and page
 * tables), or with `pvh` at the PVH entry (32-bit, EBX = hvm_start_info). */
int vcpu_set_boot_state(struct vcpu *v, uint64_t rip, uint64_t arg, bool pvh, struct err *e);
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
