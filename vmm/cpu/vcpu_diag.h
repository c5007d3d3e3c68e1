/* What happened to a vCPU, said plainly: register dump, instruction bytes. */
#ifndef VMM_VCPU_DIAG_H
#define VMM_VCPU_DIAG_H

#include "vmm/cpu/page_walk.h"

#include <stdint.h>

struct vcpu;
struct kvm_sregs;

/* Logs RIP, CS, CPL, RSP, RFLAGS, CR0/2/3/4, EFER and the instruction bytes
 * (read from guest memory when `insn` is NULL), plus the host kind. */
void vcpu_dump_state(struct vcpu *v, const char *what, const uint8_t *insn, unsigned insn_len);
/* One line (warning level): where a stopped vCPU is (RIP, CPL, mode,
 * instruction bytes, whether it never ran). */
void vcpu_dump_where(struct vcpu *v);
/* Reads `len` bytes at linear address `rip` through the guest page tables. */
int vcpu_fetch_insn(struct vcpu *v, uint64_t rip, uint8_t *buf, unsigned len);

/* Reads or writes guest memory at a linear address as an access of the
 * vCPU's CPL would (vmm/cpu/page_walk.h): 0, or a page_walk_result with the
 * #PF error code and the faulting address. Fails closed on non-RAM. */
int vcpu_linear_access(struct vcpu *v, const struct kvm_sregs *s, uint64_t rflags, uint64_t lin,
		       void *buf, unsigned len, enum page_access access, uint32_t *pf_error,
		       uint64_t *fault_lin);
/* The instruction's CPUID feature and the clearcpuid= bit that avoids it,
 * written into buf (vmm/cpu/insn_hint.h), or NULL when there is none. */
const char *vcpu_insn_hint(const uint8_t *insn, unsigned n, char *buf, unsigned len);

#endif
