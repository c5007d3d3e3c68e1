/*
 * virtio-blk (virtio 1.2, 5.2): one request queue (5.2.2); requests are a
 * device-readable header (type, reserved, sector), data, and a
 * device-writable status byte (5.2.6). Checks: capacity (5.2.4), reads
 * against the host's pattern, a write + FLUSH + read back, GET_ID, reads
 * past the end (VIRTIO_BLK_S_IOERR), and a read-only disk
 * (VIRTIO_BLK_F_RO, writes fail with IOERR), and four reads in flight at
 * once. The disk needs at least 56 sectors. With virtiotest.queues=2,
 * VIRTIO_BLK_F_MQ (num_queues 2): a read on each request queue alone, its
 * interrupt on that queue's vector only, then reads on both at once.
 *
 * The disk the host prepares: byte i (from the start of the disk) is
 *     (i * 131 + (i >> 9) * 7 + 3) & 0xFF
 * The guest writes sectors 16..23 (WRITE_SECTOR, WRITE_COUNT) with that
 * byte XOR 0xA5; the host checks the file afterwards
 * (tests/guest/virtio_blk_test.py).
 */
#include "virtiotest.h"

#include "guest/ram.h"

#define SECTOR	      512u
#define CHUNK_SECTORS 32u /* per read request: 16 KiB in four 4 KiB descriptors */
#define MAX_READ      2048u
#define WRITE_SECTOR  16u
#define WRITE_COUNT   8u
#define PAGE	      4096u
#define ID_BYTES      20u /* 5.2.6: GET_ID returns up to 20 bytes */

/* 5.2.3 feature bits. */
#define VIRTIO_BLK_F_SEG_MAX  2
#define VIRTIO_BLK_F_RO	      5
#define VIRTIO_BLK_F_BLK_SIZE 6
#define VIRTIO_BLK_F_FLUSH    9
#define VIRTIO_BLK_F_MQ	      12

/* 5.2.6 request types and status values. */
#define VIRTIO_BLK_T_IN	    0
#define VIRTIO_BLK_T_OUT    1
#define VIRTIO_BLK_T_FLUSH  4
#define VIRTIO_BLK_T_GET_ID 8
#define VIRTIO_BLK_S_OK	    0
#define VIRTIO_BLK_S_IOERR  1

/* 5.2.4: struct virtio_blk_config offsets. */
#define BLK_CFG_CAPACITY   0
#define BLK_CFG_SEG_MAX	   12
#define BLK_CFG_BLK_SIZE   20
#define BLK_CFG_NUM_QUEUES 34

struct blk_hdr {
	uint32_t type;
	uint32_t reserved;
	uint64_t sector;
};

static struct blk_hdr *hdr;
static uint8_t *status;
static uint8_t *data; /* CHUNK_SECTORS sectors */
static bool wrote;    /* the OUT of sectors 16-23 succeeded */

static uint8_t host_byte(uint64_t i)
{
	return (uint8_t)(i * 131 + (i >> 9) * 7 + 3);
}

static uint8_t guest_byte(uint64_t i)
{
	return host_byte(i) ^ 0xA5;
}

static bool written(uint64_t sector)
{
	return wrote && sector >= WRITE_SECTOR && sector < WRITE_SECTOR + WRITE_COUNT;
}

/* One request: header, `len` bytes of data (device-writable if `in`) in
 * descriptors of at most a page, status. Returns whether it came back
 * with its interrupt; *st is the status byte (0xff if untouched). */
static bool request(struct vt_dev *d, uint32_t type, uint64_t sector, void *buf, uint32_t len,
		    bool in, uint8_t *st, struct vt_wait *w)
{
	struct virtq_buf b[2 + CHUNK_SECTORS * SECTOR / PAGE];
	unsigned n = 0, ndata = 0;
	struct irq_snap s;

	hdr->type = type;
	hdr->reserved = 0;
	hdr->sector = sector;
	*status = 0xFF;
	b[n++] = (struct virtq_buf){hdr, sizeof(*hdr)};
	for (uint32_t off = 0; off < len && n < 1 + CHUNK_SECTORS * SECTOR / PAGE; off += PAGE) {
		uint32_t chunk = len - off < PAGE ? len - off : PAGE;
		b[n++] = (struct virtq_buf){(uint8_t *)buf + off, chunk};
		ndata++;
	}
	b[n++] = (struct virtq_buf){status, 1};
	vt_wait_prepare(d, &s);
	int head = virtq_add(&d->vq[0], b, in ? 1 : 1 + ndata, in ? 1 + ndata : 1);
	virtq_kick(&d->vq[0]);
	vt_wait(d, &d->vq[0], &s, head, VT_WAIT_US, true, 1, w);
	*st = *status;
	if (head < 0)
		snprintf(w->why, sizeof(w->why), "no free descriptors");
	return head >= 0 && !w->why[0];
}

/* Compares len bytes read from `sector` with what the disk should hold;
 * returns the offset of the first mismatch or -1. */
static int64_t mismatch(const uint8_t *p, uint64_t sector, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++) {
		uint64_t at = sector * SECTOR + i;
		uint8_t want = written(at / SECTOR) ? guest_byte(at) : host_byte(at);
		if (p[i] != want)
			return (int64_t)at;
	}
	return -1;
}

/* Reads [first, first + count) in chunks; aggregated checks. */
static void read_range(struct vt_dev *d, uint64_t first, uint64_t count, const char *what)
{
	unsigned reqs = 0, bad = 0;
	int64_t first_diff = -1;
	char why[200] = "", w1[200];

	for (uint64_t s = first; s < first + count; s += CHUNK_SECTORS) {
		uint32_t n = (uint32_t)(first + count - s < CHUNK_SECTORS ? first + count - s
									  : CHUNK_SECTORS);
		struct vt_wait w;
		uint8_t st;
		memset(data, 0x5A, n * SECTOR);
		bool ok = request(d, VIRTIO_BLK_T_IN, s, data, n * SECTOR, true, &st, &w);
		reqs++;
		/* 2.7.8: used len = bytes written into device-writable buffers,
		 * here the data and the status byte. */
		if (!ok || st != VIRTIO_BLK_S_OK || w.len != n * SECTOR + 1) {
			if (!bad++)
				snprintf(why, sizeof(why),
					 "sector %lu: %s%sstatus 0x%02x, used len %u", s, w.why,
					 w.why[0] ? "; " : "", st, w.len);
			continue;
		}
		int64_t diff = mismatch(data, s, n * SECTOR);
		if (diff >= 0 && first_diff < 0) {
			first_diff = diff;
			uint64_t i = (uint64_t)diff;
			snprintf(w1, sizeof(w1),
				 "byte %lu (sector %lu) reads 0x%02x, expected 0x%02x", i,
				 i / SECTOR, data[i - s * SECTOR],
				 written(i / SECTOR) ? guest_byte(i) : host_byte(i));
		}
	}
	char c1[200], c2[200];
	snprintf(c1, sizeof(c1),
		 "%s: %u IN requests of up to %u sectors: status OK, used len = data + 1, one "
		 "interrupt each",
		 what, reqs, CHUNK_SECTORS);
	dcheck(d, bad == 0, c1, "%u bad, first %s", bad, why);
	snprintf(c2, sizeof(c2), "%s: data matches the %s", what,
		 !wrote || first >= WRITE_SECTOR + WRITE_COUNT || first + count <= WRITE_SECTOR
		     ? "host's pattern"
		     : "host's pattern, and the guest's in sectors 16-23");
	dcheck(d, bad == 0 && first_diff < 0, c2, "%s", bad ? "not all requests completed" : w1);
}

/* Several requests in flight: PAR_REQS 8-sector reads at sectors 24, 32,
 * ... posted together with one notification (2.7.13: the driver may add
 * many buffers before notifying); they may complete in any order (2.7.8).
 * The ring must hold PAR_REQS chains of 3 descriptors. */
#define PAR_REQS  4
#define PAR_FIRST 24u
#define PAR_SECTS 8u

struct par_req {
	struct blk_hdr *hdr;
	uint8_t *status, *buf;
	int head;
	bool done;
};
static struct par_req par[PAR_REQS];

static bool par_alloc(void)
{
	for (unsigned k = 0; k < PAR_REQS; k++) {
		par[k].hdr = ram_alloc(sizeof(struct blk_hdr), 16);
		par[k].status = ram_alloc(1, 1);
		par[k].buf = ram_alloc(PAR_SECTS * SECTOR, PAGE);
		if (!par[k].hdr || !par[k].status || !par[k].buf)
			return false;
	}
	return true;
}

/* The PAR_REQS reads, request k on queue k % nq, each queue notified once. */
static void par_post(struct vt_dev *d, unsigned nq)
{
	for (unsigned k = 0; k < PAR_REQS; k++) {
		struct par_req *r = &par[k];
		*r->hdr = (struct blk_hdr){VIRTIO_BLK_T_IN, 0, PAR_FIRST + PAR_SECTS * k};
		*r->status = 0xFF;
		memset(r->buf, 0x5A, PAR_SECTS * SECTOR);
		struct virtq_buf b[3] = {
		    {r->hdr, sizeof(*r->hdr)}, {r->buf, PAR_SECTS * SECTOR}, {r->status, 1}};
		r->head = virtq_add(&d->vq[k % nq], b, 1, 2);
		r->done = false;
	}
	for (unsigned q = 0; q < nq; q++)
		virtq_kick(&d->vq[q]);
}

static bool all_used(void *p)
{
	return virtq_used_pending(p) >= PAR_REQS;
}

static void parallel_reads(struct vt_dev *d)
{
	struct virtq *vq = &d->vq[0];
	struct irq_snap s;
	unsigned bad = 0, got = 0;
	char why[160] = "";

	vt_wait_prepare(d, &s);
	par_post(d, 1);
	irq_wait_until(&s, all_used, vq, VT_WAIT_US);
	irq_spin_us(VT_SETTLE_US);
	uint16_t head;
	uint32_t len;
	while (virtq_get_used(vq, &head, &len)) {
		got++;
		struct par_req *r = NULL;
		for (unsigned k = 0; k < PAR_REQS; k++)
			if (par[k].head == head && !par[k].done)
				r = &par[k];
		uint64_t sector = r ? r->hdr->sector : 0;
		int64_t diff = r ? mismatch(r->buf, sector, PAR_SECTS * SECTOR) : 0;
		if (!r || *r->status != VIRTIO_BLK_S_OK || len != PAR_SECTS * SECTOR + 1 ||
		    diff >= 0) {
			if (!bad++)
				snprintf(why, sizeof(why),
					 "used id %u%s: status 0x%02x, used len %u, data %s", head,
					 r ? "" : " (no such request in flight)",
					 r ? *r->status : 0, len, diff >= 0 ? "differs" : "ok");
		}
		if (r)
			r->done = true;
	}
	uint64_t irqs = vt_queue_irqs(d, vq, &s);
	uint64_t spurious = d->pin ? irq_pin_spurious_new(&s, d->pin) : 0;
	bool irq_ok = irqs >= 1 && irqs <= PAR_REQS &&
		      (!d->pin || irq_intx_redeliveries_ok(&vt.lapic, irqs, spurious));
	info("%s: %u reads in flight together: %lu interrupt%s", d->tag, PAR_REQS, irqs,
	     irqs == 1 ? "" : "s");
	dcheck(d, got == PAR_REQS && bad == 0 && irq_ok,
	       "4 IN requests in flight, one notification: all used (any order), status OK, used "
	       "len 4097, data matches, 1-4 interrupts (2.7.13, 2.7.8)",
	       "%u of %u used, %u bad (%s), %lu interrupts (%lu finding ISR 0)", got, PAR_REQS, bad,
	       why[0] ? why : "none", irqs, spurious);
}

/* 5.2.2 with VIRTIO_BLK_F_MQ: requestq1..N. First one 8-sector read on
 * each queue by itself: its used entry on that queue, one interrupt on
 * that queue's MSI-X vector and none on the others' (INTx: the one pin,
 * ISR's queue bit). Then the PAR_REQS reads spread over all queues, each
 * queue notified once: all used on the queue they were posted on, data
 * right, every queue interrupted on its own vector. */
static bool queue_used_all(void *p)
{
	const struct vt_dev *d = p;
	for (unsigned q = 0; q < d->nq; q++) {
		unsigned want = 0;
		for (unsigned k = 0; k < PAR_REQS; k++)
			want += k % d->nq == q;
		if (virtq_used_pending(&d->vq[q]) < want)
			return false;
	}
	return true;
}

static void mq_reads(struct vt_dev *d)
{
	char what[160];
	for (unsigned q = 0; q < d->nq; q++) {
		struct par_req *r = &par[0];
		struct irq_snap s;
		struct vt_wait w;
		uint64_t sector = PAR_FIRST + PAR_SECTS * q;
		*r->hdr = (struct blk_hdr){VIRTIO_BLK_T_IN, 0, sector};
		*r->status = 0xFF;
		memset(r->buf, 0x5A, PAR_SECTS * SECTOR);
		struct virtq_buf b[3] = {
		    {r->hdr, sizeof(*r->hdr)}, {r->buf, PAR_SECTS * SECTOR}, {r->status, 1}};
		vt_wait_prepare(d, &s);
		int head = virtq_add(&d->vq[q], b, 1, 2);
		virtq_kick(&d->vq[q]);
		vt_wait(d, &d->vq[q], &s, head, VT_WAIT_US, true, 1, &w);
		uint64_t elsewhere = 0;
		for (unsigned o = 0; o < d->nq && d->msix; o++)
			if (o != q)
				elsewhere += irq_new(&s, d->vec_queue[o]);
		snprintf(what, sizeof(what),
			 "request queue %u alone: an IN is used there, status OK, data matches, "
			 "%s (5.2.2)",
			 q,
			 d->msix ? "one interrupt on its own vector, none on the other queue's"
				 : "its interrupt on the pin with ISR's queue bit");
		dcheck(d,
		       head >= 0 && !w.why[0] && *r->status == VIRTIO_BLK_S_OK &&
			   w.len == PAR_SECTS * SECTOR + 1 &&
			   mismatch(r->buf, sector, PAR_SECTS * SECTOR) < 0 && elsewhere == 0,
		       what,
		       "%s%sstatus 0x%02x, used len %u, %lu interrupts on other queues' vectors",
		       w.why, w.why[0] ? "; " : "", *r->status, w.len, elsewhere);
	}

	/* All queues at once: request k on queue k % nq. */
	struct irq_snap s;
	unsigned bad = 0, got = 0;
	char why[160] = "";
	vt_wait_prepare(d, &s);
	par_post(d, d->nq);
	irq_wait_until(&s, queue_used_all, d, VT_WAIT_US);
	irq_spin_us(VT_SETTLE_US);
	uint64_t irqs[VT_MAX_QUEUES] = {0};
	bool irq_ok = true;
	for (unsigned q = 0; q < d->nq; q++) {
		uint16_t head;
		uint32_t len;
		while (virtq_get_used(&d->vq[q], &head, &len)) {
			got++;
			struct par_req *r = NULL;
			for (unsigned k = q; k < PAR_REQS; k += d->nq)
				if (par[k].head == head && !par[k].done)
					r = &par[k];
			int64_t diff = r ? mismatch(r->buf, r->hdr->sector, PAR_SECTS * SECTOR) : 0;
			if (!r || *r->status != VIRTIO_BLK_S_OK || len != PAR_SECTS * SECTOR + 1 ||
			    diff >= 0) {
				if (!bad++)
					snprintf(
					    why, sizeof(why),
					    "queue %u used id %u%s: status 0x%02x, used len %u, "
					    "data %s",
					    q, head, r ? "" : " (not posted on this queue)",
					    r ? *r->status : 0, len, diff >= 0 ? "differs" : "ok");
			}
			if (r)
				r->done = true;
		}
		irqs[q] = vt_queue_irqs(d, &d->vq[q], &s);
		if (d->msix)
			irq_ok = irq_ok && irqs[q] >= 1 && irqs[q] <= PAR_REQS / d->nq;
	}
	uint64_t spurious = d->pin ? irq_pin_spurious_new(&s, d->pin) : 0;
	if (d->pin) /* one pin for all: at least one interrupt, at most one per request */
		irq_ok = irqs[0] >= 1 && irqs[0] <= PAR_REQS &&
			 irq_intx_redeliveries_ok(&vt.lapic, irqs[0], spurious);
	info("%s: %u reads on %u queues at once: interrupts %lu / %lu%s", d->tag, PAR_REQS, d->nq,
	     irqs[0], irqs[1], d->pin ? " (one pin: counted once)" : " (per queue vector)");
	snprintf(what, sizeof(what),
		 "%u IN requests over %u request queues, each notified once: all used on their "
		 "queue, data matches, %s",
		 PAR_REQS, d->nq,
		 d->msix ? "every queue interrupted on its own vector"
			 : "interrupts on the one pin");
	dcheck(d, got == PAR_REQS && bad == 0 && irq_ok, what,
	       "%u of %u used, %u bad (%s), interrupts %lu / %lu (%lu finding ISR 0)", got,
	       PAR_REQS, bad, why[0] ? why : "none", irqs[0], irqs[1], spurious);
}

static void write_flush(struct vt_dev *d)
{
	struct vt_wait w;
	uint8_t st;

	for (uint32_t i = 0; i < WRITE_COUNT * SECTOR; i++)
		data[i] = guest_byte((uint64_t)WRITE_SECTOR * SECTOR + i);
	bool ok =
	    request(d, VIRTIO_BLK_T_OUT, WRITE_SECTOR, data, WRITE_COUNT * SECTOR, false, &st, &w);
	if (vt.ro)
		dcheck(d, ok && st == VIRTIO_BLK_S_IOERR,
		       "read-only: OUT of sectors 16-23 fails with VIRTIO_BLK_S_IOERR (5.2.6.2)",
		       "%s%sstatus 0x%02x, used len %u", w.why, w.why[0] ? "; " : "", st, w.len);
	else
		wrote = dcheck(d, ok && st == VIRTIO_BLK_S_OK && w.len == 1,
			       "OUT of sectors 16-23 (two data descriptors): status OK, used len 1",
			       "%s%sstatus 0x%02x, used len %u", w.why, w.why[0] ? "; " : "", st,
			       w.len);

	if (!(d->features & VIRTIO_F_BIT(VIRTIO_BLK_F_FLUSH)))
		return;
	/* 5.2.6: FLUSH has no data; sector is 0 (5.2.6.1: the driver MUST set it to 0). */
	ok = request(d, VIRTIO_BLK_T_FLUSH, 0, NULL, 0, false, &st, &w);
	dcheck(d, ok && st == VIRTIO_BLK_S_OK, "FLUSH: status OK (5.2.6)",
	       "%s%sstatus 0x%02x, used len %u", w.why, w.why[0] ? "; " : "", st, w.len);
}

static void get_id(struct vt_dev *d)
{
	struct vt_wait w;
	uint8_t st;
	char id[ID_BYTES + 1];

	memset(data, 0, ID_BYTES);
	bool ok = request(d, VIRTIO_BLK_T_GET_ID, 0, data, ID_BYTES, true, &st, &w);
	unsigned len = 0;
	bool printable = true;
	while (len < ID_BYTES && data[len]) {
		printable = printable && data[len] >= 0x20 && data[len] < 0x7F;
		id[len] = (char)data[len];
		len++;
	}
	id[len] = 0;
	dcheck(d, ok && st == VIRTIO_BLK_S_OK && len > 0 && printable,
	       "GET_ID: status OK, a non-empty printable ID (5.2.6)",
	       "%s%sstatus 0x%02x, %u ID bytes%s", w.why, w.why[0] ? "; " : "", st, len,
	       printable ? "" : " (not printable)");
	if (ok && st == VIRTIO_BLK_S_OK)
		info("%s GET_ID: \"%s\" (used len %u)", d->tag, printable ? id : "?", w.len);
}

/* Requests beyond the capacity must fail, not wrap or truncate. */
static void past_end(struct vt_dev *d, uint64_t capacity)
{
	struct vt_wait w;
	uint8_t st;

	bool ok = request(d, VIRTIO_BLK_T_IN, capacity, data, SECTOR, true, &st, &w);
	dcheck(d, ok && st == VIRTIO_BLK_S_IOERR,
	       "IN of the sector at capacity: status VIRTIO_BLK_S_IOERR (1)",
	       "%s%sstatus 0x%02x, used len %u", w.why, w.why[0] ? "; " : "", st, w.len);
	ok = request(d, VIRTIO_BLK_T_IN, capacity - 1, data, 2 * SECTOR, true, &st, &w);
	dcheck(d, ok && st == VIRTIO_BLK_S_IOERR,
	       "IN of 2 sectors from the last one (straddling the end): status IOERR",
	       "%s%sstatus 0x%02x, used len %u", w.why, w.why[0] ? "; " : "", st, w.len);
	if (vt.ro)
		return;
	memset(data, 0xEE, SECTOR);
	ok = request(d, VIRTIO_BLK_T_OUT, capacity, data, SECTOR, false, &st, &w);
	dcheck(d, ok && st == VIRTIO_BLK_S_IOERR,
	       "OUT of the sector at capacity: status IOERR (the file must not grow)",
	       "%s%sstatus 0x%02x, used len %u", w.why, w.why[0] ? "; " : "", st, w.len);
}

void vt_blk(struct vt_dev *d)
{
	static const uint16_t qmax[VT_MAX_MQ] = {32, 32};
	uint64_t wanted = VIRTIO_F_BIT(VIRTIO_BLK_F_SEG_MAX) | VIRTIO_F_BIT(VIRTIO_BLK_F_BLK_SIZE) |
			  VIRTIO_F_BIT(VIRTIO_BLK_F_FLUSH) | VIRTIO_F_BIT(VIRTIO_BLK_F_RO) |
			  (vt.queues > 1 ? VIRTIO_F_BIT(VIRTIO_BLK_F_MQ) : 0);

	hdr = ram_alloc(sizeof(*hdr), 16);
	status = ram_alloc(1, 1);
	data = ram_alloc(CHUNK_SECTORS * SECTOR, PAGE);
	if (!dcheck(d, hdr && status && data && par_alloc(), "request buffers allocated",
		    "out of RAM pool"))
		return;
	if (!vt_bringup(d, wanted, vt.queues, qmax))
		return;
	bool mq = d->offered & VIRTIO_F_BIT(VIRTIO_BLK_F_MQ);
	if (vt.queues > 1) {
		/* 5.2.4: num_queues, read when VIRTIO_BLK_F_MQ is offered. */
		uint16_t nq = (uint16_t)virtio_config_read(&d->vp, BLK_CFG_NUM_QUEUES, 2);
		dcheck(
		    d, mq && nq == vt.queues,
		    "virtiotest.queues=2: VIRTIO_BLK_F_MQ (bit 12) offered, num_queues 2 (5.2.3, "
		    "5.2.4)",
		    "features 0x%016lx, num_queues %u", d->offered, nq);
	} else {
		dcheck(d, !mq, "one request queue: VIRTIO_BLK_F_MQ is not offered",
		       "features 0x%016lx", d->offered);
	}
	bool ro = d->offered & VIRTIO_F_BIT(VIRTIO_BLK_F_RO);
	if (vt.ro)
		dcheck(d, ro, "virtiotest.ro=1: VIRTIO_BLK_F_RO (bit 5) is offered (5.2.3)",
		       "features 0x%016lx", d->offered);
	else
		dcheck(d, !ro, "a writable disk: VIRTIO_BLK_F_RO is not offered",
		       "features 0x%016lx", d->offered);
	dcheck(d, d->offered & VIRTIO_F_BIT(VIRTIO_BLK_F_FLUSH),
	       "VIRTIO_BLK_F_FLUSH (bit 9) is offered", "features 0x%016lx", d->offered);

	/* 5.2.4: capacity in 512-byte sectors, a 64-bit field (two 32-bit
	 * reads under one config generation). */
	uint64_t capacity = virtio_config_read(&d->vp, BLK_CFG_CAPACITY, 8);
	uint32_t seg_max = (uint32_t)virtio_config_read(&d->vp, BLK_CFG_SEG_MAX, 4);
	uint32_t blk_size = (uint32_t)virtio_config_read(&d->vp, BLK_CFG_BLK_SIZE, 4);
	info("%s config: capacity %lu sectors (%lu KiB), seg_max %u, blk_size %u", d->tag, capacity,
	     capacity / 2, seg_max, blk_size);
	if (vt.sectors)
		dcheck(d, capacity == vt.sectors,
		       "capacity equals virtiotest.sectors (5.2.4, 512-byte sectors)",
		       "%lu, expected %lu", capacity, vt.sectors);
	if (d->features & VIRTIO_F_BIT(VIRTIO_BLK_F_BLK_SIZE))
		dcheck(d, blk_size >= SECTOR && !(blk_size & (blk_size - 1)),
		       "blk_size is a power of two >= 512", "%u", blk_size);
	if (d->features & VIRTIO_F_BIT(VIRTIO_BLK_F_SEG_MAX))
		dcheck(d, seg_max >= 1 + CHUNK_SECTORS * SECTOR / PAGE,
		       "seg_max allows this driver's 4 data segments", "%u", seg_max);
	if (!dcheck(d, capacity >= PAR_FIRST + PAR_REQS * PAR_SECTS,
		    "capacity is at least 56 sectors (the ranges this test writes and reads)",
		    "%lu", capacity))
		return;

	uint64_t nread = capacity < MAX_READ ? capacity : MAX_READ;
	char what[64];
	snprintf(what, sizeof(what), "read of sectors 0-%lu", nread - 1);
	read_range(d, 0, nread, what);
	write_flush(d);
	read_range(d, WRITE_SECTOR - 1, WRITE_COUNT + 2, "read back of sectors 15-24");
	parallel_reads(d);
	if (d->nq > 1)
		mq_reads(d);
	get_id(d);
	past_end(d, capacity);
	vt_finish(d);
}
