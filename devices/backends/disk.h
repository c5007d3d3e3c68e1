/*
 * A disk backend: what virtio-blk (devices/virtio/virtio_blk.c) needs from
 * the host to serve a disk, and nothing of the virtio request format. The
 * device parses and checks requests; the backend moves bytes.
 *
 * A disk has one or more queues, each a submission context used by one
 * thread at a time (the virtio queue's lock): requests are prepared one by
 * one, handed to the host together by submit, and complete later, in any
 * order, each with the cookie it was prepared with. When completions wait
 * to be reaped the backend makes the queue's notify eventfd readable; the
 * device's I/O thread watches it, reads it, then reaps.
 *
 * Backends: devices/backends/disk_uring.c (a file or block device through
 * io_uring); tests/unit/disk_fake.c (memory, failures on demand).
 */
#ifndef DEVICES_BACKENDS_DISK_H
#define DEVICES_BACKENDS_DISK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#define DISK_ID_BYTES 20

struct err;
struct disk;

/* One submission context; a backend embeds it first in its own. */
struct disk_queue {
	struct disk *disk;
	int notify_fd; /* an eventfd the backend signals, owned by the caller */
};

struct disk_completion {
	uint64_t cookie;
	int64_t res; /* bytes moved, or -errno */
};

struct disk_ops {
	/* A queue with room for `depth` requests in flight; NULL with an error. */
	struct disk_queue *(*queue_open)(struct disk *d, unsigned depth, int notify_fd,
					 struct err *e);
	/* The caller waited for its requests first (wait and reap). */
	void (*queue_close)(struct disk_queue *q);
	/* Prepares a read (or a write) of the iovec at byte offset `off`, which
	 * the caller checked lies inside the disk; an empty iovec completes with
	 * 0. `dsync`: the write is durable when it completes. false: no room,
	 * the request did not start. */
	bool (*rw)(struct disk_queue *q, bool write, const struct iovec *iov, unsigned niov,
		   uint64_t off, bool dsync, uint64_t cookie);
	/* Prepares making every completed write durable (fdatasync). */
	bool (*flush)(struct disk_queue *q, uint64_t cookie);
	/* Hands what was prepared to the host. */
	void (*submit)(struct disk_queue *q);
	/* Takes up to `max` completions without blocking; how many. */
	unsigned (*reap)(struct disk_queue *q, struct disk_completion *c, unsigned max);
	/* Blocks until there is a completion to reap; <0 on error. */
	int (*wait)(struct disk_queue *q);
	/* After every queue is closed. */
	void (*close)(struct disk *d);
};

struct disk {
	const struct disk_ops *ops;
	uint64_t bytes; /* the size, at least one 512-byte sector */
	bool readonly;
	/* Buffers must be 512-byte aligned (O_DIRECT); the device bounces
	 * unaligned ones. */
	bool direct;
	char id[DISK_ID_BYTES]; /* stable across runs; NUL-padded */
	char name[256];		/* for messages: the path */
};

static inline void disk_close(struct disk *d)
{
	if (d)
		d->ops->close(d);
}

#endif
