/*
 * libFuzzer target: a hostile driver against virtio-blk's request parser
 * (devices/virtio/virtio_blk.c) over the fake disk (tests/unit/disk_fake.h):
 * no file and no io_uring. The target is the transport: it lays split rings
 * in fake guest RAM, notifies, runs the completion callback, resets. The
 * fake aborts on I/O past the disk's end, a write to a read-only disk or an
 * unaligned buffer on a direct disk; guard pages around RAM and ASan catch
 * the rest; after each operation every queue's requests in flight must be
 * what the backend holds, and its bounce memory within its bound.
 * Byte 0: bit 0 read-only, bit 1 direct (unaligned buffers bounce), bit 2
 * FLUSH negotiated, bit 3 EVENT_IDX, bit 4 completions held until released,
 * bits 5-6 queues - 1. Byte 1: queue size 1 << (b % 9). Then operations,
 * one opcode byte each, on queue q = ((op >> 3) & 3) mod queues:
 *   op & 7 = 0  a request: head (1 byte), type (1 byte: IN, OUT, FLUSH,
 *               GET_ID by b & 3, or the byte itself when b & 0x80), sector
 *               (1 byte, or 8 when op & 0x80), n = (next & 7) data buffers of
 *               address (3 bytes, mod RAM), length (2 bytes) and writable
 *               (bit 15 of the length); chained from descriptor `head` with
 *               the header first and the status byte last, made available
 *            1  notify q (and again while the device yields)
 *            2  release (next byte) held completions of q, then complete q
 *            3  complete q (what the I/O thread does when its eventfd fires)
 *            4  the next request fails (-EIO; op & 0x80: a short count), or,
 *               when op & 0x40, finds no room
 *            5  guest RAM write: 3-byte address (mod RAM), (next & 63) + 1 bytes
 *            6  a raw head (2 bytes) made available on q
 *            7  device reset; the queues are set up again, rings zeroed
 * The run ends at the end of input or after MAX_OPS operations.
 */
#include "fuzz_common.h"

#include "devices/virtio/virtio_blk.h"
#include "tests/unit/disk_fake.h"
#include "vmm/base/err.h"

#include <errno.h>
#include <linux/virtio_blk.h>
#include <linux/virtio_ring.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define RAM_SIZE   (2ULL << 20)
#define MAX_OPS	   4096
#define MAX_QUEUES 4
#define RINGS_GPA  0x10000ULL /* queue q's rings at + 0x4000 * q */
#define HDR_GPA	   0x20000ULL /* header of (q, head) at + 0x1000 * q + 16 * head */
#define STAT_GPA   0x24000ULL /* status byte of (q, head) at + 0x100 * q + head */
#define DISK_BYTES (256 * 1024 + 512)
#define MAX_YIELDS 8

FUZZ_GUEST_RAM(ram, RAM_SIZE)

/* One device and disk for all runs (a queue's request slots take long to
 * allocate and free under ASan): each run ends with the device's reset,
 * which must leave nothing of it behind, and starts from zeroed rings. */
static struct virtio_transport transport;
static struct virtio_blk blk;
static struct disk_fake *fake;

/* Everything else per run lives here and starts from zero each time. */
static struct {
	unsigned queues;
	uint16_t qsize;
	bool event_idx, broken, yielded[MAX_QUEUES];
	unsigned used, resets;
} w;

static void t_queue_used(struct virtio_transport *t, unsigned q)
{
	(void)t;
	(void)q;
	w.used++;
}

static void t_needs_reset(struct virtio_transport *t, const char *why)
{
	(void)t;
	(void)why;
	w.broken = true;
}

static bool t_live(struct virtio_transport *t, unsigned q)
{
	(void)t;
	(void)q;
	return !w.broken;
}

static void t_lock(struct virtio_transport *t, unsigned q)
{
	(void)t;
	(void)q;
}

static void t_yield(struct virtio_transport *t, unsigned q)
{
	(void)t;
	w.yielded[q] = true;
}

static const struct virtio_transport_ops t_ops = {
    .queue_used = t_queue_used,
    .needs_reset = t_needs_reset,
    .live = t_live,
    .queue_lock = t_lock,
    .queue_unlock = t_lock,
    .yield = t_yield,
};

static uint64_t desc_gpa(unsigned q)
{
	return RINGS_GPA + 0x4000ULL * q;
}

static uint64_t avail_gpa(unsigned q)
{
	return desc_gpa(q) + 0x1000;
}

static void put(uint64_t gpa, uint64_t v, unsigned n)
{
	memcpy(ram.buf + gpa, &v, n); /* little-endian host */
}

/* The driver's side of queue setup (what virtio-pci's queue_enable does). */
static void queues_up(void)
{
	for (unsigned q = 0; q < w.queues; q++)
		if (virtq_init(&blk.vdev.vqs[q], &ram.m, w.qsize, VIRTIO_BLK_QUEUE_MAX, desc_gpa(q),
			       avail_gpa(q), desc_gpa(q) + 0x2000, w.event_idx))
			abort();
}

static void make_available(unsigned q, uint16_t head)
{
	uint64_t avail = avail_gpa(q);
	uint16_t idx;
	memcpy(&idx, ram.buf + avail + 2, 2); /* what RAM says: a write may have moved it */
	put(avail + 4 + 2ULL * (idx % w.qsize), head, 2);
	put(avail + 2, (uint16_t)(idx + 1), 2);
}

static void desc(unsigned q, unsigned i, uint64_t addr, uint32_t len, uint16_t flags)
{
	uint64_t d = desc_gpa(q) + 16ULL * (i % w.qsize);
	put(d, addr, 8);
	put(d + 8, len, 4);
	put(d + 12, flags, 2);
	put(d + 14, (i + 1) % w.qsize, 2);
}

static uint32_t request_type(uint8_t b)
{
	static const uint32_t types[4] = {VIRTIO_BLK_T_IN, VIRTIO_BLK_T_OUT, VIRTIO_BLK_T_FLUSH,
					  VIRTIO_BLK_T_GET_ID};
	return b & 0x80 ? b : types[b & 3];
}

/* Operation 0: header, data buffers, status byte, chained from `head`. */
static void request(struct in *in, unsigned q, bool long_sector)
{
	uint16_t head = (uint16_t)(take(in, 1) % w.qsize);
	uint64_t hdr = HDR_GPA + 0x1000ULL * q + 16ULL * head,
		 stat = STAT_GPA + 0x100ULL * q + head;
	put(hdr, request_type((uint8_t)take(in, 1)), 4);
	put(hdr + 4, 0, 4);
	put(hdr + 8, take(in, long_sector ? 8 : 1), 8);
	unsigned n = take(in, 1) & 7, i = head;
	desc(q, i++, hdr, 16, VRING_DESC_F_NEXT);
	for (unsigned k = 0; k < n; k++, i++) {
		uint64_t addr = take(in, 3) % RAM_SIZE;
		uint16_t len = (uint16_t)take(in, 2);
		desc(q, i, addr, len & 0x7FFF,
		     VRING_DESC_F_NEXT | (len & 0x8000 ? VRING_DESC_F_WRITE : 0));
	}
	desc(q, i, stat, 1, VRING_DESC_F_WRITE);
	make_available(q, head);
}

/* Operation 1: the transport serves a notify, and again at the end of
 * the loop's pass while the device yields. */
static void notify(unsigned q)
{
	for (unsigned n = 0; n < MAX_YIELDS && !w.broken; n++) {
		w.yielded[q] = false;
		blk.vdev.ops->queue_notify(&blk.vdev, q);
		if (!w.yielded[q])
			break;
	}
}

static void fail_next(uint8_t op, struct in *in)
{
	if (op & 0x40) {
		fake->refuse_next = true;
		return;
	}
	fake->fail_next = true;
	fake->fail_res = op & 0x80 ? (int64_t)take(in, 1) * 256 : -EIO;
}

static void ram_write(struct in *in)
{
	uint64_t a = take(in, 3) % RAM_SIZE;
	size_t len = (take(in, 1) & 63) + 1;
	if (len > in->left)
		len = in->left;
	if (len > RAM_SIZE - a)
		len = RAM_SIZE - a;
	memcpy(ram.buf + a, in->p, len);
	in->p += len;
	in->left -= len;
}

/* The transport's reset: the device's, then a driver that sets up again
 * over zeroed rings. */
static void reset(void)
{
	blk.vdev.ops->reset(&blk.vdev);
	memset(ram.buf + RINGS_GPA, 0, 0x4000ULL * MAX_QUEUES);
	w.broken = false;
	w.resets++;
	queues_up();
}

static void op_run(uint8_t op, struct in *in)
{
	unsigned q = ((op >> 3) & 3) % w.queues;
	switch (op & 7) {
	case 0: request(in, q, op & 0x80); break;
	case 1: notify(q); break;
	case 2:
		disk_fake_release(blk.queues[q].dq, (unsigned)take(in, 1));
		virtio_blk_complete(&blk.queues[q]);
		break;
	case 3: virtio_blk_complete(&blk.queues[q]); break;
	case 4: fail_next(op, in); break;
	case 5: ram_write(in); break;
	case 6: make_available(q, (uint16_t)take(in, 2)); break;
	case 7: reset(); break;
	}
}

/* What the parser keeps must match what the backend holds; `idle`: after
 * a reset, nothing at all. */
static void check_queues(bool idle)
{
	for (unsigned q = 0; q < MAX_QUEUES; q++) {
		const struct virtio_blk_queue *bq = &blk.queues[q];
		if (bq->inflight != disk_fake_pending(bq->dq) ||
		    bq->bounce_bytes > (idle ? 0 : BLK_BOUNCE_QUEUE_MAX) ||
		    (idle && bq->inflight)) {
			fprintf(stderr, "queue %u: %u in flight, the disk holds %u; %llu bounced\n",
				q, bq->inflight, disk_fake_pending(bq->dq),
				(unsigned long long)bq->bounce_bytes);
			abort();
		}
	}
}

static void blk_once(void)
{
	struct err e = {0};
	fake = disk_fake_new(DISK_BYTES, false, false);
	if (virtio_blk_init(&blk, &fake->disk, MAX_QUEUES, &e))
		abort();
	transport.ops = &t_ops;
	blk.vdev.transport = &transport;
}

/* The disk zeroed and as the mode says, the queues set up, no counts. */
static void blk_up(uint8_t mode, uint8_t qsize)
{
	if (!fake)
		blk_once();
	memset(&w, 0, sizeof(w));
	w.queues = 1 + ((mode >> 5) & 3);
	w.qsize = (uint16_t)(1u << (qsize % 9));
	w.event_idx = mode & 8;
	memset(fake->data, 0, DISK_BYTES);
	*fake = (struct disk_fake){.disk = fake->disk, .data = fake->data, .hold = mode & 16};
	fake->disk.readonly = mode & 1;
	fake->disk.direct = mode & 2;
	memset(blk.vdev.vqs, 0, sizeof(blk.vdev.vqs));
	memset(&blk.stats, 0, sizeof(blk.stats)); /* one thread: no atomics needed */
	blk.vdev.features = VIRTIO_FEATURE(VIRTIO_F_VERSION_1) |
			    (mode & 4 ? VIRTIO_FEATURE(VIRTIO_BLK_F_FLUSH) : 0) |
			    (w.event_idx ? VIRTIO_FEATURE(VIRTIO_RING_F_EVENT_IDX) : 0);
	queues_up();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	struct in in = {data, size};
	uint8_t mode = (uint8_t)take(&in, 1);
	fuzz_ram_reset(&ram);
	blk_up(mode, (uint8_t)take(&in, 1));
	for (unsigned n = 0; n < MAX_OPS && in.left; n++) {
		op_run((uint8_t)take(&in, 1), &in);
		check_queues(false);
	}
	if (getenv("FUZZ_BLK_TRACE")) /* check a seed reaches the parser */
		fprintf(stderr,
			"queues %u size %u broken %d resets %u used %u reads %u writes %u "
			"flushes %u ioerr %llu unsupp %llu get-id %llu bounced %llu\n",
			w.queues, w.qsize, w.broken, w.resets, w.used, fake->reads, fake->writes,
			fake->flushes, (unsigned long long)atomic_load(&blk.stats.ioerrs),
			(unsigned long long)atomic_load(&blk.stats.unsupported),
			(unsigned long long)atomic_load(&blk.stats.get_ids),
			(unsigned long long)atomic_load(&blk.stats.bounced));
	blk.vdev.ops->reset(&blk.vdev); /* waits for, and ends, what is in flight */
	check_queues(true);
	return 0;
}
