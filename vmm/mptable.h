/*
 * MP configuration table (Intel MultiProcessor Specification 1.4, chapter 4)
 * in the F segment: processors, the PCI bus (MP bus ID 0) and the ISA bus
 * (ID 1), the IOAPIC, ISA interrupt sources (IRQ n -> IOAPIC pin n, IRQ 0
 * included, since KVM's PIT drives GSI 0), PCI INTx entries, LINT0/1.
 */
#ifndef VMM_MPTABLE_H
#define VMM_MPTABLE_H

#include <stddef.h>
#include <stdint.h>

struct err;
struct guest_mem;

#define MP_BUS_PCI 0
#define MP_BUS_ISA 1

struct mp_pci_irq {
	uint8_t slot;	    /* PCI device number */
	uint8_t intx;	    /* 1 = INTA# .. 4 = INTD# */
	uint8_t ioapic_pin; /* 16..23 */
};

struct mp_config {
	unsigned ncpus;
	uint32_t cpu_signature; /* CPUID.1:EAX */
	uint32_t cpu_features;	/* CPUID.1:EDX */
	const struct mp_pci_irq *pci_irqs;
	size_t npci_irqs;
};

/* Builds the table at LAYOUT_MPTABLE; returns its size, or -1. */
int mptable_write(struct guest_mem *m, const struct mp_config *c, struct err *e);
/* The IOAPIC's ID (after the processors' APIC IDs): the IOAPIC's own ID
 * register holds 4 bits, and the MP table must name the same ID (4.3.3). */
static inline uint8_t mptable_ioapic_id_for(unsigned ncpus)
{
	return (uint8_t)(ncpus < 15 ? ncpus : 15);
}
static inline uint8_t mptable_ioapic_id(const struct mp_config *c)
{
	return mptable_ioapic_id_for(c->ncpus);
}

#endif
