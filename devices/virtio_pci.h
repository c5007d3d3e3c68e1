/*
 * Modern virtio-pci transport (virtio 1.2, section 4.1): vendor
 * capabilities for the common, notify, ISR and device configuration
 * structures and the PCI-configuration-access capability; device ID
 * 0x1040 + type, revision 1; VIRTIO_F_VERSION_1 always offered. BAR0 holds
 * the virtio structures, BAR2 the MSI-X table and PBA, so they share no
 * 4 KiB page.
 *
 * Notifications arrive through KVM_IOEVENTFD on the notify region and are
 * served on the main (I/O) thread, never on a vCPU thread. Interrupts go
 * through MSI-X vectors when the guest enables MSI-X, else INTx with the
 * ISR register (read-to-clear).
 */
#ifndef DEVICES_VIRTIO_PCI_H
#define DEVICES_VIRTIO_PCI_H

#include "msix.h"
#include "pci.h"
#include "virtio.h"

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

/* Services of the machine the transport needs (tests pass fakes). */
struct virtio_host {
	/* KVM_IOEVENTFD: a `len`-byte write at `gpa` signals `fd`. */
	int (*ioeventfd)(void *ctx, uint64_t gpa, unsigned len, int fd, bool assign);
	/* The main loop calls ready(arg) when fd is readable. */
	int (*watch)(void *ctx, int fd, void (*ready)(void *arg), void *arg);
	void *ctx;
	struct log *log;
};

struct virtio_pci_queue {
	uint16_t size, msix_vector;
	bool enabled;
	uint64_t desc, driver, device;
	int notify_fd;
	struct virtio_pci *owner;
	unsigned index;
	atomic_bool host_kick; /* the next wake-up is the device's own */
};

struct virtio_pci {
	struct pci_device pci;
	struct msix msix;
	struct virtio_transport transport;
	struct virtio_dev *dev;
	struct virtio_host host;
	const struct guest_mem *mem;
	pthread_mutex_t lock; /* taken once at each entry point (virtio.h) */
	uint64_t device_features;
	uint32_t device_feature_select, driver_feature_select;
	uint64_t driver_features;
	uint16_t msix_config, queue_select;
	uint8_t status, config_generation;
	uint8_t isr;
	struct virtio_pci_queue queues[VIRTIO_MAX_QUEUES];
	uint8_t cfg_cap; /* config offset of the PCI-configuration-access cap */
	bool late_setup_logged;
	unsigned reset_warnings; /* guest-triggered warnings so far (rate limit) */
	atomic_uint_fast64_t notifies, interrupts, broken;
};

int virtio_pci_init(struct virtio_pci *vp, struct virtio_dev *dev, const char *name,
		    struct irq_router *irq, const struct guest_mem *mem,
		    const struct virtio_host *host, bool msix_hidden);
void virtio_pci_destroy(struct virtio_pci *vp);

/* BAR0 access, exposed for tests. */
void virtio_pci_bar_read(void *opaque, uint64_t off, void *data, unsigned len);
void virtio_pci_bar_write(void *opaque, uint64_t off, const void *data, unsigned len);

#endif
