#include "device_registry.h"

#include "exit_code.h"
#include "vm.h"
#include "vmm/base/err.h"
#include "vmm/layout.h"

#include <stdlib.h>
#include <string.h>

/* The kinds, in --help order; each is defined in its own vmm/device_*.c. */
extern const struct device_kind device_kind_virtio_blk, device_kind_virtio_net,
    device_kind_virtio_rng, device_kind_virtio_console, device_kind_testdev, device_kind_irqbench;

const struct device_kind *const device_kinds[] = {
    &device_kind_virtio_blk,	 /* --disk */
    &device_kind_virtio_net,	 /* --net */
    &device_kind_virtio_rng,	 /* --rng */
    &device_kind_virtio_console, /* --console virtio */
    &device_kind_testdev,	 /* --device testdev */
    &device_kind_irqbench,	 /* --device irqbench */
    NULL,
};

const struct device_kind *device_kind_for_device_option(const char *name)
{
	for (const struct device_kind *const *k = device_kinds; *k; k++)
		if (!(*k)->option && !strcmp((*k)->name, name))
			return *k;
	return NULL;
}

int device_parse_slot(struct device_spec *spec, const char *prop, const char *opt, struct err *e)
{
	uint64_t v;
	if (strncmp(prop, "slot=", 5))
		return 0;
	/* Slot 0 is the host bridge's. */
	if (options_parse_u64(opt, prop + 5, 1, PCI_SLOTS - 1, &v, e))
		return -1;
	spec->slot = (int)v;
	return 1;
}

static int vm_slot_for(struct vm *vm, const struct device_spec *d, unsigned i, uint8_t *next,
		       struct err *e)
{
	int slot = d->slot;
	if (slot < 0) {
		while (*next < PCI_SLOTS && vm->pci.slots[*next])
			(*next)++;
		slot = *next;
	}
	if (slot >= PCI_SLOTS || vm->pci.slots[slot])
		return err_set(e, ERR_INPUT, "device %u: PCI slot %d is %s", i + 1, slot,
			       slot >= PCI_SLOTS ? "out of range" : "already taken");
	return slot;
}

/* name0, name1, ... per kind, in command-line order; a single one is name. */
static void vm_device_name(struct vm *vm, const struct device_kind *kind, char *out, size_t len)
{
	unsigned index = 0;
	for (unsigned i = 0; i < vm->ndevices; i++)
		index += vm->devices[i].kind == kind;
	if (kind->single)
		snprintf(out, len, "%s", kind->name);
	else
		snprintf(out, len, "%s%u", kind->name, index);
}

struct pci_bus_env vm_pci_bus_env(struct vm *vm)
{
	return (struct pci_bus_env){
	    .pio = &vm->pio,
	    .mmio = &vm->mmio,
	    .mem = &vm->mem,
	    .irq = &vm->irq,
	    .log = &vm->log,
	    .window = LAYOUT_PCI_WINDOW,
	};
}

int vm_create_pci(struct vm *vm, struct err *e)
{
	const struct vm_options *o = vm->opts;
	const struct pci_bus_env env = vm_pci_bus_env(vm);
	int ret = pci_bus_init(&vm->pci, &env);
	if (ret)
		return err_set(e, ERR_HOST, "cannot set up the PCI bus: %s", strerror(-ret));
	uint8_t next_slot = 1;
	for (unsigned i = 0; i < o->ndevices; i++) {
		const struct device_spec *spec = &o->devices[i];
		struct vm_device *d = &vm->devices[vm->ndevices];
		int slot = vm_slot_for(vm, spec, i, &next_slot, e);
		if (slot < 0)
			return -1;
		d->kind = spec->kind;
		d->slot = (uint8_t)slot;
		vm_device_name(vm, spec->kind, d->name, sizeof(d->name));
		d->state = spec->kind->create(vm, spec, d->name, d->slot, e);
		if (!d->state)
			return -1;
		vm->ndevices++;
	}
	if (pci_bus_assign_resources(&vm->pci))
		return err_set(e, ERR_INPUT, "the devices' BARs do not fit in the PCI window");
	return 0;
}

void vm_destroy_pci(struct vm *vm)
{
	for (unsigned i = 0; i < vm->ndevices; i++)
		vm->devices[i].kind->destroy(vm->devices[i].state);
	vm->ndevices = 0;
}

void vm_print_pci_stats(struct vm *vm, FILE *out)
{
	for (unsigned i = 0; i < vm->ndevices; i++)
		vm->devices[i].kind->print_stats(&vm->devices[i], out);
}

int vm_devices_built(struct vm *vm, struct err *e)
{
	for (unsigned i = 0; i < vm->ndevices; i++)
		if (vm->devices[i].kind->built && vm->devices[i].kind->built(&vm->devices[i], e))
			return -1;
	return 0;
}

void vm_devices_run_ended(struct vm *vm)
{
	for (unsigned i = 0; i < vm->ndevices; i++)
		if (vm->devices[i].kind->run_ended)
			vm->devices[i].kind->run_ended(&vm->devices[i], &vm->log);
}
