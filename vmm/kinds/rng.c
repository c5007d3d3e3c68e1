/* Registry entry: virtio-rng (devices/virtio/virtio_rng.h), fed from getrandom(),
 * `--rng`. */
#include "vmm/base/err.h"
#include "vmm/base/stat.h"
#include "vmm/kinds/virtio.h"

#include "devices/virtio/virtio_rng.h"

#include <stdlib.h>

struct rng_device {
	struct virtio_instance vi; /* first: the registry's state */
	struct virtio_rng rng;
};

static void rng_destroy(void *state)
{
	struct rng_device *r = state;
	virtio_pci_destroy(&r->vi.vp);
	virtio_rng_destroy(&r->rng);
	free(r);
}

static void *rng_create(const struct device_host *h, const struct device_spec *spec,
			const char *name, uint8_t slot, struct err *e)
{
	(void)spec;
	struct rng_device *r = calloc(1, sizeof(*r));
	if (!r) {
		err_set(e, ERR_HOST, "out of memory");
		return NULL;
	}
	r->vi.host = h;
	if (virtio_rng_init(&r->rng, NULL)) {
		err_set(e, ERR_HOST, "out of memory");
		goto fail;
	}
	if (virtio_instance_plug(&r->vi, &r->rng.vdev, name, slot, e))
		goto fail;
	return r;
fail:
	rng_destroy(r);
	return NULL;
}

static void rng_print_stats(const struct vm_device *d, FILE *out)
{
	const struct rng_device *r = d->state;
	virtio_print_transport_stats(d, out);
	fprintf(out, "vmm: stats: %s: bytes %llu\n", d->name, STAT(r->rng.bytes));
}

const struct device_kind device_kind_virtio_rng = {
    .cli = {.name = "virtio-rng", .option = "rng", .help = "virtio-rng, fed from getrandom()"},
    .create = rng_create,
    .destroy = rng_destroy,
    .print_stats = rng_print_stats,
};
