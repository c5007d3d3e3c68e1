/*
 * Driving the devices the attacks aim at, as a minimal, well-behaved
 * driver does between attacks: interrupts (MSI-X, or INTx from the MP
 * table with the handler reading ISR, virtio 1.2 4.1.4.5), the 3.1.1
 * initialisation sequence over the modern PCI transport (4.1), one request
 * per device to show it works, and the bounded waits every check uses.
 * All at CPL 3, but for the INTx service callbacks (in the handler).
 */
#include "hostile.h"

#include "guest/pci.h"

/* ---- time ---- */

uint64_t now_us(void)
{
	return irq_tsc_to_us(rdtsc());
}

bool wait_for(bool (*done)(void *arg), void *arg, uint64_t us)
{
	uint64_t t0 = rdtsc(), deadline = t0 + irq_us_to_tsc(us);

	while (!done(arg)) {
		if (rdtsc() >= deadline)
			return done(arg);
		cpu_relax();
	}
	uint64_t took = irq_tsc_to_us(rdtsc() - t0);
	if (took > H.max_wait_us)
		H.max_wait_us = took;
	return true;
}

void spin_us(uint64_t us)
{
	irq_spin_us(us);
}

/* ---- interrupts ---- */

uint64_t hdev_qirqs(const struct hdev *d)
{
	if (d->msix)
		return irq_count(d->vec_q);
	return d->kind == HD_TD ? d->td_acked : d->isr_q;
}

uint64_t hdev_cfgirqs(const struct hdev *d)
{
	return d->msix ? irq_count(d->vec_cfg) : d->isr_cfg;
}

uint64_t irq_total(void)
{
	uint64_t n = 0;
	for (unsigned v = 32; v < 256; v++) {
		bool intx = false;
		for (unsigned k = 0; k < HD_COUNT; k++)
			intx |= H.dev[k].pin && v == H.dev[k].intx_vec;
		if (v != IRQ_VEC_SPURIOUS && !intx)
			n += irq_count(v);
	}
	for (unsigned k = 0; k < HD_COUNT; k++)
		if (H.dev[k].pin)
			n += H.dev[k].isr_q + H.dev[k].isr_cfg + H.dev[k].td_acked;
	return n;
}

/* INTx service callbacks (CPL 0, in the handler, before the EOI). Reading
 * ISR returns and clears it and drops the line (4.1.4.5.1). While a case
 * has moved BAR0 away, d->isr is 0 and the device is left alone; an
 * unclaimed read would return all-ones, which no ISR value is. */
static uint32_t virtio_service(void *ctx)
{
	struct hdev *d = ctx;
	uint64_t a = d->isr;

	if (!a)
		return 0;
	uint8_t v = mmio_read8(a);
	if (v == 0 || v == 0xFF)
		return 0;
	if (v & VIRTIO_ISR_QUEUE)
		d->isr_q++;
	if (v & VIRTIO_ISR_CONFIG)
		d->isr_cfg++;
	return 1;
}

static uint32_t testdev_service(void *ctx)
{
	struct hdev *d = ctx;
	uint64_t a = d->isr;

	if (!a)
		return 0;
	uint32_t n = mmio_read32(a + TD_INTX_PENDING);
	if (n == 0 || n == 0xFFFFFFFFu)
		return 0;
	mmio_write32(a + TD_INTX_ACK, 0);
	d->td_acked += n;
	return n;
}

static bool setup_intx(struct hdev *d)
{
	unsigned matches;
	const struct mp_intsrc *m =
	    H.mp.ok ? mp_routing_pci_intx(&H.mp, d->pf->slot, d->pf->irq_pin, &matches) : NULL;

	if (!expect(m && matches == 1 && m->dst_irq < IRQ_IOAPIC_PINS,
		    "%s: one MP I/O interrupt entry for its INTx pin %u (MP spec 4.3.4)", d->name,
		    d->pf->irq_pin))
		return false;
	d->pin = m->dst_irq;
	d->intx_vec = (uint8_t)(VEC_INTX_BASE + d->pin);
	d->pin_src =
	    irq_pin_add_source(d->pin, d->kind == HD_TD ? testdev_service : virtio_service, d);
	if (!expect(d->pin_src >= 0, "%s: room on IOAPIC pin %u", d->name, d->pin))
		return false;
	uint32_t rte = irq_rte_for(d->intx_vec, m->flags), lo, hi;
	irq_pin_route(d->pin, rte, H.lapic.apic_id, &lo, &hi);
	return expect((lo & ~(IOAPIC_RTE_DELIVS | IOAPIC_RTE_REMOTE_IRR)) == rte,
		      "%s: IOAPIC pin %u entry reads back 0x%08x, wrote 0x%08x", d->name, d->pin,
		      lo, rte);
}

bool hdev_setup_irq(struct hdev *d)
{
	const char *why;
	bool found = msix_probe(d->pf->slot, d->pf->bar, &d->mx, &why);
	uint8_t vecs[2];
	unsigned n = 0;

	uint16_t cmd = pci_read16(0, d->pf->slot, 0, PCI_COMMAND);
	pci_write16(0, d->pf->slot, 0, PCI_COMMAND, cmd | PCI_CMD_MEMORY | PCI_CMD_MASTER);
	d->isr = d->kind == HD_TD ? d->pf->bar[0] : d->vp.isr.addr;
	if (!H.expect_msix) {
		if (!expect(!found,
			    "%s: no MSI-X capability under --irq-mode intx (found at 0x%02x)",
			    d->name, d->mx.cap))
			return false;
		return setup_intx(d);
	}
	if (!expect(found, "%s: an MSI-X capability with a usable table: %s", d->name, why))
		return false;
	d->vec_cfg = (uint8_t)(VEC_MSIX_BASE + VEC_MSIX_PER_DEV * d->kind);
	d->vec_q = (uint8_t)(d->vec_cfg + 1);
	if (d->kind != HD_TD)
		vecs[n++] = d->vec_cfg;
	vecs[n++] = d->vec_q;
	if (!expect(d->mx.nvec >= n, "%s: MSI-X table of %u entries, need %u", d->name, d->mx.nvec,
		    n))
		return false;
	bool ok = msix_enable(&d->mx, H.lapic.apic_id, vecs, n, &why);
	d->msix = ok;
	return expect(ok, "%s: MSI-X enabled, entries programmed (PCI 3.0, 6.8.2): %s", d->name,
		      why);
}

/* ---- the initialisation sequence (3.1.1) ---- */

static bool status_is_zero(void *arg)
{
	return virtio_status(&((struct hdev *)arg)->vp) == 0;
}

bool hdev_reset(struct hdev *d)
{
	uint8_t s = virtio_status(&d->vp);

	if (s & VIRTIO_STATUS_NEEDS_RESET)
		d->needs_reset_seen++;
	d->up = false;
	virtio_set_status(&d->vp, 0);
	bool ok = wait_for(status_is_zero, d, H_WAIT_US);
	return expect(ok, "%s: reset: device_status reads 0 within %u ms (4.1.4.3.2), reads 0x%02x",
		      d->name, H_WAIT_US / 1000, virtio_status(&d->vp));
}

bool hdev_to_features_ok(struct hdev *d, uint64_t extra)
{
	const struct virtio_pci_dev *vp = &d->vp;

	if (!hdev_reset(d))
		return false;
	virtio_set_status(vp, VIRTIO_STATUS_ACKNOWLEDGE);
	virtio_set_status(vp, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	d->offered = virtio_device_features(vp);
	uint64_t f = VIRTIO_F_BIT(VIRTIO_F_VERSION_1) | (extra & d->offered);
	virtio_set_driver_features(vp, f);
	virtio_set_status(vp, 0x03 | VIRTIO_STATUS_FEATURES_OK);
	uint8_t s = virtio_status(vp);
	if (!expect(s == 0x0B, "%s: set-up: FEATURES_OK reads back (3.1.1 step 6): status 0x%02x",
		    d->name, s))
		return false;
	if (d->msix) {
		virtio_cc_write16(vp, VIRTIO_CC_MSIX_CONFIG, 0);
		uint16_t v = virtio_cc_read16(vp, VIRTIO_CC_MSIX_CONFIG);
		if (!expect(v == 0, "%s: set-up: config_msix_vector 0 reads back 0x%04x", d->name,
			    v))
			return false;
	}
	return true;
}

bool fs_up_queues(struct hdev *d, unsigned mask)
{
	uint16_t want = d->msix ? 1 : VIRTIO_MSI_NO_VECTOR, vec = 0;
	const char *why = "ok";
	bool ok = true;

	d->up = false;
	if (!hdev_to_features_ok(d, 0))
		return false;
	/* 5.11.2: hiprio (queue 0) and the request queue share MSI-X entry 1. */
	if (mask & 1)
		ok = virtq_setup(&d->vp, 0, FS_HIPRIO_QSIZE, want, &d->hiprio, &vec, &why) &&
		     (!d->msix || vec == 1);
	if (ok && (mask & 2))
		ok = virtq_setup(&d->vp, FS_REQUEST_Q, d->qsize, want, &d->vq, &vec, &why) &&
		     (!d->msix || vec == 1);
	if (!expect(ok, "%s: set-up: queues 0x%x (4.1.5.1.3): %s; queue_msix_vector 0x%04x",
		    d->name, mask, why, vec))
		return false;
	virtio_set_status(&d->vp, 0x0F);
	ok = expect_status(d, 0x0F, "set-up: DRIVER_OK (3.1.1 step 8)");
	d->up = ok && (mask & 2);
	return ok;
}

bool hdev_up(struct hdev *d, uint64_t extra)
{
	const char *why;
	uint16_t vec;

	if (d->kind == HD_FS)
		return fs_up_queues(d, 3);
	if (!hdev_to_features_ok(d, extra))
		return false;
	bool ok = virtq_setup(&d->vp, 0, d->qsize, d->msix ? 1 : VIRTIO_MSI_NO_VECTOR, &d->vq, &vec,
			      &why);
	if (!expect(ok && (!d->msix || vec == 1),
		    "%s: set-up: queue 0 of %u (4.1.5.1.3): %s; queue_msix_vector 0x%04x", d->name,
		    d->qsize, ok ? "ok" : why, vec))
		return false;
	virtio_set_status(&d->vp, 0x0F);
	d->up = expect_status(d, 0x0F, "set-up: DRIVER_OK (3.1.1 step 8)");
	return d->up;
}

bool expect_status(struct hdev *d, uint8_t want, const char *what)
{
	uint8_t s = virtio_status(&d->vp);
	return expect(s == want, "%s: %s: status 0x%02x, expected 0x%02x%s", d->name, what, s, want,
		      s & VIRTIO_STATUS_NEEDS_RESET ? " (NEEDS_RESET)" : "");
}

struct nr_wait {
	struct hdev *d;
	bool cfg;
	uint64_t before;
};

static bool needs_reset_done(void *arg)
{
	struct nr_wait *w = arg;
	if (!(virtio_status(&w->d->vp) & VIRTIO_STATUS_NEEDS_RESET))
		return false;
	return !w->cfg || hdev_cfgirqs(w->d) > w->before;
}

bool expect_needs_reset(struct hdev *d, bool cfg_irq, uint64_t cfg_before, const char *what)
{
	struct nr_wait w = {d, cfg_irq, cfg_before};

	wait_for(needs_reset_done, &w, H_WAIT_US);
	uint8_t s = virtio_status(&d->vp);
	d->up = false;
	bool ok = expect(s & VIRTIO_STATUS_NEEDS_RESET,
			 "%s: %s: no DEVICE_NEEDS_RESET within %u ms (2.1.2): status 0x%02x",
			 d->name, what, H_WAIT_US / 1000, s);
	if (ok && cfg_irq)
		ok = expect(hdev_cfgirqs(d) > cfg_before,
			    "%s: %s: NEEDS_RESET after DRIVER_OK without a configuration change "
			    "interrupt (2.1.2)",
			    d->name, what);
	return ok;
}

/* ---- requests ---- */

void raw_desc(struct virtq *vq, uint16_t i, uint64_t addr, uint32_t len, uint16_t flags,
	      uint16_t next)
{
	volatile struct virtq_desc *dsc = &vq->desc[i];
	dsc->addr = addr;
	dsc->len = len;
	dsc->flags = flags;
	dsc->next = next;
}

void raw_publish(struct virtq *vq, uint16_t head)
{
	vq->avail->ring[vq->avail_idx % vq->size] = head;
	__asm__ volatile("" ::: "memory");
	vq->avail_idx++;
	vq->avail->idx = vq->avail_idx;
	__asm__ volatile("mfence" ::: "memory");
	mmio_write16(vq->notify_addr, vq->index);
}

struct used_wait {
	const struct hdev *d;
	uint64_t before;
};

static bool used_and_irq(void *arg)
{
	const struct used_wait *w = arg;
	return virtq_used_pending(&w->d->vq) && hdev_qirqs(w->d) > w->before;
}

bool wait_used(struct hdev *d, uint64_t qirqs_before, uint16_t *id, uint32_t *len)
{
	struct used_wait w = {d, qirqs_before};

	wait_for(used_and_irq, &w, H_WAIT_US);
	return virtq_used_pending(&d->vq) && hdev_qirqs(d) > qirqs_before &&
	       virtq_get_used(&d->vq, id, len);
}

static bool qirq_came(void *arg)
{
	const struct used_wait *w = arg;
	return hdev_qirqs(w->d) > w->before;
}

int blk_request(struct hdev *d, uint32_t type, uint64_t sector, void *buf, uint32_t len,
		const char *what)
{
	struct virtq_buf b[3];
	unsigned n = 0;
	bool in = type == VIRTIO_BLK_T_IN;

	*H.blk_hdr = (struct blk_hdr){type, 0, sector};
	*H.blk_status = 0xFF;
	b[n++] = (struct virtq_buf){H.blk_hdr, sizeof(struct blk_hdr)};
	if (len)
		b[n++] = (struct virtq_buf){buf, len};
	b[n++] = (struct virtq_buf){H.blk_status, 1};
	struct used_wait w = {d, hdev_qirqs(d)};
	int head = in ? virtq_add(&d->vq, b, 1, n - 1) : virtq_add(&d->vq, b, n - 1, 1);
	if (!expect(head >= 0, "%s: %s: no free descriptors", d->name, what))
		return -1;
	virtq_kick(&d->vq);
	bool came = wait_for(used_and_irq, &w, H_WAIT_US);
	uint16_t id;
	uint32_t ulen;
	bool used = virtq_get_used(&d->vq, &id, &ulen);
	if (!expect(came && used && id == (uint16_t)head,
		    "%s: %s: no used entry with its interrupt within %u ms (used %s, id %u of "
		    "head %d, %lu interrupts)",
		    d->name, what, H_WAIT_US / 1000, used ? "yes" : "no", id, head,
		    hdev_qirqs(d) - w.before))
		return -1;
	uint8_t st = *H.blk_status;
	if (st == VIRTIO_BLK_S_OK && in)
		expect(ulen == len + 1, "%s: %s: used len %u, expected %u (2.7.8)", d->name, what,
		       ulen, len + 1);
	return st;
}

static bool rng_works(struct hdev *d, const char *what)
{
	struct virtq_buf b = {H.rng_buf, 64};
	struct used_wait w = {d, hdev_qirqs(d)};

	memset(H.rng_buf, 0, 64);
	int head = virtq_add(&d->vq, &b, 0, 1);
	if (!expect(head >= 0, "%s: %s: no free descriptors", d->name, what))
		return false;
	virtq_kick(&d->vq);
	bool came = wait_for(used_and_irq, &w, H_WAIT_US);
	uint16_t id;
	uint32_t len;
	bool used = virtq_get_used(&d->vq, &id, &len);
	if (!expect(came && used && id == (uint16_t)head && len == 64,
		    "%s: %s: a 64-byte request: used %s, id %u of head %d, len %u, %lu "
		    "interrupts within %u ms",
		    d->name, what, used ? "yes" : "no", id, head, len, hdev_qirqs(d) - w.before,
		    H_WAIT_US / 1000))
		return false;
	unsigned zero = 0;
	for (unsigned i = 0; i < 64; i++)
		zero += H.rng_buf[i] == 0;
	return expect(zero < 64, "%s: %s: 64 bytes of entropy all zero (5.4.6)", d->name, what);
}

static bool blk_works(struct hdev *d, const char *what)
{
	static uint64_t next_sector;
	uint64_t sector = (next_sector += 8) % 1024; /* away from the scratch sectors */
	uint32_t len = 8 * SECTOR;

	memset(H.blk_data, 0x5A, len);
	int st = blk_request(d, VIRTIO_BLK_T_IN, sector, H.blk_data, len, what);
	if (st < 0)
		return false;
	if (!expect(st == VIRTIO_BLK_S_OK, "%s: %s: IN of sector %lu: status %d", d->name, what,
		    sector, st))
		return false;
	for (uint32_t i = 0; i < len; i++) {
		uint64_t at = sector * SECTOR + i;
		if (H.blk_data[i] != host_byte(at))
			return expect(false,
				      "%s: %s: byte %lu of the disk reads 0x%02x, expected 0x%02x",
				      d->name, what, at, H.blk_data[i], host_byte(at));
	}
	return true;
}

int fs_post_init(struct hdev *d, bool kick)
{
	struct fs_msg *m = H.fs_msg;

	memset(m, 0, sizeof(*m));
	m->in.len = sizeof(m->in) + sizeof(m->args);
	m->in.opcode = FUSE_INIT;
	m->in.unique = ++H.fs_unique;
	m->args = (struct fuse_init_in){.major = 7, .minor = 31};
	struct virtq_buf b[4] = {{&m->in, sizeof(m->in)},
				 {&m->args, sizeof(m->args)},
				 {&m->out, sizeof(m->out)},
				 {m->reply, sizeof(m->reply)}};
	int head = virtq_add(&d->vq, b, 2, 2);
	if (head >= 0 && kick)
		virtq_kick(&d->vq);
	return head;
}

bool fs_init_reply_ok(char *why, size_t n)
{
	const struct fs_msg *m = H.fs_msg;
	uint32_t major = *(const volatile uint32_t *)m->reply;

	snprintf(why, n, "reply unique %lu (sent %lu), len %u, error %d, major %u", m->out.unique,
		 H.fs_unique, m->out.len, m->out.error, major);
	return m->out.unique == H.fs_unique && m->out.error == 0 && m->out.len > sizeof(m->out) &&
	       m->out.len <= sizeof(m->out) + sizeof(m->reply) && major == 7;
}

/* A FUSE_INIT and its reply (virtiofsd takes one again after a reset: a
 * new session). */
static bool fs_works(struct hdev *d, const char *what)
{
	uint64_t before = hdev_qirqs(d);
	char why[128];
	uint16_t id = 0;
	uint32_t len = 0;

	int head = fs_post_init(d, true);
	if (!expect(head >= 0, "%s: %s: no free descriptors", d->name, what))
		return false;
	bool used = wait_used(d, before, &id, &len);
	if (!expect(used && id == (uint16_t)head,
		    "%s: %s: FUSE_INIT: no used entry with its interrupt within %u ms (id %u of "
		    "head %d, %lu interrupts)",
		    d->name, what, H_WAIT_US / 1000, id, head, hdev_qirqs(d) - before))
		return false;
	bool ok = fs_init_reply_ok(why, sizeof(why));
	return expect(ok, "%s: %s: FUSE_INIT: %s", d->name, what, why);
}

static bool testdev_works(struct hdev *d, const char *what)
{
	struct used_wait w = {d, hdev_qirqs(d)};

	mmio_write32(d->home[0] + TD_DOORBELL, 0);
	bool came = wait_for(qirq_came, &w, H_WAIT_US);
	return expect(came, "%s: %s: no interrupt within %u ms of a doorbell", d->name, what,
		      H_WAIT_US / 1000);
}

bool hdev_works(struct hdev *d, const char *what)
{
	if (d->kind != HD_TD && !d->up)
		return expect(false, "%s: %s: the device is not set up", d->name, what);
	switch (d->kind) {
	case HD_RNG: return rng_works(d, what);
	case HD_BLK: return blk_works(d, what);
	case HD_FS: return fs_works(d, what);
	default: return testdev_works(d, what);
	}
}

/* ---- config space ---- */

void bar_write(struct hdev *d, unsigned bar, uint32_t v)
{
	pci_write32(0, d->pf->slot, 0, PCI_BAR0 + 4 * bar, v);
}

uint32_t bar_read(struct hdev *d, unsigned bar)
{
	return pci_read32(0, d->pf->slot, 0, PCI_BAR0 + 4 * bar);
}
