/*
 * What the guest is told about the machine, in one place: the MP table
 * (vmm/firmware/mptable.c) and the ACPI tables (vmm/firmware/acpi.c) are both written from
 * one struct machine_desc that vmm/machine/build.c fills once, so the two descriptions
 * cannot disagree about CPUs, the IOAPIC or a PCI slot's interrupt pin.
 * (The device tree, vmm/firmware/fdt.c, reads the same PCI bus and CPU count.)
 */
#ifndef VMM_MACHINE_DESC_H
#define VMM_MACHINE_DESC_H

#include <stddef.h>
#include <stdint.h>

/* A PCI slot's INTx pin and the IOAPIC input it is wired to. */
struct machine_pci_irq {
	uint8_t slot;	    /* PCI device number */
	uint8_t intx;	    /* 1 = INTA# .. 4 = INTD# */
	uint8_t ioapic_pin; /* 16..23 */
};

struct machine_desc {
	unsigned ncpus;		/* APIC IDs 0..ncpus-1, ACPI processor UIDs the same */
	uint32_t cpu_signature; /* CPUID.1:EAX */
	uint32_t cpu_features;	/* CPUID.1:EDX */
	const struct machine_pci_irq *pci_irqs;
	size_t npci_irqs;
};

/* The IOAPIC's ID, after the processors' APIC IDs 0..ncpus-1, so no CPU
 * has it (MP spec 1.4, 4.3.3: APIC IDs are unique), the same in the MP
 * table and the MADT (ACPI 6.5, 5.2.12.3); at most 254 vCPUs, so never
 * 0xFF. The IOAPIC's own ID register holds 4 bits (82093AA): from 16 vCPUs
 * on it shows the low bits; an x86-64 Linux takes the tables' ID, unique
 * among IOAPICs (mp_register_ioapic), as QEMU's and Firecracker's tables
 * have it too. Before, the ID stopped at 15, CPU 15's APIC ID. */
static inline uint8_t machine_ioapic_id_for(unsigned ncpus)
{
	return (uint8_t)(ncpus < 0xFF ? ncpus : 0xFE);
}
static inline uint8_t machine_ioapic_id(const struct machine_desc *c)
{
	return machine_ioapic_id_for(c->ncpus);
}

/* The machine's legacy devices, as both tables describe them. */
#define MACHINE_COM1_PORT 0x3F8
#define MACHINE_COM1_IRQ  4

#endif
