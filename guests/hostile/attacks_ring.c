/*
 * Attacks on the split-virtqueue walker (virtio 1.2, 2.7): chains the
 * driver requirements of 2.7.4 - 2.7.6 forbid, written straight into the
 * rings. A device that cannot go on sets DEVICE_NEEDS_RESET and, after
 * DRIVER_OK, sends a configuration change notification (2.1.2); it must
 * not use the broken buffer. Cases with several forms reset and set the
 * device up again between them.
 */
#include "hostile.h"

#define W VIRTQ_DESC_F_WRITE
#define N VIRTQ_DESC_F_NEXT
#define I VIRTQ_DESC_F_INDIRECT

#define RNG_BUF ((uint64_t)H.rng_buf)

/* Publishes `head` and expects NEEDS_RESET with a configuration interrupt,
 * and no used entry for it. */
static void attack(struct hdev *t, uint16_t head, const char *what)
{
	struct virtq *vq = &t->vq;
	uint16_t used0 = vq->used->idx;
	uint64_t c0 = hdev_cfgirqs(t);

	raw_publish(vq, head);
	expect_needs_reset(t, true, c0, what);
	expect(vq->used->idx == used0, "%s: %s: the device used the chain (used idx %u -> %u)",
	       t->name, what, used0, vq->used->idx);
}

void case_desc_loop(struct hdev *t)
{
	uint16_t s = t->vq.size;

	raw_desc(&t->vq, 0, RNG_BUF, 16, W | N, 1);
	raw_desc(&t->vq, 1, RNG_BUF + 16, 16, W | N, 0);
	attack(t, 0, "descriptors 0 -> 1 -> 0 (2.7.5: no loops)");
	if (!hdev_up(t, 0))
		return;
	raw_desc(&t->vq, 3, RNG_BUF, 16, W | N, 3);
	attack(t, 3, "descriptor 3 -> 3");
	if (!hdev_up(t, 0))
		return;
	/* A loop through every descriptor of the table: longer than the queue. */
	for (uint16_t i = 0; i < s; i++)
		raw_desc(&t->vq, i, RNG_BUF, 4, W | N, (uint16_t)((i + 1) % s));
	attack(t, 0, "a cycle through all the queue's descriptors");
}

void case_next_out_of_range(struct hdev *t)
{
	uint16_t s = t->vq.size;

	raw_desc(&t->vq, 0, RNG_BUF, 16, W | N, s);
	attack(t, 0, "next = queue size (2.7.5.1)");
	if (!hdev_up(t, 0))
		return;
	raw_desc(&t->vq, 0, RNG_BUF, 16, W | N, 1);
	raw_desc(&t->vq, 1, RNG_BUF + 16, 16, W | N, 0xFFFF);
	attack(t, 0, "the second descriptor's next = 0xffff");
}

void case_head_out_of_range(struct hdev *t)
{
	raw_desc(&t->vq, 0, RNG_BUF, 16, W, 0);
	attack(t, t->vq.size, "an available-ring entry = queue size (2.7.6)");
	if (!hdev_up(t, 0))
		return;
	attack(t, 0xFFFF, "an available-ring entry of 0xffff");
}

/* 2.7.5.3.1: an indirect table holds no indirect descriptor, the
 * descriptor pointing at one has no NEXT, and its length is a multiple of
 * 16. First a well-formed indirect request, to show the feature works. */
void case_indirect_nested(struct hdev *t)
{
	struct virtq_desc *t1 = H.table1, *t2 = H.table2;
	uint64_t hdr = (uint64_t)H.blk_hdr, st = (uint64_t)H.blk_status;
	uint64_t data = (uint64_t)H.blk_data;
	uint16_t id;
	uint32_t len;

	if (!hdev_up(t, VIRTIO_F_BIT(VIRTIO_F_INDIRECT_DESC)))
		return;
	if (!expect(t->offered & VIRTIO_F_BIT(VIRTIO_F_INDIRECT_DESC),
		    "%s: VIRTIO_F_INDIRECT_DESC is not offered", t->name))
		return;
	*H.blk_hdr = (struct blk_hdr){VIRTIO_BLK_T_IN, 0, 0};
	*H.blk_status = 0xFF;
	memset(H.blk_data, 0, SECTOR);
	t1[0] = (struct virtq_desc){hdr, 16, N, 1};
	t1[1] = (struct virtq_desc){data, SECTOR, W | N, 2};
	t1[2] = (struct virtq_desc){st, 1, W, 0};
	raw_desc(&t->vq, 0, (uint64_t)t1, 3 * 16, I, 0);
	uint64_t q0 = hdev_qirqs(t);
	raw_publish(&t->vq, 0);
	bool got = wait_used(t, q0, &id, &len);
	bool data_ok = H.blk_data[0] == host_byte(0) && H.blk_data[511] == host_byte(511);
	expect(got && id == 0 && len == SECTOR + 1 && *H.blk_status == VIRTIO_BLK_S_OK && data_ok,
	       "%s: a well-formed indirect read of sector 0: used %s, id %u, len %u, status %u, "
	       "data %s",
	       t->name, got ? "yes" : "no", id, len, *H.blk_status, data_ok ? "ok" : "wrong");
	expect_status(t, 0x0F, "after a well-formed indirect request");

	/* An indirect descriptor inside the table. */
	t1[0] = (struct virtq_desc){hdr, 16, N, 1};
	t1[1] = (struct virtq_desc){(uint64_t)t2, 2 * 16, I, 0};
	t2[0] = (struct virtq_desc){data, SECTOR, W | N, 1};
	t2[1] = (struct virtq_desc){st, 1, W, 0};
	raw_desc(&t->vq, 0, (uint64_t)t1, 2 * 16, I, 0);
	attack(t, 0, "an indirect table holding an indirect descriptor (2.7.5.3.1)");

	/* A table that points back at itself. */
	if (!hdev_up(t, VIRTIO_F_BIT(VIRTIO_F_INDIRECT_DESC)))
		return;
	t1[0] = (struct virtq_desc){hdr, 16, N, 1};
	t1[1] = (struct virtq_desc){(uint64_t)t1, 2 * 16, I, 0};
	raw_desc(&t->vq, 0, (uint64_t)t1, 2 * 16, I, 0);
	attack(t, 0, "an indirect table holding an indirect descriptor to itself");

	/* INDIRECT together with NEXT. */
	if (!hdev_up(t, VIRTIO_F_BIT(VIRTIO_F_INDIRECT_DESC)))
		return;
	t1[0] = (struct virtq_desc){hdr, 16, N, 1};
	t1[1] = (struct virtq_desc){data, SECTOR, W, 0};
	raw_desc(&t->vq, 0, (uint64_t)t1, 2 * 16, I | N, 1);
	raw_desc(&t->vq, 1, st, 1, W, 0);
	attack(t, 0, "VIRTQ_DESC_F_INDIRECT together with NEXT (2.7.5.3.1)");

	/* Lengths that are not a whole number of descriptors, or none. */
	if (!hdev_up(t, VIRTIO_F_BIT(VIRTIO_F_INDIRECT_DESC)))
		return;
	raw_desc(&t->vq, 0, (uint64_t)t1, 40, I, 0);
	attack(t, 0, "an indirect table of 40 bytes");
	if (!hdev_up(t, VIRTIO_F_BIT(VIRTIO_F_INDIRECT_DESC)))
		return;
	raw_desc(&t->vq, 0, (uint64_t)t1, 0, I, 0);
	attack(t, 0, "an indirect table of 0 bytes");
}

void case_desc_past_ram(struct hdev *t)
{
	raw_desc(&t->vq, 0, H.ram_end, 64, W, 0);
	attack(t, 0, "a buffer at the end of RAM (e820)");
	if (!hdev_up(t, 0))
		return;
	raw_desc(&t->vq, 0, H.ram_end - 32, 64, W, 0);
	attack(t, 0, "a buffer straddling the end of RAM");
	if (!hdev_up(t, 0))
		return;
	raw_desc(&t->vq, 0, 0xFFFFFFFFFFFFFFC0ull, 0x80, W, 0);
	attack(t, 0, "a buffer wrapping around 2^64");
	if (!hdev_up(t, 0))
		return;
	raw_desc(&t->vq, 0, H.ram_end + (1ull << 30), 16, N, 1);
	raw_desc(&t->vq, 1, RNG_BUF, 64, W, 0);
	attack(t, 0, "a device-readable buffer 1 GiB past RAM");
}

void case_desc_mmio_hole(struct hdev *t)
{
	const struct hdev *blk = &H.dev[HD_BLK], *td = &H.dev[HD_TD];
	const struct {
		uint64_t addr;
		const char *what;
	} at[] = {
	    {LAPIC_BASE, "a buffer on the LAPIC page (0xfee00000)"},
	    {IOAPIC_DEFAULT_BASE, "a buffer on the IOAPIC page (0xfec00000)"},
	    {blk->vp.isr.addr, "a buffer on blk's ISR register (BAR0 + 0x1000)"},
	    {td->home[0], "a buffer on the testdev's BAR0"},
	    {0xC0000000ull, "a buffer at the start of the 32-bit MMIO hole"},
	};

	for (unsigned i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		if (i && !hdev_up(t, 0))
			return;
		raw_desc(&t->vq, 0, at[i].addr, 64, W, 0);
		attack(t, 0, at[i].what);
	}
}

/* A device-readable buffer may be any memory of the driver's (nothing in
 * 2.7 forbids one over the rings): the device reads it and goes on. blk
 * writes it to a scratch sector, which is then read back. */
static void readable_ring(struct hdev *t, const void *ring, const char *what)
{
	static uint8_t snapshot[SECTOR];
	uint64_t scratch = H.sectors - 16;
	struct virtq_buf b[3] = {{H.blk_hdr, 16}, {(void *)ring, SECTOR}, {H.blk_status, 1}};
	uint16_t id;
	uint32_t len;

	*H.blk_hdr = (struct blk_hdr){VIRTIO_BLK_T_OUT, 0, scratch};
	*H.blk_status = 0xFF;
	uint64_t q0 = hdev_qirqs(t);
	int head = virtq_add(&t->vq, b, 2, 1);
	/* What the device will read: the ring as it is once published. */
	memcpy(snapshot, ring, SECTOR);
	virtq_kick(&t->vq);
	bool got = wait_used(t, q0, &id, &len);
	if (!expect(got && id == head && *H.blk_status == VIRTIO_BLK_S_OK,
		    "%s: OUT of %s: used %s, id %u of head %d, status 0x%02x", t->name, what,
		    got ? "yes" : "no", id, head, *H.blk_status))
		return;
	expect_status(t, 0x0F, what);
	memset(H.blk_data, 0, SECTOR);
	int st = blk_request(t, VIRTIO_BLK_T_IN, scratch, H.blk_data, SECTOR, "reading it back");
	if (st == VIRTIO_BLK_S_OK)
		expect(!memcmp(H.blk_data, snapshot, SECTOR),
		       "%s: the sector written from %s does not read back as the ring was", t->name,
		       what);
	else
		expect(false, "%s: reading back the sector written from %s: status %d", t->name,
		       what, st);
}

void case_desc_readable_ring(struct hdev *t)
{
	readable_ring(t, (const void *)t->vq.desc, "the queue's own descriptor table");
	readable_ring(t, (const void *)t->vq.avail, "the queue's own available ring");
	readable_ring(t, (const void *)t->vq.used, "the queue's own used ring");
}

/* A device-writable buffer over the queue's own rings would have the
 * device write where only the driver writes (the descriptor table and the
 * available ring, 2.7.5, 2.7.6) or mix data into its used ring (2.7.8):
 * the device must refuse it. */
void case_desc_writable_ring(struct hdev *t)
{
	raw_desc(&t->vq, 0, (uint64_t)t->vq.used, 64, W, 0);
	attack(t, 0, "a device-writable buffer over the queue's used ring");
	if (!hdev_up(t, 0))
		return;
	raw_desc(&t->vq, 0, (uint64_t)t->vq.avail, 64, W, 0);
	attack(t, 0, "a device-writable buffer over the queue's available ring");
	if (!hdev_up(t, 0))
		return;
	raw_desc(&t->vq, 0, (uint64_t)&t->vq.desc[t->vq.size - 4], 64, W, 0);
	attack(t, 0, "a device-writable buffer over 4 entries of the descriptor table");
	if (!hdev_up(t, 0))
		return;
	raw_desc(&t->vq, 0, RNG_BUF, 64, W | N, 1);
	raw_desc(&t->vq, 1, (uint64_t)t->vq.desc + 4, 8, W, 0);
	attack(t, 0, "a second device-writable buffer over the chain's own first descriptor");
}

/* 2.7.5: a descriptor's len is 32 bits, and "drivers MUST NOT add a
 * descriptor chain longer than 2^32 bytes in total". */
void case_huge_length(struct hdev *t)
{
	const unsigned n = 140; /* 140 x 32 MiB = 4.375 GiB, all inside RAM */

	raw_desc(&t->vq, 0, RNG_BUF, 0xFFFFFFFFu, W, 0);
	attack(t, 0, "one buffer of 4 GiB - 1 bytes");
	if (!hdev_up(t, 0))
		return;
	if (!expect(t->vq.size > n, "%s: queue of %u, need more than %u descriptors", t->name,
		    t->vq.size, n))
		return;
	for (unsigned i = 0; i < n; i++)
		raw_desc(&t->vq, (uint16_t)i, (uint64_t)H.big, (uint32_t)BIG_BYTES,
			 (uint16_t)(W | (i + 1 < n ? N : 0)), (uint16_t)(i + 1));
	attack(t, 0, "a chain of 140 buffers of 32 MiB (4.375 GiB in all, 2.7.5)");
}

/* 2.7.4.2: device-readable descriptors come before device-writable ones. */
void case_desc_order(struct hdev *t)
{
	*H.blk_hdr = (struct blk_hdr){VIRTIO_BLK_T_OUT, 0, H.sectors - 16};
	raw_desc(&t->vq, 0, (uint64_t)H.blk_status, 1, W | N, 1);
	raw_desc(&t->vq, 1, (uint64_t)H.blk_hdr, 16, N, 2);
	raw_desc(&t->vq, 2, (uint64_t)H.blk_data, SECTOR, 0, 0);
	attack(t, 0, "a device-readable descriptor after a device-writable one (2.7.4.2)");
}

/* 5.2.6: a request is a 16-byte header, data, and a status byte the device
 * writes last; without them it cannot be completed. A type the device
 * does not know is completed with VIRTIO_BLK_S_UNSUPP (5.2.6.1). */
void case_blk_malformed(struct hdev *t)
{
	*H.blk_hdr = (struct blk_hdr){VIRTIO_BLK_T_IN, 0, 0};
	raw_desc(&t->vq, 0, (uint64_t)H.blk_hdr, 16, 0, 0);
	attack(t, 0, "a request with no device-writable status byte");
	if (!hdev_up(t, 0))
		return;
	raw_desc(&t->vq, 0, (uint64_t)H.blk_hdr, 8, N, 1);
	raw_desc(&t->vq, 1, (uint64_t)H.blk_status, 1, W, 0);
	attack(t, 0, "a request with an 8-byte header");
	if (!hdev_up(t, 0))
		return;
	int st = blk_request(t, 0x77, 0, NULL, 0, "a request of type 0x77");
	expect(st == VIRTIO_BLK_S_UNSUPP, "%s: a request of type 0x77: status %d, expected %u",
	       t->name, st, VIRTIO_BLK_S_UNSUPP);
	st = blk_request(t, VIRTIO_BLK_T_IN, H.sectors - 1, H.blk_data, 2 * SECTOR,
			 "an IN straddling the end");
	expect(st == VIRTIO_BLK_S_IOERR, "%s: an IN straddling the end of the disk: status %d",
	       t->name, st);
	expect_status(t, 0x0F, "after requests it must refuse one by one");
	hdev_works(t, "after refused requests, without a reset");
}

/* 2.7.6 / 2.7.13.2: the driver adds at most queue-size buffers before the
 * device has used them; an index further ahead is a broken driver. */
void case_avail_far_ahead(struct hdev *t)
{
	struct virtq *vq = &t->vq;
	uint16_t used0 = vq->used->idx;
	uint64_t c0 = hdev_cfgirqs(t);

	raw_desc(vq, 0, RNG_BUF, 16, W, 0);
	vq->avail->ring[vq->avail_idx % vq->size] = 0;
	vq->avail->idx = (uint16_t)(vq->avail_idx + vq->size + 1);
	__asm__ volatile("mfence" ::: "memory");
	mmio_write16(vq->notify_addr, vq->index);
	expect_needs_reset(t, true, c0, "avail idx queue size + 1 ahead");
	expect(vq->used->idx == used0, "%s: the device used buffers of a broken available ring",
	       t->name);
	if (!hdev_up(t, 0))
		return;
	vq = &t->vq;
	c0 = hdev_cfgirqs(t);
	vq->avail->idx = (uint16_t)(vq->avail_idx - 1);
	__asm__ volatile("mfence" ::: "memory");
	mmio_write16(vq->notify_addr, vq->index);
	expect_needs_reset(t, true, c0, "avail idx moved back by one (65535 ahead)");
}

/*
 * Work the guest asks for with one notification (issue: a pass served
 * until the ring was empty). One legal 4 GiB chain (128 x 32 MiB over one
 * buffer, 2.7.5) listed in every entry of the available ring: the device
 * does at most 64 KiB of work per request (each used length is at most
 * 65536, never the 2^32 that wrapped to 0), answers all of them, and the
 * other devices stay responsive meanwhile (run_case checks them).
 * NEEDS_RESET is an answer too (the same head listed twice).
 */
#define FLOOD_DESCS 128

static void flood_chain(struct hdev *t)
{
	for (unsigned i = 0; i < FLOOD_DESCS; i++)
		raw_desc(&t->vq, (uint16_t)i, (uint64_t)H.big, (uint32_t)BIG_BYTES,
			 (uint16_t)(W | (i + 1 < FLOOD_DESCS ? N : 0)), (uint16_t)(i + 1));
}

/* Lists head 0 `n` times and notifies once. */
static void flood_post(struct hdev *t, unsigned n)
{
	struct virtq *vq = &t->vq;
	for (unsigned i = 0; i < n; i++)
		vq->avail->ring[(uint16_t)(vq->avail_idx + i) % vq->size] = 0;
	__asm__ volatile("" ::: "memory");
	vq->avail_idx = (uint16_t)(vq->avail_idx + n);
	vq->avail->idx = vq->avail_idx;
	__asm__ volatile("mfence" ::: "memory");
	mmio_write16(vq->notify_addr, vq->index);
}

struct flood_wait {
	struct hdev *t;
	uint16_t target;
};

static bool flood_done(void *arg)
{
	const struct flood_wait *w = arg;
	return w->t->vq.used->idx == w->target ||
	       (virtio_status(&w->t->vp) & VIRTIO_STATUS_NEEDS_RESET);
}

void case_rng_flood(struct hdev *t)
{
	struct virtq *vq = &t->vq;
	if (!expect(vq->size >= FLOOD_DESCS, "%s: queue of %u, need %u descriptors", t->name,
		    vq->size, FLOOD_DESCS))
		return;
	uint16_t used0 = vq->used->idx;
	struct flood_wait w = {t, (uint16_t)(used0 + vq->size)};
	flood_chain(t);
	uint64_t t0 = now_us();
	flood_post(t, vq->size);
	bool done = wait_for(flood_done, &w, H_FLOOD_WAIT_US);
	uint64_t took = now_us() - t0;
	if (virtio_status(&t->vp) & VIRTIO_STATUS_NEEDS_RESET) {
		info("%s: %u x 4 GiB in one notify: NEEDS_RESET after %lu us", t->name, vq->size,
		     took);
		return;
	}
	if (!expect(done, "%s: %u x 4 GiB in one notify: %u answered in %u ms", t->name, vq->size,
		    (uint16_t)(vq->used->idx - used0), H_FLOOD_WAIT_US / 1000))
		return;
	uint64_t bytes = 0;
	for (uint16_t i = used0; i != w.target; i++) {
		uint32_t len = vq->used->ring[i % vq->size].len;
		if (!expect(len > 0 && len <= 65536,
			    "%s: used length %u (a request does at most 64 KiB of work)", t->name,
			    len))
			return;
		bytes += len;
	}
	vq->last_used = w.target;
	info("%s: %u x 4 GiB in one notify: all answered, %lu KiB in all, in %lu us", t->name,
	     vq->size, bytes >> 10, took);
}

/* hostile.flood=1: post the 4 GiB chain queue-size times, again each time
 * the device has answered, for ever; tests/guest/hostile_test.py ends the
 * VMM with SIGTERM meanwhile and measures how long it takes. */
void rng_flood_forever(struct hdev *t)
{
	struct virtq *vq = &t->vq;
	flood_chain(t);
	printf("hostile: flooding %s\n", t->name);
	for (unsigned round = 1;; round++) {
		struct flood_wait w = {t, (uint16_t)(vq->used->idx + vq->size)};
		flood_post(t, vq->size);
		while (!flood_done(&w))
			;
		if (virtio_status(&t->vp) & VIRTIO_STATUS_NEEDS_RESET) {
			printf("hostile: flood: NEEDS_RESET in round %u\n", round);
			return;
		}
		if (round % 16 == 0)
			printf("hostile: flood round %u\n", round);
	}
}

/* hostile.flood=blk (issue 26): requests the disk completes at once
 * (GET_ID: no I/O, the slot is free again at once) fed without pause. The
 * device writes each used element as it serves it, but the used index only
 * when its pass ends: the feeder marks each used slot before it lists the
 * request and sees it written, so it keeps the ring full while one pass
 * runs (head 0 listed again each time, a notify when the ring was seen
 * drained). Before the pass budget reached virtio-blk one notify served
 * such a feeder for as long as it kept up, and a disk served on the main
 * loop held SIGTERM; tests/guest/hostile_test.py --flood blk measures the
 * time to the end. */
#define FEED_MARK 0xFEEDFEEDu
void blk_feed_forever(struct hdev *t)
{
	struct virtq *vq = &t->vq;
	*H.blk_hdr = (struct blk_hdr){VIRTIO_BLK_T_GET_ID, 0, 0};
	raw_desc(vq, 0, (uint64_t)H.blk_hdr, sizeof(struct blk_hdr), N, 1);
	raw_desc(vq, 1, (uint64_t)H.blk_data, 20, W | N, 2);
	raw_desc(vq, 2, (uint64_t)H.blk_status, 1, W, 0);
	printf("hostile: flooding %s\n", t->name);
	volatile struct virtq_used_elem *slots = vq->used->ring;
	uint16_t served = vq->avail_idx; /* the requests before this one are answered */
	uint64_t answered = 0, next_round = 4096;
	unsigned round = 0, idle = 0;
	for (;;) {
		while (served != vq->avail_idx && slots[served % vq->size].len != FEED_MARK) {
			served++;
			answered++;
		}
		if ((uint16_t)(vq->avail_idx - served) < vq->size) {
			slots[vq->avail_idx % vq->size].len = FEED_MARK;
			vq->avail->ring[vq->avail_idx % vq->size] = 0;
			__asm__ volatile("mfence" ::: "memory");
			vq->avail_idx++;
			vq->avail->idx = vq->avail_idx;
			idle = 0;
		} else if (++idle == 1000) {
			/* Full and nothing served for a while: the pass ended. */
			__asm__ volatile("mfence" ::: "memory");
			mmio_write16(vq->notify_addr, vq->index);
			if (virtio_status(&t->vp) & VIRTIO_STATUS_NEEDS_RESET) {
				printf("hostile: flood: NEEDS_RESET in round %u\n", round);
				return;
			}
			idle = 0;
		}
		if (answered >= next_round) {
			next_round += 4096;
			if (++round % 16 == 0)
				printf("hostile: flood round %u\n", round);
		}
	}
}
