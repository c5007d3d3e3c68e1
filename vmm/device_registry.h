/*
 * The device registry: one entry per PCI device kind, holding everything
 * the machine needs to know of it: its command-line option and help, how
 * to parse the option's value, create the device into the machine,
 * destroy it and print its --stats. Adding a kind is one entry in the
 * table (vmm/device_registry.c) and the kind's own functions; options,
 * --help, creation, teardown and --stats follow from it (as kvmtool's
 * device options or Firecracker's device manager).
 */
#ifndef VMM_DEVICE_REGISTRY_H
#define VMM_DEVICE_REGISTRY_H

#include "options.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct err;
struct log;
struct vm;

/* A device of the running machine. */
struct vm_device {
	const struct device_kind *kind;
	void *state; /* what the kind's create() returned */
	char name[24];
	uint8_t slot;
};

struct device_kind {
	const char *name; /* "virtio-blk"; instances are name0, name1, ... */
	/* Its own option ("disk" for --disk), or NULL: `--device name[,...]`. */
	const char *option;
	/* The value's syntax for --help ("PATH[,ro]"; for --device kinds the
	 * whole "name[,...]"), or NULL: the option takes no value. */
	const char *arg;
	const char *help;
	/* One instance at most, named without an index; a later option
	 * replaces an earlier one. */
	bool single;
	/* The guest's name for its console when this device is there ("hvc0"):
	 * the default command line says console=it, and stdin goes to it. */
	const char *guest_console;
	/* Fills spec->params (zeroed; DEVICE_PARAMS_MAX bytes) from the value
	 * (NULL for a flag; for --device kinds, what follows "name,", or NULL);
	 * may set spec->slot. 0, 1 when the value asks for no device after all
	 * (--console serial), or -1 with an error that names the option. */
	int (*parse)(struct device_spec *spec, char *arg, struct err *e);
	/* Builds the device into the machine at PCI slot `slot` and returns its
	 * state; NULL with an error, having undone what it did. */
	void *(*create)(struct vm *vm, const struct device_spec *spec, const char *name,
			uint8_t slot, struct err *e);
	void (*destroy)(void *state);
	/* How many queue groups (a virtio-blk request queue, a virtio-net queue
	 * pair) the spec asks for; NULL: one. A device with more than one gets
	 * an I/O thread by default (--io-threads). */
	unsigned (*queue_groups)(const struct device_spec *spec);
	void (*print_stats)(const struct vm_device *d, FILE *out);
	/* The machine is built, just before it runs: make the output files
	 * (a failed set-up leaves none; the filters then forbid opening
	 * files). 0, or -1 with an error. May be NULL. */
	int (*built)(const struct vm_device *d, struct err *e);
	/* The guest stopped (after a run, not after a failed set-up): write
	 * what the run produced. May be NULL. */
	void (*run_ended)(const struct vm_device *d, struct log *log);
};

/* Every kind, in --help order; NULL-terminated. */
extern const struct device_kind *const device_kinds[];
/* The --device kind called `name`, or NULL. */
const struct device_kind *device_kind_for_device_option(const char *name);

/* What the machine's PCI bus works with: its buses, memory, interrupt door,
 * log and the PCI window (vmm/layout.h). */
struct pci_bus_env vm_pci_bus_env(struct vm *vm);
/* The machine's PCI bus and its devices, in command-line order. */
int vm_create_pci(struct vm *vm, struct err *e);
void vm_destroy_pci(struct vm *vm);
void vm_print_pci_stats(struct vm *vm, FILE *out);
int vm_devices_built(struct vm *vm, struct err *e);
void vm_devices_run_ended(struct vm *vm);

/* For kinds' parsers: "slot=S" (1..PCI_SLOTS-1) into spec->slot. 1 when
 * `prop` is a slot property (parsed, or -1 with an error), 0 when not. */
int device_parse_slot(struct device_spec *spec, const char *prop, const char *opt, struct err *e);

#endif
