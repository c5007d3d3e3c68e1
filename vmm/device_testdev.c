/* Registry entry: the PCI test device (devices/pci_testdev.h),
 * `--device testdev[,vectors=N][,slot=S]`. */
#include "device_registry.h"
#include "vm.h"
#include "vmm/base/err.h"
#include "vmm/base/stat.h"

#include <stdlib.h>
#include <string.h>

struct testdev_params {
	unsigned vectors;
};

static int testdev_parse(struct device_spec *spec, char *arg, struct err *e)
{
	struct testdev_params *p = (struct testdev_params *)spec->params;
	char *save = NULL;
	uint64_t v;
	p->vectors = 8;
	for (char *tok = arg ? strtok_r(arg, ",", &save) : NULL; tok;
	     tok = strtok_r(NULL, ",", &save)) {
		int slot = device_parse_slot(spec, tok, "--device slot", e);
		if (slot < 0)
			return -1;
		if (slot)
			continue;
		if (strncmp(tok, "vectors=", 8))
			return err_set(e, ERR_INPUT, "--device testdev: unknown property '%s'",
				       tok);
		if (options_parse_u64("--device vectors", tok + 8, 1, MSIX_MAX_VECTORS, &v, e))
			return -1;
		p->vectors = (unsigned)v;
	}
	return 0;
}

static void testdev_destroy(void *state)
{
	pci_testdev_destroy(state);
	free(state);
}

static void *testdev_create(struct vm *vm, const struct device_spec *spec, const char *name,
			    uint8_t slot, struct err *e)
{
	const struct testdev_params *p = (const struct testdev_params *)spec->params;
	struct pci_testdev *t = calloc(1, sizeof(*t));
	if (!t) {
		err_set(e, ERR_HOST, "out of memory");
		return NULL;
	}
	int ret =
	    pci_testdev_init(t, name, &vm->irq, p->vectors, vm->opts->irq_mode == IRQ_MODE_INTX);
	if (!ret)
		ret = pci_bus_add_device(&vm->pci, &t->pci, slot, 1);
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
    .name = "testdev",
    .arg = "testdev[,vectors=N][,slot=S]",
    .help = "a PCI test device with MSI-X (N vectors, 1-" OPTIONS_STR(
	MSIX_MAX_VECTORS) ", default 8) and INTx; "
			  "repeatable; slots from 1 up",
    .parse = testdev_parse,
    .create = testdev_create,
    .destroy = testdev_destroy,
    .print_stats = testdev_print_stats,
};
