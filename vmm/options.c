#include "options.h"

#include "vmm/base/err.h"

#include "irq/irq.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
	OPT_KERNEL = 256,
	OPT_INITRD,
	OPT_CMDLINE,
	OPT_NO_DEFAULT_CMDLINE,
	OPT_MEMORY,
	OPT_CPUS,
	OPT_TIMEOUT,
	OPT_CONSOLE_LOG,
	OPT_GUEST_DECOMPRESS,
	OPT_BOOT_TIMER,
	OPT_VERSION,
	OPT_DEVICE,
	OPT_IRQ_MODE,
	OPT_MSI_DELIVERY,
	OPT_INTX_DELIVERY,
	OPT_STATS,
	OPT_DUMP_DTB,
	OPT_DTB,
	OPT_DISK,
	OPT_RNG,
	OPT_CONSOLE,
	OPT_NET,
};

static const struct option long_options[] = {
    {"kernel", required_argument, NULL, OPT_KERNEL},
    {"initrd", required_argument, NULL, OPT_INITRD},
    {"cmdline", required_argument, NULL, OPT_CMDLINE},
    {"no-default-cmdline", no_argument, NULL, OPT_NO_DEFAULT_CMDLINE},
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"cpus", required_argument, NULL, OPT_CPUS},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"console-log", required_argument, NULL, OPT_CONSOLE_LOG},
    {"guest-decompress", no_argument, NULL, OPT_GUEST_DECOMPRESS},
    {"boot-timer", no_argument, NULL, OPT_BOOT_TIMER},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"irq-mode", required_argument, NULL, OPT_IRQ_MODE},
    {"msi-delivery", required_argument, NULL, OPT_MSI_DELIVERY},
    {"intx-delivery", required_argument, NULL, OPT_INTX_DELIVERY},
    {"stats", no_argument, NULL, OPT_STATS},
    {"dump-dtb", required_argument, NULL, OPT_DUMP_DTB},
    {"dtb", no_argument, NULL, OPT_DTB},
    {"disk", required_argument, NULL, OPT_DISK},
    {"rng", no_argument, NULL, OPT_RNG},
    {"console", required_argument, NULL, OPT_CONSOLE},
    {"net", required_argument, NULL, OPT_NET},
    {NULL, 0, NULL, 0},
};

void options_print_help(FILE *out, const char *argv0)
{
	fprintf(out,
		"usage: %s --kernel FILE [options]\n"
		"Boots a Linux kernel (bzImage or ELF vmlinux) in a KVM virtual machine.\n"
		"\n"
		"  --kernel FILE         bzImage (boot protocol 2.12+, 64-bit) or ELF64 vmlinux\n"
		"  --initrd FILE         initial ramdisk\n"
		"  --cmdline STRING      appended to the default kernel command line\n"
		"                        (default: \"" VMM_DEFAULT_CMDLINE "\")\n"
		"  --no-default-cmdline  use only --cmdline\n"
		"  --memory MIB          guest RAM in MiB (default 256)\n"
		"  --cpus N              number of vCPUs (default 1)\n"
		"  --timeout SECONDS     stop the guest after this long (exit code 6)\n"
		"  --console-log FILE    write the serial console to FILE instead of stdout\n"
		"  --guest-decompress    enter the bzImage at +0x200 so the kernel decompresses\n"
		"                        itself (default: the VMM decompresses gzip, LZ4, xz and\n"
		"                        zstd payloads and enters the ELF directly)\n"
		"  --boot-timer          print boot markers (MMIO 0xc0000000 byte 123, port 0x80\n"
		"                        codes 0x40-0x7f), exec-to-first-KVM_RUN time and VMM RSS\n"
		"  --device testdev[,vectors=N][,slot=S]\n"
		"                        a PCI test device with MSI-X (N vectors, 1-2048,\n"
		"                        default 8) and INTx; repeatable; slots from 1 up\n"
		"  --disk PATH[,ro][,direct]\n"
		"                        virtio-blk on a raw file or block device (io_uring);\n"
		"                        ro: read-only, direct: O_DIRECT; repeatable\n"
		"  --rng                 virtio-rng, fed from getrandom()\n"
		"  --console serial|virtio\n"
		"                        where stdin/stdout go: ttyS0 (default) or a\n"
		"                        virtio-console (hvc0; the default command line then\n"
		"                        says console=hvc0)\n"
		"  --net tap[=NAME][,mac=XX:XX:XX:XX:XX:XX]\n"
		"                        virtio-net on a tap device (created if missing)\n"
		"  --irq-mode msix|intx  intx hides every MSI-X capability (default msix)\n"
		"  --msi-delivery irqfd|signal\n"
		"                        MSI through GSI routes + irqfd (default) or\n"
		"                        KVM_SIGNAL_MSI\n"
		"  --intx-delivery resample|line\n"
		"                        INTx through irqfd + resamplefd (default where KVM\n"
		"                        has KVM_CAP_IRQFD_RESAMPLE) or KVM_IRQ_LINE\n"
		"  --stats               print interrupt counts per line, pin and vector at exit\n"
		"  --dump-dtb FILE       write the machine's flattened device tree to FILE\n"
		"  --dtb                 also give it to the guest (boot_params setup_data,\n"
		"                        SETUP_DTB); a kernel with CONFIG_OF acts on it\n"
		"  -v, --verbose         more diagnostics (twice for debug)\n"
		"  -h, --help            this text\n"
		"      --version         print the version\n"
		"\n"
		"Console: stdin goes to the guest's ttyS0; on a terminal, Ctrl-A x quits and\n"
		"Ctrl-A Ctrl-A sends Ctrl-A.\n"
		"\n"
		"Exit codes:\n"
		"  0    the guest reset or shut down (a reboot ends the VM)\n"
		"  odd  (value << 1) | 1: the guest wrote value to the debug-exit port 0xf4\n"
		"  2    bad input or usage (missing or invalid kernel, initrd, option)\n"
		"  4    the guest crashed (triple fault, emulation failure, kernel panic)\n"
		"  6    --timeout expired\n"
		"  8    host problem (no /dev/kvm, missing KVM capability, host I/O error)\n"
		"  10   stopped by SIGINT, SIGTERM, SIGHUP or Ctrl-A x\n",
		argv0);
}

static int parse_u64(const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out,
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
		return err_set(e, EXIT_USAGE, "%s %s: must be between %llu and %llu", opt, s,
			       (unsigned long long)min, (unsigned long long)max);
	*out = v;
	return 0;
bad:
	return err_set(e, EXIT_USAGE, "%s: '%s' is not a whole number", opt, s);
}

/* "testdev[,vectors=N][,slot=S]" */
static int parse_device(struct vm_options *o, const char *arg, struct err *e)
{
	char buf[128], *save = NULL;
	uint64_t v;
	if (o->ndevices == VMM_MAX_DEVICES)
		return err_set(e, EXIT_USAGE, "--device: at most %d devices", VMM_MAX_DEVICES);
	if (strlen(arg) >= sizeof(buf))
		return err_set(e, EXIT_USAGE, "--device %s: too long", arg);
	strcpy(buf, arg);
	struct device_spec d = {.kind = DEVICE_TESTDEV, .vectors = 8, .slot = -1};
	char *tok = strtok_r(buf, ",", &save);
	if (!tok || strcmp(tok, "testdev"))
		return err_set(e, EXIT_USAGE, "--device %s: unknown device '%s' (known: testdev)",
			       arg, tok ? tok : "");
	while ((tok = strtok_r(NULL, ",", &save))) {
		if (!strncmp(tok, "vectors=", 8)) {
			if (parse_u64("--device vectors", tok + 8, 1, 2048, &v, e))
				return -1;
			d.vectors = (unsigned)v;
		} else if (!strncmp(tok, "slot=", 5)) {
			if (parse_u64("--device slot", tok + 5, 1, 31, &v, e))
				return -1;
			d.slot = (int)v;
		} else {
			return err_set(e, EXIT_USAGE, "--device %s: unknown property '%s'", arg,
				       tok);
		}
	}
	o->devices[o->ndevices++] = d;
	return 0;
}

/* "PATH[,ro][,direct]"; the path itself may not contain a comma. */
static int parse_disk(struct vm_options *o, char *arg, struct err *e)
{
	char *save = NULL;
	if (o->ndevices == VMM_MAX_DEVICES)
		return err_set(e, EXIT_USAGE, "--disk: at most %d devices", VMM_MAX_DEVICES);
	struct device_spec d = {.kind = DEVICE_VIRTIO_BLK, .slot = -1};
	char *tok = strtok_r(arg, ",", &save);
	if (!tok || !*tok)
		return err_set(e, EXIT_USAGE, "--disk needs a path");
	d.path = tok;
	while ((tok = strtok_r(NULL, ",", &save))) {
		if (!strcmp(tok, "ro"))
			d.readonly = true;
		else if (!strcmp(tok, "direct"))
			d.direct = true;
		else
			return err_set(e, EXIT_USAGE, "--disk %s: unknown flag '%s' (ro, direct)",
				       d.path, tok);
	}
	o->devices[o->ndevices++] = d;
	return 0;
}

static int add_device(struct vm_options *o, struct device_spec d, const char *opt, struct err *e)
{
	if (o->ndevices == VMM_MAX_DEVICES)
		return err_set(e, EXIT_USAGE, "%s: at most %d devices", opt, VMM_MAX_DEVICES);
	o->devices[o->ndevices++] = d;
	return 0;
}

/* "tap[=NAME][,mac=XX:XX:XX:XX:XX:XX]" */
static int parse_net(struct vm_options *o, char *arg, struct err *e)
{
	char *save = NULL;
	struct device_spec d = {.kind = DEVICE_VIRTIO_NET, .slot = -1};
	char *tok = strtok_r(arg, ",", &save);
	if (!tok || strncmp(tok, "tap", 3) || (tok[3] && tok[3] != '='))
		return err_set(e, EXIT_USAGE, "--net %s: only tap[=NAME] is supported", arg);
	d.path = tok[3] == '=' ? tok + 4 : NULL;
	while ((tok = strtok_r(NULL, ",", &save))) {
		unsigned m[6];
		char extra;
		if (strncmp(tok, "mac=", 4) ||
		    sscanf(tok + 4, "%2x:%2x:%2x:%2x:%2x:%2x%c", &m[0], &m[1], &m[2], &m[3], &m[4],
			   &m[5], &extra) != 6)
			return err_set(e, EXIT_USAGE,
				       "--net: bad property '%s' (mac=XX:XX:XX:XX:XX:XX)", tok);
		if (m[0] & 1)
			return err_set(e, EXIT_USAGE, "--net %s: a multicast MAC cannot be a NIC's",
				       tok);
		for (int i = 0; i < 6; i++)
			d.mac[i] = (uint8_t)m[i];
		d.has_mac = true;
	}
	return add_device(o, d, "--net", e);
}

int options_parse(struct vm_options *o, int argc, char **argv, struct err *e)
{
	uint64_t v;
	char *end;
	memset(o, 0, sizeof(*o));
	o->memory_mib = 256;
	o->cpus = 1;
	o->msi_delivery = IRQ_MSI_IRQFD;
	o->intx_delivery = -1;
	opterr = 0;
	optind = 1;
	for (;;) {
		int c = getopt_long(argc, argv, ":vh", long_options, NULL);
		if (c == -1)
			break;
		switch (c) {
		case OPT_KERNEL: o->kernel = optarg; break;
		case OPT_INITRD: o->initrd = optarg; break;
		case OPT_CMDLINE: o->cmdline_extra = optarg; break;
		case OPT_NO_DEFAULT_CMDLINE: o->no_default_cmdline = true; break;
		case OPT_MEMORY:
			/* 2 MiB: the BIOS area plus a minimal kernel; 1 TiB: sanity. */
			if (parse_u64("--memory", optarg, 2, 1ULL << 20, &v, e))
				return -1;
			o->memory_mib = v;
			break;
		case OPT_CPUS:
			if (parse_u64("--cpus", optarg, 1, 254, &v, e))
				return -1;
			o->cpus = (unsigned)v;
			break;
		case OPT_TIMEOUT:
			errno = 0;
			o->timeout_s = strtod(optarg, &end);
			if (errno || *end || !*optarg || !isfinite(o->timeout_s) ||
			    o->timeout_s <= 0 || o->timeout_s > 1e7)
				return err_set(
				    e, EXIT_USAGE,
				    "--timeout: '%s' is not a positive number of seconds", optarg);
			break;
		case OPT_CONSOLE_LOG: o->console_log = optarg; break;
		case OPT_GUEST_DECOMPRESS: o->guest_decompress = true; break;
		case OPT_BOOT_TIMER: o->boot_timer = true; break;
		case 'v': o->verbosity++; break;
		case 'h': o->help = true; break;
		case OPT_VERSION: o->version = true; break;
		case OPT_DEVICE:
			if (parse_device(o, optarg, e))
				return -1;
			break;
		case OPT_IRQ_MODE:
			if (!strcmp(optarg, "msix"))
				o->irq_mode = IRQ_MODE_MSIX;
			else if (!strcmp(optarg, "intx"))
				o->irq_mode = IRQ_MODE_INTX;
			else
				return err_set(e, EXIT_USAGE, "--irq-mode %s: use msix or intx",
					       optarg);
			break;
		case OPT_MSI_DELIVERY:
			if (!strcmp(optarg, "irqfd"))
				o->msi_delivery = IRQ_MSI_IRQFD;
			else if (!strcmp(optarg, "signal"))
				o->msi_delivery = IRQ_MSI_SIGNAL;
			else
				return err_set(e, EXIT_USAGE,
					       "--msi-delivery %s: use irqfd or signal", optarg);
			break;
		case OPT_INTX_DELIVERY:
			if (!strcmp(optarg, "resample"))
				o->intx_delivery = IRQ_INTX_RESAMPLE;
			else if (!strcmp(optarg, "line"))
				o->intx_delivery = IRQ_INTX_LINE;
			else
				return err_set(e, EXIT_USAGE,
					       "--intx-delivery %s: use resample or line", optarg);
			break;
		case OPT_STATS: o->stats = true; break;
		case OPT_DUMP_DTB: o->dump_dtb = optarg; break;
		case OPT_DTB: o->dtb = true; break;
		case OPT_DISK:
			if (parse_disk(o, optarg, e))
				return -1;
			break;
		case OPT_RNG:
			if (add_device(o,
				       (struct device_spec){.kind = DEVICE_VIRTIO_RNG, .slot = -1},
				       "--rng", e))
				return -1;
			break;
		case OPT_CONSOLE:
			if (!strcmp(optarg, "serial")) {
				o->virtio_console = false;
			} else if (!strcmp(optarg, "virtio")) {
				if (!o->virtio_console &&
				    add_device(o,
					       (struct device_spec){.kind = DEVICE_VIRTIO_CONSOLE,
								    .slot = -1},
					       "--console", e))
					return -1;
				o->virtio_console = true;
			} else {
				return err_set(e, EXIT_USAGE, "--console %s: use serial or virtio",
					       optarg);
			}
			break;
		case OPT_NET:
			if (parse_net(o, optarg, e))
				return -1;
			break;
		case ':':
			return err_set(e, EXIT_USAGE, "option %s needs a value", argv[optind - 1]);
		default:
			return err_set(e, EXIT_USAGE, "unknown option '%s' (see --help)",
				       argv[optind - 1]);
		}
	}
	if (optind < argc)
		return err_set(e, EXIT_USAGE, "unexpected argument '%s' (see --help)",
			       argv[optind]);
	if (o->help || o->version)
		return 0;
	if (!o->kernel)
		return err_set(e, EXIT_USAGE, "no kernel given: use --kernel FILE (see --help)");
	return 0;
}

char *options_kernel_cmdline(const struct vm_options *o)
{
	const char *base = o->no_default_cmdline ? ""
			   : o->virtio_console	 ? VMM_DEFAULT_CMDLINE_HVC
						 : VMM_DEFAULT_CMDLINE;
	const char *extra = o->cmdline_extra ? o->cmdline_extra : "";
	size_t n = strlen(base) + strlen(extra) + 2;
	char *s = malloc(n);
	if (!s)
		return NULL;
	snprintf(s, n, "%s%s%s", base, (*base && *extra) ? " " : "", extra);
	return s;
}
