/*
 * hostile: a test guest that attacks the VMM's virtio-pci devices, their
 * MSI-X tables and their BARs the way a broken or malicious driver would,
 * one case per attack. Shared between its files.
 *
 * Every case checks three things: the VMM stays up (the guest goes on
 * running and talking to it), the attacked device goes to NEEDS_RESET
 * (virtio 1.2, 2.1.2) or ignores the access as the spec says, and the
 * other devices keep working; then the attacked device is reset and must
 * work again.
 *
 * Everything but the interrupt handler (guest/irq.h) runs at CPL 3 under
 * run_user_irq(), where our KVM hosts run natively; CPL 0 is emulated at
 * ~2 us per instruction (shared/notes/kvm-host.md).
 */
#ifndef HOSTILE_H
#define HOSTILE_H

#include "guest/apic.h"
#include "guest/fuse.h"
#include "guest/irq.h"
#include "guest/kit.h"
#include "guest/msix.h"
#include "guest/pcienum.h"
#include "guest/ram.h"
#include "guest/virtio.h"

/* The devices a run needs: --disk, --rng, --fs DIR,tag=FS_TAG and --device
 * testdev; the virtio ones come first (kind < HD_TD). */
enum { HD_BLK, HD_RNG, HD_FS, HD_TD, HD_COUNT };
#define HD_VIRTIO_END HD_TD

/* The testdev (devices/pci/pci_testdev.h). */
#define TESTDEV_VENDOR	0x1234
#define TESTDEV_DEVICE	0x7E57
#define TESTDEV_MAGIC	0x56454454u
#define TD_MAGIC	0x00
#define TD_DOORBELL	0x08
#define TD_INTX_PENDING 0x0C
#define TD_INTX_ACK	0x10

/* The BAR0 layout of the VMM's virtio devices (devices/virtio/virtio_pci.h), which
 * the cases check against what the capabilities say. */
#define VP_BAR0_SIZE  0x4000u
#define VP_DEVICE_OFF 0x2000u

/* virtio 1.2 2.7.5: descriptor flags this driver's helpers do not name. */
#define VIRTQ_DESC_F_INDIRECT 4

/* 5.2: virtio-blk. */
#define SECTOR		    512u
#define VIRTIO_BLK_T_IN	    0
#define VIRTIO_BLK_T_OUT    1
#define VIRTIO_BLK_T_GET_ID 8
#define VIRTIO_BLK_S_OK	    0
#define VIRTIO_BLK_S_IOERR  1
#define VIRTIO_BLK_S_UNSUPP 2
struct blk_hdr {
	uint32_t type;
	uint32_t reserved;
	uint64_t sector;
};

/* 5.11: virtio-fs. Queue 0 is hiprio, queue 1 the request queue; requests
 * are FUSE messages (Linux include/uapi/linux/fuse.h, protocol 7.31): a
 * device-readable fuse_in_header and arguments, then a device-writable
 * fuse_out_header and the reply. */
#define FS_TAG		    "hostile"
#define FS_REQUEST_Q	    1
#define FUSE_INIT_OUT_BYTES sizeof(struct fuse_init_out)
/* One FUSE request's buffers: header and arguments, reply header and reply. */
struct fs_msg {
	struct fuse_in_header in;
	struct fuse_init_in args;
	struct fuse_out_header out;
	uint8_t reply[FUSE_INIT_OUT_BYTES];
};

/* IDT vectors: MSI-X entry 0 (configuration changes) of device n gets
 * VEC_MSIX_BASE + 8n, entry 1 (queue 0) the next one; the testdev's entry 0
 * gets its "queue" vector. IOAPIC pin p gets VEC_INTX_BASE + p. */
#define VEC_MSIX_BASE	 0x40
#define VEC_MSIX_PER_DEV 8
#define VEC_INTX_BASE	 0xC0

/* Bounds on waits, in microseconds. An expected event (a used buffer, an
 * interrupt, NEEDS_RESET, a reset reading back 0) took at most a few
 * milliseconds in the runs measured here (the guest prints the longest
 * wait at the end); H_WAIT_US is far beyond that, so a slow, shared box
 * does not fail, and an event that never comes is a FAIL, never a hang.
 * H_QUIET_US is how long a case watches that nothing happens (no used
 * entry, no interrupt, no late write). */
#define H_WAIT_US  2000000
#define H_QUIET_US 50000
/* The rng flood (256 chains of 4 GiB, 16 MiB of host work in all) took
 * 0.39-0.77 s here (0.77 under ASan) and went past 2 s under TSan on a
 * box running two suites: its bound is far beyond that. */
#define H_FLOOD_WAIT_US 30000000

/* Default queue sizes: rng's must hold the 140-descriptor chain of the
 * huge-length case, blk's 16 requests of 3 descriptors. */
#define RNG_QSIZE 256
#define BLK_QSIZE 128
/* virtio-fs: the request queue's size, and hiprio's (never used here). */
#define FS_QSIZE	64
#define FS_HIPRIO_QSIZE 8

struct hdev {
	const char *name; /* "blk", "rng", "testdev" */
	unsigned kind;
	const struct pci_func *pf; /* NULL: not found */
	uint64_t home[PCI_NUM_BARS];
	struct virtio_pci_dev vp; /* virtio devices */
	struct msix_info mx;
	bool msix;		    /* MSI-X enabled, entries programmed */
	uint8_t vec_cfg, vec_q;	    /* MSI-X entries 0 and 1 (testdev: entry 0 is vec_q) */
	unsigned pin;		    /* INTx: IOAPIC pin, 0 if none */
	int pin_src;		    /* ... and this device's index among its sources */
	uint8_t intx_vec;	    /* ... and its vector */
	volatile uint64_t isr;	    /* ISR (or testdev BAR0) address; 0 while moved away */
	volatile uint64_t isr_q;    /* INTx handler: ISR reads with the queue bit */
	volatile uint64_t isr_cfg;  /* ... with the configuration bit */
	volatile uint64_t td_acked; /* testdev INTx doorbells acknowledged */
	uint64_t offered;	    /* device features */
	bool up;		    /* DRIVER_OK, queue 0 working */
	uint16_t qsize;		    /* queue 0 size to set up (fs: queue 1) */
	struct virtq vq;	    /* queue 0 (fs: the request queue, 1) */
	struct virtq hiprio;	    /* fs: queue 0 */
	unsigned needs_reset_seen;  /* resets that found NEEDS_RESET set */
};

struct hostile {
	const char *cmdline;
	const char *only; /* hostile.only=NAME: run just this case */
	size_t only_len;
	bool expect_msix;
	bool flood;	  /* hostile.flood: flood a device, no cases */
	bool flood_blk;	  /* ... the disk (hostile.flood=blk), else the rng */
	uint64_t sectors; /* the disk's size in sectors (hostile.sectors) */
	uint64_t tsc_hz;
	uint64_t ram_end; /* end of the highest e820 RAM entry */
	struct irq_lapic_info lapic;
	struct mp_routing mp;
	struct hdev dev[HD_COUNT];
	unsigned setup_failures;
	unsigned cases, failed;
	char why[320];	      /* the running case's first failure */
	uint64_t max_wait_us; /* the longest wait for an expected event */
	bool fs_gone;	      /* the fs device's backend is gone: it cannot work again */
	uint64_t fs_unique;   /* the last FUSE request's unique */
	/* Buffers, from the RAM pool. */
	uint8_t *rng_buf;		    /* 4 KiB */
	struct blk_hdr *blk_hdr;	    /* one request header */
	uint8_t *blk_status;		    /* one status byte */
	uint8_t *blk_data;		    /* 64 KiB */
	uint8_t *big;			    /* BIG_BYTES, the huge-length case */
	struct virtq_desc *table1, *table2; /* indirect tables, 16 entries each */
	struct fs_msg *fs_msg;		    /* one FUSE request */
};

#define BIG_BYTES (32ull << 20)

extern struct hostile H;

/* hostile.c: reporting. expect() records the running case's first failure
 * ("WHAT: DETAIL") and returns ok; info() prints "hostile: info ...". */
__attribute__((format(printf, 2, 3))) bool expect(bool ok, const char *fmt, ...);
__attribute__((format(printf, 1, 2))) void info(const char *fmt, ...);

/* dev.c: driving the devices. */
uint64_t now_us(void);
/* Spins until done(arg) or `us` passed; records the longest wait. */
bool wait_for(bool (*done)(void *arg), void *arg, uint64_t us);
void spin_us(uint64_t us);
/* Interrupts counted for d since boot: queue (or testdev doorbell) and
 * configuration-change interrupts. */
uint64_t hdev_qirqs(const struct hdev *d);
uint64_t hdev_cfgirqs(const struct hdev *d);
/* All interrupts since boot, on every vector; for an INTx pin only those
 * that found their device pending: on our hosts a level-triggered pin is
 * sent once more after each interrupt, finding nothing (guests/README.md,
 * "Running pcitest"), and such a re-delivery may come late. */
uint64_t irq_total(void);
/* INTx set-up from the MP table, MSI-X enable (once, at start). */
bool hdev_setup_irq(struct hdev *d);
/* 4.1.4.3.2: writes 0 and waits (bounded) for a 0 read; counts a
 * NEEDS_RESET found set. */
bool hdev_reset(struct hdev *d);
/* Reset, ACKNOWLEDGE, DRIVER, features (VERSION_1 plus `extra` as
 * offered), FEATURES_OK (3.1.1 steps 1-6); MSI-X config vector. */
bool hdev_to_features_ok(struct hdev *d, uint64_t extra);
/* The whole 3.1.1 sequence with queue 0 of d->qsize. */
bool hdev_up(struct hdev *d, uint64_t extra);
/* One request (rng: 64 bytes; blk: a read of 8 sectors checked against
 * the host's pattern; testdev: a doorbell) with its interrupt. `what`
 * prefixes the failure. */
bool hdev_works(struct hdev *d, const char *what);
/* Waits for NEEDS_RESET (and, if cfg_irq, a configuration interrupt since
 * cfg_before: 2.1.2 once DRIVER_OK was set). */
bool expect_needs_reset(struct hdev *d, bool cfg_irq, uint64_t cfg_before, const char *what);
/* The device's status is `want` (no NEEDS_RESET). */
bool expect_status(struct hdev *d, uint8_t want, const char *what);
/* Raw ring writes for attacks: descriptor i, and head h published and
 * notified. */
void raw_desc(struct virtq *vq, uint16_t i, uint64_t addr, uint32_t len, uint16_t flags,
	      uint16_t next);
void raw_publish(struct virtq *vq, uint16_t head);
/* Waits for a used entry on d's queue and an interrupt since qirqs_before,
 * then takes the entry (id and len). */
bool wait_used(struct hdev *d, uint64_t qirqs_before, uint16_t *id, uint32_t *len);
/* A blk request through the kit's virtqueue: header, `len` bytes of data
 * (device-writable if IN), status. Waits for its used entry and interrupt;
 * returns the status byte, or -1 (with expect() failed) if it did not come. */
int blk_request(struct hdev *d, uint32_t type, uint64_t sector, void *buf, uint32_t len,
		const char *what);
/* The byte the host wrote at disk offset i (tests/guest/hostile_test.py). */
static inline uint8_t host_byte(uint64_t i)
{
	return (uint8_t)(i * 131 + (i >> 9) * 7 + 3);
}
/* One zeroed, page-aligned page of the RAM pool (NULL when used up). */
static inline void *ram_alloc_page(void)
{
	return ram_alloc(4096, 4096);
}
/* virtio-fs: a FUSE_INIT posted on the request queue (not kicked when
 * !kick); the head, or -1. */
int fs_post_init(struct hdev *d, bool kick);
/* Whether the used entry of head came back as a good FUSE_INIT reply
 * (unique, length, error 0, major 7); why not in `why`. */
bool fs_init_reply_ok(char *why, size_t n);
/* The 3.1.1 sequence for the fs device with only the queues in `mask`
 * (bit 0 hiprio, bit 1 requests) enabled, then DRIVER_OK; d->up is set
 * when the request queue is among them and the status reads 0x0F. */
bool fs_up_queues(struct hdev *d, unsigned mask);
/* BAR n of d's config space: write the low dword. */
void bar_write(struct hdev *d, unsigned bar, uint32_t v);
uint32_t bar_read(struct hdev *d, unsigned bar);

/* The cases (attacks_*.c). Each takes the attacked device. */
void case_desc_loop(struct hdev *t);
void case_next_out_of_range(struct hdev *t);
void case_head_out_of_range(struct hdev *t);
void case_indirect_nested(struct hdev *t);
void case_desc_past_ram(struct hdev *t);
void case_desc_mmio_hole(struct hdev *t);
void case_desc_readable_ring(struct hdev *t);
void case_desc_writable_ring(struct hdev *t);
void case_huge_length(struct hdev *t);
void case_rng_flood(struct hdev *t);
void rng_flood_forever(struct hdev *t);
void blk_feed_forever(struct hdev *t);
void case_desc_order(struct hdev *t);
void case_blk_malformed(struct hdev *t);
void case_avail_far_ahead(struct hdev *t);
void case_queue_size_not_pow2(struct hdev *t);
void case_ring_misaligned(struct hdev *t);
void case_queue_reconfig(struct hdev *t);
void case_notify_disabled(struct hdev *t);
void case_notify_nonexistent(struct hdev *t);
void case_notify_storm(struct hdev *t);
void case_reset_inflight(struct hdev *t);
void case_status_backwards(struct hdev *t);
void case_msix_past_table(struct hdev *t);
void case_msix_odd_sizes(struct hdev *t);
void case_msix_pba_write(struct hdev *t);
void case_bar_over_ram(struct hdev *t);
void case_bar_over_bar(struct hdev *t);
void case_bar_over_lapic(struct hdev *t);
void case_bar_over_ioapic(struct hdev *t);
void case_readonly_config(struct hdev *t);
void case_fs_queue_size_not_pow2(struct hdev *t);
void case_fs_ring_misaligned(struct hdev *t);
void case_fs_partial_queues(struct hdev *t);
void case_fs_reset_cycles(struct hdev *t);
void case_fs_reset_inflight(struct hdev *t);
void case_fs_kick_before_driver_ok(struct hdev *t);
void case_fs_desc_past_ram(struct hdev *t);

#endif
