/*
 * vbench: MSI-X vs INTx as a guest sees it, and VM-exit costs, from one
 * guest binary that boots under this VMM (64-bit boot protocol or ELF
 * entry) and under QEMU's -kernel (the PVH note; guest/pvh.h), so the two
 * can be compared request for request (scripts/vmm-bench).
 *
 * It drives virtio-rng and virtio-blk (modern virtio-pci, virtio 1.2) with
 * the kit's driver core (guest/virtio.h), VIRTIO_F_VERSION_1 only (no event
 * index, no indirect descriptors), one queue, interrupts by MSI-X (queue 0
 * on table entry 0, no configuration vector) or INTx (the MP table's IOAPIC
 * pin, the handler reading ISR):
 *   rng: 64-byte requests; blk: 4 KiB reads at random 4 KiB-aligned
 *   sectors (fixed-seed splitmix64), status checked;
 *   QD1: one request at a time, posted, notified, completed by its
 *   interrupt; QDn: n in flight, every reaped slot re-posted, one notify
 *   per batch.
 * Latency per request: TSC from before it is posted to when its used
 * entry is reaped after the interrupt (CPL 3, the TSC rate measured
 * against the PIT). And exit costs, TSC around one instruction at CPL 3:
 * a port read of COM1's scratch register (a port-I/O exit to the VMM's
 * UART), a 16-bit MMIO read of a virtio common-configuration register (an
 * MMIO exit to the device model), and a virtio notify write with nothing
 * new in the ring (an ioeventfd: KVM signals an eventfd, no exit to the
 * VMM's userspace).
 *
 * All of it runs at CPL 3 (native on our KVM hosts, where ring 0 is
 * emulated); only the interrupt handlers (vbench_isr.S) run in ring 0.
 *
 * Multiqueue (vbench.tests=blkmq): virtio-blk with VIRTIO_BLK_F_MQ and
 * vbench.blk_queues request queues (5.2.2), each on its own MSI-X entry
 * (or all on the one INTx pin); the high-depth run only, its requests
 * spread over the queues (slot i on queue i % N), each queue notified
 * once per batch; the figure is blk-read-4k-mq with queues=N. With
 * blk_queues=1 it is the blk high-depth run again, for a same-run
 * baseline.
 *
 * virtio-net transmit (vbench.tests=nettx): vbench.net_queues queue pairs
 * (more than one: VIRTIO_NET_F_MQ and _CTRL_VQ, VQ_PAIRS_SET on the control
 * queue, polled), 1514-byte broadcast frames (a 12-byte header and the
 * frame in one descriptor), vbench.blk_depth of them in flight spread over
 * the transmit queues (slot i on transmitq i % N), each transmitq on its
 * own MSI-X entry or all on the INTx pin; receive queues get no buffers.
 * The figure is net-tx-1514 with queues=N, frames per second as requests.
 *
 * Keys: vbench.mode=msix|intx (default msix); vbench.tests=LIST of rng,
 * blk, blkmq, nettx, exits, or none (default rng,blk,exits);
 * vbench.blk_queues=N (1-4, default 2: blkmq's queues); vbench.net_queues=N
 * (1-2, default 1: nettx's queue pairs); vbench.qd1=N requests at
 * QD1 (default 2000); vbench.qdn=N requests at the high depth (default
 * 20000); vbench.blk_depth=N (default 32); vbench.rng_depth=N (default 8:
 * QEMU's virtio-rng queue has 8 entries); vbench.exits=N samples per exit
 * kind (default 2000).
 *
 * Output: one line per figure,
 *   vbench: result test=T mode=M qd=D requests=N elapsed_ns=E irqs=I
 *           spurious=S errors=X lat_ns=MIN,P50,P90,P99,MAX,MEAN
 *   vbench: result test=exit-pio samples=N lat_ns=MIN,P50,P90,P99,MAX,MEAN
 * (percentiles nearest-rank), then "vbench: done" and debug-exit 0 (exit
 * code 1 under both VMMs), or "vbench: FAIL ..." and debug-exit 1.
 */
#include "guest/apic.h"
#include "guest/cmdline.h"
#include "guest/irq.h"
#include "guest/kit.h"
#include "guest/msix.h"
#include "guest/pci.h"
#include "guest/pcienum.h"
#include "guest/pvh.h"
#include "guest/ram.h"
#include "guest/tsc.h"
#include "guest/virtio.h"

#define VEC_MSIX 0x60
#define VEC_INTX 0x61

#define POOL_BYTES   (24ull << 20)
#define MAX_FUNCS    32
#define MAX_DEPTH    64
#define WAIT_US	     2000000
#define RNG_BYTES    64
#define BLK_BYTES    4096
#define COM1_SCRATCH 0x3FF

/* virtio 1.2, 5.2.6 */
#define VIRTIO_BLK_T_IN	     0
#define VIRTIO_BLK_S_OK	     0
#define BLK_CFG_CAPACITY     0
#define TESTS_RNG	     1u
#define TESTS_BLK	     2u
#define TESTS_EXITS	     4u
#define TESTS_BLKMQ	     8u
#define TESTS_NETTX	     16u
#define MAX_QUEUES	     5 /* blk: 4 request queues; net: 2 pairs and the control queue */
#define NET_FRAME	     1514
#define NET_HDR		     12
#define VIRTIO_NET_F_CTRL_VQ 17
#define VIRTIO_NET_F_MQ	     22
#define VIRTIO_BLK_F_MQ	     12
#define BLK_CFG_NUM_QUEUES   34

void vbench_isr_msix(void);
void vbench_isr_intx(void);
extern volatile uint64_t vbench_irqs, vbench_spurious;
extern volatile uint64_t vbench_isr_addr;

struct blk_hdr {
	uint32_t type;
	uint32_t reserved;
	uint64_t sector;
};

struct slot {
	struct blk_hdr *hdr;
	uint8_t *buf;
	volatile uint8_t *status;
	uint64_t t0;
	bool busy;
};

struct vdev {
	const struct pci_func *pf;
	const char *name;
	struct virtio_pci_dev vp;
	struct msix_info mx;
	struct virtq vqs[MAX_QUEUES];
	unsigned nq;		    /* queues set up */
	unsigned lanes;		    /* queues requests go on: blk's all, net's transmitqs */
	uint8_t lane_q[MAX_QUEUES]; /* lane -> queue index */
	unsigned pin;
	bool up;
};

static struct {
	bool msix;
	unsigned tests;
	uint64_t qd1, qdn, exits;
	unsigned blk_depth, rng_depth;
	uint64_t tsc_hz;
	uint8_t apic_id;
	struct mp_routing mp;
	uint64_t *lat; /* TSC ticks per request */
	uint64_t lat_cap;
	struct slot slots[MAX_DEPTH];
	uint16_t head_slot[MAX_QUEUES][VIRTQ_GUEST_MAX];
	unsigned blk_queues, net_queues;
	uint64_t rng_state;
	uint64_t blk_blocks; /* 4 KiB blocks on the disk */
	unsigned failures;
	char why[200];
} vb;

static struct pci_func funcs[MAX_FUNCS];
static struct vdev rng, blk, net;

static const char *const known_keys[] = {"vbench.mode",	 "vbench.tests",      "vbench.qd1",
					 "vbench.qdn",	 "vbench.blk_depth",  "vbench.rng_depth",
					 "vbench.exits", "vbench.blk_queues", "vbench.net_queues"};

__attribute__((format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(vb.why, sizeof(vb.why), fmt, ap);
	va_end(ap);
	printf("vbench: FAIL %s\n", vb.why);
	vb.failures++;
}

/* ---- command line ---- */

static bool key_u64(const char *cl, const char *key, uint64_t *out, uint64_t lo, uint64_t hi)
{
	char why[200];
	if (cmdline_u64_in(cl, key, out, lo, hi, why, sizeof(why)))
		return true;
	fail("%s", why);
	return false;
}

static bool parse_tests(const char *val, size_t len)
{
	size_t i = 0;

	vb.tests = 0;
	if (len == 4 && !strncmp(val, "none", 4))
		return true;
	while (i < len) {
		size_t j = i;
		while (j < len && val[j] != ',')
			j++;
		if (j - i == 3 && !strncmp(val + i, "rng", 3))
			vb.tests |= TESTS_RNG;
		else if (j - i == 3 && !strncmp(val + i, "blk", 3))
			vb.tests |= TESTS_BLK;
		else if (j - i == 5 && !strncmp(val + i, "blkmq", 5))
			vb.tests |= TESTS_BLKMQ;
		else if (j - i == 5 && !strncmp(val + i, "nettx", 5))
			vb.tests |= TESTS_NETTX;
		else if (j - i == 5 && !strncmp(val + i, "exits", 5))
			vb.tests |= TESTS_EXITS;
		else
			return false;
		i = j + 1;
	}
	return true;
}

static bool parse_cmdline(const struct boot_params *bp)
{
	const char *cl = cmdline_get(bp), *val;
	size_t len;
	char first[64];
	uint64_t bd = 32, rd = 8, bq = 2, nq = 1;

	vb.msix = true;
	vb.tests = TESTS_RNG | TESTS_BLK | TESTS_EXITS;
	vb.qd1 = 2000;
	vb.qdn = 20000;
	vb.exits = 2000;
	vb.blk_queues = 2;
	vb.net_queues = 1;
	if (!cl)
		return true;
	if (cmdline_unknown_keys(cl, "vbench.", known_keys,
				 sizeof(known_keys) / sizeof(*known_keys), first, sizeof(first))) {
		fail("unknown command-line key \"%s\"", first);
		return false;
	}
	if (cmdline_value(cl, "vbench.mode", &val, &len)) {
		if (len == 4 && !strncmp(val, "intx", 4)) {
			vb.msix = false;
		} else if (!(len == 4 && !strncmp(val, "msix", 4))) {
			fail("vbench.mode=\"%.*s\" is not msix or intx", (int)len, val);
			return false;
		}
	}
	if (cmdline_value(cl, "vbench.tests", &val, &len) && !parse_tests(val, len)) {
		fail("vbench.tests=\"%.*s\" is not none or a list of rng, blk, blkmq, nettx, exits",
		     (int)len, val);
		return false;
	}
	if (!key_u64(cl, "vbench.qd1", &vb.qd1, 1, 10000000) ||
	    !key_u64(cl, "vbench.qdn", &vb.qdn, 1, 10000000) ||
	    !key_u64(cl, "vbench.exits", &vb.exits, 1, 10000000) ||
	    !key_u64(cl, "vbench.blk_depth", &bd, 1, MAX_DEPTH) ||
	    !key_u64(cl, "vbench.rng_depth", &rd, 1, MAX_DEPTH) ||
	    !key_u64(cl, "vbench.blk_queues", &bq, 1, 4) ||
	    !key_u64(cl, "vbench.net_queues", &nq, 1, 2))
		return false;
	vb.blk_queues = (unsigned)bq;
	vb.net_queues = (unsigned)nq;
	vb.blk_depth = (unsigned)bd;
	vb.rng_depth = (unsigned)rd;
	return true;
}

/* ---- figures ---- */

static void sift_down(uint64_t *a, uint64_t start, uint64_t n)
{
	uint64_t root = start;
	while (2 * root + 1 < n) {
		uint64_t child = 2 * root + 1;
		if (child + 1 < n && a[child] < a[child + 1])
			child++;
		if (a[root] >= a[child])
			return;
		uint64_t t = a[root];
		a[root] = a[child];
		a[child] = t;
		root = child;
	}
}

static void heapsort_u64(uint64_t *a, uint64_t n)
{
	for (uint64_t i = n / 2; i-- > 0;)
		sift_down(a, i, n);
	for (uint64_t end = n; end-- > 1;) {
		uint64_t t = a[0];
		a[0] = a[end];
		a[end] = t;
		sift_down(a, 0, end);
	}
}

static uint64_t ticks_ns(uint64_t t)
{
	/* t * 1e9 / hz without overflow for t < 2^64 / 1e3. */
	return t / vb.tsc_hz * 1000000000ull + (t % vb.tsc_hz) * 1000000000ull / vb.tsc_hz;
}

/* Nearest rank: the smallest value with at least p% of the samples at or below it. */
static uint64_t pct(const uint64_t *a, uint64_t n, unsigned p)
{
	uint64_t rank = (n * p + 99) / 100;
	return a[rank ? rank - 1 : 0];
}

static void print_lat(uint64_t n)
{
	uint64_t *a = vb.lat, sum = 0;

	heapsort_u64(a, n);
	for (uint64_t i = 0; i < n; i++)
		sum += a[i];
	printf(" lat_ns=%lu,%lu,%lu,%lu,%lu,%lu\n", ticks_ns(a[0]), ticks_ns(pct(a, n, 50)),
	       ticks_ns(pct(a, n, 90)), ticks_ns(pct(a, n, 99)), ticks_ns(a[n - 1]),
	       ticks_ns(sum / n));
}

/* ---- devices ---- */

static bool route_intx(struct vdev *d)
{
	unsigned matches;
	uint32_t lo, hi;

	if (!vb.mp.ok) {
		fail("%s: INTx: MP table: %s", d->name, vb.mp.why);
		return false;
	}
	const struct mp_intsrc *e =
	    mp_routing_pci_intx(&vb.mp, d->pf->slot, d->pf->irq_pin, &matches);
	if (!e || e->dst_irq >= IRQ_IOAPIC_PINS) {
		fail("%s: no MP I/O interrupt entry for 00:%02x.0 pin %u", d->name, d->pf->slot,
		     d->pf->irq_pin);
		return false;
	}
	d->pin = e->dst_irq;
	irq_pin_route(d->pin, irq_rte_for(VEC_INTX, e->flags), vb.apic_id, &lo, &hi);
	return true;
}

/* Up with `nq` queues (more than one: VIRTIO_BLK_F_MQ, 5.2.2); queue q on
 * MSI-X entry q, or every queue on the INTx pin. */
static bool bringup(struct vdev *d, uint16_t type, uint16_t qmax, unsigned nq)
{
	const char *why;
	uint16_t vec;

	uint16_t cmd = pci_read16(0, d->pf->slot, 0, PCI_COMMAND);
	pci_write16(0, d->pf->slot, 0, PCI_COMMAND, cmd | PCI_CMD_MEMORY | PCI_CMD_MASTER);
	if (!virtio_pci_parse(d->pf->slot, type, d->pf->bar, d->pf->bar_size, &d->vp, &why)) {
		fail("%s: %s", d->name, why);
		return false;
	}
	if (!virtio_reset(&d->vp, 100000)) {
		fail("%s: reset does not read back 0", d->name);
		return false;
	}
	virtio_set_status(&d->vp, VIRTIO_STATUS_ACKNOWLEDGE);
	virtio_set_status(&d->vp, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	uint64_t offered = virtio_device_features(&d->vp);
	uint64_t want = VIRTIO_F_BIT(VIRTIO_F_VERSION_1);
	if (!(offered & VIRTIO_F_BIT(VIRTIO_F_VERSION_1))) {
		fail("%s: no VIRTIO_F_VERSION_1 (a legacy device?)", d->name);
		return false;
	}
	if (type == VIRTIO_ID_NET && vb.net_queues > 1) {
		uint64_t mq = VIRTIO_F_BIT(VIRTIO_NET_F_MQ) | VIRTIO_F_BIT(VIRTIO_NET_F_CTRL_VQ);
		uint64_t pairs = (offered & mq) == mq ? virtio_config_read(&d->vp, 8, 2) : 1;
		if (pairs < vb.net_queues) {
			fail("%s: %u queue pairs asked for, the device has %lu", d->name,
			     vb.net_queues, pairs);
			return false;
		}
		want |= mq;
	} else if (type == VIRTIO_ID_BLOCK && nq > 1) {
		uint64_t have = offered & VIRTIO_F_BIT(VIRTIO_BLK_F_MQ)
				    ? virtio_config_read(&d->vp, BLK_CFG_NUM_QUEUES, 2)
				    : 1;
		if (have < nq) {
			fail("%s: %u queues asked for, the device has %lu (VIRTIO_BLK_F_MQ %s)",
			     d->name, nq, have,
			     offered & VIRTIO_F_BIT(VIRTIO_BLK_F_MQ) ? "offered" : "not offered");
			return false;
		}
		want |= VIRTIO_F_BIT(VIRTIO_BLK_F_MQ);
	}
	virtio_set_driver_features(&d->vp, want);
	virtio_set_status(&d->vp, 3 | VIRTIO_STATUS_FEATURES_OK);
	if (!(virtio_status(&d->vp) & VIRTIO_STATUS_FEATURES_OK)) {
		fail("%s: FEATURES_OK did not stick", d->name);
		return false;
	}
	bool has_msix = msix_probe(d->pf->slot, d->pf->bar, &d->mx, &why);
	if (vb.msix) {
		uint8_t v[MAX_QUEUES] = {VEC_MSIX, VEC_MSIX, VEC_MSIX, VEC_MSIX, VEC_MSIX};
		if (!has_msix) {
			fail("%s: vbench.mode=msix but %s", d->name, why);
			return false;
		}
		if (!msix_enable(&d->mx, vb.apic_id, v, nq, &why)) {
			fail("%s: MSI-X: %s", d->name, why);
			return false;
		}
		virtio_cc_write16(&d->vp, VIRTIO_CC_MSIX_CONFIG, VIRTIO_MSI_NO_VECTOR);
	} else if (!route_intx(d)) {
		return false;
	}
	for (unsigned q = 0; q < nq; q++) {
		uint16_t entry = vb.msix ? (uint16_t)q : VIRTIO_MSI_NO_VECTOR;
		/* net: the transmit queues interrupt, nothing else does (no
		 * receive buffers; the control queue is polled). */
		if (type == VIRTIO_ID_NET && (q % 2 == 0 || q == 2 * vb.net_queues))
			entry = VIRTIO_MSI_NO_VECTOR;
		if (!virtq_setup(&d->vp, q, qmax, entry, &d->vqs[q], &vec, &why)) {
			fail("%s: queue %u: %s", d->name, q, why);
			return false;
		}
		if (vb.msix && vec != entry) {
			fail("%s: queue %u: queue_msix_vector reads 0x%04x, not entry %u", d->name,
			     q, vec, entry);
			return false;
		}
	}
	d->nq = nq;
	d->lanes = type == VIRTIO_ID_NET ? vb.net_queues : nq;
	for (unsigned l = 0; l < d->lanes; l++)
		d->lane_q[l] = (uint8_t)(type == VIRTIO_ID_NET ? 2 * l + 1 : l);
	virtio_set_status(&d->vp, 3 | VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK);
	if (vb.msix)
		printf("vbench: %s 00:%02x.0: %u queue%s of size %u (device max %u), MSI-X entr%s "
		       "0%s\n",
		       d->name, d->pf->slot, nq, nq == 1 ? "" : "s", d->vqs[0].size,
		       d->vqs[0].dev_size, nq == 1 ? "y" : "ies",
		       nq == 1 ? "" : "..N-1, one per queue");
	else
		printf(
		    "vbench: %s 00:%02x.0: %u queue%s of size %u (device max %u), INTx on IOAPIC "
		    "pin %u\n",
		    d->name, d->pf->slot, nq, nq == 1 ? "" : "s", d->vqs[0].size,
		    d->vqs[0].dev_size, d->pin);
	d->up = true;
	return true;
}

static void teardown(struct vdev *d)
{
	if (!d->up)
		return;
	virtio_reset(&d->vp, 100000);
	if (vb.msix)
		msix_disable(&d->mx);
	else
		irq_pin_mask(d->pin, true);
	d->up = false;
}

/* ---- requests ---- */

static uint64_t splitmix64(void)
{
	uint64_t z = (vb.rng_state += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static bool alloc_slots(unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct slot *s = &vb.slots[i];
		if (s->buf)
			continue;
		s->hdr = ram_alloc(sizeof(*s->hdr), 16);
		s->status = ram_alloc(1, 1);
		s->buf = ram_alloc(BLK_BYTES, 4096);
		if (!s->hdr || !s->status || !s->buf)
			return false;
	}
	return true;
}

/* Slot i lives on lane i % lanes. */
static int post(struct vdev *d, unsigned i)
{
	struct slot *s = &vb.slots[i];
	unsigned lane = i % d->lanes, q = d->lane_q[lane];
	int head;

	s->t0 = rdtsc();
	if (d == &net) {
		/* 5.1.6.2: flags 0, gso NONE, num_buffers 0; the header and
		 * the frame in one descriptor (5.1.6.6: any layout). */
		struct virtq_buf b = {s->buf, NET_HDR + NET_FRAME};
		head = virtq_add(&d->vqs[q], &b, 1, 0);
	} else if (d == &blk) {
		*s->hdr = (struct blk_hdr){VIRTIO_BLK_T_IN, 0, (splitmix64() % vb.blk_blocks) * 8};
		*s->status = 0xFF;
		struct virtq_buf b[3] = {
		    {s->hdr, sizeof(*s->hdr)}, {s->buf, BLK_BYTES}, {(void *)s->status, 1}};
		head = virtq_add(&d->vqs[q], b, 1, 2);
	} else {
		struct virtq_buf b = {s->buf, RNG_BYTES};
		head = virtq_add(&d->vqs[q], &b, 0, 1);
	}
	if (head >= 0) {
		vb.head_slot[lane][head] = (uint16_t)i;
		s->busy = true;
	}
	return head;
}

/* Takes every used entry of every queue; returns how many, or -1 on a bad
 * one. */
static int reap(struct vdev *d, uint64_t *nlat, unsigned *errors, unsigned *freed, unsigned nfree)
{
	uint16_t head;
	uint32_t len;
	int n = 0;

	for (unsigned l = 0; l < d->lanes; l++) {
		unsigned q = d->lane_q[l];
		struct virtq *vq = &d->vqs[q];
		while (virtq_get_used(vq, &head, &len)) {
			uint64_t t1 = rdtsc();
			if (head >= vq->size || !vb.slots[vb.head_slot[l][head]].busy) {
				fail("%s: queue %u: used id %u is not a request in flight", d->name,
				     q, head);
				return -1;
			}
			struct slot *s = &vb.slots[vb.head_slot[l][head]];
			s->busy = false;
			if (d == &net	? len != 0 /* 5.1.6.2: nothing written */
			    : d == &blk ? *s->status != VIRTIO_BLK_S_OK || len != BLK_BYTES + 1
					: len != RNG_BYTES)
				(*errors)++;
			if (*nlat < vb.lat_cap)
				vb.lat[(*nlat)++] = t1 - s->t0;
			if ((unsigned)n < nfree)
				freed[n] = vb.head_slot[l][head];
			n++;
		}
	}
	return n;
}

static bool any_used(struct vdev *d)
{
	for (unsigned l = 0; l < d->lanes; l++)
		if (virtq_used_pending(&d->vqs[d->lane_q[l]]))
			return true;
	return false;
}

/* Waits for an interrupt after `seen` with used entries behind it. */
static bool wait_irq(struct vdev *d, uint64_t seen)
{
	uint64_t deadline = rdtsc() + vb.tsc_hz / 1000000 * WAIT_US;

	while (vbench_irqs == seen || !any_used(d)) {
		if (rdtsc() > deadline)
			return false;
		cpu_relax();
	}
	return true;
}

static void run_requests(struct vdev *d, const char *test, unsigned depth, uint64_t total)
{
	unsigned freed[MAX_DEPTH], errors = 0;
	uint64_t done = 0, posted = 0, nlat = 0;
	unsigned per_slot = d == &blk ? 3u : 1u;

	if (depth > d->vqs[d->lane_q[0]].size / per_slot * d->lanes)
		depth = d->vqs[d->lane_q[0]].size / per_slot * d->lanes;
	if (depth > total)
		depth = (unsigned)total;
	uint64_t irq0 = vbench_irqs, spur0 = vbench_spurious, seen = irq0;
	uint64_t t_start = rdtsc();
	for (unsigned i = 0; i < depth; i++, posted++)
		post(d, i);
	for (unsigned l = 0; l < d->lanes; l++)
		virtq_kick(&d->vqs[d->lane_q[l]]);
	while (done < total) {
		/* An interrupt since the last reap, with used entries behind
		 * it: completions are taken when their interrupt came. */
		if (!wait_irq(d, seen)) {
			fail(
			    "%s %s qd %u: no completion with an interrupt within %u ms (%lu of %lu "
			    "done)",
			    d->name, test, depth, WAIT_US / 1000, done, total);
			return;
		}
		seen = vbench_irqs;
		int n = reap(d, &nlat, &errors, freed, MAX_DEPTH);
		if (n < 0)
			return;
		done += (uint64_t)n;
		unsigned kick = 0; /* queues with new buffers: one notify each */
		for (int k = 0; k < n && posted < total; k++, posted++) {
			post(d, freed[k]);
			kick |= 1u << (freed[k] % d->lanes);
		}
		for (unsigned l = 0; l < d->lanes; l++)
			if (kick & (1u << l))
				virtq_kick(&d->vqs[d->lane_q[l]]);
	}
	uint64_t elapsed = rdtsc() - t_start;
	printf(
	    "vbench: result test=%s mode=%s qd=%u queues=%u requests=%lu elapsed_ns=%lu irqs=%lu "
	    "spurious=%lu errors=%u",
	    test, vb.msix ? "msix" : "intx", depth, d->lanes, done, ticks_ns(elapsed),
	    vbench_irqs - irq0, vbench_spurious - spur0, errors);
	print_lat(nlat);
	if (errors)
		fail("%s %s qd %u: %u requests came back with an error", d->name, test, depth,
		     errors);
}

static void bench_device(struct vdev *d, const char *test, unsigned depth)
{
	vbench_isr_addr = d->vp.isr.addr;
	run_requests(d, test, 1, vb.qd1);
	run_requests(d, test, depth, vb.qdn);
}

/* ---- virtio-net ---- */

/* 5.1.6.5.5: VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET on the control queue (the last
 * one), its completion polled. The control queue asks for no interrupt
 * (2.7.7), as Linux does for a queue it polls: under INTx its interrupt
 * would otherwise leave the shared line high into the measurement, so the
 * first batch's completion raises no new edge, and this host delivered
 * that pending level interrupt only ~10 ms later (seen under this VMM and
 * under QEMU alike). */
static bool net_pairs_set(struct vdev *d, unsigned pairs)
{
	struct virtq *cq = &d->vqs[2 * pairs];
	virtq_set_no_interrupt(cq, true);
	struct slot *s = &vb.slots[0];
	uint8_t *cmd = s->buf, *ack = s->buf + 64;
	cmd[0] = 4; /* VIRTIO_NET_CTRL_MQ */
	cmd[1] = 0; /* VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET */
	cmd[2] = (uint8_t)pairs;
	cmd[3] = (uint8_t)(pairs >> 8);
	*ack = 0xEE;
	struct virtq_buf b[2] = {{cmd, 4}, {ack, 1}};
	virtq_add(cq, b, 1, 1);
	virtq_kick(cq);
	uint64_t deadline = rdtsc() + vb.tsc_hz / 1000000 * WAIT_US;
	uint16_t head;
	uint32_t len;
	while (!virtq_get_used(cq, &head, &len))
		if (rdtsc() > deadline) {
			fail("net: VQ_PAIRS_SET %u: no answer within %u ms", pairs, WAIT_US / 1000);
			return false;
		}
	if (*ack != 0) {
		fail("net: VQ_PAIRS_SET %u answered %u, not VIRTIO_NET_OK", pairs, *ack);
		return false;
	}
	return true;
}

/* Every slot's buffer: a zero header, then a broadcast frame of local
 * experimental EtherType 0x88b5. */
static void net_frames(void)
{
	for (unsigned i = 0; i < MAX_DEPTH; i++) {
		uint8_t *f = vb.slots[i].buf;
		memset(f, 0, NET_HDR + NET_FRAME);
		memset(f + NET_HDR, 0xFF, 6);
		f[NET_HDR + 6] = 0x02;
		f[NET_HDR + 11] = (uint8_t)i;
		f[NET_HDR + 12] = 0x88;
		f[NET_HDR + 13] = 0xB5;
	}
}

/* ---- exit costs ---- */

static void exit_costs(void)
{
	struct vdev *d = blk.up ? &blk : NULL;
	uint64_t n = vb.exits < vb.lat_cap ? vb.exits : vb.lat_cap;

	for (uint64_t i = 0; i < n; i++) {
		uint64_t t0 = rdtsc();
		(void)inb(COM1_SCRATCH);
		vb.lat[i] = rdtsc() - t0;
	}
	printf("vbench: result test=exit-pio samples=%lu", n);
	print_lat(n);
	if (!d) {
		printf("vbench: no virtio device: no MMIO or notify exit figures\n");
		return;
	}
	uint64_t a = d->vp.common.addr + VIRTIO_CC_NUM_QUEUES;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t t0 = rdtsc();
		(void)mmio_read16(a);
		vb.lat[i] = rdtsc() - t0;
	}
	printf("vbench: result test=exit-mmio samples=%lu", n);
	print_lat(n);
	/* Nothing new in the available ring: the device wakes, finds no work. */
	for (uint64_t i = 0; i < n; i++) {
		uint64_t t0 = rdtsc();
		mmio_write16(d->vqs[0].notify_addr, d->vqs[0].index);
		vb.lat[i] = rdtsc() - t0;
	}
	printf("vbench: result test=exit-notify samples=%lu", n);
	print_lat(n);
}

/* ---- main ---- */

static void find_devices(void)
{
	unsigned n = pci_enum_bus0(funcs, MAX_FUNCS);

	for (unsigned i = 0; i < n && i < MAX_FUNCS; i++) {
		const struct pci_func *f = &funcs[i];
		if (f->vendor != VIRTIO_PCI_VENDOR)
			continue;
		/* The kit maps 0..4 GiB: a BAR above it (firmware's choice)
		 * cannot be reached. */
		for (unsigned b = 0; b < PCI_NUM_BARS; b++)
			if (f->bar[b] + f->bar_size[b] > 0x100000000ull)
				printf("vbench: 00:%02x.0 BAR%u at 0x%lx lies above 4 GiB\n",
				       f->slot, b, f->bar[b]);
		if (f->device == VIRTIO_PCI_MODERN_DEVICE + VIRTIO_ID_RNG && !rng.pf)
			rng = (struct vdev){.pf = f, .name = "rng"};
		else if (f->device == VIRTIO_PCI_MODERN_DEVICE + VIRTIO_ID_BLOCK && !blk.pf)
			blk = (struct vdev){.pf = f, .name = "blk"};
		else if (f->device == VIRTIO_PCI_MODERN_DEVICE + VIRTIO_ID_NET && !net.pf)
			net = (struct vdev){.pf = f, .name = "net"};
	}
}

static uint64_t user_main(void *arg)
{
	const struct boot_params *bp = arg;
	const char *why;

	if (!parse_cmdline(bp))
		return 1;
	printf("vbench: booted through %s, mode %s\n",
	       guest_booted_pvh ? "the PVH entry" : "the 64-bit entry", vb.msix ? "MSI-X" : "INTx");
	if (!vb.tests) {
		printf("vbench: done\n");
		return 0;
	}
	vb.tsc_hz = tsc_hz_from_pit();
	if (vb.tsc_hz < 100000000ull || vb.tsc_hz > 10000000000ull) {
		fail("TSC rate %lu Hz from the PIT is implausible", vb.tsc_hz);
		return 1;
	}
	irq_set_tsc_hz(vb.tsc_hz);
	printf("vbench: TSC %lu kHz (PIT)\n", vb.tsc_hz / 1000);
	if (!ram_pool_init(bp, POOL_BYTES, &why)) {
		fail("RAM pool: %s", why);
		return 1;
	}
	vb.lat_cap = vb.qd1 > vb.qdn ? vb.qd1 : vb.qdn;
	if (vb.exits > vb.lat_cap)
		vb.lat_cap = vb.exits;
	if (vb.lat_cap > (POOL_BYTES / 2) / 8)
		vb.lat_cap = (POOL_BYTES / 2) / 8;
	vb.lat = ram_alloc(vb.lat_cap * 8, 4096);
	if (!vb.lat || !alloc_slots(MAX_DEPTH)) {
		fail("RAM pool too small");
		return 1;
	}
	vb.apic_id = (uint8_t)(lapic_read(LAPIC_ID) >> 24);
	lapic_write(LAPIC_TPR, 0);
	lapic_write(LAPIC_SVR, LAPIC_SVR_ENABLE | 0xFF);
	mp_routing_load(&vb.mp);
	if (vb.mp.ok)
		irq_set_ioapic(vb.mp.ioapic);
	vb.rng_state = 0x5EED;

	find_devices();
	if ((vb.tests & TESTS_RNG) && !rng.pf)
		fail("no virtio-rng device on bus 0");
	if ((vb.tests & (TESTS_BLK | TESTS_BLKMQ | TESTS_EXITS)) && !blk.pf)
		fail("no virtio-blk device on bus 0");
	/* Exit costs first, while both VMMs' host threads are in the same
	 * fresh state: measured here, QEMU's notify write cost tripled after
	 * a few thousand QD1 requests (its main loop then woke on the vCPU's
	 * core). */
	if ((vb.tests & (TESTS_BLK | TESTS_EXITS)) && blk.pf &&
	    bringup(&blk, VIRTIO_ID_BLOCK, 256, 1)) {
		uint64_t cap = virtio_config_read(&blk.vp, BLK_CFG_CAPACITY, 8);
		vb.blk_blocks = cap / 8;
		printf("vbench: blk capacity %lu sectors\n", cap);
		if (vb.tests & TESTS_EXITS)
			exit_costs();
		if (vb.blk_blocks == 0)
			fail("blk: the disk is smaller than 4 KiB");
		else if (vb.tests & TESTS_BLK)
			bench_device(&blk, "blk-read-4k", vb.blk_depth);
		teardown(&blk);
	}
	/* Multiqueue: the high depth only, spread over the queues. */
	if ((vb.tests & TESTS_BLKMQ) && blk.pf &&
	    bringup(&blk, VIRTIO_ID_BLOCK, 256, vb.blk_queues)) {
		vb.blk_blocks = virtio_config_read(&blk.vp, BLK_CFG_CAPACITY, 8) / 8;
		vbench_isr_addr = blk.vp.isr.addr;
		if (vb.blk_blocks == 0)
			fail("blk: the disk is smaller than 4 KiB");
		else
			run_requests(&blk, "blk-read-4k-mq", vb.blk_depth, vb.qdn);
		teardown(&blk);
	}
	if ((vb.tests & TESTS_NETTX) && !net.pf)
		fail("no virtio-net device on bus 0");
	unsigned net_nq = vb.net_queues > 1 ? 2 * vb.net_queues + 1 : 2;
	if ((vb.tests & TESTS_NETTX) && net.pf && bringup(&net, VIRTIO_ID_NET, 256, net_nq)) {
		if (vb.net_queues == 1 || net_pairs_set(&net, vb.net_queues)) {
			net_frames();
			vbench_isr_addr = net.vp.isr.addr;
			run_requests(&net, "net-tx-1514", vb.blk_depth, vb.qdn);
		}
		teardown(&net);
	}
	if ((vb.tests & TESTS_RNG) && rng.pf && bringup(&rng, VIRTIO_ID_RNG, 256, 1)) {
		bench_device(&rng, "rng-64b", vb.rng_depth);
		teardown(&rng);
	}
	if (vb.failures)
		return 1;
	printf("vbench: done\n");
	return 0;
}

static void on_spurious(struct trap_frame *frame)
{
	(void)frame; /* SDM 11.9: no EOI for the spurious vector */
}

int guest_main(struct boot_params *bp)
{
	trap_set_handler(0xFF, on_spurious);
	trap_set_raw_gate(VEC_MSIX, vbench_isr_msix);
	trap_set_raw_gate(VEC_INTX, vbench_isr_intx);
	if (run_user_irq(user_main, bp))
		return 1;
	guest_exit(0);
}
