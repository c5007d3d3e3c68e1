/* virtio-rng (virtio 1.2, section 5.4): one request queue, filled from
 * the host's getrandom() (or a source the caller gives: the fuzzer's is
 * deterministic). */
#ifndef DEVICES_VIRTIO_RNG_H
#define DEVICES_VIRTIO_RNG_H

#include "devices/virtio/virtio.h"

#include <stdatomic.h>

#include <sys/types.h>

/* Fills buf with up to len random bytes: getrandom()'s contract. */
typedef ssize_t (*virtio_rng_source)(void *buf, size_t len, unsigned flags);

struct virtio_rng {
	struct virtio_dev vdev;
	struct virtq_elem *elem;
	virtio_rng_source source;
	atomic_uint_fast64_t bytes;
};

/* source NULL: getrandom(). */
int virtio_rng_init(struct virtio_rng *r, virtio_rng_source source);
void virtio_rng_destroy(struct virtio_rng *r);

#endif
