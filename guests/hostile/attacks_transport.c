/*
 * Attacks on the modern virtio-pci transport (virtio 1.2, 4.1.4.3,
 * 4.1.4.4) and the device lifecycle (2.1, 2.4, 3.1): queue set-up with a
 * size or rings a split virtqueue cannot have, set-up after DRIVER_OK,
 * notifications for queues that are disabled or do not exist, a storm of
 * them, a reset while requests are in flight, and device status bits
 * cleared by the driver.
 */
#include "hostile.h"

#define PAGE 4096u

/* Three fresh, page-aligned pages for hand-made rings. */
struct rings {
	uint8_t *desc, *avail, *used;
};

static bool fresh_rings(struct rings *r)
{
	r->desc = ram_alloc_page();
	r->avail = ram_alloc_page();
	r->used = ram_alloc_page();
	return expect(r->desc && r->avail && r->used, "out of RAM pool for rings");
}

/* Queue 0 of t set up by hand in the FEATURES_OK..DRIVER_OK window, then
 * queue_enable = 1: a size or ring placement a split virtqueue cannot have
 * (2.7: a power of 2 no larger than the device's; 2.7.2: alignment 16, 2,
 * 4; the rings in memory) must not make a live queue: the device sets
 * NEEDS_RESET (2.1.2; no notification before DRIVER_OK). */
static void bad_queue(struct hdev *t, uint16_t size, uint64_t desc, uint64_t avail, uint64_t used,
		      const char *what)
{
	const struct virtio_pci_dev *vp = &t->vp;

	if (!hdev_to_features_ok(t, 0))
		return;
	virtio_cc_write16(vp, VIRTIO_CC_Q_SELECT, 0);
	uint16_t max = virtio_cc_read16(vp, VIRTIO_CC_Q_SIZE);
	virtio_cc_write16(vp, VIRTIO_CC_Q_SIZE, size);
	uint16_t size_rb = virtio_cc_read16(vp, VIRTIO_CC_Q_SIZE);
	virtio_cc_write64(vp, VIRTIO_CC_Q_DESC, desc);
	virtio_cc_write64(vp, VIRTIO_CC_Q_DRIVER, avail);
	virtio_cc_write64(vp, VIRTIO_CC_Q_DEVICE, used);
	virtio_cc_write16(vp, VIRTIO_CC_Q_ENABLE, 1);
	uint16_t en = virtio_cc_read16(vp, VIRTIO_CC_Q_ENABLE);
	uint8_t s = virtio_status(vp);
	info("%s: %s: queue_size %u (max %u) reads back %u; queue_enable reads %u; status 0x%02x",
	     t->name, what, size, max, size_rb, en, s);
	expect(en == 0, "%s: %s: queue_enable reads %u: the queue went live", t->name, what, en);
	expect_needs_reset(t, false, 0, what);
}

void case_queue_size_not_pow2(struct hdev *t)
{
	static const uint16_t sizes[] = {3, 100, 255, 0, 512, 0xFFFF};
	struct rings r;
	char what[64];

	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		if (!fresh_rings(&r))
			return;
		snprintf(what, sizeof(what), "queue_size %u", sizes[i]);
		bad_queue(t, sizes[i], (uint64_t)r.desc, (uint64_t)r.avail, (uint64_t)r.used, what);
	}
}

void case_ring_misaligned(struct hdev *t)
{
	struct rings r;

	if (!fresh_rings(&r))
		return;
	uint64_t d = (uint64_t)r.desc, a = (uint64_t)r.avail, u = (uint64_t)r.used;
	bad_queue(t, 16, d + 8, a, u, "descriptor table at +8 (2.7.2: 16-byte aligned)");
	bad_queue(t, 16, d, a + 1, u, "available ring at +1 (2-byte aligned)");
	bad_queue(t, 16, d, a, u + 2, "used ring at +2 (4-byte aligned)");
	bad_queue(t, 16, 0xD0000000ull, a, u, "descriptor table in the PCI MMIO window");
	bad_queue(t, 16, d, a, H.ram_end - 64, "used ring straddling the end of RAM");
	bad_queue(t, 16, d, 0xFFFFFFFFFFFFFFF0ull, u, "available ring wrapping around 2^64");
}

/* After DRIVER_OK the queue registers are the device's to keep: this
 * VMM's rule (virtio_pci.c) is that set-up counts only between
 * FEATURES_OK and DRIVER_OK, and 4.1.4.3.2 forbids writing 0 to
 * queue_enable; features are fixed once FEATURES_OK is set (3.1.1). The
 * writes are ignored and the queue keeps working on its rings. */
void case_queue_reconfig(struct hdev *t)
{
	const struct virtio_pci_dev *vp = &t->vp;
	struct rings r;

	if (!fresh_rings(&r))
		return;
	virtio_cc_write16(vp, VIRTIO_CC_Q_SELECT, 0);
	uint16_t size = virtio_cc_read16(vp, VIRTIO_CC_Q_SIZE);
	uint64_t d = virtio_cc_read64(vp, VIRTIO_CC_Q_DESC),
		 a = virtio_cc_read64(vp, VIRTIO_CC_Q_DRIVER),
		 u = virtio_cc_read64(vp, VIRTIO_CC_Q_DEVICE);
	uint64_t feat = virtio_driver_features(vp);

	virtio_cc_write16(vp, VIRTIO_CC_Q_SIZE, 8);
	virtio_cc_write64(vp, VIRTIO_CC_Q_DESC, (uint64_t)r.desc);
	virtio_cc_write64(vp, VIRTIO_CC_Q_DRIVER, (uint64_t)r.avail);
	virtio_cc_write64(vp, VIRTIO_CC_Q_DEVICE, (uint64_t)r.used);
	virtio_cc_write16(vp, VIRTIO_CC_Q_ENABLE, 0);
	virtio_set_driver_features(vp, feat | VIRTIO_F_BIT(VIRTIO_F_INDIRECT_DESC));

	uint16_t size2 = virtio_cc_read16(vp, VIRTIO_CC_Q_SIZE);
	uint16_t en = virtio_cc_read16(vp, VIRTIO_CC_Q_ENABLE);
	uint64_t d2 = virtio_cc_read64(vp, VIRTIO_CC_Q_DESC),
		 a2 = virtio_cc_read64(vp, VIRTIO_CC_Q_DRIVER),
		 u2 = virtio_cc_read64(vp, VIRTIO_CC_Q_DEVICE);
	uint64_t feat2 = virtio_driver_features(vp);
	expect(size2 == size && en == 1 && d2 == d && a2 == a && u2 == u,
	       "%s: queue registers changed after DRIVER_OK: size %u -> %u, enable %u, desc 0x%lx "
	       "-> 0x%lx, driver 0x%lx -> 0x%lx, device 0x%lx -> 0x%lx",
	       t->name, size, size2, en, d, d2, a, a2, u, u2);
	expect(feat2 == feat,
	       "%s: driver_feature changed after FEATURES_OK (3.1.1): 0x%lx -> 0x%lx", t->name,
	       feat, feat2);
	expect_status(t, 0x0F, "after queue set-up writes past DRIVER_OK");
	hdev_works(t, "on its own rings after the rewrite, without a reset");
}

static bool used_nonzero(void *arg)
{
	return ((volatile struct virtq_used *)arg)->idx != 0;
}

/* 4.1.4.3.2 / 2.7.13.3: a queue the driver never enabled is not the
 * device's to use, whatever its rings hold and however often it is
 * notified, before DRIVER_OK or after. */
void case_notify_disabled(struct hdev *t)
{
	const struct virtio_pci_dev *vp = &t->vp;
	struct rings r;

	if (!fresh_rings(&r) || !hdev_to_features_ok(t, 0))
		return;
	virtio_cc_write16(vp, VIRTIO_CC_Q_SELECT, 0);
	virtio_cc_write16(vp, VIRTIO_CC_Q_SIZE, 16);
	virtio_cc_write64(vp, VIRTIO_CC_Q_DESC, (uint64_t)r.desc);
	virtio_cc_write64(vp, VIRTIO_CC_Q_DRIVER, (uint64_t)r.avail);
	virtio_cc_write64(vp, VIRTIO_CC_Q_DEVICE, (uint64_t)r.used);
	if (t->msix)
		virtio_cc_write16(vp, VIRTIO_CC_Q_MSIX, 1);
	uint64_t notify = vp->notify.addr +
			  (uint64_t)virtio_cc_read16(vp, VIRTIO_CC_Q_NOTIFY_OFF) * vp->notify_mult;
	volatile struct virtq_desc *desc = (void *)r.desc;
	volatile struct virtq_avail *avail = (void *)r.avail;
	volatile struct virtq_used *used = (void *)r.used;
	desc[0] = (struct virtq_desc){(uint64_t)H.rng_buf, 64, VIRTQ_DESC_F_WRITE, 0};
	avail->ring[0] = 0;
	avail->idx = 1;
	__asm__ volatile("mfence" ::: "memory");
	uint64_t q0 = hdev_qirqs(t), all0 = irq_total();

	mmio_write16(notify, 0); /* before DRIVER_OK */
	virtio_set_status(vp, 0x0F);
	for (unsigned i = 0; i < 8; i++)
		mmio_write16(notify, 0); /* after */
	bool came = wait_for(used_nonzero, (void *)used, H_QUIET_US);
	uint16_t en = virtio_cc_read16(vp, VIRTIO_CC_Q_ENABLE);
	expect(!came && en == 0, "%s: a queue never enabled was used: used idx %u, queue_enable %u",
	       t->name, used->idx, en);
	expect(hdev_qirqs(t) == q0 && irq_total() == all0,
	       "%s: %lu interrupts for a queue never enabled", t->name, irq_total() - all0);
	expect_status(t, 0x0F, "notifications for a disabled queue are ignored");
}

/* 4.1.4.4: the notify structure covers the device's queues; a write for a
 * queue that does not exist, elsewhere in the structure or with another
 * width, or set-up through queue_select of a missing queue (4.1.4.3.2:
 * queue_size reads 0), changes nothing. */
void case_notify_nonexistent(struct hdev *t)
{
	const struct virtio_pci_dev *vp = &t->vp;
	uint64_t q0 = hdev_qirqs(t), all0 = irq_total();
	uint16_t used0 = t->vq.used->idx;
	unsigned nq = virtio_cc_read16(vp, VIRTIO_CC_NUM_QUEUES);

	for (unsigned q = nq; q < 8; q++)
		mmio_write16(vp->notify.addr + (uint64_t)q * vp->notify_mult, (uint16_t)q);
	mmio_write16(t->home[0] + VP_BAR0_SIZE - 2, 0xFFFF);
	mmio_write8(t->vq.notify_addr, 0);
	mmio_write32(t->vq.notify_addr, 0);
	mmio_write16(t->vq.notify_addr, 0x1234);

	static const uint16_t missing[] = {1, 7, 0x8000, 0xFFFF};
	bool sane = true;
	for (unsigned i = 0; i < sizeof(missing) / sizeof(missing[0]); i++) {
		virtio_cc_write16(vp, VIRTIO_CC_Q_SELECT, missing[i]);
		virtio_cc_write16(vp, VIRTIO_CC_Q_SIZE, 16);
		virtio_cc_write64(vp, VIRTIO_CC_Q_DESC, (uint64_t)H.table1);
		virtio_cc_write16(vp, VIRTIO_CC_Q_ENABLE, 1);
		uint16_t size = virtio_cc_read16(vp, VIRTIO_CC_Q_SIZE);
		uint16_t en = virtio_cc_read16(vp, VIRTIO_CC_Q_ENABLE);
		uint64_t desc = virtio_cc_read64(vp, VIRTIO_CC_Q_DESC);
		if (!expect(
			size == 0 && en == 0 && desc == 0,
			"%s: queue %u (of %u) reads size %u, enable %u, desc 0x%lx after set-up "
			"writes (4.1.4.3.2: size 0)",
			t->name, missing[i], nq, size, en, desc))
			sane = false;
		mmio_write16(vp->notify.addr + (uint64_t)(missing[i] & 7) * vp->notify_mult,
			     missing[i]);
	}
	virtio_cc_write16(vp, VIRTIO_CC_Q_SELECT, 0);
	spin_us(H_QUIET_US);
	expect(t->vq.used->idx == used0 && hdev_qirqs(t) == q0 && irq_total() == all0,
	       "%s: notifications of missing queues did something: used idx %u -> %u, %lu "
	       "interrupts",
	       t->name, used0, t->vq.used->idx, irq_total() - all0);
	if (sane)
		expect_status(t, 0x0F, "after notifications of queues that do not exist");
	hdev_works(t, "after notifications of missing queues, without a reset");
}

struct storm_wait {
	const struct hdev *d;
	uint16_t want;
	uint64_t q0;
};

static bool storm_done(void *arg)
{
	const struct storm_wait *w = arg;
	return virtq_used_pending(&w->d->vq) >= w->want && hdev_qirqs(w->d) > w->q0;
}

/* A driver may notify as often as it likes (2.7.13.3): 4 buffers posted,
 * then 10000 notifications of the queue and 2000 of a missing one. Every
 * buffer is used exactly once, with at least one interrupt, and the device
 * and the others keep working. */
void case_notify_storm(struct hdev *t)
{
	enum { NBUF = 4, STORM = 10000, STORM_MISSING = 2000 };
	int heads[NBUF];
	bool seen[NBUF] = {false};
	struct storm_wait w = {t, NBUF, hdev_qirqs(t)};

	for (unsigned k = 0; k < NBUF; k++) {
		struct virtq_buf b = {H.rng_buf + 64 * (k + 1), 64};
		heads[k] = virtq_add(&t->vq, &b, 0, 1);
	}
	uint64_t t0 = now_us();
	for (unsigned i = 0; i < STORM; i++)
		mmio_write16(t->vq.notify_addr, 0);
	uint64_t t1 = now_us();
	for (unsigned i = 0; i < STORM_MISSING; i++)
		mmio_write16(t->vp.notify.addr + 3ull * t->vp.notify_mult, 3);
	uint64_t t2 = now_us();
	info("%s: %u notifications in %lu ms (%lu us each); %u of a missing queue in %lu ms",
	     t->name, STORM, (t1 - t0) / 1000, (t1 - t0) / STORM, STORM_MISSING, (t2 - t1) / 1000);
	wait_for(storm_done, &w, H_WAIT_US);
	spin_us(H_QUIET_US);
	unsigned got = 0, bad = 0;
	uint16_t id;
	uint32_t len;
	while (virtq_get_used(&t->vq, &id, &len)) {
		got++;
		bool match = false;
		for (unsigned k = 0; k < NBUF; k++) {
			if (heads[k] == id && !seen[k] && len == 64) {
				seen[k] = match = true;
				break;
			}
		}
		bad += !match;
	}
	expect(got == NBUF && bad == 0 && hdev_qirqs(t) > w.q0,
	       "%s: %u buffers posted, %u used (%u unexpected ids or lengths), %lu interrupts",
	       t->name, NBUF, got, bad, hdev_qirqs(t) - w.q0);
	expect_status(t, 0x0F, "after a notification storm");
	hdev_works(t, "after a notification storm, without a reset");
}

struct inflight {
	struct blk_hdr *hdr;
	uint8_t *status;
	uint8_t *data;
};

#define INFLIGHT     16
#define INFLIGHT_LEN (64u * 1024u)

static bool inflight_alloc(struct inflight *r)
{
	static bool done;
	static struct inflight saved[INFLIGHT];

	if (!done) {
		for (unsigned k = 0; k < INFLIGHT; k++) {
			saved[k].hdr = ram_alloc(sizeof(struct blk_hdr), 16);
			saved[k].status = ram_alloc(1, 1);
			saved[k].data = ram_alloc(INFLIGHT_LEN, PAGE);
			if (!saved[k].hdr || !saved[k].status || !saved[k].data)
				return expect(false, "out of RAM pool for in-flight requests");
		}
		done = true;
	}
	memcpy(r, saved, sizeof(saved));
	return true;
}

/* 2.4.1: once device_status reads 0 after a reset, the device no longer
 * touches the queues. 16 reads of 64 KiB are posted and the device is
 * reset at once (and, in later rounds, a little later); afterwards the
 * driver owns the status bytes, the data buffers and the used ring, and
 * nothing may write them. Requests the device completed before the reset
 * took effect must be whole (status OK). */
void case_reset_inflight(struct hdev *t)
{
	static const unsigned delay_us[] = {0, 100, 1000, 10000};
	struct inflight r[INFLIGHT];

	if (!inflight_alloc(r))
		return;
	for (unsigned round = 0; round < sizeof(delay_us) / sizeof(delay_us[0]); round++) {
		if (round && !hdev_up(t, 0))
			return;
		struct virtq *vq = &t->vq;
		uint16_t u0 = vq->used->idx;
		int heads[INFLIGHT];
		for (unsigned k = 0; k < INFLIGHT; k++) {
			*r[k].hdr = (struct blk_hdr){VIRTIO_BLK_T_IN, 0, (uint64_t)k * 128};
			*r[k].status = 0xFF;
			memset(r[k].data, 0x5A, INFLIGHT_LEN);
			struct virtq_buf b[3] = {
			    {r[k].hdr, 16}, {r[k].data, INFLIGHT_LEN}, {r[k].status, 1}};
			heads[k] = virtq_add(vq, b, 1, 2);
		}
		virtq_kick(vq);
		if (delay_us[round])
			spin_us(delay_us[round]);
		if (!hdev_reset(t))
			return;
		uint16_t done = (uint16_t)(vq->used->idx - u0);
		unsigned whole = 0;
		for (uint16_t i = 0; i < done && i < INFLIGHT; i++) {
			uint32_t id = vq->used->ring[(u0 + i) % vq->size].id;
			for (unsigned k = 0; k < INFLIGHT; k++)
				if ((int)id == heads[k] && *r[k].status == VIRTIO_BLK_S_OK &&
				    r[k].data[0] == host_byte((uint64_t)k * 128 * SECTOR))
					whole++;
		}
		info("%s: reset %u us after posting 16 reads: %u had completed", t->name,
		     delay_us[round], done);
		expect(done <= INFLIGHT && whole == done,
		       "%s: %u used entries before the reset completed, %u of them whole", t->name,
		       done, whole);
		/* The driver owns it all now: poison, then watch. */
		for (unsigned k = 0; k < INFLIGHT; k++) {
			*r[k].status = 0xEE;
			memset(r[k].data, 0xEE, INFLIGHT_LEN);
		}
		memset((void *)vq->used, 0xEE, 4 + 8ull * vq->size);
		__asm__ volatile("mfence" ::: "memory");
		uint64_t q0 = hdev_qirqs(t);
		spin_us(H_QUIET_US);
		unsigned touched = 0;
		for (unsigned k = 0; k < INFLIGHT; k++) {
			touched += *r[k].status != 0xEE;
			for (unsigned i = 0; i < INFLIGHT_LEN; i += 512)
				touched += r[k].data[i] != 0xEE;
		}
		for (unsigned i = 0; i < 4 + 8u * vq->size; i++)
			touched += ((volatile uint8_t *)vq->used)[i] != 0xEE;
		expect(touched == 0 && hdev_qirqs(t) == q0,
		       "%s: after the reset read 0 the device wrote guest memory (%u places) or "
		       "interrupted (%lu) (2.4.1)",
		       t->name, touched, hdev_qirqs(t) - q0);
		expect_status(t, 0, "after a reset during I/O");
	}
}

/* 2.1.1: "The driver MUST NOT clear a device status bit." A write that
 * does is a broken driver: the device ignores it or sets NEEDS_RESET
 * (2.1.2, with a configuration change notification after DRIVER_OK), but
 * never takes the bits back, which would leave a live device without
 * DRIVER_OK or FEATURES_OK. */
static void backwards(struct hdev *t, bool live, uint8_t write, const char *what)
{
	uint8_t from = live ? 0x0F : 0x0B;

	if (live ? !hdev_up(t, 0) : !hdev_to_features_ok(t, 0))
		return;
	uint64_t c0 = hdev_cfgirqs(t);
	virtio_set_status(&t->vp, write);
	uint8_t s = virtio_status(&t->vp);
	if (s & VIRTIO_STATUS_NEEDS_RESET) {
		expect((s & 0x0F) == from,
		       "%s: %s: NEEDS_RESET, but status 0x%02x lost bits of 0x%02x", t->name, what,
		       s, from);
		expect_needs_reset(t, live, c0, what);
		return;
	}
	expect(s == from, "%s: %s: status 0x%02x -> 0x%02x after writing 0x%02x (2.1.1)", t->name,
	       what, from, s, write);
	if (live && s == from)
		hdev_works(t, "after an ignored backwards status write");
}

void case_status_backwards(struct hdev *t)
{
	backwards(t, true, 0x03, "0x0f -> 0x03 (DRIVER_OK and FEATURES_OK cleared)");
	backwards(t, true, 0x0E, "0x0f -> 0x0e (ACKNOWLEDGE cleared)");
	backwards(t, true, 0x0B, "0x0f -> 0x0b (DRIVER_OK cleared)");
	backwards(t, false, 0x01, "0x0b -> 0x01 (DRIVER and FEATURES_OK cleared)");
}
