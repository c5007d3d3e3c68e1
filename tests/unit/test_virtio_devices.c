/*
 * Virtio devices driven directly through their ops with a recording
 * transport and rings in fake RAM: virtio-rng (5.4), virtio-blk (5.2) over a
 * temporary file with the io_uring backend (completions reaped by polling
 * completion_fd and calling virtio_blk_complete, as the main loop does)
 * and over an in-memory fake backend that fails requests on demand,
 * virtio-console (5.3) into a collecting char sink.
 */
#include "disk_fake.h"
#include "virtio_helpers.h"

#include "devices/backends/disk_uring.h"
#include "devices/virtio/virtio_blk.h"
#include "devices/virtio/virtio_console.h"
#include "devices/virtio/virtio_rng.h"
#include "vmm/base/err.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RAM  (16 * MiB)
#define RING 0x10000ULL
#define BUF  0x200000ULL
#define QSZ  256

static struct fake_ram ram;
static struct fake_transport ft;
static struct vring_drv vr[2];

static uint32_t used_len_of(const struct vring_drv *r, unsigned slot)
{
	uint32_t len;
	vrd_used_elem(r, slot, NULL, &len);
	return len;
}

static void ram_up(void)
{
	fake_ram_init(&ram, RAM);
	for (unsigned q = 0; q < 2; q++)
		vrd_layout(&vr[q], ram.buf, QSZ, RING + 0x20000ULL * q);
}

/* ---- virtio-rng (5.4) ---- */

static struct virtio_rng rng;

static void rng_setup(void)
{
	ram_up();
	ck_assert_int_eq(virtio_rng_init(&rng, NULL), 0);
	fake_transport_attach(&ft, &rng.vdev, VIRTIO_FEATURE(VIRTIO_F_VERSION_1));
	vrd_layout(&vr[0], ram.buf, 64, RING); /* rng's queue is smaller */
	fake_dev_queue(&rng.vdev, 0, &ram.m, &vr[0]);
}

static void rng_teardown(void)
{
	virtio_rng_destroy(&rng);
	fake_ram_free(&ram);
}

START_TEST(test_rng_fills_writable_buffers)
{
	const struct vbuf b[] = {{BUF, 64, true}, {BUF + 0x1000, 100, true}};
	vrd_chain(&vr[0], 0, b, 2);
	vrd_publish(&vr[0], 0);
	const struct vbuf c[] = {{BUF + 0x2000, 32, true}};
	vrd_chain(&vr[0], 5, c, 1);
	vrd_publish(&vr[0], 5);
	rng.vdev.ops->queue_notify(&rng.vdev, 0);
	ck_assert_uint_eq(vrd_used_idx(&vr[0]), 2);
	uint32_t id, len;
	vrd_used_elem(&vr[0], 0, &id, &len);
	ck_assert_uint_eq(id, 0);
	ck_assert(len >= 1 && len <= 164); /* 5.4.6.1: one or more bytes, maybe not all */
	ck_assert_msg(!bytes_all(ram.buf + BUF, len < 64 ? len : 64, 0), "no random bytes written");
	if (len > 64)
		ck_assert(!bytes_all(ram.buf + BUF + 0x1000, len - 64, 0));
	vrd_used_elem(&vr[0], 1, &id, &len);
	ck_assert_uint_eq(id, 5);
	ck_assert(len >= 1 && len <= 32);
	ck_assert_uint_eq(ft.used[0], 1);
	ck_assert_uint_eq(ft.needs_reset, 0);
}
END_TEST

START_TEST(test_rng_broken_chain_needs_reset)
{
	vrd_desc(&vr[0], 0, GUEST_MMIO_HOLE_START, 64, VQ_WRITE, 0);
	vrd_publish(&vr[0], 0);
	rng.vdev.ops->queue_notify(&rng.vdev, 0);
	ck_assert_uint_eq(ft.needs_reset, 1);
	ck_assert_uint_eq(vrd_used_idx(&vr[0]), 0);
}
END_TEST

/* Issue 17: one notify with many legal requests is served one budget at a
 * time: the pass stops at VIRTIO_PASS_BYTES (each request charged at most
 * VIRTIO_REQUEST_BYTES_MAX), the device yields (the transport serves the
 * queue again at the end of the loop's pass) and nothing is lost. */
START_TEST(test_rng_pass_stops_at_its_budget_and_yields)
{
	const unsigned per_pass = VIRTIO_PASS_BYTES / VIRTIO_REQUEST_BYTES_MAX; /* 64 */
	vrd_layout(&vr[0], ram.buf, 256, RING);
	fake_dev_queue(&rng.vdev, 0, &ram.m, &vr[0]);
	for (uint16_t i = 0; i < 100; i++) {
		vrd_desc(&vr[0], i, BUF, 1u << 20, VQ_WRITE, 0);
		vrd_publish(&vr[0], i);
	}
	expect_budget_passes(&ft, &rng.vdev, 0, &vr[0], per_pass, 100);
	for (unsigned k = 0; k < 100; k++)
		ck_assert_uint_eq(used_len_of(&vr[0], k), VIRTIO_REQUEST_BYTES_MAX);
	ck_assert_uint_eq(atomic_load(&rng.bytes), 100ULL * VIRTIO_REQUEST_BYTES_MAX);
}
END_TEST

/* A chain of gigabytes (legal up to 2^32, 2.7.5): the device writes at
 * most VIRTIO_REQUEST_BYTES_MAX and says so in the used length, so the
 * host does bounded work and the used length cannot wrap (a 2^32-byte
 * chain reported 0 before). */
START_TEST(test_rng_huge_chain_used_length_is_what_was_written)
{
	/* 256 x 14 MiB over one buffer, through an indirect table: 3.5 GiB. */
	static struct vbuf b[256];
	for (unsigned i = 0; i < 256; i++)
		b[i] = (struct vbuf){BUF, 14u << 20, true};
	vrd_layout(&vr[0], ram.buf, 256, RING);
	fake_dev_queue(&rng.vdev, 0, &ram.m, &vr[0]);
	vrd_table(ram.buf, 0x100000, b, 256);
	vrd_desc(&vr[0], 0, 0x100000, 256 * 16, VQ_INDIRECT, 0);
	vrd_publish(&vr[0], 0);
	rng.vdev.ops->queue_notify(&rng.vdev, 0);
	ck_assert_uint_eq(ft.needs_reset, 0);
	ck_assert_uint_eq(vrd_used_idx(&vr[0]), 1);
	ck_assert_uint_eq(used_len_of(&vr[0], 0), VIRTIO_REQUEST_BYTES_MAX);
	ck_assert_uint_eq(atomic_load(&rng.bytes), VIRTIO_REQUEST_BYTES_MAX);
}
END_TEST

/* ---- virtio-blk (5.2) ---- */

enum { T_IN = 0, T_OUT = 1, T_FLUSH = 4, T_GET_ID = 8, T_DISCARD = 11 };
enum { S_OK = 0, S_IOERR = 1, S_UNSUPP = 2 };
#define SECT	       512
#define DISK_BYTES     (256 * 1024 + 100) /* a partial sector at the end */
#define F_BLK_SEG_MAX  (1ULL << 2)
#define F_BLK_RO       (1ULL << 5)
#define F_BLK_BLK_SIZE (1ULL << 6)
#define F_BLK_FLUSH    (1ULL << 9)
#define HDR	       0x100000ULL
#define STAT	       0x180000ULL

static struct virtio_blk blk;
static char path[64];
static int disk_fd = -1; /* the test's own view of the file (unlinked at once) */
static uint8_t *disk;	 /* what the file holds */

/* The device on `d` (NULL: its open failed, e says why), queue 0 set up. */
static void blk_plug(struct disk *d, struct err *e)
{
	int ret = virtio_blk_init(&blk, d, 1, e);
	ck_assert_msg(ret == 0, "virtio_blk_init: %s", e->msg);
	fake_transport_attach(&ft, &blk.vdev, VIRTIO_FEATURE(VIRTIO_F_VERSION_1));
	fake_dev_queue(&blk.vdev, 0, &ram.m, &vr[0]);
}

static void blk_open(bool ro)
{
	struct err e = {0};
	struct disk *d = disk_uring_open(path, ro, false, &e);
	unlink(path); /* nothing left behind, even when a case fails */
	blk_plug(d, &e);
}

static void blk_file(void)
{
	ram_up();
	snprintf(path, sizeof(path), "/tmp/vmm-unit-blk-XXXXXX");
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	disk = malloc(DISK_BYTES);
	fill_noise(disk, DISK_BYTES, 0xB10C);
	ck_assert_int_eq(pwrite(fd, disk, DISK_BYTES, 0), DISK_BYTES);
	disk_fd = fd;
}

static void blk_setup(void)
{
	blk_file();
	blk_open(false);
}

static void blk_setup_ro(void)
{
	blk_file();
	blk_open(true);
}

static void blk_teardown(void)
{
	virtio_blk_destroy(&blk);
	close(disk_fd);
	free(disk);
	fake_ram_free(&ram);
}

/* Request h: descriptors from 8*h on (or 0.. for a long one), header at
 * HDR + 0x100*h, the data buffers given, status byte at STAT + h. */
static void blk_req(uint16_t h, uint32_t type, uint64_t sector, const struct vbuf *data, unsigned n)
{
	ck_assert(h == 0 || (n + 2 <= 8 && 8u * h + 8 <= QSZ));
	struct vbuf b[QSZ];
	uint64_t hdr = HDR + 0x100ULL * h;
	put32(ram.buf + hdr, type);
	put32(ram.buf + hdr + 4, 0);
	put64(ram.buf + hdr + 8, sector);
	b[0] = (struct vbuf){hdr, 16, false};
	for (unsigned i = 0; i < n; i++)
		b[1 + i] = data[i];
	b[1 + n] = (struct vbuf){STAT + h, 1, true};
	ram.buf[STAT + h] = 0xEE;
	vrd_chain(&vr[0], (uint16_t)(8 * h), b, n + 2);
	vrd_publish(&vr[0], (uint16_t)(8 * h));
}

/* Notifies, then serves completions until `want` buffers are used. */
static void blk_run(uint16_t want)
{
	blk.vdev.ops->queue_notify(&blk.vdev, 0);
	for (int spins = 0; vrd_used_idx(&vr[0]) != want && spins < 100; spins++) {
		struct pollfd p = {.fd = blk.queues[0].completion_fd, .events = POLLIN};
		poll(&p, 1, 100);
		virtio_blk_complete(&blk.queues[0]);
	}
	ck_assert_uint_eq(vrd_used_idx(&vr[0]), want);
}

static uint32_t used_len(unsigned slot)
{
	return used_len_of(&vr[0], slot);
}

static void file_bytes(uint64_t off, uint8_t *buf, size_t len)
{
	ck_assert_int_eq(pread(disk_fd, buf, len, (off_t)off), (ssize_t)len);
}

static uint64_t cfg64(unsigned off)
{
	uint8_t b[8];
	blk.vdev.ops->config_read(&blk.vdev, off, b, 8);
	return get64(b);
}

static uint32_t cfg32(unsigned off)
{
	uint8_t b[4];
	blk.vdev.ops->config_read(&blk.vdev, off, b, 4);
	return get32(b);
}

START_TEST(test_blk_config_space)
{
	/* struct virtio_blk_config: capacity @0, seg_max @12, blk_size @20. */
	uint64_t f = virtio_offered_features(&blk.vdev);
	ck_assert_uint_eq(cfg64(0), DISK_BYTES / SECT);
	ck_assert_uint_eq(f & F_BLK_BLK_SIZE, F_BLK_BLK_SIZE);
	ck_assert_uint_eq(cfg32(20), SECT);
	ck_assert_uint_eq(f & F_BLK_SEG_MAX, F_BLK_SEG_MAX);
	ck_assert_uint_ge(cfg32(12), 1);
	ck_assert_uint_eq(f & F_BLK_RO, 0);
	ck_assert_uint_eq(f & F_BLK_FLUSH, F_BLK_FLUSH);
}
END_TEST

START_TEST(test_blk_read_returns_file_contents)
{
	const struct vbuf d[] = {{BUF, 2 * SECT, true}};
	blk_req(0, T_IN, 3, d, 1);
	blk_run(1);
	ck_assert_uint_eq(ram.buf[STAT], S_OK);
	ck_assert_int_eq(memcmp(ram.buf + BUF, disk + 3 * SECT, 2 * SECT), 0);
	ck_assert_uint_eq(used_len(0), 2 * SECT + 1);
	ck_assert_uint_ge(ft.used[0], 1);
}
END_TEST

START_TEST(test_blk_write_reaches_file)
{
	memset(ram.buf + BUF, 0x5A, SECT);
	const struct vbuf d[] = {{BUF, SECT, false}};
	blk_req(0, T_OUT, 5, d, 1);
	blk_run(1);
	ck_assert_uint_eq(ram.buf[STAT], S_OK);
	static uint8_t got[3 * SECT];
	file_bytes(4 * SECT, got, sizeof(got));
	ck_assert_int_eq(memcmp(got, disk + 4 * SECT, SECT), 0); /* neighbours intact */
	ck_assert(bytes_all(got + SECT, SECT, 0x5A));
	ck_assert_int_eq(memcmp(got + 2 * SECT, disk + 6 * SECT, SECT), 0);
}
END_TEST

START_TEST(test_blk_scattered_request_layout)
{
	/* 2.6.4: no assumption about descriptor layout: the header in two
	 * pieces, data in odd-sized pieces, the status byte sharing the last
	 * data descriptor. */
	uint64_t h = HDR;
	put32(ram.buf + h, T_IN);
	put32(ram.buf + h + 4, 0);
	put64(ram.buf + h + 8, 7);
	ram.buf[BUF + 0x1000 + 412] = 0xEE;
	const struct vbuf b[] = {
	    {h, 8, false},
	    {h + 8, 8, false},
	    {BUF, 100, true},
	    {BUF + 0x1000, 413, true},
	};
	vrd_chain(&vr[0], 0, b, 4);
	vrd_publish(&vr[0], 0);
	blk_run(1);
	ck_assert_uint_eq(ram.buf[BUF + 0x1000 + 412], S_OK);
	ck_assert_int_eq(memcmp(ram.buf + BUF, disk + 7 * SECT, 100), 0);
	ck_assert_int_eq(memcmp(ram.buf + BUF + 0x1000, disk + 7 * SECT + 100, 412), 0);
	ck_assert_uint_eq(used_len(0), SECT + 1);
}
END_TEST

START_TEST(test_blk_seg_max_segments_accepted)
{
	uint32_t segs = cfg32(12);
	ck_assert_uint_le(segs, QSZ - 2); /* must fit this ring with header and status */
	static struct vbuf d[QSZ];
	for (unsigned i = 0; i < segs; i++)
		d[i] = (struct vbuf){BUF + (uint64_t)SECT * i, SECT, true};
	blk_req(0, T_IN, 0, d, segs);
	blk_run(1);
	ck_assert_uint_eq(ram.buf[STAT], S_OK);
	ck_assert_int_eq(memcmp(ram.buf + BUF, disk, (size_t)segs * SECT), 0);
}
END_TEST

START_TEST(test_blk_flush_completes_ok)
{
	blk_req(0, T_FLUSH, 0, NULL, 0);
	blk_run(1);
	ck_assert_uint_eq(ram.buf[STAT], S_OK);
}
END_TEST

START_TEST(test_blk_get_id_is_nul_padded_ascii)
{
	memset(ram.buf + BUF, 0xCC, 20);
	const struct vbuf d[] = {{BUF, 20, true}};
	blk_req(0, T_GET_ID, 0, d, 1);
	blk_run(1);
	ck_assert_uint_eq(ram.buf[STAT], S_OK);
	const uint8_t *id = ram.buf + BUF;
	size_t n = 0;
	for (; n < 20 && id[n]; n++)
		ck_assert_msg(id[n] >= 0x20 && id[n] < 0x7F, "byte %zu is 0x%02x", n, id[n]);
	ck_assert_uint_ge(n, 1);
	ck_assert(bytes_all(id + n, 20 - n, 0)); /* NUL padding, up to 20 bytes */
	uint8_t first[20];
	memcpy(first, id, 20);
	blk_req(1, T_GET_ID, 0, d, 1);
	blk_run(2);
	ck_assert_int_eq(memcmp(first, id, 20), 0); /* stable */
}
END_TEST

START_TEST(test_blk_read_past_capacity_is_ioerr)
{
	uint64_t cap = DISK_BYTES / SECT;
	const struct vbuf d0[] = {{BUF, SECT, true}};
	const struct vbuf d1[] = {{BUF + 0x1000, 2 * SECT, true}};
	const struct vbuf d2[] = {{BUF + 0x2000, SECT, true}};
	blk_req(0, T_IN, cap, d0, 1);	     /* just past the end */
	blk_req(1, T_IN, cap - 1, d1, 1);    /* straddles it */
	blk_req(2, T_IN, UINT64_MAX, d2, 1); /* sector * 512 wraps */
	blk_run(3);
	ck_assert_uint_eq(ram.buf[STAT + 0], S_IOERR);
	ck_assert_uint_eq(ram.buf[STAT + 1], S_IOERR);
	ck_assert_uint_eq(ram.buf[STAT + 2], S_IOERR);
	/* The last whole sector is readable. */
	const struct vbuf d3[] = {{BUF + 0x3000, SECT, true}};
	blk_req(3, T_IN, cap - 1, d3, 1);
	blk_run(4);
	ck_assert_uint_eq(ram.buf[STAT + 3], S_OK);
	ck_assert_int_eq(memcmp(ram.buf + BUF + 0x3000, disk + (cap - 1) * SECT, SECT), 0);
}
END_TEST

START_TEST(test_blk_write_past_capacity_is_ioerr)
{
	uint64_t cap = DISK_BYTES / SECT;
	memset(ram.buf + BUF, 0x77, 2 * SECT);
	const struct vbuf d[] = {{BUF, 2 * SECT, false}};
	blk_req(0, T_OUT, cap - 1, d, 1);
	blk_run(1);
	ck_assert_uint_eq(ram.buf[STAT], S_IOERR);
}
END_TEST

START_TEST(test_blk_unknown_type_is_unsupp)
{
	const struct vbuf d[] = {{BUF, 16, false}};
	blk_req(0, 0x7F, 0, d, 1);
	blk_req(1, T_DISCARD, 0, d, 1); /* DISCARD was not offered */
	blk_run(2);
	ck_assert_uint_eq(ram.buf[STAT + 0], S_UNSUPP);
	ck_assert_uint_eq(ram.buf[STAT + 1], S_UNSUPP);
}
END_TEST

START_TEST(test_blk_partial_sector_read_not_ok)
{
	/* 5.2.6.1: data of IN/OUT is a multiple of 512; otherwise a driver error. */
	const struct vbuf d[] = {{BUF, 100, true}};
	blk_req(0, T_IN, 0, d, 1);
	blk_run(1);
	ck_assert_uint_ne(ram.buf[STAT], S_OK);
	ck_assert_uint_ne(ram.buf[STAT], 0xEE);
}
END_TEST

START_TEST(test_blk_request_without_status_byte_needs_reset)
{
	uint64_t h = HDR;
	put32(ram.buf + h, T_IN);
	put64(ram.buf + h + 8, 0);
	vrd_desc(&vr[0], 0, h, 16, 0, 0); /* header only, nothing writable */
	vrd_publish(&vr[0], 0);
	blk.vdev.ops->queue_notify(&blk.vdev, 0);
	ck_assert_uint_eq(ft.needs_reset, 1);
}
END_TEST

START_TEST(test_blk_ro_offers_ro_and_refuses_writes)
{
	ck_assert_uint_eq(virtio_offered_features(&blk.vdev) & F_BLK_RO, F_BLK_RO);
	memset(ram.buf + BUF, 0x66, SECT);
	const struct vbuf d[] = {{BUF, SECT, false}};
	blk_req(0, T_OUT, 2, d, 1);
	blk_run(1);
	ck_assert_uint_eq(ram.buf[STAT], S_IOERR);
	static uint8_t got[SECT];
	file_bytes(2 * SECT, got, SECT);
	ck_assert_int_eq(memcmp(got, disk + 2 * SECT, SECT), 0); /* 5.2.6.2: no data written */
	const struct vbuf r[] = {{BUF + 0x1000, SECT, true}};
	blk_req(1, T_IN, 2, r, 1); /* reads still work */
	blk_run(2);
	ck_assert_uint_eq(ram.buf[STAT + 1], S_OK);
	ck_assert_int_eq(memcmp(ram.buf + BUF + 0x1000, disk + 2 * SECT, SECT), 0);
}
END_TEST

/* Issue 26: a request completed at once (GET_ID here; an unsupported
 * type, a sector out of range or a write to a read-only disk alike) frees
 * its slot at once, so a driver that keeps listing the same head kept one
 * pass going (318,709 requests in one notify, no yield). The pass stops at
 * its budget (each request charged its bytes, at most
 * VIRTIO_REQUEST_BYTES_MAX) and yields; nothing is lost. */
START_TEST(test_blk_sync_completions_pass_stops_at_its_budget_and_yields)
{
	const unsigned per_pass = VIRTIO_PASS_BYTES / VIRTIO_REQUEST_BYTES_MAX; /* 64 */
	const struct vbuf d[] = {{BUF, 1u << 20, true}};
	blk_req(0, T_GET_ID, 0, d, 1);
	for (unsigned i = 1; i < 100; i++)
		vrd_publish(&vr[0], 0);
	expect_budget_passes(&ft, &blk.vdev, 0, &vr[0], per_pass, 100);
	ck_assert_uint_eq(ft.needs_reset, 0);
	ck_assert_uint_eq(atomic_load(&blk.stats.get_ids), 100);
}
END_TEST

/* Issue 17: O_DIRECT bounce buffers do not grow with what the guest asks:
 * 8 unaligned 1 MiB reads in one notify keep at most BLK_BOUNCE_QUEUE_MAX
 * in flight (the rest wait in the ring and go when memory comes back), all
 * complete OK; an unaligned request over BLK_BOUNCE_REQUEST_MAX is IOERR. */
START_TEST(test_blk_direct_bounce_memory_is_bounded)
{
	struct err e = {0};
	char big[64];
	snprintf(big, sizeof(big), "/tmp/vmm-unit-bounce-XXXXXX");
	int fd = mkstemp(big);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 8 << 20), 0);
	virtio_blk_destroy(&blk);
	struct disk *d = disk_uring_open(big, false, true, &e);
	unlink(big);
	close(fd);
	blk_plug(d, &e);
	for (uint16_t h = 0; h < 8; h++) {
		const struct vbuf d = {BUF + 1, 1u << 20, true}; /* not sector-aligned */
		blk_req(h, T_IN, 0, &d, 1);
	}
	blk.vdev.ops->queue_notify(&blk.vdev, 0);
	ck_assert_uint_le(blk.queues[0].bounce_bytes, BLK_BOUNCE_QUEUE_MAX);
	ck_assert_uint_eq(blk.queues[0].inflight, BLK_BOUNCE_QUEUE_MAX / (1u << 20));
	ck_assert_uint_ge(atomic_load(&blk.stats.bounce_waits), 1);
	blk_run(8);
	for (unsigned k = 0; k < 8; k++)
		ck_assert_uint_eq(ram.buf[STAT + k], S_OK);
	ck_assert_uint_eq(blk.queues[0].bounce_bytes, 0);
	ck_assert_uint_eq(atomic_load(&blk.stats.bounced), 8);
	/* Past the per-request limit: IOERR at once, nothing allocated. */
	const struct vbuf huge = {BUF + 1, 2u << 20, true};
	blk_req(0, T_IN, 0, &huge, 1);
	blk_run(9);
	ck_assert_uint_eq(ram.buf[STAT + 0], S_IOERR);
	ck_assert_uint_eq(atomic_load(&blk.stats.bounced), 8);
}
END_TEST

/* ---- virtio-blk's request parser over the fake disk (tests/unit/disk_fake.h) ---- */

static struct disk_fake *fake; /* blk's disk: virtio_blk_destroy frees it */

static void blk_fake_setup(void)
{
	struct err e = {0};
	ram_up();
	fake = disk_fake_new(DISK_BYTES, false, false);
	fill_noise(fake->data, DISK_BYTES, 0xFA4E);
	blk_plug(&fake->disk, &e);
}

static void blk_fake_teardown(void)
{
	virtio_blk_destroy(&blk);
	fake_ram_free(&ram);
}

START_TEST(test_blk_fake_read_lands_backend_bytes)
{
	const struct vbuf d[] = {{BUF, SECT, true}, {BUF + 0x1000, 2 * SECT, true}};
	blk_req(0, T_IN, 9, d, 2);
	blk_run(1);
	ck_assert_uint_eq(ram.buf[STAT], S_OK);
	ck_assert_int_eq(memcmp(ram.buf + BUF, fake->data + 9 * SECT, SECT), 0);
	ck_assert_int_eq(memcmp(ram.buf + BUF + 0x1000, fake->data + 10 * SECT, 2 * SECT), 0);
	ck_assert_uint_eq(used_len(0), 3 * SECT + 1);
	ck_assert_uint_eq(fake->reads, 1);
	ck_assert_uint_eq(atomic_load(&blk.stats.bytes), 3 * SECT);
}
END_TEST

/* A host error, or a short transfer, is VIRTIO_BLK_S_IOERR with only the
 * status byte used (5.2.6); the next request is served as usual. */
START_TEST(test_blk_fake_backend_failure_is_ioerr)
{
	const struct vbuf d[] = {{BUF, 2 * SECT, true}};
	fake->fail_next = true;
	fake->fail_res = -EIO;
	blk_req(0, T_IN, 0, d, 1);
	blk_run(1);
	ck_assert_uint_eq(ram.buf[STAT], S_IOERR);
	ck_assert_uint_eq(used_len(0), 1);
	fake->fail_next = true;
	fake->fail_res = SECT; /* half of it */
	blk_req(1, T_IN, 0, d, 1);
	blk_run(2);
	ck_assert_uint_eq(ram.buf[STAT + 1], S_IOERR);
	ck_assert_uint_eq(atomic_load(&blk.stats.ioerrs), 2);
	blk_req(2, T_IN, 0, d, 1);
	blk_run(3);
	ck_assert_uint_eq(ram.buf[STAT + 2], S_OK);
	ck_assert_uint_eq(atomic_load(&blk.stats.bytes), 2 * SECT);
}
END_TEST

/* A backend with no room: the request fails at once, nothing in flight. */
START_TEST(test_blk_fake_refused_request_is_ioerr_at_once)
{
	fake->refuse_next = true;
	blk_req(0, T_FLUSH, 0, NULL, 0);
	blk.vdev.ops->queue_notify(&blk.vdev, 0);
	ck_assert_uint_eq(vrd_used_idx(&vr[0]), 1);
	ck_assert_uint_eq(ram.buf[STAT], S_IOERR);
	ck_assert_uint_eq(blk.queues[0].inflight, 0);
	ck_assert_uint_eq(fake->flushes, 0);
}
END_TEST

/* 5.2.6.2: without VIRTIO_BLK_F_FLUSH a completed write must be durable;
 * with it, durability waits for FLUSH. */
START_TEST(test_blk_fake_write_durable_unless_flush_negotiated)
{
	memset(ram.buf + BUF, 0x3C, SECT);
	const struct vbuf d[] = {{BUF, SECT, false}};
	blk_req(0, T_OUT, 4, d, 1);
	blk_run(1);
	ck_assert_uint_eq(ram.buf[STAT], S_OK);
	ck_assert(bytes_all(fake->data + 4 * SECT, SECT, 0x3C));
	ck_assert(fake->last_dsync);
	blk.vdev.features |= F_BLK_FLUSH;
	blk_req(1, T_OUT, 5, d, 1);
	blk_run(2);
	ck_assert(!fake->last_dsync);
	ck_assert_uint_eq(fake->writes, 2);
}
END_TEST

/* A head made available again while its request is in flight is a broken
 * driver (2.7.13.1: the device owns it): NEEDS_RESET; the request in
 * flight still completes. */
START_TEST(test_blk_fake_head_in_flight_again_needs_reset)
{
	fake->hold = true;
	const struct vbuf d[] = {{BUF, SECT, true}};
	blk_req(0, T_IN, 1, d, 1);
	blk.vdev.ops->queue_notify(&blk.vdev, 0);
	ck_assert_uint_eq(blk.queues[0].inflight, 1);
	vrd_publish(&vr[0], 0);
	blk.vdev.ops->queue_notify(&blk.vdev, 0);
	ck_assert_uint_eq(ft.needs_reset, 1);
	ck_assert_uint_eq(disk_fake_release(blk.queues[0].dq, 1), 1);
	virtio_blk_complete(&blk.queues[0]);
	ck_assert_uint_eq(vrd_used_idx(&vr[0]), 1);
	ck_assert_uint_eq(ram.buf[STAT], S_OK);
}
END_TEST

/* Reset waits for what is in flight and delivers none of it: the driver
 * has taken its memory back. */
START_TEST(test_blk_fake_reset_ends_requests_in_flight)
{
	fake->hold = true;
	const struct vbuf d[] = {{BUF, SECT, true}};
	blk_req(0, T_IN, 1, d, 1);
	blk_req(1, T_FLUSH, 0, NULL, 0);
	blk.vdev.ops->queue_notify(&blk.vdev, 0);
	ck_assert_uint_eq(disk_fake_pending(blk.queues[0].dq), 2);
	blk.vdev.ops->reset(&blk.vdev);
	ck_assert_uint_eq(blk.queues[0].inflight, 0);
	ck_assert_uint_eq(disk_fake_pending(blk.queues[0].dq), 0);
	ck_assert_uint_eq(vrd_used_idx(&vr[0]), 0);
}
END_TEST

/* ---- virtio-console (5.3) ---- */

enum { RXQ = 0, TXQ = 1 };
static struct virtio_console con;
static struct char_rec out;

static void con_setup(void)
{
	ram_up();
	for (unsigned q = 0; q < 2; q++)
		vrd_layout(&vr[q], ram.buf, 64, RING + 0x20000ULL * q);
	ck_assert_int_eq(virtio_console_init(&con, char_rec_sink(&out)), 0);
	fake_transport_attach(&ft, &con.vdev, VIRTIO_FEATURE(VIRTIO_F_VERSION_1));
	fake_dev_queue(&con.vdev, RXQ, &ram.m, &vr[RXQ]);
	fake_dev_queue(&con.vdev, TXQ, &ram.m, &vr[TXQ]);
}

static void con_teardown(void)
{
	virtio_console_destroy(&con);
	fake_ram_free(&ram);
}

static void rx_post(uint16_t h, uint32_t len)
{
	vrd_desc(&vr[RXQ], h, BUF + 0x1000ULL * h, len, VQ_WRITE, 0);
	vrd_publish(&vr[RXQ], h);
}

START_TEST(test_console_tx_reaches_sink)
{
	memcpy(ram.buf + BUF, "hello ", 6);
	memcpy(ram.buf + BUF + 0x100, "world", 5);
	const struct vbuf b[] = {{BUF, 6, false}, {BUF + 0x100, 5, false}};
	vrd_chain(&vr[TXQ], 0, b, 2);
	vrd_publish(&vr[TXQ], 0);
	memcpy(ram.buf + BUF + 0x200, "!\n", 2);
	vrd_desc(&vr[TXQ], 2, BUF + 0x200, 2, 0, 0);
	vrd_publish(&vr[TXQ], 2);
	con.vdev.ops->queue_notify(&con.vdev, TXQ);
	ck_assert_uint_eq(out.n, 13);
	ck_assert_int_eq(memcmp(out.buf, "hello world!\n", 13), 0);
	ck_assert_uint_eq(vrd_used_idx(&vr[TXQ]), 2);
	ck_assert_uint_eq(used_len_of(&vr[TXQ], 0), 0); /* nothing written back */
	ck_assert_uint_eq(ft.used[TXQ], 1);
}
END_TEST

/* Issue 17: one transmit buffer makes the host write at most
 * VIRTIO_REQUEST_BYTES_MAX; the rest is dropped and counted. */
START_TEST(test_console_tx_one_buffer_writes_at_most_the_request_cap)
{
	const uint32_t len = VIRTIO_REQUEST_BYTES_MAX + 5000;
	memset(ram.buf + BUF, 'x', len);
	vrd_desc(&vr[TXQ], 0, BUF, len, 0, 0);
	vrd_publish(&vr[TXQ], 0);
	con.vdev.ops->queue_notify(&con.vdev, TXQ);
	ck_assert_uint_eq(vrd_used_idx(&vr[TXQ]), 1);
	ck_assert_uint_eq(atomic_load(&con.tx_bytes), VIRTIO_REQUEST_BYTES_MAX);
	ck_assert_uint_eq(atomic_load(&con.tx_dropped), 5000);
}
END_TEST

START_TEST(test_console_rx_fills_posted_buffers)
{
	rx_post(0, 16);
	ck_assert_uint_eq(virtio_console_receive(&con, (const uint8_t *)"abc", 3), 3);
	ck_assert_uint_eq(vrd_used_idx(&vr[RXQ]), 1);
	ck_assert_uint_eq(used_len_of(&vr[RXQ], 0), 3);
	ck_assert_int_eq(memcmp(ram.buf + BUF, "abc", 3), 0);
	ck_assert_uint_eq(ft.used[RXQ], 1);
}
END_TEST

START_TEST(test_console_input_kept_until_buffers_posted)
{
	ck_assert_uint_eq(virtio_console_receive(&con, (const uint8_t *)"early", 5), 5);
	ck_assert_uint_eq(vrd_used_idx(&vr[RXQ]), 0);
	rx_post(0, 16);
	con.vdev.ops->queue_notify(&con.vdev, RXQ);
	ck_assert_uint_eq(vrd_used_idx(&vr[RXQ]), 1);
	ck_assert_uint_eq(used_len_of(&vr[RXQ], 0), 5);
	ck_assert_int_eq(memcmp(ram.buf + BUF, "early", 5), 0);
}
END_TEST

START_TEST(test_console_input_waits_for_driver_ok)
{
	/* 3.1.1: before DRIVER_OK (or with NEEDS_RESET) the device uses no
	 * buffers, even when input arrives and buffers are posted. */
	ft.not_live = true;
	rx_post(0, 16);
	ck_assert_uint_eq(virtio_console_receive(&con, (const uint8_t *)"soon", 4), 4);
	ck_assert_uint_eq(vrd_used_idx(&vr[RXQ]), 0);
	ck_assert_uint_eq(ft.used[RXQ], 0);
	ft.not_live = false; /* DRIVER_OK; the driver kicks its receive queue */
	con.vdev.ops->queue_notify(&con.vdev, RXQ);
	ck_assert_uint_eq(vrd_used_idx(&vr[RXQ]), 1);
	ck_assert_uint_eq(used_len_of(&vr[RXQ], 0), 4);
	ck_assert_int_eq(memcmp(ram.buf + BUF, "soon", 4), 0);
}
END_TEST

START_TEST(test_console_input_spans_buffers_in_order)
{
	rx_post(0, 4);
	rx_post(1, 4);
	ck_assert_uint_eq(virtio_console_receive(&con, (const uint8_t *)"abcdefghij", 10), 10);
	ck_assert_uint_eq(vrd_used_idx(&vr[RXQ]), 2);
	ck_assert_uint_eq(used_len_of(&vr[RXQ], 0), 4);
	ck_assert_uint_eq(used_len_of(&vr[RXQ], 1), 4);
	ck_assert_int_eq(memcmp(ram.buf + BUF, "abcd", 4), 0);
	ck_assert_int_eq(memcmp(ram.buf + BUF + 0x1000, "efgh", 4), 0);
	rx_post(2, 8); /* the rest waits for the next buffer */
	con.vdev.ops->queue_notify(&con.vdev, RXQ);
	ck_assert_uint_eq(vrd_used_idx(&vr[RXQ]), 3);
	ck_assert_uint_eq(used_len_of(&vr[RXQ], 2), 2);
	ck_assert_int_eq(memcmp(ram.buf + BUF + 0x2000, "ij", 2), 0);
}
END_TEST

START_TEST(test_console_accepted_input_is_what_arrives)
{
	static uint8_t in[6000], got[6000];
	fill_noise(in, sizeof(in), 7);
	size_t n = virtio_console_receive(&con, in, sizeof(in));
	ck_assert_uint_ge(n, 1);
	ck_assert_uint_le(n, sizeof(in));
	size_t total = 0;
	for (uint16_t h = 0; h < 2; h++)
		rx_post(h, 4096);
	con.vdev.ops->queue_notify(&con.vdev, RXQ);
	for (uint16_t i = 0; i < vrd_used_idx(&vr[RXQ]); i++) {
		uint32_t id, len;
		vrd_used_elem(&vr[RXQ], i, &id, &len);
		memcpy(got + total, ram.buf + BUF + 0x1000ULL * id, len);
		total += len;
	}
	ck_assert_uint_eq(total, n);
	ck_assert_int_eq(memcmp(got, in, n), 0);
}
END_TEST

START_TEST(test_console_broken_tx_chain_needs_reset)
{
	vrd_desc(&vr[TXQ], 0, BUF, 4, VQ_NEXT, 64);
	vrd_publish(&vr[TXQ], 0);
	con.vdev.ops->queue_notify(&con.vdev, TXQ);
	ck_assert_uint_eq(ft.needs_reset, 1);
	ck_assert_uint_eq(out.n, 0);
}
END_TEST

static Suite *virtio_devices_suite(void)
{
	Suite *s = suite_create("virtio_devices");
	TCase *t = tcase_create("rng");
	tcase_add_checked_fixture(t, rng_setup, rng_teardown);
	tcase_add_test(t, test_rng_pass_stops_at_its_budget_and_yields);
	tcase_add_test(t, test_rng_huge_chain_used_length_is_what_was_written);
	tcase_add_test(t, test_rng_fills_writable_buffers);
	tcase_add_test(t, test_rng_broken_chain_needs_reset);
	suite_add_tcase(s, t);

	t = tcase_create("blk");
	tcase_add_checked_fixture(t, blk_setup, blk_teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_blk_config_space);
	tcase_add_test(t, test_blk_read_returns_file_contents);
	tcase_add_test(t, test_blk_write_reaches_file);
	tcase_add_test(t, test_blk_scattered_request_layout);
	tcase_add_test(t, test_blk_seg_max_segments_accepted);
	tcase_add_test(t, test_blk_flush_completes_ok);
	tcase_add_test(t, test_blk_get_id_is_nul_padded_ascii);
	tcase_add_test(t, test_blk_read_past_capacity_is_ioerr);
	tcase_add_test(t, test_blk_write_past_capacity_is_ioerr);
	tcase_add_test(t, test_blk_unknown_type_is_unsupp);
	tcase_add_test(t, test_blk_partial_sector_read_not_ok);
	tcase_add_test(t, test_blk_request_without_status_byte_needs_reset);
	suite_add_tcase(s, t);

	t = tcase_create("blk_ro");
	tcase_add_checked_fixture(t, blk_setup_ro, blk_teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_blk_ro_offers_ro_and_refuses_writes);
	tcase_add_test(t, test_blk_direct_bounce_memory_is_bounded);
	tcase_add_test(t, test_blk_sync_completions_pass_stops_at_its_budget_and_yields);
	suite_add_tcase(s, t);

	t = tcase_create("blk_fake");
	tcase_add_checked_fixture(t, blk_fake_setup, blk_fake_teardown);
	tcase_add_test(t, test_blk_fake_read_lands_backend_bytes);
	tcase_add_test(t, test_blk_fake_backend_failure_is_ioerr);
	tcase_add_test(t, test_blk_fake_refused_request_is_ioerr_at_once);
	tcase_add_test(t, test_blk_fake_write_durable_unless_flush_negotiated);
	tcase_add_test(t, test_blk_fake_head_in_flight_again_needs_reset);
	tcase_add_test(t, test_blk_fake_reset_ends_requests_in_flight);
	suite_add_tcase(s, t);

	t = tcase_create("console");
	tcase_add_checked_fixture(t, con_setup, con_teardown);
	tcase_add_test(t, test_console_tx_reaches_sink);
	tcase_add_test(t, test_console_tx_one_buffer_writes_at_most_the_request_cap);
	tcase_add_test(t, test_console_rx_fills_posted_buffers);
	tcase_add_test(t, test_console_input_kept_until_buffers_posted);
	tcase_add_test(t, test_console_input_waits_for_driver_ok);
	tcase_add_test(t, test_console_input_spans_buffers_in_order);
	tcase_add_test(t, test_console_accepted_input_is_what_arrives);
	tcase_add_test(t, test_console_broken_tx_chain_needs_reset);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(virtio_devices_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
