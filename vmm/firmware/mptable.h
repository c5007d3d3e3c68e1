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

#include "vmm/firmware/machine_desc.h"

struct err;
struct guest_mem;

#define MP_BUS_PCI 0
#define MP_BUS_ISA 1

/* Builds the table at LAYOUT_MPTABLE; returns its size, or -1. */
int mptable_write(struct guest_mem *m, const struct machine_desc *c, struct err *e);

#endif
