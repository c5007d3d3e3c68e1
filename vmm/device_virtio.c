/* Registry entries: the virtio-pci devices (devices/virtio_*.h) and what
 * the transport needs of the machine (KVM_IOEVENTFD, main-loop watches). */
#include "device_registry.h"
#include "vm.h"
#include "vmm/base/err.h"
#include "vmm/base/stat.h"

#include <errno.h>
#include <linux/kvm.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

/* A virtio device and its transport, as every virtio kind holds them, and
 * the loop (the main thread or an I/O thread) serving each queue. */
struct virtio_instance {
	struct virtio_pci vp;
	struct vm *vm;
	unsigned loop[VIRTIO_MAX_QUEUES];
	union {
		struct virtio_blk blk;
		struct virtio_net net;
		struct virtio_rng rng;
		struct virtio_console console;
	};
};

static int vm_ioeventfd(void *ctx, uint64_t gpa, unsigned len, int fd, bool assign)
{
	struct vm *vm = ((struct virtio_instance *)ctx)->vm;
	/* No datamatch: any 2-byte write to the queue's notify address
	 * (VIRTIO_F_NOTIFICATION_DATA is not offered). */
	struct kvm_ioeventfd io = {
	    .addr = gpa, .len = len, .fd = fd, .flags = assign ? 0 : KVM_IOEVENTFD_FLAG_DEASSIGN};
	return ioctl(vm->kvm.vm_fd, KVM_IOEVENTFD, &io) < 0 ? -errno : 0;
}

/* A queue's notify eventfd goes to the loop that owns the queue. */
static int vm_virtio_watch(void *ctx, unsigned q, int fd, void (*ready)(void *arg), void *arg)
{
	struct virtio_instance *v = ctx;
	return event_loop_watch(vm_loop(v->vm, q < VIRTIO_MAX_QUEUES ? v->loop[q] : 0), fd, false,
				ready, arg);
}

static struct virtio_instance *virtio_instance_new(struct vm *vm, struct err *e)
{
	struct virtio_instance *v = calloc(1, sizeof(*v));
	if (!v)
		err_set(e, ERR_HOST, "out of memory");
	else
		v->vm = vm;
	return v;
}

/* Puts the device on the bus behind a virtio-pci transport, last: a device
 * on the bus is never taken back. */
static int virtio_instance_plug(struct vm *vm, struct virtio_instance *v, struct virtio_dev *dev,
				const char *name, uint8_t slot, struct err *e)
{
	struct virtio_host host = {vm_ioeventfd, vm_virtio_watch, v, &vm->log};
	int ret = virtio_pci_init(&v->vp, dev, name, &vm->irq, &vm->mem, &host,
				  vm->opts->irq_mode == IRQ_MODE_INTX);
	if (!ret)
		ret = pci_bus_add_device(&vm->pci, &v->vp.pci, slot, 1);
	if (ret)
		return err_set(e, ERR_HOST, "cannot create %s: %s", name, strerror(-ret));
	return 0;
}

/* The device's line, then one per queue: the loop serving it, the vector
 * its interrupts went to (or INTx), notifies, requests (buffers used) and
 * interrupts. */
static void virtio_print_transport_stats(const struct vm_device *d, FILE *out)
{
	const struct virtio_instance *v = d->state;
	fprintf(out, "vmm: stats: %s (slot %u): notifies %llu, interrupts %llu, broken %llu\n",
		d->name, d->slot, STAT(v->vp.notifies), STAT(v->vp.interrupts), STAT(v->vp.broken));
	for (unsigned q = 0; q < v->vp.nq; q++) {
		const struct virtio_pci_queue *pq = &v->vp.queues[q];
		char loop[16], vec[24];
		vm_loop_name(v->loop[q], loop, sizeof(loop));
		unsigned last = atomic_load(&pq->last_vector);
		if (last == VIRTIO_PCI_LAST_INTX)
			snprintf(vec, sizeof(vec), "INTx");
		else if (last == VIRTIO_PCI_LAST_NONE)
			snprintf(vec, sizeof(vec), "none");
		else
			snprintf(vec, sizeof(vec), "MSI-X %u", last);
		fprintf(out,
			"vmm: stats: %s queue %u (%s): vector %s, notifies %llu, requests %llu, "
			"interrupts %llu\n",
			d->name, q, loop, vec, STAT(pq->notifies), STAT(pq->requests),
			STAT(pq->interrupts));
	}
}

/* The loop of each queue group (blk: a request queue; net: a queue pair):
 * I/O threads round robin when there are any, else the main thread. */
static void virtio_assign_loops(struct vm *vm, unsigned *group_loop, unsigned ngroups)
{
	for (unsigned g = 0; g < ngroups; g++)
		group_loop[g] = vm_io_loop_next(vm);
}

/* ---- virtio-blk: --disk PATH[,ro][,direct][,queues=N] ---- */

struct blk_params {
	const char *path;
	bool readonly, direct;
	unsigned queues;
};

/* The path itself may not contain a comma. */
static int blk_parse(struct device_spec *spec, char *arg, struct err *e)
{
	struct blk_params *p = (struct blk_params *)spec->params;
	char *save = NULL;
	if (!*arg || *arg == ',')
		return err_set(e, ERR_INPUT, "--disk needs a path");
	char *tok = strtok_r(arg, ",", &save);
	p->path = tok;
	p->queues = 1;
	while ((tok = strtok_r(NULL, ",", &save))) {
		uint64_t v;
		if (!strcmp(tok, "ro")) {
			p->readonly = true;
		} else if (!strcmp(tok, "direct")) {
			p->direct = true;
		} else if (!strncmp(tok, "queues=", 7)) {
			if (options_parse_u64("--disk queues", tok + 7, 1, VIRTIO_BLK_MAX_QUEUES,
					      &v, e))
				return -1;
			p->queues = (unsigned)v;
		} else {
			return err_set(e, ERR_INPUT,
				       "--disk %s: unknown flag '%s' (ro, direct, queues=N)",
				       p->path, tok);
		}
	}
	return 0;
}

static unsigned blk_queue_groups(const struct device_spec *spec)
{
	return ((const struct blk_params *)spec->params)->queues;
}

static void blk_destroy(void *state)
{
	struct virtio_instance *v = state;
	virtio_pci_destroy(&v->vp);
	virtio_blk_destroy(&v->blk);
	free(v);
}

static void blk_completions_ready(void *arg)
{
	virtio_blk_complete(arg);
}

static void blk_queue_stopping(void *arg)
{
	virtio_blk_queue_quiesce(arg);
}

static void *blk_create(struct vm *vm, const struct device_spec *spec, const char *name,
			uint8_t slot, struct err *e)
{
	const struct blk_params *p = (const struct blk_params *)spec->params;
	struct virtio_instance *v = virtio_instance_new(vm, e);
	if (!v)
		return NULL;
	if (virtio_blk_init(&v->blk, p->path, p->readonly, p->direct, p->queues, e)) {
		err_prefix(e, "--disk %s", p->path);
		goto fail;
	}
	/* A queue's notifications and its completions on one loop. */
	virtio_assign_loops(vm, v->loop, p->queues);
	for (unsigned q = 0; q < p->queues; q++)
		if (event_loop_watch(vm_loop(vm, v->loop[q]), v->blk.queues[q].completion_fd, false,
				     blk_completions_ready, &v->blk.queues[q]) < 0 ||
		    event_loop_on_stop(vm_loop(vm, v->loop[q]), blk_queue_stopping,
				       &v->blk.queues[q]) < 0) {
			err_set(e, ERR_HOST, "%s: cannot watch its completions", name);
			goto fail;
		}
	if (virtio_instance_plug(vm, v, &v->blk.vdev, name, slot, e))
		goto fail;
	return v;
fail:
	blk_destroy(v);
	return NULL;
}

static void blk_print_stats(const struct vm_device *d, FILE *out)
{
	const struct virtio_instance *v = d->state;
	const struct virtio_blk_stats *s = &v->blk.stats;
	virtio_print_transport_stats(d, out);
	fprintf(out,
		"vmm: stats: %s %s: reads %llu writes %llu flushes %llu get-id %llu ioerr %llu "
		"unsupported %llu bytes %llu bounced %llu\n",
		d->name, v->blk.path, STAT(s->reads), STAT(s->writes), STAT(s->flushes),
		STAT(s->get_ids), STAT(s->ioerrs), STAT(s->unsupported), STAT(s->bytes),
		STAT(s->bounced));
}

const struct device_kind device_kind_virtio_blk = {
    .name = "virtio-blk",
    .option = "disk",
    .arg = "PATH[,ro][,direct][,queues=N]",
    .help = "virtio-blk on a raw file or block device (io_uring); ro: read-only, direct: "
	    "O_DIRECT, queues: request queues (1-" OPTIONS_STR(
		VIRTIO_BLK_MAX_QUEUES) ", default "
				       "1; more offer VIRTIO_BLK_F_MQ); repeatable",
    .parse = blk_parse,
    .create = blk_create,
    .destroy = blk_destroy,
    .queue_groups = blk_queue_groups,
    .print_stats = blk_print_stats,
};

/* ---- virtio-net: --net tap[=NAME][,mac=XX:XX:XX:XX:XX:XX][,queues=N] ---- */

struct net_params {
	const char *tap_name; /* NULL: the kernel picks one */
	bool has_mac;
	uint8_t mac[6];
	unsigned queues; /* queue pairs */
};

static int net_parse(struct device_spec *spec, char *arg, struct err *e)
{
	struct net_params *p = (struct net_params *)spec->params;
	char *save = NULL;
	char *tok = strtok_r(arg, ",", &save);
	if (!tok || strncmp(tok, "tap", 3) || (tok[3] && tok[3] != '='))
		return err_set(e, ERR_INPUT, "--net %s: only tap[=NAME] is supported", arg);
	p->tap_name = tok[3] == '=' ? tok + 4 : NULL;
	p->queues = 1;
	while ((tok = strtok_r(NULL, ",", &save))) {
		unsigned m[6];
		char extra;
		if (!strncmp(tok, "queues=", 7)) {
			uint64_t v;
			if (options_parse_u64("--net queues", tok + 7, 1, VIRTIO_NET_MAX_PAIRS, &v,
					      e))
				return -1;
			p->queues = (unsigned)v;
			continue;
		}
		if (strncmp(tok, "mac=", 4) ||
		    sscanf(tok + 4, "%2x:%2x:%2x:%2x:%2x:%2x%c", &m[0], &m[1], &m[2], &m[3], &m[4],
			   &m[5], &extra) != 6)
			return err_set(e, ERR_INPUT,
				       "--net: bad property '%s' (mac=XX:XX:XX:XX:XX:XX, queues=N)",
				       tok);
		if (m[0] & 1)
			return err_set(e, ERR_INPUT, "--net %s: a multicast MAC cannot be a NIC's",
				       tok);
		for (int i = 0; i < 6; i++)
			p->mac[i] = (uint8_t)m[i];
		p->has_mac = true;
	}
	return 0;
}

static unsigned net_queue_groups(const struct device_spec *spec)
{
	return ((const struct net_params *)spec->params)->queues;
}

static void net_destroy(void *state)
{
	struct virtio_instance *v = state;
	virtio_pci_destroy(&v->vp);
	virtio_net_destroy(&v->net);
	free(v);
}

static void net_tap_ready(void *arg)
{
	virtio_net_tap_ready(arg);
}

static void *net_create(struct vm *vm, const struct device_spec *spec, const char *name,
			uint8_t slot, struct err *e)
{
	const struct net_params *p = (const struct net_params *)spec->params;
	struct virtio_instance *v = virtio_instance_new(vm, e);
	if (!v)
		return NULL;
	if (virtio_net_init(&v->net, p->tap_name, p->has_mac ? p->mac : NULL, p->queues, &vm->log,
			    e)) {
		err_prefix(e, "--net tap%s%s", p->tap_name ? "=" : "",
			   p->tap_name ? p->tap_name : "");
		goto fail;
	}
	/* A pair's two queues and its tap file on one loop; the control
	 * queue with the first pair. */
	unsigned pair_loop[VIRTIO_NET_MAX_PAIRS];
	virtio_assign_loops(vm, pair_loop, p->queues);
	for (unsigned q = 0; q < virtio_num_queues(&v->net.vdev); q++)
		v->loop[q] = pair_loop[q / 2 < p->queues ? q / 2 : 0];
	for (unsigned i = 0; i < p->queues; i++)
		/* Edge-triggered: without receive buffers the tap stays readable. */
		if (event_loop_watch(vm_loop(vm, pair_loop[i]), v->net.pairs[i].tap_fd, true,
				     net_tap_ready, &v->net.pairs[i]) < 0) {
			err_set(e, ERR_HOST, "%s: cannot watch its tap", name);
			goto fail;
		}
	if (virtio_instance_plug(vm, v, &v->net.vdev, name, slot, e))
		goto fail;
	const uint8_t *m = v->net.mac;
	log_info(&vm->log, "%s: tap %s%s, MAC %02x:%02x:%02x:%02x:%02x:%02x, %u queue pair%s", name,
		 v->net.ifname, v->net.tap_created ? " (made and brought up)" : "", m[0], m[1],
		 m[2], m[3], m[4], m[5], p->queues, p->queues == 1 ? "" : "s");
	return v;
fail:
	net_destroy(v);
	return NULL;
}

static void net_print_stats(const struct vm_device *d, FILE *out)
{
	const struct virtio_instance *v = d->state;
	virtio_print_transport_stats(d, out);
	fprintf(out, "vmm: stats: %s %s: rx %llu tx %llu rx-dropped %llu tx-errors %llu\n", d->name,
		v->net.ifname, STAT(v->net.rx_frames), STAT(v->net.tx_frames),
		STAT(v->net.rx_dropped), STAT(v->net.tx_errors));
	if (v->net.npairs > 1)
		fprintf(out,
			"vmm: stats: %s queue pairs: %u offered, %u in use at exit, last "
			"VQ_PAIRS_SET %u; control commands ok %llu err %llu\n",
			d->name, v->net.npairs, atomic_load(&v->net.curr_pairs),
			atomic_load(&v->net.pairs_set), STAT(v->net.ctrl_ok),
			STAT(v->net.ctrl_err));
}

const struct device_kind device_kind_virtio_net = {
    .name = "virtio-net",
    .option = "net",
    .arg = "tap[=NAME][,mac=XX:XX:XX:XX:XX:XX][,queues=N]",
    .help = "virtio-net on a tap device (created if missing); queues: queue pairs (1-8, "
	    "default 1; more offer VIRTIO_NET_F_MQ with a control queue and open the tap "
	    "multi_queue)",
    .parse = net_parse,
    .create = net_create,
    .destroy = net_destroy,
    .queue_groups = net_queue_groups,
    .print_stats = net_print_stats,
};

/* ---- virtio-rng: --rng ---- */

static int rng_parse(struct device_spec *spec, char *arg, struct err *e)
{
	(void)spec;
	(void)arg;
	(void)e;
	return 0;
}

static void rng_destroy(void *state)
{
	struct virtio_instance *v = state;
	virtio_pci_destroy(&v->vp);
	virtio_rng_destroy(&v->rng);
	free(v);
}

static void *rng_create(struct vm *vm, const struct device_spec *spec, const char *name,
			uint8_t slot, struct err *e)
{
	(void)spec;
	struct virtio_instance *v = virtio_instance_new(vm, e);
	if (!v)
		return NULL;
	if (virtio_rng_init(&v->rng, NULL)) {
		err_set(e, ERR_HOST, "out of memory");
		goto fail;
	}
	if (virtio_instance_plug(vm, v, &v->rng.vdev, name, slot, e))
		goto fail;
	return v;
fail:
	rng_destroy(v);
	return NULL;
}

static void rng_print_stats(const struct vm_device *d, FILE *out)
{
	const struct virtio_instance *v = d->state;
	virtio_print_transport_stats(d, out);
	fprintf(out, "vmm: stats: %s: bytes %llu\n", d->name, STAT(v->rng.bytes));
}

const struct device_kind device_kind_virtio_rng = {
    .name = "virtio-rng",
    .option = "rng",
    .help = "virtio-rng, fed from getrandom()",
    .parse = rng_parse,
    .create = rng_create,
    .destroy = rng_destroy,
    .print_stats = rng_print_stats,
};

/* ---- virtio-console: --console virtio ---- */

/* "serial": no device (1); "virtio": a virtio-console. */
static int console_parse(struct device_spec *spec, char *arg, struct err *e)
{
	(void)spec;
	if (!strcmp(arg, "serial"))
		return 1;
	if (!strcmp(arg, "virtio"))
		return 0;
	return err_set(e, ERR_INPUT, "--console %s: use serial or virtio", arg);
}

static void console_destroy(void *state)
{
	struct virtio_instance *v = state;
	virtio_pci_destroy(&v->vp);
	virtio_console_destroy(&v->console);
	free(v);
}

static size_t console_receive(void *ctx, const uint8_t *buf, size_t len)
{
	return virtio_console_receive(ctx, buf, len);
}

static void *console_create(struct vm *vm, const struct device_spec *spec, const char *name,
			    uint8_t slot, struct err *e)
{
	(void)spec;
	struct virtio_instance *v = virtio_instance_new(vm, e);
	struct char_sink out = {console_output, &vm->console};
	if (!v)
		return NULL;
	if (virtio_console_init(&v->console, out)) {
		err_set(e, ERR_HOST, "out of memory");
		goto fail;
	}
	if (virtio_instance_plug(vm, v, &v->console.vdev, name, slot, e))
		goto fail;
	/* stdin goes to hvc0 from now on. */
	vm->console_input = (struct console_input){console_receive, &v->console};
	return v;
fail:
	console_destroy(v);
	return NULL;
}

static void console_print_stats(const struct vm_device *d, FILE *out)
{
	const struct virtio_instance *v = d->state;
	virtio_print_transport_stats(d, out);
	fprintf(out, "vmm: stats: %s: tx %llu rx %llu rx-dropped %llu bytes\n", d->name,
		STAT(v->console.tx_bytes), STAT(v->console.rx_bytes), STAT(v->console.rx_dropped));
}

const struct device_kind device_kind_virtio_console = {
    .name = "virtio-console",
    .option = "console",
    .arg = "serial|virtio",
    .help = "where stdin/stdout go: ttyS0 (default) or a virtio-console (hvc0; the default "
	    "command line then says console=hvc0)",
    .single = true,
    .guest_console = "hvc0",
    .parse = console_parse,
    .create = console_create,
    .destroy = console_destroy,
    .print_stats = console_print_stats,
};
