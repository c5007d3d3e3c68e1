/*
 * PCI bus 0 as a guest sees it (PCI Local Bus 3.0): configuration
 * mechanism #1 on ports 0xCF8/0xCFC (3.2.2.3.2), the type-0 header's
 * read-only, read-write and write-1-to-clear fields (6.1, 6.2), the
 * capability list (6.7), and BARs: sizing, decoding, moves (6.2.5.1).
 */
#include "helpers.h"
#include "virtio_helpers.h"

#include "devices/pci/msix.h"
#include "devices/pci/pci.h"
#include "devices/pci/pci_testdev.h"
#include "devices/virtio/virtio_pci.h"
#include "vmm/base/layout.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define SLOT 1
#define NVEC 4

static struct pci_rig rig;
static struct pci_testdev *dev;

static uint64_t pow2_ge(uint64_t v)
{
	uint64_t p = 1;
	while (p < v)
		p <<= 1;
	return p;
}

static uint64_t page_up(uint64_t v)
{
	return (v + 4095) & ~4095ULL;
}

/* Bytes the MSI-X table and PBA need, each on pages of its own. */
static uint64_t msix_pages(unsigned n)
{
	return page_up((uint64_t)n * 16) + page_up(((uint64_t)n + 63) / 64 * 8);
}

static void one_dev_setup(void)
{
	pci_rig_init(&rig, IRQ_MSI_SIGNAL, IRQ_INTX_LINE);
	dev = pci_rig_add(&rig, SLOT, NVEC);
	ck_assert_int_eq(pci_bus_assign_resources(&rig.pci), 0);
}

static void bare_setup(void)
{
	pci_rig_init(&rig, IRQ_MSI_SIGNAL, IRQ_INTX_LINE);
}

static void rig_teardown(void)
{
	pci_rig_free(&rig);
}

static bool mmio_claimed(uint64_t addr)
{
	uint8_t b[4];
	return bus_read(&rig.mmio, addr, b, 4);
}

/* ---- conf1 ---- */

START_TEST(test_conf1_dword_reads_ids_of_bridge_and_testdev)
{
	ck_assert_uint_eq(conf1_read(&rig, 0, SLOT, 0, 0x00, 4),
			  (uint32_t)TESTDEV_DEVICE << 16 | TESTDEV_VENDOR);
	uint32_t bridge = conf1_read(&rig, 0, 0, 0, 0x00, 4);
	ck_assert_uint_ne(bridge & 0xFFFF, 0xFFFF);
	ck_assert_uint_eq(conf1_read(&rig, 0, 0, 0, 0x08, 4) >> 8, 0x060000);
	ck_assert_uint_eq(conf1_read(&rig, 0, SLOT, 0, 0x08, 4) >> 8, 0xFF0000);
}
END_TEST

START_TEST(test_conf1_byte_and_word_reads_at_every_offset)
{
	/* Vendor 0x1234, device 0x7E57 at 0x00. */
	ck_assert_uint_eq(conf1_read(&rig, 0, SLOT, 0, 0x00, 1), 0x34);
	ck_assert_uint_eq(conf1_read(&rig, 0, SLOT, 0, 0x01, 1), 0x12);
	ck_assert_uint_eq(conf1_read(&rig, 0, SLOT, 0, 0x02, 1), 0x57);
	ck_assert_uint_eq(conf1_read(&rig, 0, SLOT, 0, 0x03, 1), 0x7E);
	ck_assert_uint_eq(conf1_read(&rig, 0, SLOT, 0, 0x00, 2), 0x1234);
	ck_assert_uint_eq(conf1_read(&rig, 0, SLOT, 0, 0x02, 2), 0x7E57);
	/* Class 0xFF0000 at 0x09-0x0B; interrupt pin INTA# at 0x3D. */
	ck_assert_uint_eq(conf1_read(&rig, 0, SLOT, 0, 0x0B, 1), 0xFF);
	ck_assert_uint_eq(conf1_read(&rig, 0, SLOT, 0, 0x0A, 2), 0xFF00); /* base 0xFF, sub 0x00 */
	ck_assert_uint_eq(conf1_read(&rig, 0, SLOT, 0, 0x3D, 1), 1);
	/* The same dword through one latched address, all three widths. */
	pio_out(&rig, 0xCF8, 4, conf1_address(0, SLOT, 0, 0x2C));
	uint32_t dw = pio_in(&rig, 0xCFC, 4);
	ck_assert_uint_eq(dw & 0xFFFF, TESTDEV_VENDOR); /* subsystem vendor */
	for (unsigned i = 0; i < 4; i++)
		ck_assert_uint_eq(pio_in(&rig, (uint16_t)(0xCFC + i), 1), (dw >> (8 * i)) & 0xFF);
	ck_assert_uint_eq(pio_in(&rig, 0xCFE, 2), dw >> 16);
}
END_TEST

START_TEST(test_conf1_writes_at_every_offset_reach_the_right_byte)
{
	conf1_write(&rig, 0, SLOT, 0, 0x3C, 1, 0x0B); /* 0xCFC byte: interrupt line */
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, 0x3C, 1), 0x0B);
	conf1_write(&rig, 0, SLOT, 0, 0x05, 1, PCI_COMMAND_INTX_DISABLE >> 8); /* 0xCFD byte */
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_COMMAND, 2) & PCI_COMMAND_INTX_DISABLE,
			  PCI_COMMAND_INTX_DISABLE);
	conf1_write(&rig, 0, SLOT, 0, 0x04, 2, PCI_COMMAND_MEMORY); /* 0xCFC word: command */
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_COMMAND, 2), PCI_COMMAND_MEMORY);
	rig.dev[0].pci.cfg[PCI_STATUS + 1] |= 0x80;	/* detected parity error */
	conf1_write(&rig, 0, SLOT, 0, 0x06, 2, 0x8000); /* 0xCFE word: status W1C */
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_STATUS, 2) & 0x8000, 0);
	uint8_t cap = (uint8_t)cfg_rd(&rig, SLOT, PCI_CAPABILITY_LIST, 1);
	ck_assert_uint_eq(cap & 3, 0);
	conf1_write(&rig, 0, SLOT, 0, cap + 3u, 1, PCI_MSIX_FLAGS_MASKALL >> 8); /* 0xCFF byte */
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, cap + 2u, 2) & 0xC000, PCI_MSIX_FLAGS_MASKALL);
	conf1_write(&rig, 0, SLOT, 0, 0x10, 4, 0xE0000000u); /* 0xCFC dword: BAR0 */
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, 0x10, 4), 0xE0000000u);
}
END_TEST

START_TEST(test_conf1_enable_bit_clear_reads_all_ones_and_drops_writes)
{
	pio_out(&rig, 0xCF8, 4, conf1_address(0, SLOT, 0, 0x00) & 0x7FFFFFFFu);
	ck_assert_uint_eq(pio_in(&rig, 0xCFC, 4), 0xFFFFFFFFu);
	ck_assert_uint_eq(pio_in(&rig, 0xCFE, 2), 0xFFFF);
	ck_assert_uint_eq(pio_in(&rig, 0xCFD, 1), 0xFF);
	uint8_t line = (uint8_t)cfg_rd(&rig, SLOT, 0x3C, 1);
	pio_out(&rig, 0xCF8, 4, conf1_address(0, SLOT, 0, 0x3C) & 0x7FFFFFFFu);
	pio_out(&rig, 0xCFC, 1, (uint8_t)~line);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, 0x3C, 1), line);
}
END_TEST

START_TEST(test_conf1_address_reads_back_latched)
{
	static const uint32_t addrs[] = {0x80000000u, 0x80000810u, 0x8000FFFCu, 0x80FF0804u,
					 0x00000810u};
	for (size_t i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++) {
		pio_out(&rig, 0xCF8, 4, addrs[i]);
		ck_assert_uint_eq(pio_in(&rig, 0xCF8, 4), addrs[i]);
	}
}
END_TEST

START_TEST(test_conf1_address_reserved_bits_read_zero)
{
	/* Bits 30:24 reserved and bits 1:0 read-only, both read 0. */
	pio_out(&rig, 0xCF8, 4, 0xFF000813u);
	ck_assert_uint_eq(pio_in(&rig, 0xCF8, 4), 0x80000810u);
}
END_TEST

START_TEST(test_conf1_byte_and_word_writes_to_cf8_keep_the_address)
{
	uint32_t a = conf1_address(0, SLOT, 0, 0x00);
	pio_out(&rig, 0xCF8, 4, a);
	for (uint16_t p = 0xCF8; p < 0xCFC; p++)
		pio_out(&rig, p, 1, 0x00);
	pio_out(&rig, 0xCF8, 2, 0x0000);
	pio_out(&rig, 0xCFA, 2, 0x0000);
	ck_assert_uint_eq(pio_in(&rig, 0xCF8, 4), a);
	ck_assert_uint_eq(pio_in(&rig, 0xCFC, 4), (uint32_t)TESTDEV_DEVICE << 16 | TESTDEV_VENDOR);
}
END_TEST

START_TEST(test_conf1_absent_functions_and_bus_1_read_all_ones)
{
	static const uint8_t empty[] = {2, 5, 9, 31};
	for (size_t i = 0; i < sizeof(empty); i++) {
		ck_assert_uint_eq(conf1_read(&rig, 0, empty[i], 0, 0x00, 4), 0xFFFFFFFFu);
		ck_assert_uint_eq(conf1_read(&rig, 0, empty[i], 0, 0x00, 2), 0xFFFF);
	}
	for (uint8_t fn = 1; fn < 8; fn++) {
		ck_assert_uint_eq(conf1_read(&rig, 0, SLOT, fn, 0x00, 2), 0xFFFF);
		ck_assert_uint_eq(conf1_read(&rig, 0, 0, fn, 0x00, 4), 0xFFFFFFFFu);
	}
	ck_assert_uint_eq(conf1_read(&rig, 1, SLOT, 0, 0x00, 2), 0xFFFF);
	ck_assert_uint_eq(conf1_read(&rig, 1, 0, 0, 0x00, 4), 0xFFFFFFFFu);
	ck_assert_uint_eq(pci_config_read(&rig.pci, 1, SLOT << 3, 0, 4), 0xFFFFFFFFu);
	ck_assert_uint_eq(pci_config_read(&rig.pci, 0, (SLOT << 3) | 3, 0, 2), 0xFFFF);
}
END_TEST

START_TEST(test_host_bridge_has_class_0600_and_no_bars)
{
	ck_assert_uint_eq(conf1_read(&rig, 0, 0, 0, 0x0B, 1), 0x06);
	ck_assert_uint_eq(conf1_read(&rig, 0, 0, 0, 0x0A, 1), 0x00);
	ck_assert_uint_eq(conf1_read(&rig, 0, 0, 0, 0x0E, 1) & 0x7F, 0x00); /* type-0 header */
	for (unsigned off = 0x10; off <= 0x24; off += 4) {
		conf1_write(&rig, 0, 0, 0, off, 4, 0xFFFFFFFFu);
		ck_assert_uint_eq(conf1_read(&rig, 0, 0, 0, off, 4), 0);
	}
}
END_TEST

/* ---- config masks ---- */

START_TEST(test_identity_fields_are_read_only)
{
	uint32_t id = cfg_rd(&rig, SLOT, 0x00, 4), cls = cfg_rd(&rig, SLOT, 0x08, 4);
	uint8_t hdr = (uint8_t)cfg_rd(&rig, SLOT, PCI_HEADER_TYPE, 1);
	for (int pass = 0; pass < 2; pass++) {
		uint32_t v = pass ? 0 : 0xFFFFFFFFu;
		cfg_wr(&rig, SLOT, 0x00, 4, v);
		cfg_wr(&rig, SLOT, 0x08, 4, v);
		cfg_wr(&rig, SLOT, PCI_HEADER_TYPE, 1, v);
		cfg_wr(&rig, SLOT, PCI_INTERRUPT_PIN, 1, v);
		conf1_write(&rig, 0, SLOT, 0, 0x00, 2, v);
		conf1_write(&rig, 0, SLOT, 0, 0x08, 1, v);
		ck_assert_uint_eq(cfg_rd(&rig, SLOT, 0x00, 4), id);
		ck_assert_uint_eq(cfg_rd(&rig, SLOT, 0x08, 4), cls);
		ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_HEADER_TYPE, 1), hdr);
		ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_INTERRUPT_PIN, 1), 1);
	}
	ck_assert_uint_eq(id, (uint32_t)TESTDEV_DEVICE << 16 | TESTDEV_VENDOR);
}
END_TEST

START_TEST(test_command_keeps_only_writable_bits)
{
	const uint16_t rw = PCI_COMMAND_IO | PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER |
			    PCI_COMMAND_PARITY | PCI_COMMAND_SERR | PCI_COMMAND_INTX_DISABLE;
	cfg_wr(&rig, SLOT, PCI_COMMAND, 2, 0xFFFF);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_COMMAND, 2), rw);
	conf1_write(&rig, 0, SLOT, 0, PCI_COMMAND, 2, 0);
	ck_assert_uint_eq(conf1_read(&rig, 0, SLOT, 0, PCI_COMMAND, 2), 0);
	conf1_write(&rig, 0, SLOT, 0, PCI_COMMAND, 2, (uint16_t)~rw);
	ck_assert_uint_eq(conf1_read(&rig, 0, SLOT, 0, PCI_COMMAND, 2), 0);
}
END_TEST

START_TEST(test_status_error_bits_are_write_1_to_clear)
{
	static const unsigned bits[] = {8, 11, 12, 13, 14, 15};
	uint8_t *st = &rig.dev[0].pci.cfg[PCI_STATUS];
	for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++) {
		uint16_t bit = (uint16_t)(1u << bits[i]);
		st[0] |= (uint8_t)bit;
		st[1] |= (uint8_t)(bit >> 8);
		cfg_wr(&rig, SLOT, PCI_STATUS, 2, 0);
		ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_STATUS, 2) & bit, bit);
		cfg_wr(&rig, SLOT, PCI_STATUS, 2, (uint16_t)(0xFFFF & ~bit)); /* others only */
		ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_STATUS, 2) & bit, bit);
		conf1_write(&rig, 0, SLOT, 0, PCI_STATUS, 2, bit);
		ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_STATUS, 2) & bit, 0);
	}
	/* Two set, one cleared: the other stays. */
	st[1] |= 0x81;
	cfg_wr(&rig, SLOT, PCI_STATUS, 2, 0x0100);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_STATUS, 2) & 0x8100, 0x8000);
}
END_TEST

START_TEST(test_status_interrupt_and_cap_list_bits_read_only)
{
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_STATUS, 2) & PCI_STATUS_CAP_LIST,
			  PCI_STATUS_CAP_LIST);
	cfg_wr(&rig, SLOT, PCI_STATUS, 2, 0xFFFF);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_STATUS, 2), PCI_STATUS_CAP_LIST); /* rest RO 0 */
	cfg_wr(&rig, SLOT, PCI_STATUS, 2, 0);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_STATUS, 2) & 0x0018, PCI_STATUS_CAP_LIST);
	/* The device raises INTx: bit 3 follows it, not the guest's writes. */
	mmio_wr32(&rig, rig_bar_addr(&rig, SLOT, 0) + TESTDEV_REG_DOORBELL, 0);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_STATUS, 2) & PCI_STATUS_INTERRUPT,
			  PCI_STATUS_INTERRUPT);
	cfg_wr(&rig, SLOT, PCI_STATUS, 2, PCI_STATUS_INTERRUPT);
	conf1_write(&rig, 0, SLOT, 0, PCI_STATUS, 2, 0xFFFF);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_STATUS, 2) & 0x0018, 0x0018);
}
END_TEST

START_TEST(test_interrupt_line_is_read_write)
{
	cfg_wr(&rig, SLOT, PCI_INTERRUPT_LINE, 1, 0x0B);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_INTERRUPT_LINE, 1), 0x0B);
	conf1_write(&rig, 0, SLOT, 0, PCI_INTERRUPT_LINE, 1, 0xFF);
	ck_assert_uint_eq(conf1_read(&rig, 0, SLOT, 0, PCI_INTERRUPT_LINE, 1), 0xFF);
	cfg_wr(&rig, SLOT, PCI_INTERRUPT_LINE, 2, 0x0000); /* the pin byte stays */
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_INTERRUPT_LINE, 2), 0x0100);
}
END_TEST

START_TEST(test_capability_list_is_one_msix_capability)
{
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_STATUS, 2) & PCI_STATUS_CAP_LIST,
			  PCI_STATUS_CAP_LIST);
	uint8_t cap = (uint8_t)cfg_rd(&rig, SLOT, PCI_CAPABILITY_LIST, 1);
	ck_assert_uint_ge(cap, 0x40); /* after the type-0 header */
	ck_assert_uint_eq(cap & 3, 0);
	ck_assert_uint_le(cap, 0x100 - 12);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, cap, 1), 0x11);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, cap + 1u, 1), 0);
	/* ID and next pointer are read-only. */
	cfg_wr(&rig, SLOT, cap, 2, 0xFFFF);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, cap, 2), 0x0011);
}
END_TEST

START_TEST(test_msix_message_control_only_enable_and_mask_writable)
{
	uint8_t cap = (uint8_t)cfg_rd(&rig, SLOT, PCI_CAPABILITY_LIST, 1);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, cap + 2u, 2), NVEC - 1);
	cfg_wr(&rig, SLOT, cap + 2u, 2, 0x3FFF);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, cap + 2u, 2), NVEC - 1);
	cfg_wr(&rig, SLOT, cap + 2u, 2, 0xFFFF);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, cap + 2u, 2), 0xC000 | (NVEC - 1));
	conf1_write(&rig, 0, SLOT, 0, cap + 2u, 2, 0x0000);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, cap + 2u, 2), NVEC - 1);
	conf1_write(&rig, 0, SLOT, 0, cap, 4, 0x8000FFFFu); /* whole dword: ID, next too */
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, cap, 4), (uint32_t)(0x8000 | (NVEC - 1)) << 16 | 0x11);
}
END_TEST

START_TEST(test_msix_table_and_pba_location_read_only)
{
	uint8_t cap = (uint8_t)cfg_rd(&rig, SLOT, PCI_CAPABILITY_LIST, 1);
	uint32_t table = cfg_rd(&rig, SLOT, cap + 4u, 4), pba = cfg_rd(&rig, SLOT, cap + 8u, 4);
	ck_assert_uint_eq(table, 0x00000000u | 1);		  /* BAR1 offset 0 */
	ck_assert_uint_eq(pba, (uint32_t)page_up(NVEC * 16) | 1); /* next page, BAR1 */
	cfg_wr(&rig, SLOT, cap + 4u, 4, 0xFFFFFFFFu);
	conf1_write(&rig, 0, SLOT, 0, cap + 8u, 4, 0x12345678u);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, cap + 4u, 4), table);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, cap + 8u, 4), pba);
}
END_TEST

/* ---- BARs ---- */

START_TEST(test_bar_sizing_returns_size_mask_and_type)
{
	static const uint64_t sizes[2] = {4096, 0};
	for (int bar = 0; bar < 2; bar++) {
		uint64_t size = bar == 0 ? sizes[0] : pow2_ge(msix_pages(NVEC));
		unsigned off = 0x10 + 4u * (unsigned)bar;
		uint32_t old = conf1_read(&rig, 0, SLOT, 0, off, 4);
		conf1_write(&rig, 0, SLOT, 0, off, 4, 0xFFFFFFFFu);
		ck_assert_uint_eq(conf1_read(&rig, 0, SLOT, 0, off, 4), (uint32_t) ~(size - 1));
		conf1_write(&rig, 0, SLOT, 0, off, 4, old);
		ck_assert_uint_eq(conf1_read(&rig, 0, SLOT, 0, off, 4), old);
	}
	uint64_t bar1 = rig_bar_size(&rig, SLOT, 1);
	ck_assert_uint_eq(bar1 & (bar1 - 1), 0);
	ck_assert_uint_ge(bar1, msix_pages(NVEC));
	ck_assert_uint_lt(bar1 / 2, msix_pages(NVEC));
	for (unsigned off = 0x18; off <= 0x24; off += 4) { /* unimplemented BARs */
		cfg_wr(&rig, SLOT, off, 4, 0xFFFFFFFFu);
		ck_assert_uint_eq(cfg_rd(&rig, SLOT, off, 4), 0);
	}
}
END_TEST

START_TEST(test_bar_writes_are_latched)
{
	cfg_wr(&rig, SLOT, 0x10, 4, 0xE0004000u);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, 0x10, 4), 0xE0004000u);
	cfg_wr(&rig, SLOT, 0x10, 4, 0xE0005ABCu); /* bits below the size read 0 */
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, 0x10, 4), 0xE0005000u);
	cfg_wr(&rig, SLOT, 0x14, 4, 0xE0100000u);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, 0x14, 4), 0xE0100000u);
}
END_TEST

START_TEST(test_bar0_decodes_magic_at_assigned_address)
{
	uint64_t a = rig_bar_addr(&rig, SLOT, 0);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_COMMAND, 2) & PCI_COMMAND_MEMORY,
			  PCI_COMMAND_MEMORY);
	ck_assert_uint_eq(mmio_rd32(&rig, a + TESTDEV_REG_MAGIC), TESTDEV_MAGIC);
	ck_assert_uint_eq(mmio_rd32(&rig, a + TESTDEV_REG_NVECTORS), NVEC);
}
END_TEST

START_TEST(test_bar_holding_sizing_pattern_is_not_mapped)
{
	uint64_t a = rig_bar_addr(&rig, SLOT, 0);
	uint32_t old = cfg_rd(&rig, SLOT, 0x10, 4);
	conf1_write(&rig, 0, SLOT, 0, 0x10, 4, 0xFFFFFFFFu);
	ck_assert(!mmio_claimed(a));
	ck_assert_uint_eq(mmio_rd32(&rig, a), 0xFFFFFFFFu);
	ck_assert(!mmio_claimed(0xFFFFF000u)); /* nor at the pattern itself */
	conf1_write(&rig, 0, SLOT, 0, 0x10, 4, old);
	ck_assert_uint_eq(mmio_rd32(&rig, a), TESTDEV_MAGIC);
}
END_TEST

START_TEST(test_memory_decode_off_unmaps_bars)
{
	uint64_t a0 = rig_bar_addr(&rig, SLOT, 0), a1 = rig_bar_addr(&rig, SLOT, 1);
	uint16_t cmd = (uint16_t)cfg_rd(&rig, SLOT, PCI_COMMAND, 2);
	conf1_write(&rig, 0, SLOT, 0, PCI_COMMAND, 2, cmd & ~PCI_COMMAND_MEMORY);
	ck_assert(!mmio_claimed(a0));
	ck_assert(!mmio_claimed(a1));
	ck_assert_uint_eq(mmio_rd32(&rig, a0), 0xFFFFFFFFu);
	/* Moving while decode is off does not map either. */
	cfg_wr(&rig, SLOT, 0x10, 4, 0xE0000000u);
	ck_assert(!mmio_claimed(0xE0000000u));
	conf1_write(&rig, 0, SLOT, 0, PCI_COMMAND, 2, cmd);
	ck_assert_uint_eq(mmio_rd32(&rig, 0xE0000000u), TESTDEV_MAGIC);
	ck_assert(mmio_claimed(a1));
}
END_TEST

START_TEST(test_bar_move_maps_new_and_unmaps_old)
{
	uint64_t a = rig_bar_addr(&rig, SLOT, 0);
	uint64_t to = 0xE8000000u;
	ck_assert_uint_ne(a, to);
	conf1_write(&rig, 0, SLOT, 0, 0x10, 4, (uint32_t)to);
	ck_assert_uint_eq(mmio_rd32(&rig, to), TESTDEV_MAGIC);
	ck_assert(!mmio_claimed(a));
	conf1_write(&rig, 0, SLOT, 0, 0x10, 4, (uint32_t)a); /* and back */
	ck_assert_uint_eq(mmio_rd32(&rig, a), TESTDEV_MAGIC);
	ck_assert(!mmio_claimed(to));
}
END_TEST

START_TEST(test_bar_move_onto_ram_is_refused_and_unmapped)
{
	uint64_t a = rig_bar_addr(&rig, SLOT, 0);
	conf1_write(&rig, 0, SLOT, 0, 0x10, 4, 0x00100000u);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, 0x10, 4), 0x00100000u); /* latched */
	ck_assert(!mmio_claimed(0x00100000u));
	ck_assert(!mmio_claimed(a));
	ck_assert_ptr_nonnull(strstr(pci_rig_log(&rig), "BAR0"));
	conf1_write(&rig, 0, SLOT, 0, 0x10, 4, (uint32_t)(RIG_RAM_SIZE - 4096)); /* last page */
	ck_assert(!mmio_claimed(RIG_RAM_SIZE - 4096));
	conf1_write(&rig, 0, SLOT, 0, 0x10, 4, (uint32_t)a);
	ck_assert_uint_eq(mmio_rd32(&rig, a), TESTDEV_MAGIC);
}
END_TEST

START_TEST(test_bar_move_onto_lapic_or_ioapic_is_refused)
{
	/* The LAPIC and IOAPIC pages (and KVM's TSS and identity-map pages)
	 * are served by KVM before any exit reaches the VMM's bus: a BAR over
	 * one would be half shadowed. Refused like a BAR over RAM. */
	uint64_t a = rig_bar_addr(&rig, SLOT, 0);
	static const uint32_t at[] = {(uint32_t)LAYOUT_LAPIC_BASE, (uint32_t)LAYOUT_IOAPIC_BASE,
				      0xFFFBD000u};
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		conf1_write(&rig, 0, SLOT, 0, 0x10, 4, at[i]);
		ck_assert_uint_eq(cfg_rd(&rig, SLOT, 0x10, 4), at[i]); /* latched */
		ck_assert_msg(!mmio_claimed(at[i]), "BAR0 mapped at 0x%x", at[i]);
		ck_assert(!mmio_claimed(a));
	}
	ck_assert_ptr_nonnull(strstr(pci_rig_log(&rig), "LAPIC"));
	ck_assert_ptr_nonnull(strstr(pci_rig_log(&rig), "IOAPIC"));
	/* The page just below the LAPIC is nobody's. */
	conf1_write(&rig, 0, SLOT, 0, 0x10, 4, (uint32_t)LAYOUT_LAPIC_BASE - 0x1000u);
	ck_assert_uint_eq(mmio_rd32(&rig, LAYOUT_LAPIC_BASE - 0x1000), TESTDEV_MAGIC);
	/* MSI-X BAR1 (8 KiB) from below onto the IOAPIC page. */
	uint64_t b1 = rig_bar_addr(&rig, SLOT, 1);
	conf1_write(&rig, 0, SLOT, 0, 0x14, 4, (uint32_t)LAYOUT_IOAPIC_BASE);
	ck_assert(!mmio_claimed(LAYOUT_IOAPIC_BASE + 0x1000));
	conf1_write(&rig, 0, SLOT, 0, 0x14, 4, (uint32_t)b1);
	conf1_write(&rig, 0, SLOT, 0, 0x10, 4, (uint32_t)a);
	ck_assert_uint_eq(mmio_rd32(&rig, a), TESTDEV_MAGIC);
	ck_assert(mmio_claimed(b1));
}
END_TEST

START_TEST(test_bar_move_onto_other_bar_is_refused)
{
	struct pci_testdev *a = pci_rig_add(&rig, 1, 4), *b = pci_rig_add(&rig, 2, 8);
	(void)a;
	(void)b;
	ck_assert_int_eq(pci_bus_assign_resources(&rig.pci), 0);
	uint64_t a0 = rig_bar_addr(&rig, 1, 0), b0 = rig_bar_addr(&rig, 2, 0);
	uint64_t b1 = rig_bar_addr(&rig, 2, 1);
	conf1_write(&rig, 0, 1, 0, 0x10, 4, (uint32_t)b0);
	ck_assert(!mmio_claimed(a0));
	ck_assert_uint_eq(mmio_rd32(&rig, b0 + TESTDEV_REG_NVECTORS), 8); /* still b's */
	mmio_wr32(&rig, b0 + TESTDEV_REG_DOORBELL, 0);
	ck_assert_uint_eq(mmio_rd32(&rig, b0 + TESTDEV_REG_DOORBELLS), 1);
	/* Inside b's MSI-X BAR (second page): refused too; b's table still there. */
	conf1_write(&rig, 0, 1, 0, 0x10, 4, (uint32_t)(b1 + 4096));
	ck_assert_uint_eq(mmio_rd32(&rig, b1 + 12) & 1, 1);
	ck_assert_uint_eq(mmio_rd32(&rig, b0 + TESTDEV_REG_MAGIC), TESTDEV_MAGIC);
	conf1_write(&rig, 0, 1, 0, 0x10, 4, (uint32_t)a0); /* back home: a's own */
	ck_assert_uint_eq(mmio_rd32(&rig, a0 + TESTDEV_REG_NVECTORS), 4);
	ck_assert_uint_eq(mmio_rd32(&rig, a0 + TESTDEV_REG_DOORBELLS), 0);
}
END_TEST

START_TEST(test_assign_resources_aligned_disjoint_in_window)
{
	static const unsigned nvec[] = {1, 64, 2048, 3};
	static const uint8_t slots[] = {1, 2, 9, 31};
	uint64_t base[8], size[8];
	unsigned n = 0;
	for (unsigned i = 0; i < 4; i++)
		pci_rig_add(&rig, slots[i], nvec[i]);
	ck_assert_int_eq(pci_bus_assign_resources(&rig.pci), 0);
	for (unsigned i = 0; i < 4; i++) {
		ck_assert_uint_eq(cfg_rd(&rig, slots[i], PCI_COMMAND, 2) & PCI_COMMAND_MEMORY,
				  PCI_COMMAND_MEMORY);
		ck_assert_uint_eq(mmio_rd32(&rig, rig_bar_addr(&rig, slots[i], 0)), TESTDEV_MAGIC);
		ck_assert_uint_eq(mmio_rd32(&rig, rig_bar_addr(&rig, slots[i], 0) + 4), nvec[i]);
		for (int bar = 0; bar < 2; bar++) {
			base[n] = rig_bar_addr(&rig, slots[i], bar);
			size[n] = rig_bar_size(&rig, slots[i], bar);
			ck_assert_uint_ge(size[n], bar ? msix_pages(nvec[i]) : 4096);
			ck_assert_uint_ge(base[n], LAYOUT_PCI_MMIO_START);
			ck_assert_uint_le(base[n] + size[n], LAYOUT_PCI_MMIO_END);
			ck_assert_uint_eq(base[n] & (size[n] - 1), 0);
			n++;
		}
	}
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = i + 1; j < n; j++)
			ck_assert(base[i] + size[i] <= base[j] || base[j] + size[j] <= base[i]);
}
END_TEST

/* A device with an I/O BAR and a 64-bit prefetchable BAR (6.2.5.1). */
static void probe_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	uint32_t v = *(uint32_t *)opaque + (uint32_t)off;
	memcpy(data, &v, len < 4 ? len : 4);
}

static void probe_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	(void)opaque;
	(void)off;
	(void)data;
	(void)len;
}

START_TEST(test_io_and_mem64_bars_size_decode_and_assign)
{
	static struct pci_device d;
	static uint32_t io_tag = 0x10000000u, mem_tag = 0x20000000u;
	pci_device_init(&d, "probe", 0x1AF4, 0x10FF, 0x020000, 0);
	ck_assert_int_eq(
	    pci_device_add_bar(&d, 0, PCI_BAR_IO, 32, false, probe_read, probe_write, &io_tag), 0);
	ck_assert_int_eq(pci_device_add_bar(&d, 2, PCI_BAR_MEM64, 1 << 20, true, probe_read,
					    probe_write, &mem_tag),
			 0);
	ck_assert_int_eq(pci_bus_add_device(&rig.pci, &d, 3, 0), 0);
	ck_assert_int_eq(pci_bus_assign_resources(&rig.pci), 0);
	uint16_t cmd = (uint16_t)cfg_rd(&rig, 3, PCI_COMMAND, 2);
	ck_assert_uint_eq(cmd & (PCI_COMMAND_IO | PCI_COMMAND_MEMORY),
			  PCI_COMMAND_IO | PCI_COMMAND_MEMORY);
	uint32_t io = cfg_rd(&rig, 3, 0x10, 4);
	ck_assert_uint_eq(io & 3, 1);
	uint32_t port = io & ~3u;
	ck_assert_uint_ge(port, LAYOUT_PCI_IO_START);
	ck_assert_uint_le(port + 32, LAYOUT_PCI_IO_END);
	ck_assert_uint_eq(port & 31, 0);
	ck_assert_uint_eq(pio_in(&rig, (uint16_t)(port + 4), 4), io_tag + 4);
	uint64_t mem = rig_bar_addr(&rig, 3, 2);
	ck_assert_uint_eq(cfg_rd(&rig, 3, 0x18, 4) & 0xF, 0xC); /* 64-bit, prefetchable */
	ck_assert_uint_ge(mem, LAYOUT_PCI_MMIO_START);
	ck_assert_uint_le(mem + (1 << 20), LAYOUT_PCI_MMIO_END);
	ck_assert_uint_eq(mem & ((1 << 20) - 1), 0);
	ck_assert_uint_eq(mmio_rd32(&rig, mem + 8), mem_tag + 8);
	/* Sizing: I/O keeps bit 0; mem64 lower keeps its type, upper all ones. */
	cfg_wr(&rig, 3, 0x10, 4, 0xFFFFFFFFu);
	ck_assert_uint_eq(cfg_rd(&rig, 3, 0x10, 4) & 0xFFFF, 0xFFE1);
	cfg_wr(&rig, 3, 0x18, 4, 0xFFFFFFFFu);
	cfg_wr(&rig, 3, 0x1C, 4, 0xFFFFFFFFu);
	ck_assert_uint_eq(cfg_rd(&rig, 3, 0x18, 4), 0xFFF0000Cu);
	ck_assert_uint_eq(cfg_rd(&rig, 3, 0x1C, 4), 0xFFFFFFFFu);
	ck_assert(!mmio_claimed(mem));
}
END_TEST

START_TEST(test_assign_fails_when_a_bar_cannot_fit_the_window)
{
	/* The 32-bit window is 512 MiB: neither BAR can be given an address,
	 * so firmware must say so rather than leave it at 0 with decode on. */
	static struct pci_device big32, big64;
	static uint32_t tag = 0;
	pci_device_init(&big32, "big32", 0x1AF4, 0x10FE, 0x020000, 0);
	ck_assert_int_eq(pci_device_add_bar(&big32, 0, PCI_BAR_MEM32, 1ULL << 30, false, probe_read,
					    probe_write, &tag),
			 0);
	ck_assert_int_eq(pci_bus_add_device(&rig.pci, &big32, 4, 0), 0);
	ck_assert_int_ne(pci_bus_assign_resources(&rig.pci), 0);

	rig_teardown(); /* a fresh bus for the 64-bit case */
	bare_setup();
	pci_device_init(&big64, "big64", 0x1AF4, 0x10FD, 0x020000, 0);
	ck_assert_int_eq(pci_device_add_bar(&big64, 0, PCI_BAR_MEM64, 8 * GiB, true, probe_read,
					    probe_write, &tag),
			 0);
	ck_assert_int_eq(pci_bus_add_device(&rig.pci, &big64, 4, 0), 0);
	int ret = pci_bus_assign_resources(&rig.pci);
	ck_assert_msg(ret != 0, "8 GiB BAR0 left at 0x%llx, decode %s, and assign returned %d",
		      (unsigned long long)rig_bar_addr(&rig, 4, 0),
		      (cfg_rd(&rig, 4, PCI_COMMAND, 2) & PCI_COMMAND_MEMORY) ? "on" : "off", ret);
}
END_TEST

/* ---- the interrupt mode (devices/pci/msix.h) ---- */

#define VSLOT 2 /* a virtio function beside the testdev */
#define VNQ   3 /* its queues: NQ + 1 MSI-X vectors */

static struct virtio_probe probe;
static struct virtio_pci vp;
static struct fake_host host;

static void irq_mode_teardown(void)
{
	virtio_pci_destroy(&vp);
	pci_rig_free(&rig);
}

/* A testdev (MSI-X in BAR1) in SLOT and a virtio function (MSI-X in BAR2)
 * in VSLOT, both in `mode`, their BARs assigned; returns how many vectors
 * the interrupt router gained. */
static unsigned both_in(enum irq_mode mode)
{
	unsigned before = rig.irq.nvectors;
	dev = pci_rig_add_mode(&rig, SLOT, NVEC, mode);
	virtio_probe_init(&probe, 9, VNQ, 16);
	struct virtio_host h = fake_host_make(&host, &rig.log);
	ck_assert_int_eq(
	    virtio_pci_init(&vp, &probe.vdev, "virtio0", &rig.irq, &rig.ram.m, &h, mode), 0);
	ck_assert_int_eq(pci_bus_add_device(&rig.pci, &vp.pci, VSLOT, 1), 0);
	ck_assert_int_eq(pci_bus_assign_resources(&rig.pci), 0);
	return rig.irq.nvectors - before;
}

/* The capability list walked as a guest does (6.7): the offset of the
 * first capability with `id` (0: none), and how many have it. */
static uint8_t find_cap(uint8_t slot, uint8_t id, unsigned *count)
{
	uint8_t found = 0, c = 0;
	unsigned hops = 0;
	*count = 0;
	if (cfg_rd(&rig, slot, PCI_STATUS, 2) & PCI_STATUS_CAP_LIST)
		c = (uint8_t)(cfg_rd(&rig, slot, PCI_CAPABILITY_LIST, 1) & ~3u);
	for (; c && hops < 48; hops++) {
		if (cfg_rd(&rig, slot, c, 1) == id && !(*count)++)
			found = c;
		c = (uint8_t)(cfg_rd(&rig, slot, c + 1u, 1) & ~3u);
	}
	ck_assert_uint_lt(hops, 48); /* the list ends */
	return found;
}

/* An unimplemented BAR (6.2.5.1): reads 0, sizes to 0, decodes nothing. */
static void assert_no_bar(const struct pci_device *d, int bar)
{
	unsigned off = PCI_BASE_ADDRESS_0 + 4u * (unsigned)bar;
	ck_assert_uint_eq(cfg_rd(&rig, d->slot, off, 4), 0);
	ck_assert_uint_eq(rig_bar_size(&rig, d->slot, bar), 0);
	ck_assert_uint_eq(cfg_rd(&rig, d->slot, off, 4), 0);
	ck_assert_int_eq(d->bars[bar].type, PCI_BAR_NONE);
	ck_assert(!d->bars[bar].mapped);
}

START_TEST(test_intx_mode_has_no_msix_capability_bar_or_vectors)
{
	unsigned n;
	ck_assert_uint_eq(both_in(IRQ_MODE_INTX), 0); /* QEMU's vectors=0 */
	ck_assert_uint_eq(find_cap(SLOT, PCI_CAP_ID_MSIX, &n), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, PCI_STATUS, 2) & PCI_STATUS_CAP_LIST, 0);
	ck_assert_uint_eq(find_cap(VSLOT, PCI_CAP_ID_MSIX, &n), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_uint_eq(find_cap(VSLOT, PCI_CAP_ID_VNDR, &n), 0x40); /* virtio's stay */
	ck_assert_uint_eq(n, 5);
	assert_no_bar(&dev->pci, TESTDEV_MSIX_BAR);
	assert_no_bar(&vp.pci, VIRTIO_PCI_MSIX_BAR);
	/* The other BARs keep their indices and sizes. */
	ck_assert_uint_eq(rig_bar_size(&rig, SLOT, 0), 4096);
	ck_assert_uint_eq(rig_bar_size(&rig, VSLOT, 0), VIRTIO_PCI_BAR0_SIZE);
	uint64_t regs = rig_bar_addr(&rig, SLOT, 0);
	ck_assert_uint_eq(mmio_rd32(&rig, regs + TESTDEV_REG_NVECTORS), 0);
	ck_assert_uint_eq(dev->pci.msix_vectors + vp.pci.msix_vectors, 0);
	/* A doorbell still interrupts, by INTx (slot 1 INTA#: pin 17). */
	mmio_wr32(&rig, regs + TESTDEV_REG_DOORBELL, 3);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, 17, 1), 1);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 0);
}
END_TEST

START_TEST(test_msix_mode_has_msix_capability_bar_and_vectors)
{
	unsigned n;
	ck_assert_uint_eq(both_in(IRQ_MODE_MSIX), NVEC + VNQ + 1);
	/* Where they always were: the testdev's only capability, virtio's
	 * last, after the five vendor capabilities (0x40..0x97). */
	uint8_t tcap = find_cap(SLOT, PCI_CAP_ID_MSIX, &n);
	ck_assert_uint_eq(tcap, 0x40);
	ck_assert_uint_eq(n, 1);
	uint8_t vcap = find_cap(VSLOT, PCI_CAP_ID_MSIX, &n);
	ck_assert_uint_eq(vcap, 0x98);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(cfg_rd(&rig, VSLOT, vcap + 1u, 1), 0);
	ck_assert_uint_eq(cfg_rd(&rig, SLOT, tcap + PCI_MSIX_TABLE, 4), TESTDEV_MSIX_BAR);
	ck_assert_uint_eq(cfg_rd(&rig, VSLOT, vcap + PCI_MSIX_TABLE, 4), VIRTIO_PCI_MSIX_BAR);
	ck_assert_uint_eq(rig_bar_size(&rig, SLOT, TESTDEV_MSIX_BAR), pow2_ge(msix_pages(NVEC)));
	ck_assert_uint_eq(rig_bar_size(&rig, VSLOT, VIRTIO_PCI_MSIX_BAR),
			  pow2_ge(msix_pages(VNQ + 1)));
	uint64_t regs = rig_bar_addr(&rig, SLOT, 0);
	ck_assert_uint_eq(mmio_rd32(&rig, regs + TESTDEV_REG_NVECTORS), NVEC);
	ck_assert_uint_eq(dev->pci.msix_vectors, NVEC);
	ck_assert_uint_eq(vp.pci.msix_vectors, VNQ + 1);
}
END_TEST

static Suite *pci_config_suite(void)
{
	Suite *s = suite_create("pci_config");
	TCase *t = tcase_create("conf1");
	tcase_add_checked_fixture(t, one_dev_setup, rig_teardown);
	tcase_add_test(t, test_conf1_dword_reads_ids_of_bridge_and_testdev);
	tcase_add_test(t, test_conf1_byte_and_word_reads_at_every_offset);
	tcase_add_test(t, test_conf1_writes_at_every_offset_reach_the_right_byte);
	tcase_add_test(t, test_conf1_enable_bit_clear_reads_all_ones_and_drops_writes);
	tcase_add_test(t, test_conf1_address_reads_back_latched);
	tcase_add_test(t, test_conf1_address_reserved_bits_read_zero);
	tcase_add_test(t, test_conf1_byte_and_word_writes_to_cf8_keep_the_address);
	tcase_add_test(t, test_conf1_absent_functions_and_bus_1_read_all_ones);
	tcase_add_test(t, test_host_bridge_has_class_0600_and_no_bars);
	suite_add_tcase(s, t);

	t = tcase_create("masks");
	tcase_add_checked_fixture(t, one_dev_setup, rig_teardown);
	tcase_add_test(t, test_identity_fields_are_read_only);
	tcase_add_test(t, test_command_keeps_only_writable_bits);
	tcase_add_test(t, test_status_error_bits_are_write_1_to_clear);
	tcase_add_test(t, test_status_interrupt_and_cap_list_bits_read_only);
	tcase_add_test(t, test_interrupt_line_is_read_write);
	tcase_add_test(t, test_capability_list_is_one_msix_capability);
	tcase_add_test(t, test_msix_message_control_only_enable_and_mask_writable);
	tcase_add_test(t, test_msix_table_and_pba_location_read_only);
	suite_add_tcase(s, t);

	t = tcase_create("bars");
	tcase_add_checked_fixture(t, one_dev_setup, rig_teardown);
	tcase_add_test(t, test_bar_sizing_returns_size_mask_and_type);
	tcase_add_test(t, test_bar_writes_are_latched);
	tcase_add_test(t, test_bar0_decodes_magic_at_assigned_address);
	tcase_add_test(t, test_bar_holding_sizing_pattern_is_not_mapped);
	tcase_add_test(t, test_memory_decode_off_unmaps_bars);
	tcase_add_test(t, test_bar_move_maps_new_and_unmaps_old);
	tcase_add_test(t, test_bar_move_onto_ram_is_refused_and_unmapped);
	tcase_add_test(t, test_bar_move_onto_lapic_or_ioapic_is_refused);
	suite_add_tcase(s, t);

	t = tcase_create("bars_multi");
	tcase_add_checked_fixture(t, bare_setup, rig_teardown);
	tcase_add_test(t, test_bar_move_onto_other_bar_is_refused);
	tcase_add_test(t, test_assign_resources_aligned_disjoint_in_window);
	tcase_add_test(t, test_io_and_mem64_bars_size_decode_and_assign);
	tcase_add_test(t, test_assign_fails_when_a_bar_cannot_fit_the_window);
	suite_add_tcase(s, t);

	t = tcase_create("irq_mode");
	tcase_add_checked_fixture(t, bare_setup, irq_mode_teardown);
	tcase_add_test(t, test_intx_mode_has_no_msix_capability_bar_or_vectors);
	tcase_add_test(t, test_msix_mode_has_msix_capability_bar_and_vectors);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(pci_config_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
