/*
 * The split-ring walker (virtio 1.2, 2.7) against rings laid out by hand in
 * fake RAM, the way a driver (or a hostile one) would write them: ring
 * placement and alignment (2.7, 2.7.2), descriptor chains (2.7.5), indirect
 * tables (2.7.5.3), the available and used rings (2.7.6, 2.7.8) and
 * notification suppression (2.7.7, 2.7.10).
 */
#include "virtio_helpers.h"

#include "devices/virtio/virtqueue.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define RAM   (16 * MiB)
#define QS    8
#define RING  0x10000ULL
#define BUF   0x100000ULL
#define TABLE 0x80000ULL

static struct fake_ram ram;
static struct vring_drv vr;
static struct virtq q;
static struct virtq_elem e;

static void setup(void)
{
	fake_ram_init(&ram, RAM);
	vrd_layout(&vr, ram.buf, QS, RING);
	ck_assert_int_eq(virtq_init(&q, &ram.m, QS, QS, vr.desc, vr.avail, vr.used, false),
			 VIRTQ_OK);
}

static void setup_event_idx(void)
{
	setup();
	ck_assert_int_eq(virtq_init(&q, &ram.m, QS, QS, vr.desc, vr.avail, vr.used, true),
			 VIRTQ_OK);
}

static void teardown(void)
{
	fake_ram_free(&ram);
}

static int init_at(uint16_t size, uint16_t max, uint64_t d, uint64_t a, uint64_t u, bool ev)
{
	struct virtq t;
	return virtq_init(&t, &ram.m, size, max, d, a, u, ev);
}

/* A one-descriptor buffer at head h, published. */
static void post1(uint16_t h, uint64_t addr, uint32_t len, bool write)
{
	vrd_desc(&vr, h, addr, len, write ? VQ_WRITE : 0, 0);
	vrd_publish(&vr, h);
}

/* ---- virtq_init: size and placement (2.7, 2.7.2) ---- */

START_TEST(test_init_refuses_bad_sizes)
{
	static const uint16_t bad[] = {0, 3, 6, 12, 16 /* > max 8 */};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(init_at(bad[i], 8, RING, RING + 0x1000, RING + 0x2000, false) < 0,
			      "size %u accepted", bad[i]);
	static const uint16_t good[] = {1, 2, 4, 8};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ck_assert_int_eq(init_at(good[i], 8, RING, RING + 0x1000, RING + 0x2000, false), 0);
}
END_TEST

START_TEST(test_init_refuses_misaligned_rings)
{
	/* 2.7.2: descriptor table 16, available ring 2, used ring 4. */
	for (unsigned off = 1; off < 16; off++)
		ck_assert_msg(init_at(QS, QS, RING + off, RING + 0x1000, RING + 0x2000, false) < 0,
			      "desc at +%u accepted", off);
	ck_assert_int_lt(init_at(QS, QS, RING, RING + 0x1001, RING + 0x2000, false), 0);
	for (unsigned off = 1; off < 4; off++)
		ck_assert_int_lt(init_at(QS, QS, RING, RING + 0x1000, RING + 0x2000 + off, false),
				 0);
	/* The weakest legal alignment of each is accepted. */
	ck_assert_int_eq(init_at(QS, QS, RING + 16, RING + 0x1002, RING + 0x2004, false), 0);
}
END_TEST

START_TEST(test_init_refuses_rings_partly_outside_ram)
{
	uint64_t end = RAM;
	ck_assert_int_lt(init_at(QS, QS, end - 16 * QS / 2, RING + 0x1000, RING + 0x2000, false),
			 0);
	ck_assert_int_lt(init_at(QS, QS, RING, end - 4, RING + 0x2000, false), 0);
	ck_assert_int_lt(init_at(QS, QS, RING, RING + 0x1000, end - 8, false), 0);
	ck_assert_int_lt(
	    init_at(QS, QS, GUEST_MMIO_HOLE_START, RING + 0x1000, RING + 0x2000, false), 0);
	/* A ring ending exactly at the end of RAM fits... */
	uint64_t avail_sz = 4 + 2 * QS, used_sz = 4 + 8 * QS;
	ck_assert_int_eq(init_at(QS, QS, end - 16 * QS, RING + 0x1000, RING + 0x2000, false), 0);
	ck_assert_int_eq(init_at(QS, QS, RING, end - avail_sz, RING + 0x2000, false), 0);
	ck_assert_int_eq(init_at(QS, QS, RING, RING + 0x1000, end - used_sz, false), 0);
	/* ...but not with EVENT_IDX, whose used_event/avail_event add 2 bytes (2.7.6, 2.7.8). */
	ck_assert_int_lt(init_at(QS, QS, RING, end - avail_sz, RING + 0x2000, true), 0);
	ck_assert_int_lt(init_at(QS, QS, RING, RING + 0x1000, end - used_sz, true), 0);
}
END_TEST

/* ---- chains (2.7.5, 2.7.4.2) ---- */

START_TEST(test_simple_chain_gives_out_and_in_iovecs)
{
	const struct vbuf b[] = {
	    {BUF, 16, false},
	    {BUF + 0x1000, 100, false},
	    {BUF + 0x2000, 512, true},
	    {BUF + 0x3000, 1, true},
	};
	vrd_chain(&vr, 3, b, 4);
	vrd_publish(&vr, 3);
	ck_assert_int_eq(virtq_pop(&q, &e), 1);
	ck_assert_uint_eq(e.head, 3);
	ck_assert_uint_eq(e.nout, 2);
	ck_assert_uint_eq(e.nin, 2);
	ck_assert_ptr_eq(e.out[0].iov_base, ram.buf + BUF);
	ck_assert_uint_eq(e.out[0].iov_len, 16);
	ck_assert_ptr_eq(e.out[1].iov_base, ram.buf + BUF + 0x1000);
	ck_assert_uint_eq(e.out[1].iov_len, 100);
	ck_assert_ptr_eq(e.in[0].iov_base, ram.buf + BUF + 0x2000);
	ck_assert_uint_eq(e.in[0].iov_len, 512);
	ck_assert_ptr_eq(e.in[1].iov_base, ram.buf + BUF + 0x3000);
	ck_assert_uint_eq(e.in[1].iov_len, 1);
	ck_assert_uint_eq(e.out_len, 116);
	ck_assert_uint_eq(e.in_len, 513);
	ck_assert_int_eq(virtq_pop(&q, &e), 0); /* nothing more available */
}
END_TEST

START_TEST(test_buffers_taken_in_avail_order)
{
	post1(5, BUF, 1, false);
	post1(2, BUF + 16, 2, false);
	post1(7, BUF + 32, 3, true);
	uint16_t want[] = {5, 2, 7};
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(virtq_pop(&q, &e), 1);
		ck_assert_uint_eq(e.head, want[i]);
	}
	ck_assert_int_eq(virtq_pop(&q, &e), 0);
}
END_TEST

START_TEST(test_chain_as_long_as_the_queue_is_accepted)
{
	struct vbuf b[QS];
	for (unsigned i = 0; i < QS; i++)
		b[i] = (struct vbuf){BUF + 0x100 * i, 8, i >= QS / 2};
	vrd_chain(&vr, 0, b, QS);
	vrd_publish(&vr, 0);
	ck_assert_int_eq(virtq_pop(&q, &e), 1);
	ck_assert_uint_eq(e.nout + e.nin, QS);
}
END_TEST

START_TEST(test_readable_after_writable_rejected)
{
	const struct vbuf b[] = {
	    {BUF, 16, false}, {BUF + 0x100, 16, true}, {BUF + 0x200, 16, false}};
	vrd_chain(&vr, 0, b, 3);
	vrd_publish(&vr, 0);
	ck_assert_int_eq(virtq_pop(&q, &e), VIRTQ_ERR_ORDER);
}
END_TEST

START_TEST(test_next_out_of_range_rejected)
{
	vrd_desc(&vr, 0, BUF, 16, VQ_NEXT, QS);
	vrd_publish(&vr, 0);
	ck_assert_int_eq(virtq_pop(&q, &e), VIRTQ_ERR_NEXT);
}
END_TEST

START_TEST(test_loop_rejected)
{
	vrd_desc(&vr, 1, BUF, 16, VQ_NEXT, 4);
	vrd_desc(&vr, 4, BUF + 16, 16, VQ_NEXT, 1); /* 1 -> 4 -> 1 */
	vrd_publish(&vr, 1);
	ck_assert_int_eq(virtq_pop(&q, &e), VIRTQ_ERR_LOOP);
}
END_TEST

START_TEST(test_self_loop_and_long_cycle_rejected)
{
	vrd_desc(&vr, 2, BUF, 16, VQ_NEXT, 2);
	vrd_publish(&vr, 2);
	ck_assert_int_eq(virtq_pop(&q, &e), VIRTQ_ERR_LOOP);

	/* A cycle through every descriptor: longer than the queue. */
	vrd_layout(&vr, ram.buf, QS, RING);
	ck_assert_int_eq(virtq_init(&q, &ram.m, QS, QS, vr.desc, vr.avail, vr.used, false), 0);
	for (unsigned i = 0; i < QS; i++)
		vrd_desc(&vr, i, BUF + 16 * i, 16, VQ_NEXT, (uint16_t)((i + 1) % QS));
	vrd_publish(&vr, 0);
	ck_assert_int_eq(virtq_pop(&q, &e), VIRTQ_ERR_LOOP);
}
END_TEST

START_TEST(test_avail_index_too_far_ahead_rejected)
{
	for (unsigned i = 0; i < QS; i++)
		vrd_desc(&vr, i, BUF + 16 * i, 16, 0, 0);
	vrd_set_avail_idx(&vr, QS + 1);
	ck_assert_int_eq(virtq_pop(&q, &e), VIRTQ_ERR_AVAIL_IDX);
	/* A whole queue's worth is legal. */
	for (unsigned i = 0; i < QS; i++)
		put16(ram.buf + vr.avail + 4 + 2 * i, (uint16_t)i);
	vrd_set_avail_idx(&vr, QS);
	for (unsigned i = 0; i < QS; i++)
		ck_assert_int_eq(virtq_pop(&q, &e), 1);
	ck_assert_int_eq(virtq_pop(&q, &e), 0);
}
END_TEST

START_TEST(test_head_out_of_range_rejected)
{
	vrd_publish(&vr, QS);
	ck_assert_int_eq(virtq_pop(&q, &e), VIRTQ_ERR_HEAD);
	vrd_layout(&vr, ram.buf, QS, RING);
	ck_assert_int_eq(virtq_init(&q, &ram.m, QS, QS, vr.desc, vr.avail, vr.used, false), 0);
	vrd_publish(&vr, 0xFFFF);
	ck_assert_int_eq(virtq_pop(&q, &e), VIRTQ_ERR_HEAD);
}
END_TEST

START_TEST(test_buffer_outside_ram_rejected)
{
	const struct {
		uint64_t addr;
		uint32_t len;
	} bad[] = {
	    {GUEST_MMIO_HOLE_START, 16},   /* in the MMIO hole */
	    {0xFEE00000ULL, 4},		   /* the LAPIC */
	    {RAM - 8, 16},		   /* crosses the end of RAM */
	    {RAM, 1},			   /* just past it */
	    {0xFFFFFFFFFFFFFFF0ULL, 0x20}, /* wraps the address space */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		vrd_layout(&vr, ram.buf, QS, RING);
		ck_assert_int_eq(virtq_init(&q, &ram.m, QS, QS, vr.desc, vr.avail, vr.used, false),
				 0);
		post1(0, bad[i].addr, bad[i].len, i & 1);
		ck_assert_msg(virtq_pop(&q, &e) == VIRTQ_ERR_ADDR, "buffer %zu at 0x%llx accepted",
			      i, (unsigned long long)bad[i].addr);
	}
	/* The last bytes of RAM are fine. */
	vrd_layout(&vr, ram.buf, QS, RING);
	ck_assert_int_eq(virtq_init(&q, &ram.m, QS, QS, vr.desc, vr.avail, vr.used, false), 0);
	post1(0, RAM - 16, 16, true);
	ck_assert_int_eq(virtq_pop(&q, &e), 1);
	ck_assert_ptr_eq(e.in[0].iov_base, ram.buf + RAM - 16);
}
END_TEST

START_TEST(test_later_descriptor_outside_ram_rejected)
{
	const struct vbuf b[] = {{BUF, 16, false}, {GUEST_MMIO_HOLE_START + 0x1000, 64, true}};
	vrd_chain(&vr, 0, b, 2);
	vrd_publish(&vr, 0);
	ck_assert_int_eq(virtq_pop(&q, &e), VIRTQ_ERR_ADDR);
}
END_TEST

/* ---- indirect tables (2.7.5.3) ---- */

static void post_indirect(uint16_t head, uint64_t table, uint32_t len, uint16_t flags)
{
	vrd_desc(&vr, head, table, len, (uint16_t)(VQ_INDIRECT | flags), 0);
	vrd_publish(&vr, head);
}

START_TEST(test_indirect_table_walked)
{
	const struct vbuf b[] = {
	    {BUF, 16, false}, {BUF + 0x1000, 512, true}, {BUF + 0x2000, 1, true}};
	vrd_table(ram.buf, TABLE, b, 3);
	post_indirect(6, TABLE, 3 * 16, 0);
	ck_assert_int_eq(virtq_pop(&q, &e), 1);
	ck_assert_uint_eq(e.head, 6);
	ck_assert_uint_eq(e.nout, 1);
	ck_assert_uint_eq(e.nin, 2);
	ck_assert_ptr_eq(e.out[0].iov_base, ram.buf + BUF);
	ck_assert_ptr_eq(e.in[0].iov_base, ram.buf + BUF + 0x1000);
	ck_assert_uint_eq(e.in[1].iov_len, 1);
	ck_assert_uint_eq(e.in_len, 513);
}
END_TEST

START_TEST(test_direct_descriptors_then_indirect_accepted)
{
	/* 2.7.5.3.2: the device MUST handle normal chained descriptors
	 * followed by a single indirect one. */
	const struct vbuf t[] = {{BUF + 0x1000, 64, true}};
	vrd_table(ram.buf, TABLE, t, 1);
	vrd_desc(&vr, 0, BUF, 16, VQ_NEXT, 1);
	vrd_desc(&vr, 1, TABLE, 16, VQ_INDIRECT, 0);
	vrd_publish(&vr, 0);
	ck_assert_int_eq(virtq_pop(&q, &e), 1);
	ck_assert_uint_eq(e.nout, 1);
	ck_assert_uint_eq(e.nin, 1);
	ck_assert_ptr_eq(e.in[0].iov_base, ram.buf + BUF + 0x1000);
}
END_TEST

START_TEST(test_indirect_descriptor_write_flag_ignored)
{
	/* 2.7.5.3.2: "The device MUST ignore the write-only flag in the
	 * descriptor that refers to an indirect table": the table's own
	 * flags say which buffers are writable. */
	const struct vbuf b[] = {{BUF, 16, false}, {BUF + 0x1000, 8, true}};
	vrd_table(ram.buf, TABLE, b, 2);
	post_indirect(0, TABLE, 2 * 16, VQ_WRITE);
	ck_assert_int_eq(virtq_pop(&q, &e), 1);
	ck_assert_uint_eq(e.nout, 1);
	ck_assert_uint_eq(e.nin, 1);
}
END_TEST

START_TEST(test_nested_indirect_rejected)
{
	const struct vbuf inner[] = {{BUF, 16, false}};
	vrd_table(ram.buf, TABLE + 0x1000, inner, 1);
	vrd_desc_at(ram.buf, TABLE, 0, TABLE + 0x1000, 16, VQ_INDIRECT, 0);
	post_indirect(0, TABLE, 16, 0);
	ck_assert_int_eq(virtq_pop(&q, &e), VIRTQ_ERR_INDIRECT);
}
END_TEST

START_TEST(test_indirect_with_next_rejected)
{
	const struct vbuf b[] = {{BUF, 16, false}};
	vrd_table(ram.buf, TABLE, b, 1);
	vrd_desc(&vr, 0, TABLE, 16, VQ_INDIRECT | VQ_NEXT, 1);
	vrd_desc(&vr, 1, BUF + 0x100, 16, VQ_WRITE, 0);
	vrd_publish(&vr, 0);
	ck_assert_int_lt(virtq_pop(&q, &e), 0);
}
END_TEST

START_TEST(test_indirect_bad_length_rejected)
{
	const struct vbuf b[] = {{BUF, 16, false}, {BUF + 0x100, 16, true}};
	vrd_table(ram.buf, TABLE, b, 2);
	static const uint32_t lens[] = {0, 8, 17, 31, 33};
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		vrd_layout(&vr, ram.buf, QS, RING);
		ck_assert_int_eq(virtq_init(&q, &ram.m, QS, QS, vr.desc, vr.avail, vr.used, false),
				 0);
		post_indirect(0, TABLE, lens[i], 0);
		ck_assert_msg(virtq_pop(&q, &e) < 0, "indirect length %u accepted", lens[i]);
	}
}
END_TEST

START_TEST(test_indirect_table_outside_ram_rejected)
{
	post_indirect(0, GUEST_MMIO_HOLE_START, 32, 0);
	ck_assert_int_lt(virtq_pop(&q, &e), 0);
	vrd_layout(&vr, ram.buf, QS, RING);
	ck_assert_int_eq(virtq_init(&q, &ram.m, QS, QS, vr.desc, vr.avail, vr.used, false), 0);
	/* First entry in RAM, second past its end. */
	vrd_desc_at(ram.buf, RAM - 16, 0, BUF, 16, VQ_NEXT, 1);
	post_indirect(0, RAM - 16, 32, 0);
	ck_assert_int_lt(virtq_pop(&q, &e), 0);
}
END_TEST

START_TEST(test_indirect_next_beyond_table_rejected)
{
	/* A 2-entry table whose entry 0 points at entry 2: in the main
	 * table's range, but not in this table. */
	vrd_desc_at(ram.buf, TABLE, 0, BUF, 16, VQ_NEXT, 2);
	vrd_desc_at(ram.buf, TABLE, 1, BUF + 16, 16, 0, 0);
	vrd_desc_at(ram.buf, TABLE, 2, BUF + 32, 16, 0, 0);
	post_indirect(0, TABLE, 32, 0);
	ck_assert_int_eq(virtq_pop(&q, &e), VIRTQ_ERR_NEXT);
}
END_TEST

START_TEST(test_indirect_loop_rejected)
{
	vrd_desc_at(ram.buf, TABLE, 0, BUF, 16, VQ_NEXT, 1);
	vrd_desc_at(ram.buf, TABLE, 1, BUF + 16, 16, VQ_NEXT, 0);
	post_indirect(0, TABLE, 32, 0);
	ck_assert_int_eq(virtq_pop(&q, &e), VIRTQ_ERR_LOOP);
}
END_TEST

START_TEST(test_indirect_readable_after_writable_rejected)
{
	const struct vbuf b[] = {{BUF, 16, true}, {BUF + 16, 16, false}};
	vrd_table(ram.buf, TABLE, b, 2);
	post_indirect(0, TABLE, 32, 0);
	ck_assert_int_eq(virtq_pop(&q, &e), VIRTQ_ERR_ORDER);
}
END_TEST

START_TEST(test_chain_longer_than_max_queue_through_indirect_rejected)
{
	/* 2.7.5.3.1: a chain, indirect entries included, is at most Queue
	 * Size long. 1023 direct + 1024 indirect descriptors: refused, and
	 * no iovec array is overrun. */
	static struct vring_drv big;
	static struct virtq bq;
	const uint16_t n = VIRTQ_MAX_SIZE;
	vrd_layout(&big, ram.buf, n, 0x200000);
	ck_assert_int_eq(virtq_init(&bq, &ram.m, n, n, big.desc, big.avail, big.used, false), 0);
	for (unsigned i = 0; i + 1 < n; i++)
		vrd_desc(&big, i, BUF + i, 1, VQ_NEXT, (uint16_t)(i + 1));
	uint64_t table = 0x400000;
	for (unsigned i = 0; i < n; i++)
		vrd_desc_at(ram.buf, table, i, BUF + i, 1, (uint16_t)(i + 1 < n ? VQ_NEXT : 0),
			    (uint16_t)(i + 1));
	vrd_desc(&big, n - 1, table, 16u * n, VQ_INDIRECT, 0);
	vrd_publish(&big, 0);
	ck_assert_int_lt(virtq_pop(&bq, &e), 0);
}
END_TEST

/* ---- buffers a hostile driver offers (2.7.5, 2.7.6, 2.7.8) ---- */

/* A fresh ring at RING, with or without EVENT_IDX. */
static void reinit(bool event_idx)
{
	vrd_layout(&vr, ram.buf, QS, RING);
	ck_assert_int_eq(virtq_init(&q, &ram.m, QS, QS, vr.desc, vr.avail, vr.used, event_idx),
			 VIRTQ_OK);
}

START_TEST(test_writable_buffer_over_own_rings_rejected)
{
	/* The device writes a device-writable buffer. Over the descriptor
	 * table or the available ring it would write where only the driver
	 * writes (2.7.5, 2.7.6: "only written by the driver"); over the used
	 * ring it would mix data into its own used entries (2.7.8). */
	const struct {
		uint64_t addr;
		uint32_t len;
	} bad[] = {
	    {vr.desc, 16},		   /* the chain's own descriptor */
	    {vr.desc + 16 * QS - 8, 16},   /* the table's end and past it */
	    {vr.desc - 8, 9},		   /* its first byte */
	    {vr.avail, 2},		   /* avail flags */
	    {vr.avail + 4, 2 * QS},	   /* the available ring */
	    {vr.used, 4},		   /* used flags and idx */
	    {vr.used + 4 + 8 * QS - 1, 1}, /* the used ring's last byte */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		reinit(false);
		post1(0, bad[i].addr, bad[i].len, true);
		ck_assert_msg(virtq_pop(&q, &e) < 0, "writable buffer %zu at 0x%llx+%u accepted", i,
			      (unsigned long long)bad[i].addr, bad[i].len);
		ck_assert_uint_eq(vrd_used_idx(&vr), 0);
	}
	/* Also as the second buffer of a chain, and inside an indirect table. */
	reinit(false);
	const struct vbuf b[] = {{BUF, 16, false}, {vr.used, 8, true}};
	vrd_chain(&vr, 0, b, 2);
	vrd_publish(&vr, 0);
	ck_assert_int_lt(virtq_pop(&q, &e), 0);
	reinit(false);
	vrd_table(ram.buf, TABLE, b, 2);
	post_indirect(0, TABLE, 2 * 16, 0);
	ck_assert_int_lt(virtq_pop(&q, &e), 0);
	/* With EVENT_IDX, used_event follows the available ring (2.7.10). */
	reinit(true);
	post1(0, vr.avail + 4 + 2 * QS, 2, true);
	ck_assert_int_lt(virtq_pop(&q, &e), 0);
}
END_TEST

START_TEST(test_buffers_beside_or_reading_the_rings_accepted)
{
	/* Device-readable buffers may be any driver memory, the rings too;
	 * writable ones right next to the rings are fine. */
	post1(0, vr.desc, 16 * QS, false);
	ck_assert_int_eq(virtq_pop(&q, &e), 1);
	post1(1, vr.avail, 4 + 2 * QS, false);
	ck_assert_int_eq(virtq_pop(&q, &e), 1);
	post1(2, vr.desc - 8, 8, true);
	ck_assert_int_eq(virtq_pop(&q, &e), 1);
	post1(3, vr.avail + 4 + 2 * QS, 2, true); /* used_event: not there without EVENT_IDX */
	ck_assert_int_eq(virtq_pop(&q, &e), 1);
	post1(4, vr.used + 4 + 8 * QS, 64, true);
	ck_assert_int_eq(virtq_pop(&q, &e), 1);
}
END_TEST

START_TEST(test_chain_longer_than_4_gib_rejected)
{
	/* 2.7.5: "Drivers MUST NOT add a descriptor chain longer than 2^32
	 * bytes in total" (and a used len could not say how much was
	 * written). 256 buffers of 16 MiB, each inside RAM, are exactly
	 * 2^32 bytes: accepted; one byte more is refused, written or read. */
	static struct vring_drv big;
	static struct virtq bq;
	const uint16_t n = 512;
	const uint32_t mib16 = 16 << 20;
	vrd_layout(&big, ram.buf, n, 0x200000);
	ck_assert_int_eq(virtq_init(&bq, &ram.m, n, n, big.desc, big.avail, big.used, false), 0);
	for (unsigned i = 0; i < 256; i++)
		vrd_desc(&big, i, 0, mib16, (uint16_t)(i < 255 ? VQ_NEXT : 0), (uint16_t)(i + 1));
	vrd_publish(&big, 0);
	ck_assert_int_eq(virtq_pop(&bq, &e), 1);
	ck_assert_uint_eq(e.out_len, 1ULL << 32);

	vrd_desc(&big, 255, 0, mib16, VQ_NEXT, 256);
	vrd_desc(&big, 256, BUF, 1, 0, 0);
	vrd_publish(&big, 0);
	ck_assert_int_lt(virtq_pop(&bq, &e), 0);

	/* Device-writable: 8 MiB buffers in the upper half of RAM, clear of
	 * the rings, 513 of them through an indirect table. */
	vrd_layout(&big, ram.buf, 1024, 0x200000);
	ck_assert_int_eq(virtq_init(&bq, &ram.m, 1024, 1024, big.desc, big.avail, big.used, false),
			 0);
	const uint64_t table = 0x400000;
	for (unsigned i = 0; i < 513; i++)
		vrd_desc_at(ram.buf, table, i, 8 << 20, 8 << 20,
			    (uint16_t)(VQ_WRITE | (i < 512 ? VQ_NEXT : 0)), (uint16_t)(i + 1));
	vrd_desc(&big, 0, table, 16 * 513, VQ_INDIRECT, 0);
	vrd_publish(&big, 0);
	ck_assert_int_lt(virtq_pop(&bq, &e), 0);
}
END_TEST

/* ---- used ring (2.7.8) ---- */

START_TEST(test_push_writes_id_len_and_bumps_idx)
{
	ck_assert_uint_eq(vrd_used_idx(&vr), 0);
	ck_assert_int_eq(virtq_push(&q, 5, 1234), 0);
	uint32_t id, len;
	vrd_used_elem(&vr, 0, &id, &len);
	ck_assert_uint_eq(id, 5);
	ck_assert_uint_eq(len, 1234);
	ck_assert_uint_eq(vrd_used_idx(&vr), 1);
	/* The ring wraps: entry QS lands in slot 0, idx keeps counting. */
	for (unsigned i = 1; i <= QS; i++)
		ck_assert_int_eq(virtq_push(&q, (uint16_t)(i % QS), 100 + i), 0);
	ck_assert_uint_eq(vrd_used_idx(&vr), QS + 1);
	vrd_used_elem(&vr, QS, &id, &len);
	ck_assert_uint_eq(id, 0);
	ck_assert_uint_eq(len, 100 + QS);
	vrd_used_elem(&vr, 1, &id, &len);
	ck_assert_uint_eq(id, 1);
	ck_assert_uint_eq(len, 101);
	ck_assert_uint_eq(vrd_used_flags(&vr), 0);
}
END_TEST

START_TEST(test_indices_wrap_at_16_bits)
{
	/* 2.7.6/2.7.8: idx wraps naturally at 65536. */
	for (uint32_t i = 0; i < 65536 + 2 * QS; i++) {
		uint16_t h = (uint16_t)(i % QS);
		post1(h, BUF + 16 * h, 16, true);
		ck_assert_int_eq(virtq_pop(&q, &e), 1);
		ck_assert_uint_eq(e.head, h);
		ck_assert_int_eq(virtq_push(&q, h, i & 0xFF), 0);
	}
	ck_assert_int_eq(virtq_pop(&q, &e), 0);
	ck_assert_uint_eq(vrd_used_idx(&vr), (uint16_t)(65536 + 2 * QS));
}
END_TEST

START_TEST(test_unpop_gives_elements_back)
{
	post1(1, BUF, 16, true);
	post1(4, BUF + 16, 16, true);
	post1(6, BUF + 32, 16, true);
	ck_assert_int_eq(virtq_pop(&q, &e), 1);
	ck_assert_int_eq(virtq_pop(&q, &e), 1);
	virtq_unpop(&q, 2);
	uint16_t want[] = {1, 4, 6};
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(virtq_pop(&q, &e), 1);
		ck_assert_uint_eq(e.head, want[i]);
	}
	ck_assert_int_eq(virtq_pop(&q, &e), 0);
}
END_TEST

/* ---- notification suppression (2.7.7, 2.7.10) ---- */

START_TEST(test_no_event_idx_honours_no_interrupt_flag)
{
	virtq_push(&q, 0, 1);
	ck_assert(virtq_should_notify(&q));
	vrd_set_avail_flags(&vr, VQ_AVAIL_NO_INTERRUPT);
	virtq_push(&q, 1, 1);
	ck_assert(!virtq_should_notify(&q));
	/* used_event is meaningless without EVENT_IDX: must be ignored. */
	vrd_set_avail_flags(&vr, 0);
	vrd_set_used_event(&vr, 100);
	virtq_push(&q, 2, 1);
	ck_assert(virtq_should_notify(&q));
}
END_TEST

START_TEST(test_event_idx_pop_writes_avail_event)
{
	post1(0, BUF, 16, true);
	post1(1, BUF + 16, 16, true);
	post1(2, BUF + 32, 16, true);
	ck_assert_int_eq(virtq_pop(&q, &e), 1);
	ck_assert_uint_eq(vrd_avail_event(&vr), 1);
	ck_assert_int_eq(virtq_pop(&q, &e), 1);
	ck_assert_int_eq(virtq_pop(&q, &e), 1);
	ck_assert_uint_eq(vrd_avail_event(&vr), 3);
	virtq_unpop(&q, 2);
	ck_assert_uint_eq(vrd_avail_event(&vr), 1);
}
END_TEST

START_TEST(test_event_idx_honours_used_event)
{
	/* The entry placed at used idx == used_event must be notified; one
	 * short of it should not (2.7.10). */
	vrd_set_used_event(&vr, 0);
	virtq_push(&q, 0, 1); /* placed at 0 */
	ck_assert(virtq_should_notify(&q));
	vrd_set_used_event(&vr, 3);
	virtq_push(&q, 1, 1); /* 1 */
	ck_assert(!virtq_should_notify(&q));
	virtq_push(&q, 2, 1); /* 2 */
	ck_assert(!virtq_should_notify(&q));
	virtq_push(&q, 3, 1); /* 3 == used_event */
	ck_assert(virtq_should_notify(&q));
	/* A batch that steps over used_event is notified once. */
	vrd_set_used_event(&vr, 5);
	virtq_push(&q, 4, 1);
	virtq_push(&q, 5, 1);
	virtq_push(&q, 6, 1);
	ck_assert(virtq_should_notify(&q));
	virtq_push(&q, 7, 1);
	ck_assert(!virtq_should_notify(&q));
	/* The NO_INTERRUPT flag is ignored with EVENT_IDX (2.7.10). */
	vrd_set_avail_flags(&vr, VQ_AVAIL_NO_INTERRUPT);
	vrd_set_used_event(&vr, 8);
	virtq_push(&q, 0, 1);
	ck_assert(virtq_should_notify(&q));
}
END_TEST

START_TEST(test_event_idx_across_wrap)
{
	vrd_set_used_event(&vr, 0);
	virtq_push(&q, 0, 1);
	ck_assert(virtq_should_notify(&q));
	vrd_set_used_event(&vr, 0); /* behind from now on */
	for (unsigned i = 1; i < 0xFFFE; i++) {
		virtq_push(&q, (uint16_t)(i % QS), 1);
		ck_assert(!virtq_should_notify(&q));
	}
	vrd_set_used_event(&vr, 0xFFFF);
	virtq_push(&q, 0, 1); /* placed at 0xFFFE */
	ck_assert(!virtq_should_notify(&q));
	virtq_push(&q, 1, 1); /* 0xFFFF */
	ck_assert(virtq_should_notify(&q));
	vrd_set_used_event(&vr, 1);
	virtq_push(&q, 2, 1); /* 0 */
	ck_assert(!virtq_should_notify(&q));
	virtq_push(&q, 3, 1); /* 1 */
	ck_assert(virtq_should_notify(&q));
	ck_assert_uint_eq(vrd_used_idx(&vr), 2);
}
END_TEST

/* ---- iovec copies ---- */

START_TEST(test_iov_copies_honour_skip_and_limits)
{
	uint8_t a[3], b[5], flat[8];
	struct iovec v[2] = {{a, 3}, {b, 5}};
	const uint8_t src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	ck_assert_uint_eq(buf_to_iov(v, 2, 2, src, 8), 6); /* 6 bytes of room after skip 2 */
	ck_assert_uint_eq(a[2], 1);
	ck_assert_uint_eq(b[0], 2);
	ck_assert_uint_eq(b[4], 6);
	memset(flat, 0, sizeof(flat));
	ck_assert_uint_eq(iov_to_buf(v, 2, 1, flat, 4), 4);
	ck_assert_uint_eq(flat[1], 1); /* a[2] */
	ck_assert_uint_eq(flat[3], 3); /* b[1] */
	ck_assert_uint_eq(iov_to_buf(v, 2, 8, flat, 4), 0);
}
END_TEST

static Suite *virtqueue_suite(void)
{
	Suite *s = suite_create("virtqueue");
	TCase *t = tcase_create("init");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_init_refuses_bad_sizes);
	tcase_add_test(t, test_init_refuses_misaligned_rings);
	tcase_add_test(t, test_init_refuses_rings_partly_outside_ram);
	suite_add_tcase(s, t);

	t = tcase_create("chains");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_simple_chain_gives_out_and_in_iovecs);
	tcase_add_test(t, test_buffers_taken_in_avail_order);
	tcase_add_test(t, test_chain_as_long_as_the_queue_is_accepted);
	tcase_add_test(t, test_readable_after_writable_rejected);
	tcase_add_test(t, test_next_out_of_range_rejected);
	tcase_add_test(t, test_loop_rejected);
	tcase_add_test(t, test_self_loop_and_long_cycle_rejected);
	tcase_add_test(t, test_avail_index_too_far_ahead_rejected);
	tcase_add_test(t, test_head_out_of_range_rejected);
	tcase_add_test(t, test_buffer_outside_ram_rejected);
	tcase_add_test(t, test_later_descriptor_outside_ram_rejected);
	suite_add_tcase(s, t);

	t = tcase_create("indirect");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_indirect_table_walked);
	tcase_add_test(t, test_direct_descriptors_then_indirect_accepted);
	tcase_add_test(t, test_indirect_descriptor_write_flag_ignored);
	tcase_add_test(t, test_nested_indirect_rejected);
	tcase_add_test(t, test_indirect_with_next_rejected);
	tcase_add_test(t, test_indirect_bad_length_rejected);
	tcase_add_test(t, test_indirect_table_outside_ram_rejected);
	tcase_add_test(t, test_indirect_next_beyond_table_rejected);
	tcase_add_test(t, test_indirect_loop_rejected);
	tcase_add_test(t, test_indirect_readable_after_writable_rejected);
	tcase_add_test(t, test_chain_longer_than_max_queue_through_indirect_rejected);
	suite_add_tcase(s, t);

	t = tcase_create("hostile_buffers");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_writable_buffer_over_own_rings_rejected);
	tcase_add_test(t, test_buffers_beside_or_reading_the_rings_accepted);
	tcase_add_test(t, test_chain_longer_than_4_gib_rejected);
	suite_add_tcase(s, t);

	t = tcase_create("used");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_push_writes_id_len_and_bumps_idx);
	tcase_add_test(t, test_indices_wrap_at_16_bits);
	tcase_add_test(t, test_unpop_gives_elements_back);
	tcase_add_test(t, test_no_event_idx_honours_no_interrupt_flag);
	tcase_add_test(t, test_iov_copies_honour_skip_and_limits);
	suite_add_tcase(s, t);

	t = tcase_create("event_idx");
	tcase_add_checked_fixture(t, setup_event_idx, teardown);
	tcase_add_test(t, test_event_idx_pop_writes_avail_event);
	tcase_add_test(t, test_event_idx_honours_used_event);
	tcase_add_test(t, test_event_idx_across_wrap);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(virtqueue_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
