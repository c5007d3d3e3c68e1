#include "devices/virtio/virtio_blk.h"

#include "vmm/base/err.h"

#include <errno.h>
#include <linux/virtio_blk.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define SECTOR	    512u
#define VBLK_F(bit) (1ULL << (bit))

/* 5.2.6: header (type, reserved, sector), data, then one status byte. */
struct blk_outhdr {
	uint32_t type;
	uint32_t reserved;
	uint64_t sector;
};

static void blk_config_read(struct virtio_dev *d, unsigned off, void *data, unsigned len)
{
	struct virtio_blk *b = d->priv;
	struct virtio_blk_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.capacity = b->capacity;
	cfg.seg_max = VIRTIO_BLK_QUEUE_MAX - 2; /* room for header and status */
	cfg.blk_size = b->blk_size;
	cfg.num_queues = (uint16_t)b->nqueues; /* 5.2.4: read with VIRTIO_BLK_F_MQ */
	memcpy(data, (uint8_t *)&cfg + off, len);
}

#define DIRECT_ALIGN 4096u /* safe for any logical block size up to 4 KiB */

/* STARTED (in flight or already completed); FAILED: completes with IOERR;
 * MALFORMED: the ring is broken (NEEDS_RESET); WAIT: for bounce memory. */
enum blk_start_result { BLK_STARTED, BLK_FAILED, BLK_MALFORMED, BLK_WAIT };

static void blk_bounce_free(struct virtio_blk_queue *bq, struct virtio_blk_req *r)
{
	bq->bounce_bytes -= r->bounce_iov.iov_len;
	free(r->bounce);
	r->bounce = NULL;
}

/* The request's used entry, filled but not yet published: the pass that
 * finished it publishes all of its batch at once (virtio_queue_end_pass). */
static void blk_finish(struct virtio_blk_queue *bq, struct virtio_blk_req *r, uint8_t status)
{
	struct virtio_blk *b = bq->blk;
	struct virtq *q = &b->vdev.vqs[bq->index];
	if (r->bounce) {
		if (status == VIRTIO_BLK_S_OK && r->type == VIRTIO_BLK_T_IN)
			buf_to_iov(r->iov, r->niov, 0, r->bounce, r->expect);
		blk_bounce_free(bq, r);
	}
	*r->status = status;
	if (status == VIRTIO_BLK_S_IOERR)
		atomic_fetch_add(&b->stats.ioerrs, 1);
	else if (status == VIRTIO_BLK_S_UNSUPP)
		atomic_fetch_add(&b->stats.unsupported, 1);
	virtq_fill(q, r->head, status == VIRTIO_BLK_S_OK ? r->used_len : 1);
	r->in_use = false;
}

/* Claims the request's slot and finds its header and status byte, the
 * last byte the device writes (5.2.6); false when malformed. */
static bool blk_parse(struct virtio_blk_queue *bq, const struct virtq_elem *e, struct blk_outhdr *h)
{
	struct virtio_blk_req *r = &bq->reqs[e->head];
	if (r->in_use || e->in_len < 1 ||
	    iov_to_buf(e->out, e->nout, 0, h, sizeof(*h)) != sizeof(*h))
		return false;
	r->in_use = true;
	r->head = e->head;
	r->type = (uint8_t)h->type;
	uint64_t pos = e->in_len - 1;
	for (unsigned i = 0; i < e->nin; i++) {
		if (pos < e->in[i].iov_len) {
			r->status = (uint8_t *)e->in[i].iov_base + pos;
			break;
		}
		pos -= e->in[i].iov_len;
	}
	r->used_len = 1;
	return true;
}

/* Whole sectors, inside the disk (no wrap in sector + count); writes only
 * to a writable disk. */
static bool blk_rw_allowed(const struct virtio_blk *b, bool in, uint64_t sector, uint64_t len)
{
	if (!in && b->disk->readonly)
		return false;
	return len % SECTOR == 0 && sector <= b->capacity && len / SECTOR <= b->capacity - sector &&
	       len <= UINT32_MAX;
}

/* O_DIRECT meets an unaligned guest buffer: the request goes through an
 * aligned copy. STARTED (r->bounce_iov set), FAILED, or WAIT for bounce
 * memory. */
static enum blk_start_result blk_bounce(struct virtio_blk_queue *bq, struct virtio_blk_req *r,
					bool in, uint64_t len)
{
	if (len > BLK_BOUNCE_REQUEST_MAX)
		return BLK_FAILED;
	if (bq->bounce_bytes + len > BLK_BOUNCE_QUEUE_MAX)
		return BLK_WAIT;
	if (posix_memalign(&r->bounce, DIRECT_ALIGN, len))
		return BLK_FAILED;
	bq->bounce_bytes += len;
	if (!in)
		iov_to_buf(r->iov, r->niov, 0, r->bounce, len);
	r->bounce_iov = (struct iovec){r->bounce, len};
	atomic_fetch_add(&bq->blk->stats.bounced, 1);
	return BLK_STARTED;
}

/* A read or a write handed to the backend (through a bounce buffer when
 * O_DIRECT meets an unaligned guest buffer): STARTED, FAILED or WAIT. */
static enum blk_start_result blk_prep_rw(struct virtio_blk_queue *bq, struct virtio_blk_req *r,
					 const struct virtq_elem *e, const struct blk_outhdr *h)
{
	struct virtio_blk *b = bq->blk;
	bool in = h->type == VIRTIO_BLK_T_IN;
	uint64_t len = in ? e->in_len - 1 : e->out_len - sizeof(*h);
	if (!blk_rw_allowed(b, in, h->sector, len))
		return BLK_FAILED;
	r->niov = in ? iov_slice(e->in, e->nin, 0, len, r->iov, VIRTQ_MAX_IOV)
		     : iov_slice(e->out, e->nout, sizeof(*h), len, r->iov, VIRTQ_MAX_IOV);
	r->expect = (uint32_t)len;
	if (in)
		r->used_len = (uint32_t)len + 1;
	const struct iovec *iov = r->iov;
	unsigned niov = len ? r->niov : 0;
	if (b->disk->direct && len && !iov_aligned(r->iov, r->niov, SECTOR)) {
		enum blk_start_result st = blk_bounce(bq, r, in, len);
		if (st != BLK_STARTED)
			return st;
		iov = &r->bounce_iov;
		niov = 1;
	}
	/* 5.2.6.2: without FLUSH negotiated, a completed write must already be
	 * durable. */
	bool dsync = !virtio_has_feature(&b->vdev, VIRTIO_BLK_F_FLUSH);
	if (!b->disk->ops->rw(bq->dq, !in, iov, niov, h->sector * SECTOR, dsync, e->head))
		return BLK_FAILED;
	if (len)
		atomic_fetch_add(in ? &b->stats.reads : &b->stats.writes, 1);
	return BLK_STARTED;
}

static bool blk_prep_flush(struct virtio_blk_queue *bq, struct virtio_blk_req *r)
{
	if (!bq->blk->disk->ops->flush(bq->dq, r->head))
		return false;
	r->expect = 0;
	atomic_fetch_add(&bq->blk->stats.flushes, 1);
	return true;
}

/* 5.2.6.1: up to 20 bytes of ID, not NUL-terminated when exactly 20. */
static void blk_get_id(struct virtio_blk_queue *bq, struct virtio_blk_req *r,
		       const struct virtq_elem *e)
{
	uint64_t room = e->in_len - 1;
	uint64_t n = room < VIRTIO_BLK_ID_BYTES ? room : VIRTIO_BLK_ID_BYTES;
	buf_to_iov(e->in, e->nin, 0, bq->blk->disk->id, n);
	r->used_len = (uint32_t)n + 1;
	atomic_fetch_add(&bq->blk->stats.get_ids, 1);
	blk_finish(bq, r, VIRTIO_BLK_S_OK);
}

/* Turns one popped element into a backend request, or completes it at
 * once; MALFORMED (the caller marks NEEDS_RESET), or WAIT: not started,
 * back in the ring. */
static enum blk_start_result blk_start(struct virtio_blk_queue *bq, const struct virtq_elem *e)
{
	struct blk_outhdr h;
	if (!blk_parse(bq, e, &h))
		return BLK_MALFORMED;
	struct virtio_blk_req *r = &bq->reqs[e->head];
	enum blk_start_result st;
	switch (h.type) {
	case VIRTIO_BLK_T_IN:
	case VIRTIO_BLK_T_OUT: st = blk_prep_rw(bq, r, e, &h); break;
	case VIRTIO_BLK_T_FLUSH: st = blk_prep_flush(bq, r) ? BLK_STARTED : BLK_FAILED; break;
	case VIRTIO_BLK_T_GET_ID: blk_get_id(bq, r, e); return BLK_STARTED;
	default: blk_finish(bq, r, VIRTIO_BLK_S_UNSUPP); return BLK_STARTED;
	}
	if (st == BLK_WAIT) {
		r->in_use = false;
		return BLK_WAIT;
	}
	if (st == BLK_FAILED) {
		r->used_len = 1;
		blk_finish(bq, r, VIRTIO_BLK_S_IOERR);
		return BLK_STARTED;
	}
	bq->inflight++;
	return BLK_STARTED;
}

/* Queue qi locked: the requests the driver made available, one pass's
 * budget of them, go to the host in one submit (more only if the
 * backend's own queue fills up). The budget counts requests completed at once too (GET_ID,
 * unsupported, out of range, read-only): their slots free at once, so a
 * driver that keeps posting them would otherwise hold the pass forever. */
static void blk_notify(struct virtio_dev *d, unsigned qi)
{
	struct virtio_blk *b = d->priv;
	struct virtio_blk_queue *bq = &b->queues[qi];
	struct virtq *q = &d->vqs[qi];
	struct virtio_budget budget = virtio_budget_pass();
	int ret = 0;
	bool malformed = false;
	uint16_t used_before = q->used_idx;
	while (virtio_budget_left(&budget) && (ret = virtq_pop(q, bq->elem)) == 1) {
		virtio_budget_spend(&budget, bq->elem->in_len + bq->elem->out_len);
		enum blk_start_result st = blk_start(bq, bq->elem);
		if (st == BLK_MALFORMED) {
			malformed = true;
			break;
		}
		if (st == BLK_WAIT) {
			/* Left in the ring; a completion that frees bounce
			 * memory serves the queue again. */
			virtq_unpop(q, 1);
			bq->bounce_wait = true;
			atomic_fetch_add(&b->stats.bounce_waits, 1);
			ret = 0;
			break;
		}
	}
	b->disk->ops->submit(bq->dq);
	if (ret == 1 && !malformed && virtq_has_avail(q))
		virtio_queue_yield(d, qi); /* the budget ran out: the rest next pass */
	if (malformed)
		virtio_needs_reset(d, "malformed block request (no header or status byte, or a "
				      "head already in flight)");
	virtio_queue_end_pass(d, qi, malformed ? 0 : ret, used_before);
}

#define REAP_BATCH 64

/* One completion: the request's used entry (deliver), or only its slot
 * and memory back (the queue is being reset or stopped). */
static void blk_end(struct virtio_blk_queue *bq, const struct disk_completion *c, bool deliver)
{
	bq->inflight--;
	if (c->cookie >= VIRTIO_BLK_QUEUE_MAX || !bq->reqs[c->cookie].in_use)
		return;
	struct virtio_blk_req *r = &bq->reqs[c->cookie];
	if (!deliver) {
		if (r->bounce)
			blk_bounce_free(bq, r);
		r->in_use = false;
		return;
	}
	/* A short transfer is an error too: the guest asked for all of it. */
	bool ok = c->res >= 0 && (uint64_t)c->res == r->expect;
	if (ok && (r->type == VIRTIO_BLK_T_IN || r->type == VIRTIO_BLK_T_OUT))
		atomic_fetch_add(&bq->blk->stats.bytes, (uint64_t)c->res);
	blk_finish(bq, r, ok ? VIRTIO_BLK_S_OK : VIRTIO_BLK_S_IOERR);
}

#define REAP_BATCH 64

/* Queue locked: takes every completion the backend holds, in batches. */
static void blk_reap(struct virtio_blk_queue *bq, bool deliver)
{
	struct disk_completion c[REAP_BATCH];
	unsigned n;
	while ((n = bq->blk->disk->ops->reap(bq->dq, c, REAP_BATCH)) > 0)
		for (unsigned i = 0; i < n; i++)
			blk_end(bq, &c[i], deliver);
}

void virtio_blk_complete(struct virtio_blk_queue *bq)
{
	struct virtio_blk *b = bq->blk;
	uint64_t count;
	if (read(bq->completion_fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
		return;
	virtio_queue_lock(&b->vdev, bq->index);
	struct virtq *q = &b->vdev.vqs[bq->index];
	uint16_t before = q->used_idx;
	blk_reap(bq, q->size != 0);
	/* The whole batch: one used-index update, at most one interrupt. */
	virtio_queue_end_pass(&b->vdev, bq->index, 0, before);
	/* A request waited for bounce memory that completions gave back. */
	if (bq->bounce_wait && bq->bounce_bytes < BLK_BOUNCE_QUEUE_MAX &&
	    virtio_queue_live(&b->vdev, bq->index)) {
		bq->bounce_wait = false;
		blk_notify(&b->vdev, bq->index);
	}
	virtio_queue_unlock(&b->vdev, bq->index);
}

/* Waits for what is in flight on one queue and forgets it. */
static void blk_queue_drain(struct virtio_blk_queue *bq)
{
	while (bq->inflight) {
		if (bq->blk->disk->ops->wait(bq->dq) < 0)
			break;
		blk_reap(bq, false);
	}
	for (unsigned i = 0; i < VIRTIO_BLK_QUEUE_MAX; i++)
		bq->reqs[i].in_use = false;
	bq->bounce_wait = false;
}

void virtio_blk_queue_quiesce(struct virtio_blk_queue *bq)
{
	virtio_queue_lock(&bq->blk->vdev, bq->index);
	if (bq->dq)
		blk_queue_drain(bq);
	virtio_queue_unlock(&bq->blk->vdev, bq->index);
}

/* Reset (every queue locked): wait for what is in flight, so no completion
 * lands in memory the driver has taken back, and forget it. */
static void blk_reset(struct virtio_dev *d)
{
	struct virtio_blk *b = d->priv;
	for (unsigned i = 0; i < b->nqueues; i++)
		if (b->queues[i].dq)
			blk_queue_drain(&b->queues[i]);
}

static const struct virtio_dev_ops blk_ops = {
    .type = VIRTIO_ID_BLOCK,
    .pci_class = 0x018000,
    .features =
	VBLK_F(VIRTIO_BLK_F_SEG_MAX) | VBLK_F(VIRTIO_BLK_F_BLK_SIZE) | VBLK_F(VIRTIO_BLK_F_FLUSH),
    .num_queues = 1,
    .queue_max = VIRTIO_BLK_QUEUE_MAX,
    .config_size = sizeof(struct virtio_blk_config),
    .config_read = blk_config_read,
    .queue_notify = blk_notify,
    .reset = blk_reset,
};

static int blk_queue_init(struct virtio_blk *b, unsigned i, struct err *e)
{
	struct virtio_blk_queue *bq = &b->queues[i];
	bq->blk = b;
	bq->index = i;
	bq->elem = malloc(sizeof(*bq->elem));
	bq->reqs = calloc(VIRTIO_BLK_QUEUE_MAX, sizeof(*bq->reqs));
	if (!bq->elem || !bq->reqs)
		return err_set(e, ERR_HOST, "out of memory");
	bq->completion_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (bq->completion_fd < 0)
		return err_set(e, ERR_HOST, "eventfd: %s", strerror(errno));
	bq->dq = b->disk->ops->queue_open(b->disk, VIRTIO_BLK_QUEUE_MAX, bq->completion_fd, e);
	return bq->dq ? 0 : -1;
}

int virtio_blk_init(struct virtio_blk *b, struct disk *disk, unsigned queues, struct err *e)
{
	memset(b, 0, sizeof(*b));
	b->disk = disk;
	for (unsigned i = 0; i < VIRTIO_BLK_MAX_QUEUES; i++)
		b->queues[i].completion_fd = -1;
	if (!disk)
		return -1;
	if (queues < 1 || queues > VIRTIO_BLK_MAX_QUEUES)
		return err_set(e, ERR_INPUT, "queues=%u: must be between 1 and %u", queues,
			       VIRTIO_BLK_MAX_QUEUES);
	b->capacity = disk->bytes / SECTOR;
	b->blk_size = SECTOR;
	b->vdev.ops = &blk_ops;
	b->vdev.num_queues = queues;
	b->vdev.extra_features = (disk->readonly ? VBLK_F(VIRTIO_BLK_F_RO) : 0) |
				 (queues > 1 ? VBLK_F(VIRTIO_BLK_F_MQ) : 0);
	b->vdev.priv = b;
	b->nqueues = queues;
	for (unsigned i = 0; i < queues; i++)
		if (blk_queue_init(b, i, e))
			return -1;
	return 0;
}

void virtio_blk_destroy(struct virtio_blk *b)
{
	for (unsigned i = 0; i < VIRTIO_BLK_MAX_QUEUES; i++) {
		struct virtio_blk_queue *bq = &b->queues[i];
		if (bq->dq) {
			/* A machine that ran has stopped its queues on their loops
			 * (virtio_blk_queue_quiesce, an on-stop hook): nothing is in
			 * flight and this returns at once. A harness that destroys
			 * a disk it drove itself still gets its requests ended. */
			blk_queue_drain(bq);
			b->disk->ops->queue_close(bq->dq);
			bq->dq = NULL;
		}
		if (bq->completion_fd >= 0)
			close(bq->completion_fd);
		bq->completion_fd = -1;
		free(bq->elem);
		free(bq->reqs);
		bq->elem = NULL;
		bq->reqs = NULL;
	}
	disk_close(b->disk);
	b->disk = NULL;
}
