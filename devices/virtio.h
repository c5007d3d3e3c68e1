/*
 * Virtio devices and their transport, kept apart (as kvmtool's struct
 * virtio_ops): a device (blk, net, console, rng) sees only this interface,
 * never PCI; the transport (devices/virtio_pci.c) sees only the ops.
 */
#ifndef DEVICES_VIRTIO_H
#define DEVICES_VIRTIO_H

#include "virtqueue.h"

#include <linux/virtio_config.h>
#include <linux/virtio_ids.h>
#include <linux/virtio_ring.h>
#include <stdbool.h>
#include <stdint.h>

#define VIRTIO_MAX_QUEUES 8

/* Feature bits (VIRTIO_F_VERSION_1, VIRTIO_RING_F_*) and status bits
 * (VIRTIO_CONFIG_S_*) come from the kernel's uapi headers. */
#define VIRTIO_FEATURE(bit) (1ULL << (bit))

struct virtio_dev;

/*
 * Locking: the transport has one lock. Every op below but lock/unlock is
 * called with it held (the device's callbacks run under it), and a device
 * takes it once at the entry of its own I/O-thread paths (completions,
 * host input) with virtio_lock()/virtio_unlock(): no path takes it twice.
 */
struct virtio_dev_ops {
	uint16_t type; /* virtio device ID (VIRTIO_ID_*) */
	uint32_t pci_class;
	uint64_t features; /* device-specific; the transport adds its own */
	unsigned num_queues;
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
};

struct virtio_transport;

struct virtio_dev {
	const struct virtio_dev_ops *ops;
	struct virtio_transport *transport;
	struct virtq vqs[VIRTIO_MAX_QUEUES];
	uint64_t features;	 /* negotiated */
	uint64_t extra_features; /* offered on top of ops->features (e.g. RO) */
	void *priv;
};

/* What a device asks of its transport (transport locked, but lock/unlock). */
struct virtio_transport_ops {
	/* Buffers were pushed on q: interrupt if the driver wants one. */
	void (*queue_used)(struct virtio_transport *t, unsigned q);
	/* The driver broke a rule: NEEDS_RESET, and a config interrupt. */
	void (*needs_reset)(struct virtio_transport *t, const char *why);
	/* DRIVER_OK set and NEEDS_RESET clear: the device may use buffers
	 * (3.1.1). Paths not started by a notify (host input) ask first. */
	bool (*live)(struct virtio_transport *t);
	void (*lock)(struct virtio_transport *t);
	void (*unlock)(struct virtio_transport *t);
};

struct virtio_transport {
	const struct virtio_transport_ops *ops;
};

static inline void virtio_lock(struct virtio_dev *d)
{
	d->transport->ops->lock(d->transport);
}

static inline void virtio_unlock(struct virtio_dev *d)
{
	d->transport->ops->unlock(d->transport);
}

static inline void virtio_queue_used(struct virtio_dev *d, unsigned q)
{
	d->transport->ops->queue_used(d->transport, q);
}

static inline void virtio_needs_reset(struct virtio_dev *d, const char *why)
{
	d->transport->ops->needs_reset(d->transport, why);
}

static inline bool virtio_live(struct virtio_dev *d)
{
	return d->transport && d->transport->ops->live && d->transport->ops->live(d->transport);
}

/* The end of a pass over queue q: NEEDS_RESET when the ring walk failed
 * (ret < 0, an enum virtq_error), and an interrupt if buffers were used
 * since the used index was `used_before`. */
void virtio_queue_end_pass(struct virtio_dev *d, unsigned q, int ret, uint16_t used_before);
/* Serves every buffer queued on q: pops each, `serve` fills or consumes it
 * and returns the bytes it wrote, the buffer is pushed as used; then
 * virtio_queue_end_pass(). Returns how many were used. */
unsigned virtio_queue_serve(struct virtio_dev *d, unsigned q, struct virtq_elem *elem,
			    uint32_t (*serve)(void *ctx, const struct virtq_elem *e), void *ctx);

static inline bool virtio_has_feature(const struct virtio_dev *d, unsigned bit)
{
	return d->features & VIRTIO_FEATURE(bit);
}

#endif
