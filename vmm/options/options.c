#include "vmm/options/options.h"

#include "vmm/base/err.h"
#include "vmm/cpu/cpu_model.h"
#include "vmm/kinds/registry.h"

#include "irq/irq.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One option: name, argument (NULL: a flag), help, and what it does. */
struct option_def {
	const char *name;
	char short_name; /* 0: none */
	const char *arg;
	const char *help;
	int (*apply)(struct vm_options *o, char *arg, struct err *e);
};

int options_parse_u64(const char *what, const char *s, uint64_t min, uint64_t max, uint64_t *out,
		      struct err *e)
{
	char *end;
	errno = 0;
	if (!*s || *s == '-')
		goto bad;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end)
		goto bad;
	if (v < min || v > max)
		return err_set(e, ERR_INPUT, "%s %s: must be between %llu and %llu", what, s,
			       (unsigned long long)min, (unsigned long long)max);
	*out = v;
	return 0;
bad:
	return err_set(e, ERR_INPUT, "%s: '%s' is not a whole number", what, s);
}

/* Picks `arg` from a list of words; the index, or -1 with an error. */
static int pick(const char *opt, const char *arg, const char *const *words, struct err *e)
{
	char list[160] = "";
	size_t len = 0;
	int n = 0;
	for (n = 0; words[n]; n++)
		if (!strcmp(arg, words[n]))
			return n;
	for (int i = 0; i < n && len < sizeof(list); i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s",
					i == 0	     ? ""
					: i == n - 1 ? " or "
						     : ", ",
					words[i]);
	return err_set(e, ERR_INPUT, "%s %s: use %s", opt, arg, list);
}

static int opt_kernel(struct vm_options *o, char *arg, struct err *e)
{
	(void)e;
	o->kernel = arg;
	return 0;
}

static int opt_initrd(struct vm_options *o, char *arg, struct err *e)
{
	(void)e;
	o->initrd = arg;
	return 0;
}

static int opt_cmdline(struct vm_options *o, char *arg, struct err *e)
{
	(void)e;
	o->cmdline_extra = arg;
	return 0;
}

static int opt_no_default_cmdline(struct vm_options *o, char *arg, struct err *e)
{
	(void)arg;
	(void)e;
	o->no_default_cmdline = true;
	return 0;
}

static int opt_memory(struct vm_options *o, char *arg, struct err *e)
{
	/* 2 MiB: the BIOS area plus a minimal kernel; 1 TiB: sanity. */
	return options_parse_u64("--memory", arg, 2, 1ULL << 20, &o->memory_mib, e);
}

static int opt_cpus(struct vm_options *o, char *arg, struct err *e)
{
	uint64_t v;
	if (options_parse_u64("--cpus", arg, 1, VMM_MAX_VCPUS, &v, e))
		return -1;
	o->cpus = (unsigned)v;
	return 0;
}

static int opt_timeout(struct vm_options *o, char *arg, struct err *e)
{
	char *end;
	errno = 0;
	o->timeout_s = strtod(arg, &end);
	if (errno || *end || !*arg || !isfinite(o->timeout_s) || o->timeout_s <= 0 ||
	    o->timeout_s > 1e7)
		return err_set(e, ERR_INPUT, "--timeout: '%s' is not a positive number of seconds",
			       arg);
	return 0;
}

static int opt_console_log(struct vm_options *o, char *arg, struct err *e)
{
	(void)e;
	o->console_log = arg;
	return 0;
}

static int opt_guest_decompress(struct vm_options *o, char *arg, struct err *e)
{
	(void)arg;
	(void)e;
	o->guest_decompress = true;
	return 0;
}

static int opt_boot_timer(struct vm_options *o, char *arg, struct err *e)
{
	(void)arg;
	(void)e;
	o->boot_timer = true;
	return 0;
}

static int opt_device(struct vm_options *o, char *arg, struct err *e)
{
	char *props = strchr(arg, ',');
	if (props)
		*props++ = 0;
	const struct device_kind *kind = device_kind_for_device_option(arg);
	if (!kind) {
		char known[128] = "";
		for (const struct device_kind *const *k = device_kinds; *k; k++)
			if (!(*k)->option)
				snprintf(known + strlen(known), sizeof(known) - strlen(known),
					 "%s%s", known[0] ? ", " : "", (*k)->name);
		return err_set(e, ERR_INPUT, "--device: unknown device '%s' (known: %s)", arg,
			       known);
	}
	struct device_spec *spec = options_add_device(o, kind, "--device", e);
	if (!spec)
		return -1;
	int ret = device_kind_parse(kind, spec, props, e);
	if (ret)
		o->ndevices--;
	return ret < 0 ? -1 : 0;
}

static int opt_irq_mode(struct vm_options *o, char *arg, struct err *e)
{
	static const char *const modes[] = {"msix", "intx", NULL}; /* enum irq_mode */
	int m = pick("--irq-mode", arg, modes, e);
	if (m < 0)
		return -1;
	o->irq_mode = (enum irq_mode)m;
	return 0;
}

static int opt_msi_delivery(struct vm_options *o, char *arg, struct err *e)
{
	static const char *const modes[] = {"irqfd", "signal", NULL}; /* enum irq_msi_delivery */
	int m = pick("--msi-delivery", arg, modes, e);
	if (m < 0)
		return -1;
	o->msi_delivery = m;
	return 0;
}

static int opt_intx_delivery(struct vm_options *o, char *arg, struct err *e)
{
	static const char *const modes[] = {"resample", "line", NULL}; /* irq_intx_delivery */
	int m = pick("--intx-delivery", arg, modes, e);
	if (m < 0)
		return -1;
	o->intx_delivery = m;
	return 0;
}

static int opt_seccomp(struct vm_options *o, char *arg, struct err *e)
{
	static const char *const modes[] = {"on", "off", NULL};
	int m = pick("--seccomp", arg, modes, e);
	if (m < 0)
		return -1;
	o->seccomp_off = m == 1;
	return 0;
}

static int opt_io_threads(struct vm_options *o, char *arg, struct err *e)
{
	uint64_t v;
	if (options_parse_u64("--io-threads", arg, 0, VMM_MAX_IO_THREADS, &v, e))
		return -1;
	o->io_threads = (int)v;
	return 0;
}

static int opt_stats(struct vm_options *o, char *arg, struct err *e)
{
	(void)arg;
	(void)e;
	o->stats = true;
	return 0;
}

static int opt_dump_dtb(struct vm_options *o, char *arg, struct err *e)
{
	(void)e;
	o->dump_dtb = arg;
	return 0;
}

static int opt_acpi(struct vm_options *o, char *arg, struct err *e)
{
	if (!strcmp(arg, "on") || !strcmp(arg, "off")) {
		o->acpi = !strcmp(arg, "on");
		return 0;
	}
	return err_set(e, ERR_INPUT, "--acpi %s: use on or off", arg);
}

static int opt_dump_acpi(struct vm_options *o, char *arg, struct err *e)
{
	if (!*arg)
		return err_set(e, ERR_INPUT, "--dump-acpi: empty path");
	o->dump_acpi = arg;
	return 0;
}

static int opt_boot(struct vm_options *o, char *arg, struct err *e)
{
	static const char *const names[] = {"auto", "linux", "pvh", NULL};
	int m = pick("--boot", arg, names, e);
	if (m < 0)
		return -1;
	o->boot_entry = m; /* enum boot_entry's order */
	return 0;
}

static const char *const host_names[] = {"auto", "kvm", "emulated", NULL};

static int opt_host(struct vm_options *o, char *arg, struct err *e)
{
	int m = pick("--host", arg, host_names, e);
	if (m < 0)
		return -1;
	o->host = (enum kvm_host_choice)m; /* host_names is the enum's order */
	return 0;
}

static int opt_dtb(struct vm_options *o, char *arg, struct err *e)
{
	(void)arg;
	(void)e;
	o->dtb = true;
	return 0;
}

static int opt_verbose(struct vm_options *o, char *arg, struct err *e)
{
	(void)arg;
	(void)e;
	o->verbosity++;
	return 0;
}

static int opt_help(struct vm_options *o, char *arg, struct err *e)
{
	(void)arg;
	(void)e;
	o->help = true;
	return 0;
}

static int opt_kvm_pv(struct vm_options *o, char *arg, struct err *e)
{
	enum cpu_pv_policy pv;
	if (cpu_pv_parse(arg, &pv, &o->kvm_pv_mask, e))
		return -1;
	o->kvm_pv = pv;
	return 0;
}

static int opt_version(struct vm_options *o, char *arg, struct err *e)
{
	(void)arg;
	(void)e;
	o->version = true;
	return 0;
}

/* The machine's options, in --help order. Device options follow from the
 * registry, after "--device" (see options_for_each below). */
static const struct option_def machine_options[] = {
    {"kernel", 0, "FILE", "bzImage (boot protocol 2.12+, 64-bit) or ELF64 vmlinux", opt_kernel},
    {"initrd", 0, "FILE", "initial ramdisk", opt_initrd},
    {"cmdline", 0, "STRING",
     "appended to the default kernel command line (default: \"" VMM_DEFAULT_CMDLINE "\")",
     opt_cmdline},
    {"no-default-cmdline", 0, NULL, "use only --cmdline", opt_no_default_cmdline},
    {"memory", 0, "MIB", "guest RAM in MiB (default " OPTIONS_STR(VMM_DEFAULT_MIB) ")", opt_memory},
    {"cpus", 0, "N", "number of vCPUs (default 1)", opt_cpus},
    {"kvm-pv", 0, "auto|all|none|LIST",
     "KVM paravirtual features the guest is offered (CPUID 0x40000001): all KVM offers; "
     "none (no kvmclock); a list such as clocksource2,steal-time; auto (default) = all but "
     "those that need a hypercall where the host emulates ring 0 (pv-unhalt, pv-send-ipi, "
     "pv-sched-yield, hc-map-gpa-range), which never completes there",
     opt_kvm_pv},
    {"timeout", 0, "SECONDS", "stop the guest after this long (exit code 6)", opt_timeout},
    {"console-log", 0, "FILE", "write the serial console to FILE instead of stdout",
     opt_console_log},
    {"guest-decompress", 0, NULL,
     "enter the bzImage at +0x200 so the kernel decompresses itself (default: the VMM "
     "decompresses gzip, LZ4, xz and zstd payloads and enters the ELF directly)",
     opt_guest_decompress},
    {"boot-timer", 0, NULL,
     "print boot markers (MMIO 0xc0000000 byte 123, port 0x80 codes 0x40-0x7f), "
     "exec-to-first-KVM_RUN time and VMM RSS",
     opt_boot_timer},
    {"device", 0, "NAME[,...]", NULL, opt_device}, /* help: one entry per --device kind */
    {"irq-mode", 0, "msix|intx", "intx hides every MSI-X capability (default msix)", opt_irq_mode},
    {"msi-delivery", 0, "irqfd|signal",
     "MSI through GSI routes + irqfd (default) or KVM_SIGNAL_MSI", opt_msi_delivery},
    {"intx-delivery", 0, "resample|line",
     "INTx through KVM_IRQ_LINE (default: as QEMU does for emulated devices; measured "
     "faster) or irqfd + resamplefd (needs KVM_CAP_IRQFD_RESAMPLE)",
     opt_intx_delivery},
    {"io-threads", 0, "N",
     "I/O threads serving the virtio-blk and virtio-net queues (0: the main thread; default: "
     "one per device with more than one queue, at most one per host CPU)",
     opt_io_threads},
    {"stats", 0, NULL,
     "print interrupt counts per line, pin and vector, and per-queue counts and vectors, at "
     "exit",
     opt_stats},
    {"seccomp", 0, "on|off",
     "after set-up each thread runs under its own system-call allow-list (default on; a "
     "call outside it stops the VMM, exit code 12); off for strace or gdb",
     opt_seccomp},
    {"boot", 0, "auto|linux|pvh",
     "the kernel's entry: linux = the 64-bit boot protocol; pvh = the PVH entry of an ELF "
     "vmlinux with the XEN_ELFNOTE_PHYS32_ENTRY note (CONFIG_PVH); auto (default) = pvh for "
     "such a vmlinux, linux otherwise (-v says which)",
     opt_boot},
    {"acpi", 0, "on|off",
     "ACPI tables (RSDP, XSDT, FADT, MADT, DSDT with the PCI _PRT) besides the MP table "
     "(default on; off: the MP table only, for kernels that should not see ACPI)",
     opt_acpi},
    {"dump-acpi", 0, "DIR",
     "write each ACPI table to DIR/NAME.dat (rsdp, xsdt, facp, apic, dsdt), for iasl -d",
     opt_dump_acpi},
    {"dump-dtb", 0, "FILE", "write the machine's flattened device tree to FILE", opt_dump_dtb},
    {"dtb", 0, NULL,
     "also give it to the guest (boot_params setup_data, SETUP_DTB); a kernel with CONFIG_OF "
     "acts on it",
     opt_dtb},
    {"host", 0, "auto|kvm|emulated",
     "where KVM comes from: auto (default, or $VMM_HOST) = this box's /dev/kvm when it is "
     "usable, else the same command on the emulated KVM host (QEMU TCG with nested SVM, "
     "scripts/vmm-host; one line on stderr says so; exit code 14 when that host fails); "
     "kvm = this box's only (exit code 8 without it); emulated = the emulated host always",
     opt_host},
    {"verbose", 'v', NULL, "more diagnostics (twice for debug)", opt_verbose},
    {"help", 'h', NULL, "this text", opt_help},
    {"version", 0, NULL, "print the version", opt_version},
};
#define NMACHINE (sizeof(machine_options) / sizeof(machine_options[0]))
#define NOPTIONS (NMACHINE + VMM_MAX_DEVICES) /* a bound on the device kinds too */

struct device_spec *options_add_device(struct vm_options *o, const struct device_kind *kind,
				       const char *opt, struct err *e)
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
		err_set(e, ERR_INPUT, "%s: at most %d devices", opt, VMM_MAX_DEVICES);
		return NULL;
	}
	struct device_spec *spec = &o->devices[o->ndevices++];
	memset(spec, 0, sizeof(*spec));
	spec->kind = kind;
	spec->slot = -1;
	return spec;
}

/* A device kind's own option (--disk, --rng, ...). */
static int apply_device_option(struct vm_options *o, const struct device_kind *kind, char *arg,
			       struct err *e)
{
	char opt[32];
	snprintf(opt, sizeof(opt), "--%s", kind->option);
	struct device_spec *spec = options_add_device(o, kind, opt, e);
	if (!spec)
		return -1;
	int ret = device_kind_parse(kind, spec, arg, e);
	if (ret)
		o->ndevices--; /* an error, or the value asked for no device */
	return ret < 0 ? -1 : 0;
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

/* getopt_long's table: the machine's options, then each device kind with an
 * option of its own; `val` is 256 + the index in that order. */
static unsigned options_getopt_table(struct option *t, const struct device_kind **kinds)
{
	unsigned n = 0;
	for (unsigned i = 0; i < NMACHINE; i++, n++)
		t[n] = (struct option){machine_options[i].name,
				       machine_options[i].arg ? required_argument : no_argument,
				       NULL, 256 + (int)n};
	for (const struct device_kind *const *k = device_kinds; *k && n < NOPTIONS; k++) {
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

static void options_defaults(struct vm_options *o)
{
	memset(o, 0, sizeof(*o));
	o->memory_mib = VMM_DEFAULT_MIB;
	o->cpus = 1;
	o->acpi = true;
	o->msi_delivery = IRQ_MSI_IRQFD;
	o->intx_delivery = -1;
	o->io_threads = -1;
}

int options_parse(struct vm_options *o, int argc, char **argv, struct err *e)
{
	struct option table[NOPTIONS + 1];
	const struct device_kind *kinds[NOPTIONS] = {0};
	char shorts[2 * NMACHINE + 2] = ":";
	unsigned n = options_getopt_table(table, kinds);
	for (unsigned i = 0; i < NMACHINE; i++)
		if (machine_options[i].short_name)
			snprintf(shorts + strlen(shorts), sizeof(shorts) - strlen(shorts), "%c%s",
				 machine_options[i].short_name, machine_options[i].arg ? ":" : "");
	options_defaults(o);
	const char *host_env = getenv("VMM_HOST"); /* --host's default */
	if (host_env && *host_env) {
		int m = pick("VMM_HOST", host_env, host_names, e);
		if (m < 0)
			return -1;
		o->host = (enum kvm_host_choice)m;
	}
	opterr = 0;
	optind = 1;
	for (;;) {
		int c = getopt_long(argc, argv, shorts, table, NULL);
		if (c == -1)
			break;
		for (unsigned i = 0; i < NMACHINE; i++)
			if (c == machine_options[i].short_name)
				c = 256 + (int)i;
		if (c == ':')
			return err_set(e, ERR_INPUT, "option %s needs a value", argv[optind - 1]);
		if (c < 256 || c >= 256 + (int)n)
			return err_set(e, ERR_INPUT, "unknown option '%s' (see --help)",
				       argv[optind - 1]);
		unsigned i = (unsigned)c - 256;
		int ret = i < NMACHINE ? machine_options[i].apply(o, optarg, e)
				       : apply_device_option(o, kinds[i - NMACHINE], optarg, e);
		if (ret)
			return -1;
	}
	if (optind < argc)
		return err_set(e, ERR_INPUT, "unexpected argument '%s' (see --help)", argv[optind]);
	if (options_check_devices(o, e))
		return -1;
	for (unsigned i = 0; i < o->ndevices; i++)
		if (o->devices[i].kind->guest_console)
			o->guest_console = o->devices[i].kind->guest_console;
	if (o->help || o->version)
		return 0;
	if (!o->kernel)
		return err_set(e, ERR_INPUT, "no kernel given: use --kernel FILE (see --help)");
	return 0;
}

/* "  --name ARG" then the help text from column 24, wrapped at 80. */
static void print_option(FILE *out, char short_name, const char *name, const char *arg,
			 const char *help)
{
	enum { COL = 24, WIDTH = 80 };
	int used =
	    short_name
		? fprintf(out, "  -%c, --%s%s%s", short_name, name, arg ? " " : "", arg ? arg : "")
		: fprintf(out, "  %s--%s%s%s", "    ", name, arg ? " " : "", arg ? arg : "");
	const char *p = help;
	if (used > COL - 2) {
		fputc('\n', out);
		used = 0;
	}
	while (*p) {
		fprintf(out, "%*s", COL - used, "");
		int room = WIDTH - COL, len = (int)strlen(p);
		if (len > room) {
			len = room;
			while (len > 0 && p[len] != ' ')
				len--;
		}
		fprintf(out, "%.*s\n", len, p);
		p += len;
		while (*p == ' ')
			p++;
		used = 0;
	}
}

void options_print_help(FILE *out, const char *argv0)
{
	fprintf(out,
		"usage: %s --kernel FILE [options]\n"
		"Boots a Linux kernel (bzImage or ELF vmlinux) in a KVM virtual machine.\n\n",
		argv0);
	for (unsigned i = 0; i < NMACHINE; i++) {
		const struct option_def *d = &machine_options[i];
		if (d->apply != opt_device) {
			print_option(out, d->short_name, d->name, d->arg, d->help);
			continue;
		}
		char syntax[160];
		for (const struct device_kind *const *k = device_kinds; *k; k++)
			if (!(*k)->option)
				print_option(out, 0, "device",
					     device_kind_syntax(*k, syntax, sizeof(syntax)),
					     (*k)->help);
		for (const struct device_kind *const *k = device_kinds; *k; k++)
			if ((*k)->option)
				print_option(out, 0, (*k)->option,
					     device_kind_syntax(*k, syntax, sizeof(syntax)),
					     (*k)->help);
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
		     "       host I/O error)\n"
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
