/*
 * ACPI tables of the machine (ACPI 6.5, chapter 5), written from the same
 * struct machine_desc as the MP table (vmm/firmware/machine_desc.h):
 *   RSDP (5.2.5) in the BIOS area, where Linux scans (and the boot
 *        protocol's acpi_rsdp_addr / PVH's rsdp_paddr point);
 *   XSDT (5.2.8) listing the FADT and the MADT;
 *   FADT (5.2.9), hardware-reduced (HW_REDUCED_ACPI): no PM timer, no
 *        SCI, no FACS; the sleep control register S5 powers the machine
 *        off (devices/legacy/acpi_pm.h), the reset register resets it;
 *   MADT (5.2.12): a local APIC per vCPU, the IOAPIC, ISA overrides as
 *        the MP table has them (identity, IRQ 9 for the SCI), LINT1 NMI;
 *   DSDT (5.2.11.1), AML from vmm/firmware/aml.c: the PCI root bridge PNP0A03
 *        (_CRS: bus 0, the legacy and PCI I/O ranges, the BAR window;
 *        _PRT: each slot's INTx pin to the IOAPIC input the MP table
 *        gives it), COM1 (PNP0501), a processor device (ACPI0007) per
 *        vCPU, and \_S5.
 */
#ifndef VMM_ACPI_H
#define VMM_ACPI_H

#include "vmm/firmware/machine_desc.h"

#include <stddef.h>
#include <stdint.h>

struct err;
struct guest_mem;

/* The tables, built in a buffer for the guest address `base`. */
struct acpi_tables {
	uint8_t buf[0x10000];
	size_t len;
	uint64_t base;
	uint64_t rsdp; /* guest-physical address of the RSDP (= base) */
	/* Each table's offset and length in buf, for --dump-acpi and tests. */
	struct acpi_table_at {
		char sig[5];
		size_t off, len;
	} tables[5];
	unsigned ntables;
};

int acpi_build(const struct machine_desc *m, uint64_t base, struct acpi_tables *t, struct err *e);
/* Writes the built tables into guest RAM at t->base. */
int acpi_write(struct guest_mem *mem, const struct acpi_tables *t, struct err *e);
/* The sum of a table's bytes (0 for a correct table, 5.2.6). */
uint8_t acpi_sum(const uint8_t *p, size_t len);

#endif
