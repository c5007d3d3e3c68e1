/*
 * A minimal virtio driver core for kit guests: the modern virtio-pci
 * transport (virtio 1.2, section 4.1) and split virtqueues, driver side
 * (section 2.7). Device-independent; the device types' request formats
 * are the guest's business (chapter 5).
 *
 * Everything is config-space port I/O, MMIO and plain memory, so it runs
 * at CPL 3 under run_user(). Rings and buffers come from guest/ram.h.
 * Little-endian throughout (2.4: modern devices are little-endian, as is
 * x86).
 */
#ifndef GUEST_VIRTIO_H
#define GUEST_VIRTIO_H

#include <stdbool.h>
#include <stdint.h>

/* 4.1.2: PCI IDs. A modern (non-transitional) device is 0x1040 + its
 * virtio device ID (5, "Device Types") and has revision ID 1 or more. */
#define VIRTIO_PCI_VENDOR	 0x1AF4
#define VIRTIO_PCI_MODERN_DEVICE 0x1040
enum {
	VIRTIO_ID_NET = 1,
	VIRTIO_ID_BLOCK = 2,
	VIRTIO_ID_CONSOLE = 3,
	VIRTIO_ID_RNG = 4,
	VIRTIO_ID_FS = 26
};

/* 2.1: device status bits. */
#define VIRTIO_STATUS_ACKNOWLEDGE 0x01
#define VIRTIO_STATUS_DRIVER	  0x02
#define VIRTIO_STATUS_DRIVER_OK	  0x04
#define VIRTIO_STATUS_FEATURES_OK 0x08
#define VIRTIO_STATUS_NEEDS_RESET 0x40
#define VIRTIO_STATUS_FAILED	  0x80

/* 6: reserved feature bits. */
#define VIRTIO_F_INDIRECT_DESC 28
#define VIRTIO_F_EVENT_IDX     29
#define VIRTIO_F_VERSION_1     32
#define VIRTIO_F_BIT(b)	       (1ull << (b))

/* 4.1.4: vendor-specific capability (ID 0x09) layout and cfg_type. */
#define PCI_CAP_ID_VNDR		  0x09
#define VIRTIO_PCI_CAP_COMMON_CFG 1
#define VIRTIO_PCI_CAP_NOTIFY_CFG 2
#define VIRTIO_PCI_CAP_ISR_CFG	  3
#define VIRTIO_PCI_CAP_DEVICE_CFG 4
#define VIRTIO_PCI_CAP_PCI_CFG	  5
#define VIRTIO_CAP_LEN		  2 /* cap_len */
#define VIRTIO_CAP_CFG_TYPE	  3
#define VIRTIO_CAP_BAR		  4
#define VIRTIO_CAP_OFFSET	  8
#define VIRTIO_CAP_LENGTH	  12
#define VIRTIO_CAP_NOTIFY_MULT	  16 /* 4.1.4.4: notify_off_multiplier */
#define VIRTIO_CAP_PCI_CFG_DATA	  16 /* 4.1.4.9: pci_cfg_data */

/* 4.1.4.3: struct virtio_pci_common_cfg. */
#define VIRTIO_CC_DFSELECT     0x00
#define VIRTIO_CC_DF	       0x04
#define VIRTIO_CC_GFSELECT     0x08
#define VIRTIO_CC_GF	       0x0C
#define VIRTIO_CC_MSIX_CONFIG  0x10
#define VIRTIO_CC_NUM_QUEUES   0x12
#define VIRTIO_CC_STATUS       0x14
#define VIRTIO_CC_CFG_GEN      0x15
#define VIRTIO_CC_Q_SELECT     0x16
#define VIRTIO_CC_Q_SIZE       0x18
#define VIRTIO_CC_Q_MSIX       0x1A
#define VIRTIO_CC_Q_ENABLE     0x1C
#define VIRTIO_CC_Q_NOTIFY_OFF 0x1E
#define VIRTIO_CC_Q_DESC       0x20
#define VIRTIO_CC_Q_DRIVER     0x28
#define VIRTIO_CC_Q_DEVICE     0x30
#define VIRTIO_CC_SIZE	       0x38
#define VIRTIO_MSI_NO_VECTOR   0xFFFF

/* 4.1.4.5: ISR status bits. */
#define VIRTIO_ISR_QUEUE  0x1
#define VIRTIO_ISR_CONFIG 0x2

/* One of the structures a capability points at. */
struct virtio_region {
	bool present;
	uint8_t cap; /* config-space offset of the capability */
	uint8_t bar;
	uint32_t offset, length;
	uint64_t addr; /* BAR address + offset */
};

struct virtio_pci_dev {
	uint8_t slot;
	uint16_t type; /* device ID - 0x1040 */
	uint64_t bar[6];
	struct virtio_region common, notify, isr, device;
	uint8_t pci_cfg_cap; /* offset of the PCI-configuration-access cap, 0 if none */
	uint32_t notify_mult;
	unsigned nvendor_caps;
	/* Capabilities of the four kinds above that name a missing BAR. */
	unsigned bad_bar_caps;
};

/* 4.1.4: walks the vendor capabilities of 00:slot.0 and takes the first of
 * each cfg_type the driver can use (4.1.4.1: "the driver SHOULD use the
 * first instance"). bar/bar_size from the enumeration. false with *why if
 * a common, notify, ISR or device structure is missing or lies outside
 * its BAR. */
bool virtio_pci_parse(unsigned slot, uint16_t type, const uint64_t bar[6],
		      const uint64_t bar_size[6], struct virtio_pci_dev *d, const char **why);

/* Common configuration registers, with their architected widths. */
uint8_t virtio_cc_read8(const struct virtio_pci_dev *d, unsigned off);
uint16_t virtio_cc_read16(const struct virtio_pci_dev *d, unsigned off);
uint32_t virtio_cc_read32(const struct virtio_pci_dev *d, unsigned off);
void virtio_cc_write8(const struct virtio_pci_dev *d, unsigned off, uint8_t v);
void virtio_cc_write16(const struct virtio_pci_dev *d, unsigned off, uint16_t v);
void virtio_cc_write32(const struct virtio_pci_dev *d, unsigned off, uint32_t v);
/* 64-bit fields as two 32-bit halves, low first (4.1.3.1). */
uint64_t virtio_cc_read64(const struct virtio_pci_dev *d, unsigned off);
void virtio_cc_write64(const struct virtio_pci_dev *d, unsigned off, uint64_t v);

static inline uint8_t virtio_status(const struct virtio_pci_dev *d)
{
	return virtio_cc_read8(d, VIRTIO_CC_STATUS);
}

static inline void virtio_set_status(const struct virtio_pci_dev *d, uint8_t s)
{
	virtio_cc_write8(d, VIRTIO_CC_STATUS, s);
}

/* 4.1.4.3.2: write 0 to device_status, then wait until it reads 0.
 * Returns false if it does not within `polls` reads. */
bool virtio_reset(const struct virtio_pci_dev *d, unsigned polls);
/* 4.1.4.3: device_feature / driver_feature through their select registers. */
uint64_t virtio_device_features(const struct virtio_pci_dev *d);
void virtio_set_driver_features(const struct virtio_pci_dev *d, uint64_t f);
uint64_t virtio_driver_features(const struct virtio_pci_dev *d);

/* Device-specific configuration (4.1.4.6) with the access widths 4.1.3.1
 * requires (8-bit, aligned 16-bit, aligned 32-bit; 64-bit fields as two
 * 32-bit reads), retried until config_generation is the same before and
 * after (2.5.1, 4.1.4.3.1). len 1, 2, 4 or 8. */
uint64_t virtio_config_read(const struct virtio_pci_dev *d, unsigned off, unsigned len);

/* 4.1.4.9: a `len`-byte (1, 2, 4) read of BAR `bar` at `offset` through the
 * PCI-configuration-access capability's pci_cfg_data window. */
uint32_t virtio_pci_cfg_read(const struct virtio_pci_dev *d, uint8_t bar, uint32_t offset,
			     unsigned len);

/* ---- split virtqueues (2.7) ---- */

struct virtq_desc { /* 2.7.5 */
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};
#define VIRTQ_DESC_F_NEXT  1
#define VIRTQ_DESC_F_WRITE 2

struct virtq_avail { /* 2.7.6; used_event follows ring[size] */
	uint16_t flags;
	uint16_t idx;
	uint16_t ring[];
};
#define VIRTQ_AVAIL_F_NO_INTERRUPT 1

struct virtq_used_elem { /* 2.7.8 */
	uint32_t id;
	uint32_t len;
};
struct virtq_used { /* avail_event follows ring[size] */
	uint16_t flags;
	uint16_t idx;
	struct virtq_used_elem ring[];
};
#define VIRTQ_USED_F_NO_NOTIFY 1

#define VIRTQ_GUEST_MAX 256 /* the largest queue this driver sets up */

struct virtq {
	const struct virtio_pci_dev *dev;
	uint16_t index;
	uint16_t size;	   /* as set up */
	uint16_t dev_size; /* queue_size as the device first reported it */
	uint16_t notify_off;
	uint64_t notify_addr;
	volatile struct virtq_desc *desc;
	volatile struct virtq_avail *avail;
	volatile struct virtq_used *used;
	uint16_t free_head, num_free;
	uint16_t avail_idx, last_used;
	uint16_t chain_len[VIRTQ_GUEST_MAX];
};

/* A buffer for virtq_add: device-readable ones first, then writable ones. */
struct virtq_buf {
	void *addr;
	uint32_t len;
};

/* 4.1.5.1.3: sets up queue `index` during FEATURES_OK..DRIVER_OK: reads
 * queue_size (0: no such queue), uses the largest power of two no bigger
 * than it and max_size, allocates the rings (2.7 alignment: descriptors
 * 16, driver area 2, device area 4; here page-aligned) from guest/ram.h,
 * writes their addresses and, unless msix_vector is VIRTIO_MSI_NO_VECTOR,
 * queue_msix_vector, then queue_enable = 1. *vec_readback gets
 * queue_msix_vector as read back (4.1.5.1.2: NO_VECTOR means the device
 * could not allocate the vector). false with *why on any mismatch. */
bool virtq_setup(const struct virtio_pci_dev *d, unsigned index, uint16_t max_size,
		 uint16_t msix_vector, struct virtq *vq, uint16_t *vec_readback, const char **why);

/* 2.7.13: puts a chain of nout device-readable then nin device-writable
 * buffers in the descriptor table and its head in the available ring, and
 * publishes it (avail idx). Returns the head, or -1 if there are not
 * enough free descriptors. */
int virtq_add(struct virtq *vq, const struct virtq_buf *bufs, unsigned nout, unsigned nin);
/* 2.7.13.3 / 4.1.5.2: notifies the device (a 16-bit write of the queue
 * index to its notify address) unless the device set
 * VIRTQ_USED_F_NO_NOTIFY. */
void virtq_kick(struct virtq *vq);
/* How many used entries have not been taken yet. */
uint16_t virtq_used_pending(const struct virtq *vq);
/* 2.7.14: takes the next used entry (head and len written), frees its chain. */
bool virtq_get_used(struct virtq *vq, uint16_t *head, uint32_t *len);
/* 2.7.7: VIRTQ_AVAIL_F_NO_INTERRUPT on or off. */
void virtq_set_no_interrupt(struct virtq *vq, bool on);

#endif
