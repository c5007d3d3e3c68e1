/*
 * Multiqueue virtio-blk and virtio-net (issue 10), over fake memory with
 * the recording interrupt sink, no KVM:
 *  - feature negotiation: VIRTIO_BLK_F_MQ and num_queues, VIRTIO_NET_F_MQ
 *    and VIRTIO_NET_F_CTRL_VQ with max_virtqueue_pairs, offered only with
 *    more than one queue (pair), and the queue counts the transport shows;
 *  - vectors: an MSI-X table of one vector per queue plus one for
 *    configuration, each queue's completions on the vector its driver gave
 *    it; in INTx mode every queue on the device's one pin;
 *  - batching: the requests of one notification completed in one pass
 *    cost one used-index update and one interrupt (2.7.10), and used_event
 *    suppresses interrupts;
 *  - the control queue (5.1.6.5): VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET within
 *    bounds is OK and attaches the tap queues of the pairs in use, anything
 *    else is ERR, a command without an ack byte is NEEDS_RESET, a reset
 *    goes back to one pair.
 * The virtio-net cases need a tap in a network namespace (root); without
 * one they are not registered and one case says why.
 */
#include "virtio_helpers.h"

#include "devices/backends/disk_uring.h"
#include "devices/virtio/virtio_blk.h"
#include "devices/virtio/virtio_net.h"
#include "devices/virtio/virtio_pci.h"
#include "vmm/base/err.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/if_tun.h>
#include <linux/virtio_blk.h>
#include <linux/virtio_net.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define SLOT	   2
#define PIN	   18 /* 16 + (2 + INTA# - 1) % 8 */
#define QSZ	   32
#define RINGS	   0x100000ULL
#define BUFS	   0x400000ULL
#define DISK_SECTS 256
#define F_V1	   VIRTIO_FEATURE(VIRTIO_F_VERSION_1)
#define F_EVENT	   VIRTIO_FEATURE(VIRTIO_RING_F_EVENT_IDX)
#define F_BLK_MQ   VIRTIO_FEATURE(VIRTIO_BLK_F_MQ)

/* ---- virtio-blk behind virtio-pci ---- */

static struct pci_rig rig;
static struct fake_host host;
static struct virtio_blk blk;
static struct virtio_pci vp;
static struct vpci_view v;
static struct vring_drv ring[4];
static char path[64];

/* A disk whose sector s is filled with the byte s. */
static void disk_make(void)
{
	snprintf(path, sizeof(path), "/tmp/vmm-unit-mq-XXXXXX");
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	uint8_t s[512];
	for (unsigned i = 0; i < DISK_SECTS; i++) {
		memset(s, (int)i, sizeof(s));
		ck_assert_int_eq(write(fd, s, sizeof(s)), (int)sizeof(s));
	}
	close(fd);
}

static void blk_rig(unsigned queues, enum irq_mode mode)
{
	pci_rig_init(&rig, IRQ_MSI_SIGNAL, IRQ_INTX_LINE);
	struct virtio_host h = fake_host_make(&host, &rig.log);
	disk_make();
	struct err e = {0};
	int ret = virtio_blk_init(&blk, disk_uring_open(path, true, false, &e), queues, &e);
	unlink(path);
	ck_assert_msg(ret == 0, "virtio_blk_init: %s", e.msg);
	for (unsigned q = 0; q < queues; q++)
		ck_assert_int_ge(h.watch(h.ctx, q, blk.queues[q].completion_fd,
					 (void (*)(void *))virtio_blk_complete, &blk.queues[q]),
				 0);
	ck_assert_int_eq(
	    virtio_pci_init(&vp, &blk.vdev, "virtio-blk0", &rig.irq, &rig.ram.m, &h, mode), 0);
	ck_assert_int_eq(pci_bus_add_device(&rig.pci, &vp.pci, SLOT, 1), 0);
	ck_assert_int_eq(pci_bus_assign_resources(&rig.pci), 0);
	vpv_init(&v, &rig, SLOT);
	for (unsigned q = 0; q < queues && q < 4; q++)
		vrd_layout(&ring[q], rig.ram.buf, QSZ, RINGS + 0x10000ULL * q);
}

static void setup_blk2(void)
{
	blk_rig(2, IRQ_MODE_MSIX);
}

static void setup_blk2_intx(void)
{
	blk_rig(2, IRQ_MODE_INTX);
}

static void teardown_blk(void)
{
	virtio_pci_destroy(&vp);
	virtio_blk_destroy(&blk);
	pci_rig_free(&rig);
}

/* Negotiates `features`, gives the config vector 0 and queue q vector
 * 1 + q (MSI-X entries programmed when the capability is there), sets up
 * `nq` queues, DRIVER_OK. */
static void blk_bring_up(uint64_t features, unsigned nq)
{
	ck_assert(vpv_negotiate(&v, features));
	if (v.msix_cap) {
		vpv_msix_enable(&v, true);
		for (unsigned i = 0; i <= nq; i++)
			vpv_msix_program(&v, i, MSI_ADDR(0), MSI_DATA(i), false);
		vpv_wr(&v, VPC_MSIX, 2, 0);
	}
	for (unsigned q = 0; q < nq; q++) {
		vpv_queue(&v, q, &ring[q]);
		vpv_select(&v, q);
		vpv_wr(&v, VPC_Q_MSIX, 2, 1 + q);
	}
	vpv_set_status(&v, vpv_status(&v) | VIRTIO_CONFIG_S_DRIVER_OK);
	ck_assert_uint_eq(vpv_status(&v) & VIRTIO_CONFIG_S_NEEDS_RESET, 0);
}

/* A one-sector read of `sector` on queue q in slot `slot` (descriptors
 * 3*slot..3*slot+2), not yet notified. */
static void blk_read(unsigned q, unsigned slot, uint64_t sector)
{
	uint64_t buf = BUFS + 0x100000ULL * q + 0x1000ULL * slot;
	struct virtio_blk_outhdr h = {.type = VIRTIO_BLK_T_IN, .sector = sector};
	memcpy(rig.ram.buf + buf, &h, sizeof(h));
	rig.ram.buf[buf + 16 + 512] = 0xFF;
	const struct vbuf chain[] = {
	    {buf, sizeof(h), false}, {buf + 16, 512, true}, {buf + 16 + 512, 1, true}};
	vrd_chain(&ring[q], (uint16_t)(3 * slot), chain, 3);
	vrd_publish(&ring[q], (uint16_t)(3 * slot));
}

static bool blk_read_ok(unsigned q, unsigned slot, uint64_t sector)
{
	uint64_t buf = BUFS + 0x100000ULL * q + 0x1000ULL * slot;
	return rig.ram.buf[buf + 16 + 512] == VIRTIO_BLK_S_OK &&
	       rig.ram.buf[buf + 16] == (uint8_t)sector &&
	       rig.ram.buf[buf + 16 + 511] == (uint8_t)sector;
}

/* Runs the fake I/O loop until `want` buffers are used on q, bounded. */
static void blk_wait_used(unsigned q, uint16_t want)
{
	for (int i = 0; i < 2000 && vrd_used_idx(&ring[q]) != want; i++) {
		struct pollfd p = {.fd = blk.queues[q].completion_fd, .events = POLLIN};
		poll(&p, 1, 10);
		fake_host_poll(&host);
	}
	ck_assert_uint_eq(vrd_used_idx(&ring[q]), want);
}

/* MSIs the sink saw with data MSI_DATA(n). */
static unsigned msis_on(unsigned n)
{
	unsigned c = 0;
	for (unsigned i = 0; i < rig.sink.n; i++)
		c += rig.sink.calls[i].kind == SINK_SIGNAL_MSI &&
		     rig.sink.calls[i].data == MSI_DATA(n);
	return c;
}

static unsigned blk_cfg_num_queues(void)
{
	return vpv_cfg(&v, offsetof(struct virtio_blk_config, num_queues), 2);
}

START_TEST(test_blk_one_queue_offers_no_mq)
{
	blk_rig(1, IRQ_MODE_MSIX);
	ck_assert_uint_eq(vpv_device_features(&v) & F_BLK_MQ, 0);
	ck_assert_uint_eq(vpv_rd(&v, VPC_NUMQ, 2), 1);
	/* One queue vector and the configuration vector. */
	ck_assert_uint_eq((cfg_rd(&rig, SLOT, v.msix_cap + 2u, 2) & 0x7FF) + 1, 2);
	teardown_blk();
}
END_TEST

START_TEST(test_blk_mq_offered_with_num_queues_and_table)
{
	static const unsigned counts[] = {2, 4, VIRTIO_BLK_MAX_QUEUES};
	for (unsigned i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		unsigned n = counts[i];
		blk_rig(n, IRQ_MODE_MSIX);
		ck_assert_uint_eq(vpv_device_features(&v) & F_BLK_MQ, F_BLK_MQ);
		ck_assert_uint_eq(blk_cfg_num_queues(), n);
		ck_assert_uint_eq(vpv_rd(&v, VPC_NUMQ, 2), n);
		ck_assert_uint_eq((cfg_rd(&rig, SLOT, v.msix_cap + 2u, 2) & 0x7FF) + 1, n + 1);
		/* Each queue has a size and a notify address of its own. */
		for (unsigned q = 0; q < n; q++) {
			vpv_select(&v, q);
			ck_assert_uint_eq(vpv_rd(&v, VPC_Q_SIZE, 2), VIRTIO_BLK_QUEUE_MAX);
			ck_assert_uint_eq(vpv_rd(&v, VPC_Q_NOFF, 2), q);
		}
		vpv_select(&v, n);
		ck_assert_uint_eq(vpv_rd(&v, VPC_Q_SIZE, 2), 0);
		ck_assert(vpv_negotiate(&v, F_V1 | F_BLK_MQ));
		teardown_blk();
	}
}
END_TEST

START_TEST(test_blk_bad_queue_counts_refused)
{
	disk_make();
	struct err e = {0};
	struct virtio_blk b;
	ck_assert_int_lt(virtio_blk_init(&b, disk_uring_open(path, true, false, &e), 0, &e), 0);
	ck_assert_ptr_nonnull(strstr(e.msg, "queues=0"));
	virtio_blk_destroy(&b);
	ck_assert_int_lt(virtio_blk_init(&b, disk_uring_open(path, true, false, &e),
					 VIRTIO_BLK_MAX_QUEUES + 1, &e),
			 0);
	virtio_blk_destroy(&b);
	unlink(path);
}
END_TEST

START_TEST(test_each_queue_completes_on_its_own_vector)
{
	blk_bring_up(F_V1 | F_BLK_MQ, 2);
	blk_read(0, 0, 5);
	blk_read(1, 0, 9);
	vpv_notify(&v, 1);
	vpv_notify(&v, 0);
	blk_wait_used(0, 1);
	blk_wait_used(1, 1);
	ck_assert(blk_read_ok(0, 0, 5));
	ck_assert(blk_read_ok(1, 0, 9));
	ck_assert_uint_eq(msis_on(1), 1); /* queue 0 */
	ck_assert_uint_eq(msis_on(2), 1); /* queue 1 */
	ck_assert_uint_eq(msis_on(0), 0); /* nothing on the configuration vector */
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, PIN, 1), 0);
	for (unsigned q = 0; q < 2; q++) {
		ck_assert_uint_eq(atomic_load(&vp.queues[q].notifies), 1);
		ck_assert_uint_eq(atomic_load(&vp.queues[q].requests), 1);
		ck_assert_uint_eq(atomic_load(&vp.queues[q].interrupts), 1);
		ck_assert_uint_eq(atomic_load(&vp.queues[q].last_vector), 1 + q);
	}
	/* The driver moves queue 1 to another vector: its next completion
	 * follows. */
	vpv_select(&v, 1);
	vpv_wr(&v, VPC_Q_MSIX, 2, 0);
	blk_read(1, 1, 10);
	vpv_notify(&v, 1);
	blk_wait_used(1, 2);
	ck_assert_uint_eq(msis_on(0), 1);
	ck_assert_uint_eq(msis_on(2), 1);
	ck_assert_uint_eq(atomic_load(&vp.queues[1].last_vector), 0);
}
END_TEST

START_TEST(test_intx_every_queue_on_the_one_pin)
{
	ck_assert_uint_eq(v.msix_cap, 0);
	blk_bring_up(F_V1 | F_BLK_MQ, 2);
	blk_read(0, 0, 3);
	vpv_notify(&v, 0);
	blk_wait_used(0, 1);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, PIN, 1), 1);
	ck_assert_uint_eq(vpv_isr(&v), 0x1);
	blk_read(1, 0, 4);
	vpv_notify(&v, 1);
	blk_wait_used(1, 1);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, PIN, 1), 2);
	ck_assert_uint_eq(vpv_isr(&v), 0x1);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 0);
	for (unsigned q = 0; q < 2; q++)
		ck_assert_uint_eq(atomic_load(&vp.queues[q].last_vector), VIRTIO_PCI_LAST_INTX);
	ck_assert(blk_read_ok(0, 0, 3) && blk_read_ok(1, 0, 4));
}
END_TEST

/* Waits until q's io_uring holds n completions, taking none of them. */
static void blk_wait_cqes(unsigned q, unsigned n)
{
	struct io_uring_cqe *cqe;
	struct __kernel_timespec limit = {.tv_sec = 10};
	ck_assert_int_eq(
	    io_uring_wait_cqes(disk_uring_ring(blk.queues[q].dq), &cqe, n, &limit, NULL), 0);
	ck_assert_uint_eq(io_uring_cq_ready(disk_uring_ring(blk.queues[q].dq)), n);
}

START_TEST(test_batch_costs_one_interrupt)
{
	blk_bring_up(F_V1 | F_BLK_MQ | F_EVENT, 2);
	for (unsigned s = 0; s < 5; s++)
		blk_read(1, s, 20 + s);
	/* One notification: the device takes all five. */
	vpv_notify(&v, 1);
	int w = fake_host_watch_of(&host, vp.queues[1].notify_fd);
	ck_assert_int_ge(w, 0);
	host.w[w].ready(host.w[w].arg);
	ck_assert_uint_eq(atomic_load(&blk.stats.reads), 5);
	ck_assert_uint_eq(vrd_avail_event(&ring[1]), 5); /* 2.7.10: read up to here */
	/* All five completions reaped in one pass: one used-index update, one
	 * interrupt. */
	blk_wait_cqes(1, 5);
	ck_assert_uint_eq(vrd_used_idx(&ring[1]), 0);
	virtio_blk_complete(&blk.queues[1]);
	ck_assert_uint_eq(vrd_used_idx(&ring[1]), 5);
	ck_assert_uint_eq(msis_on(2), 1);
	ck_assert_uint_eq(atomic_load(&vp.queues[1].requests), 5);
	for (unsigned s = 0; s < 5; s++)
		ck_assert(blk_read_ok(1, s, 20 + s));
	/* used_event (2.7.10): the driver wants an interrupt only once the used
	 * index passes 7; a batch of two ending at 7 raises none, the next
	 * one does. */
	vrd_set_used_event(&ring[1], 7);
	blk_read(1, 5, 30);
	blk_read(1, 6, 31);
	vpv_notify(&v, 1);
	host.w[w].ready(host.w[w].arg);
	blk_wait_cqes(1, 2);
	virtio_blk_complete(&blk.queues[1]);
	ck_assert_uint_eq(vrd_used_idx(&ring[1]), 7);
	ck_assert_uint_eq(msis_on(2), 1);
	blk_read(1, 7, 32);
	vpv_notify(&v, 1);
	host.w[w].ready(host.w[w].arg);
	blk_wait_cqes(1, 1);
	virtio_blk_complete(&blk.queues[1]);
	ck_assert_uint_eq(vrd_used_idx(&ring[1]), 8);
	ck_assert_uint_eq(msis_on(2), 2);
	ck_assert_uint_eq(msis_on(1), 0); /* queue 0 saw nothing */
}
END_TEST

START_TEST(test_reset_drops_queues_and_vectors)
{
	blk_bring_up(F_V1 | F_BLK_MQ, 2);
	blk_read(1, 0, 1);
	vpv_notify(&v, 1);
	blk_wait_used(1, 1);
	vpv_set_status(&v, 0);
	ck_assert_uint_eq(vpv_status(&v), 0);
	for (unsigned q = 0; q < 2; q++) {
		vpv_select(&v, q);
		ck_assert_uint_eq(vpv_rd(&v, VPC_Q_MSIX, 2), VIRTIO_MSI_NO_VECTOR);
		ck_assert_uint_eq(vpv_rd(&v, VPC_Q_ENABLE, 2), 0);
	}
	/* A notify after the reset is not served. */
	blk_read(1, 1, 2);
	vpv_notify(&v, 1);
	fake_host_poll(&host);
	ck_assert_uint_eq(atomic_load(&blk.stats.reads), 1);
}
END_TEST

/* ---- virtio-net: the control queue on a multiqueue tap ---- */

#define TAP	   "vmq0"
#define F_NET_CTRL VIRTIO_FEATURE(VIRTIO_NET_F_CTRL_VQ)
#define F_NET_MQ   VIRTIO_FEATURE(VIRTIO_NET_F_MQ)
#define CMDS	   0x300000ULL

static const uint8_t mac[6] = {0x52, 0x54, 0x00, 0xab, 0xcd, 0xef};
static struct fake_ram ram;
static struct fake_transport ft;
static struct virtio_net net;
static struct vring_drv nring[VIRTIO_MAX_QUEUES];

static void net_up(unsigned pairs, uint64_t features)
{
	ck_assert_msg(unshare(CLONE_NEWNET) == 0, "unshare(CLONE_NEWNET): %s", strerror(errno));
	fake_ram_init(&ram, 16 * MiB);
	struct err e = {0};
	ck_assert_msg(virtio_net_init(&net, TAP, mac, pairs, NULL, &e) == 0, "virtio_net_init: %s",
		      e.msg);
	fake_transport_attach(&ft, &net.vdev, features);
	for (unsigned q = 0; q < virtio_num_queues(&net.vdev); q++) {
		vrd_layout(&nring[q], ram.buf, QSZ, 0x10000ULL + 0x10000ULL * q);
		fake_dev_queue(&net.vdev, q, &ram.m, &nring[q]);
	}
}

static void setup_net2(void)
{
	net_up(2, F_V1 | F_NET_CTRL | F_NET_MQ);
}

static void setup_net2_ctrl_only(void)
{
	net_up(2, F_V1 | F_NET_CTRL);
}

static void teardown_net(void)
{
	virtio_net_destroy(&net);
	fake_ram_free(&ram);
}

/* One control command: class, command, `data`, then an ack byte (0xEE
 * until the device writes it) unless `no_ack`. Returns the ack. */
static uint8_t ctrl(uint8_t cls, uint8_t cmd, const void *data, uint32_t len, bool no_ack)
{
	unsigned cq = virtio_net_ctrlq(&net);
	struct vring_drv *r = &nring[cq];
	uint16_t h = (uint16_t)(3 * (r->avail_idx % 4));
	uint64_t at = CMDS + 0x100ULL * (r->avail_idx % 4);
	ram.buf[at] = cls;
	ram.buf[at + 1] = cmd;
	if (len)
		memcpy(ram.buf + at + 2, data, len);
	ram.buf[at + 0x80] = 0xEE;
	struct vbuf b[3] = {{at, 2, false}, {at + 2, len, false}, {at + 0x80, 1, true}};
	unsigned n = no_ack ? 2 : 3;
	if (!len) { /* no data descriptor */
		b[1] = b[2];
		n--;
	}
	vrd_chain(r, h, b, n);
	uint16_t before = vrd_used_idx(r);
	vrd_publish(r, h);
	net.vdev.ops->queue_notify(&net.vdev, cq);
	if (!no_ack) {
		ck_assert_uint_eq(vrd_used_idx(r), (uint16_t)(before + 1));
		uint32_t id, ulen;
		vrd_used_elem(r, before, &id, &ulen);
		ck_assert_uint_eq(id, h);
		ck_assert_uint_eq(ulen, 1);
	}
	return ram.buf[at + 0x80];
}

static uint8_t pairs_set(uint16_t pairs)
{
	uint8_t le[2] = {(uint8_t)pairs, (uint8_t)(pairs >> 8)};
	return ctrl(VIRTIO_NET_CTRL_MQ, VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET, le, 2, false);
}

/* Whether the tap has pair p's queue attached, asked of the kernel:
 * TUNGETIFF reports IFF_DETACH_QUEUE on a detached queue's file. */
static bool tap_queue_attached(unsigned p)
{
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	ck_assert_int_eq(ioctl(net.pairs[p].tap_fd, TUNGETIFF, &ifr), 0);
	ck_assert(ifr.ifr_flags & IFF_MULTI_QUEUE);
	return !(ifr.ifr_flags & IFF_DETACH_QUEUE);
}

START_TEST(test_net_features_and_queue_counts)
{
	ck_assert_uint_eq(virtio_num_queues(&net.vdev), 5);
	ck_assert_uint_eq(virtio_net_ctrlq(&net), 4);
	uint64_t f = virtio_offered_features(&net.vdev);
	ck_assert_uint_eq(f & (F_NET_CTRL | F_NET_MQ), F_NET_CTRL | F_NET_MQ);
	uint8_t cfg[2];
	net.vdev.ops->config_read(&net.vdev,
				  offsetof(struct virtio_net_config, max_virtqueue_pairs), cfg, 2);
	ck_assert_uint_eq(cfg[0] | cfg[1] << 8, 2);
	/* One pair: neither feature, receiveq and transmitq only (a second
	 * device in the same namespace, on a tap of its own). */
	struct virtio_net one;
	struct err e = {0};
	ck_assert_msg(virtio_net_init(&one, "vmq1", mac, 1, NULL, &e) == 0, "%s", e.msg);
	ck_assert_uint_eq(virtio_num_queues(&one.vdev), 2);
	ck_assert_uint_eq(virtio_offered_features(&one.vdev) & (F_NET_CTRL | F_NET_MQ), 0);
	virtio_net_destroy(&one);
	ck_assert_int_lt(virtio_net_init(&one, "vmq2", mac, VIRTIO_NET_MAX_PAIRS + 1, NULL, &e), 0);
	virtio_net_destroy(&one);
}
END_TEST

START_TEST(test_net_ctrl_vq_pairs_set)
{
	/* 5.1.6.5.5: one pair in use until the driver says otherwise; the tap
	 * steers nothing to the other pair's queue. */
	ck_assert_uint_eq(atomic_load(&net.curr_pairs), 1);
	ck_assert(tap_queue_attached(0));
	ck_assert(!tap_queue_attached(1));
	ck_assert_uint_eq(pairs_set(2), VIRTIO_NET_OK);
	ck_assert_uint_eq(atomic_load(&net.curr_pairs), 2);
	ck_assert(tap_queue_attached(1));
	/* Out of bounds, a short or long argument: ERR, nothing changes. */
	ck_assert_uint_eq(pairs_set(0), VIRTIO_NET_ERR);
	ck_assert_uint_eq(pairs_set(3), VIRTIO_NET_ERR);
	ck_assert_uint_eq(pairs_set(0x8000), VIRTIO_NET_ERR);
	uint8_t three[3] = {1, 0, 0};
	ck_assert_uint_eq(
	    ctrl(VIRTIO_NET_CTRL_MQ, VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET, three, 3, false),
	    VIRTIO_NET_ERR);
	ck_assert_uint_eq(
	    ctrl(VIRTIO_NET_CTRL_MQ, VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET, three, 1, false),
	    VIRTIO_NET_ERR);
	ck_assert_uint_eq(atomic_load(&net.curr_pairs), 2);
	/* Classes and commands of features not offered: ERR. */
	uint8_t on = 1;
	ck_assert_uint_eq(ctrl(VIRTIO_NET_CTRL_RX, VIRTIO_NET_CTRL_RX_PROMISC, &on, 1, false),
			  VIRTIO_NET_ERR);
	ck_assert_uint_eq(ctrl(VIRTIO_NET_CTRL_MQ, VIRTIO_NET_CTRL_MQ_RSS_CONFIG, &on, 1, false),
			  VIRTIO_NET_ERR);
	ck_assert_uint_eq(
	    ctrl(VIRTIO_NET_CTRL_ANNOUNCE, VIRTIO_NET_CTRL_ANNOUNCE_ACK, NULL, 0, false),
	    VIRTIO_NET_ERR);
	ck_assert_uint_eq(atomic_load(&net.ctrl_ok), 1);
	ck_assert_uint_eq(atomic_load(&net.ctrl_err), 8);
	/* Back to one pair: its queue leaves the tap again. */
	ck_assert_uint_eq(pairs_set(1), VIRTIO_NET_OK);
	ck_assert(!tap_queue_attached(1));
	ck_assert_uint_eq(pairs_set(2), VIRTIO_NET_OK);
	/* A reset goes back to one pair (multiqueue off until re-enabled). */
	net.vdev.ops->reset(&net.vdev);
	ck_assert_uint_eq(atomic_load(&net.curr_pairs), 1);
	ck_assert(!tap_queue_attached(1));
	ck_assert_uint_eq(ft.needs_reset, 0);
	ck_assert_uint_eq(ft.used[virtio_net_ctrlq(&net)], 11); /* one pass per command */
}
END_TEST

/* Issue 26: each VQ_PAIRS_SET cost its TUNSETQUEUE calls (RTNL, a
 * synchronise on detach): a feeder kept one pass busy for 5 s. Ten
 * commands in one notify, alternating: each is acked OK, the last count is
 * what holds, and it is applied once, when the pass ends. */
START_TEST(test_net_ctrl_pairs_applied_once_per_pass)
{
	unsigned cq = virtio_net_ctrlq(&net);
	struct vring_drv *r = &nring[cq];
	for (unsigned i = 0; i < 10; i++) {
		uint64_t at = CMDS + 0x100ULL * i;
		ram.buf[at] = VIRTIO_NET_CTRL_MQ;
		ram.buf[at + 1] = VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET;
		ram.buf[at + 2] = (uint8_t)(i % 2 ? 2 : 1);
		ram.buf[at + 3] = 0;
		ram.buf[at + 0x80] = 0xEE;
		struct vbuf b[3] = {{at, 2, false}, {at + 2, 2, false}, {at + 0x80, 1, true}};
		vrd_chain(r, (uint16_t)(3 * i), b, 3);
		vrd_publish(r, (uint16_t)(3 * i));
	}
	net.vdev.ops->queue_notify(&net.vdev, cq);
	ck_assert_uint_eq(vrd_used_idx(r), 10);
	for (unsigned i = 0; i < 10; i++)
		ck_assert_uint_eq(ram.buf[CMDS + 0x100ULL * i + 0x80], VIRTIO_NET_OK);
	ck_assert_uint_eq(atomic_load(&net.curr_pairs), 2);
	ck_assert(tap_queue_attached(1));
	ck_assert_uint_eq(atomic_load(&net.pairs_applied), 1);
	ck_assert_uint_eq(atomic_load(&net.pairs_set), 2);
}
END_TEST

/* Issue 26: the control queue's pass has the budget of the others: one
 * notify with 100 commands of 1 MiB each (ERR: a wrong length) is served
 * 64 at a time (each charged at most VIRTIO_REQUEST_BYTES_MAX), with a
 * yield, and nothing is lost. The same head listed 100 times: a control
 * command completes at once, so its descriptors are free again at once. */
START_TEST(test_net_ctrl_pass_stops_at_its_budget_and_yields)
{
	const unsigned per_pass = VIRTIO_PASS_BYTES / VIRTIO_REQUEST_BYTES_MAX; /* 64 */
	unsigned cq = virtio_net_ctrlq(&net);
	struct vring_drv *r = &nring[cq];
	vrd_layout(r, ram.buf, 256, 0x10000ULL + 0x10000ULL * cq);
	fake_dev_queue(&net.vdev, cq, &ram.m, r);
	ram.buf[CMDS] = VIRTIO_NET_CTRL_MQ;
	ram.buf[CMDS + 1] = VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET;
	struct vbuf b[3] = {
	    {CMDS, 2, false}, {0x400000ULL, 1u << 20, false}, {CMDS + 0x80, 1, true}};
	vrd_chain(r, 0, b, 3);
	for (unsigned i = 0; i < 100; i++)
		vrd_publish(r, 0);
	expect_budget_passes(&ft, &net.vdev, cq, r, per_pass, 100);
	ck_assert_uint_eq(atomic_load(&net.ctrl_err), 100);
	ck_assert_uint_eq(ft.needs_reset, 0);
}
END_TEST

START_TEST(test_net_ctrl_mq_needs_the_feature)
{
	ck_assert_uint_eq(pairs_set(2), VIRTIO_NET_ERR);
	ck_assert_uint_eq(atomic_load(&net.curr_pairs), 1);
	ck_assert(!tap_queue_attached(1));
}
END_TEST

START_TEST(test_net_ctrl_without_ack_needs_reset)
{
	uint8_t le[2] = {2, 0};
	ctrl(VIRTIO_NET_CTRL_MQ, VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET, le, 2, true);
	ck_assert_uint_eq(ft.needs_reset, 1);
	ck_assert_ptr_nonnull(strstr(ft.why, "ack"));
	ck_assert_uint_eq(atomic_load(&net.curr_pairs), 1);
}
END_TEST

START_TEST(test_net_second_pair_transmits)
{
	ck_assert_uint_eq(pairs_set(2), VIRTIO_NET_OK);
	unsigned tq = virtio_net_txq(1);
	uint64_t at = 0x200000ULL;
	memset(ram.buf + at, 0, VIRTIO_NET_HDR_LEN);
	memset(ram.buf + at + VIRTIO_NET_HDR_LEN, 0xFF, 6); /* broadcast */
	memcpy(ram.buf + at + VIRTIO_NET_HDR_LEN + 6, mac, 6);
	struct vbuf b = {at, VIRTIO_NET_HDR_LEN + 60, false};
	vrd_chain(&nring[tq], 0, &b, 1);
	vrd_publish(&nring[tq], 0);
	net.vdev.ops->queue_notify(&net.vdev, tq);
	ck_assert_uint_eq(vrd_used_idx(&nring[tq]), 1);
	/* The tap made here is up (no EIO): the frame went out on pair 1's file. */
	ck_assert_uint_eq(atomic_load(&net.tx_frames), 1);
	ck_assert_uint_eq(atomic_load(&net.tx_errors), 0);
	ck_assert_uint_eq(ft.used[tq], 1);
	ck_assert_uint_eq(ft.used[virtio_net_txq(0)], 0);
}
END_TEST

/* A tap that exists without multi_queue cannot take a second queue: one
 * clear error, not a half-made device. */
START_TEST(test_net_existing_single_queue_tap_refused)
{
	int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	snprintf(ifr.ifr_name, IFNAMSIZ, "vmq9");
	ck_assert_int_eq(ioctl(fd, TUNSETIFF, &ifr), 0);
	struct virtio_net n2;
	struct err e = {0};
	ck_assert_int_lt(virtio_net_init(&n2, "vmq9", mac, 2, NULL, &e), 0);
	ck_assert_msg(strstr(e.msg, "vmq9 exists without multi_queue"), "%s", e.msg);
	ck_assert_int_eq(e.kind, ERR_INPUT);
	virtio_net_destroy(&n2);
	close(fd);
}
END_TEST

START_TEST(test_net_unavailable)
{
	fprintf(stderr, "virtio-net multiqueue tests not run: %s\n",
		getenv("VMQ_WHY") ? getenv("VMQ_WHY") : "");
}
END_TEST

static Suite *mq_suite(void)
{
	Suite *s = suite_create("virtio_mq");
	TCase *t = tcase_create("blk_features");
	tcase_add_test(t, test_blk_one_queue_offers_no_mq);
	tcase_add_test(t, test_blk_mq_offered_with_num_queues_and_table);
	tcase_add_test(t, test_blk_bad_queue_counts_refused);
	suite_add_tcase(s, t);

	t = tcase_create("blk_msix");
	tcase_add_checked_fixture(t, setup_blk2, teardown_blk);
	tcase_add_test(t, test_each_queue_completes_on_its_own_vector);
	tcase_add_test(t, test_batch_costs_one_interrupt);
	tcase_add_test(t, test_reset_drops_queues_and_vectors);
	suite_add_tcase(s, t);

	t = tcase_create("blk_intx");
	tcase_add_checked_fixture(t, setup_blk2_intx, teardown_blk);
	tcase_add_test(t, test_intx_every_queue_on_the_one_pin);
	suite_add_tcase(s, t);

	static char why[128];
	if (!tap_possible(TAP, mac, 2, why, sizeof(why))) {
		setenv("VMQ_WHY", why, 1);
		t = tcase_create("net_unavailable");
		tcase_add_test(t, test_net_unavailable);
		suite_add_tcase(s, t);
		return s;
	}
	t = tcase_create("net_mq");
	tcase_add_checked_fixture(t, setup_net2, teardown_net);
	tcase_add_test(t, test_net_features_and_queue_counts);
	tcase_add_test(t, test_net_ctrl_vq_pairs_set);
	tcase_add_test(t, test_net_ctrl_pairs_applied_once_per_pass);
	tcase_add_test(t, test_net_ctrl_pass_stops_at_its_budget_and_yields);
	tcase_add_test(t, test_net_ctrl_without_ack_needs_reset);
	tcase_add_test(t, test_net_second_pair_transmits);
	tcase_add_test(t, test_net_existing_single_queue_tap_refused);
	suite_add_tcase(s, t);

	t = tcase_create("net_ctrl_only");
	tcase_add_checked_fixture(t, setup_net2_ctrl_only, teardown_net);
	tcase_add_test(t, test_net_ctrl_mq_needs_the_feature);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(mq_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
