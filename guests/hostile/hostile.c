/*
 * hostile: attacks on the VMM's virtio-pci devices (virtio 1.2), their
 * MSI-X tables (PCI Local Bus 3.0, 6.8.2) and their BARs, from a guest
 * that means harm. Needs a virtio-blk disk of the host's pattern (byte i =
 * (i * 131 + (i >> 9) * 7 + 3) & 0xFF, at least 4096 sectors), virtio-rng,
 * virtio-fs (any directory, tag "hostile") and a testdev;
 * tests/guest/hostile_test.py runs it.
 *
 * Each case is one attack (or a few forms of one) on one device, and
 * checks that
 *  1. the VMM stays up: the guest keeps talking to it;
 *  2. the attacked device goes to DEVICE_NEEDS_RESET (2.1.2; with a
 *     configuration change interrupt once DRIVER_OK was set) or ignores
 *     the access, as the spec says for that access;
 *  3. the other devices keep working (one request or doorbell each, with
 *     its interrupt), and the attacked one works again after a reset.
 * No interrupt may arrive on a vector no device was given.
 *
 * Output: "hostile: ok   NAME" or "hostile: FAIL NAME: DETAIL" per case,
 * "hostile: info ..." lines, "hostile: needs-reset seen: blk N, rng M, fs K"
 * (what the VMM's --stats "broken" counters must say), "hostile: fs
 * backend gone" when a case left the fs device without its backend, and at the end
 * "hostile: all N cases passed" (reset, VMM exit 0) or "hostile: N of M
 * cases failed" (guest_exit(1), VMM exit 3).
 *
 * Keys: hostile.expect=msix|intx (default msix), hostile.sectors=N (the
 * disk's size), hostile.only=NAME (run one case), hostile.flood=1 (no cases:
 * flood the rng until the VMM is stopped), hostile.flood=blk (no cases:
 * feed the disk requests it completes at once, until the VMM is stopped).
 * Any other hostile.* key fails.
 */
#include "hostile.h"

#include "guest/cmdline.h"
#include "guest/ram.h"
#include "guest/tsc.h"

struct hostile H;

#define RAM_POOL_BYTES (64ull << 20)
#define MAX_FUNCS      32
#define MIN_SECTORS    4096

static const char *const known_keys[] = {"hostile.expect", "hostile.sectors", "hostile.only",
					 "hostile.flood"};

static struct pci_func funcs[MAX_FUNCS];
static struct irq_snap snap;

struct hcase {
	const char *name;
	unsigned target;
	void (*run)(struct hdev *t);
};

static const struct hcase cases[] = {
    /* The descriptor walker (2.7.5, 2.7.6). */
    {"desc-loop", HD_RNG, case_desc_loop},
    {"desc-next-out-of-range", HD_RNG, case_next_out_of_range},
    {"avail-head-out-of-range", HD_RNG, case_head_out_of_range},
    {"indirect-nested", HD_BLK, case_indirect_nested},
    {"desc-past-ram", HD_RNG, case_desc_past_ram},
    {"desc-in-mmio-hole", HD_RNG, case_desc_mmio_hole},
    {"desc-readable-into-ring", HD_BLK, case_desc_readable_ring},
    {"desc-writable-into-ring", HD_RNG, case_desc_writable_ring},
    {"huge-lengths", HD_RNG, case_huge_length},
    {"desc-writable-then-readable", HD_BLK, case_desc_order},
    {"blk-malformed-request", HD_BLK, case_blk_malformed},
    {"avail-idx-far-ahead", HD_RNG, case_avail_far_ahead},
    {"rng-flood", HD_RNG, case_rng_flood},
    /* The transport (4.1.4.3) and the device lifecycle (2.1, 3.1). */
    {"queue-size-not-pow2", HD_RNG, case_queue_size_not_pow2},
    {"ring-misaligned", HD_BLK, case_ring_misaligned},
    {"queue-reconfig-after-driver-ok", HD_BLK, case_queue_reconfig},
    {"notify-disabled-queue", HD_RNG, case_notify_disabled},
    {"notify-nonexistent-queue", HD_RNG, case_notify_nonexistent},
    {"notify-storm", HD_RNG, case_notify_storm},
    {"reset-during-inflight-io", HD_BLK, case_reset_inflight},
    {"status-backwards", HD_BLK, case_status_backwards},
    /* MSI-X (PCI 3.0, 6.8.2) and the configuration space (6.1, 6.2). */
    {"msix-write-past-table", HD_BLK, case_msix_past_table},
    {"msix-odd-access-sizes", HD_BLK, case_msix_odd_sizes},
    {"msix-pba-write", HD_BLK, case_msix_pba_write},
    {"bar-over-ram", HD_BLK, case_bar_over_ram},
    {"bar-over-other-bar", HD_BLK, case_bar_over_bar},
    {"bar-over-lapic", HD_BLK, case_bar_over_lapic},
    {"bar-over-ioapic", HD_BLK, case_bar_over_ioapic},
    {"readonly-config-bits", HD_BLK, case_readonly_config},
    /* virtio-fs (5.11), its queues served by another process. The last
     * may cost the device its backend for the rest of the run. */
    {"fs-queue-size-not-pow2", HD_FS, case_fs_queue_size_not_pow2},
    {"fs-ring-misaligned", HD_FS, case_fs_ring_misaligned},
    {"fs-driver-ok-partial-queues", HD_FS, case_fs_partial_queues},
    {"fs-kick-before-driver-ok", HD_FS, case_fs_kick_before_driver_ok},
    {"fs-reset-during-inflight", HD_FS, case_fs_reset_inflight},
    {"fs-reset-cycles", HD_FS, case_fs_reset_cycles},
    {"fs-desc-past-ram", HD_FS, case_fs_desc_past_ram},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

bool expect(bool ok, const char *fmt, ...)
{
	if (ok || H.why[0])
		return ok;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(H.why, sizeof(H.why), fmt, ap);
	va_end(ap);
	return false;
}

void info(const char *fmt, ...)
{
	va_list ap;
	printf("hostile: info ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

/* A failure outside the cases (set-up) is reported under its own name. */
static bool report_setup(const char *what)
{
	if (!H.why[0])
		return true;
	printf("hostile: FAIL %s: %s\n", what, H.why);
	H.setup_failures++;
	H.why[0] = 0;
	return false;
}

static void parse_cmdline(struct boot_params *bp)
{
	const char *val;
	size_t len;
	char first[64];
	uint64_t n;

	H.expect_msix = true;
	H.cmdline = cmdline_get(bp);
	if (!expect(H.cmdline != NULL, "the command line is not readable"))
		return;
	info("command line: \"%s\"", H.cmdline);
	unsigned unknown =
	    cmdline_unknown_keys(H.cmdline, "hostile.", known_keys,
				 sizeof(known_keys) / sizeof(known_keys[0]), first, sizeof(first));
	expect(unknown == 0, "%u unknown hostile.* keys, the first \"%s\"", unknown, first);
	if (cmdline_value(H.cmdline, "hostile.expect", &val, &len)) {
		if (len == 4 && !strncmp(val, "msix", 4))
			H.expect_msix = true;
		else if (len == 4 && !strncmp(val, "intx", 4))
			H.expect_msix = false;
		else
			expect(false, "hostile.expect is \"%.*s\", not msix or intx", (int)len,
			       val);
	}
	if (cmdline_value(H.cmdline, "hostile.sectors", &val, &len))
		if (expect(cmdline_parse_u64(val, len, &n) && n >= MIN_SECTORS,
			   "hostile.sectors \"%.*s\" is not a number >= %u", (int)len, val,
			   MIN_SECTORS))
			H.sectors = n;
	H.flood = cmdline_value(H.cmdline, "hostile.flood", &val, &len);
	H.flood_blk = H.flood && len == 3 && !strncmp(val, "blk", 3);
	if (cmdline_value(H.cmdline, "hostile.only", &val, &len)) {
		H.only = val;
		H.only_len = len;
	}
	expect(H.sectors != 0, "hostile.sectors=N is required (the disk's size)");
}

static void find_ram_end(const struct boot_params *bp)
{
	for (unsigned i = 0; i < bp->e820_entries && i < E820_MAX_ENTRIES_ZEROPAGE; i++) {
		const struct boot_e820_entry *e = &bp->e820_table[i];
		if (e->type == E820_TYPE_RAM && e->addr + e->size > H.ram_end)
			H.ram_end = e->addr + e->size;
	}
	info("RAM ends at 0x%lx (e820)", H.ram_end);
}

static void find_devices(void)
{
	static const char *const names[HD_COUNT] = {"blk", "rng", "fs", "testdev"};
	unsigned nfunc = pci_enum_bus0(funcs, MAX_FUNCS);

	for (unsigned k = 0; k < HD_COUNT; k++) {
		H.dev[k].name = names[k];
		H.dev[k].kind = k;
	}
	H.dev[HD_BLK].qsize = BLK_QSIZE;
	H.dev[HD_RNG].qsize = RNG_QSIZE;
	H.dev[HD_FS].qsize = FS_QSIZE;
	for (unsigned i = 0; i < nfunc && i < MAX_FUNCS; i++) {
		const struct pci_func *f = &funcs[i];
		int k = -1;
		if (f->vendor == VIRTIO_PCI_VENDOR &&
		    f->device == VIRTIO_PCI_MODERN_DEVICE + VIRTIO_ID_BLOCK)
			k = HD_BLK;
		else if (f->vendor == VIRTIO_PCI_VENDOR &&
			 f->device == VIRTIO_PCI_MODERN_DEVICE + VIRTIO_ID_RNG)
			k = HD_RNG;
		else if (f->vendor == VIRTIO_PCI_VENDOR &&
			 f->device == VIRTIO_PCI_MODERN_DEVICE + VIRTIO_ID_FS)
			k = HD_FS;
		else if (f->vendor == TESTDEV_VENDOR && f->device == TESTDEV_DEVICE)
			k = HD_TD;
		if (k < 0 || H.dev[k].pf)
			continue;
		struct hdev *d = &H.dev[k];
		d->pf = f;
		for (unsigned b = 0; b < PCI_NUM_BARS; b++)
			d->home[b] = f->bar[b];
		info("%s at 00:%02x.0: BAR0 0x%lx (%lu bytes), BAR1 0x%lx, BAR2 0x%lx (%lu bytes), "
		     "Interrupt Pin %u",
		     d->name, f->slot, f->bar[0], f->bar_size[0], f->bar[1], f->bar[2],
		     f->bar_size[2], f->irq_pin);
	}
	for (unsigned k = 0; k < HD_COUNT; k++)
		if (!expect(H.dev[k].pf != NULL,
			    "no %s on bus 0 (run with --disk IMG --rng --fs DIR,tag=" FS_TAG
			    " --device testdev)",
			    H.dev[k].name))
			return;
	for (unsigned k = HD_BLK; k < HD_VIRTIO_END; k++) {
		struct hdev *d = &H.dev[k];
		const char *why;
		bool ok = virtio_pci_parse(d->pf->slot, (uint16_t)(d->pf->device - 0x1040u),
					   d->pf->bar, d->pf->bar_size, &d->vp, &why);
		if (!expect(ok, "%s: virtio capabilities (4.1.4): %s", d->name, why))
			return;
		expect(d->vp.common.bar == 0 && d->vp.notify.bar == 0 && d->vp.isr.bar == 0 &&
			   d->pf->bar_size[0] == VP_BAR0_SIZE &&
			   (d->pf->bar_size[2] != 0) == H.expect_msix,
		       "%s: virtio structures in a %u-byte BAR0, and a BAR2 only with MSI-X "
		       "(devices/virtio/virtio_pci.h): BAR0 is %lu bytes, BAR2 %lu",
		       d->name, VP_BAR0_SIZE, d->pf->bar_size[0], d->pf->bar_size[2]);
	}
}

static bool alloc_buffers(void)
{
	H.rng_buf = ram_alloc(4096, 4096);
	H.blk_hdr = ram_alloc(sizeof(struct blk_hdr), 16);
	H.blk_status = ram_alloc(1, 1);
	H.blk_data = ram_alloc(64 * 1024, 4096);
	H.table1 = ram_alloc(16 * sizeof(struct virtq_desc), 16);
	H.table2 = ram_alloc(16 * sizeof(struct virtq_desc), 16);
	H.big = ram_alloc(BIG_BYTES, 4096);
	H.fs_msg = ram_alloc(sizeof(struct fs_msg), 64);
	return expect(H.rng_buf && H.blk_hdr && H.blk_status && H.blk_data && H.table1 &&
			  H.table2 && H.big && H.fs_msg,
		      "the RAM pool is too small for the buffers");
}

/* Vectors some device was given. */
static bool vector_is_ours(unsigned v)
{
	if (v == IRQ_VEC_LAPIC_PROBE || v == IRQ_VEC_SPURIOUS)
		return true;
	for (unsigned k = 0; k < HD_COUNT; k++) {
		const struct hdev *d = &H.dev[k];
		if ((d->msix && (v == d->vec_q || (d->kind != HD_TD && v == d->vec_cfg))) ||
		    (d->pin && v == d->intx_vec))
			return true;
	}
	return false;
}

static void check_interrupts(void)
{
	unsigned first = 0;
	uint64_t stray = 0;

	for (unsigned v = 32; v < 256; v++) {
		uint64_t n = irq_count(v) - snap.count[v];
		if (n && !vector_is_ours(v) && !stray++)
			first = v;
	}
	expect(stray == 0, "%lu interrupts on vectors no device was given, the first 0x%02x", stray,
	       first);
	for (unsigned k = 0; k < HD_COUNT; k++)
		if (H.dev[k].pin)
			expect(!irq_pin_stormed(H.dev[k].pin),
			       "an INTx storm on pin %u (%s): the handler masked it", H.dev[k].pin,
			       H.dev[k].name);
}

/* The fs device without its backend cannot work again in this run. */
static bool dev_gone(unsigned k)
{
	return k == HD_FS && H.fs_gone;
}

static void run_case(const struct hcase *c)
{
	struct hdev *t = &H.dev[c->target];
	char what[64];

	H.why[0] = 0;
	irq_snap(&snap);
	for (unsigned k = HD_BLK; k < HD_VIRTIO_END; k++)
		if (!H.dev[k].up && !dev_gone(k))
			hdev_up(&H.dev[k], 0);
	if (!H.why[0])
		c->run(t);
	/* 3: the other devices keep working... */
	snprintf(what, sizeof(what), "after %s on %s", c->name, t->name);
	for (unsigned k = 0; k < HD_COUNT; k++)
		if (k != c->target && !dev_gone(k))
			hdev_works(&H.dev[k], what);
	/* ... and the attacked one works again after a reset (unless the
	 * case left it without its backend, and said so). */
	if (t->kind != HD_TD && !dev_gone(t->kind) && hdev_up(t, 0))
		hdev_works(t, "after a reset");
	check_interrupts();
	H.cases++;
	if (H.why[0]) {
		H.failed++;
		printf("hostile: FAIL %s: %s\n", c->name, H.why);
	} else {
		printf("hostile: ok   %s\n", c->name);
	}
	H.why[0] = 0;
}

static uint64_t user_main(void *arg)
{
	struct boot_params *bp = arg;
	const char *why;

	printf("hostile: attacks on the VMM's virtio-pci devices, MSI-X tables and BARs\n");
	parse_cmdline(bp);
	report_setup("command line");
	H.tsc_hz = tsc_hz_from_pit();
	if (H.tsc_hz < 100000000ull || H.tsc_hz > 10000000000ull) {
		info("TSC rate %lu Hz from the PIT looks wrong; assuming 3 GHz", H.tsc_hz);
		H.tsc_hz = 3000000000ull;
	}
	irq_set_tsc_hz(H.tsc_hz);
	find_ram_end(bp);
	expect(ram_pool_init(bp, RAM_POOL_BYTES, &why), "64 MiB of RAM for rings and buffers: %s",
	       why);
	if (report_setup("RAM pool"))
		alloc_buffers();
	report_setup("buffers");

	irq_lapic_setup(&H.lapic);
	expect(H.lapic.enabled && H.lapic.probe_delivered, "LAPIC: SVR 0x%x, TPR 0x%x, self-IPI %s",
	       H.lapic.svr, H.lapic.tpr, H.lapic.probe_delivered ? "delivered" : "lost");
	mp_routing_load(&H.mp);
	expect(H.mp.ok, "MP table: %s", H.mp.why ? H.mp.why : "?");
	if (H.mp.ok)
		irq_set_ioapic(H.mp.ioapic);
	report_setup("interrupts");
	find_devices();
	if (!report_setup("devices") || H.setup_failures) {
		printf("hostile: set-up failed, no attacks run\n");
		return 1;
	}
	for (unsigned k = 0; k < HD_COUNT; k++)
		hdev_setup_irq(&H.dev[k]);
	for (unsigned k = HD_BLK; k < HD_VIRTIO_END; k++)
		hdev_up(&H.dev[k], 0);
	for (unsigned k = 0; k < HD_COUNT; k++)
		hdev_works(&H.dev[k], "before any attack");
	uint64_t cap = virtio_config_read(&H.dev[HD_BLK].vp, 0, 8);
	expect(cap == H.sectors, "blk capacity %lu sectors, hostile.sectors says %lu", cap,
	       H.sectors);
	if (!report_setup("devices work before the attacks")) {
		printf("hostile: set-up failed, no attacks run\n");
		return 1;
	}
	info("interrupts: %s", H.expect_msix ? "MSI-X" : "INTx through the IOAPIC");
	if (H.flood) {
		if (H.flood_blk)
			blk_feed_forever(&H.dev[HD_BLK]);
		else
			rng_flood_forever(&H.dev[HD_RNG]);
		return 1;
	}

	for (unsigned i = 0; i < NCASES; i++) {
		if (H.only && (strlen(cases[i].name) != H.only_len ||
			       strncmp(cases[i].name, H.only, H.only_len)))
			continue;
		run_case(&cases[i]);
	}

	for (unsigned k = HD_BLK; k < HD_VIRTIO_END; k++)
		hdev_reset(&H.dev[k]);
	report_setup("final reset");
	info("the longest wait for an expected event took %lu us (bound %u us)", H.max_wait_us,
	     H_WAIT_US);
	if (H.fs_gone)
		printf("hostile: fs backend gone\n");
	printf("hostile: needs-reset seen: blk %u, rng %u, fs %u\n", H.dev[HD_BLK].needs_reset_seen,
	       H.dev[HD_RNG].needs_reset_seen, H.dev[HD_FS].needs_reset_seen);
	if (H.failed || H.setup_failures || !H.cases) {
		printf("hostile: %u of %u cases failed%s\n", H.failed, H.cases,
		       H.setup_failures ? " (and set-up failed)" : "");
		return 1;
	}
	printf("hostile: all %u cases passed\n", H.cases);
	return 0;
}

int guest_main(struct boot_params *bp)
{
	irq_install();
	return run_user_irq(user_main, bp) ? 1 : 0;
}
