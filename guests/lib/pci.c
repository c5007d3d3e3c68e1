/*
 * PCI configuration mechanism #1 (PCI Local Bus 3.0, 3.2.2.3.2), BAR sizing
 * (6.2.5.1) and the capability list (6.7). See guest/pci.h.
 */
#include "guest/pci.h"
#include "guest/io.h"

#include <stddef.h>

uint32_t pci_read32(unsigned bus, unsigned dev, unsigned fn, unsigned off)
{
	outl(PCI_CONF1_ADDR, pci_conf1_address(bus, dev, fn, off));
	return inl(PCI_CONF1_DATA);
}

/* 3.2.2.3.2: the low address bits select the byte lanes of the 0xCFC dword. */
uint16_t pci_read16(unsigned bus, unsigned dev, unsigned fn, unsigned off)
{
	outl(PCI_CONF1_ADDR, pci_conf1_address(bus, dev, fn, off));
	return inw((uint16_t)(PCI_CONF1_DATA + (off & 2)));
}

uint8_t pci_read8(unsigned bus, unsigned dev, unsigned fn, unsigned off)
{
	outl(PCI_CONF1_ADDR, pci_conf1_address(bus, dev, fn, off));
	return inb((uint16_t)(PCI_CONF1_DATA + (off & 3)));
}

void pci_write32(unsigned bus, unsigned dev, unsigned fn, unsigned off, uint32_t v)
{
	outl(PCI_CONF1_ADDR, pci_conf1_address(bus, dev, fn, off));
	outl(PCI_CONF1_DATA, v);
}

void pci_write16(unsigned bus, unsigned dev, unsigned fn, unsigned off, uint16_t v)
{
	outl(PCI_CONF1_ADDR, pci_conf1_address(bus, dev, fn, off));
	outw((uint16_t)(PCI_CONF1_DATA + (off & 2)), v);
}

void pci_write8(unsigned bus, unsigned dev, unsigned fn, unsigned off, uint8_t v)
{
	outl(PCI_CONF1_ADDR, pci_conf1_address(bus, dev, fn, off));
	outb((uint16_t)(PCI_CONF1_DATA + (off & 3)), v);
}

void pci_bar_probe(unsigned bus, unsigned dev, unsigned fn, unsigned off, uint32_t *orig,
		   uint32_t *raw)
{
	uint16_t cmd = pci_read16(bus, dev, fn, PCI_COMMAND);

	/* 6.2.5.1: decoding goes off first, so the all-ones pattern is never
	 * decoded as an address. */
	pci_write16(bus, dev, fn, PCI_COMMAND, cmd & (uint16_t) ~(PCI_CMD_IO | PCI_CMD_MEMORY));
	*orig = pci_read32(bus, dev, fn, off);
	pci_write32(bus, dev, fn, off, 0xFFFFFFFFu);
	*raw = pci_read32(bus, dev, fn, off);
	pci_write32(bus, dev, fn, off, *orig);
	pci_write16(bus, dev, fn, PCI_COMMAND, cmd);
}

uint64_t pci_bar_mem_size(uint32_t raw)
{
	uint32_t mask = raw & PCI_BAR_MEM_ADDR_MASK;

	/* The lowest writable address bit is the size (6.2.5.1). */
	return mask ? (uint64_t)(mask & -mask) : 0;
}

unsigned pci_cap_walk(unsigned bus, unsigned dev, unsigned fn, uint8_t *offs, uint8_t *ids,
		      unsigned max, const char **err)
{
	uint64_t seen = 0; /* one bit per dword of 0x40..0xFF */
	unsigned n = 0;
	uint8_t ptr = pci_read8(bus, dev, fn, PCI_CAP_PTR);

	*err = NULL;
	while (ptr) {
		/* 6.7: capabilities live after the 64-byte header, dword
		 * aligned; the two low bits are reserved and must read 0. */
		if (ptr < 0x40 || (ptr & 3)) {
			*err = "a capability pointer below 0x40 or not dword-aligned";
			break;
		}
		uint64_t bit = 1ull << ((ptr - 0x40) / 4);
		if (seen & bit) {
			*err = "the capability list loops";
			break;
		}
		seen |= bit;
		uint16_t hdr = pci_read16(bus, dev, fn, ptr);
		if (n < max) {
			offs[n] = ptr;
			ids[n] = (uint8_t)hdr;
		}
		n++;
		ptr = (uint8_t)(hdr >> 8);
	}
	return n;
}
