/*
 * flushtest: the guest of the fault and no-lost-writes tests
 * (tests/faults/, guests/README.md "Running flushtest").
 *
 * Modes (flushtest.mode=):
 *   write     writes 4 KiB blocks 0, 1, 2, ... (block s at sector 8 s, its
 *             pattern made from s and flushtest.cycle), `batch` in flight
 *             at once; when a batch is done and, with FLUSH negotiated, a
 *             FLUSH after it has completed, prints "flushtest: acked S":
 *             blocks 0..S-1 are durable. At the end "flushtest: done S".
 *             The host kills the VMM at random points and checks the disk.
 *   ioerr     writes blocks one at a time until one fails with IOERR (the
 *             host's disk is full), then checks that the device goes on:
 *             the failed write fails again, a block written before reads
 *             back, FLUSH completes, no NEEDS_RESET.
 *   readfail  reads and checks blocks the host wrote (cycle 0) round the
 *             disk; prints "flushtest: reads ok" (the host then makes the
 *             disk unreadable) and reads on until IOERR; four more reads
 *             fail too; prints "flushtest: read IOERR" (the host makes the
 *             disk readable again) and reads until one succeeds.
 *   tapgone   virtio-net and virtio-blk: sends frames until told the tap is
 *             going ("flushtest: tap in use"), then until the net device
 *             sets NEEDS_RESET or stops using transmit buffers; then the
 *             blk device must still write, flush and read.
 * Each mode ends with "flushtest: pass" and debug-exit 0 (VMM exit 1), or
 * "flushtest: FAIL ..." and debug-exit 1 (VMM exit 3).
 *
 * Keys: flushtest.mode, flushtest.cycle=N (0), flushtest.batch=N (1-32,
 * 8), flushtest.blocks=N (blocks to use, 0: the whole disk; 0),
 * flushtest.flush=0|1 (negotiate VIRTIO_BLK_F_FLUSH; 1; without it every
 * completed write must be durable, 5.2.6.2), flushtest.wait_s=N (how long
 * one request or state change may take, 30). Any other flushtest.* key
 * fails.
 */
#include "flushtest.h"

#include "guest/cmdline.h"
#include "guest/pci.h"
#include "guest/ram.h"
#include "guest/tsc.h"

#define POOL_BYTES  (4ull << 20)
#define MAX_FUNCS   32
#define RESET_POLLS 100000

struct flushtest ft;
static struct pci_func funcs[MAX_FUNCS];
static unsigned failures;

static const char *const known_keys[] = {"flushtest.mode",   "flushtest.cycle", "flushtest.batch",
					 "flushtest.blocks", "flushtest.flush", "flushtest.wait_s"};

void ft_fail(const char *fmt, ...)
{
	va_list ap;
	printf("flushtest: FAIL ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	failures++;
}

uint64_t ft_us(uint64_t us)
{
	return ft.tsc_hz / 1000000 * us;
}

static bool key_u64(const char *cl, const char *key, uint64_t *out, uint64_t lo, uint64_t hi)
{
	char why[200];
	if (cmdline_u64_in(cl, key, out, lo, hi, why, sizeof(why)))
		return true;
	ft_fail("%s", why);
	return false;
}

static bool parse_cmdline(const struct boot_params *bp)
{
	const char *cl = cmdline_get(bp);
	char first[64];
	uint64_t flush = 1;

	ft.mode = "write";
	ft.mode_len = 5;
	ft.batch = 8;
	ft.wait_s = 30;
	if (!cl)
		return true;
	if (cmdline_unknown_keys(cl, "flushtest.", known_keys,
				 sizeof(known_keys) / sizeof(*known_keys), first, sizeof(first))) {
		ft_fail("unknown command-line key \"%s\"", first);
		return false;
	}
	cmdline_value(cl, "flushtest.mode", &ft.mode, &ft.mode_len);
	if (!key_u64(cl, "flushtest.cycle", &ft.cycle, 0, 0xFFFFFFFFu) ||
	    !key_u64(cl, "flushtest.batch", &ft.batch, 1, FT_MAX_DEPTH) ||
	    !key_u64(cl, "flushtest.blocks", &ft.blocks, 0, 1ull << 40) ||
	    !key_u64(cl, "flushtest.flush", &flush, 0, 1) ||
	    !key_u64(cl, "flushtest.wait_s", &ft.wait_s, 1, 3600))
		return false;
	ft.flush = flush;
	return true;
}

bool ft_needs_reset(const struct ft_dev *d)
{
	return virtio_status(&d->vp) & VIRTIO_STATUS_NEEDS_RESET;
}

bool ft_bringup(struct ft_dev *d, uint16_t type, uint64_t wanted, unsigned nq)
{
	const char *why;
	uint16_t vec;

	uint16_t cmd = pci_read16(0, d->pf->slot, 0, PCI_COMMAND);
	pci_write16(0, d->pf->slot, 0, PCI_COMMAND, cmd | PCI_CMD_MEMORY | PCI_CMD_MASTER);
	if (!virtio_pci_parse(d->pf->slot, type, d->pf->bar, d->pf->bar_size, &d->vp, &why)) {
		ft_fail("%s: %s", d->name, why);
		return false;
	}
	if (!virtio_reset(&d->vp, RESET_POLLS)) {
		ft_fail("%s: reset does not read back 0", d->name);
		return false;
	}
	virtio_set_status(&d->vp, VIRTIO_STATUS_ACKNOWLEDGE);
	virtio_set_status(&d->vp, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	uint64_t offered = virtio_device_features(&d->vp);
	if (!(offered & VIRTIO_F_BIT(VIRTIO_F_VERSION_1))) {
		ft_fail("%s: no VIRTIO_F_VERSION_1", d->name);
		return false;
	}
	d->features = VIRTIO_F_BIT(VIRTIO_F_VERSION_1) | (wanted & offered);
	virtio_set_driver_features(&d->vp, d->features);
	virtio_set_status(&d->vp, 3 | VIRTIO_STATUS_FEATURES_OK);
	if (!(virtio_status(&d->vp) & VIRTIO_STATUS_FEATURES_OK)) {
		ft_fail("%s: FEATURES_OK did not stick", d->name);
		return false;
	}
	/* Polled: no configuration vector, none per queue (4.1.5.1.2), and
	 * no used-buffer notifications (2.7.7). */
	virtio_cc_write16(&d->vp, VIRTIO_CC_MSIX_CONFIG, VIRTIO_MSI_NO_VECTOR);
	for (unsigned q = 0; q < nq; q++) {
		if (!virtq_setup(&d->vp, q, FT_QUEUE_SIZE, VIRTIO_MSI_NO_VECTOR, &d->vq[q], &vec,
				 &why)) {
			ft_fail("%s: queue %u: %s", d->name, q, why);
			return false;
		}
		virtq_set_no_interrupt(&d->vq[q], true);
	}
	d->nq = nq;
	virtio_set_status(&d->vp, 3 | VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK);
	d->up = true;
	return true;
}

static void find_devices(void)
{
	unsigned n = pci_enum_bus0(funcs, MAX_FUNCS);

	for (unsigned i = 0; i < n && i < MAX_FUNCS; i++) {
		const struct pci_func *f = &funcs[i];
		if (f->vendor != VIRTIO_PCI_VENDOR)
			continue;
		if (f->device == VIRTIO_PCI_MODERN_DEVICE + VIRTIO_ID_BLOCK && !ft.blk.pf)
			ft.blk = (struct ft_dev){.pf = f, .name = "blk"};
		else if (f->device == VIRTIO_PCI_MODERN_DEVICE + VIRTIO_ID_NET && !ft.net.pf)
			ft.net = (struct ft_dev){.pf = f, .name = "net"};
	}
}

static bool mode_is(const char *m)
{
	return ft.mode_len == strlen(m) && !strncmp(ft.mode, m, ft.mode_len);
}

static uint64_t user_main(void *arg)
{
	const struct boot_params *bp = arg;
	const char *why;
	int ret;

	if (!parse_cmdline(bp))
		return 1;
	ft.tsc_hz = tsc_hz_from_pit();
	if (ft.tsc_hz < 100000000ull || ft.tsc_hz > 10000000000ull) {
		ft_fail("TSC rate %lu Hz from the PIT is implausible", ft.tsc_hz);
		return 1;
	}
	if (!ram_pool_init(bp, POOL_BYTES, &why)) {
		ft_fail("RAM pool: %s", why);
		return 1;
	}
	find_devices();
	printf("flushtest: mode %.*s, cycle %lu, batch %lu, flush %s\n", (int)ft.mode_len, ft.mode,
	       ft.cycle, ft.batch, ft.flush ? "negotiated" : "not negotiated");
	if (mode_is("write"))
		ret = ft_mode_write();
	else if (mode_is("ioerr"))
		ret = ft_mode_ioerr();
	else if (mode_is("readfail"))
		ret = ft_mode_readfail();
	else if (mode_is("tapgone"))
		ret = ft_mode_tapgone();
	else {
		ft_fail("flushtest.mode=\"%.*s\" is not write, ioerr, readfail or tapgone",
			(int)ft.mode_len, ft.mode);
		return 1;
	}
	if (ret || failures)
		return 1;
	printf("flushtest: pass\n");
	return 0;
}

int guest_main(struct boot_params *bp)
{
	if (run_user(user_main, bp))
		return 1;
	guest_exit(0);
}
