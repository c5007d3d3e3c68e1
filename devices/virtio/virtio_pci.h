/*
 * Modern virtio-pci transport (virtio 1.2, section 4.1): vendor
 * capabilities for the common, notify, ISR and device configuration
 * structures and the PCI-configuration-access capability; device ID
 * 0x1040 + type, revision 1; VIRTIO_F_VERSION_1 always offered. BAR0 holds
 * the virtio structures, BAR2 the MSI-X table and PBA, so they share no
 * 4 KiB page; in IRQ_MODE_INTX there is no MSI-X capability and BAR2 is
 * unimplemented (devices/pci/msix.h).
 *
 * Notifications arrive through KVM_IOEVENTFD on the notify region and are
 * served on the I/O thread that owns the queue (the machine decides which:
 * virtio_host.watch), never on a vCPU thread. Interrupts go through MSI-X
 * vectors when the guest enables MSI-X (one per queue and one for
 * configuration changes, as the driver assigns them), else INTx with the
 * ISR register (read-to-clear): every queue of the device on its one pin.
 * msix_raise() (devices/pci/msix.h) makes that choice. A device whose
 * queues another process serves (virtio.h external_queues) gets the same
 * interrupts from the backend's call eventfds (virtio_pci_call.h).
 *
 * Locks (DESIGN.md "Locks"): `lock` guards the configuration (common and
 * device config, features, status); each queue's `lock` guards that
 * queue's ring and device state, and is all a queue's hot path takes;
 * `isr_lock` keeps the ISR and the INTx level in step. Order: lock ->
 * queue locks (in index order) -> isr_lock -> MSI-X table -> PCI device
 * -> interrupt router. Status, NEEDS_RESET, the config vector and
 * config_generation are atomics, so a queue path can read them and set
 * NEEDS_RESET without the configuration lock.
 */
#ifndef DEVICES_VIRTIO_PCI_H
#define DEVICES_VIRTIO_PCI_H

#include "vmm/base/lock.h"

#include "devices/pci/msix.h"
#include "devices/pci/pci.h"
#include "devices/virtio/virtio.h"

#include <stdatomic.h>

struct log;

/* BAR0 layout. */
#define VIRTIO_PCI_COMMON_OFF  0x0000
#define VIRTIO_PCI_ISR_OFF     0x1000
#define VIRTIO_PCI_DEVICE_OFF  0x2000
#define VIRTIO_PCI_NOTIFY_OFF  0x3000
#define VIRTIO_PCI_NOTIFY_MULT 4
#define VIRTIO_PCI_BAR0_SIZE   0x4000
#define VIRTIO_PCI_MSIX_BAR    2
#define VIRTIO_MSI_NO_VECTOR   0xFFFF
/* virtio_pci_queue.last_vector: no interrupt yet, or the last went by INTx. */
#define VIRTIO_PCI_LAST_NONE 0xFFFFFFFFu
#define VIRTIO_PCI_LAST_INTX 0xFFFFFFFEu

/* Services of the machine the transport needs (tests pass fakes). */
struct virtio_host {
	/* KVM_IOEVENTFD: a `len`-byte write at `gpa` signals `fd`. */
	int (*ioeventfd)(void *ctx, uint64_t gpa, unsigned len, int fd, bool assign);
	/* The I/O thread that serves queue q calls ready(arg) when fd is
	 * readable (the queue's notify eventfd; the device's own fds for q
	 * are watched by the same thread). */
	int (*watch)(void *ctx, unsigned q, int fd, void (*ready)(void *arg), void *arg);
	/* Called on queue q's thread: run fn(arg) at the end of that loop's
	 * current pass (a pass cut short at its budget). 0 or -errno; NULL:
	 * no such loop. */
	int (*defer)(void *ctx, unsigned q, void (*fn)(void *arg), void *arg);
	void *ctx;
	struct log *log;
	/* From any thread: stop (on = false) or resume ready() calls for a
	 * watched fd; its watch stays. NULL: the fd stays watched (a wake-up
	 * that finds nothing to read then). */
	int (*watch_set)(void *ctx, unsigned q, int fd, bool on);
};

/* The watch key (`q` of watch, watch_set) of the configuration's call fd. */
#define VIRTIO_PCI_CONFIG_WATCH VIRTIO_MAX_QUEUES

/* A call eventfd of an external-queue device (virtio.h external_queues),
 * written by the backend (devices/virtio/virtio_pci_call.h). */
struct virtio_pci_call {
	int fd; /* -1: the device serves its queues itself */
	/* The vector fd is bound to as a KVM irqfd, or VIRTIO_MSI_NO_VECTOR
	 * while the VMM watches it; written under the configuration lock and
	 * the queue's. */
	_Atomic uint16_t bound;
	atomic_uint_fast64_t served, binds; /* --stats: writes the VMM read; binds */
};

struct virtio_pci_queue {
	struct vmm_lock lock; /* the queue's ring and the device's state for it */
	/* Written under the configuration lock (msix_vector and enabled also
	 * under this queue's lock, which is what the hot path holds). */
	uint16_t size, msix_vector;
	bool enabled;
	uint64_t desc, driver, device;
	bool live;	       /* queue lock: served (DRIVER_OK .. reset) */
	uint16_t used_counted; /* queue lock: used index counted in `requests` */
	int notify_fd;
	struct virtio_pci *owner;
	unsigned index;
	atomic_bool host_kick; /* the next wake-up is the device's own */
	atomic_uint_fast64_t notifies, requests, interrupts; /* --stats */
	atomic_uint last_vector; /* MSI-X vector of its last interrupt, or LAST_* */
	struct virtio_pci_call call;
};

struct virtio_pci {
	struct pci_device pci;
	struct msix msix;
	struct virtio_transport transport;
	struct virtio_dev *dev;
	struct virtio_host host;
	const struct guest_mem *mem;
	struct vmm_lock lock; /* configuration; taken once at each entry point */
	unsigned nq;	      /* the device's queues */
	uint64_t device_features;
	uint32_t device_feature_select, driver_feature_select;
	uint64_t driver_features;
	uint16_t queue_select;
	_Atomic uint16_t msix_config;
	_Atomic uint8_t status; /* without NEEDS_RESET, which is needs_reset */
	_Atomic uint8_t config_generation;
	atomic_bool needs_reset;
	atomic_uint_fast64_t yields_lost; /* budget yields with nowhere to come back */
	struct vmm_lock isr_lock;	  /* isr and the INTx level */
	uint8_t isr;
	struct virtio_pci_queue queues[VIRTIO_MAX_QUEUES];
	uint8_t cfg_cap; /* config offset of the PCI-configuration-access cap */
	bool late_setup_logged;
	unsigned reset_warnings; /* guest-triggered warnings so far (rate limit) */
	struct virtio_pci_call config_call;
	bool started; /* external queues: start was called (whole or part), stop not yet */
	atomic_uint_fast64_t notifies, interrupts, broken;
};

int virtio_pci_init(struct virtio_pci *vp, struct virtio_dev *dev, const char *name,
		    struct irq_router *irq, const struct guest_mem *mem,
		    const struct virtio_host *host, enum irq_mode mode);
void virtio_pci_destroy(struct virtio_pci *vp);

/* BAR0 access, exposed for tests. */
void virtio_pci_bar_read(void *opaque, uint64_t off, void *data, unsigned len);
void virtio_pci_bar_write(void *opaque, uint64_t off, const void *data, unsigned len);

#endif
