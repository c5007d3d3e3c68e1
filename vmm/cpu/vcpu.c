#include "vmm/cpu/vcpu.h"

#include "vmm/base/bus.h"
#include "vmm/base/err.h"
#include "vmm/base/layout.h"
#include "vmm/base/log.h"
#include "vmm/boot/boot.h"
#include "vmm/cpu/cpu_model.h"
#include "vmm/cpu/kvm.h"
#include "vmm/cpu/long_mode.h"
#include "vmm/cpu/vcpu_diag.h"
#include "vmm/cpu/vcpu_fallback.h"
#include "vmm/host/seccomp.h"

#include <errno.h>
#include <linux/kvm.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

/* Stops the machine for `reason` (the machine picks the exit code). */
static void vcpu_stop(struct vcpu *v, enum machine_stop_reason reason, const char *why)
{
	machine_request_stop(&v->env->ctl, reason, 0, why);
}

#define APIC_LVT_LINT0	 0x350
#define APIC_LVT_LINT1	 0x360
#define APIC_MODE_EXTINT (7u << 8)
#define APIC_MODE_NMI	 (4u << 8)

static int vcpu_set_cpuid(struct vcpu *v, const struct cpu_model *m, struct err *e)
{
	struct kvm_cpuid2 *c = calloc(1, sizeof(*c) + m->nleaves * sizeof(c->entries[0]));
	if (!c)
		return err_set(e, ERR_HOST, "out of memory");
	c->nent = m->nleaves;
	for (unsigned i = 0; i < m->nleaves; i++) {
		const struct cpuid_leaf *l = &m->leaves[i];
		c->entries[i] = (struct kvm_cpuid_entry2){.function = l->function,
							  .index = l->index,
							  .flags = l->flags,
							  .eax = l->eax,
							  .ebx = l->ebx,
							  .ecx = l->ecx,
							  .edx = l->edx};
	}
	int ret = ioctl(v->fd, KVM_SET_CPUID2, c);
	free(c);
	if (ret < 0)
		return err_set(e, ERR_HOST, "KVM_SET_CPUID2 failed: %s", strerror(errno));
	return 0;
}

/* One MSR at a time: KVM_SET_MSRS stops at the first it refuses, and an
 * optional one (HWCR on an older KVM) must not hide the rest. */
static int vcpu_set_msrs(struct vcpu *v, const struct cpu_model *m, struct err *e)
{
	for (unsigned i = 0; i < m->nmsrs; i++) {
		struct {
			struct kvm_msrs hdr;
			struct kvm_msr_entry entry;
		} one = {.hdr.nmsrs = 1,
			 .entry = {.index = m->msrs[i].index, .data = m->msrs[i].value}};
		int ret = ioctl(v->fd, KVM_SET_MSRS, &one);
		if (ret == 1)
			continue;
		if (ret < 0 || !m->msrs[i].optional)
			return err_set(e, ERR_HOST, "KVM_SET_MSRS of %s (0x%x) failed: %s",
				       m->msrs[i].name, m->msrs[i].index,
				       ret < 0 ? strerror(errno) : "refused");
		if (v->id == 0)
			log_info(v->env->log, "cpu: KVM refused MSR %s (0x%x) = 0x%llx",
				 m->msrs[i].name, m->msrs[i].index,
				 (unsigned long long)m->msrs[i].value);
	}
	return 0;
}

/* What the model decided, once (vCPU 0), for -v; scripts/vmm-ci reads
 * these lines to tell a host's limits from the VMM's mistakes. */
static void vcpu_log_model(struct vcpu *v, const struct cpu_model *m, uint32_t khz)
{
	char shown[256], hidden[256];
	cpu_pv_names(m->pv_shown, shown, sizeof(shown));
	cpu_pv_names(m->pv_offered & ~m->pv_shown, hidden, sizeof(hidden));
	log_info(v->env->log, "cpu: %s, TSC %u kHz; KVM PV features shown: %s; hidden: %s",
		 cpu_vendor_name(m->vendor), khz, shown, hidden);
	if (m->note)
		log_info(v->env->log, "cpu: %s", m->note);
}

static int vcpu_apply_model(struct vcpu *v, struct err *e)
{
	const struct kvm *k = v->env->kvm;
	int khz = ioctl(v->fd, KVM_GET_TSC_KHZ, 0);
	struct host_cpu host = {.leaves = k->cpuid,
				.nleaves = k->ncpuid,
				.msrs = k->msrs,
				.nmsrs = k->nmsrs,
				.tsc_khz = khz > 0 ? (uint32_t)khz : 0,
				.ring0_emulated = k->emulated_host};
	struct cpu_model_params p = {.id = v->id,
				     .nvcpus = v->env->nvcpus,
				     .pv = v->env->kvm_pv,
				     .pv_mask = v->env->kvm_pv_mask};
	struct cpu_model *m = malloc(sizeof(*m));
	if (!m)
		return err_set(e, ERR_HOST, "out of memory");
	int ret = cpu_model_build(&host, &p, m, e);
	if (!ret && v->id == 0)
		vcpu_log_model(v, m, host.tsc_khz);
	if (!ret)
		ret = vcpu_set_cpuid(v, m, e) || vcpu_set_msrs(v, m, e) ? -1 : 0;
	free(m);
	return ret;
}

/* LINT0 = ExtINT (the 8259 virtual wire), LINT1 = NMI, as the MP table says. */
static int vcpu_set_lapic(struct vcpu *v, struct err *e)
{
	struct kvm_lapic_state la;
	uint32_t reg;
	if (ioctl(v->fd, KVM_GET_LAPIC, &la) < 0)
		return err_set(e, ERR_HOST, "KVM_GET_LAPIC failed: %s", strerror(errno));
	memcpy(&reg, la.regs + APIC_LVT_LINT0, 4);
	reg = (reg & ~0x700u & ~(1u << 16)) | APIC_MODE_EXTINT;
	memcpy(la.regs + APIC_LVT_LINT0, &reg, 4);
	memcpy(&reg, la.regs + APIC_LVT_LINT1, 4);
	reg = (reg & ~0x700u & ~(1u << 16)) | APIC_MODE_NMI;
	memcpy(la.regs + APIC_LVT_LINT1, &reg, 4);
	if (ioctl(v->fd, KVM_SET_LAPIC, &la) < 0)
		return err_set(e, ERR_HOST, "KVM_SET_LAPIC failed: %s", strerror(errno));
	return 0;
}

int vcpu_create(const struct vcpu_env *env, struct vcpu *v, unsigned id, struct err *e)
{
	memset(v, 0, sizeof(*v));
	v->env = env;
	v->id = id;
	v->fd = ioctl(env->kvm->vm_fd, KVM_CREATE_VCPU, (unsigned long)id);
	if (v->fd < 0)
		return err_set(e, ERR_HOST, "KVM_CREATE_VCPU %u failed: %s", id, strerror(errno));
	v->run =
	    mmap(NULL, (size_t)env->kvm->run_size, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd, 0);
	if (v->run == MAP_FAILED) {
		v->run = NULL;
		return err_set(e, ERR_HOST, "mmap of vCPU %u run area failed: %s", id,
			       strerror(errno));
	}
	if (vcpu_apply_model(v, e) || vcpu_set_lapic(v, e))
		return -1;
	struct kvm_fpu fpu = {.fcw = 0x37F, .mxcsr = 0x1F80};
	if (ioctl(v->fd, KVM_SET_FPU, &fpu) < 0)
		return err_set(e, ERR_HOST, "KVM_SET_FPU failed: %s", strerror(errno));
	return 0;
}

int vcpu_set_boot_state(struct vcpu *v, uint64_t rip, uint64_t arg, bool pvh, struct err *e)
{
	/* boot.rst 64-bit protocol: long mode, paging, flat __BOOT_CS/__BOOT_DS. */
	const struct long_mode_entry lm = {.rip = rip,
					   .rsp = LAYOUT_BOOT_STACK,
					   .cr3 = LAYOUT_PML4,
					   .gdt = LAYOUT_GDT,
					   .gdt_limit = BOOT_GDT_ENTRIES * 8 - 1,
					   .code_sel = BOOT_CS,
					   .data_sel = BOOT_DS,
					   .tss_sel = BOOT_TSS};
	struct kvm_sregs s;
	struct kvm_regs r;
	if (ioctl(v->fd, KVM_GET_SREGS, &s) < 0)
		return err_set(e, ERR_HOST, "KVM_GET_SREGS failed: %s", strerror(errno));
	long_mode_sregs(&s, &lm);
	if (pvh) {
		/* The PVH start-info ABI (xen/include/public/arch-x86/hvm/
		 * start_info.h, "x86 entry"): 32-bit protected mode, paging
		 * off, flat CS (read/execute) and DS/ES/SS (read/write), a
		 * 32-bit TSS in TR, EBX = the hvm_start_info's address. */
		s.cs.selector = BOOT_CS32;
		s.cs.db = 1;
		s.cs.l = 0;
		s.cr0 = 0x11; /* ET PE */
		s.cr3 = 0;
		s.cr4 = 0;
		s.efer = 0;
	}
	if (ioctl(v->fd, KVM_SET_SREGS, &s) < 0)
		return err_set(e, ERR_HOST, "KVM_SET_SREGS failed: %s", strerror(errno));
	long_mode_regs(&r, &lm);
	r.rbp = r.rsp;
	if (pvh)
		r.rbx = arg;
	else
		r.rsi = arg;
	if (ioctl(v->fd, KVM_SET_REGS, &r) < 0)
		return err_set(e, ERR_HOST, "KVM_SET_REGS failed: %s", strerror(errno));
	return 0;
}

static void vcpu_handle_io(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	uint8_t *data = (uint8_t *)run + run->io.data_offset;
	/* A rep ins/outs exits once with `count` elements. */
	for (uint32_t i = 0; i < run->io.count; i++, data += run->io.size) {
		if (run->io.direction == KVM_EXIT_IO_OUT)
			bus_write(v->env->pio, run->io.port, data, run->io.size);
		else
			bus_read(v->env->pio, run->io.port, data, run->io.size);
	}
}

static void vcpu_handle_mmio(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	unsigned len = run->mmio.len;
	if (len == 0 || len > sizeof(run->mmio.data))
		return;
	if (run->mmio.is_write)
		bus_write(v->env->mmio, run->mmio.phys_addr, run->mmio.data, len);
	else
		bus_read(v->env->mmio, run->mmio.phys_addr, run->mmio.data, len);
}

static void vcpu_handle_internal_error(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	uint8_t insn[16];
	unsigned n = 0;
	if (run->internal.suberror == KVM_INTERNAL_ERROR_EMULATION) {
		if ((run->emulation_failure.ndata >= 3) &&
		    (run->emulation_failure.flags &
		     KVM_INTERNAL_ERROR_EMULATION_FLAG_INSTRUCTION_BYTES) &&
		    run->emulation_failure.insn_size > 0) {
			n = run->emulation_failure.insn_size;
			if (n > sizeof(run->emulation_failure.insn_bytes))
				n = sizeof(run->emulation_failure.insn_bytes);
			memcpy(insn, run->emulation_failure.insn_bytes, n);
		} else {
			struct kvm_regs r;
			if (ioctl(v->fd, KVM_GET_REGS, &r) == 0 &&
			    vcpu_fetch_insn(v, r.rip, insn, 15) == 0)
				n = 15;
		}
		if (vcpu_emulation_fallback(v, insn, n) == 0)
			return;
		vcpu_dump_state(v, "instruction emulation failed", insn, n);
		vcpu_stop(v, MACHINE_STOP_GUEST_CRASH,
			  "guest hit an instruction KVM cannot emulate");
		return;
	}
	char what[96];
	snprintf(what, sizeof(what), "KVM internal error, suberror %u", run->internal.suberror);
	vcpu_dump_state(v, what, NULL, 0);
	vcpu_stop(v, MACHINE_STOP_GUEST_CRASH, "KVM internal error");
}

void vcpu_dispatch(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	atomic_fetch_add(&v->stats.exits, 1);
	switch (run->exit_reason) {
	case KVM_EXIT_IO:
		atomic_fetch_add(&v->stats.io_exits, 1);
		vcpu_handle_io(v);
		break;
	case KVM_EXIT_MMIO:
		atomic_fetch_add(&v->stats.mmio_exits, 1);
		vcpu_handle_mmio(v);
		break;
	case KVM_EXIT_INTR:
	case KVM_EXIT_HLT:
	case KVM_EXIT_IRQ_WINDOW_OPEN: break;
	case KVM_EXIT_SHUTDOWN:
		vcpu_dump_state(v, "triple fault (KVM_EXIT_SHUTDOWN)", NULL, 0);
		vcpu_stop(v, MACHINE_STOP_GUEST_CRASH, "guest triple fault");
		break;
	case KVM_EXIT_SYSTEM_EVENT:
		if (run->system_event.type == KVM_SYSTEM_EVENT_CRASH)
			vcpu_stop(v, MACHINE_STOP_GUEST_CRASH, "guest reported a crash");
		else
			vcpu_stop(v, MACHINE_STOP_GUEST_RESET, "guest shutdown or reset");
		break;
	case KVM_EXIT_INTERNAL_ERROR: vcpu_handle_internal_error(v); break;
	case KVM_EXIT_FAIL_ENTRY: {
		char what[96];
		snprintf(what, sizeof(what), "VM entry failed, hardware reason 0x%llx",
			 (unsigned long long)run->fail_entry.hardware_entry_failure_reason);
		vcpu_dump_state(v, what, NULL, 0);
		vcpu_stop(v, MACHINE_STOP_GUEST_CRASH, "VM entry failed");
		break;
	}
	default: {
		char what[64];
		snprintf(what, sizeof(what), "unexpected KVM exit reason %u", run->exit_reason);
		vcpu_dump_state(v, what, NULL, 0);
		vcpu_stop(v, MACHINE_STOP_GUEST_CRASH, "unexpected KVM exit");
		break;
	}
	}
}

/* A kick stays pending while blocked; take it so the next KVM_RUN runs. */
static void vcpu_consume_kick(void)
{
	sigset_t kick;
	struct timespec zero = {0, 0};
	sigemptyset(&kick);
	sigaddset(&kick, VCPU_KICK_SIGNAL);
	while (sigtimedwait(&kick, NULL, &zero) == VCPU_KICK_SIGNAL)
		;
}

static void *vcpu_thread(void *arg)
{
	struct vcpu *v = arg;
	char name[16];
	snprintf(name, sizeof(name), "vcpu%u", v->id);
	pthread_setname_np(pthread_self(), name);
	if (v->env->seccomp) {
		int ret = vmm_seccomp_apply(v->env->seccomp, VMM_THREAD_VCPU);
		if (ret) {
			log_error(v->env->log, "vCPU %u: cannot install its seccomp filter: %s",
				  v->id, strerror(-ret));
			vcpu_stop(v, MACHINE_STOP_HOST_FAILURE, "seccomp failed");
			return NULL;
		}
	}
	while (!v->env->stopping(v->env->ctx)) {
		if (v->id == 0)
			v->env->first_run(v->env->ctx);
		if (ioctl(v->fd, KVM_RUN, 0) < 0) {
			if (errno == EINTR || errno == EAGAIN) {
				vcpu_consume_kick();
				continue;
			}
			log_error(v->env->log, "vCPU %u: KVM_RUN failed: %s", v->id,
				  strerror(errno));
			vcpu_stop(v, MACHINE_STOP_HOST_FAILURE, "KVM_RUN failed");
			break;
		}
		vcpu_dispatch(v);
	}
	return NULL;
}

int vcpu_start(struct vcpu *v, struct err *e)
{
	/* KVM_RUN runs with the kick signal unblocked; elsewhere it is blocked,
	 * so a kick that arrives early stays pending and ends the next KVM_RUN. */
	sigset_t set;
	pthread_sigmask(SIG_BLOCK, NULL, &set);
	sigdelset(&set, VCPU_KICK_SIGNAL);
	struct {
		struct kvm_signal_mask hdr;
		uint8_t bits[8];
	} mask;
	mask.hdr.len = 8;
	memcpy(mask.bits, &set, 8);
	if (ioctl(v->fd, KVM_SET_SIGNAL_MASK, &mask) < 0)
		return err_set(e, ERR_HOST, "KVM_SET_SIGNAL_MASK failed: %s", strerror(errno));
	int ret = pthread_create(&v->thread, NULL, vcpu_thread, v);
	if (ret)
		return err_set(e, ERR_HOST, "cannot start vCPU thread: %s", strerror(ret));
	v->thread_started = 1;
	return 0;
}

void vcpu_kick(struct vcpu *v)
{
	if (v->thread_started)
		pthread_kill(v->thread, VCPU_KICK_SIGNAL);
}

void vcpu_join(struct vcpu *v)
{
	if (v->thread_started) {
		pthread_join(v->thread, NULL);
		v->thread_started = 0;
	}
}

void vcpu_destroy(struct vcpu *v)
{
	if (v->run)
		munmap(v->run, (size_t)v->env->kvm->run_size);
	if (v->fd >= 0)
		close(v->fd);
	v->run = NULL;
	v->fd = -1;
}
