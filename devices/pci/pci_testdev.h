/*
 * A PCI test device (in the spirit of QEMU's pci-testdev and edu): a
 * doorbell that raises MSI-X vector N, or asserts INTx while MSI-X is off
 * (always in IRQ_MODE_INTX), so tests and the latency benchmark can drive
 * interrupts without virtio.
 *
 * Vendor 0x1234, device 0x7E57, class 0xFF0000, INTA#.
 * BAR0 (4 KiB MMIO), 32-bit registers:
 *   0x00 MAGIC         RO  0x56454454 ("TDEV")
 *   0x04 NVECTORS      RO  the MSI-X table size; 0 in IRQ_MODE_INTX
 *   0x08 DOORBELL      WO  N: MSI-X vector N, or INTx (INTX_PENDING++)
 *   0x0C INTX_PENDING  RO  INTx doorbells not yet acknowledged
 *   0x10 INTX_ACK      WO  INTX_PENDING = 0: the INTx condition ends
 *   0x14 DOORBELLS     RO  doorbell writes so far
 * BAR1 (MMIO): the MSI-X table at 0 and the PBA on the next free page;
 * unimplemented in IRQ_MODE_INTX (devices/pci/msix.h).
 */
#ifndef DEVICES_PCI_TESTDEV_H
#define DEVICES_PCI_TESTDEV_H

#include "vmm/base/lock.h"

#include "devices/pci/msix.h"
#include "devices/pci/pci.h"

#include <stdatomic.h>

#define TESTDEV_VENDOR	 0x1234
#define TESTDEV_DEVICE	 0x7E57
#define TESTDEV_MAGIC	 0x56454454u
#define TESTDEV_MSIX_BAR 1
enum {
	TESTDEV_REG_MAGIC = 0x00,
	TESTDEV_REG_NVECTORS = 0x04,
	TESTDEV_REG_DOORBELL = 0x08,
	TESTDEV_REG_INTX_PENDING = 0x0C,
	TESTDEV_REG_INTX_ACK = 0x10,
	TESTDEV_REG_DOORBELLS = 0x14,
};

struct pci_testdev {
	struct pci_device pci;
	struct msix msix;
	struct vmm_lock lock;
	uint32_t intx_pending;
	atomic_uint_fast32_t doorbells;
	atomic_uint_fast64_t bad_vectors;
};

/* `nvectors` (1..2048) MSI-X vectors, or INTx only (msix_init). */
int pci_testdev_init(struct pci_testdev *t, const char *name, struct irq_router *irq,
		     unsigned nvectors, enum irq_mode mode);
void pci_testdev_destroy(struct pci_testdev *t);

#endif
