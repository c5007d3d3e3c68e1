/*
 * Fallbacks for instructions the emulating host (nested page-table KVM,
 * notes/kvm-host.md) cannot run in guest ring 0. Each does what the Intel
 * SDM says the instruction does, is counted per vCPU, and is reported.
 */
#ifndef VMM_VCPU_FALLBACK_H
#define VMM_VCPU_FALLBACK_H

#include <stdint.h>

struct vcpu;

/* 0 when the instruction at RIP (bytes `insn`) was carried out. */
int vcpu_emulation_fallback(struct vcpu *v, const uint8_t *insn, unsigned n);

/* Effective address of a ModRM memory operand in 64-bit mode. */
struct insn_mem_operand {
	uint64_t linear;
	unsigned length; /* of the whole instruction */
	uint8_t opcode;	 /* the byte after 0F */
	uint8_t reg;	 /* ModRM.reg (the /digit) */
};
struct kvm_regs;
struct kvm_sregs;
/* Decodes prefixes + 0F xx + ModRM/SIB/disp; -1 if not a memory operand. */
int insn_decode_mem(const uint8_t *insn, unsigned n, const struct kvm_regs *r,
		    const struct kvm_sregs *s, struct insn_mem_operand *out);

#endif
