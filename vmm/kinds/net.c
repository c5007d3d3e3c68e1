/* Registry entry: virtio-net (devices/virtio/virtio_net.h) on a tap device,
 * `--net tap[=NAME][,mac=XX:XX:XX:XX:XX:XX][,queues=N]`. */
#include "vmm/base/err.h"
#include "vmm/base/log.h"
#include "vmm/base/stat.h"
#include "vmm/host/event_loop.h"
#include "vmm/kinds/virtio.h"

#include "devices/virtio/virtio_net.h"

#include <stddef.h>
#include <stdlib.h>

struct net_params {
	const char *tap_name; /* NULL: the kernel picks one */
	bool has_mac;
	uint8_t mac[6];
	unsigned queues; /* queue pairs */
};
DEVICE_PARAMS_FIT(struct net_params);

struct net_device {
	struct virtio_instance vi; /* first: the registry's state */
	struct virtio_net net;
};

static unsigned net_queue_groups(const struct device_spec *spec)
{
	return ((const struct net_params *)spec->params)->queues;
}

static void net_destroy(void *state)
{
	struct net_device *n = state;
	virtio_pci_destroy(&n->vi.vp);
	virtio_net_destroy(&n->net);
	free(n);
}

static void net_tap_ready(void *arg)
{
	virtio_net_tap_ready(arg);
}

static void *net_create(const struct device_host *h, const struct device_spec *spec,
			const char *name, uint8_t slot, struct err *e)
{
	const struct net_params *p = (const struct net_params *)spec->params;
	struct net_device *n = calloc(1, sizeof(*n));
	if (!n) {
		err_set(e, ERR_HOST, "out of memory");
		return NULL;
	}
	n->vi.host = h;
	if (virtio_net_init(&n->net, p->tap_name, p->has_mac ? p->mac : NULL, p->queues, h->log,
			    e)) {
		err_prefix(e, "--net tap%s%s", p->tap_name ? "=" : "",
			   p->tap_name ? p->tap_name : "");
		goto fail;
	}
	/* A pair's two queues and its tap file on one loop; the control
	 * queue with the first pair. */
	struct event_loop *pair_loop[VIRTIO_NET_MAX_PAIRS];
	virtio_assign_loops(&n->vi, pair_loop, p->queues);
	for (unsigned q = 0; q < virtio_num_queues(&n->net.vdev); q++)
		n->vi.loop[q] = pair_loop[q / 2 < p->queues ? q / 2 : 0];
	for (unsigned i = 0; i < p->queues; i++)
		/* Edge-triggered: without receive buffers the tap stays readable. */
		if (event_loop_watch(pair_loop[i], n->net.pairs[i].tap_fd, true, net_tap_ready,
				     &n->net.pairs[i]) < 0) {
			err_set(e, ERR_HOST, "%s: cannot watch its tap", name);
			goto fail;
		}
	if (virtio_instance_plug(&n->vi, &n->net.vdev, name, slot, e))
		goto fail;
	const uint8_t *m = n->net.mac;
	log_info(h->log, "%s: tap %s%s, MAC %02x:%02x:%02x:%02x:%02x:%02x, %u queue pair%s", name,
		 n->net.ifname, n->net.tap_created ? " (made and brought up)" : "", m[0], m[1],
		 m[2], m[3], m[4], m[5], p->queues, p->queues == 1 ? "" : "s");
	return n;
fail:
	net_destroy(n);
	return NULL;
}

static void net_print_stats(const struct vm_device *d, FILE *out)
{
	const struct net_device *n = d->state;
	virtio_print_transport_stats(d, out);
	fprintf(out, "vmm: stats: %s %s: rx %llu tx %llu rx-dropped %llu tx-errors %llu\n", d->name,
		n->net.ifname, STAT(n->net.rx_frames), STAT(n->net.tx_frames),
		STAT(n->net.rx_dropped), STAT(n->net.tx_errors));
	if (n->net.npairs > 1)
		fprintf(out,
			"vmm: stats: %s queue pairs: %u offered, %u in use at exit, last "
			"VQ_PAIRS_SET %u; control commands ok %llu err %llu\n",
			d->name, n->net.npairs, atomic_load(&n->net.curr_pairs),
			atomic_load(&n->net.pairs_set), STAT(n->net.ctrl_ok),
			STAT(n->net.ctrl_err));
}

const struct device_kind device_kind_virtio_net = {
    .cli =
	{
	    .name = "virtio-net",
	    .option = "net",
	    .help = "virtio-net on a tap device (created if missing); queues: queue pairs (1-8, "
		    "default 1; more offer VIRTIO_NET_F_MQ with a control queue and open the tap "
		    "multi_queue)",
	    .props = OPT_TABLE(DEVICE_PROP_KEYWORD("tap", "NAME", struct net_params, tap_name),
			       DEVICE_PROP_MAC("mac", struct net_params, mac, has_mac),
			       DEVICE_PROP_UINT("queues", "N", 1, VIRTIO_NET_MAX_PAIRS, 1,
						struct net_params, queues)),
	},
    .create = net_create,
    .destroy = net_destroy,
    .queue_groups = net_queue_groups,
    .print_stats = net_print_stats,
};
