#include "vmm/cpu/vcpu_fallback.h"

#include "vmm/cpu/vcpu.h"
#include "vmm/cpu/vcpu_diag.h"

#include "vmm/base/log.h"

#include <linux/kvm.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

#define X86_RFLAGS_AC  (1ULL << 18)
#define X86_CR0_MP     0x2ULL
#define X86_CR0_TS     0x8ULL
#define X86_CR0_EM     0x4ULL
#define X86_CR4_OSFXSR 0x200ULL
#define FSW_ES	       0x80
#define MXCSR_RESERVED 0xFFFF0000u /* bits that must be zero (no DAZ probing) */

const char *const vcpu_fallback_names[VCPU_FALLBACK_COUNT] = {
    "int3", "clac", "stac", "fwait", "ldmxcsr", "stmxcsr", "user #UD"};

static int vcpu_inject_exception(struct vcpu *v, uint8_t nr, int has_error, uint32_t error)
{
	struct kvm_vcpu_events ev;
	if (ioctl(v->fd, KVM_GET_VCPU_EVENTS, &ev) < 0)
		return -1;
	ev.exception.injected = 1;
	ev.exception.nr = nr;
	ev.exception.has_error_code = (uint8_t)has_error;
	ev.exception.error_code = error;
	ev.flags = 0;
	return ioctl(v->fd, KVM_SET_VCPU_EVENTS, &ev) < 0 ? -1 : 0;
}

static uint64_t reg_by_number(const struct kvm_regs *r, unsigned n)
{
	const uint64_t regs[16] = {r->rax, r->rcx, r->rdx, r->rbx, r->rsp, r->rbp, r->rsi, r->rdi,
				   r->r8,  r->r9,  r->r10, r->r11, r->r12, r->r13, r->r14, r->r15};
	return regs[n & 15];
}

/* A little-endian disp32 at insn[*i], sign-extended; false past n. */
static bool take_disp32(const uint8_t *insn, unsigned n, unsigned *i, uint64_t *out)
{
	int32_t d;
	if (*i + 4 > n)
		return false;
	memcpy(&d, insn + *i, 4);
	*i += 4;
	*out = (uint64_t)(int64_t)d;
	return true;
}

int insn_decode_mem(const uint8_t *insn, unsigned n, const struct kvm_regs *r,
		    const struct kvm_sregs *s, struct insn_mem_operand *out)
{
	unsigned i = 0;
	uint8_t rex = 0;
	uint64_t seg_base = 0;
	/* Legacy prefixes, then REX (SDM vol. 2, 2.1 and 2.2.1). */
	for (; i < n; i++) {
		uint8_t b = insn[i];
		if (b == 0x64)
			seg_base = s->fs.base;
		else if (b == 0x65)
			seg_base = s->gs.base;
		else if (!(b == 0xF0 || b == 0xF2 || b == 0xF3 || b == 0x66 || b == 0x2E ||
			   b == 0x3E || b == 0x26 || b == 0x36))
			break;
	}
	if (i < n && (insn[i] & 0xF0) == 0x40)
		rex = insn[i++];
	if (i + 3 > n || insn[i] != 0x0F)
		return -1;
	out->opcode = insn[i + 1];
	i += 2; /* 0F and the opcode */
	uint8_t modrm = insn[i++], mod = modrm >> 6, rm = modrm & 7;
	if (mod == 3)
		return -1;
	out->reg = (modrm >> 3) & 7;
	uint64_t ea = 0;
	if (rm == 4) { /* SIB */
		if (i >= n)
			return -1;
		uint8_t sib = insn[i++], base = sib & 7,
			index = ((sib >> 3) & 7) | ((rex & 2) << 2);
		if (index != 4)
			ea += reg_by_number(r, index) << (sib >> 6);
		if (base == 5 && mod == 0) {
			uint64_t d;
			if (!take_disp32(insn, n, &i, &d))
				return -1;
			ea += d;
		} else {
			ea += reg_by_number(r, base | ((rex & 1) << 3));
		}
	} else if (rm == 5 && mod == 0) { /* RIP-relative: from the next instruction */
		uint64_t d;
		if (!take_disp32(insn, n, &i, &d))
			return -1;
		out->length = i;
		out->linear = seg_base + r->rip + i + d;
		return 0;
	} else {
		ea += reg_by_number(r, rm | ((rex & 1) << 3));
	}
	if (mod == 1) {
		if (i + 1 > n)
			return -1;
		ea += (uint64_t)(int64_t)(int8_t)insn[i++];
	} else if (mod == 2) {
		uint64_t d;
		if (!take_disp32(insn, n, &i, &d))
			return -1;
		ea += d;
	}
	out->length = i;
	out->linear = seg_base + ea;
	return 0;
}

/*
 * The memory operand could not be accessed with the instruction's rights:
 * what the CPU does. A page fault is the guest's to handle (CR2 = the
 * address, SDM vol. 3, 4.7; the kernel may just map the page), a
 * non-canonical address is #GP(0); memory outside guest RAM is left to
 * the crash report (-1).
 */
static int vcpu_access_fault(struct vcpu *v, const struct kvm_sregs *s, int walk, uint32_t pf,
			     uint64_t at)
{
	if (walk == PAGE_WALK_GP)
		return vcpu_inject_exception(v, 13, 1, 0);
	if (walk != PAGE_WALK_PF)
		return -1;
	struct kvm_sregs sr = *s;
	sr.cr2 = at;
	if (ioctl(v->fd, KVM_SET_SREGS, &sr) < 0)
		return -1;
	return vcpu_inject_exception(v, 14, 1, pf);
}

/* ldmxcsr / stmxcsr m32 (0F AE /2, /3): SDM vol. 2, LDMXCSR. */
static int vcpu_mxcsr_fallback(struct vcpu *v, const uint8_t *insn, unsigned n, struct kvm_regs *r,
			       const struct kvm_sregs *s)
{
	struct insn_mem_operand op;
	struct kvm_fpu fpu;
	uint32_t val, pf;
	uint64_t at;
	int walk;
	if (insn_decode_mem(insn, n, r, s, &op) || op.opcode != 0xAE ||
	    (op.reg != 2 && op.reg != 3))
		return -1;
	if ((s->cr0 & X86_CR0_EM) || !(s->cr4 & X86_CR4_OSFXSR))
		return vcpu_inject_exception(v, 6, 0, 0); /* #UD */
	if (s->cr0 & X86_CR0_TS)
		return vcpu_inject_exception(v, 7, 0, 0); /* #NM */
	if (ioctl(v->fd, KVM_GET_FPU, &fpu) < 0)
		return -1;
	if (op.reg == 2) {
		walk = vcpu_linear_access(v, s, r->rflags, op.linear, &val, 4, PAGE_WALK_READ, &pf,
					  &at);
		if (walk)
			return vcpu_access_fault(v, s, walk, pf, at);
		if (val & MXCSR_RESERVED)
			return vcpu_inject_exception(v, 13, 1, 0);
		fpu.mxcsr = val;
		if (ioctl(v->fd, KVM_SET_FPU, &fpu) < 0)
			return -1;
	} else {
		val = fpu.mxcsr;
		walk = vcpu_linear_access(v, s, r->rflags, op.linear, &val, 4, PAGE_WALK_WRITE, &pf,
					  &at);
		if (walk)
			return vcpu_access_fault(v, s, walk, pf, at);
	}
	r->rip += op.length;
	if (ioctl(v->fd, KVM_SET_REGS, r) < 0)
		return -1;
	atomic_fetch_add(
	    &v->stats.fallbacks[op.reg == 2 ? VCPU_FALLBACK_LDMXCSR : VCPU_FALLBACK_STMXCSR], 1);
	return 0;
}

/*
 * An instruction KVM could not emulate, from CPL 3: what the process sees
 * is #UD (its kernel sends it SIGILL), as on a CPU that lacks the
 * instruction; the machine goes on. Ring 0 keeps stopping the VM with the
 * report: the kernel itself cannot go on. The first few are logged.
 */
static int vcpu_user_ud(struct vcpu *v, const uint8_t *insn, unsigned n, const struct kvm_regs *r,
			const struct kvm_sregs *s)
{
	if (s->cs.dpl != 3)
		return -1;
	uint64_t seen = atomic_fetch_add(&v->stats.fallbacks[VCPU_FALLBACK_USER_UD], 1);
	if (seen < 4) {
		char bytes[3 * 15 + 1] = "";
		for (unsigned i = 0; i < n && i < 15; i++)
			snprintf(bytes + 3 * i, 4, "%02x ", insn[i]);
		log_warn(v->env->log,
			 "vCPU %u: CPL 3 instruction KVM cannot emulate at RIP 0x%llx (bytes %s): "
			 "#UD to the guest process%s",
			 v->id, (unsigned long long)r->rip, bytes,
			 seen == 3 ? " (further ones counted in --stats)" : "");
	}
	return vcpu_inject_exception(v, 6, 0, 0);
}

int vcpu_emulation_fallback(struct vcpu *v, const uint8_t *insn, unsigned n)
{
	struct kvm_regs r;
	struct kvm_sregs s;
	if (n == 0 || ioctl(v->fd, KVM_GET_REGS, &r) < 0 || ioctl(v->fd, KVM_GET_SREGS, &s) < 0)
		return -1;
	if (insn[0] == 0xCC) {
		/* int3 is a trap: #BP is delivered with RIP past the 0xCC. */
		r.rip += 1;
		if (ioctl(v->fd, KVM_SET_REGS, &r) < 0 || vcpu_inject_exception(v, 3, 0, 0))
			return -1;
		atomic_fetch_add(&v->stats.fallbacks[VCPU_FALLBACK_INT3], 1);
		return 0;
	}
	if (insn[0] == 0x9B) {
		/* fwait (SDM vol. 2, WAIT/FWAIT): #NM if CR0.MP and CR0.TS, #MF if
		 * an unmasked x87 exception is pending (FSW.ES), else nothing. */
		struct kvm_fpu fpu;
		if ((s.cr0 & X86_CR0_MP) && (s.cr0 & X86_CR0_TS))
			return vcpu_inject_exception(v, 7, 0, 0);
		if (ioctl(v->fd, KVM_GET_FPU, &fpu) == 0 && (fpu.fsw & FSW_ES))
			return vcpu_inject_exception(v, 16, 0, 0);
		r.rip += 1;
		if (ioctl(v->fd, KVM_SET_REGS, &r) < 0)
			return -1;
		atomic_fetch_add(&v->stats.fallbacks[VCPU_FALLBACK_FWAIT], 1);
		return 0;
	}
	/* clac 0F 01 CA, stac 0F 01 CB: only legal at CPL 0. */
	if (n >= 3 && insn[0] == 0x0F && insn[1] == 0x01 && (insn[2] == 0xCA || insn[2] == 0xCB) &&
	    s.cs.dpl == 0) {
		int stac = insn[2] == 0xCB;
		r.rflags = stac ? (r.rflags | X86_RFLAGS_AC) : (r.rflags & ~X86_RFLAGS_AC);
		r.rip += 3;
		if (ioctl(v->fd, KVM_SET_REGS, &r) < 0)
			return -1;
		atomic_fetch_add(
		    &v->stats.fallbacks[stac ? VCPU_FALLBACK_STAC : VCPU_FALLBACK_CLAC], 1);
		return 0;
	}
	if (s.cs.l && vcpu_mxcsr_fallback(v, insn, n, &r, &s) == 0)
		return 0;
	return vcpu_user_ud(v, insn, n, &r, &s);
}
