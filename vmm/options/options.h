/*
 * The command line of ./vmm: parsing, validation and --help, from one table
 * (vmm/options/options.c): each option is one entry with its name, argument, help
 * text and handler. Device options (--disk, --net, --rng, --device NAME)
 * come from the device registry (vmm/kinds/registry.h), one entry per
 * device kind.
 */
#ifndef VMM_OPTIONS_H
#define VMM_OPTIONS_H

#include "devices/pci/msix.h" /* enum irq_mode */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct err;
struct device_kind;

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
	const struct device_kind *kind;
	int slot; /* -1: next free */
	/* The kind's own parameters, as its parse() left them. */
	_Alignas(8) unsigned char params[DEVICE_PARAMS_MAX];
};

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
	int kvm_pv;	      /* enum cpu_pv_policy (vmm/cpu/cpu_model.h) */
	uint32_t kvm_pv_mask; /* --kvm-pv LIST */
	double timeout_s;     /* 0 = none */
	const char *console_log;
	bool guest_decompress;
	bool boot_timer;
	int verbosity; /* 0 warnings, 1 info (-v), 2 debug (-vv) */
	struct device_spec devices[VMM_MAX_DEVICES];
	unsigned ndevices;
	enum irq_mode irq_mode;
	int msi_delivery;  /* enum irq_msi_delivery */
	int intx_delivery; /* enum irq_intx_delivery; -1 = resample where KVM can */
	int io_threads;	   /* --io-threads; -1: one per multiqueue device, at most the CPUs */
	bool stats;
	bool seccomp_off;	   /* --seccomp off */
	const char *guest_console; /* a device's console (hvc0) has stdin/out */
	const char *dump_dtb;	   /* write the device tree here */
	bool acpi;		   /* --acpi on (default): ACPI tables besides the MP table */
	const char *dump_acpi;	   /* write each ACPI table into this directory */
	int boot_entry;		   /* enum boot_entry (vmm/boot/boot.h): --boot */
	bool dtb;		   /* hand it to the guest (SETUP_DTB) */
	enum kvm_host_choice host; /* --host, default $VMM_HOST or auto */
	bool help, version;
};

/* 0 on success; -1 with a usage error. Values may point into argv. */
int options_parse(struct vm_options *o, int argc, char **argv, struct err *e);
void options_print_help(FILE *out, const char *argv0);
/* The kernel command line: default + extra (caller frees). */
char *options_kernel_cmdline(const struct vm_options *o);

/* For device kinds' parsers: a whole number in [min, max], named `what`
 * in the error ("--device vectors"). 0 or -1 with a usage error. */
int options_parse_u64(const char *what, const char *s, uint64_t min, uint64_t max, uint64_t *out,
		      struct err *e);
/* Appends a device of `kind`; `opt` names the option for the error. */
struct device_spec *options_add_device(struct vm_options *o, const struct device_kind *kind,
				       const char *opt, struct err *e);

#endif
