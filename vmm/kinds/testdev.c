/* Registry entry: the PCI test device (devices/pci/pci_testdev.h),
 * `--device testdev[,vectors=N][,slot=S]`. */
#include "vmm/base/err.h"
#include "vmm/base/stat.h"
#include "vmm/kinds/host.h"
#include "vmm/kinds/registry.h"

#include "devices/pci/msix.h"
#include "devices/pci/pci.h"
#include "devices/pci/pci_testdev.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct testdev_params {
	unsigned vectors;
};
DEVICE_PARAMS_FIT(struct testdev_params);

static void testdev_destroy(void *state)
{
	pci_testdev_destroy(state);
	free(state);
}

static void *testdev_create(const struct device_host *h, const struct device_spec *spec,
			    const char *name, uint8_t slot, struct err *e)
{
	const struct testdev_params *p = (const struct testdev_params *)spec->params;
	struct pci_testdev *t = calloc(1, sizeof(*t));
	if (!t) {
		err_set(e, ERR_HOST, "out of memory");
		return NULL;
	}
	int ret = pci_testdev_init(t, name, h->irq, p->vectors, h->irq_mode);
	if (!ret)
		ret = pci_bus_add_device(h->pci, &t->pci, slot, 1);
	if (ret) {
		err_set(e, ERR_HOST, "cannot create %s: %s", name, strerror(-ret));
		testdev_destroy(t);
		return NULL;
	}
	return t;
}

static void testdev_print_stats(const struct vm_device *d, FILE *out)
{
	struct pci_testdev *t = d->state;
	fprintf(out, "vmm: stats: %s (slot %u): doorbells %llu, beyond the table %llu\n", d->name,
		d->slot, STAT(t->doorbells), STAT(t->bad_vectors));
}

const struct device_kind device_kind_testdev = {
    .cli =
	{
	    .name = "testdev",
	    .help = "a PCI test device with MSI-X (N vectors, 1-" OPTIONS_STR(
		MSIX_MAX_VECTORS) ", default 8) and INTx; repeatable; slots from 1 up",
	    .props = OPT_TABLE(DEVICE_PROP_UINT("vectors", "N", 1, MSIX_MAX_VECTORS, 8,
						struct testdev_params, vectors),
			       DEVICE_PROP_SLOT("slot")),
	},
    .create = testdev_create,
    .destroy = testdev_destroy,
    .print_stats = testdev_print_stats,
};
