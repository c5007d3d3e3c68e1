/*
 * MSI-X for any PCI device (PCI Local Bus 3.0, section 6.8.2): the
 * capability, the table and the PBA in one of the device's BARs, on 4 KiB
 * pages of their own. MSI-X knows nothing of virtio: a device owns a
 * `struct msix` and forwards its BAR accesses and config writes here.
 *
 * Mask and pending state are kept by the interrupt door (irq/), one lock
 * for vCPU and I/O threads; this file turns table, function-mask and
 * enable changes into route updates, one batch per guest access.
 */
#ifndef DEVICES_MSIX_H
#define DEVICES_MSIX_H

#include "vmm/base/lock.h"

#include "vmm/base/align.h"

#include <linux/pci_regs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct pci_device;
struct irq_router;
struct irq_msi_vector;

#define MSIX_MAX_VECTORS 2048

struct msix {
	struct pci_device *dev;
	struct irq_router *irq;
	unsigned nvectors;
	uint8_t cap; /* config offset of the capability; 0 = hidden */
	uint8_t bar;
	uint32_t table_offset, pba_offset;
	struct vmm_lock lock; /* the table */
	uint32_t *table;      /* nvectors * 4 dwords */
	struct irq_msi_vector **vectors;
	bool enabled, function_masked;
};

/* Bytes of BAR space the table and PBA need, page-aligned each. */
uint64_t msix_bar_bytes(unsigned nvectors);
/* Where the PBA goes when the table starts at 0: the next free page. */
static inline uint32_t msix_pba_offset(unsigned nvectors)
{
	return (uint32_t)align_up((uint64_t)nvectors * PCI_MSIX_ENTRY_SIZE, 4096);
}
/*
 * Sets up `nvectors` vectors with the table at `table_offset` and the PBA
 * at `pba_offset` of BAR `bar`. With `hidden`, no capability is added (the
 * device then only ever uses INTx: --irq-mode intx). 0 or -errno.
 */
int msix_init(struct msix *m, struct pci_device *d, struct irq_router *irq, unsigned nvectors,
	      uint8_t bar, uint32_t table_offset, uint32_t pba_offset, bool hidden);
void msix_destroy(struct msix *m);
/* BAR accesses: true when [off, off+len) is in the table or PBA (then it
 * was handled, or ignored as the spec allows). */
bool msix_bar_read(struct msix *m, uint8_t bar, uint64_t off, void *data, unsigned len);
bool msix_bar_write(struct msix *m, uint8_t bar, uint64_t off, const void *data, unsigned len);
/* The device's config_written hook calls this. */
void msix_config_written(struct msix *m, unsigned off, unsigned len);
bool msix_enabled(struct msix *m);
/* Raises vector `n`. False when MSI-X is off: the caller uses INTx.
 * A vector beyond the table is dropped (true: nothing to fall back to). */
bool msix_fire(struct msix *m, unsigned n);

#endif
