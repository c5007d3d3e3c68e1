/*
 * libFuzzer target: a hostile virtio driver against the modern virtio-pci
 * transport with a virtio-rng (slot 3) and a virtio-console (slot 4) on
 * PCI bus 0, behind the interrupt door over a recording sink (IRQ_MSI_SIGNAL,
 * IRQ_INTX_LINE), over fake guest RAM. The host is faked: ioeventfd()
 * records and succeeds; watch() records (fd, ready, arg) so "run the I/O
 * thread" can call ready(arg) for each readable eventfd, as the main loop
 * does. The rng's entropy source is fuzz_getrandom(): it checks
 * the buffer lies in RAM and fills it with a cheap, deterministic pattern;
 * the console's char_sink does the same check and discards.
 * Byte 0: bit 0 puts the rng in IRQ_MODE_INTX, bit 1 the console. Then operations,
 * each one opcode byte; dev = (op >> 3) & 1 (0 rng, 1 console):
 *   op & 7 = 0  BAR0 write, len 1/2/4/8 by (op >> 4) & 3, at
 *               0x1000 * (op >> 6) + next byte (common, ISR, device, notify)
 *            1  BAR0 read, likewise
 *            2  config space: len 1/2/4/4 by (op >> 4) & 3, register from the
 *               next byte r; bit 6: r selects capability r >> 5 of the list
 *               (0 common .. 4 pci-cfg access, 5 MSI-X) + (r & 31);
 *               bit 7: read, else write the next len bytes
 *            3  guest RAM write: 3-byte address (mod RAM), (next & 63) + 1 bytes
 *            4  run the I/O thread
 *            5  virtio_console_receive of ((op >> 3) & 15) + 1 bytes
 *            6  raw BAR access: flags byte f: dev f & 1, (f >> 1) & 3 = BAR0
 *               write/read, BAR2 (MSI-X) write/read; len 1/2/4/8 by (f >> 3) & 3;
 *               2-byte offset, mod the BAR size unless f & 0x80 (may straddle)
 *            7  notify queue (op >> 4) & 7 (2-byte write); bit 7: then run
 *               the I/O thread
 * The run ends at the end of input or after MAX_OPS operations.
 */
#include "fuzz_common.h"
#include "fuzz_sink.h"

#include "devices/pci/pci.h"
#include "devices/virtio/virtio_console.h"
#include "devices/virtio/virtio_pci.h"
#include "devices/virtio/virtio_rng.h"
#include "irq/irq.h"

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#define RAM_SIZE  (1ULL << 20)
#define MAX_OPS	  4096
#define MAX_WATCH 16
#define MAX_CAPS  8

FUZZ_GUEST_RAM(ram, RAM_SIZE)

/* Host buffers handed out by the devices must lie inside guest RAM. */
static void check_in_ram(const void *p, size_t len, const char *who)
{
	const uint8_t *b = p;
	if (len == 0)
		return;
	if (b < ram.buf || b > ram.buf + ram.size || len > (size_t)(ram.buf + ram.size - b)) {
		fprintf(stderr, "%s: buffer %p+%zu outside guest RAM [%p, +%llu)\n", who, p, len,
			(void *)ram.buf, (unsigned long long)ram.size);
		abort();
	}
}

/* The rng's entropy source here: checked, cheap, and deterministic, so a
 * run replays exactly. */
static ssize_t fuzz_getrandom(void *buf, size_t len, unsigned flags)
{
	(void)flags;
	check_in_ram(buf, len, "getrandom");
	uint8_t *b = buf;
	b[0] = 0xA5;
	b[len - 1] = 0x5A;
	return (ssize_t)len;
}

struct watch {
	int fd;
	void (*ready)(void *arg);
	void *arg;
};

/* Everything per run lives here and is rebuilt from zero each time. */
static struct {
	struct fuzz_pci_machine m;
	struct virtio_rng rng;
	struct virtio_console con;
	struct virtio_pci vp[2];
	struct watch watches[MAX_WATCH];
	unsigned nwatch, ioeventfds;
	uint8_t caps[2][MAX_CAPS];
	uint64_t tx_bytes;
} w;

static const uint8_t slots[2] = {3, 4};

static int fake_ioeventfd(void *ctx, uint64_t gpa, unsigned len, int fd, bool assign)
{
	(void)ctx;
	(void)gpa;
	(void)len;
	(void)fd;
	(void)assign;
	w.ioeventfds++;
	return 0;
}

static int fake_watch(void *ctx, unsigned q, int fd, void (*ready)(void *arg), void *arg)
{
	(void)ctx;
	(void)q;
	if (w.nwatch >= MAX_WATCH)
		abort();
	w.watches[w.nwatch++] = (struct watch){fd, ready, arg};
	return 0;
}

static void discard(void *ctx, const uint8_t *buf, size_t len)
{
	(void)ctx;
	check_in_ram(buf, len, "console sink");
	w.tx_bytes += len;
}

/* The main loop: every watched eventfd that is readable gets ready(arg). */
static void run_io_thread(void)
{
	for (unsigned i = 0; i < w.nwatch; i++) {
		struct pollfd p = {.fd = w.watches[i].fd, .events = POLLIN};
		if (poll(&p, 1, 0) == 1 && (p.revents & POLLIN))
			w.watches[i].ready(w.watches[i].arg);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	struct in in = {data, size};
	uint8_t mode = (uint8_t)take(&in, 1);

	fuzz_ram_reset(&ram);
	memset(&w, 0, sizeof(w));
	fuzz_pci_machine_init(&w.m, &ram.m, fuzz_devnull());
	struct virtio_host host = {
	    .ioeventfd = fake_ioeventfd, .watch = fake_watch, .ctx = NULL, .log = &w.m.log};
	if (virtio_rng_init(&w.rng, fuzz_getrandom) ||
	    virtio_console_init(&w.con, (struct char_sink){.write = discard}))
		abort();
	if (virtio_pci_init(&w.vp[0], &w.rng.vdev, "virtio-rng", &w.m.irq, &ram.m, &host,
			    (mode & 1) ? IRQ_MODE_INTX : IRQ_MODE_MSIX) ||
	    virtio_pci_init(&w.vp[1], &w.con.vdev, "virtio-console", &w.m.irq, &ram.m, &host,
			    (mode & 2) ? IRQ_MODE_INTX : IRQ_MODE_MSIX))
		abort();
	for (int i = 0; i < 2; i++)
		if (pci_bus_add_device(&w.m.pci, &w.vp[i].pci, slots[i], 1))
			abort();
	if (pci_bus_assign_resources(&w.m.pci))
		abort();
	for (int i = 0; i < 2; i++) {
		const struct pci_device *d = &w.vp[i].pci;
		uint8_t c = d->cfg[PCI_CAPABILITY_LIST];
		for (unsigned k = 0; k < MAX_CAPS && c; k++, c = d->cfg[c + 1])
			w.caps[i][k] = c;
	}

	for (unsigned n = 0; n < MAX_OPS && in.left; n++) {
		uint8_t op = (uint8_t)take(&in, 1);
		static const unsigned mlens[4] = {1, 2, 4, 8};
		unsigned dev = (op >> 3) & 1;
		struct virtio_pci *vp = &w.vp[dev];
		uint8_t buf[8];
		switch (op & 7) {
		case 0:
		case 1: {
			unsigned len = mlens[(op >> 4) & 3];
			uint64_t addr =
			    fuzz_bar_addr(&vp->pci, 0) + 0x1000ULL * (op >> 6) + take(&in, 1);
			if ((op & 7) == 0) {
				uint64_t v = take(&in, len);
				memcpy(buf, &v, 8);
				bus_write(&w.m.mmio, addr, buf, len);
			} else {
				bus_read(&w.m.mmio, addr, buf, len);
			}
			break;
		}
		case 2: {
			static const unsigned clens[4] = {1, 2, 4, 4};
			unsigned len = clens[(op >> 4) & 3];
			uint8_t r = (uint8_t)take(&in, 1);
			unsigned reg = r;
			if (op & 0x40)
				reg = w.caps[dev][r >> 5] + (r & 31u);
			uint8_t devfn = (uint8_t)(slots[dev] << 3);
			if (op & 0x80) {
				(void)pci_config_read(&w.m.pci, 0, devfn, reg, len);
			} else {
				uint32_t v = (uint32_t)take(&in, len);
				pci_config_write(&w.m.pci, 0, devfn, reg, len, v);
			}
			break;
		}
		case 3: {
			uint64_t a = take(&in, 3) % RAM_SIZE;
			size_t len = (take(&in, 1) & 63) + 1;
			if (len > in.left)
				len = in.left;
			if (len > RAM_SIZE - a)
				len = RAM_SIZE - a;
			memcpy(ram.buf + a, in.p, len);
			in.p += len;
			in.left -= len;
			break;
		}
		case 4: run_io_thread(); break;
		case 5: {
			size_t len = ((op >> 3) & 15u) + 1;
			if (len > in.left)
				len = in.left;
			virtio_console_receive(&w.con, in.p, len);
			in.p += len;
			in.left -= len;
			break;
		}
		case 6: {
			uint8_t f = (uint8_t)take(&in, 1);
			vp = &w.vp[f & 1];
			unsigned kind = (f >> 1) & 3, len = mlens[(f >> 3) & 3];
			int bar = kind < 2 ? 0 : VIRTIO_PCI_MSIX_BAR;
			uint64_t bsize = vp->pci.bars[bar].size, off = take(&in, 2);
			if (!(f & 0x80))
				off %= bsize ? bsize : 1;
			uint64_t addr = fuzz_bar_addr(&vp->pci, bar) + off;
			if (!(kind & 1)) {
				uint64_t v = take(&in, len);
				memcpy(buf, &v, 8);
				bus_write(&w.m.mmio, addr, buf, len);
			} else {
				bus_read(&w.m.mmio, addr, buf, len);
			}
			break;
		}
		case 7: {
			uint16_t v = (uint16_t)((op >> 4) & 7);
			bus_write(&w.m.mmio,
				  fuzz_bar_addr(&vp->pci, 0) + VIRTIO_PCI_NOTIFY_OFF +
				      VIRTIO_PCI_NOTIFY_MULT * (uint64_t)((op >> 4) & 7),
				  &v, 2);
			if (op & 0x80)
				run_io_thread();
			break;
		}
		}
	}

	if (getenv("FUZZ_VIRTIO_TRACE")) /* check a seed reaches the devices */
		fprintf(stderr,
			"status %#x/%#x notifies %lu/%lu irqs %lu/%lu broken %lu/%lu rng %lu "
			"tx %lu rx %lu msis %u lines %u ioeventfds %u caps %#x..%#x\n",
			w.vp[0].status, w.vp[1].status, (unsigned long)w.vp[0].notifies,
			(unsigned long)w.vp[1].notifies, (unsigned long)w.vp[0].interrupts,
			(unsigned long)w.vp[1].interrupts, (unsigned long)w.vp[0].broken,
			(unsigned long)w.vp[1].broken, (unsigned long)w.rng.bytes,
			(unsigned long)w.con.tx_bytes, (unsigned long)w.con.rx_bytes, w.m.sink.msis,
			w.m.sink.lines, w.ioeventfds, w.caps[0][0], w.caps[0][5]);
	for (int i = 0; i < 2; i++)
		virtio_pci_destroy(&w.vp[i]);
	virtio_rng_destroy(&w.rng);
	virtio_console_destroy(&w.con);
	fuzz_pci_machine_destroy(&w.m);
	return 0;
}
