#include "vmm/options/options.h"

#include "vmm/base/err.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

/* The enums' names, tied to their values. */
static const char *const irq_mode_names[] = {[IRQ_MODE_MSIX] = "msix", [IRQ_MODE_INTX] = "intx"};
static const char *const msi_names[] = {[IRQ_MSI_IRQFD] = "irqfd", [IRQ_MSI_SIGNAL] = "signal"};
static const char *const intx_names[] = {
    [IRQ_INTX_RESAMPLE] = "resample", [IRQ_INTX_LINE] = "line"};
static const char *const boot_names[] = {
    [BOOT_ENTRY_AUTO] = "auto", [BOOT_ENTRY_LINUX] = "linux", [BOOT_ENTRY_PVH] = "pvh"};
static const char *const host_names[] = {
    [HOST_AUTO] = "auto", [HOST_KVM] = "kvm", [HOST_EMULATED] = "emulated"};

static int parse_kvm_pv(const struct opt_row *r, const char *what, char *value, void *base,
			const void *ctx, struct err *e)
{
	(void)r, (void)what, (void)ctx;
	struct vm_options *o = base;
	return cpu_pv_parse(value, &o->kvm_pv, &o->kvm_pv_mask, e);
}

static int parse_device(const struct opt_row *r, const char *what, char *value, void *base,
			const void *ctx, struct err *e);

#define VM_FIELD(f) OPT_FIELD(struct vm_options, f)

/* The machine's options, in --help order; --device's row stands for
 * every device kind's (see options_print_help). */
static const struct opt_row machine_rows[] = {
    {.key = "kernel",
     .type = OPT_PATH,
     VM_FIELD(kernel),
     .metavar = "FILE",
     .help = "bzImage (boot protocol 2.12+, 64-bit) or ELF64 vmlinux"},
    {.key = "initrd",
     .type = OPT_PATH,
     VM_FIELD(initrd),
     .metavar = "FILE",
     .help = "initial ramdisk"},
    {.key = "cmdline",
     .type = OPT_STRING,
     VM_FIELD(cmdline_extra),
     .metavar = "STRING",
     .help = "appended to the default kernel command line (default: \"" VMM_DEFAULT_CMDLINE "\")"},
    {.key = "no-default-cmdline",
     .type = OPT_FLAG,
     VM_FIELD(no_default_cmdline),
     .help = "use only --cmdline"},
    /* 2 MiB: the BIOS area plus a minimal kernel; 1 TiB: sanity. */
    {.key = "memory",
     .type = OPT_UINT,
     VM_FIELD(memory_mib),
     .min = 2,
     .max = 1ULL << 20,
     .dflt = VMM_DEFAULT_MIB,
     .metavar = "MIB",
     .help = "guest RAM in MiB (default " OPTIONS_STR(VMM_DEFAULT_MIB) ")"},
    {.key = "cpus",
     .type = OPT_UINT,
     VM_FIELD(cpus),
     .min = 1,
     .max = VMM_MAX_VCPUS,
     .dflt = 1,
     .metavar = "N",
     .help = "number of vCPUs (default 1)"},
    {.key = "kvm-pv",
     .type = OPT_CUSTOM,
     .parse = parse_kvm_pv,
     .metavar = "auto|all|none|LIST",
     .help = "KVM paravirtual features the guest is offered (CPUID 0x40000001): all KVM offers; "
	     "none (no kvmclock); a list such as clocksource2,steal-time; auto (default) = all "
	     "but those that need a hypercall where the host emulates ring 0 (pv-unhalt, "
	     "pv-send-ipi, pv-sched-yield, hc-map-gpa-range), which never completes there"},
    {.key = "timeout",
     .type = OPT_DOUBLE,
     VM_FIELD(timeout_s),
     .dmin = 0,
     .dmax = 1e7,
     .metavar = "SECONDS",
     .help = "stop the guest after this long (exit code 6)"},
    {.key = "console-log",
     .type = OPT_PATH,
     VM_FIELD(console_log),
     .metavar = "FILE",
     .help = "write the serial console to FILE instead of stdout"},
    {.key = "guest-decompress",
     .type = OPT_FLAG,
     VM_FIELD(guest_decompress),
     .help = "enter the bzImage at +0x200 so the kernel decompresses itself (default: the VMM "
	     "decompresses gzip, LZ4, xz and zstd payloads and enters the ELF directly)"},
    {.key = "boot-timer",
     .type = OPT_FLAG,
     VM_FIELD(boot_timer),
     .help = "print boot markers (MMIO 0xc0000000 byte 123, port 0x80 codes 0x40-0x7f), "
	     "exec-to-first-KVM_RUN time and VMM RSS"},
    {.key = "device", .type = OPT_CUSTOM, .parse = parse_device, .metavar = "NAME[,...]"},
    {.key = "irq-mode",
     .type = OPT_ENUM,
     VM_FIELD(irq_mode),
     OPT_NAMES(irq_mode_names),
     .dflt = IRQ_MODE_MSIX,
     .help = "intx: INTx only, no MSI-X capability, BAR or vectors (default msix)"},
    {.key = "msi-delivery",
     .type = OPT_ENUM,
     VM_FIELD(msi_delivery),
     OPT_NAMES(msi_names),
     .dflt = IRQ_MSI_IRQFD,
     .help = "MSI through GSI routes + irqfd (default) or KVM_SIGNAL_MSI"},
    /* KVM_IRQ_LINE by default: see DESIGN.md, "INTx through KVM_IRQ_LINE". */
    {.key = "intx-delivery",
     .type = OPT_ENUM,
     VM_FIELD(intx_delivery),
     OPT_NAMES(intx_names),
     .dflt = IRQ_INTX_LINE,
     .help = "INTx through KVM_IRQ_LINE (default: as QEMU does for emulated devices; measured "
	     "faster) or irqfd + resamplefd (needs KVM_CAP_IRQFD_RESAMPLE)"},
    {.key = "io-threads",
     .type = OPT_UINT,
     VM_FIELD(io_threads),
     .min = 0,
     .max = VMM_MAX_IO_THREADS,
     .dflt = -1,
     .metavar = "N",
     .help = "I/O threads serving the virtio-blk and virtio-net queues (0: the main thread; "
	     "default: one per device with more than one queue, at most one per host CPU)"},
    {.key = "stats",
     .type = OPT_FLAG,
     VM_FIELD(stats),
     .help = "print interrupt counts per line, pin and vector, and per-queue counts and "
	     "vectors, at exit"},
    {.key = "seccomp",
     .type = OPT_BOOL,
     VM_FIELD(seccomp),
     .dflt = true,
     .help = "after set-up each thread runs under its own system-call allow-list (default on; "
	     "a call outside it stops the VMM, exit code 12); off for strace or gdb"},
    {.key = "boot",
     .type = OPT_ENUM,
     VM_FIELD(boot_entry),
     OPT_NAMES(boot_names),
     .dflt = BOOT_ENTRY_AUTO,
     .help = "the kernel's entry: linux = the 64-bit boot protocol; pvh = the PVH entry of an "
	     "ELF vmlinux with the XEN_ELFNOTE_PHYS32_ENTRY note (CONFIG_PVH); auto (default) = "
	     "pvh for such a vmlinux, linux otherwise (-v says which)"},
    {.key = "acpi",
     .type = OPT_BOOL,
     VM_FIELD(acpi),
     .dflt = true,
     .help = "ACPI tables (RSDP, XSDT, FADT, MADT, DSDT with the PCI _PRT) besides the MP table "
	     "(default on; off: the MP table only, for kernels that should not see ACPI)"},
    {.key = "dump-acpi",
     .type = OPT_PATH,
     VM_FIELD(dump_acpi),
     .metavar = "DIR",
     .help = "write each ACPI table to DIR/NAME.dat (rsdp, xsdt, facp, apic, dsdt), for iasl -d"},
    {.key = "dump-dtb",
     .type = OPT_PATH,
     VM_FIELD(dump_dtb),
     .metavar = "FILE",
     .help = "write the machine's flattened device tree to FILE"},
    {.key = "dtb",
     .type = OPT_FLAG,
     VM_FIELD(dtb),
     .help = "also give it to the guest (boot_params setup_data, SETUP_DTB); a kernel with "
	     "CONFIG_OF acts on it"},
    {.key = "host",
     .type = OPT_ENUM,
     VM_FIELD(host),
     OPT_NAMES(host_names),
     .dflt = HOST_AUTO,
     .env = "VMM_HOST",
     .help = "where KVM comes from: auto (default, or $VMM_HOST) = this box's /dev/kvm when it "
	     "is usable, else the same command on the emulated KVM host (QEMU TCG with nested "
	     "SVM, scripts/vmm-host; one line on stderr says so; exit code 14 when that host "
	     "fails); kvm = this box's only (exit code 8 without it); emulated = the emulated "
	     "host always"},
    {.key = "verbose",
     .short_name = 'v',
     .type = OPT_COUNT,
     VM_FIELD(verbosity),
     .help = "more diagnostics (twice for debug)"},
    {.key = "help", .short_name = 'h', .type = OPT_FLAG, VM_FIELD(help), .help = "this text"},
    {.key = "version", .type = OPT_FLAG, VM_FIELD(version), .help = "print the version"},
};
#define NMACHINE (sizeof(machine_rows) / sizeof(machine_rows[0]))
#define NOPTIONS (NMACHINE + 32) /* a bound on the device kinds too */

const struct opt_table *options_machine_rows(void)
{
	static const struct opt_table t = {machine_rows, NMACHINE};
	return &t;
}

/* ---- devices ---- */

static struct device_spec *add_device(struct vm_options *o, const struct device_cli *kind,
				      const char *what, struct err *e)
{
	if (kind->single) /* a later one replaces an earlier one */
		for (unsigned i = 0; i < o->ndevices; i++)
			if (o->devices[i].kind == kind) {
				memmove(&o->devices[i], &o->devices[i + 1],
					(o->ndevices - i - 1) * sizeof(o->devices[0]));
				o->ndevices--;
				break;
			}
	if (o->ndevices == VMM_MAX_DEVICES) {
		err_set(e, ERR_INPUT, "%s: at most %d devices", what, VMM_MAX_DEVICES);
		return NULL;
	}
	struct device_spec *spec = &o->devices[o->ndevices++];
	memset(spec, 0, sizeof(*spec));
	spec->kind = kind;
	spec->slot = -1;
	opt_defaults(kind->props.rows, kind->props.n, spec);
	return spec;
}

/* A device of `kind` from its option's value; `what` names the option
 * ("--disk", "--device testdev"). */
static int parse_device_value(struct vm_options *o, const struct device_cli *kind, const char *what,
			      char *arg, struct err *e)
{
	struct device_spec *spec = add_device(o, kind, what, e);
	if (!spec)
		return -1;
	int ret = opt_parse_props(&kind->props, what, arg, spec, e);
	if (!ret && kind->check)
		ret = kind->check(spec, e);
	if (ret)
		o->ndevices--; /* an error, or the value asked for no device */
	return ret < 0 ? -1 : 0;
}

/* --device NAME[,...]: ctx is the kinds' list. */
static int parse_device(const struct opt_row *r, const char *what, char *value, void *base,
			const void *ctx, struct err *e)
{
	(void)r;
	const struct device_cli *const *kinds = ctx;
	const char *names[NOPTIONS];
	unsigned n = 0;
	char *props = strchr(value, ',');
	if (props)
		*props++ = 0;
	for (const struct device_cli *const *k = kinds; *k && n < NOPTIONS; k++) {
		if ((*k)->option)
			continue;
		if (!strcmp((*k)->name, value)) {
			char kind_what[64];
			snprintf(kind_what, sizeof(kind_what), "%s %s", what, value);
			return parse_device_value(base, *k, kind_what, props, e);
		}
		names[n++] = (*k)->name;
	}
	return opt_not_one_of(what, value, names, n, e);
}

/* Devices that cannot both be: one PCI slot given twice. */
static int options_check_devices(const struct vm_options *o, struct err *e)
{
	for (unsigned i = 0; i < o->ndevices; i++)
		for (unsigned j = 0; j < i; j++)
			if (o->devices[i].slot >= 0 && o->devices[i].slot == o->devices[j].slot)
				return err_set(e, ERR_INPUT,
					       "%s and %s: both asked for PCI slot %d",
					       o->devices[j].kind->name, o->devices[i].kind->name,
					       o->devices[i].slot);
	return 0;
}

/* ---- parsing ---- */

/* getopt_long's table: the machine's rows, then each device kind with an
 * option of its own; `val` is 256 + the index in that order. `shorts`
 * gets the rows' short names. */
static unsigned getopt_table(struct option *t, const struct device_cli **kinds,
			     const struct device_cli *const *all, char *shorts, size_t len)
{
	unsigned n = 0;
	for (; n < NMACHINE; n++) {
		const struct opt_row *r = &machine_rows[n];
		bool arg = opt_takes_value(r);
		t[n] = (struct option){r->key, arg ? required_argument : no_argument, NULL,
				       256 + (int)n};
		if (r->short_name)
			snprintf(shorts + strlen(shorts), len - strlen(shorts), "%c%s",
				 r->short_name, arg ? ":" : "");
	}
	for (const struct device_cli *const *k = all; *k && n < NOPTIONS; k++) {
		if (!(*k)->option)
			continue;
		kinds[n - NMACHINE] = *k;
		t[n] =
		    (struct option){(*k)->option, (*k)->props.n ? required_argument : no_argument,
				    NULL, 256 + (int)n};
		n++;
	}
	t[n] = (struct option){NULL, 0, NULL, 0};
	return n;
}

/* The rows' defaults, then those taken from the environment ($VMM_HOST). */
static int options_defaults(struct vm_options *o, struct err *e)
{
	memset(o, 0, sizeof(*o));
	opt_defaults(machine_rows, NMACHINE, o);
	for (unsigned i = 0; i < NMACHINE; i++) {
		const struct opt_row *r = &machine_rows[i];
		char *v = r->env ? getenv(r->env) : NULL;
		if (v && *v && opt_parse(r, r->env, v, o, NULL, e))
			return -1;
	}
	return 0;
}

/* Option number i of getopt_table's (256 + i), with its value. */
static int apply_option(struct vm_options *o, unsigned i, const struct device_cli **kinds,
			const struct device_cli *const *all, struct err *e)
{
	char what[64];
	if (i >= NMACHINE) {
		snprintf(what, sizeof(what), "--%s", kinds[i - NMACHINE]->option);
		return parse_device_value(o, kinds[i - NMACHINE], what, optarg, e);
	}
	snprintf(what, sizeof(what), "--%s", machine_rows[i].key);
	return opt_parse(&machine_rows[i], what, optarg, o, all, e);
}

/* After the options: what follows from the devices, and what must be. */
static int options_finish(struct vm_options *o, struct err *e)
{
	if (options_check_devices(o, e))
		return -1;
	for (unsigned i = 0; i < o->ndevices; i++)
		if (o->devices[i].kind->guest_console)
			o->guest_console = o->devices[i].kind->guest_console;
	if (!o->help && !o->version && !o->kernel)
		return err_set(e, ERR_INPUT, "no kernel given: use --kernel FILE (see --help)");
	return 0;
}

int options_parse(struct vm_options *o, int argc, char **argv, const struct device_cli *const *all,
		  struct err *e)
{
	struct option table[NOPTIONS + 1];
	const struct device_cli *kinds[NOPTIONS] = {0};
	char shorts[2 * NMACHINE + 2] = ":";
	unsigned n = getopt_table(table, kinds, all, shorts, sizeof(shorts));
	if (options_defaults(o, e))
		return -1;
	opterr = 0;
	optind = 1;
	for (;;) {
		int c = getopt_long(argc, argv, shorts, table, NULL);
		if (c == -1)
			break;
		for (unsigned i = 0; i < NMACHINE; i++)
			if (c == machine_rows[i].short_name)
				c = 256 + (int)i;
		if (c == ':')
			return err_set(e, ERR_INPUT, "option %s needs a value", argv[optind - 1]);
		if (c < 256 || c >= 256 + (int)n)
			return err_set(e, ERR_INPUT, "unknown option '%s' (see --help)",
				       argv[optind - 1]);
		if (apply_option(o, (unsigned)c - 256, kinds, all, e))
			return -1;
	}
	if (optind < argc)
		return err_set(e, ERR_INPUT, "unexpected argument '%s' (see --help)", argv[optind]);
	return options_finish(o, e);
}

/* ---- --help ---- */

/* A device kind's line: "--disk PATH[,ro]", "--device testdev[,...]". */
static void print_device_help(FILE *out, const struct device_cli *k)
{
	char props[192], syntax[224];
	opt_props_syntax(&k->props, props, sizeof(props));
	if (k->option)
		opt_print_help_line(out, 0, k->option, k->props.n ? props : NULL, k->help);
	else {
		snprintf(syntax, sizeof(syntax), "%s%s", k->name, props);
		opt_print_help_line(out, 0, "device", syntax, k->help);
	}
}

/* --device's row: the --device kinds, then those with options of their own. */
static void print_devices_help(FILE *out, const struct device_cli *const *kinds)
{
	for (const struct device_cli *const *k = kinds; *k; k++)
		if (!(*k)->option)
			print_device_help(out, *k);
	for (const struct device_cli *const *k = kinds; *k; k++)
		if ((*k)->option)
			print_device_help(out, *k);
}

void options_print_help(FILE *out, const char *argv0, const struct device_cli *const *kinds)
{
	fprintf(out,
		"usage: %s --kernel FILE [options]\n"
		"Boots a Linux kernel (bzImage or ELF vmlinux) in a KVM virtual machine.\n\n",
		argv0);
	for (unsigned i = 0; i < NMACHINE; i++) {
		const struct opt_row *r = &machine_rows[i];
		char meta[96];
		if (r->parse == parse_device)
			print_devices_help(out, kinds);
		else
			opt_print_help_line(out, r->short_name, r->key,
					    opt_metavar(r, meta, sizeof(meta)), r->help);
	}
	fprintf(out, "\n"
		     "Console: stdin goes to the guest's ttyS0; on a terminal, Ctrl-A x quits and\n"
		     "Ctrl-A Ctrl-A sends Ctrl-A.\n"
		     "\n"
		     "Exit codes:\n"
		     "  0    the guest reset or shut down (a reboot ends the VM)\n"
		     "  odd  (value << 1) | 1: the guest wrote value to the debug-exit port 0xf4\n"
		     "  2    bad input or usage (missing or invalid kernel, initrd, option)\n"
		     "  4    the guest crashed (triple fault, emulation failure, kernel panic)\n"
		     "  6    --timeout expired\n"
		     "  8    host problem (no /dev/kvm with --host kvm, missing KVM capability,\n"
		     "       host I/O error, a --fs backend missing or failing at start)\n"
		     "  10   stopped by SIGINT, SIGTERM, SIGHUP or Ctrl-A x\n"
		     "  12   the VMM made a system call its seccomp filter forbids (named on\n"
		     "       stderr): a VMM bug or an attack\n"
		     "  14   the emulated KVM host failed (no QEMU, no kernel package, the host\n"
		     "       stuck or gone; named on stderr)\n"
		     "  any  the byte the guest wrote to the status port 0x510, even one of the\n"
		     "       codes above: the stop line then says \"chosen by the guest; stop:\n"
		     "       guest-status\"\n");
}

char *options_kernel_cmdline(const struct vm_options *o)
{
	char base[64] = "";
	if (!o->no_default_cmdline)
		snprintf(base, sizeof(base), "console=%s %s",
			 o->guest_console ? o->guest_console : "ttyS0", VMM_DEFAULT_CMDLINE_TAIL);
	const char *extra = o->cmdline_extra ? o->cmdline_extra : "";
	size_t n = strlen(base) + strlen(extra) + 2;
	char *s = malloc(n);
	if (!s)
		return NULL;
	snprintf(s, n, "%s%s%s", base, (*base && *extra) ? " " : "", extra);
	return s;
}
