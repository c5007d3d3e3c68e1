/*
 * Which CPUID feature an instruction the emulating host's ring 0 does not
 * know belongs to, and the `clearcpuid=` bit that makes Linux avoid it
 * (Linux's X86_FEATURE_* number: word * 32 + bit, arch/x86/include/asm/
 * cpufeatures.h; words 4 = CPUID 1 ECX and 9 = CPUID 7.0 EBX have kept
 * their numbers since Linux 3.x, so the bits work on every kernel we
 * boot, where names work only from 5.19). Pure decoding, no vCPU: the
 * crash report (vmm/cpu/vcpu_diag.c) and its tests call it.
 */
#ifndef VMM_INSN_HINT_H
#define VMM_INSN_HINT_H

#include <stdint.h>

struct insn_feature {
	const char *insn;    /* "pshufb", "cmpxchg16b", ... */
	const char *feature; /* Linux's name: "ssse3", "cx16", ... */
	unsigned bit;	     /* clearcpuid= number */
};

/* The feature the instruction at insn[0..n) needs, or NULL when it is not
 * one a clearcpuid= bit can avoid (plain SSE2, an unknown opcode). */
const struct insn_feature *insn_feature_of(const uint8_t *insn, unsigned n);

#endif
