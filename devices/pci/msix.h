/*
 * A PCI function's interrupts (PCI Local Bus 3.0, 6.8.2 and 6.2.4): MSI-X
 * (the capability, and the table and PBA in a BAR of their own, on 4 KiB
 * pages of their own) with INTx while the guest keeps MSI-X off, or INTx
 * only. The mode is decided here, once for every kind of function: a
 * device owns a `struct msix`, calls msix_init() and msix_raise(), and
 * forwards its config writes. MSI-X knows nothing of virtio.
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

/* Every PCI function's interrupt mode (--irq-mode). IRQ_MODE_MSIX: MSI-X,
 * and INTx while the guest keeps MSI-X disabled. IRQ_MODE_INTX: INTx only;
 * the function has no MSI-X capability, no MSI-X BAR and no vectors in the
 * router, as QEMU's vectors=0 (which never calls msix_init). */
enum irq_mode { IRQ_MODE_MSIX, IRQ_MODE_INTX };

struct msix {
	struct pci_device *dev;
	struct irq_router *irq;
	unsigned nvectors; /* 0 in IRQ_MODE_INTX */
	uint8_t cap;	   /* config offset of the capability; 0 in IRQ_MODE_INTX */
	uint8_t bar;
	uint32_t table_offset, pba_offset;
	struct vmm_lock lock; /* the table */
	uint32_t *table;      /* nvectors * 4 dwords */
	struct irq_msi_vector **vectors;
	bool enabled, function_masked;
	/* Told after a guest access changed what a vector does (msix_listen). */
	void (*changed)(void *opaque, unsigned n);
	void *changed_opaque;
};

/* changed(opaque, n) for every vector a guest access touched. */
#define MSIX_ALL_VECTORS 0xFFFFFFFFu

/* Bytes of BAR space the table and PBA need, page-aligned each. */
uint64_t msix_bar_bytes(unsigned nvectors);
/* Where the PBA goes when the table starts at 0: the next free page. */
static inline uint32_t msix_pba_offset(unsigned nvectors)
{
	return (uint32_t)align_up((uint64_t)nvectors * PCI_MSIX_ENTRY_SIZE, 4096);
}
/*
 * Sets up function d's interrupts; call it after d's other capabilities, so
 * MSI-X is the last in the list. IRQ_MODE_MSIX: `nvectors` (1..2048)
 * vectors in the router, a 32-bit memory BAR `bar` with the table at 0
 * and the PBA on the next free page, and the MSI-X capability. In
 * IRQ_MODE_INTX none of them: BAR `bar` stays unimplemented (it reads 0
 * and sizes to 0) and nvectors is 0. 0 or -errno.
 */
int msix_init(struct msix *m, struct pci_device *d, struct irq_router *irq, enum irq_mode mode,
	      unsigned nvectors, uint8_t bar);
void msix_destroy(struct msix *m);
/* The device's config_written hook calls this. */
void msix_config_written(struct msix *m, unsigned off, unsigned len);

/*
 * `changed(opaque, n)` after each guest access that may change what vector
 * n does (its entry written: address, data, mask) or, with
 * MSIX_ALL_VECTORS, every vector (MSI-X enable or the function mask). It
 * runs on the accessing vCPU's thread with no lock held, after the door
 * has the new state and has sent what unmasking made due, and before the
 * access returns to the guest: so a device that bound an fd to a vector
 * (msix_bind_fd) unbinds it before the guest can see the masking write
 * complete.
 */
void msix_listen(struct msix *m, void (*changed)(void *opaque, unsigned n), void *opaque);
/* irq_msi_bind_fd/unbind_fd of vector n (irq/irq.h): a write of `fd` is
 * vector n's message, sent by KVM alone. -EAGAIN when that cannot be now
 * (MSI-X off, n beyond the table, masked, no route, KVM_SIGNAL_MSI
 * delivery): the device then watches fd and calls msix_raise(). */
int msix_bind_fd(struct msix *m, unsigned n, int fd);
int msix_unbind_fd(struct msix *m, unsigned n, int fd);
/* Whether msix_bind_fd(m, n, ...) would bind now. */
bool msix_fd_bindable(struct msix *m, unsigned n);

/* How msix_raise() sent an interrupt. */
enum msix_sent {
	MSIX_SENT_VECTOR, /* the vector's message (or its pending bit) */
	MSIX_SENT_NONE,	  /* MSI-X on, the vector beyond the table: dropped */
	MSIX_SENT_INTX,	  /* MSI-X off, or IRQ_MODE_INTX: the INTx pin */
};
/*
 * Raises the function's interrupt, the one MSI-X-or-INTx decision: vector
 * `n` while the guest has MSI-X enabled (6.8.2: the function may not use
 * INTx then, so a vector beyond the table, such as virtio's NO_VECTOR,
 * sends nothing), else INTx: under `lock` (when not NULL), `latch(arg)`
 * (when not NULL) records the device's side of the condition (an ISR bit,
 * a pending count) and the pin is asserted, so a read of that state
 * between the two cannot lower a line whose cause it never saw.
 */
enum msix_sent msix_raise(struct msix *m, unsigned n, struct vmm_lock *lock,
			  void (*latch)(void *arg), void *arg);

#endif
