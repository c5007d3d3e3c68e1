#include "vmm/kinds/registry.h"

#include "vmm/base/err.h"
#include "vmm/kinds/host.h"

#include "devices/pci/pci.h"

#include <stdlib.h>
#include <string.h>

/* The kinds, in --help order; each is defined in its own file, vmm/kinds/KIND.c. */
extern const struct device_kind device_kind_virtio_blk, device_kind_virtio_net,
    device_kind_virtio_rng, device_kind_virtio_console, device_kind_virtio_fs, device_kind_testdev,
    device_kind_irqbench;

const struct device_cli *const device_kinds[] = {
    &device_kind_virtio_blk.cli,     /* --disk */
    &device_kind_virtio_net.cli,     /* --net */
    &device_kind_virtio_rng.cli,     /* --rng */
    &device_kind_virtio_console.cli, /* --console virtio */
    &device_kind_virtio_fs.cli,	     /* --fs */
    &device_kind_testdev.cli,	     /* --device testdev */
    &device_kind_irqbench.cli,	     /* --device irqbench */
    NULL,
};

static int slot_for(const struct pci_bus *pci, const struct device_spec *d, unsigned i,
		    uint8_t *next, struct err *e)
{
	int slot = d->slot;
	if (slot < 0) {
		while (*next < PCI_SLOTS && pci->slots[*next])
			(*next)++;
		slot = *next;
	}
	if (slot >= PCI_SLOTS || pci->slots[slot])
		return err_set(e, ERR_INPUT, "device %u: PCI slot %d is %s", i + 1, slot,
			       slot >= PCI_SLOTS ? "out of range" : "already taken");
	return slot;
}

/* name0, name1, ... per kind, in command-line order; a single one is name. */
static void device_name(const struct machine_devices *md, const struct device_kind *kind, char *out,
			size_t len)
{
	unsigned index = 0;
	for (unsigned i = 0; i < md->n; i++)
		index += md->devices[i].kind == kind;
	if (kind->cli.single)
		snprintf(out, len, "%s", kind->cli.name);
	else
		snprintf(out, len, "%s%u", kind->cli.name, index);
}

int devices_create(struct machine_devices *md, const struct device_host *h,
		   const struct vm_options *o, struct err *e)
{
	uint8_t next_slot = 1;
	for (unsigned i = 0; i < o->ndevices; i++) {
		const struct device_spec *spec = &o->devices[i];
		struct vm_device *d = &md->devices[md->n];
		int slot = slot_for(h->pci, spec, i, &next_slot, e);
		if (slot < 0)
			return -1;
		d->kind = device_kind_of(spec->kind);
		d->slot = (uint8_t)slot;
		device_name(md, d->kind, d->name, sizeof(d->name));
		d->state = d->kind->create(h, spec, d->name, d->slot, e);
		if (!d->state)
			return -1;
		md->n++;
	}
	if (pci_bus_assign_resources(h->pci))
		return err_set(e, ERR_INPUT, "the devices' BARs do not fit in the PCI window");
	return 0;
}

bool devices_share_ram(const struct vm_options *o)
{
	for (unsigned i = 0; i < o->ndevices; i++)
		if (device_kind_of(o->devices[i].kind)->shares_ram)
			return true;
	return false;
}

void devices_destroy(struct machine_devices *md)
{
	for (unsigned i = 0; i < md->n; i++)
		md->devices[i].kind->destroy(md->devices[i].state);
	md->n = 0;
}

void devices_print_stats(const struct machine_devices *md, FILE *out)
{
	for (unsigned i = 0; i < md->n; i++)
		md->devices[i].kind->print_stats(&md->devices[i], out);
}

int devices_built(const struct machine_devices *md, struct err *e)
{
	for (unsigned i = 0; i < md->n; i++)
		if (md->devices[i].kind->built && md->devices[i].kind->built(&md->devices[i], e))
			return -1;
	return 0;
}

void devices_run_ended(const struct machine_devices *md, struct log *log)
{
	for (unsigned i = 0; i < md->n; i++)
		if (md->devices[i].kind->run_ended)
			md->devices[i].kind->run_ended(&md->devices[i], log);
}
