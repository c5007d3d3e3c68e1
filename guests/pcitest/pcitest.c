/*
 * pcitest: checks the VMM's PCI bus and its test device the way a kernel
 * uses them.
 *
 *  1. enumeration of bus 0 through conf1, the host bridge, every testdev's
 *     header, capability list, BARs, interrupt pin/line and MP table entry;
 *  2. moving BAR0 of the first testdev, and memory decoding on and off;
 *  3. LAPIC, IOAPIC and IDT set-up for MSI-X and INTx vectors;
 *  4. MSI-X (unless pcitest.expect=intx): delivery per vector, per-vector
 *     and function masking with the PBA, table access rules, out-of-range
 *     doorbells, and the fall-back to INTx when MSI-X is disabled;
 *  5. INTx: exactly-once delivery, the status register's interrupt bit,
 *     Interrupt Disable, five doorbells in a row;
 *  6. two testdevs on one IOAPIC pin.
 *
 * Each check prints "pcitest: ok   WHAT" or "pcitest: FAIL WHAT: DETAIL";
 * the last line is "pcitest: all N checks passed" and the guest resets (VMM
 * exit 0), or "pcitest: N of M checks failed" and guest_exit(1) (VMM exit
 * 3). Keys: pcitest.expect=msix|intx (default msix), pcitest.devices=N
 * (default 1). Any other pcitest.* key is a failure, so a typo cannot
 * silently skip checks.
 *
 * On our KVM hosts CPL 0 is emulated at ~2 us per instruction and CPL 3 is
 * native (shared/notes/kvm-host.md), so CPL 0 only installs IDT gates and
 * runs the interrupt handler; everything else runs in run_user_irq().
 */
#include "pcitest.h"

#include "guest/cmdline.h"
#include "guest/tsc.h"

struct pcitest pt;

static const char *const known_keys[] = {"pcitest.expect", "pcitest.devices"};

bool check(bool ok, const char *what, const char *fmt, ...)
{
	pt.checks++;
	if (ok) {
		printf("pcitest: ok   %s\n", what);
		return true;
	}
	pt.failures++;
	char detail[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	printf("pcitest: FAIL %s: %s\n", what, detail);
	return false;
}

void info(const char *fmt, ...)
{
	va_list ap;
	printf("pcitest: info ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

void skip(const char *what, const char *why)
{
	printf("pcitest: skip %s: %s\n", what, why);
}

static void parse_cmdline(struct boot_params *bp)
{
	const char *val;
	size_t len;
	char first[64];

	pt.expect_msix = true;
	pt.want_devs = 1;
	pt.cmdline = cmdline_get(bp);
	if (!check(pt.cmdline != NULL, "command line is readable", "cmd_line_ptr 0x%x, size %u",
		   bp->hdr.cmd_line_ptr, bp->hdr.cmdline_size))
		return;
	info("command line: \"%s\"", pt.cmdline);

	unsigned unknown =
	    cmdline_unknown_keys(pt.cmdline, "pcitest.", known_keys,
				 sizeof(known_keys) / sizeof(known_keys[0]), first, sizeof(first));
	check(unknown == 0, "command line has no unknown pcitest.* keys",
	      "%u unknown, first \"%s\"", unknown, first);

	if (cmdline_value(pt.cmdline, "pcitest.expect", &val, &len)) {
		if (len == 4 && !strncmp(val, "msix", 4))
			pt.expect_msix = true;
		else if (len == 4 && !strncmp(val, "intx", 4))
			pt.expect_msix = false;
		else
			check(false, "pcitest.expect is msix or intx", "\"%.*s\"", (int)len, val);
	}
	if (cmdline_value(pt.cmdline, "pcitest.devices", &val, &len)) {
		uint64_t n;
		if (check(cmdline_parse_u64(val, len, &n) && n >= 1 && n <= PT_MAX_DEVS,
			  "pcitest.devices is a number from 1 to 16", "\"%.*s\"", (int)len, val))
			pt.want_devs = (unsigned)n;
	}
	info("expecting %u testdev%s, %s", pt.want_devs, pt.want_devs == 1 ? "" : "s",
	     pt.expect_msix ? "with MSI-X" : "INTx only (no MSI-X capability)");
}

static void calibrate(void)
{
	pt.tsc_hz = tsc_hz_from_pit();
	/* Waits are TSC deadlines; a broken PIT still gets bounded waits, on
	 * an assumed 3 GHz. */
	if (!check(pt.tsc_hz >= 100000000ull && pt.tsc_hz <= 10000000000ull,
		   "TSC rate measured against PIT channel 2", "%lu Hz", pt.tsc_hz))
		pt.tsc_hz = 3000000000ull;
	irq_set_tsc_hz(pt.tsc_hz);
	info("TSC runs at %lu.%03lu MHz", pt.tsc_hz / 1000000, pt.tsc_hz / 1000 % 1000);
}

static uint64_t user_main(void *arg)
{
	struct boot_params *bp = arg;

	printf("pcitest: PCI bus, BAR, MSI-X and INTx checker\n");
	parse_cmdline(bp);
	calibrate();

	pt_enumerate();
	struct pt_dev *first = NULL;
	for (unsigned i = 0; i < pt.ndev && !first; i++)
		if (pt.dev[i].usable)
			first = &pt.dev[i];
	if (first)
		pt_relocate_bar0(first);
	else
		skip("BAR0 relocation", "no usable testdev");

	if (pt_irq_setup()) {
		for (unsigned i = 0; i < pt.ndev; i++) {
			struct pt_dev *d = &pt.dev[i];
			if (!d->usable) {
				printf("pcitest: skip interrupt checks of 00:%02x.0: BAR0 does not "
				       "work\n",
				       d->slot);
				continue;
			}
			if (d->mx.cap)
				pt_msix(d);
			else
				printf("pcitest: skip MSI-X checks of 00:%02x.0: no MSI-X "
				       "capability\n",
				       d->slot);
			pt_intx(d);
		}
		pt_shared_pins();
		pt_irq_report();
	}

	if (pt.failures)
		printf("pcitest: %u of %u checks failed\n", pt.failures, pt.checks);
	else
		printf("pcitest: all %u checks passed\n", pt.checks);
	return pt.failures;
}

int guest_main(struct boot_params *bp)
{
	irq_install();
	return run_user_irq(user_main, bp) ? 1 : 0;
}
