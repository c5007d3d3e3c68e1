/* Registry entry: virtio-blk (devices/virtio/virtio_blk.h) on a raw file or
 * block device through the io_uring disk backend
 * (devices/backends/disk_uring.h), `--disk PATH[,ro][,direct][,queues=N]`. */
#include "vmm/base/err.h"
#include "vmm/base/stat.h"
#include "vmm/host/event_loop.h"
#include "vmm/kinds/virtio.h"

#include "devices/backends/disk_uring.h"
#include "devices/virtio/virtio_blk.h"

#include <stddef.h>
#include <stdlib.h>

struct blk_params {
	const char *path; /* may not contain a comma */
	bool readonly, direct;
	unsigned queues;
};
DEVICE_PARAMS_FIT(struct blk_params);

struct blk_device {
	struct virtio_instance vi; /* first: the registry's state */
	struct virtio_blk blk;
};

static unsigned blk_queue_groups(const struct device_spec *spec)
{
	return ((const struct blk_params *)spec->params)->queues;
}

static void blk_destroy(void *state)
{
	struct blk_device *b = state;
	virtio_pci_destroy(&b->vi.vp);
	virtio_blk_destroy(&b->blk);
	free(b);
}

static void blk_completions_ready(void *arg)
{
	virtio_blk_complete(arg);
}

static void blk_queue_stopping(void *arg)
{
	virtio_blk_queue_quiesce(arg);
}

static void *blk_create(const struct device_host *h, const struct device_spec *spec,
			const char *name, uint8_t slot, struct err *e)
{
	const struct blk_params *p = (const struct blk_params *)spec->params;
	struct blk_device *b = calloc(1, sizeof(*b));
	if (!b) {
		err_set(e, ERR_HOST, "out of memory");
		return NULL;
	}
	b->vi.host = h;
	struct disk *disk = disk_uring_open(p->path, p->readonly, p->direct, e);
	if (virtio_blk_init(&b->blk, disk, p->queues, e)) {
		err_prefix(e, "--disk %s", p->path);
		goto fail;
	}
	/* A queue's notifications, its completions and its stop on one loop. */
	virtio_assign_loops(&b->vi, b->vi.loop, p->queues);
	for (unsigned q = 0; q < p->queues; q++) {
		struct event_loop *l = virtio_queue_loop(&b->vi, q);
		if (event_loop_watch(l, b->blk.queues[q].completion_fd, false,
				     blk_completions_ready, &b->blk.queues[q]) < 0 ||
		    event_loop_on_stop(l, blk_queue_stopping, &b->blk.queues[q]) < 0) {
			err_set(e, ERR_HOST, "%s: cannot watch its completions", name);
			goto fail;
		}
	}
	if (virtio_instance_plug(&b->vi, &b->blk.vdev, name, slot, e))
		goto fail;
	return b;
fail:
	blk_destroy(b);
	return NULL;
}

static void blk_print_stats(const struct vm_device *d, FILE *out)
{
	const struct blk_device *b = d->state;
	const struct virtio_blk_stats *s = &b->blk.stats;
	virtio_print_transport_stats(d, out);
	fprintf(out,
		"vmm: stats: %s %s: reads %llu writes %llu flushes %llu get-id %llu ioerr %llu "
		"unsupported %llu bytes %llu bounced %llu\n",
		d->name, b->blk.disk->name, STAT(s->reads), STAT(s->writes), STAT(s->flushes),
		STAT(s->get_ids), STAT(s->ioerrs), STAT(s->unsupported), STAT(s->bytes),
		STAT(s->bounced));
}

const struct device_kind device_kind_virtio_blk = {
    .cli =
	{
	    .name = "virtio-blk",
	    .option = "disk",
	    .help = "virtio-blk on a raw file or block device (io_uring); ro: read-only, direct: "
		    "O_DIRECT, queues: request queues (1-" OPTIONS_STR(
			VIRTIO_BLK_MAX_QUEUES) ", default 1; more offer VIRTIO_BLK_F_MQ); "
					       "repeatable",
	    .props = OPT_TABLE(DEVICE_PROP_PATH("path", "PATH", struct blk_params, path),
			       DEVICE_PROP_FLAG("ro", struct blk_params, readonly),
			       DEVICE_PROP_FLAG("direct", struct blk_params, direct),
			       DEVICE_PROP_UINT("queues", "N", 1, VIRTIO_BLK_MAX_QUEUES, 1,
						struct blk_params, queues)),
	},
    .create = blk_create,
    .destroy = blk_destroy,
    .queue_groups = blk_queue_groups,
    .print_stats = blk_print_stats,
};
