#include "devices/virtio/virtio_rng.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define RNG_QUEUE_MAX 256

/* 5.4.6: the device fills device-writable buffers with random bytes; at
 * most VIRTIO_REQUEST_BYTES_MAX of one request (the used length says how
 * many, 2.7.8), so no request costs the host more than that and the used
 * length always fits (a legal chain may be 2^32 bytes). */
static uint32_t rng_fill(void *ctx, const struct virtq_elem *e)
{
	struct virtio_rng *r = ctx;
	uint64_t done = 0;
	for (unsigned i = 0; i < e->nin && done < VIRTIO_REQUEST_BYTES_MAX; i++) {
		const struct iovec *v = &e->in[i];
		size_t want = v->iov_len, off = 0;
		if (want > VIRTIO_REQUEST_BYTES_MAX - done)
			want = VIRTIO_REQUEST_BYTES_MAX - done;
		while (off < want) {
			ssize_t n = r->source((uint8_t *)v->iov_base + off, want - off, 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			off += (size_t)n;
		}
		done += off;
		if (off < want)
			break;
	}
	atomic_fetch_add(&r->bytes, done);
	return (uint32_t)done;
}

static void rng_notify(struct virtio_dev *d, unsigned qi)
{
	struct virtio_rng *r = d->priv;
	virtio_queue_serve(d, qi, r->elem, rng_fill, r);
}

static const struct virtio_dev_ops rng_ops = {
    .type = VIRTIO_ID_RNG,
    .pci_class = 0xFF0000,
    .features = 0,
    .num_queues = 1,
    .queue_max = RNG_QUEUE_MAX,
    .config_size = 0,
    .queue_notify = rng_notify,
};

int virtio_rng_init(struct virtio_rng *r, virtio_rng_source source)
{
	memset(r, 0, sizeof(*r));
	r->source = source ? source : getrandom;
	r->vdev.ops = &rng_ops;
	r->vdev.priv = r;
	r->elem = malloc(sizeof(*r->elem));
	return r->elem ? 0 : -ENOMEM;
}

void virtio_rng_destroy(struct virtio_rng *r)
{
	free(r->elem);
	r->elem = NULL;
}
