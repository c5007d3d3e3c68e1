/*
 * Virtio fixtures for the unit tests: a split ring laid out by hand in fake
 * RAM the way a driver would (virtio 1.2, 2.7), a fake `struct virtio_host`
 * that records ioeventfds and main-loop watches, a recording transport for
 * driving devices without PCI, and a guest driver's view of a virtio-pci
 * function (capabilities found by walking config space, 4.1.4).
 */
#ifndef TESTS_UNIT_VIRTIO_HELPERS_H
#define TESTS_UNIT_VIRTIO_HELPERS_H

#include "helpers.h"

#include "devices/virtio/virtio.h"
#include "devices/virtio/virtio_pci.h"

#include <stdbool.h>
#include <stdint.h>

/* Descriptor and ring flags as the spec numbers them (2.7.5, 2.7.6). */
enum { VQ_NEXT = 1, VQ_WRITE = 2, VQ_INDIRECT = 4 };
#define VQ_AVAIL_NO_INTERRUPT 1

/* ---- a split ring, driver side ---- */
struct vring_drv {
	uint8_t *ram; /* host address of guest-physical 0 */
	uint16_t size;
	uint64_t desc, avail, used;
	uint16_t avail_idx; /* the driver's next avail index */
};
/* One buffer of a chain: device-writable when `write`. */
struct vbuf {
	uint64_t addr;
	uint32_t len;
	bool write;
};
void vrd_init(struct vring_drv *v, uint8_t *ram, uint16_t size, uint64_t desc, uint64_t avail,
	      uint64_t used);
/* Descriptor table at base, avail ring after it, used ring at the next 4 KiB
 * boundary (the legacy layout, legal for modern devices too). Zeroes all. */
void vrd_layout(struct vring_drv *v, uint8_t *ram, uint16_t size, uint64_t base);
/* Writes entry i of the descriptor table at guest address `table`. */
void vrd_desc_at(uint8_t *ram, uint64_t table, unsigned i, uint64_t addr, uint32_t len,
		 uint16_t flags, uint16_t next);
void vrd_desc(struct vring_drv *v, unsigned i, uint64_t addr, uint32_t len, uint16_t flags,
	      uint16_t next);
/* Descriptors first, first+1, ... linked in order (NEXT on all but the last). */
uint16_t vrd_chain(struct vring_drv *v, uint16_t first, const struct vbuf *b, unsigned n);
/* The same inside an indirect table at `table` (entries 0..n-1). */
void vrd_table(uint8_t *ram, uint64_t table, const struct vbuf *b, unsigned n);
/* avail->ring[avail_idx % size] = head, then avail->idx = ++avail_idx. */
void vrd_publish(struct vring_drv *v, uint16_t head);
void vrd_set_avail_idx(struct vring_drv *v, uint16_t idx);
void vrd_set_avail_flags(struct vring_drv *v, uint16_t flags);
/* used_event lives after the avail ring, avail_event after the used ring (2.7.10). */
void vrd_set_used_event(struct vring_drv *v, uint16_t e);
uint16_t vrd_avail_event(const struct vring_drv *v);
uint16_t vrd_used_idx(const struct vring_drv *v);
uint16_t vrd_used_flags(const struct vring_drv *v);
/* used->ring[slot % size]. */
void vrd_used_elem(const struct vring_drv *v, unsigned slot, uint32_t *id, uint32_t *len);

/* ---- a host for virtio-pci ---- */
#define FAKE_HOST_IO_MAX    64
#define FAKE_HOST_WATCH_MAX 64
struct fake_host {
	struct {
		uint64_t gpa;
		unsigned len;
		int fd;
		bool assign;
	} io[FAKE_HOST_IO_MAX];
	unsigned nio;
	struct {
		unsigned q; /* the queue whose loop was asked for */
		int fd;
		void (*ready)(void *arg);
		void *arg;
		bool off; /* watch_set(false): the loop does not look at it */
	} w[FAKE_HOST_WATCH_MAX];
	unsigned nw;
	int ioeventfd_ret; /* what ioeventfd() returns (0) */
	struct {
		unsigned q;
		void (*fn)(void *arg);
		void *arg;
	} deferred[FAKE_HOST_WATCH_MAX]; /* a pass cut short asked to come back */
	unsigned ndeferred, deferrals;
};
struct virtio_host fake_host_make(struct fake_host *h, struct log *log);
/* The fd currently assigned at gpa (replaying assign/deassign), or -1. */
int fake_host_ioeventfd_at(const struct fake_host *h, uint64_t gpa);
/* How many ioeventfds are currently assigned. */
unsigned fake_host_ioeventfds(const struct fake_host *h);
/* One main-loop pass: ready(arg) for each watched fd that is readable
 * (and not turned off). */
unsigned fake_host_poll(struct fake_host *h);
/* The same for the watches of queue q only: one I/O thread's loop. */
unsigned fake_host_poll_queue(struct fake_host *h, unsigned q);
/* Whether fd is watched and looked at now (not turned off by watch_set). */
bool fake_host_watching(const struct fake_host *h, int fd);
/* The watch on fd, or -1. */
int fake_host_watch_of(const struct fake_host *h, int fd);
/* The end of a loop's pass: runs what was deferred (what that defers runs
 * at the next call); returns how many ran. */
unsigned fake_host_run_deferred(struct fake_host *h);

/* ---- a transport that records what a device asks for ---- */
struct fake_transport {
	struct virtio_transport t;
	unsigned used[VIRTIO_MAX_QUEUES];
	unsigned needs_reset;
	char why[160];
	int lock_depth[VIRTIO_MAX_QUEUES]; /* per queue lock */
	unsigned locks[VIRTIO_MAX_QUEUES];
	bool not_live;			    /* the driver has not set DRIVER_OK (or NEEDS_RESET) */
	unsigned yields[VIRTIO_MAX_QUEUES]; /* passes cut short at their budget */
};
/* Plugs the device into the recorder; negotiated features = `features`. */
void fake_transport_attach(struct fake_transport *f, struct virtio_dev *d, uint64_t features);
/* virtq_init of the device's queue q over the ring; fails the test if refused. */
void fake_dev_queue(struct virtio_dev *d, unsigned q, const struct guest_mem *m,
		    const struct vring_drv *v);
/* The per-pass budget (issues 17, 26), with `total` buffers queued on q:
 * one notify serves `per_pass` of them and yields once, with one interrupt
 * decision; the notify the yield brings back serves the rest and yields no
 * more. */
void expect_budget_passes(struct fake_transport *f, struct virtio_dev *d, unsigned q,
			  const struct vring_drv *v, uint16_t per_pass, uint16_t total);

/* A test device: `nq` queues of at most `qmax` entries, 12 bytes of config
 * reading 0x30 + offset, features bits 0 and 5 offered. Each notify fills
 * every device-writable buffer with 0xA5 and uses it whole (len = in_len);
 * a broken chain asks for a reset. Counts notifies, activations, resets. */
#define PROBE_MAX_QUEUES  4
#define PROBE_FEATURES	  ((1ULL << 0) | (1ULL << 5))
#define PROBE_CONFIG_SIZE 12
struct virtio_probe {
	struct virtio_dev vdev;
	struct virtio_dev_ops ops;
	struct virtq_elem elem;
	unsigned notified[PROBE_MAX_QUEUES], activated, resets;
};
void virtio_probe_init(struct virtio_probe *p, uint16_t type, unsigned nq, uint16_t qmax);

/* The features a device offers, as a driver reads them from device_feature
 * of a throw-away virtio-pci function (the device's transport, negotiated
 * features and queues are restored afterwards). */
uint64_t virtio_offered_features(struct virtio_dev *d);

/* ---- a virtio-pci function as its driver sees it ---- */
/* struct virtio_pci_common_cfg (4.1.4.3). */
enum {
	VPC_DFSELECT = 0x00,
	VPC_DF = 0x04,
	VPC_GFSELECT = 0x08,
	VPC_GF = 0x0C,
	VPC_MSIX = 0x10,
	VPC_NUMQ = 0x12,
	VPC_STATUS = 0x14,
	VPC_CFGGEN = 0x15,
	VPC_Q_SELECT = 0x16,
	VPC_Q_SIZE = 0x18,
	VPC_Q_MSIX = 0x1A,
	VPC_Q_ENABLE = 0x1C,
	VPC_Q_NOFF = 0x1E,
	VPC_Q_DESC = 0x20,
	VPC_Q_DRIVER = 0x28,
	VPC_Q_DEVICE = 0x30,
	VPC_COMMON_LEN = 0x38,
};
/* Capability cfg_type values (4.1.4). */
enum { VPCI_COMMON = 1, VPCI_NOTIFY = 2, VPCI_ISR = 3, VPCI_DEVICE = 4, VPCI_PCICFG = 5 };
struct vpci_view {
	struct pci_rig *rig;
	uint8_t slot;
	uint8_t cap[6]; /* config offset of the first cap of each cfg_type */
	uint64_t at[6]; /* BAR address + cap offset, per cfg_type 1-4 */
	uint32_t notify_mult;
	uint8_t msix_cap; /* 0 = none */
	uint64_t msix_table, msix_pba;
};
/* Walks the capability list (BARs must be assigned); a missing structure
 * leaves its cap[] and at[] 0. */
void vpv_init(struct vpci_view *v, struct pci_rig *r, uint8_t slot);
uint32_t vpv_rd(const struct vpci_view *v, unsigned off, unsigned len);
void vpv_wr(const struct vpci_view *v, unsigned off, unsigned len, uint32_t val);
uint8_t vpv_status(const struct vpci_view *v);
void vpv_set_status(const struct vpci_view *v, uint8_t s);
uint64_t vpv_device_features(const struct vpci_view *v);
/* Reset, ACKNOWLEDGE|DRIVER, write features, FEATURES_OK (3.1.1); returns
 * whether FEATURES_OK reads back set. */
bool vpv_negotiate(const struct vpci_view *v, uint64_t features);
/* Selects q, writes size and the three addresses (two dword halves, low
 * first), then queue_enable = 1. */
void vpv_queue(const struct vpci_view *v, unsigned q, const struct vring_drv *r);
void vpv_select(const struct vpci_view *v, unsigned q);
/* The notify address of q: notify base + queue_notify_off * multiplier. */
uint64_t vpv_notify_addr(const struct vpci_view *v, unsigned q);
/* A 16-bit write of q at its notify address on the MMIO bus (4.1.5.2). */
void vpv_notify(const struct vpci_view *v, unsigned q);
uint8_t vpv_isr(const struct vpci_view *v);
uint32_t vpv_cfg(const struct vpci_view *v, unsigned off, unsigned len);
/* MSI-X through conf1 / BAR writes as a guest does it. */
void vpv_msix_enable(const struct vpci_view *v, bool on);
void vpv_msix_program(const struct vpci_view *v, unsigned n, uint64_t addr, uint32_t data,
		      bool masked);
/* A len-byte MMIO access. */
uint32_t mmio_rd(struct pci_rig *r, uint64_t addr, unsigned len);
void mmio_wr(struct pci_rig *r, uint64_t addr, unsigned len, uint32_t v);

/* Can this machine make a tap `name` with `pairs` queue pairs (a
 * multiqueue one for more than one) in a network namespace of its own?
 * Tried with virtio_net_init in a forked child; false with the reason in
 * why otherwise. */
bool tap_possible(const char *name, const uint8_t mac[6], unsigned pairs, char *why, size_t len);

#endif
