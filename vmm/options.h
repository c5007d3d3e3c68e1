/* The command line of ./vmm: parsing, validation and --help. */
#ifndef VMM_OPTIONS_H
#define VMM_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct err;

/* Appended to by --cmdline unless --no-default-cmdline: serial console,
 * reboot through the i8042 (ends the VM), reboot at once on panic. */
#define VMM_DEFAULT_CMDLINE "console=ttyS0 reboot=k panic=-1"
/* With --console virtio the guest's console is hvc0. */
#define VMM_DEFAULT_CMDLINE_HVC "console=hvc0 reboot=k panic=-1"

#define VMM_MAX_DEVICES 16

enum device_kind {
	DEVICE_TESTDEV,
	DEVICE_VIRTIO_BLK,
	DEVICE_VIRTIO_RNG,
	DEVICE_VIRTIO_CONSOLE,
	DEVICE_VIRTIO_NET
};

/* One PCI device from --device, --disk or --rng, in command-line order. */
struct device_spec {
	enum device_kind kind;
	unsigned vectors; /* testdev: MSI-X table size */
	int slot;	  /* -1: next free */
	const char *path; /* virtio-blk: the file; virtio-net: the tap name */
	bool readonly, direct;
	bool has_mac;
	uint8_t mac[6];
};

enum irq_mode { IRQ_MODE_MSIX, IRQ_MODE_INTX };

struct vm_options {
	const char *kernel;
	const char *initrd;
	const char *cmdline_extra;
	bool no_default_cmdline;
	uint64_t memory_mib;
	unsigned cpus;
	double timeout_s; /* 0 = none */
	const char *console_log;
	bool guest_decompress;
	bool boot_timer;
	int verbosity; /* 0 warnings, 1 info (-v), 2 debug (-vv) */
	struct device_spec devices[VMM_MAX_DEVICES];
	unsigned ndevices;
	enum irq_mode irq_mode;
	int msi_delivery;  /* enum irq_msi_delivery */
	int intx_delivery; /* enum irq_intx_delivery; -1 = resample where KVM can */
	bool stats;
	bool virtio_console;  /* --console virtio: stdin/stdout on hvc0 */
	const char *dump_dtb; /* write the device tree here */
	bool dtb;	      /* hand it to the guest (SETUP_DTB) */
	bool help, version;
};

/* 0 on success; -1 with a usage error. */
int options_parse(struct vm_options *o, int argc, char **argv, struct err *e);
void options_print_help(FILE *out, const char *argv0);
/* The kernel command line: default + extra (caller frees). */
char *options_kernel_cmdline(const struct vm_options *o);

#endif
