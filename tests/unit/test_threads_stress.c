/*
 * The VMM's threaded paths at once, as a guest and the host drive them: a
 * two-queue virtio-blk, each queue driven by a "vCPU" thread of its own
 * (requests, notifies, its MSI-X entry masked and unmasked, its queue
 * vector moved, common config and ISR reads) and served by an "I/O"
 * thread of its own (notifications, io_uring completions, vectors fired),
 * as --io-threads does; a third vCPU thread writes the testdev's MSI-X
 * table, Message Control and PBA and rings it, and reads virtio-blk's
 * table and status. Every request must complete with its data on its
 * queue, and the door's counts must add up. Built normally it is a quick
 * functional test; in the ThreadSanitizer build (tests/sanitize/
 * run_suite.sh tsan) any data race on these paths fails it, so the
 * per-queue locks (devices/virtio/virtio_pci.h) are checked here.
 */
#include "helpers.h"
#include "virtio_helpers.h"

#include "devices/backends/disk_uring.h"
#include "devices/virtio/virtio_blk.h"
#include "vmm/base/err.h"

#include <check.h>
#include <fcntl.h>
#include <linux/virtio_blk.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REQUESTS   2000 /* per queue */
#define NQUEUES	   2
#define QSZ	   64
#define DISK_BYTES (1u << 20)
#define BLK_SLOT   2
#define TDEV_SLOT  3
#define RING_GPA   0x100000ULL
#define BUF_GPA	   0x200000ULL /* per queue and slot: header, 512 data, status */

/* The guest side touches guest RAM as a guest CPU does: unseen by
 * ThreadSanitizer, since a real guest is no thread of the VMM. (The device
 * side's accesses stay visible: their races with each other count.) */
#ifdef __SANITIZE_THREAD__
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);
#define GUEST_SIDE_BEGIN()                                                                         \
	(AnnotateIgnoreReadsBegin(__FILE__, __LINE__),                                             \
	 AnnotateIgnoreWritesBegin(__FILE__, __LINE__))
#define GUEST_SIDE_END()                                                                           \
	(AnnotateIgnoreWritesEnd(__FILE__, __LINE__), AnnotateIgnoreReadsEnd(__FILE__, __LINE__))
#else
#define GUEST_SIDE_BEGIN() ((void)0)
#define GUEST_SIDE_END()   ((void)0)
#endif

/* An interrupt sink any thread may call: atomic counts only. */
struct atomic_sink {
	atomic_uint lines, msis, routes, irqfds;
};

static int as_set_line(void *ctx, uint32_t gsi, int level)
{
	(void)gsi;
	(void)level;
	atomic_fetch_add(&((struct atomic_sink *)ctx)->lines, 1);
	return 0;
}

static int as_signal_msi(void *ctx, uint64_t addr, uint32_t data)
{
	(void)addr;
	(void)data;
	atomic_fetch_add(&((struct atomic_sink *)ctx)->msis, 1);
	return 1;
}

static int as_set_routes(void *ctx, const struct irq_route *routes, unsigned n)
{
	(void)routes;
	(void)n;
	atomic_fetch_add(&((struct atomic_sink *)ctx)->routes, 1);
	return 0;
}

static int as_irqfd_assign(void *ctx, int fd, uint32_t gsi, int resample_fd)
{
	(void)fd;
	(void)gsi;
	(void)resample_fd;
	atomic_fetch_add(&((struct atomic_sink *)ctx)->irqfds, 1);
	return 0;
}

static const struct irq_sink_ops atomic_sink_ops = {
    .set_line = as_set_line,
    .signal_msi = as_signal_msi,
    .set_routes = as_set_routes,
    .irqfd_assign = as_irqfd_assign,
};

static struct pci_rig rig;
static struct atomic_sink sink;
static struct fake_host host;
static struct virtio_blk blk;
static struct virtio_pci vp;
static struct vpci_view v;
static struct vring_drv ring[NQUEUES];
static struct tdev_view td;
static atomic_bool done;
static char disk_path[64];
/* Each queue's notify address, read once at set-up as Linux does
 * (vp_modern_map_vq_notify); and the lock a driver holds around
 * queue_select and the register it selects (Linux: only at set-up and
 * teardown, never two vCPUs at once), since queue_select is one register
 * of the function's, not one per vCPU (virtio 1.2, 4.1.4.3). */
static uint64_t notify_at[NQUEUES];
static pthread_mutex_t select_lock = PTHREAD_MUTEX_INITIALIZER;

/* One I/O thread per queue: it serves that queue's notify eventfd and
 * io_uring completions only, as an --io-threads thread does. */
static void *io_thread(void *arg)
{
	unsigned q = (unsigned)(uintptr_t)arg;
	while (!atomic_load(&done))
		if (fake_host_poll_queue(&host, q) == 0)
			sched_yield();
	return NULL;
}

struct driver {
	unsigned q;
	unsigned completed;
};

/* The driver of queue q on its own vCPU: reads of the sector that holds
 * its request number (plus q, so the queues read different data), one at
 * a time, each checked; between them it masks and unmasks the queue's
 * MSI-X entry, moves the queue's vector to the configuration entry and
 * back (the transport takes the queue's lock for it while the I/O thread
 * may be completing), and reads common config and the ISR. */
static void *blk_driver_thread(void *arg)
{
	struct driver *drv = arg;
	unsigned q = drv->q, vec = 1 + q;
	struct vring_drv *r = &ring[q];
	for (unsigned i = 0; i < REQUESTS; i++) {
		unsigned slot = i % (QSZ / 4);
		uint64_t buf = BUF_GPA + 0x100000ULL * q + 0x1000ULL * slot;
		uint16_t head = (uint16_t)(3 * slot), before;
		uint64_t sector = (i + q) % 64;
		GUEST_SIDE_BEGIN();
		struct virtio_blk_outhdr h = {.type = VIRTIO_BLK_T_IN, .sector = sector};
		memcpy(rig.ram.buf + buf, &h, sizeof(h));
		rig.ram.buf[buf + 16 + 512] = 0xFF;
		const struct vbuf chain[] = {
		    {buf, sizeof(h), false}, {buf + 16, 512, true}, {buf + 16 + 512, 1, true}};
		vrd_chain(r, head, chain, 3);
		before = vrd_used_idx(r);
		vrd_publish(r, head);
		GUEST_SIDE_END();
		mmio_wr(&rig, notify_at[q], 2, q);
		vpv_msix_program(&v, vec, MSI_ADDR(0), MSI_DATA(vec), i % 3 == 0);
		pthread_mutex_lock(&select_lock);
		vpv_select(&v, q);
		if (i % 5 == 0)
			vpv_wr(&v, VPC_Q_MSIX, 2, i % 10 ? vec : 0);
		(void)vpv_rd(&v, VPC_Q_MSIX, 2);
		pthread_mutex_unlock(&select_lock);
		(void)vpv_isr(&v);
		vpv_msix_program(&v, vec, MSI_ADDR(0), MSI_DATA(vec), false);
		bool used = false, good = false;
		while (!used) { /* the queue's I/O thread completes it */
			GUEST_SIDE_BEGIN();
			used = vrd_used_idx(r) != before;
			if (used) {
				uint32_t id, len;
				vrd_used_elem(r, before, &id, &len);
				good = id == head && len == 513 &&
				       rig.ram.buf[buf + 16 + 512] == VIRTIO_BLK_S_OK &&
				       rig.ram.buf[buf + 16] == (uint8_t)sector;
			}
			GUEST_SIDE_END();
			if (!used)
				sched_yield();
		}
		drv->completed += good;
	}
	pthread_mutex_lock(&select_lock);
	vpv_select(&v, q);
	vpv_wr(&v, VPC_Q_MSIX, 2, vec);
	pthread_mutex_unlock(&select_lock);
	return NULL;
}

/* A second vCPU: the testdev's MSI-X table, function mask and enable, its
 * PBA and doorbell, and reads of virtio-blk's table and status, all while
 * the other threads run. */
static void *tdev_thread(void *arg)
{
	unsigned *rung = arg;
	for (unsigned i = 0; i < 2 * REQUESTS; i++) {
		unsigned n = i % 4;
		tdev_program(&td, n, MSI_ADDR(n), MSI_DATA(n), i % 5 == 0);
		if (i % 7 == 0) {
			uint16_t c = (uint16_t)cfg_rd(&rig, TDEV_SLOT, td.cap + 2u, 2);
			cfg_wr(&rig, TDEV_SLOT, td.cap + 2u, 2, c ^ PCI_MSIX_FLAGS_MASKALL);
		}
		(void)tdev_pba_bit(&td, n);
		(void)mmio_rd32(&rig, tdev_entry(&td, n) + MSIX_E_DATA);
		tdev_ring(&td, n);
		/* The other vCPU is reprogramming this entry of virtio-blk's. */
		(void)mmio_rd32(&rig, v.msix_table + 16 + MSIX_E_CTRL);
		(void)vpv_rd(&v, VPC_STATUS, 1);
		(*rung)++;
	}
	return NULL;
}

static void setup(void)
{
	pci_rig_init(&rig, IRQ_MSI_IRQFD, IRQ_INTX_LINE);
	rig.irq.ops = &atomic_sink_ops;
	rig.irq.ctx = &sink;
	struct virtio_host h = fake_host_make(&host, &rig.log);
	snprintf(disk_path, sizeof(disk_path), "/tmp/vmm-stress-XXXXXX");
	int fd = mkstemp(disk_path);
	ck_assert_int_ge(fd, 0);
	uint8_t sector[512];
	for (unsigned s = 0; s < DISK_BYTES / 512; s++) {
		memset(sector, (uint8_t)s, sizeof(sector));
		ck_assert_int_eq(write(fd, sector, sizeof(sector)), (int)sizeof(sector));
	}
	close(fd);
	struct err e = {0};
	ck_assert_int_eq(
	    virtio_blk_init(&blk, disk_uring_open(disk_path, true, false, &e), NQUEUES, &e), 0);
	for (unsigned q = 0; q < NQUEUES; q++)
		ck_assert_int_ge(h.watch(h.ctx, q, blk.queues[q].completion_fd,
					 (void (*)(void *))virtio_blk_complete, &blk.queues[q]),
				 0);
	ck_assert_int_eq(
	    virtio_pci_init(&vp, &blk.vdev, "virtio-blk0", &rig.irq, &rig.ram.m, &h, IRQ_MODE_MSIX),
	    0);
	ck_assert_int_eq(pci_bus_add_device(&rig.pci, &vp.pci, BLK_SLOT, 1), 0);
	struct pci_testdev *t = pci_rig_add(&rig, TDEV_SLOT, 4);
	ck_assert_int_eq(pci_bus_assign_resources(&rig.pci), 0);
	vpv_init(&v, &rig, BLK_SLOT);
	tdev_view_init(&td, &rig, t, TDEV_SLOT);
	tdev_msix_ctrl(&td, PCI_MSIX_FLAGS_ENABLE, 0);
	ck_assert(vpv_negotiate(&v, 1ULL << VIRTIO_F_VERSION_1 | 1ULL << VIRTIO_BLK_F_MQ));
	vpv_msix_enable(&v, true);
	for (unsigned n = 0; n <= NQUEUES; n++)
		vpv_msix_program(&v, n, MSI_ADDR(0), MSI_DATA(n), false);
	vpv_wr(&v, VPC_MSIX, 2, 0);
	for (unsigned q = 0; q < NQUEUES; q++) {
		vrd_layout(&ring[q], rig.ram.buf, QSZ, RING_GPA + 0x10000ULL * q);
		vpv_queue(&v, q, &ring[q]);
		vpv_select(&v, q);
		vpv_wr(&v, VPC_Q_MSIX, 2, 1 + q);
		notify_at[q] = vpv_notify_addr(&v, q);
	}
	vpv_set_status(&v, vpv_status(&v) | VIRTIO_CONFIG_S_DRIVER_OK);
	ck_assert_uint_eq(vpv_status(&v) & VIRTIO_CONFIG_S_NEEDS_RESET, 0);
}

static void teardown(void)
{
	virtio_pci_destroy(&vp);
	virtio_blk_destroy(&blk);
	unlink(disk_path);
	pci_rig_free(&rig);
}

START_TEST(test_vcpus_and_io_threads_at_once)
{
	pthread_t io[NQUEUES], drv_thread[NQUEUES], b;
	struct driver drv[NQUEUES];
	unsigned rung = 0;
	atomic_store(&done, false);
	for (unsigned q = 0; q < NQUEUES; q++) {
		drv[q] = (struct driver){q, 0};
		ck_assert_int_eq(pthread_create(&io[q], NULL, io_thread, (void *)(uintptr_t)q), 0);
	}
	for (unsigned q = 0; q < NQUEUES; q++)
		ck_assert_int_eq(pthread_create(&drv_thread[q], NULL, blk_driver_thread, &drv[q]),
				 0);
	ck_assert_int_eq(pthread_create(&b, NULL, tdev_thread, &rung), 0);
	for (unsigned q = 0; q < NQUEUES; q++)
		pthread_join(drv_thread[q], NULL);
	pthread_join(b, NULL);
	atomic_store(&done, true);
	for (unsigned q = 0; q < NQUEUES; q++)
		pthread_join(io[q], NULL);
	for (unsigned q = 0; q < NQUEUES; q++) {
		ck_assert_uint_eq(drv[q].completed, REQUESTS);
		ck_assert_uint_eq(atomic_load(&vp.queues[q].requests), REQUESTS);
		ck_assert_uint_eq(vrd_used_idx(&ring[q]), (uint16_t)REQUESTS);
	}
	ck_assert_uint_eq(rung, 2 * REQUESTS);
	ck_assert_uint_eq(atomic_load(&blk.stats.reads), NQUEUES * REQUESTS);
	ck_assert_uint_eq(atomic_load(&vp.broken), 0);
	/* Every completion interrupted on its queue's vector or the one it was
	 * moved to (the configuration entry): delivered or still pended. */
	uint64_t blk_irqs = 0;
	for (unsigned n = 0; n <= NQUEUES; n++)
		blk_irqs += atomic_load(&vp.msix.vectors[n]->stats.asserts) +
			    atomic_load(&vp.msix.vectors[n]->stats.pended);
	ck_assert_uint_ge(blk_irqs, NQUEUES * REQUESTS);
	/* Every doorbell was delivered or is still pending in the PBA: the
	 * testdev's vectors account for all of them (a pended one counts again
	 * when it is delivered at unmask). */
	uint64_t delivered = 0, pended = 0;
	for (unsigned n = 0; n < 4; n++) {
		delivered += atomic_load(&td.t->msix.vectors[n]->stats.asserts);
		pended += atomic_load(&td.t->msix.vectors[n]->stats.pended);
	}
	ck_assert_uint_ge(delivered + pended, 2 * REQUESTS);
}
END_TEST

static Suite *stress_suite(void)
{
	Suite *s = suite_create("threads_stress");
	TCase *t = tcase_create("stress");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 120);
	tcase_add_test(t, test_vcpus_and_io_threads_at_once);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(stress_suite());
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
