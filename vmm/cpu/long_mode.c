#include "vmm/cpu/long_mode.h"

#include <linux/kvm.h>
#include <string.h>

#define CR0_PE	 (1u << 0)
#define CR0_MP	 (1u << 1)
#define CR0_ET	 (1u << 4)
#define CR0_NE	 (1u << 5)
#define CR0_WP	 (1u << 16)
#define CR0_AM	 (1u << 18)
#define CR0_PG	 (1u << 31)
#define CR4_PAE	 (1u << 5)
#define EFER_LME (1u << 8)
#define EFER_LMA (1u << 10)

/* SDM vol. 3, 3.4.5: type 0xB = execute/read, accessed; 0x3 = read/write,
 * accessed; 0xB with S = 0 = a busy 64-bit TSS. */
static struct kvm_segment long_mode_segment(uint16_t selector, uint8_t type, uint32_t limit)
{
	return (struct kvm_segment){
	    .base = 0, .limit = limit, .selector = selector, .type = type, .present = 1, .g = 1};
}

void long_mode_sregs(struct kvm_sregs *s, const struct long_mode_entry *lm)
{
	struct kvm_segment code = long_mode_segment(lm->code_sel, 0xB, 0xFFFFFFFF);
	struct kvm_segment data = long_mode_segment(lm->data_sel, 0x3, 0xFFFFFFFF);
	code.s = data.s = 1;
	code.l = 1; /* 64-bit code: L set, D clear */
	data.db = 1;
	s->cs = code;
	s->ds = s->es = s->fs = s->gs = s->ss = data;
	if (lm->tss_sel) {
		s->tr = long_mode_segment(lm->tss_sel, 0xB, 0x67);
		s->tr.g = 0;
	}
	s->gdt.base = lm->gdt;
	s->gdt.limit = lm->gdt_limit;
	s->idt.base = lm->idt;
	s->idt.limit = lm->idt_limit;
	s->cr0 = CR0_PG | CR0_AM | CR0_WP | CR0_NE | CR0_ET | CR0_MP | CR0_PE;
	s->cr3 = lm->cr3;
	s->cr4 = CR4_PAE;
	s->efer = EFER_LME | EFER_LMA;
}

void long_mode_regs(struct kvm_regs *r, const struct long_mode_entry *lm)
{
	memset(r, 0, sizeof(*r));
	r->rip = lm->rip;
	r->rsp = lm->rsp;
	r->rflags = 0x2; /* interrupts off */
}
