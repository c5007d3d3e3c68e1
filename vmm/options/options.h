/*
 * The command line of ./vmm: the machine's options (struct vm_options) and
 * its devices (struct device_spec), parsed and documented from rows of the
 * one option table (vmm/options/option_table.h): the machine's own rows in
 * options.c, and each device kind's properties. The options layer knows a
 * device kind only as a struct device_cli (name, option, help, property
 * rows, check); the kinds (vmm/kinds/registry.h) embed one each and the
 * caller passes their list, so this layer never includes the kinds'.
 */
#ifndef VMM_OPTIONS_H
#define VMM_OPTIONS_H

#include "vmm/options/option_table.h"

#include "vmm/boot/boot.h"
#include "vmm/cpu/cpu_model.h"

#include "devices/pci/msix.h" /* enum irq_mode */
#include "irq/irq.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct err;
struct device_cli;

/* Appended to by --cmdline unless --no-default-cmdline: the console
 * (ttyS0, or the device that takes it: --console virtio is hvc0), reboot
 * through the i8042 (ends the VM), reboot at once on panic. */
#define VMM_DEFAULT_CMDLINE_TAIL "reboot=k panic=-1"
#define VMM_DEFAULT_CMDLINE	 "console=ttyS0 " VMM_DEFAULT_CMDLINE_TAIL

#define VMM_MAX_DEVICES	   16
#define VMM_MAX_VCPUS	   254 /* the MP table's APIC IDs, IOAPIC included */
#define VMM_DEFAULT_MIB	   256
#define DEVICE_PARAMS_MAX  64
#define VMM_MAX_IO_THREADS 16

/* A constant's value in a help string. */
#define OPTIONS_STR(x)	OPTIONS_STR_(x)
#define OPTIONS_STR_(x) #x

/* One PCI device from the command line, in command-line order. */
struct device_spec {
	const struct device_cli *kind; /* device_kind_of() gives the whole kind */
	int slot;		       /* -1: next free */
	/* The kind's own parameters, as its parse() left them. */
	_Alignas(8) unsigned char params[DEVICE_PARAMS_MAX];
};

/* A device kind as the command line knows it; struct device_kind
 * (vmm/kinds/registry.h) starts with one. */
struct device_cli {
	const char *name; /* "virtio-blk"; instances are name0, name1, ... */
	/* Its own option ("disk" for --disk), or NULL: `--device name[,...]`. */
	const char *option;
	const char *help;
	/* One instance at most, named without an index; a later option
	 * replaces an earlier one. */
	bool single;
	/* The guest's name for its console when this device is there ("hvc0"):
	 * the default command line says console=it, and stdin goes to it. */
	const char *guest_console;
	/* Its properties, rows over struct device_spec (DEVICE_PROP_*): they
	 * fill the spec's params and slot, with their defaults, and write
	 * --help's syntax and the errors. No rows: the option takes no value. */
	struct opt_table props;
	/* After parsing: 0, 1 when the value asks for no device after all
	 * (--console serial), or -1 with an error. May be NULL. */
	int (*check)(const struct device_spec *spec, struct err *e);
};

/* A property's field in the kind's parameter struct T, inside the spec. */
#define DEVICE_PARAM(T, f)                                                                         \
	.offset = offsetof(struct device_spec, params) + offsetof(T, f), .size = sizeof(((T *)0)->f)

/* One row per property: the first item (a path, "tap[=NAME]", a choice),
 * then key=value items. */
#define DEVICE_PROP_PATH(key_, meta, T, f)                                                         \
	{                                                                                          \
		.key = (key_), .type = OPT_PATH, .first = true, .metavar = (meta),                 \
		DEVICE_PARAM(T, f)                                                                 \
	}
#define DEVICE_PROP_KEYWORD(key_, meta, T, f)                                                      \
	{                                                                                          \
		.key = (key_), .type = OPT_KEYWORD, .first = true, .metavar = (meta),              \
		DEVICE_PARAM(T, f)                                                                 \
	}
#define DEVICE_PROP_CHOICE(key_, names_, T, f)                                                     \
	{                                                                                          \
		.key = (key_), .type = OPT_ENUM, .first = true, OPT_NAMES(names_),                 \
		DEVICE_PARAM(T, f)                                                                 \
	}
#define DEVICE_PROP_FLAG(key_, T, f)                                                               \
	{                                                                                          \
		.key = (key_), .type = OPT_FLAG, DEVICE_PARAM(T, f)                                \
	}
#define DEVICE_PROP_UINT(key_, meta, lo, hi, dflt_, T, f)                                          \
	{                                                                                          \
		.key = (key_), .type = OPT_UINT, .metavar = (meta), .min = (lo), .max = (hi),      \
		.dflt = (dflt_), DEVICE_PARAM(T, f)                                                \
	}
#define DEVICE_PROP_STRING(key_, meta, T, f)                                                       \
	{                                                                                          \
		.key = (key_), .type = OPT_STRING, .nonempty = true, .metavar = (meta),            \
		DEVICE_PARAM(T, f)                                                                 \
	}
/* A key=value the option must have ("--fs DIR,tag=NAME"). */
#define DEVICE_PROP_REQUIRED(key_, meta, T, f)                                                     \
	{                                                                                          \
		.key = (key_), .type = OPT_STRING, .nonempty = true, .required = true,             \
		.metavar = (meta), DEVICE_PARAM(T, f)                                              \
	}
#define DEVICE_PROP_MAC(key_, T, f, given_)                                                        \
	{                                                                                          \
		.key = (key_), .type = OPT_MAC, DEVICE_PARAM(T, f),                                \
		.given = offsetof(struct device_spec, params) + offsetof(T, given_)                \
	}
/* The PCI slot (spec->slot): 0 is the host bridge's (devices/pci/pci.h). */
#define DEVICE_PROP_SLOT(key_)                                                                     \
	{                                                                                          \
		.key = (key_), .type = OPT_UINT, .metavar = "S", .min = 1, .max = 31, .dflt = -1,  \
		OPT_FIELD(struct device_spec, slot)                                                \
	}

/* --host: where KVM comes from. auto: this box's /dev/kvm when it is
 * usable, else the emulated KVM host (scripts/vmm-host); kvm: this box's
 * only (exit 8 without it); emulated: the emulated host always. */
enum kvm_host_choice { HOST_AUTO, HOST_KVM, HOST_EMULATED };

struct vm_options {
	const char *kernel;
	const char *initrd;
	const char *cmdline_extra;
	bool no_default_cmdline;
	uint64_t memory_mib;
	unsigned cpus;
	enum cpu_pv_policy kvm_pv;
	uint32_t kvm_pv_mask; /* --kvm-pv LIST */
	double timeout_s;     /* 0 = none */
	const char *console_log;
	bool guest_decompress;
	bool boot_timer;
	int verbosity; /* 0 warnings, 1 info (-v), 2 debug (-vv) */
	struct device_spec devices[VMM_MAX_DEVICES];
	unsigned ndevices;
	enum irq_mode irq_mode;
	enum irq_msi_delivery msi_delivery;
	enum irq_intx_delivery intx_delivery;
	int io_threads; /* --io-threads; -1: one per multiqueue device, at most the CPUs */
	bool stats;
	bool seccomp;		    /* --seccomp on (default): the allow-lists */
	const char *guest_console;  /* a device's console (hvc0) has stdin/out */
	const char *dump_dtb;	    /* write the device tree here */
	bool acpi;		    /* --acpi on (default): ACPI tables besides the MP table */
	const char *dump_acpi;	    /* write each ACPI table into this directory */
	enum boot_entry boot_entry; /* --boot */
	bool dtb;		    /* hand it to the guest (SETUP_DTB) */
	enum kvm_host_choice host;  /* --host, default $VMM_HOST or auto */
	bool help, version;
};

/* Parses argv over the machine's rows and the device kinds `kinds`
 * (NULL-terminated, in --help order). 0 on success; -1 with a usage
 * error (one line naming the option). Values may point into argv. */
int options_parse(struct vm_options *o, int argc, char **argv,
		  const struct device_cli *const *kinds, struct err *e);
/* --help, from the same rows. */
void options_print_help(FILE *out, const char *argv0, const struct device_cli *const *kinds);
/* The machine's own rows, in --help order (for tests and documents). */
const struct opt_table *options_machine_rows(void);
/* The kernel command line: default + extra (caller frees). */
char *options_kernel_cmdline(const struct vm_options *o);

#endif
