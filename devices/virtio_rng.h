/* virtio-rng (virtio 1.2, section 5.4): one request queue, filled from
 * the host's getrandom(). */
#ifndef DEVICES_VIRTIO_RNG_H
#define DEVICES_VIRTIO_RNG_H

#include "virtio.h"

#include <stdatomic.h>

struct virtio_rng {
	struct virtio_dev vdev;
	struct virtq_elem *elem;
	atomic_uint_fast64_t bytes;
};

int virtio_rng_init(struct virtio_rng *r);
void virtio_rng_destroy(struct virtio_rng *r);

#endif
