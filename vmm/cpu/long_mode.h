/*
 * A vCPU's state at a 64-bit entry (Intel SDM vol. 3, 10.8.5
 * "Initializing IA-32e Mode"): paging on over identity page tables at
 * `cr3` (CR0.PG with PE, CR4.PAE, EFER.LME|LMA), flat 64-bit code and data
 * segments from the caller's GDT, interrupts off. The boot vCPU of ./vmm
 * (vcpu_set_boot_state, the 64-bit protocol of boot.rst) and the raw-KVM
 * floor benchmark (tests/bench/kvm_floor.c) both enter their guests so.
 * Pure functions over <linux/kvm.h>'s structs, with nothing else of the
 * VMM: the benchmark builds this one file; the caller makes the ioctls.
 */
#ifndef VMM_LONG_MODE_H
#define VMM_LONG_MODE_H

#include <stdint.h>

struct kvm_regs;
struct kvm_sregs;

/* Where the guest's tables are (guest-physical) and where it starts. */
struct long_mode_entry {
	uint64_t rip, rsp;
	uint64_t cr3; /* the PML4 */
	uint64_t gdt, idt;
	uint16_t gdt_limit, idt_limit;
	uint16_t code_sel, data_sel; /* the GDT's 64-bit code and flat data descriptors */
	uint16_t tss_sel;	     /* a 64-bit TSS at 0 (limit 0x67); 0: TR left as it is */
};

/* Sets the segments, descriptor tables and control registers of `s` (as
 * KVM_GET_SREGS gave it: the rest is kept). */
void long_mode_sregs(struct kvm_sregs *s, const struct long_mode_entry *lm);
/* Zeroes `r`, then RIP, RSP and RFLAGS (reserved bit 1 only). */
void long_mode_regs(struct kvm_regs *r, const struct long_mode_entry *lm);

#endif
