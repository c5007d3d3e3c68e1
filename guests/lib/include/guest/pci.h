/*
 * PCI configuration space through configuration mechanism #1 (ports 0xCF8
 * and 0xCFC; PCI Local Bus 3.0, 3.2.2.3.2), type-0 header offsets (6.1),
 * command/status bits (6.2.2, 6.2.3), BAR sizing (6.2.5.1), the capability
 * list (6.7) and the MSI-X capability (6.8.2).
 *
 * Port I/O only, so it works at CPL 0 and in run_user(). Nothing here is
 * safe against an interrupt handler that also uses 0xCF8 between the address
 * and the data access; guests keep config cycles out of their handlers.
 */
#ifndef GUEST_PCI_H
#define GUEST_PCI_H

#include <stdbool.h>
#include <stdint.h>

#define PCI_CONF1_ADDR	 0xCF8
#define PCI_CONF1_DATA	 0xCFC
#define PCI_CONF1_ENABLE 0x80000000u

/* Type-0 header (PCI 3.0, 6.1, figure 6-1). */
#define PCI_VENDOR_ID	   0x00
#define PCI_DEVICE_ID	   0x02
#define PCI_COMMAND	   0x04
#define PCI_STATUS	   0x06
#define PCI_CLASS_REV	   0x08 /* revision in bits 7:0, class code in 31:8 */
#define PCI_HEADER_TYPE	   0x0E
#define PCI_BAR0	   0x10
#define PCI_NUM_BARS	   6
#define PCI_CAP_PTR	   0x34
#define PCI_INTERRUPT_LINE 0x3C
#define PCI_INTERRUPT_PIN  0x3D

#define PCI_VENDOR_NONE		 0xFFFF /* 6.2.1: no function answers */
#define PCI_HEADER_TYPE_MASK	 0x7F
#define PCI_HEADER_MULTIFUNCTION 0x80

/* Command register (6.2.2). */
#define PCI_CMD_IO	     0x0001
#define PCI_CMD_MEMORY	     0x0002
#define PCI_CMD_MASTER	     0x0004
#define PCI_CMD_INTX_DISABLE 0x0400

/* Status register (6.2.3). */
#define PCI_STATUS_INTERRUPT 0x0008 /* INTx# is being signalled, whatever bit 10 says */
#define PCI_STATUS_CAP_LIST  0x0010

/* Base address registers (6.2.5.1). */
#define PCI_BAR_IO	      0x1
#define PCI_BAR_MEM_TYPE_MASK 0x6
#define PCI_BAR_MEM_TYPE_32   0x0
#define PCI_BAR_MEM_TYPE_64   0x4
#define PCI_BAR_MEM_PREFETCH  0x8
#define PCI_BAR_MEM_ADDR_MASK 0xFFFFFFF0u

/* Capability IDs (PCI Code and ID Assignment, and 6.8.2 for MSI-X). */
#define PCI_CAP_ID_MSI	0x05
#define PCI_CAP_ID_MSIX 0x11

/* MSI-X capability (6.8.2.1 - 6.8.2.5) and table/PBA layout (6.8.2.6 - 6.8.2.10). */
#define PCI_MSIX_CTRL		 2	/* Message Control, 16 bits */
#define PCI_MSIX_TABLE		 4	/* Table Offset / Table BIR */
#define PCI_MSIX_PBA		 8	/* PBA Offset / PBA BIR */
#define PCI_MSIX_CTRL_SIZE_MASK	 0x07FF /* table size - 1, read-only */
#define PCI_MSIX_CTRL_FMASK	 0x4000 /* function mask */
#define PCI_MSIX_CTRL_ENABLE	 0x8000
#define PCI_MSIX_BIR_MASK	 0x7
#define PCI_MSIX_ENTRY_SIZE	 16
#define PCI_MSIX_ENTRY_ADDR_LO	 0x0
#define PCI_MSIX_ENTRY_ADDR_HI	 0x4
#define PCI_MSIX_ENTRY_DATA	 0x8
#define PCI_MSIX_ENTRY_CTRL	 0xC
#define PCI_MSIX_ENTRY_CTRL_MASK 0x1

/* 3.2.2.3.2: bus 23:16, device 15:11, function 10:8, dword register 7:2. */
static inline uint32_t pci_conf1_address(unsigned bus, unsigned dev, unsigned fn, unsigned off)
{
	return PCI_CONF1_ENABLE | (bus & 0xFF) << 16 | (dev & 0x1F) << 11 | (fn & 7) << 8 |
	       (off & 0xFC);
}

uint32_t pci_read32(unsigned bus, unsigned dev, unsigned fn, unsigned off);
uint16_t pci_read16(unsigned bus, unsigned dev, unsigned fn, unsigned off);
uint8_t pci_read8(unsigned bus, unsigned dev, unsigned fn, unsigned off);
void pci_write32(unsigned bus, unsigned dev, unsigned fn, unsigned off, uint32_t v);
/* Word and byte writes use the matching byte lanes of 0xCFC, so a command
 * write never touches the write-1-to-clear status bits beside it. */
void pci_write16(unsigned bus, unsigned dev, unsigned fn, unsigned off, uint16_t v);
void pci_write8(unsigned bus, unsigned dev, unsigned fn, unsigned off, uint8_t v);

/* Sizes the BAR at config offset `off` as 6.2.5.1 describes: I/O and memory
 * decoding off, write all-ones, read, restore the BAR, restore the command
 * register. *raw is the value read back (0: not implemented); *orig the
 * value before. Only the low dword of a 64-bit BAR is sized. */
void pci_bar_probe(unsigned bus, unsigned dev, unsigned fn, unsigned off, uint32_t *orig,
		   uint32_t *raw);
/* The size a memory BAR's sizing read-back encodes (0 if none). */
uint64_t pci_bar_mem_size(uint32_t raw);

/* Walks the capability list (6.7). Stores up to max (offset, ID) pairs and
 * returns how many capabilities there are; *err is set to a description if
 * the list is malformed (a pointer below 0x40 or with its reserved low bits
 * set, or a loop), NULL otherwise. Status bit 4 is not consulted: callers
 * check it against the result. */
unsigned pci_cap_walk(unsigned bus, unsigned dev, unsigned fn, uint8_t *offs, uint8_t *ids,
		      unsigned max, const char **err);

#endif
