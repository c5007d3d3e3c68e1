/* Registry entry: virtio-console (devices/virtio/virtio_console.h), hvc0 on the
 * host console, `--console serial|virtio`. */
#include "vmm/host/console.h"
#include "vmm/base/err.h"
#include "vmm/base/stat.h"
#include "vmm/kinds/virtio.h"

#include "devices/virtio/virtio_console.h"

#include <stddef.h>
#include <stdlib.h>

enum console_where { CONSOLE_SERIAL, CONSOLE_VIRTIO };
static const char *const console_where_names[] = {
    [CONSOLE_SERIAL] = "serial", [CONSOLE_VIRTIO] = "virtio"};

struct console_params {
	enum console_where where;
};
DEVICE_PARAMS_FIT(struct console_params);

struct console_device {
	struct virtio_instance vi; /* first: the registry's state */
	struct virtio_console console;
};

/* serial: no device (ttyS0 keeps the console). */
static int console_check(const struct device_spec *spec, struct err *e)
{
	(void)e;
	return ((const struct console_params *)spec->params)->where == CONSOLE_SERIAL;
}

static void console_destroy(void *state)
{
	struct console_device *c = state;
	virtio_pci_destroy(&c->vi.vp);
	virtio_console_destroy(&c->console);
	free(c);
}

static size_t console_receive(void *ctx, const uint8_t *buf, size_t len)
{
	return virtio_console_receive(ctx, buf, len);
}

static void *console_create(const struct device_host *h, const struct device_spec *spec,
			    const char *name, uint8_t slot, struct err *e)
{
	(void)spec;
	struct console_device *c = calloc(1, sizeof(*c));
	struct char_sink out = {console_output, h->console};
	if (!c) {
		err_set(e, ERR_HOST, "out of memory");
		return NULL;
	}
	c->vi.host = h;
	if (virtio_console_init(&c->console, out)) {
		err_set(e, ERR_HOST, "out of memory");
		goto fail;
	}
	if (virtio_instance_plug(&c->vi, &c->console.vdev, name, slot, e))
		goto fail;
	/* stdin goes to hvc0 from now on. */
	*h->console_input = (struct console_input){console_receive, &c->console};
	return c;
fail:
	console_destroy(c);
	return NULL;
}

static void console_print_stats(const struct vm_device *d, FILE *out)
{
	const struct console_device *c = d->state;
	virtio_print_transport_stats(d, out);
	fprintf(out, "vmm: stats: %s: tx %llu rx %llu rx-dropped %llu tx-dropped %llu bytes\n",
		d->name, STAT(c->console.tx_bytes), STAT(c->console.rx_bytes),
		STAT(c->console.rx_dropped), STAT(c->console.tx_dropped));
}

const struct device_kind device_kind_virtio_console = {
    .cli =
	{
	    .name = "virtio-console",
	    .option = "console",
	    .help = "where stdin/stdout go: ttyS0 (default) or a virtio-console (hvc0; the "
		    "default command line then says console=hvc0)",
	    .single = true,
	    .guest_console = "hvc0",
	    .props = OPT_TABLE(
		DEVICE_PROP_CHOICE("where", console_where_names, struct console_params, where)),
	    .check = console_check,
	},
    .create = console_create,
    .destroy = console_destroy,
    .print_stats = console_print_stats,
};
