/* Registry entry: the interrupt-latency bench device
 * (devices/pci/pci_irqbench.h), `--device irqbench[,vectors=N][,samples=FILE]
 * [,slot=S]`. */
#include "vmm/base/err.h"
#include "vmm/base/file.h"
#include "vmm/base/log.h"
#include "vmm/base/stat.h"
#include "vmm/host/event_loop.h"
#include "vmm/kinds/host.h"
#include "vmm/kinds/registry.h"

#include "devices/pci/msix.h"
#include "devices/pci/pci.h"
#include "devices/pci/pci_irqbench.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct irqbench_params {
	unsigned vectors;
	const char *samples; /* NULL: none written */
};
DEVICE_PARAMS_FIT(struct irqbench_params);

struct irqbench_instance {
	struct pci_irqbench dev;
	const char *samples_path; /* checked at create */
	FILE *samples;		  /* made once the machine is built, written at the end */
};

static void irqbench_destroy(void *state)
{
	struct irqbench_instance *b = state;
	if (b->samples)
		fclose(b->samples);
	pci_irqbench_destroy(&b->dev);
	free(b);
}

static int irqbench_built(const struct vm_device *d, struct err *e)
{
	struct irqbench_instance *b = d->state;
	if (!b->samples_path)
		return 0;
	int fd = file_open_output("--device irqbench samples", b->samples_path, e);
	if (fd < 0)
		return -1;
	if (!(b->samples = fdopen(fd, "w"))) {
		close(fd);
		return err_set(e, ERR_HOST, "--device irqbench samples=%s: %s", b->samples_path,
			       strerror(errno));
	}
	return 0;
}

static void irqbench_run_ended(const struct vm_device *d, struct log *log)
{
	struct irqbench_instance *b = d->state;
	if (!b->samples)
		return;
	bool ok = !pci_irqbench_write_samples(&b->dev, b->samples);
	if (fclose(b->samples) != 0)
		ok = false;
	b->samples = NULL;
	if (!ok)
		log_error(log, "--device irqbench: writing %s: %s", b->samples_path,
			  strerror(errno));
}

static void irqbench_timer_ready(void *arg)
{
	pci_irqbench_timer_ready(arg);
}

static void *irqbench_create(const struct device_host *h, const struct device_spec *spec,
			     const char *name, uint8_t slot, struct err *e)
{
	const struct irqbench_params *p = (const struct irqbench_params *)spec->params;
	struct irqbench_instance *b = calloc(1, sizeof(*b));
	if (!b) {
		err_set(e, ERR_HOST, "out of memory");
		return NULL;
	}
	b->samples_path = p->samples;
	int ret = pci_irqbench_init(&b->dev, name, h->irq, p->vectors, h->irq_mode);
	if (ret) {
		err_set(e, ERR_HOST, "cannot create %s: %s", name, strerror(-ret));
		goto fail;
	}
	if (p->samples && file_check_writable("--device irqbench samples=", p->samples, e))
		goto fail;
	if (event_loop_watch(h->main_loop, b->dev.timer_fd, false, irqbench_timer_ready, &b->dev) <
	    0) {
		err_set(e, ERR_HOST, "%s: cannot watch its timer", name);
		goto fail;
	}
	ret = pci_bus_add_device(h->pci, &b->dev.pci, slot, 1);
	if (ret) {
		err_set(e, ERR_HOST, "cannot create %s: %s", name, strerror(-ret));
		goto fail;
	}
	return b;
fail:
	irqbench_destroy(b);
	return NULL;
}

static void irqbench_print_stats(const struct vm_device *d, FILE *out)
{
	struct irqbench_instance *b = d->state;
	fprintf(out,
		"vmm: stats: %s (slot %u): samples %u, fires %llu, acks %llu, stray acks %llu, "
		"dropped %llu\n",
		d->name, d->slot, b->dev.nsamples, STAT(b->dev.fires), STAT(b->dev.acks),
		STAT(b->dev.stray_acks), STAT(b->dev.dropped));
}

const struct device_kind device_kind_irqbench = {
    .cli =
	{
	    .name = "irqbench",
	    .help = "the interrupt-latency bench device (scripts/vmm-bench): raises MSI-X vector "
		    "or INTx from the I/O thread when armed, times it to the guest's port-write "
		    "ACK; samples in ns to FILE at exit",
	    .props =
		OPT_TABLE(DEVICE_PROP_UINT("vectors", "N", 1, MSIX_MAX_VECTORS, 4,
					   struct irqbench_params, vectors),
			  DEVICE_PROP_STRING("samples", "FILE", struct irqbench_params, samples),
			  DEVICE_PROP_SLOT("slot")),
	},
    .create = irqbench_create,
    .destroy = irqbench_destroy,
    .print_stats = irqbench_print_stats,
    .built = irqbench_built,
    .run_ended = irqbench_run_ended,
};
