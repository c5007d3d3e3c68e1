/*
 * Bus-0 enumeration and INTx routing for kit guests: the probe a kernel
 * does through configuration mechanism #1 (PCI Local Bus 3.0, 3.2.2.3.2,
 * 6.1, 6.2.5.1 BAR sizing) and the PCI I/O interrupt entries of the MP
 * table (Intel MP spec 1.4, 4.3.2 - 4.3.4). Generalised from pcitest's
 * enum.c, which now checks what these return. Port I/O and memory reads
 * only: runs at CPL 3 under run_user().
 */
#ifndef GUEST_PCIENUM_H
#define GUEST_PCIENUM_H

#include "guest/mptable.h"
#include "guest/pci.h"

struct pci_func {
	uint8_t slot; /* bus 0, function 0 */
	uint16_t vendor, device;
	uint32_t class_rev; /* class code in 31:8, revision in 7:0 */
	uint8_t header_type;
	uint16_t command;		   /* as found, before the BARs were sized */
	uint16_t subsys_vendor, subsys_id; /* 0x2C, 0x2E */
	uint64_t bar[PCI_NUM_BARS];	   /* memory address (I/O: port), 0 if none */
	uint64_t bar_size[PCI_NUM_BARS];
	uint32_t bar_orig[PCI_NUM_BARS]; /* the registers as found, before sizing */
	uint32_t bar_raw[PCI_NUM_BARS];	 /* the sizing read-back */
	uint8_t irq_line, irq_pin;	 /* 0x3C, 0x3D */
};

/* Function 0 of every slot on bus 0 whose vendor is not 0xffff (6.2.1),
 * in slot order, BARs sized (decoding off while sizing, 6.2.5.1, then
 * restored). Returns how many were found (up to max are stored). */
unsigned pci_enum_bus0(struct pci_func *out, unsigned max);
/* Sizes the six BAR slots of f (pci_enum_bus0 does this for type-0 headers
 * only) and fills bar, bar_size, bar_orig and bar_raw; a 64-bit memory BAR
 * gives its high slot bar 0, size 0. */
void pci_func_size_bars(struct pci_func *f);

/* What the MP table says about interrupt routing. */
#define MP_ROUTING_MAX_PCI 64
struct mp_routing {
	bool ok;		  /* a valid table, a PCI bus entry and an IOAPIC */
	const char *why;	  /* when !ok */
	bool table_found;	  /* mp_config_table() accepted the table */
	bool malformed;		  /* an entry with a bad type or running past the table */
	unsigned malformed_index; /* ... that entry's index and offset */
	size_t malformed_off;
	bool pci_bus_found; /* a bus entry of type "PCI" */
	uint8_t pci_bus;
	unsigned nioapics;
	uint8_t ioapic_id;
	uint64_t ioapic; /* the first IOAPIC's address */
	unsigned npci;	 /* I/O interrupt entries whose source bus is pci_bus */
	struct mp_intsrc pci[MP_ROUTING_MAX_PCI];
};

void mp_routing_load(struct mp_routing *r);
/* The entry for 00:slot INTx pin `intpin` (1 = INTA#, as in config 0x3D):
 * source bus IRQ = slot << 2 | (intpin - 1) (4.3.4). *matches counts all
 * entries that match; the first is returned, NULL if none. */
const struct mp_intsrc *mp_routing_pci_intx(const struct mp_routing *r, unsigned slot,
					    unsigned intpin, unsigned *matches);

#endif
