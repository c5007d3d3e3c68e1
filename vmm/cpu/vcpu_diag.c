#include "vmm/cpu/vcpu_diag.h"

#include "vmm/cpu/insn_hint.h"

#include "vmm/base/guest_mem.h"
#include "vmm/base/log.h"
#include "vmm/cpu/kvm.h"
#include "vmm/cpu/page_walk.h"
#include "vmm/cpu/vcpu.h"

#include <linux/kvm.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

int vcpu_linear_access(struct vcpu *v, const struct kvm_sregs *s, uint64_t rflags, uint64_t lin,
		       void *buf, unsigned len, enum page_access access, uint32_t *pf_error,
		       uint64_t *fault_lin)
{
	uint8_t *p = buf;
	uint32_t ignored;
	pf_error = pf_error ? pf_error : &ignored;
	/* Every byte's page is checked before any byte is written: an access
	 * that faults on its second page changes nothing (SDM vol. 3, 6.5). */
	for (int pass = access == PAGE_WALK_WRITE ? 0 : 1; pass < 2; pass++)
		for (unsigned i = 0; i < len; i++) {
			uint64_t pa;
			enum page_walk_result r = page_walk(v->env->mem, s, s->cs.dpl, rflags,
							    lin + i, access, &pa, pf_error);
			if (r != PAGE_WALK_OK) {
				if (fault_lin)
					*fault_lin = lin + i;
				return r;
			}
			if (pass == 0)
				continue;
			if (access == PAGE_WALK_WRITE ? guest_mem_write(v->env->mem, pa, p + i, 1)
						      : guest_mem_read(v->env->mem, pa, p + i, 1))
				return PAGE_WALK_UNREADABLE;
		}
	return PAGE_WALK_OK;
}

int vcpu_fetch_insn(struct vcpu *v, uint64_t rip, uint8_t *buf, unsigned len)
{
	struct kvm_sregs s;
	if (ioctl(v->fd, KVM_GET_SREGS, &s) < 0)
		return -1;
	return vcpu_linear_access(v, &s, 0, rip + (s.cs.l ? 0 : s.cs.base), buf, len,
				  PAGE_WALK_PEEK, NULL, NULL)
		   ? -1
		   : 0;
}

/* The clearcpuid= that makes Linux avoid an instruction the emulating
 * host's ring 0 does not know (kvm-host.md), in `buf`, or NULL. The line
 * keeps the form "clearcpuid=N (name)": scripts/vmm-ci reads it. */
const char *vcpu_insn_hint(const uint8_t *insn, unsigned n, char *buf, unsigned len)
{
	const struct insn_feature *f = insn_feature_of(insn, n);
	if (!f)
		return NULL;
	snprintf(buf, len, "%s needs %s: add clearcpuid=%u (%s) to the guest command line", f->insn,
		 f->feature, f->bit, f->feature);
	return buf;
}

void vcpu_dump_state(struct vcpu *v, const char *what, const uint8_t *insn, unsigned insn_len)
{
	struct log *log = v->env->log;
	struct kvm_regs r;
	struct kvm_sregs s;
	uint8_t fetched[15];
	char bytes[3 * 16 + 1] = "";
	if (ioctl(v->fd, KVM_GET_REGS, &r) < 0 || ioctl(v->fd, KVM_GET_SREGS, &s) < 0) {
		log_error(log, "vCPU %u: %s (registers unavailable)", v->id, what);
		return;
	}
	if (!insn && vcpu_fetch_insn(v, r.rip, fetched, sizeof(fetched)) == 0) {
		insn = fetched;
		insn_len = sizeof(fetched);
	}
	for (unsigned i = 0; insn && i < insn_len && i < 16; i++)
		snprintf(bytes + 3 * i, 4, "%02x ", insn[i]);
	log_error(log, "vCPU %u: %s at RIP 0x%016llx (CS 0x%04x, CPL %u, %s)", v->id, what,
		  (unsigned long long)r.rip, s.cs.selector, s.cs.dpl,
		  s.cs.l	? "64-bit"
		  : (s.cr0 & 1) ? "protected mode"
				: "real mode");
	log_error(log, "  instruction bytes: %s", insn ? bytes : "(unreadable)");
	char hint_buf[160];
	const char *hint = insn && v->env->kvm->emulated_host
			       ? vcpu_insn_hint(insn, insn_len, hint_buf, sizeof(hint_buf))
			       : NULL;
	if (hint)
		log_error(log,
			  "  hint: %s; the set measured to work here: "
			  "clearcpuid=151,308,295,154,141,156,293,304 (popcnt, smap, smep, xsave, "
			  "cx16, avx, avx2, avx512f). Bit numbers work on every kernel; names only "
			  "from Linux 5.19 (an older kernel stops at the first name)",
			  hint);
	log_error(log, "  RAX %016llx RBX %016llx RCX %016llx RDX %016llx",
		  (unsigned long long)r.rax, (unsigned long long)r.rbx, (unsigned long long)r.rcx,
		  (unsigned long long)r.rdx);
	log_error(log, "  RSI %016llx RDI %016llx RSP %016llx RBP %016llx",
		  (unsigned long long)r.rsi, (unsigned long long)r.rdi, (unsigned long long)r.rsp,
		  (unsigned long long)r.rbp);
	log_error(log, "  RFLAGS %08llx CR0 %08llx CR2 %016llx CR3 %016llx CR4 %08llx EFER %llx",
		  (unsigned long long)r.rflags, (unsigned long long)s.cr0,
		  (unsigned long long)s.cr2, (unsigned long long)s.cr3, (unsigned long long)s.cr4,
		  (unsigned long long)s.efer);
	log_error(log, "  host: %s", kvm_host_kind(v->env->kvm));
	if (v->env->kvm->emulated_host && s.cs.dpl == 0)
		log_error(log,
			  "  note: this host emulates guest ring 0 instruction by instruction and "
			  "does not know every instruction (see notes/kvm-host.md)");
}

void vcpu_dump_where(struct vcpu *v)
{
	struct kvm_regs r;
	struct kvm_sregs s;
	struct kvm_mp_state mp = {0};
	uint8_t insn[8] = {0};
	char bytes[3 * 8 + 1] = "(unreadable)";
	if (ioctl(v->fd, KVM_GET_REGS, &r) < 0 || ioctl(v->fd, KVM_GET_SREGS, &s) < 0)
		return;
	ioctl(v->fd, KVM_GET_MP_STATE, &mp);
	if (vcpu_fetch_insn(v, r.rip, insn, sizeof(insn)) == 0)
		for (unsigned i = 0; i < sizeof(insn); i++)
			snprintf(bytes + 3 * i, 4, "%02x ", insn[i]);
	const char *state = mp.mp_state == KVM_MP_STATE_RUNNABLE	? "running"
			    : mp.mp_state == KVM_MP_STATE_HALTED	? "halted"
			    : mp.mp_state == KVM_MP_STATE_UNINITIALIZED ? "waiting for INIT"
			    : mp.mp_state == KVM_MP_STATE_INIT_RECEIVED ? "waiting for SIPI"
									: "other";
	log_warn(v->env->log,
		 "vCPU %u at stop: %s, RIP 0x%llx (CS 0x%04x base 0x%llx, CPL %u, %s), RFLAGS "
		 "%llx, bytes %s",
		 v->id, state, (unsigned long long)r.rip, s.cs.selector,
		 (unsigned long long)s.cs.base, s.cs.dpl,
		 s.cs.l	       ? "64-bit"
		 : (s.cr0 & 1) ? "protected mode"
			       : "real mode",
		 (unsigned long long)r.rflags, bytes);
	/* Measured on the emulating host: a KVM hypercall (vmcall/vmmcall; Linux's
	 * PV IPI in kvm_hypercall4 is the first) never completes, so a second
	 * vCPU never comes up. --kvm-pv auto hides the features that make them. */
	bool hypercall = insn[0] == 0x0F && insn[1] == 0x01 && (insn[2] == 0xC1 || insn[2] == 0xD9);
	if (v->env->kvm->emulated_host && hypercall && strcmp(bytes, "(unreadable)"))
		log_warn(v->env->log,
			 "  hint: vCPU %u is stuck in a KVM hypercall, which does not complete on "
			 "this host; --kvm-pv auto (the default) hides the features that make "
			 "them, or boot Linux with nopv",
			 v->id);
}
