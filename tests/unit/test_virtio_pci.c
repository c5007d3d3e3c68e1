/*
 * The modern virtio-pci transport (virtio 1.2, 4.1) driven like a guest
 * driver: capabilities found by walking config space, the common
 * configuration through BAR0 on the MMIO bus, notifications as 16-bit
 * writes at the notify address (or the ioeventfd KVM would signal) served
 * by a fake main loop, interrupts into the recording sink. The device
 * behind it is a probe that fills every device-writable buffer with 0xA5.
 */
#include "virtio_helpers.h"

#include "devices/pci/msix.h"
#include "devices/pci/pci.h"
#include "devices/virtio/virtio_pci.h"
#include "devices/virtio/virtio_rng.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SLOT	   3
#define PIN	   19 /* 16 + (3 + INTA# - 1) % 8 */
#define SLOT2	   4
#define PIN2	   20
#define NQ	   3
#define QMAX	   16
#define QSZ	   8
#define PROBE_TYPE 9
#define PROBE_F0   (1ULL << 0)
#define PROBE_F5   (1ULL << 5) /* both in PROBE_FEATURES */
#define F_V1	   VIRTIO_FEATURE(VIRTIO_F_VERSION_1)
#define RINGS	   0x100000ULL
#define BUFS	   0x400000ULL

static struct pci_rig rig;
static struct fake_host host;
static struct virtio_probe pr[2];
static struct virtio_pci vp[2];
static unsigned nvp;
static struct vpci_view v, v2;
static struct vring_drv ring[NQ];
static struct virtio_host hostif;

static void add_probe(uint8_t slot, enum irq_mode mode)
{
	struct virtio_probe *p = &pr[nvp];
	virtio_probe_init(p, PROBE_TYPE, NQ, QMAX);
	char name[16];
	snprintf(name, sizeof(name), "probe%u", nvp);
	ck_assert_int_eq(
	    virtio_pci_init(&vp[nvp], &p->vdev, name, &rig.irq, &rig.ram.m, &hostif, mode), 0);
	ck_assert_int_eq(pci_bus_add_device(&rig.pci, &vp[nvp].pci, slot, 1), 0);
	nvp++;
}

static void rig_up(enum irq_intx_delivery intx, enum irq_mode mode, unsigned ndev)
{
	pci_rig_init(&rig, IRQ_MSI_SIGNAL, intx);
	hostif = fake_host_make(&host, &rig.log);
	nvp = 0;
	add_probe(SLOT, mode);
	if (ndev > 1)
		add_probe(SLOT2, mode);
	ck_assert_int_eq(pci_bus_assign_resources(&rig.pci), 0);
	vpv_init(&v, &rig, SLOT);
	if (ndev > 1)
		vpv_init(&v2, &rig, SLOT2);
	for (unsigned q = 0; q < NQ; q++)
		vrd_layout(&ring[q], rig.ram.buf, QSZ, RINGS + 0x10000ULL * q);
}

static void setup(void)
{
	rig_up(IRQ_INTX_LINE, IRQ_MODE_MSIX, 1);
}
static void setup_two(void)
{
	rig_up(IRQ_INTX_LINE, IRQ_MODE_MSIX, 2);
}
static void setup_intx(void)
{
	rig_up(IRQ_INTX_LINE, IRQ_MODE_INTX, 1);
}
static void setup_resample(void)
{
	rig_up(IRQ_INTX_RESAMPLE, IRQ_MODE_MSIX, 1);
}

static void teardown(void)
{
	for (unsigned i = 0; i < nvp; i++)
		virtio_pci_destroy(&vp[i]);
	pci_rig_free(&rig);
}

/* FEATURES_OK with VERSION_1, every queue set up, DRIVER_OK. */
static void bring_up(const struct vpci_view *view, struct vring_drv *rings)
{
	ck_assert(vpv_negotiate(view, F_V1));
	for (unsigned q = 0; q < NQ; q++)
		vpv_queue(view, q, &rings[q]);
	vpv_set_status(view, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
				 VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK);
	ck_assert_uint_eq(vpv_status(view) & VIRTIO_CONFIG_S_NEEDS_RESET, 0);
}

/* One device-writable buffer of len bytes posted on q (head = slot). */
static uint64_t post(struct vring_drv *r, unsigned q, uint32_t len)
{
	uint16_t h = (uint16_t)(r->avail_idx % r->size);
	uint64_t a = BUFS + 0x10000ULL * q + 0x1000ULL * h;
	vrd_desc(r, h, a, len, VQ_WRITE, 0);
	vrd_publish(r, h);
	return a;
}

static void kick(const struct vpci_view *view, unsigned q)
{
	vpv_notify(view, q);
	fake_host_poll(&host);
}

static uint16_t q_rd(unsigned q, unsigned off)
{
	vpv_select(&v, q);
	return (uint16_t)vpv_rd(&v, off, 2);
}

static uint64_t q_addr(unsigned q, unsigned off)
{
	vpv_select(&v, q);
	return vpv_rd(&v, off, 4) | (uint64_t)vpv_rd(&v, off + 4, 4) << 32;
}

static unsigned msix_table_size(void)
{
	return (cfg_rd(&rig, SLOT, v.msix_cap + 2u, 2) & 0x7FF) + 1;
}

static void msix_all(const struct vpci_view *view, unsigned n)
{
	vpv_msix_enable(view, true);
	for (unsigned i = 0; i < n; i++)
		vpv_msix_program(view, i, MSI_ADDR(i), MSI_DATA(i), false);
}

/* ---- identity and layout (4.1.2, 4.1.4) ---- */

START_TEST(test_ids_are_modern)
{
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_VENDOR_ID, 2), 0x1AF4);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_DEVICE_ID, 2), 0x1040 + PROBE_TYPE);
	ck_assert_uint_ge(cfg_rd(&rig, SLOT, PCI_REVISION_ID, 1), 1);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_SUBSYSTEM_VENDOR_ID, 2), 0x1AF4);
	/* A real device too: virtio-rng is type 4. */
	static struct virtio_rng rng;
	static struct virtio_pci rvp;
	struct fake_host h2;
	struct virtio_host h = fake_host_make(&h2, &rig.log);
	ck_assert_int_eq(virtio_rng_init(&rng, NULL), 0);
	ck_assert_int_eq(
	    virtio_pci_init(&rvp, &rng.vdev, "rng", &rig.irq, &rig.ram.m, &h, IRQ_MODE_MSIX), 0);
	ck_assert_int_eq(pci_bus_add_device(&rig.pci, &rvp.pci, 7, 1), 0);
	ck_assert_uint_eq(cfg_rd(&rig, 7, PCI_DEVICE_ID, 2), 0x1044);
	virtio_pci_destroy(&rvp);
	virtio_rng_destroy(&rng);
}
END_TEST

START_TEST(test_subsystem_id_at_least_0x40)
{
	/* 4.1.2.1: "Non-transitional devices SHOULD have a PCI Subsystem
	 * Device ID of 0x40 or higher" (keeps legacy drivers off). */
	ck_assert_uint_ge(cfg_rd(&rig, SLOT, PCI_SUBSYSTEM_ID, 2), 0x40);
}
END_TEST

/* One vendor capability's fields, checked against 4.1.4. */
static void check_vendor_cap(uint8_t c, unsigned *seen)
{
	unsigned len = cfg_rd(&rig, SLOT, c + 2u, 1), type = cfg_rd(&rig, SLOT, c + 3u, 1);
	unsigned bar = cfg_rd(&rig, SLOT, c + 4u, 1);
	uint32_t off = cfg_rd(&rig, SLOT, c + 8u, 4), n = cfg_rd(&rig, SLOT, c + 12u, 4);
	ck_assert_uint_ge(len, 16); /* struct virtio_pci_cap */
	ck_assert(type >= 1 && type <= 5);
	seen[type]++;
	if (type == VPCI_PCICFG) {
		ck_assert_uint_ge(len, 20);
		return;
	}
	ck_assert_uint_eq(bar, 0);
	uint64_t size = rig_bar_size(&rig, SLOT, (int)bar);
	ck_assert_msg(off < size && n <= size - off, "type %u at 0x%x+0x%x, BAR 0x%llx", type, off,
		      n, (unsigned long long)size);
	if (type == VPCI_COMMON) {
		ck_assert_uint_eq(off % 4, 0);
		ck_assert_uint_ge(n, VPC_COMMON_LEN);
	} else if (type == VPCI_NOTIFY) {
		ck_assert_uint_ge(len, 20);
		ck_assert_uint_eq(off % 2, 0);
		uint32_t m = cfg_rd(&rig, SLOT, c + 16u, 4);
		/* 0 or an even power of 2 (4.1.4.4.1) */
		ck_assert(m == 0 || ((m & (m - 1)) == 0 && m % 2 == 0));
		for (unsigned q = 0; q < NQ; q++)
			ck_assert_uint_ge(n, q_rd(q, VPC_Q_NOFF) * m + 2);
	} else if (type == VPCI_ISR) {
		ck_assert_uint_ge(n, 1);
	} else {
		ck_assert_uint_eq(off % 4, 0);
		ck_assert_uint_ge(n, PROBE_CONFIG_SIZE);
	}
}

START_TEST(test_capabilities_point_inside_bar0)
{
	ck_assert(cfg_rd(&rig, SLOT, PCI_STATUS, 2) & PCI_STATUS_CAP_LIST);
	unsigned seen[6] = {0};
	uint8_t c = (uint8_t)cfg_rd(&rig, SLOT, PCI_CAPABILITY_LIST, 1);
	for (unsigned steps = 0; c; steps++) {
		ck_assert_uint_lt(steps, 48);
		ck_assert_uint_ge(c, 0x40);
		if (cfg_rd(&rig, SLOT, c, 1) == 0x09)
			check_vendor_cap(c, seen);
		c = (uint8_t)cfg_rd(&rig, SLOT, c + 1u, 1);
	}
	for (unsigned t = 1; t <= 5; t++)
		ck_assert_msg(seen[t] >= 1, "no capability of cfg_type %u", t);
	ck_assert_uint_eq(vpv_rd(&v, VPC_NUMQ, 2), NQ);
	ck_assert_uint_eq(vpv_cfg(&v, 0, 4), 0x33323130u); /* the probe's config bytes */
	ck_assert_uint_eq(vpv_cfg(&v, 8, 2), 0x3938);
}
END_TEST

START_TEST(test_msix_on_bar2_in_pages_of_its_own)
{
	ck_assert_uint_ne(v.msix_cap, 0);
	uint32_t t = cfg_rd(&rig, SLOT, v.msix_cap + 4u, 4),
		 p = cfg_rd(&rig, SLOT, v.msix_cap + 8u, 4);
	ck_assert_uint_eq(t & 7, 2);
	ck_assert_uint_eq(p & 7, 2);
	ck_assert_uint_ge(msix_table_size(), NQ + 1); /* a vector per queue and config */
	uint64_t tab0 = v.msix_table & ~4095ULL,
		 tab1 = (v.msix_table + 16ULL * msix_table_size() - 1) | 4095;
	uint64_t pba0 = v.msix_pba & ~4095ULL, pba1 = v.msix_pba | 4095;
	/* PCI 3.0 6.8.2: nothing else in a 4 KiB page of the table or PBA. */
	for (unsigned type = 1; type <= 4; type++) {
		uint32_t n = cfg_rd(&rig, SLOT, v.cap[type] + 12u, 4);
		uint64_t s = v.at[type] & ~4095ULL, e = (v.at[type] + (n ? n : 1) - 1) | 4095;
		ck_assert_msg(e < tab0 || s > tab1,
			      "cfg_type %u shares a page with the MSI-X table", type);
		ck_assert_msg(e < pba0 || s > pba1, "cfg_type %u shares a page with the PBA", type);
	}
}
END_TEST

/* ---- notifications through ioeventfds (4.1.4.4, 4.1.5.2) ---- */

START_TEST(test_ioeventfd_per_queue_at_notify_address)
{
	ck_assert_uint_eq(fake_host_ioeventfds(&host), NQ);
	int fds[NQ];
	for (unsigned q = 0; q < NQ; q++) {
		uint64_t a = vpv_notify_addr(&v, q);
		fds[q] = fake_host_ioeventfd_at(&host, a);
		ck_assert_msg(fds[q] >= 0, "no ioeventfd at queue %u's notify address", q);
		ck_assert_int_ge(fake_host_watch_of(&host, fds[q]),
				 0); /* the main loop serves it */
		for (unsigned i = 0; i < host.nio; i++)
			if (host.io[i].gpa == a)
				ck_assert_uint_eq(host.io[i].len, 2);
		for (unsigned j = 0; j < q; j++)
			ck_assert_int_ne(fds[j], fds[q]);
	}
	/* What KVM does on a guest write: signal the fd; the loop runs q1. */
	bring_up(&v, ring);
	post(&ring[1], 1, 64);
	uint64_t one = 1;
	ck_assert_int_eq(write(fds[1], &one, 8), 8);
	fake_host_poll(&host);
	ck_assert_uint_eq(pr[0].notified[1], 1);
	ck_assert_uint_eq(pr[0].notified[0] + pr[0].notified[2], 0);
	ck_assert_uint_eq(vrd_used_idx(&ring[1]), 1);
}
END_TEST

START_TEST(test_ioeventfds_follow_bar0)
{
	uint64_t old[NQ];
	for (unsigned q = 0; q < NQ; q++)
		old[q] = vpv_notify_addr(&v, q);
	uint64_t nb = 0xE0000000ULL;
	conf1_write(&rig, 0, SLOT, 0, PCI_BASE_ADDRESS_0, 4, (uint32_t)nb);
	ck_assert_uint_eq(rig_bar_addr(&rig, SLOT, 0), nb);
	vpv_init(&v, &rig, SLOT);
	ck_assert_uint_eq(fake_host_ioeventfds(&host), NQ);
	for (unsigned q = 0; q < NQ; q++) {
		ck_assert_int_eq(fake_host_ioeventfd_at(&host, old[q]), -1);
		ck_assert_int_ge(fake_host_ioeventfd_at(&host, vpv_notify_addr(&v, q)), 0);
	}
	bring_up(&v, ring); /* and the moved BAR works */
	post(&ring[0], 0, 32);
	kick(&v, 0);
	ck_assert_uint_eq(vrd_used_idx(&ring[0]), 1);
	/* Memory decoding off: nothing may catch writes any more. */
	uint16_t cmd = (uint16_t)cfg_rd(&rig, SLOT, PCI_COMMAND, 2);
	conf1_write(&rig, 0, SLOT, 0, PCI_COMMAND, 2, cmd & ~PCI_COMMAND_MEMORY);
	ck_assert_uint_eq(fake_host_ioeventfds(&host), 0);
	conf1_write(&rig, 0, SLOT, 0, PCI_COMMAND, 2, cmd);
	ck_assert_uint_eq(fake_host_ioeventfds(&host), NQ);
}
END_TEST

/* ---- feature negotiation (2.2, 3.1.1, 4.1.4.3) ---- */

START_TEST(test_device_features_offered)
{
	uint64_t f = vpv_device_features(&v);
	ck_assert(f & F_V1);
	ck_assert(f & VIRTIO_FEATURE(VIRTIO_RING_F_EVENT_IDX));
	ck_assert(f & VIRTIO_FEATURE(VIRTIO_RING_F_INDIRECT_DESC));
	ck_assert_uint_eq(f & (PROBE_F0 | PROBE_F5), PROBE_F0 | PROBE_F5);
	vpv_wr(&v, VPC_DFSELECT, 4, 2);
	ck_assert_uint_eq(vpv_rd(&v, VPC_DF, 4), 0);
}
END_TEST

START_TEST(test_features_ok_for_valid_subset)
{
	uint64_t want = F_V1 | PROBE_F5 | VIRTIO_FEATURE(VIRTIO_RING_F_EVENT_IDX);
	ck_assert(vpv_negotiate(&v, want));
	vpv_wr(&v, VPC_GFSELECT, 4, 0);
	ck_assert_uint_eq(vpv_rd(&v, VPC_GF, 4), (uint32_t)want);
	vpv_wr(&v, VPC_GFSELECT, 4, 1);
	ck_assert_uint_eq(vpv_rd(&v, VPC_GF, 4), (uint32_t)(want >> 32));
	ck_assert_uint_eq(vpv_status(&v), VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
					      VIRTIO_CONFIG_S_FEATURES_OK);
}
END_TEST

START_TEST(test_features_ok_refused_without_version_1)
{
	ck_assert(!vpv_negotiate(&v, PROBE_F0));
	ck_assert_uint_eq(vpv_status(&v), VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
}
END_TEST

START_TEST(test_features_ok_refused_for_unoffered_bits)
{
	ck_assert(!vpv_negotiate(&v, F_V1 | (1ULL << 1)));
	ck_assert(!vpv_negotiate(&v, F_V1 | (1ULL << 40)));
	ck_assert(vpv_negotiate(&v, F_V1)); /* and a clean retry works */
}
END_TEST

/* ---- queue set-up (4.1.4.3, 4.1.5.1.3) ---- */

START_TEST(test_queue_setup_ignored_before_features_ok)
{
	vpv_set_status(&v, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
	vpv_queue(&v, 0, &ring[0]);
	ck_assert_uint_eq(q_rd(0, VPC_Q_SIZE), QMAX);
	ck_assert_uint_eq(q_addr(0, VPC_Q_DESC), 0);
	ck_assert_uint_eq(q_rd(0, VPC_Q_ENABLE), 0);
}
END_TEST

START_TEST(test_queue_setup_ignored_after_driver_ok)
{
	bring_up(&v, ring);
	vpv_select(&v, 0);
	vpv_wr(&v, VPC_Q_SIZE, 2, 4);
	vpv_wr(&v, VPC_Q_DESC, 4, 0x300000);
	vpv_wr(&v, VPC_Q_DEVICE, 4, 0x310000);
	ck_assert_uint_eq(q_rd(0, VPC_Q_SIZE), QSZ);
	ck_assert_uint_eq(q_addr(0, VPC_Q_DESC), ring[0].desc);
	ck_assert_uint_eq(q_addr(0, VPC_Q_DEVICE), ring[0].used);
	ck_assert_uint_eq(q_rd(0, VPC_Q_ENABLE), 1);
	post(&ring[0], 0, 16); /* still served from the original ring */
	kick(&v, 0);
	ck_assert_uint_eq(vrd_used_idx(&ring[0]), 1);
}
END_TEST

START_TEST(test_vectors_writable_at_any_time)
{
	vpv_wr(&v, VPC_MSIX, 2, 1);
	vpv_select(&v, 2);
	vpv_wr(&v, VPC_Q_MSIX, 2, 3);
	ck_assert_uint_eq(vpv_rd(&v, VPC_MSIX, 2), 1);
	ck_assert_uint_eq(q_rd(2, VPC_Q_MSIX), 3);
	bring_up(&v, ring);
	vpv_wr(&v, VPC_MSIX, 2, 2);
	vpv_select(&v, 0);
	vpv_wr(&v, VPC_Q_MSIX, 2, 0);
	ck_assert_uint_eq(vpv_rd(&v, VPC_MSIX, 2), 2);
	ck_assert_uint_eq(q_rd(0, VPC_Q_MSIX), 0);
	vpv_wr(&v, VPC_MSIX, 2, VIRTIO_MSI_NO_VECTOR); /* unmapping (4.1.5.1.2) */
	ck_assert_uint_eq(vpv_rd(&v, VPC_MSIX, 2), VIRTIO_MSI_NO_VECTOR);
}
END_TEST

START_TEST(test_vector_beyond_table_reads_no_vector)
{
	unsigned n = msix_table_size();
	vpv_wr(&v, VPC_MSIX, 2, n);
	ck_assert_uint_eq(vpv_rd(&v, VPC_MSIX, 2), VIRTIO_MSI_NO_VECTOR);
	vpv_select(&v, 1);
	vpv_wr(&v, VPC_Q_MSIX, 2, n + 100);
	ck_assert_uint_eq(q_rd(1, VPC_Q_MSIX), VIRTIO_MSI_NO_VECTOR);
	vpv_wr(&v, VPC_Q_MSIX, 2, n - 1);
	ck_assert_uint_eq(q_rd(1, VPC_Q_MSIX), n - 1);
}
END_TEST

START_TEST(test_intx_mode_every_vector_reads_no_vector)
{
	ck_assert_uint_eq(v.msix_cap, 0);
	vpv_wr(&v, VPC_MSIX, 2, 0);
	ck_assert_uint_eq(vpv_rd(&v, VPC_MSIX, 2), VIRTIO_MSI_NO_VECTOR);
	for (unsigned q = 0; q < NQ; q++) {
		vpv_select(&v, q);
		vpv_wr(&v, VPC_Q_MSIX, 2, q);
		ck_assert_uint_eq(q_rd(q, VPC_Q_MSIX), VIRTIO_MSI_NO_VECTOR);
	}
	bring_up(&v, ring); /* interrupts then come as INTx */
	post(&ring[0], 0, 8);
	kick(&v, 0);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, PIN, 1), 1);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 0);
}
END_TEST

START_TEST(test_bad_queue_size_at_enable_needs_reset)
{
	static const uint16_t sizes[] = {0, 3, 12, 2 * QMAX};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		ck_assert(vpv_negotiate(&v, F_V1));
		struct vring_drv r = ring[0];
		r.size = sizes[i];
		vpv_queue(&v, 0, &r);
		ck_assert_msg(vpv_status(&v) & VIRTIO_CONFIG_S_NEEDS_RESET,
			      "size %u: no NEEDS_RESET", sizes[i]);
		ck_assert_uint_eq(q_rd(0, VPC_Q_ENABLE), 0);
	}
}
END_TEST

START_TEST(test_queue_size_reads_zero_or_power_of_two)
{
	/* 4.1.4.3.1: without RING_PACKED "the device MUST present either a
	 * value of 0 or a power of 2 in queue_size". */
	ck_assert(vpv_negotiate(&v, F_V1));
	vpv_select(&v, 0);
	vpv_wr(&v, VPC_Q_SIZE, 2, 3);
	uint16_t s = q_rd(0, VPC_Q_SIZE);
	ck_assert_msg((s & (s - 1)) == 0, "queue_size reads %u", s);
}
END_TEST

START_TEST(test_bad_ring_placement_at_enable_needs_reset)
{
	const uint64_t bad[][3] = {
	    {RINGS + 8, RINGS + 0x1000, RINGS + 0x2000},	     /* desc not 16-aligned */
	    {RINGS, RINGS + 0x1000, RINGS + 0x2002},		     /* used not 4-aligned */
	    {GUEST_MMIO_HOLE_START, RINGS + 0x1000, RINGS + 0x2000}, /* not RAM */
	    {RINGS, RIG_RAM_SIZE - 4, RINGS + 0x2000},		     /* crosses RAM's end */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert(vpv_negotiate(&v, F_V1));
		struct vring_drv r;
		vrd_init(&r, rig.ram.buf, QSZ, bad[i][0], bad[i][1], bad[i][2]);
		vpv_queue(&v, 0, &r);
		ck_assert_msg(vpv_status(&v) & VIRTIO_CONFIG_S_NEEDS_RESET,
			      "placement %zu accepted", i);
		ck_assert_uint_eq(q_rd(0, VPC_Q_ENABLE), 0);
	}
}
END_TEST

START_TEST(test_missing_queue_has_size_zero)
{
	ck_assert_uint_eq(q_rd(NQ, VPC_Q_SIZE), 0);
	ck_assert_uint_eq(q_rd(0xFFFF, VPC_Q_SIZE), 0);
	for (unsigned q = 0; q < NQ; q++)
		ck_assert_uint_eq(q_rd(q, VPC_Q_SIZE), QMAX);
}
END_TEST

START_TEST(test_status_zero_resets)
{
	ck_assert(vpv_negotiate(&v, F_V1 | PROBE_F0));
	vpv_wr(&v, VPC_MSIX, 2, 1);
	for (unsigned q = 0; q < NQ; q++) {
		vpv_queue(&v, q, &ring[q]);
		vpv_wr(&v, VPC_Q_MSIX, 2, q);
	}
	vpv_set_status(&v, 0x0F);
	post(&ring[0], 0, 8);
	kick(&v, 0);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, PIN, 1), 1);
	unsigned resets = pr[0].resets;
	vpv_set_status(&v, 0);
	ck_assert_uint_eq(vpv_status(&v), 0);
	ck_assert_uint_gt(pr[0].resets, resets);
	vpv_wr(&v, VPC_GFSELECT, 4, 0);
	ck_assert_uint_eq(vpv_rd(&v, VPC_GF, 4), 0);
	vpv_wr(&v, VPC_GFSELECT, 4, 1);
	ck_assert_uint_eq(vpv_rd(&v, VPC_GF, 4), 0);
	ck_assert_uint_eq(vpv_rd(&v, VPC_MSIX, 2), VIRTIO_MSI_NO_VECTOR);
	for (unsigned q = 0; q < NQ; q++) {
		ck_assert_uint_eq(q_rd(q, VPC_Q_ENABLE), 0);
		ck_assert_uint_eq(q_rd(q, VPC_Q_SIZE), QMAX);
		ck_assert_uint_eq(q_rd(q, VPC_Q_MSIX), VIRTIO_MSI_NO_VECTOR);
	}
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, PIN, 0), 1); /* INTx dropped with the ISR */
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_STATUS, 2) & PCI_STATUS_INTERRUPT, 0);
	ck_assert_uint_eq(vpv_isr(&v), 0);
}
END_TEST

START_TEST(test_status_write_clearing_bits_needs_reset)
{
	/* 2.1.1: "The driver MUST NOT clear a device status bit" (writing 0
	 * is a reset, not a clear). A write that clears one is a broken
	 * driver: the device keeps its bits and sets NEEDS_RESET (2.1.2), with
	 * a configuration change interrupt once DRIVER_OK was set; it must not
	 * end up live without DRIVER_OK or FEATURES_OK. */
	bring_up(&v, ring);
	unsigned activated = pr[0].activated;
	vpv_set_status(&v, 0x03);
	ck_assert_uint_eq(vpv_status(&v), 0x0F | VIRTIO_CONFIG_S_NEEDS_RESET);
	ck_assert_uint_eq(vpv_isr(&v) & 0x2, 0x2); /* 4.1.4.5: configuration change */
	post(&ring[0], 0, 8);
	kick(&v, 0);
	ck_assert_uint_eq(pr[0].notified[0], 0);
	vpv_set_status(&v, 0x0F); /* setting the bits again brings nothing back */
	ck_assert_uint_eq(vpv_status(&v), 0x0F | VIRTIO_CONFIG_S_NEEDS_RESET);
	ck_assert_uint_eq(pr[0].activated, activated);

	/* Before DRIVER_OK: FEATURES_OK and DRIVER cleared; no interrupt. */
	ck_assert(vpv_negotiate(&v, F_V1));
	vpv_set_status(&v, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	ck_assert_uint_eq(vpv_status(&v), 0x0B | VIRTIO_CONFIG_S_NEEDS_RESET);
	ck_assert_uint_eq(vpv_isr(&v), 0);

	/* Adding bits, or writing the same ones, is no clear. */
	ck_assert(vpv_negotiate(&v, F_V1));
	vpv_set_status(&v, 0x0B);
	vpv_set_status(&v, 0x0B | VIRTIO_CONFIG_S_FAILED);
	ck_assert_uint_eq(vpv_status(&v), 0x0B | VIRTIO_CONFIG_S_FAILED);
}
END_TEST

/* ---- running the device ---- */

START_TEST(test_notify_runs_device_only_after_driver_ok)
{
	ck_assert(vpv_negotiate(&v, F_V1));
	for (unsigned q = 0; q < NQ; q++)
		vpv_queue(&v, q, &ring[q]);
	uint64_t a = post(&ring[0], 0, 100);
	kick(&v, 0);
	ck_assert_uint_eq(pr[0].notified[0], 0);
	ck_assert_uint_eq(vrd_used_idx(&ring[0]), 0);
	vpv_set_status(&v, vpv_status(&v) | VIRTIO_CONFIG_S_DRIVER_OK);
	ck_assert_uint_eq(pr[0].activated, 1);
	kick(&v, 0);
	ck_assert_uint_eq(pr[0].notified[0], 1);
	ck_assert_uint_eq(vrd_used_idx(&ring[0]), 1);
	uint32_t id, len;
	vrd_used_elem(&ring[0], 0, &id, &len);
	ck_assert_uint_eq(id, 0);
	ck_assert_uint_eq(len, 100);
	ck_assert(bytes_all(rig.ram.buf + a, 100, 0xA5));
}
END_TEST

/* 3.1.1 and Linux 5.10's virtio-rng, which queues its first request in
 * probe, before DRIVER_OK: the device looks at its queues at DRIVER_OK, on
 * the I/O thread, with no second notification; that look is not counted
 * as a driver notification. */
START_TEST(test_buffers_queued_before_driver_ok_are_served_at_driver_ok)
{
	ck_assert(vpv_negotiate(&v, F_V1));
	for (unsigned q = 0; q < NQ; q++)
		vpv_queue(&v, q, &ring[q]);
	uint64_t a = post(&ring[1], 1, 64);
	kick(&v, 1); /* dropped: no DRIVER_OK yet */
	ck_assert_uint_eq(pr[0].notified[1], 0);
	ck_assert_uint_eq(vp[0].notifies, 1);
	vpv_set_status(&v, vpv_status(&v) | VIRTIO_CONFIG_S_DRIVER_OK);
	ck_assert_uint_eq(pr[0].notified[1], 0); /* not on the vCPU thread */
	fake_host_poll(&host);
	ck_assert_uint_eq(pr[0].notified[1], 1);
	ck_assert_uint_eq(pr[0].notified[0] + pr[0].notified[2], 0); /* empty queues */
	ck_assert_uint_eq(vrd_used_idx(&ring[1]), 1);
	ck_assert(bytes_all(rig.ram.buf + a, 64, 0xA5));
	ck_assert_uint_eq(vp[0].notifies, 1);
}
END_TEST

START_TEST(test_notify_address_selects_queue)
{
	bring_up(&v, ring);
	post(&ring[2], 2, 8);
	kick(&v, 2);
	ck_assert_uint_eq(pr[0].notified[2], 1);
	ck_assert_uint_eq(pr[0].notified[0] + pr[0].notified[1], 0);
	ck_assert_uint_eq(vrd_used_idx(&ring[2]), 1);
	ck_assert_uint_eq(vrd_used_idx(&ring[0]), 0);
}
END_TEST

/* ---- INTx (4.1.4.5, 4.1.5.3, 4.1.5.4) ---- */

START_TEST(test_intx_used_buffer_sets_isr_and_asserts)
{
	bring_up(&v, ring);
	post(&ring[0], 0, 8);
	kick(&v, 0);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, PIN, 1), 1);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, PIN, 0), 0);
	ck_assert(cfg_rd(&rig, SLOT, PCI_STATUS, 2) & PCI_STATUS_INTERRUPT);
	ck_assert_uint_eq(vpv_isr(&v), 0x1);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, PIN, 0), 1); /* read deasserts */
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_STATUS, 2) & PCI_STATUS_INTERRUPT, 0);
	ck_assert_uint_eq(vpv_isr(&v), 0); /* and cleared it */
}
END_TEST

START_TEST(test_no_interrupt_flag_suppresses_intx)
{
	bring_up(&v, ring);
	vrd_set_avail_flags(&ring[0], VQ_AVAIL_NO_INTERRUPT);
	post(&ring[0], 0, 8);
	kick(&v, 0);
	ck_assert_uint_eq(vrd_used_idx(&ring[0]), 1);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, PIN, 1), 0);
	ck_assert_uint_eq(vpv_isr(&v), 0);
}
END_TEST

START_TEST(test_intx_resample_reasserts_until_isr_read)
{
	struct irq_intx_pin *p = &rig.irq.pins[PIN - IRQ_INTX_FIRST];
	ck_assert_int_ge(p->irqfd, 0);
	bring_up(&v, ring);
	post(&ring[0], 0, 8);
	kick(&v, 0);
	ck_assert_uint_ge(eventfd_take(p->irqfd), 1);
	uint64_t one = 1;
	ck_assert_int_eq(write(p->resamplefd, &one, 8), 8); /* guest EOI, ISR unread */
	irq_intx_handle_resample(&rig.irq, PIN - IRQ_INTX_FIRST);
	ck_assert_uint_eq(eventfd_take(p->irqfd), 1);
	ck_assert_uint_eq(vpv_isr(&v), 0x1);
	ck_assert_int_eq(write(p->resamplefd, &one, 8), 8);
	irq_intx_handle_resample(&rig.irq, PIN - IRQ_INTX_FIRST);
	ck_assert_uint_eq(eventfd_take(p->irqfd), 0);
}
END_TEST

/* ---- MSI-X (4.1.5.1.2, 4.1.5.3) ---- */

START_TEST(test_msix_used_buffer_fires_queue_vector)
{
	msix_all(&v, msix_table_size());
	bring_up(&v, ring);
	vpv_wr(&v, VPC_MSIX, 2, 0);
	vpv_select(&v, 1);
	vpv_wr(&v, VPC_Q_MSIX, 2, 2);
	post(&ring[1], 1, 8);
	kick(&v, 1);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 1);
	int i = sink_rec_find(&rig.sink, SINK_SIGNAL_MSI, 0);
	ck_assert_uint_eq(rig.sink.calls[i].addr, MSI_ADDR(2));
	ck_assert_uint_eq(rig.sink.calls[i].data, MSI_DATA(2));
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, PIN, 1), 0);
}
END_TEST

START_TEST(test_msix_no_vector_means_no_interrupt)
{
	msix_all(&v, msix_table_size());
	bring_up(&v, ring); /* queue vectors left at NO_VECTOR */
	post(&ring[0], 0, 8);
	kick(&v, 0);
	ck_assert_uint_eq(vrd_used_idx(&ring[0]), 1);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 0);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, PIN, 1), 0);
}
END_TEST

/* ---- a broken driver (2.1.2) ---- */

static void break_queue0(const struct vpci_view *view, struct vring_drv *r, struct virtio_probe *p)
{
	vrd_desc(r, 0, BUFS, 16, VQ_NEXT, QSZ); /* next out of range */
	vrd_publish(r, 0);
	vpv_notify(view, 0);
	fake_host_poll(&host);
	ck_assert_uint_eq(p->notified[0], 1);
	ck_assert(vpv_status(view) & VIRTIO_CONFIG_S_NEEDS_RESET);
}

START_TEST(test_broken_chain_needs_reset_with_config_interrupt_intx)
{
	bring_up(&v, ring);
	break_queue0(&v, &ring[0], &pr[0]);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, PIN, 1), 1);
	ck_assert_uint_eq(vpv_isr(&v) & 0x2, 0x2);
	/* Stuck until reset: rewriting status keeps it, the device stays idle. */
	vpv_set_status(&v, 0x0F);
	ck_assert(vpv_status(&v) & VIRTIO_CONFIG_S_NEEDS_RESET);
	post(&ring[1], 1, 8);
	kick(&v, 1);
	ck_assert_uint_eq(pr[0].notified[1], 0);
	vpv_set_status(&v, 0);
	ck_assert_uint_eq(vpv_status(&v), 0);
	/* A fresh start works. */
	for (unsigned q = 0; q < NQ; q++)
		vrd_layout(&ring[q], rig.ram.buf, QSZ, RINGS + 0x10000ULL * q);
	bring_up(&v, ring);
	post(&ring[0], 0, 8);
	kick(&v, 0);
	ck_assert_uint_eq(vrd_used_idx(&ring[0]), 1);
}
END_TEST

START_TEST(test_broken_chain_fires_config_vector_msix)
{
	msix_all(&v, msix_table_size());
	bring_up(&v, ring);
	vpv_wr(&v, VPC_MSIX, 2, 1);
	break_queue0(&v, &ring[0], &pr[0]);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 1);
	int i = sink_rec_find(&rig.sink, SINK_SIGNAL_MSI, 0);
	ck_assert_uint_eq(rig.sink.calls[i].addr, MSI_ADDR(1));
	ck_assert_uint_eq(rig.sink.calls[i].data, MSI_DATA(1));
}
END_TEST

START_TEST(test_config_interrupt_sets_isr_bit_under_msix)
{
	/* 4.1.4.5.1: "The device MUST set the Device Configuration Interrupt
	 * bit in ISR status before sending a device configuration change
	 * notification" -- with or without MSI-X. */
	msix_all(&v, msix_table_size());
	bring_up(&v, ring);
	vpv_wr(&v, VPC_MSIX, 2, 1);
	break_queue0(&v, &ring[0], &pr[0]);
	ck_assert_uint_eq(vpv_isr(&v) & 0x2, 0x2);
}
END_TEST

START_TEST(test_broken_device_leaves_others_working)
{
	bring_up(&v, ring);
	static struct vring_drv r2[NQ];
	for (unsigned q = 0; q < NQ; q++)
		vrd_layout(&r2[q], rig.ram.buf, QSZ, 0x800000ULL + 0x10000ULL * q);
	bring_up(&v2, r2);
	break_queue0(&v, &ring[0], &pr[0]);
	uint16_t h = (uint16_t)(r2[0].avail_idx % QSZ);
	vrd_desc(&r2[0], h, 0x900000, 32, VQ_WRITE, 0);
	vrd_publish(&r2[0], h);
	kick(&v2, 0);
	ck_assert_uint_eq(pr[1].notified[0], 1);
	ck_assert_uint_eq(vrd_used_idx(&r2[0]), 1);
	ck_assert_uint_eq(vpv_status(&v2) & VIRTIO_CONFIG_S_NEEDS_RESET, 0);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, PIN2, 1), 1);
	ck_assert_uint_eq(vpv_isr(&v2), 0x1);
}
END_TEST

/* ---- PCI configuration access capability (4.1.4.9) ---- */

static uint32_t via_cfg(unsigned off, unsigned len, bool write, uint32_t val)
{
	uint8_t c = v.cap[VPCI_PCICFG];
	conf1_write(&rig, 0, SLOT, 0, c + 4u, 1, 0); /* cap.bar */
	conf1_write(&rig, 0, SLOT, 0, c + 8u, 4, off);
	conf1_write(&rig, 0, SLOT, 0, c + 12u, 4, len);
	if (write) {
		conf1_write(&rig, 0, SLOT, 0, c + 16u, len, val);
		return 0;
	}
	return conf1_read(&rig, 0, SLOT, 0, c + 16u, len);
}

START_TEST(test_pci_cfg_access_reaches_bar0)
{
	ck_assert_uint_ne(v.cap[VPCI_PCICFG], 0);
	uint32_t bar_common = (uint32_t)(v.at[VPCI_COMMON] - rig_bar_addr(&rig, SLOT, 0));
	uint64_t f = vpv_device_features(&v);
	vpv_wr(&v, VPC_DFSELECT, 4, 0);
	ck_assert_uint_eq(via_cfg(bar_common + VPC_DF, 4, false, 0), (uint32_t)f);
	via_cfg(bar_common + VPC_DFSELECT, 4, true, 1);
	ck_assert_uint_eq(vpv_rd(&v, VPC_DFSELECT, 4), 1);
	ck_assert_uint_eq(via_cfg(bar_common + VPC_DF, 4, false, 0), (uint32_t)(f >> 32));
	via_cfg(bar_common + VPC_STATUS, 1, true, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	ck_assert_uint_eq(vpv_status(&v), VIRTIO_CONFIG_S_ACKNOWLEDGE);
	ck_assert_uint_eq(via_cfg(bar_common + VPC_NUMQ, 2, false, 0), NQ);
}
END_TEST

static Suite *virtio_pci_suite(void)
{
	Suite *s = suite_create("virtio_pci");
	TCase *t = tcase_create("layout");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_ids_are_modern);
	tcase_add_test(t, test_subsystem_id_at_least_0x40);
	tcase_add_test(t, test_capabilities_point_inside_bar0);
	tcase_add_test(t, test_msix_on_bar2_in_pages_of_its_own);
	tcase_add_test(t, test_ioeventfd_per_queue_at_notify_address);
	tcase_add_test(t, test_ioeventfds_follow_bar0);
	tcase_add_test(t, test_pci_cfg_access_reaches_bar0);
	suite_add_tcase(s, t);

	t = tcase_create("negotiation");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_device_features_offered);
	tcase_add_test(t, test_features_ok_for_valid_subset);
	tcase_add_test(t, test_features_ok_refused_without_version_1);
	tcase_add_test(t, test_features_ok_refused_for_unoffered_bits);
	tcase_add_test(t, test_queue_setup_ignored_before_features_ok);
	tcase_add_test(t, test_queue_setup_ignored_after_driver_ok);
	tcase_add_test(t, test_vectors_writable_at_any_time);
	tcase_add_test(t, test_vector_beyond_table_reads_no_vector);
	tcase_add_test(t, test_bad_queue_size_at_enable_needs_reset);
	tcase_add_test(t, test_queue_size_reads_zero_or_power_of_two);
	tcase_add_test(t, test_bad_ring_placement_at_enable_needs_reset);
	tcase_add_test(t, test_missing_queue_has_size_zero);
	tcase_add_test(t, test_status_zero_resets);
	tcase_add_test(t, test_status_write_clearing_bits_needs_reset);
	suite_add_tcase(s, t);

	t = tcase_create("operation");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_notify_runs_device_only_after_driver_ok);
	tcase_add_test(t, test_buffers_queued_before_driver_ok_are_served_at_driver_ok);
	tcase_add_test(t, test_notify_address_selects_queue);
	tcase_add_test(t, test_intx_used_buffer_sets_isr_and_asserts);
	tcase_add_test(t, test_no_interrupt_flag_suppresses_intx);
	tcase_add_test(t, test_msix_used_buffer_fires_queue_vector);
	tcase_add_test(t, test_msix_no_vector_means_no_interrupt);
	tcase_add_test(t, test_broken_chain_needs_reset_with_config_interrupt_intx);
	tcase_add_test(t, test_broken_chain_fires_config_vector_msix);
	tcase_add_test(t, test_config_interrupt_sets_isr_bit_under_msix);
	suite_add_tcase(s, t);

	t = tcase_create("intx_mode");
	tcase_add_checked_fixture(t, setup_intx, teardown);
	tcase_add_test(t, test_intx_mode_every_vector_reads_no_vector);
	suite_add_tcase(s, t);

	t = tcase_create("resample");
	tcase_add_checked_fixture(t, setup_resample, teardown);
	tcase_add_test(t, test_intx_resample_reasserts_until_isr_read);
	suite_add_tcase(s, t);

	t = tcase_create("two_devices");
	tcase_add_checked_fixture(t, setup_two, teardown);
	tcase_add_test(t, test_broken_device_leaves_others_working);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(virtio_pci_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
