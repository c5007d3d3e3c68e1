/*
 * MSI-X for kit guests (PCI Local Bus 3.0, 6.8.2): finding the capability,
 * locating the table and PBA through their BARs, and enabling it in the
 * order a kernel does (Linux msix_capability_init): MSI-X Enable with the
 * Function Mask set, entries programmed while masked, entries unmasked,
 * Function Mask cleared. Generalised from pcitest's msix.c, which keeps
 * its testdev-specific checks (and its own enable sequence, which checks
 * each step) on top of these accessors.
 *
 * Config space through guest/pci.h (conf1 port I/O) and the table by MMIO,
 * so it all works at CPL 3 under run_user().
 */
#ifndef GUEST_MSIX_H
#define GUEST_MSIX_H

#include <stdbool.h>
#include <stdint.h>

struct msix_info {
	uint8_t slot;  /* bus 0, function 0 */
	uint8_t cap;   /* capability offset, 0 if none */
	uint16_t nvec; /* table size (6.8.2.3: field + 1) */
	uint8_t table_bir, pba_bir;
	uint32_t table_off, pba_off;
	uint64_t table, pba; /* MMIO addresses */
};

/* Finds the MSI-X capability of 00:slot.0 and, with the BAR addresses in
 * bar[0..5] (64-bit BARs: the address in the low slot), the table and PBA.
 * Returns false with *why set if there is none or it points nowhere. */
bool msix_probe(unsigned slot, const uint64_t bar[6], struct msix_info *m, const char **why);

uint16_t msix_ctrl_read(const struct msix_info *m);
void msix_ctrl_write(const struct msix_info *m, uint16_t v);
/* Entry i: address (physical destination apic_id, guest/apic.h
 * msi_address), data = vector (fixed, edge), mask bit. */
void msix_entry_write(const struct msix_info *m, unsigned i, uint8_t apic_id, uint8_t vector,
		      bool masked);
void msix_entry_mask(const struct msix_info *m, unsigned i, bool masked);
/* Whether entry i reads back as msix_entry_write(i, apic_id, vector, masked) left it. */
bool msix_entry_is(const struct msix_info *m, unsigned i, uint8_t apic_id, uint8_t vector,
		   bool masked);
bool msix_pending(const struct msix_info *m, unsigned i); /* 6.8.2.10: PBA bit */

/* Enables MSI-X with entries 0..n-1 on vectors[0..n-1], kernel order (see
 * above), and leaves entries n.. masked. Returns false with *why set if
 * the control register or an entry does not read back as written. */
bool msix_enable(const struct msix_info *m, uint8_t apic_id, const uint8_t *vectors, unsigned n,
		 const char **why);
/* MSI-X Enable off (the function goes back to INTx, 6.8.2.3). */
void msix_disable(const struct msix_info *m);

#endif
