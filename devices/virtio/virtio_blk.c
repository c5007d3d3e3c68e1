#include "devices/virtio/virtio_blk.h"

#include "vmm/base/err.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/virtio_blk.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
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

/* A read or a write as an SQE (through a bounce buffer when O_DIRECT meets
 * an unaligned guest buffer); NULL: the request fails with IOERR, or, with
 * *wait set, it must wait for bounce memory. */
static struct io_uring_sqe *blk_prep_rw(struct virtio_blk_queue *bq, struct virtio_blk_req *r,
					const struct virtq_elem *e, const struct blk_outhdr *h,
					bool *wait)
{
	struct virtio_blk *b = bq->blk;
	bool in = h->type == VIRTIO_BLK_T_IN;
	uint64_t len = in ? e->in_len - 1 : e->out_len - sizeof(*h);
	if (!in && b->readonly)
		return NULL;
	/* Whole sectors, inside the disk (no wrap in sector + count). */
	if (len % SECTOR || h->sector > b->capacity || len / SECTOR > b->capacity - h->sector ||
	    len > UINT32_MAX)
		return NULL;
	r->niov = in ? iov_slice(e->in, e->nin, 0, len, r->iov, VIRTQ_MAX_IOV)
		     : iov_slice(e->out, e->nout, sizeof(*h), len, r->iov, VIRTQ_MAX_IOV);
	r->expect = (uint32_t)len;
	if (in)
		r->used_len = (uint32_t)len + 1;
	const struct iovec *iov = r->iov;
	unsigned niov = r->niov;
	if (b->direct && len && !iov_aligned(r->iov, r->niov, SECTOR)) {
		if (len > BLK_BOUNCE_REQUEST_MAX)
			return NULL;
		if (bq->bounce_bytes + len > BLK_BOUNCE_QUEUE_MAX) {
			*wait = true;
			return NULL;
		}
		if (posix_memalign(&r->bounce, DIRECT_ALIGN, len))
			return NULL;
		bq->bounce_bytes += len;
		if (!in)
			iov_to_buf(r->iov, r->niov, 0, r->bounce, len);
		r->bounce_iov = (struct iovec){r->bounce, len};
		iov = &r->bounce_iov;
		niov = 1;
		atomic_fetch_add(&b->stats.bounced, 1);
	}
	struct io_uring_sqe *sqe = io_uring_get_sqe(&bq->ring);
	if (!sqe)
		return NULL;
	/* A single buffer goes as READ/WRITE, without an iovec to import. (The
	 * file is not registered with the ring: the kernel drops a registered
	 * file only when it tears the ring down, asynchronously, after the VMM
	 * exited, and a file system unmounted right then would still be
	 * busy.) */
	if (len == 0) {
		io_uring_prep_nop(sqe);
	} else if (in) {
		if (niov == 1)
			io_uring_prep_read(sqe, b->fd, iov[0].iov_base, (unsigned)iov[0].iov_len,
					   h->sector * SECTOR);
		else
			io_uring_prep_readv(sqe, b->fd, iov, niov, h->sector * SECTOR);
		atomic_fetch_add(&b->stats.reads, 1);
	} else {
		if (niov == 1)
			io_uring_prep_write(sqe, b->fd, iov[0].iov_base, (unsigned)iov[0].iov_len,
					    h->sector * SECTOR);
		else
			io_uring_prep_writev(sqe, b->fd, iov, niov, h->sector * SECTOR);
		/* 5.2.6.2: without FLUSH negotiated, a completed write must
		 * already be durable. */
		if (!virtio_has_feature(&b->vdev, VIRTIO_BLK_F_FLUSH))
			sqe->rw_flags = RWF_DSYNC;
		atomic_fetch_add(&b->stats.writes, 1);
	}
	return sqe;
}

static struct io_uring_sqe *blk_prep_flush(struct virtio_blk_queue *bq, struct virtio_blk_req *r)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&bq->ring);
	if (!sqe)
		return NULL;
	r->expect = 0;
	io_uring_prep_fsync(sqe, bq->blk->fd, IORING_FSYNC_DATASYNC);
	atomic_fetch_add(&bq->blk->stats.flushes, 1);
	return sqe;
}

/* 5.2.6.1: up to 20 bytes of ID, not NUL-terminated when exactly 20. */
static void blk_get_id(struct virtio_blk_queue *bq, struct virtio_blk_req *r,
		       const struct virtq_elem *e)
{
	uint64_t room = e->in_len - 1;
	uint64_t n = room < VIRTIO_BLK_ID_BYTES ? room : VIRTIO_BLK_ID_BYTES;
	buf_to_iov(e->in, e->nin, 0, bq->blk->id, n);
	r->used_len = (uint32_t)n + 1;
	atomic_fetch_add(&bq->blk->stats.get_ids, 1);
	blk_finish(bq, r, VIRTIO_BLK_S_OK);
}

enum blk_start_result { BLK_STARTED, BLK_MALFORMED, BLK_WAIT };

/* Turns one popped element into an SQE, or completes it at once; MALFORMED
 * (the caller marks NEEDS_RESET), or WAIT: not started, back in the ring. */
static enum blk_start_result blk_start(struct virtio_blk_queue *bq, const struct virtq_elem *e)
{
	struct blk_outhdr h;
	bool wait = false;
	if (!blk_parse(bq, e, &h))
		return BLK_MALFORMED;
	struct virtio_blk_req *r = &bq->reqs[e->head];
	struct io_uring_sqe *sqe;
	switch (h.type) {
	case VIRTIO_BLK_T_IN:
	case VIRTIO_BLK_T_OUT: sqe = blk_prep_rw(bq, r, e, &h, &wait); break;
	case VIRTIO_BLK_T_FLUSH: sqe = blk_prep_flush(bq, r); break;
	case VIRTIO_BLK_T_GET_ID: blk_get_id(bq, r, e); return BLK_STARTED;
	default: blk_finish(bq, r, VIRTIO_BLK_S_UNSUPP); return BLK_STARTED;
	}
	if (wait) {
		r->in_use = false;
		return BLK_WAIT;
	}
	if (!sqe) {
		r->used_len = 1;
		blk_finish(bq, r, VIRTIO_BLK_S_IOERR);
		return BLK_STARTED;
	}
	io_uring_sqe_set_data64(sqe, e->head);
	bq->inflight++;
	return BLK_STARTED;
}

/* Queue qi locked: the requests the driver made available, one pass's
 * budget of them, go to the kernel in one submit (more only if the SQ
 * ring fills up). The budget counts requests completed at once too (GET_ID,
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
		if (io_uring_sq_space_left(&bq->ring) == 0)
			io_uring_submit(&bq->ring);
	}
	if (io_uring_sq_ready(&bq->ring))
		io_uring_submit(&bq->ring);
	if (ret == 1 && !malformed && virtq_has_avail(q))
		virtio_queue_yield(d, qi); /* the budget ran out: the rest next pass */
	if (malformed)
		virtio_needs_reset(d, "malformed block request (no header or status byte, or a "
				      "head already in flight)");
	virtio_queue_end_pass(d, qi, malformed ? 0 : ret, used_before);
}

#define REAP_BATCH 64

/* Queue locked: takes every completion the ring holds, in batches. */
static void blk_reap(struct virtio_blk_queue *bq, bool deliver)
{
	struct io_uring_cqe *cqes[REAP_BATCH];
	unsigned n;
	while ((n = io_uring_peek_batch_cqe(&bq->ring, cqes, REAP_BATCH)) > 0) {
		for (unsigned i = 0; i < n; i++) {
			uint64_t head = io_uring_cqe_get_data64(cqes[i]);
			int res = cqes[i]->res;
			bq->inflight--;
			if (head >= VIRTIO_BLK_QUEUE_MAX || !bq->reqs[head].in_use)
				continue;
			struct virtio_blk_req *r = &bq->reqs[head];
			if (!deliver) {
				if (r->bounce)
					blk_bounce_free(bq, r);
				r->in_use = false;
				continue;
			}
			/* A short transfer is an error too: the guest asked for all of it. */
			bool ok = res >= 0 && (uint32_t)res == r->expect;
			if (ok && (r->type == VIRTIO_BLK_T_IN || r->type == VIRTIO_BLK_T_OUT))
				atomic_fetch_add(&bq->blk->stats.bytes, (uint64_t)res);
			blk_finish(bq, r, ok ? VIRTIO_BLK_S_OK : VIRTIO_BLK_S_IOERR);
		}
		io_uring_cq_advance(&bq->ring, n);
	}
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
		struct io_uring_cqe *cqe;
		if (io_uring_wait_cqe(&bq->ring, &cqe) < 0)
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
	if (bq->ring_ready)
		blk_queue_drain(bq);
	virtio_queue_unlock(&bq->blk->vdev, bq->index);
}

/* Reset (every queue locked): wait for what is in flight, so no completion
 * lands in memory the driver has taken back, and forget it. */
static void blk_reset(struct virtio_dev *d)
{
	struct virtio_blk *b = d->priv;
	for (unsigned i = 0; i < b->nqueues; i++)
		if (b->queues[i].ring_ready)
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

/*
 * The operations a queue's ring may carry, and nothing else: the sandboxed
 * threads can submit to the ring, and an unrestricted ring would do for
 * them what seccomp refuses (IORING_OP_OPENAT opens any file the VMM's
 * user can). io_uring_register(2), IORING_REGISTER_RESTRICTIONS: a ring
 * made disabled takes restrictions once, then is enabled; no register
 * operation is allowed after that, and no SQE flag.
 */
static const uint8_t blk_ring_ops[] = {IORING_OP_NOP,	IORING_OP_READ,	  IORING_OP_WRITE,
				       IORING_OP_READV, IORING_OP_WRITEV, IORING_OP_FSYNC};

static int blk_ring_restrict(struct io_uring *ring)
{
	struct io_uring_restriction res[sizeof(blk_ring_ops) + 1];
	memset(res, 0, sizeof(res));
	for (size_t i = 0; i < sizeof(blk_ring_ops); i++) {
		res[i].opcode = IORING_RESTRICTION_SQE_OP;
		res[i].sqe_op = blk_ring_ops[i];
	}
	res[sizeof(blk_ring_ops)].opcode = IORING_RESTRICTION_SQE_FLAGS_ALLOWED;
	res[sizeof(blk_ring_ops)].sqe_flags = 0;
	int ret = io_uring_register_restrictions(ring, res, sizeof(blk_ring_ops) + 1);
	return ret < 0 ? ret : io_uring_enable_rings(ring);
}

static int blk_ring_init(struct virtio_blk_queue *bq, struct err *e)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_R_DISABLED;
	int ret = io_uring_queue_init_params(VIRTIO_BLK_QUEUE_MAX, &bq->ring, &p);
	if (ret == -EINVAL)
		return err_set(e, ERR_HOST,
			       "io_uring: this kernel cannot make a restricted ring "
			       "(IORING_SETUP_R_DISABLED, Linux 5.10)");
	if (ret < 0)
		return err_set(e, ERR_HOST, "io_uring_queue_init: %s", strerror(-ret));
	bq->ring_ready = true;
	bq->completion_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (bq->completion_fd < 0 || io_uring_register_eventfd(&bq->ring, bq->completion_fd) < 0)
		return err_set(e, ERR_HOST, "cannot register the completion eventfd");
	ret = blk_ring_restrict(&bq->ring);
	if (ret < 0)
		return err_set(e, ERR_HOST, "io_uring: cannot restrict the ring: %s",
			       strerror(-ret));
	return 0;
}

static int blk_queue_init(struct virtio_blk *b, unsigned i, struct err *e)
{
	struct virtio_blk_queue *bq = &b->queues[i];
	bq->blk = b;
	bq->index = i;
	bq->elem = malloc(sizeof(*bq->elem));
	bq->reqs = calloc(VIRTIO_BLK_QUEUE_MAX, sizeof(*bq->reqs));
	if (!bq->elem || !bq->reqs)
		return err_set(e, ERR_HOST, "out of memory");
	return blk_ring_init(bq, e);
}

int virtio_blk_init(struct virtio_blk *b, const char *path, bool readonly, bool direct,
		    unsigned queues, struct err *e)
{
	struct stat st;
	memset(b, 0, sizeof(*b));
	b->fd = -1;
	for (unsigned i = 0; i < VIRTIO_BLK_MAX_QUEUES; i++)
		b->queues[i].completion_fd = -1;
	if (queues < 1 || queues > VIRTIO_BLK_MAX_QUEUES)
		return err_set(e, ERR_INPUT, "queues=%u: must be between 1 and %u", queues,
			       VIRTIO_BLK_MAX_QUEUES);
	snprintf(b->path, sizeof(b->path), "%s", path);
	b->readonly = readonly;
	b->direct = direct;
	/* O_NONBLOCK until the type is known: a FIFO must not block the open
	 * (SIGTERM would not end it); regular files and block devices ignore
	 * the flag for I/O, and it is cleared before any. */
	b->fd = open(path, (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NONBLOCK | O_NOCTTY |
			       (direct ? O_DIRECT : 0));
	if (b->fd < 0)
		return err_set(e, ERR_INPUT, "%s", strerror(errno));
	if (fstat(b->fd, &st) < 0)
		return err_set(e, ERR_INPUT, "%s", strerror(errno));
	if (!S_ISBLK(st.st_mode) && !S_ISREG(st.st_mode))
		return err_set(e, ERR_INPUT, "not a regular file or block device");
	if (fcntl(b->fd, F_SETFL, direct ? O_DIRECT : 0) < 0)
		return err_set(e, ERR_HOST, "fcntl: %s", strerror(errno));
	uint64_t bytes = (uint64_t)st.st_size;
	if (S_ISBLK(st.st_mode) && ioctl(b->fd, BLKGETSIZE64, &bytes) < 0)
		return err_set(e, ERR_INPUT, "cannot read its size: %s", strerror(errno));
	if (bytes < SECTOR)
		return err_set(e, ERR_INPUT, "smaller than one 512-byte sector");
	b->capacity = bytes / SECTOR;
	b->blk_size = SECTOR;
	/* GET_ID: the file's device and inode, stable across runs. */
	snprintf(b->id, sizeof(b->id), "vmm-%llx-%llx", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	b->vdev.ops = &blk_ops;
	b->vdev.num_queues = queues;
	b->vdev.extra_features =
	    (readonly ? VBLK_F(VIRTIO_BLK_F_RO) : 0) | (queues > 1 ? VBLK_F(VIRTIO_BLK_F_MQ) : 0);
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
		if (bq->ring_ready) {
			/* A machine that ran has stopped its queues on their loops
			 * (virtio_blk_queue_quiesce, an on-stop hook): nothing is in
			 * flight and this returns at once. A harness that destroys
			 * a disk it drove itself still gets its requests ended. */
			blk_queue_drain(bq);
			io_uring_queue_exit(&bq->ring);
			bq->ring_ready = false;
		}
		if (bq->completion_fd >= 0)
			close(bq->completion_fd);
		bq->completion_fd = -1;
		free(bq->elem);
		free(bq->reqs);
		bq->elem = NULL;
		bq->reqs = NULL;
	}
	if (b->fd >= 0)
		close(b->fd);
	b->fd = -1;
}
