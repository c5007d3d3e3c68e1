/*
 * virtio-blk (virtio 1.2, section 5.2) over a disk backend
 * (devices/backends/disk.h: io_uring on a file or block device in ./vmm):
 * requests are parsed and checked here and become backend reads, writes
 * and flushes; completions are reaped on the I/O thread when the queue's
 * completion eventfd is readable, up to a queue's worth in flight. IN, OUT,
 * FLUSH and GET_ID; out-of-range sectors, writes to a read-only disk and
 * host I/O errors are reported to the guest as VIRTIO_BLK_S_IOERR, never
 * dropped.
 *
 * Multiqueue (VIRTIO_BLK_F_MQ, offered with more than one queue): each
 * request queue has a backend queue, a completion eventfd and request slots
 * of its own, all used under that queue's lock on the I/O thread that owns
 * it. The requests one notification finds go to the host in one submit;
 * completions are reaped in batches, their used entries published with one
 * index update and one interrupt decision (2.7.10) per batch.
 */
#ifndef DEVICES_VIRTIO_BLK_H
#define DEVICES_VIRTIO_BLK_H

#include "devices/backends/disk.h"
#include "devices/virtio/virtio.h"

#include <stdatomic.h>

#define VIRTIO_BLK_QUEUE_MAX  256
#define VIRTIO_BLK_ID_BYTES   DISK_ID_BYTES
#define VIRTIO_BLK_MAX_QUEUES 16

struct virtio_blk_req {
	bool in_use;
	uint16_t head;
	uint8_t type;
	uint8_t *status;   /* the guest's status byte */
	uint32_t expect;   /* bytes the host operation must move */
	uint32_t used_len; /* bytes written into the guest's buffers */
	unsigned niov;
	struct iovec iov[VIRTQ_MAX_IOV];
	/* O_DIRECT needs aligned buffers; a guest need not give them
	 * (virtio sets no alignment), so such requests go through this. */
	void *bounce;
	struct iovec bounce_iov;
};

/* Host memory for bounce buffers does not grow with what the guest asks
 * (issue 17): an unaligned O_DIRECT request longer than
 * BLK_BOUNCE_REQUEST_MAX fails with IOERR, and one that would take a
 * queue's bounce buffers in flight past BLK_BOUNCE_QUEUE_MAX waits in the
 * ring until completions give memory back. Peak: BLK_BOUNCE_QUEUE_MAX per
 * request queue. */
#define BLK_BOUNCE_REQUEST_MAX (1u << 20)
#define BLK_BOUNCE_QUEUE_MAX   (4u << 20)

struct virtio_blk_stats {
	atomic_uint_fast64_t reads, writes, flushes, get_ids, ioerrs, unsupported, bytes, bounced;
	atomic_uint_fast64_t bounce_waits; /* passes stopped for bounce memory */
};

struct virtio_blk;

/* One request queue's backend; its queue's lock guards all of it. */
struct virtio_blk_queue {
	struct virtio_blk *blk;
	unsigned index;
	struct disk_queue *dq; /* NULL until set up */
	int completion_fd;     /* eventfd the backend signals */
	unsigned inflight;
	uint64_t bounce_bytes; /* in bounce buffers of requests in flight */
	bool bounce_wait;      /* a request waits in the ring for bounce memory */
	struct virtq_elem *elem;
	struct virtio_blk_req *reqs; /* one per possible head */
};

struct virtio_blk {
	struct virtio_dev vdev;
	struct disk *disk;
	uint64_t capacity; /* 512-byte sectors */
	uint32_t blk_size;
	unsigned nqueues;
	struct virtio_blk_queue queues[VIRTIO_BLK_MAX_QUEUES];
	struct virtio_blk_stats stats;
};

struct err;
/* A virtio-blk on `disk`, which it takes (virtio_blk_destroy closes it,
 * after a failed init too; NULL: the open failed, `e` says why), with
 * `queues` request queues (1..VIRTIO_BLK_MAX_QUEUES; more than one offers
 * VIRTIO_BLK_F_MQ). */
int virtio_blk_init(struct virtio_blk *b, struct disk *disk, unsigned queues, struct err *e);
/* The queue's I/O thread calls this when its completion_fd is readable. */
void virtio_blk_complete(struct virtio_blk_queue *q);
/* The queue's I/O thread, stopping: waits for the queue's requests still in
 * flight, so they end on the thread that submitted them. */
void virtio_blk_queue_quiesce(struct virtio_blk_queue *q);
void virtio_blk_destroy(struct virtio_blk *b);

#endif
