/*
 * libFuzzer target: a hostile guest against PCI bus 0 with the host bridge
 * and two pci_testdev devices (MSI-X in BAR1) behind the interrupt door
 * over a recording sink. Byte 0 picks the delivery modes (IRQ_MSI_SIGNAL,
 * IRQ_INTX_LINE; bit 0 puts dev1 in IRQ_MODE_INTX) and byte 1 dev1's
 * vector count; then a sequence of operations, each one opcode byte:
 *   op & 7 = 0  CONFIG_ADDRESS write: raw dword, or (bit3) a structured
 *               enable|bus 0|slot|fn|reg from the next 2 bytes
 *            1  CONFIG_DATA write, len 1/2/4 at 0xCFC + (op >> 6)
 *            2  CONFIG_DATA read,  likewise
 *            3  odd-sized CONFIG_ADDRESS read/write (1/2 bytes at 0xCF8+n)
 *            4  MMIO write, 1/2/4/8 bytes, at an offset in a device's BAR
 *               (the address its BAR register holds now)
 *            5  MMIO read, likewise
 *            6  doorbell: BAR0 + 8 <- next byte (MSI-X vector or INTx)
 *            7  INTx ack (BAR0 + 0x10)
 * The run ends at the end of input or after MAX_OPS operations.
 */
#include "fuzz_common.h"
#include "fuzz_sink.h"

#include "devices/pci/pci_testdev.h"
#include "irq/irq.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define RAM_SIZE (16ULL << 20)
#define MAX_OPS	 4096

FUZZ_GUEST_RAM(ram, RAM_SIZE)

/* Everything per run lives here and is rebuilt from zero each time. */
static struct {
	struct fuzz_pci_machine m;
	struct pci_testdev dev[2];
} w;

static const uint8_t slots[2] = {3, 4};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	struct in in = {data, size};
	uint8_t mode = (uint8_t)take(&in, 1);
	unsigned nvec1 = 1 + (unsigned)take(&in, 1);

	memset(&w, 0, sizeof(w));
	fuzz_pci_machine_init(&w.m, &ram.m, fuzz_devnull());
	if (pci_testdev_init(&w.dev[0], "testdev0", &w.m.irq, 4, IRQ_MODE_MSIX) ||
	    pci_testdev_init(&w.dev[1], "testdev1", &w.m.irq, nvec1,
			     (mode & 1) ? IRQ_MODE_INTX : IRQ_MODE_MSIX))
		abort();
	for (int i = 0; i < 2; i++)
		if (pci_bus_add_device(&w.m.pci, &w.dev[i].pci, slots[i], (uint8_t)(1 + i)))
			abort();
	if (pci_bus_assign_resources(&w.m.pci))
		abort();

	for (unsigned n = 0; n < MAX_OPS && in.left; n++) {
		uint8_t op = (uint8_t)take(&in, 1);
		static const unsigned lens[4] = {1, 2, 4, 4};
		unsigned len = lens[(op >> 4) & 3];
		uint8_t buf[8];
		switch (op & 7) {
		case 0: {
			uint32_t v;
			if (op & 8) {
				uint8_t s = (uint8_t)take(&in, 1), reg = (uint8_t)take(&in, 1);
				v = 0x80000000u | (uint32_t)(s & 0x1F) << 11 |
				    (uint32_t)((s >> 5) & 7) << 8 | reg;
				if (op & 0x80)
					v ^= 0x80000000u; /* disabled, or a bus != 0 */
				if (op & 0x40)
					v |= 0x00010000u;
			} else {
				v = (uint32_t)take(&in, 4);
			}
			bus_write(&w.m.pio, PCI_CONF1_ADDR, &v, 4);
			break;
		}
		case 1: {
			uint64_t v = take(&in, len);
			memcpy(buf, &v, 8);
			bus_write(&w.m.pio, PCI_CONF1_DATA + (op >> 6), buf, len);
			break;
		}
		case 2: bus_read(&w.m.pio, PCI_CONF1_DATA + (op >> 6), buf, len); break;
		case 3: {
			unsigned l = (op & 8) ? 2 : 1;
			uint64_t port = PCI_CONF1_ADDR + ((op >> 6) & 3);
			if (op & 0x10) {
				uint64_t v = take(&in, l);
				memcpy(buf, &v, 8);
				bus_write(&w.m.pio, port, buf, l);
			} else {
				bus_read(&w.m.pio, port, buf, l);
			}
			break;
		}
		case 4:
		case 5: {
			static const unsigned mlens[4] = {1, 2, 4, 8};
			unsigned ml = mlens[(op >> 4) & 3];
			struct pci_testdev *t = &w.dev[(op >> 3) & 1];
			int bar = (op >> 6) & 1;
			uint64_t bsize = t->pci.bars[bar].size;
			uint64_t off = take(&in, 2);
			if (!(op & 0x80))
				off %= bsize ? bsize : 1; /* else may straddle the end */
			uint64_t addr = fuzz_bar_addr(&t->pci, bar) + off;
			if ((op & 7) == 4) {
				uint64_t v = take(&in, ml);
				memcpy(buf, &v, 8);
				bus_write(&w.m.mmio, addr, buf, ml);
			} else {
				bus_read(&w.m.mmio, addr, buf, ml);
			}
			break;
		}
		case 6: {
			struct pci_testdev *t = &w.dev[(op >> 3) & 1];
			uint32_t v = (uint32_t)take(&in, 1);
			if (op & 0x80)
				v |= 0xFFFFFF00u;
			bus_write(&w.m.mmio, fuzz_bar_addr(&t->pci, 0) + TESTDEV_REG_DOORBELL, &v,
				  4);
			break;
		}
		case 7: {
			struct pci_testdev *t = &w.dev[(op >> 3) & 1];
			uint32_t v = 0;
			bus_write(&w.m.mmio, fuzz_bar_addr(&t->pci, 0) + TESTDEV_REG_INTX_ACK, &v,
				  4);
			break;
		}
		}
	}

	for (int i = 0; i < 2; i++)
		pci_testdev_destroy(&w.dev[i]);
	fuzz_pci_machine_destroy(&w.m);
	return 0;
}
