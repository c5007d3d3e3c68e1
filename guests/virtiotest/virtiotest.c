/*
 * virtiotest: finds the VMM's virtio devices on PCI bus 0 and drives each
 * one through its whole life as a minimal driver would (virtio 1.2):
 *
 *  - 4.1.2 / 4.1.4: PCI IDs and the vendor capabilities (common, notify,
 *    ISR, device configuration, PCI configuration access);
 *  - 3.1.1: reset, ACKNOWLEDGE, DRIVER, feature negotiation with
 *    VIRTIO_F_VERSION_1, FEATURES_OK re-read, queue set-up (2.7 split
 *    rings in RAM this guest owns), MSI-X vectors or INTx, DRIVER_OK;
 *  - per device: 5.4 rng (two 64-byte requests), 5.2 blk (capacity, reads
 *    against the host's pattern, write + FLUSH + read back, GET_ID, a read
 *    past the end, read-only), 5.3 console (a line out, a line in, echoed),
 *    5.1 net (a broadcast frame out, the host's frame in).
 *
 * Output: "virtiotest: ok   WHAT" / "virtiotest: FAIL WHAT: DETAIL" per
 * check, "virtiotest: info ..." lines, and at the end "virtiotest: all N
 * checks passed" (reset, VMM exit 0) or "virtiotest: N of M checks failed"
 * (guest_exit(1), VMM exit 3).
 *
 * Keys: virtiotest.expect=msix|intx (default msix), virtiotest.devices=
 * LIST (comma-separated blk,rng,console,net,fs: exactly these must be found;
 * default: test whatever is there, at least one), virtiotest.ro=1 (the
 * disk and the share are read-only: --disk ...,ro, --fs ...,ro),
 * virtiotest.sectors=N (the disk has exactly N
 * sectors of the host's pattern), virtiotest.queues=N (1 or 2: the disk's
 * request queues and the net device's queue pairs, --disk ...,queues=N and
 * --net ...,queues=N; with 2, VIRTIO_BLK_F_MQ and VIRTIO_NET_F_MQ with the
 * control queue must be offered and every queue is driven),
 * virtiotest.fskill=1 (the host kills the virtio-fs backend when told:
 * NEEDS_RESET must follow). Any other
 * virtiotest.* key fails.
 *
 * Only the interrupt handler runs at CPL 0 (guest/irq.h); the rest runs in
 * run_user_irq(), natively on our KVM hosts.
 */
#include "virtiotest.h"

#include "guest/cmdline.h"
#include "guest/ram.h"
#include "guest/tsc.h"

struct virtiotest vt;

#define RAM_POOL_BYTES (8ull << 20)
#define MAX_FUNCS      32

static const char *const known_keys[] = {"virtiotest.expect", "virtiotest.devices",
					 "virtiotest.ro",     "virtiotest.sectors",
					 "virtiotest.queues", "virtiotest.fskill"};
/* By virtio device ID (5.1 net, 5.2 blk, 5.3 console, 5.4 rng, 5.11 fs). */
static const char *const type_names[] = {[VIRTIO_ID_NET] = "net",
					 [VIRTIO_ID_BLOCK] = "blk",
					 [VIRTIO_ID_CONSOLE] = "console",
					 [VIRTIO_ID_RNG] = "rng",
					 [VIRTIO_ID_FS] = "fs"};
#define NTYPES (sizeof(type_names) / sizeof(type_names[0]))

static struct pci_func funcs[MAX_FUNCS];

bool check(bool ok, const char *what, const char *fmt, ...)
{
	vt.checks++;
	if (ok) {
		printf("virtiotest: ok   %s\n", what);
		return true;
	}
	vt.failures++;
	char detail[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	printf("virtiotest: FAIL %s: %s\n", what, detail);
	return false;
}

bool dcheck(const struct vt_dev *d, bool ok, const char *what, const char *fmt, ...)
{
	char w[200], detail[256];
	va_list ap;

	snprintf(w, sizeof(w), "%s: %s", d->tag, what);
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	return check(ok, w, "%s", detail);
}

void info(const char *fmt, ...)
{
	va_list ap;
	printf("virtiotest: info ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static bool parse_devices(const char *val, size_t len)
{
	size_t i = 0;

	while (i < len) {
		size_t j = i;
		while (j < len && val[j] != ',')
			j++;
		bool known = false;
		for (unsigned t = 1; t < NTYPES; t++) {
			if (type_names[t] && j - i == strlen(type_names[t]) &&
			    !strncmp(val + i, type_names[t], j - i)) {
				vt.want_types |= 1u << t;
				known = true;
			}
		}
		if (!known)
			return false;
		i = j + 1;
	}
	return vt.want_types != 0;
}

static void parse_cmdline(struct boot_params *bp)
{
	const char *val;
	size_t len;
	char first[64];
	uint64_t n;

	vt.expect_msix = true;
	vt.queues = 1;
	vt.cmdline = cmdline_get(bp);
	if (!check(vt.cmdline != NULL, "command line is readable", "cmd_line_ptr 0x%x",
		   bp->hdr.cmd_line_ptr))
		return;
	info("command line: \"%s\"", vt.cmdline);
	unsigned unknown =
	    cmdline_unknown_keys(vt.cmdline, "virtiotest.", known_keys,
				 sizeof(known_keys) / sizeof(known_keys[0]), first, sizeof(first));
	check(unknown == 0, "command line has no unknown virtiotest.* keys",
	      "%u unknown, first \"%s\"", unknown, first);
	if (cmdline_value(vt.cmdline, "virtiotest.expect", &val, &len)) {
		if (len == 4 && !strncmp(val, "msix", 4))
			vt.expect_msix = true;
		else if (len == 4 && !strncmp(val, "intx", 4))
			vt.expect_msix = false;
		else
			check(false, "virtiotest.expect is msix or intx", "\"%.*s\"", (int)len,
			      val);
	}
	if (cmdline_value(vt.cmdline, "virtiotest.devices", &val, &len))
		check(parse_devices(val, len),
		      "virtiotest.devices is a comma-separated list of blk, rng, console, net, fs",
		      "\"%.*s\"", (int)len, val);
	if (cmdline_value(vt.cmdline, "virtiotest.ro", &val, &len)) {
		if (check(cmdline_parse_u64(val, len, &n) && n <= 1, "virtiotest.ro is 0 or 1",
			  "\"%.*s\"", (int)len, val))
			vt.ro = n == 1;
	}
	if (cmdline_value(vt.cmdline, "virtiotest.fskill", &val, &len)) {
		if (check(cmdline_parse_u64(val, len, &n) && n <= 1, "virtiotest.fskill is 0 or 1",
			  "\"%.*s\"", (int)len, val))
			vt.fs_kill = n == 1;
	}
	if (cmdline_value(vt.cmdline, "virtiotest.sectors", &val, &len)) {
		if (check(cmdline_parse_u64(val, len, &n) && n >= 1,
			  "virtiotest.sectors is a number", "\"%.*s\"", (int)len, val))
			vt.sectors = n;
	}
	if (cmdline_value(vt.cmdline, "virtiotest.queues", &val, &len)) {
		if (check(cmdline_parse_u64(val, len, &n) && n >= 1 && n <= VT_MAX_MQ,
			  "virtiotest.queues is 1 or 2", "\"%.*s\"", (int)len, val))
			vt.queues = (unsigned)n;
	}
}

static void setup_interrupts(void)
{
	irq_lapic_setup(&vt.lapic);
	check(vt.lapic.enabled, "LAPIC software-enabled, spurious vector 0xff, TPR 0 (SDM 11.9)",
	      "SVR 0x%x, TPR 0x%x", vt.lapic.svr, vt.lapic.tpr);
	check(vt.lapic.probe_delivered, "a self-IPI reaches its handler (SDM 11.6.1)",
	      "vector 0x%02x not delivered", IRQ_VEC_LAPIC_PROBE);
	if (vt.lapic.auto_eoi)
		info(
		    "LAPIC self-test: an accepted interrupt does not stay in service (PPR 0x%02x): "
		    "a host (kvm_pvm) property; INTx checks allow one re-delivery finding ISR 0 "
		    "per interrupt",
		    vt.lapic.probe_ppr);

	mp_routing_load(&vt.mp);
	check(vt.mp.ok && !vt.mp.malformed,
	      "MP table has a PCI bus and an IOAPIC (MP spec 1.4, 4.3.2, 4.3.3)", "%s",
	      vt.mp.why ? vt.mp.why : "malformed entries");
	if (vt.mp.ok) {
		irq_set_ioapic(vt.mp.ioapic);
		info("MP table: IOAPIC %u at 0x%lx (%u entries), PCI bus %u with %u I/O interrupt "
		     "entries",
		     vt.mp.ioapic_id, vt.mp.ioapic, irq_ioapic_max_entry() + 1, vt.mp.pci_bus,
		     vt.mp.npci);
	}
}

/* 4.1.2: vendor 0x1AF4, device 0x1040 + type, revision >= 1 (4.1.2.1:
 * a non-transitional device has revision ID 1 or higher). */
static void find_devices(void)
{
	unsigned nfunc = pci_enum_bus0(funcs, MAX_FUNCS);
	unsigned found_types = 0;

	for (unsigned i = 0; i < nfunc && i < MAX_FUNCS; i++) {
		const struct pci_func *f = &funcs[i];
		if (f->vendor != VIRTIO_PCI_VENDOR)
			continue;
		unsigned type = f->device >= VIRTIO_PCI_MODERN_DEVICE ? f->device - 0x1040u : 0;
		info("00:%02x.0 %04x:%04x class 0x%06x rev %u subsystem %04x:%04x, Interrupt Line "
		     "%u "
		     "Pin %u",
		     f->slot, f->vendor, f->device, f->class_rev >> 8, f->class_rev & 0xFF,
		     f->subsys_vendor, f->subsys_id, f->irq_line, f->irq_pin);
		if (!check(
			type >= 1 && type < NTYPES && type_names[type] &&
			    (f->class_rev & 0xFF) >= 1,
			"virtio function is a modern net/blk/console/rng/fs device, revision >= 1 "
			"(4.1.2)",
			"00:%02x.0 device 0x%04x revision %u", f->slot, f->device,
			f->class_rev & 0xFF))
			continue;
		if (!check(vt.ndev < VT_MAX_DEVS, "at most 8 virtio devices", "00:%02x.0", f->slot))
			continue;
		struct vt_dev *d = &vt.dev[vt.ndev];
		d->pf = f;
		d->index = vt.ndev++;
		d->name = type_names[type];
		snprintf(d->tag, sizeof(d->tag), "%s 00:%02x.0", d->name, f->slot);
		found_types |= 1u << type;

		const char *why;
		bool ok =
		    virtio_pci_parse(f->slot, (uint16_t)type, f->bar, f->bar_size, &d->vp, &why);
		if (!dcheck(d, ok, "common, notify and ISR capabilities found (4.1.4)", "%s", why))
			continue;
		info("%s: %u vendor capabilities; common BAR%u+0x%x, notify BAR%u+0x%x (multiplier "
		     "%u), ISR BAR%u+0x%x, device BAR%u+0x%x (%u bytes), PCI cfg access at 0x%02x",
		     d->tag, d->vp.nvendor_caps, d->vp.common.bar, d->vp.common.offset,
		     d->vp.notify.bar, d->vp.notify.offset, d->vp.notify_mult, d->vp.isr.bar,
		     d->vp.isr.offset, d->vp.device.bar, d->vp.device.offset, d->vp.device.length,
		     d->vp.pci_cfg_cap);
		dcheck(d,
		       d->vp.common.bar == 0 && d->vp.notify.bar == 0 && d->vp.isr.bar == 0 &&
			   (type == VIRTIO_ID_RNG ||
			    (d->vp.device.present && d->vp.device.bar == 0)) &&
			   d->vp.pci_cfg_cap && d->vp.bad_bar_caps == 0,
		       "common, notify, ISR and device structures in BAR0; a PCI cfg access "
		       "capability",
		       "BARs %u/%u/%u/%u, device cfg %s, cfg access cap 0x%02x, %u capabilities "
		       "naming missing BARs",
		       d->vp.common.bar, d->vp.notify.bar, d->vp.isr.bar, d->vp.device.bar,
		       d->vp.device.present ? "present" : "absent", d->vp.pci_cfg_cap,
		       d->vp.bad_bar_caps);
		/* 4.1.4.4: notify_off_multiplier is even (or 0). */
		dcheck(d, (d->vp.notify_mult & 1) == 0, "notify_off_multiplier is even (4.1.4.4)",
		       "%u", d->vp.notify_mult);
		d->usable = true; /* as far as discovery goes; vt_bringup decides */
	}
	check(vt.ndev >= 1, "at least one virtio device on bus 0", "none among %u functions",
	      nfunc);
	if (vt.want_types) {
		char want[48] = "", got[48] = "";
		for (unsigned t = 1; t < NTYPES; t++) {
			if (vt.want_types & (1u << t))
				snprintf(want + strlen(want), sizeof(want) - strlen(want), " %s",
					 type_names[t]);
			if (found_types & (1u << t))
				snprintf(got + strlen(got), sizeof(got) - strlen(got), " %s",
					 type_names[t]);
		}
		check(found_types == vt.want_types,
		      "the virtio device types match virtiotest.devices", "found%s, expected%s",
		      got[0] ? got : " none", want);
	}
}

static uint64_t user_main(void *arg)
{
	struct boot_params *bp = arg;
	const char *why;

	printf("virtiotest: virtio-pci (virtio 1.2) driver checks\n");
	parse_cmdline(bp);
	vt.tsc_hz = tsc_hz_from_pit();
	if (!check(vt.tsc_hz >= 100000000ull && vt.tsc_hz <= 10000000000ull,
		   "TSC rate measured against PIT channel 2", "%lu Hz", vt.tsc_hz))
		vt.tsc_hz = 3000000000ull;
	irq_set_tsc_hz(vt.tsc_hz);
	check(ram_pool_init(bp, RAM_POOL_BYTES, &why), "8 MiB of RAM for rings and buffers", "%s",
	      why);
	info("rings and buffers at 0x%lx", ram_pool_base());

	setup_interrupts();
	find_devices();
	for (unsigned i = 0; i < vt.ndev; i++) {
		struct vt_dev *d = &vt.dev[i];
		if (!d->usable || !ram_pool_base())
			continue;
		d->usable = false;
		switch (d->vp.type) {
		case VIRTIO_ID_BLOCK: vt_blk(d); break;
		case VIRTIO_ID_RNG: vt_rng(d); break;
		case VIRTIO_ID_CONSOLE: vt_console(d); break;
		case VIRTIO_ID_NET: vt_net(d); break;
		case VIRTIO_ID_FS: vt_fs(d); break;
		default: break;
		}
	}

	/* Interrupts nobody asked for. */
	uint64_t stray = 0;
	unsigned first = 0;
	for (unsigned v = 32; v < IRQ_VEC_SPURIOUS; v++) {
		bool mine = v == IRQ_VEC_LAPIC_PROBE;
		for (unsigned i = 0; i < vt.ndev && !mine; i++) {
			const struct vt_dev *d = &vt.dev[i];
			/* Queue vectors, also after msix_off() cleared d->msix;
			 * a configuration-change interrupt is unexpected. */
			mine = (d->vec_config && v > d->vec_config && v <= d->vec_config + d->nq) ||
			       (d->pin && v == d->intx_vec) ||
			       (vt.fs_kill && d->vp.type == VIRTIO_ID_FS && v == d->vec_config);
		}
		if (!mine && irq_count(v) && !stray++)
			first = v;
	}
	check(stray == 0, "no interrupts on vectors virtiotest did not program (or config vectors)",
	      "%lu, the first on vector 0x%02x", stray, first);
	for (unsigned i = 0; i < vt.ndev; i++)
		if (vt.dev[i].pin && irq_pin_stormed(vt.dev[i].pin))
			check(false, "no INTx interrupt storm", "pin %u masked by the handler",
			      vt.dev[i].pin);
	if (irq_tolerated_redeliveries())
		info("%lu INTx re-deliveries that found ISR 0 were tolerated (LAPIC self-test: no "
		     "in-service state on this host)",
		     irq_tolerated_redeliveries());

	if (vt.failures)
		printf("virtiotest: %u of %u checks failed\n", vt.failures, vt.checks);
	else
		printf("virtiotest: all %u checks passed\n", vt.checks);
	return vt.failures;
}

int guest_main(struct boot_params *bp)
{
	irq_install();
	return run_user_irq(user_main, bp) ? 1 : 0;
}
