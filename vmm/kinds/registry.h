/*
 * The device registry: one entry per PCI device kind, holding everything
 * the machine needs to know of it: its command-line option, help and
 * property rows (struct device_cli, which the options layer parses from),
 * how to create the device into the machine, destroy it and print its
 * --stats. Adding a kind is one entry in the
 * table (vmm/kinds/registry.c) and the kind's own functions; options,
 * --help, creation, teardown and --stats follow from it (as kvmtool's
 * device options or Firecracker's device manager).
 */
#ifndef VMM_DEVICE_REGISTRY_H
#define VMM_DEVICE_REGISTRY_H

#include "vmm/options/options.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct device_host;
struct err;
struct log;
struct pci_bus;

/* A device of the running machine. */
struct vm_device {
	const struct device_kind *kind;
	void *state; /* what the kind's create() returned */
	char name[24];
	uint8_t slot;
};

struct device_kind {
	/* First: what the command line knows of it (name, option, help,
	 * property rows, check; vmm/options/options.h). */
	struct device_cli cli;
	/* Builds the device into the machine at PCI slot `slot` and returns its
	 * state; NULL with an error, having undone what it did. */
	void *(*create)(const struct device_host *h, const struct device_spec *spec,
			const char *name, uint8_t slot, struct err *e);
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
	/* Another process serves its queues and maps guest RAM (vhost-user):
	 * the machine's RAM must then be a shareable memfd. */
	bool shares_ram;
};

/* A kind's parameter struct fits in a spec (file scope, next to the kind). */
#define DEVICE_PARAMS_FIT(type)                                                                    \
	_Static_assert(sizeof(type) <= DEVICE_PARAMS_MAX && _Alignof(type) <= 8,                   \
		       #type " does not fit in struct device_spec's params")

/* Every kind as the command line knows it, in --help order;
 * NULL-terminated: options_parse's and options_print_help's list. */
extern const struct device_cli *const device_kinds[];

/* The kind a spec's device_cli is the start of. */
static inline const struct device_kind *device_kind_of(const struct device_cli *cli)
{
	return (const struct device_kind *)((const char *)cli - offsetof(struct device_kind, cli));
}

/* The machine's PCI devices, in command-line order. */
struct machine_devices {
	struct vm_device devices[VMM_MAX_DEVICES];
	unsigned n;
};

/* Builds the devices of `o` onto the host's PCI bus (already set up),
 * assigning slots and names, then places their BARs. */
int devices_create(struct machine_devices *md, const struct device_host *h,
		   const struct vm_options *o, struct err *e);
void devices_destroy(struct machine_devices *md);
/* Whether a device of `o` needs guest RAM another process can map. */
bool devices_share_ram(const struct vm_options *o);
void devices_print_stats(const struct machine_devices *md, FILE *out);
int devices_built(const struct machine_devices *md, struct err *e);
void devices_run_ended(const struct machine_devices *md, struct log *log);

#endif
