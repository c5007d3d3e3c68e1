/*
 * Virtio devices and their transport, kept apart (as kvmtool's struct
 * virtio_ops): a device (blk, net, console, rng) sees only this interface,
 * never PCI; the transport (devices/virtio/virtio_pci.c) sees only the ops.
 */
#ifndef DEVICES_VIRTIO_H
#define DEVICES_VIRTIO_H

#include "devices/virtio/virtqueue.h"

#include <linux/virtio_config.h>
#include <linux/virtio_ids.h>
#include <linux/virtio_ring.h>
#include <stdbool.h>
#include <stdint.h>

/* Multiqueue virtio-net: 8 queue pairs and the control queue. */
#define VIRTIO_MAX_QUEUES 17

/* Feature bits (VIRTIO_F_VERSION_1, VIRTIO_RING_F_*) and status bits
 * (VIRTIO_CONFIG_S_*) come from the kernel's uapi headers. */
#define VIRTIO_FEATURE(bit) (1ULL << (bit))

struct virtio_dev;

/* One queue of a device whose queues another process serves
 * (virtio_dev_ops.external_queues), as the driver set it up: the size and
 * addresses passed virtq_init's checks at queue_enable. */
struct virtio_queue_info {
	unsigned index;
	uint16_t size;
	uint64_t desc, driver, device; /* guest-physical */
	int kick_fd; /* its notify ioeventfd: the backend reads it, the VMM never */
	int call_fd; /* the backend writes it: the queue's interrupt (4.1.5.4) */
};

/* What such a device is given at DRIVER_OK: every enabled queue, and the
 * call fd whose write is a configuration change notification (4.1.5.3). */
struct virtio_external_start {
	struct virtio_queue_info q[VIRTIO_MAX_QUEUES];
	unsigned nq;
	int config_call_fd;
};

/*
 * Locking (DESIGN.md "Locks"): the transport has a configuration lock and
 * one lock per queue, taken in that order, each once on a path.
 *  - config_read, config_write, activate and reset run under the
 *    configuration lock; activate and reset also hold every queue's lock
 *    (in queue order), so no queue path runs meanwhile.
 *  - queue_notify(d, q) runs under queue q's lock only, on the I/O thread
 *    that owns q. A device's own paths for q (completions, host input)
 *    take that lock once with virtio_queue_lock()/virtio_queue_unlock().
 * So a queue's hot path takes one lock, and two queues never contend.
 */
struct virtio_dev_ops {
	uint16_t type; /* virtio device ID (VIRTIO_ID_*) */
	uint32_t pci_class;
	uint64_t features;   /* device-specific; the transport adds its own */
	unsigned num_queues; /* the default; an instance may set its own */
	uint16_t queue_max;
	uint32_t config_size;
	void (*config_read)(struct virtio_dev *d, unsigned off, void *data, unsigned len);
	void (*config_write)(struct virtio_dev *d, unsigned off, const void *data, unsigned len);
	/* Queue q has buffers to look at (I/O thread): the driver notified
	 * it, or set DRIVER_OK with q enabled (a driver may queue buffers
	 * before DRIVER_OK: Linux 5.10's virtio-rng does). */
	void (*queue_notify)(struct virtio_dev *d, unsigned q);
	/* DRIVER_OK was set: queues are live. */
	void (*activate)(struct virtio_dev *d);
	/* Device reset: drop everything in flight. */
	void (*reset)(struct virtio_dev *d);
	/*
	 * Queues served by another process (a vhost-user backend): the
	 * transport keeps the configuration and the interrupts but never
	 * serves a queue. It neither watches nor reads the notify eventfds
	 * (they are the backend's kick fds) and calls no queue_notify or
	 * activate; it owns one call eventfd per queue and one for the
	 * configuration, and turns their writes into the guest's interrupts
	 * (bound to the vector as a KVM irqfd where it can be).
	 */
	bool external_queues;
	/* external_queues, under the configuration lock and every queue's:
	 * DRIVER_OK was set. 0, or -errno (undone): then NEEDS_RESET. */
	int (*start)(struct virtio_dev *d, const struct virtio_external_start *s);
	/* external_queues, same locks: once after each start that returned 0,
	 * at reset or teardown: the backend stops using the rings (the device
	 * asks it for each queue's state, GET_VRING_BASE). */
	void (*stop)(struct virtio_dev *d);
};

struct virtio_transport;

struct virtio_dev {
	const struct virtio_dev_ops *ops;
	struct virtio_transport *transport;
	struct virtq vqs[VIRTIO_MAX_QUEUES];
	unsigned num_queues;	 /* this instance's (0 at init: ops->num_queues) */
	uint64_t features;	 /* negotiated */
	uint64_t extra_features; /* offered on top of ops->features (e.g. RO) */
	/* external_queues: what the backend serves; the transport's offer
	 * (its ring features too) is masked by it. */
	uint64_t backend_features;
	void *priv;
};

/* What a device asks of its transport. */
struct virtio_transport_ops {
	/* Buffers were pushed on q (q locked): interrupt if the driver wants
	 * one. */
	void (*queue_used)(struct virtio_transport *t, unsigned q);
	/* The driver (or a host backend) broke the device: NEEDS_RESET, and a
	 * config interrupt (2.1.2). Callable under the configuration lock, a
	 * queue lock or none (a backend that died, seen on a loop). */
	void (*needs_reset)(struct virtio_transport *t, const char *why);
	/* q locked: DRIVER_OK set, NEEDS_RESET clear and q enabled, so the
	 * device may use q's buffers (3.1.1). Paths not started by a notify
	 * (host input, completions) ask first. */
	bool (*live)(struct virtio_transport *t, unsigned q);
	void (*queue_lock)(struct virtio_transport *t, unsigned q);
	void (*queue_unlock)(struct virtio_transport *t, unsigned q);
	/* q locked: the device stopped a pass over q at its budget with
	 * buffers left; call queue_notify(q) again at the end of the loop's
	 * pass, after the loop's other files. May be NULL (a test transport):
	 * the rest then waits for the next notify. */
	void (*yield)(struct virtio_transport *t, unsigned q);
};

struct virtio_transport {
	const struct virtio_transport_ops *ops;
};

static inline void virtio_queue_lock(struct virtio_dev *d, unsigned q)
{
	d->transport->ops->queue_lock(d->transport, q);
}

static inline void virtio_queue_unlock(struct virtio_dev *d, unsigned q)
{
	d->transport->ops->queue_unlock(d->transport, q);
}

/*
 * The most one pass over a queue does before it yields (issue 17): so a
 * guest that posts all it can, as legal requests, delays the rest of the
 * queue's loop (signals, --timeout, the other queues) by one pass at most.
 * A request costs its bytes, each device doing at most
 * VIRTIO_REQUEST_BYTES_MAX of host work for one (rng bytes, console
 * output); the pass ends at VIRTIO_PASS_REQUESTS requests or
 * VIRTIO_PASS_BYTES bytes, whichever comes first.
 */
#define VIRTIO_PASS_REQUESTS	 256
#define VIRTIO_PASS_BYTES	 (4u << 20)
#define VIRTIO_REQUEST_BYTES_MAX (64u << 10)

struct virtio_budget {
	unsigned requests;
	uint64_t bytes;
};

static inline struct virtio_budget virtio_budget_pass(void)
{
	return (struct virtio_budget){VIRTIO_PASS_REQUESTS, VIRTIO_PASS_BYTES};
}

/* Charges one request of `bytes` (capped at VIRTIO_REQUEST_BYTES_MAX). */
static inline void virtio_budget_spend(struct virtio_budget *b, uint64_t bytes)
{
	uint64_t cost = bytes < VIRTIO_REQUEST_BYTES_MAX ? bytes : VIRTIO_REQUEST_BYTES_MAX;
	b->requests = b->requests ? b->requests - 1 : 0;
	b->bytes = b->bytes > cost ? b->bytes - cost : 0;
}

static inline bool virtio_budget_left(const struct virtio_budget *b)
{
	return b->requests && b->bytes;
}

/* q locked: serve q again at the end of this pass (the budget ran out). */
static inline void virtio_queue_yield(struct virtio_dev *d, unsigned q)
{
	if (d->transport->ops->yield)
		d->transport->ops->yield(d->transport, q);
}

static inline void virtio_queue_used(struct virtio_dev *d, unsigned q)
{
	d->transport->ops->queue_used(d->transport, q);
}

static inline void virtio_needs_reset(struct virtio_dev *d, const char *why)
{
	d->transport->ops->needs_reset(d->transport, why);
}

static inline bool virtio_queue_live(struct virtio_dev *d, unsigned q)
{
	return d->transport && d->transport->ops->live && d->transport->ops->live(d->transport, q);
}

static inline unsigned virtio_num_queues(const struct virtio_dev *d)
{
	return d->num_queues ? d->num_queues : d->ops->num_queues;
}

/* The end of a pass over queue q (q locked): NEEDS_RESET when the ring
 * walk failed (ret < 0, an enum virtq_error); if buffers were used since
 * the used index was `used_before` (pushed, or only filled: they are
 * published here, once), one interrupt if the driver wants it (2.7.10). */
void virtio_queue_end_pass(struct virtio_dev *d, unsigned q, int ret, uint16_t used_before);
/* Serves the buffers queued on q, one pass's budget of them (a request
 * costs its in + out bytes): pops each, `serve` fills or consumes it
 * and returns the bytes it wrote, the buffer is pushed as used; then
 * virtio_queue_end_pass(). Returns how many were used. */
unsigned virtio_queue_serve(struct virtio_dev *d, unsigned q, struct virtq_elem *elem,
			    uint32_t (*serve)(void *ctx, const struct virtq_elem *e), void *ctx);

static inline bool virtio_has_feature(const struct virtio_dev *d, unsigned bit)
{
	return d->features & VIRTIO_FEATURE(bit);
}

#endif
