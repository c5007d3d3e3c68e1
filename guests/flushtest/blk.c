/*
 * flushtest's virtio-blk side (virtio 1.2, 5.2): the block pattern, polled
 * requests, and the write, ioerr and readfail modes.
 *
 * The pattern of block `seq` in cycle `cycle` (tests/faults/flushtest_host.py
 * makes the same): each of its eight 512-byte sectors j holds
 *   bytes 0-3   "FTB1"
 *   bytes 4-7   cycle (u32, little-endian)
 *   bytes 8-15  seq (u64)
 *   bytes 16-19 j (u32)
 *   byte k >= 20: (k + seq * 7 + cycle * 13 + j * 3) & 0xff
 * so a block from another cycle, another place or a torn write never
 * passes for it.
 */
#include "flushtest.h"

#include "guest/ram.h"

struct ft_req ft_reqs[FT_MAX_DEPTH];

static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void sector_pattern(uint8_t *p, uint64_t cycle, uint64_t seq, unsigned j)
{
	memcpy(p, "FTB1", 4);
	put_le(p + 4, cycle, 4);
	put_le(p + 8, seq, 8);
	put_le(p + 16, j, 4);
	uint8_t base = (uint8_t)(seq * 7 + cycle * 13 + j * 3);
	for (unsigned k = 20; k < FT_SECTOR; k++)
		p[k] = (uint8_t)(k + base);
}

void ft_fill_block(uint8_t *p, uint64_t cycle, uint64_t seq)
{
	for (unsigned j = 0; j < FT_SECTORS_PER; j++)
		sector_pattern(p + j * FT_SECTOR, cycle, seq, j);
}

int64_t ft_check_block(const uint8_t *p, uint64_t cycle, uint64_t seq)
{
	uint8_t want[FT_SECTOR];
	for (unsigned j = 0; j < FT_SECTORS_PER; j++) {
		sector_pattern(want, cycle, seq, j);
		for (unsigned k = 0; k < FT_SECTOR; k++)
			if (p[j * FT_SECTOR + k] != want[k])
				return j * FT_SECTOR + k;
	}
	return -1;
}

bool ft_blk_init(void)
{
	uint64_t want = ft.flush ? VIRTIO_F_BIT(VIRTIO_BLK_F_FLUSH) : 0;

	if (!ft.blk.pf) {
		ft_fail("no virtio-blk device on bus 0");
		return false;
	}
	for (unsigned i = 0; i < FT_MAX_DEPTH; i++) {
		struct ft_req *r = &ft_reqs[i];
		r->hdr = ram_alloc(sizeof(*r->hdr), 16);
		r->status = ram_alloc(1, 1);
		r->buf = ram_alloc(FT_BLOCK, FT_BLOCK);
		if (!r->hdr || !r->status || !r->buf) {
			ft_fail("RAM pool too small");
			return false;
		}
	}
	if (!ft_bringup(&ft.blk, VIRTIO_ID_BLOCK, want, 1))
		return false;
	if (ft.flush && !(ft.blk.features & VIRTIO_F_BIT(VIRTIO_BLK_F_FLUSH))) {
		ft_fail("blk: VIRTIO_BLK_F_FLUSH is not offered");
		return false;
	}
	ft.capacity = virtio_config_read(&ft.blk.vp, BLK_CFG_CAPACITY, 8);
	ft.nblocks = ft.capacity / FT_SECTORS_PER;
	if (ft.blocks && ft.blocks < ft.nblocks)
		ft.nblocks = ft.blocks;
	printf("flushtest: blk 00:%02x.0: %lu sectors, using %lu blocks of 4 KiB, queue size %u\n",
	       ft.blk.pf->slot, ft.capacity, ft.nblocks, ft.blk.vq[0].size);
	if (ft.nblocks == 0) {
		ft_fail("blk: the disk holds no 4 KiB block");
		return false;
	}
	return true;
}

bool ft_blk_post(struct ft_req *r, uint32_t type, uint64_t sector, bool with_data)
{
	struct virtq_buf b[3];
	unsigned n = 0;

	r->hdr->type = type;
	r->hdr->reserved = 0;
	r->hdr->sector = sector;
	*r->status = 0xFF;
	r->done = false;
	b[n++] = (struct virtq_buf){r->hdr, sizeof(*r->hdr)};
	if (with_data)
		b[n++] = (struct virtq_buf){r->buf, FT_BLOCK};
	b[n++] = (struct virtq_buf){(void *)r->status, 1};
	/* 5.2.6: header and OUT data device-readable; IN data and status writable. */
	unsigned nout = type == VIRTIO_BLK_T_IN ? 1 : n - 1;
	r->head = virtq_add(&ft.blk.vq[0], b, nout, n - nout);
	if (r->head < 0)
		ft_fail("blk: no free descriptors");
	return r->head >= 0;
}

bool ft_blk_wait(unsigned n, const char *what)
{
	struct virtq *vq = &ft.blk.vq[0];
	uint64_t deadline = rdtsc() + ft_us(ft.wait_s * 1000000);
	unsigned left = n;
	uint16_t head;
	uint32_t len;

	virtq_kick(vq);
	while (left) {
		if (!virtq_get_used(vq, &head, &len)) {
			if (rdtsc() > deadline) {
				ft_fail("%s: %u of %u requests not completed after %lu s%s", what,
					left, n, ft.wait_s,
					ft_needs_reset(&ft.blk) ? " (NEEDS_RESET)" : "");
				return false;
			}
			cpu_relax();
			continue;
		}
		unsigned i = 0;
		while (i < n && (ft_reqs[i].done || ft_reqs[i].head != head))
			i++;
		if (i == n) {
			ft_fail("%s: used id %u is not a request in flight", what, head);
			return false;
		}
		ft_reqs[i].done = true;
		ft_reqs[i].len = len;
		left--;
	}
	return true;
}

int ft_blk_one(uint32_t type, uint64_t seq, const char *what)
{
	struct ft_req *r = &ft_reqs[0];
	bool data = type == VIRTIO_BLK_T_IN || type == VIRTIO_BLK_T_OUT;

	if (!ft_blk_post(r, type, seq * FT_SECTORS_PER, data) || !ft_blk_wait(1, what))
		return -1;
	return *r->status;
}

/* ---- write: the no-lost-writes loop ---- */

int ft_mode_write(void)
{
	char what[64];

	if (!ft_blk_init())
		return 1;
	uint64_t s = 0;
	while (s < ft.nblocks) {
		unsigned k = (unsigned)(ft.nblocks - s < ft.batch ? ft.nblocks - s : ft.batch);
		for (unsigned i = 0; i < k; i++) {
			ft_fill_block(ft_reqs[i].buf, ft.cycle, s + i);
			if (!ft_blk_post(&ft_reqs[i], VIRTIO_BLK_T_OUT, (s + i) * FT_SECTORS_PER,
					 true))
				return 1;
		}
		snprintf(what, sizeof(what), "writes of blocks %lu-%lu", s, s + k - 1);
		if (!ft_blk_wait(k, what))
			return 1;
		for (unsigned i = 0; i < k; i++)
			if (*ft_reqs[i].status != VIRTIO_BLK_S_OK) {
				ft_fail("write of block %lu: status %u", s + i, *ft_reqs[i].status);
				return 1;
			}
		if (ft.flush) {
			/* 5.2.6.2: what completed before the FLUSH is durable when
			 * it completes. */
			snprintf(what, sizeof(what), "FLUSH after block %lu", s + k - 1);
			int st = ft_blk_one(VIRTIO_BLK_T_FLUSH, 0, what);
			if (st != VIRTIO_BLK_S_OK) {
				if (st >= 0)
					ft_fail("%s: status %d", what, st);
				return 1;
			}
		}
		s += k;
		printf("flushtest: acked %lu\n", s);
	}
	printf("flushtest: done %lu\n", s);
	return 0;
}

/* ---- ioerr: a disk whose writes fail ---- */

int ft_mode_ioerr(void)
{
	char what[64];
	int st = VIRTIO_BLK_S_OK;
	uint64_t s;

	if (!ft_blk_init())
		return 1;
	for (s = 0; s < ft.nblocks; s++) {
		ft_fill_block(ft_reqs[0].buf, ft.cycle, s);
		snprintf(what, sizeof(what), "write of block %lu", s);
		st = ft_blk_one(VIRTIO_BLK_T_OUT, s, what);
		if (st < 0)
			return 1;
		if (st != VIRTIO_BLK_S_OK)
			break;
	}
	if (s == ft.nblocks) {
		ft_fail("all %lu writes succeeded: the disk's writes never failed", s);
		return 1;
	}
	if (st != VIRTIO_BLK_S_IOERR) {
		ft_fail("write of block %lu: status %d, not IOERR", s, st);
		return 1;
	}
	printf("flushtest: write of block %lu: IOERR, after %lu good writes\n", s, s);
	uint64_t bad = s;
	/* The device goes on: the same write fails again, and with no hang. */
	ft_fill_block(ft_reqs[0].buf, ft.cycle, bad);
	st = ft_blk_one(VIRTIO_BLK_T_OUT, bad, "the failed write again");
	if (st < 0)
		return 1;
	if (st != VIRTIO_BLK_S_IOERR)
		ft_fail("the failed write again: status %d, not IOERR", st);
	if (ft.flush) {
		st = ft_blk_one(VIRTIO_BLK_T_FLUSH, 0, "FLUSH after the failed writes");
		if (st < 0)
			return 1;
		printf("flushtest: FLUSH after the failed writes: status %d\n", st);
	}
	if (bad > 0) {
		memset(ft_reqs[0].buf, 0, FT_BLOCK);
		st = ft_blk_one(VIRTIO_BLK_T_IN, bad - 1, "read of the last good block");
		if (st < 0)
			return 1;
		int64_t off = ft_check_block(ft_reqs[0].buf, ft.cycle, bad - 1);
		if (st != VIRTIO_BLK_S_OK || off >= 0)
			ft_fail("read of block %lu (written before the failure): status %d, first "
				"wrong byte %ld",
				bad - 1, st, off);
		else
			printf("flushtest: block %lu (written before the failure) reads back\n",
			       bad - 1);
	}
	if (ft_needs_reset(&ft.blk))
		ft_fail("blk: NEEDS_RESET after host I/O errors (they are the guest's IOERR)");
	return 0;
}

/* ---- readfail: a disk that becomes unreadable ---- */

#define READS_BEFORE 16u
#define READS_AFTER  4u

/* Reads the next block round the disk; -1 on a time-out, else the status
 * (a successful read must hold the host's pattern, cycle 0). */
static int read_next(uint64_t *next)
{
	uint64_t seq = *next;
	*next = (seq + 1) % ft.nblocks;
	memset(ft_reqs[0].buf, 0, FT_BLOCK);
	int st = ft_blk_one(VIRTIO_BLK_T_IN, seq, "read");
	if (st == VIRTIO_BLK_S_OK) {
		int64_t off = ft_check_block(ft_reqs[0].buf, 0, seq);
		if (off >= 0) {
			ft_fail("read of block %lu: byte %ld differs from the host's pattern", seq,
				off);
			return -1;
		}
	}
	return st;
}

/* Reads until the status is (or is not) `want`, for at most ft.wait_s. */
static bool read_until(uint64_t *next, bool want_ok, uint64_t *reads)
{
	uint64_t deadline = rdtsc() + ft_us(ft.wait_s * 1000000);
	for (;;) {
		int st = read_next(next);
		if (st < 0)
			return false;
		(*reads)++;
		if ((st == VIRTIO_BLK_S_OK) == want_ok)
			return true;
		if (st != VIRTIO_BLK_S_OK && st != VIRTIO_BLK_S_IOERR) {
			ft_fail("read: status %d", st);
			return false;
		}
		if (rdtsc() > deadline) {
			ft_fail("reads still %s after %lu s (%lu reads)",
				want_ok ? "fail" : "succeed", ft.wait_s, *reads);
			return false;
		}
	}
}

int ft_mode_readfail(void)
{
	uint64_t next = 0, reads = 0;

	if (!ft_blk_init())
		return 1;
	for (unsigned i = 0; i < READS_BEFORE; i++) {
		int st = read_next(&next);
		if (st != VIRTIO_BLK_S_OK) {
			if (st >= 0)
				ft_fail("read %u before the fault: status %d", i, st);
			return 1;
		}
	}
	printf("flushtest: reads ok (%u blocks checked)\n", READS_BEFORE);
	if (!read_until(&next, false, &reads))
		return 1;
	printf("flushtest: IOERR after %lu more reads\n", reads);
	for (unsigned i = 0; i < READS_AFTER; i++) {
		int st = read_next(&next);
		if (st != VIRTIO_BLK_S_IOERR) {
			if (st >= 0)
				ft_fail("read %u after the fault: status %d, not IOERR", i, st);
			return 1;
		}
	}
	if (ft_needs_reset(&ft.blk)) {
		ft_fail("blk: NEEDS_RESET after host read errors (they are the guest's IOERR)");
		return 1;
	}
	printf("flushtest: read IOERR, %u more reads failed too\n", READS_AFTER);
	reads = 0;
	if (!read_until(&next, true, &reads))
		return 1;
	printf("flushtest: reads ok again after %lu reads\n", reads);
	return 0;
}
