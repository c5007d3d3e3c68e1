/*
 * MSI-X on the PCI test device (PCI Local Bus 3.0, 6.8.2), driven like a
 * guest: Message Control through conf1, the table and PBA through BAR1 on
 * the MMIO bus, the doorbell through BAR0. Delivery is KVM_SIGNAL_MSI
 * (IRQ_MSI_SIGNAL) and INTx is KVM_IRQ_LINE, both into a recording sink.
 */
#include "helpers.h"

#include "devices/pci/msix.h"
#include "devices/pci/pci.h"
#include "devices/pci/pci_testdev.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define SLOT 1
#define NVEC 4
#define PIN  17 /* 16 + (slot 1 + INTA# 1 - 1) mod 8 */

static struct pci_rig rig;
static struct pci_testdev *dev;
static struct tdev_view tv;
static uint8_t slot, cap;
static uint64_t bar0, bar1;

enum {
	E_ADDR_LO = MSIX_E_ADDR_LO,
	E_ADDR_HI = MSIX_E_ADDR_HI,
	E_DATA = MSIX_E_DATA,
	E_CTRL = MSIX_E_CTRL
};

static void use_dev(struct pci_testdev *t, uint8_t s)
{
	tdev_view_init(&tv, &rig, t, s);
	dev = t;
	slot = s;
	cap = tv.cap;
	bar0 = tv.bar0;
	bar1 = tv.bar1;
}

static void setup(void)
{
	pci_rig_init(&rig, IRQ_MSI_SIGNAL, IRQ_INTX_LINE);
	struct pci_testdev *t = pci_rig_add(&rig, SLOT, NVEC);
	ck_assert_int_eq(pci_bus_assign_resources(&rig.pci), 0);
	use_dev(t, SLOT);
}

static void bare_setup(void)
{
	pci_rig_init(&rig, IRQ_MSI_SIGNAL, IRQ_INTX_LINE);
}

static void teardown(void)
{
	pci_rig_free(&rig);
}

static void msix_ctrl(uint16_t set, uint16_t clear)
{
	tdev_msix_ctrl(&tv, set, clear);
}

static uint64_t entry(unsigned n)
{
	return tdev_entry(&tv, n);
}

static uint64_t pba(void)
{
	return tdev_pba(&tv);
}

static bool pba_bit(unsigned n)
{
	return tdev_pba_bit(&tv, n);
}

static void program(unsigned n, uint64_t addr, uint32_t data, bool masked)
{
	tdev_program(&tv, n, addr, data, masked);
}

static void ring(uint32_t n)
{
	tdev_ring(&tv, n);
}

static void write_len(uint64_t addr, unsigned len, uint64_t v)
{
	uint8_t b[8];
	put64(b, v);
	bus_write(&rig.mmio, addr, b, len);
}

static void assert_delivered(unsigned nth, uint64_t addr, uint32_t data)
{
	int i = sink_rec_find(&rig.sink, SINK_SIGNAL_MSI, nth);
	ck_assert_int_ge(i, 0);
	ck_assert_uint_eq(rig.sink.calls[i].addr, addr);
	ck_assert_uint_eq(rig.sink.calls[i].data, data);
}

/* ---- table and PBA accesses ---- */

START_TEST(test_every_entry_masked_at_reset)
{
	for (unsigned n = 0; n < NVEC; n++)
		ck_assert_uint_eq(mmio_rd32(&rig, entry(n) + E_CTRL) & 1, 1);
}
END_TEST

START_TEST(test_table_dword_and_qword_accesses)
{
	program(1, 0x00000001FEE01000ULL, 0x4142, false);
	ck_assert_uint_eq(mmio_rd32(&rig, entry(1) + E_ADDR_LO), 0xFEE01000u);
	ck_assert_uint_eq(mmio_rd32(&rig, entry(1) + E_ADDR_HI), 1);
	ck_assert_uint_eq(mmio_rd32(&rig, entry(1) + E_DATA), 0x4142);
	ck_assert_uint_eq(mmio_rd32(&rig, entry(1) + E_CTRL), 0);
	ck_assert_uint_eq(mmio_rd64(&rig, entry(1)), 0x00000001FEE01000ULL);
	mmio_wr64(&rig, entry(2), 0x00000000FEE0F00CULL);
	mmio_wr64(&rig, entry(2) + E_DATA, (uint64_t)1 << 32 | 0x0000BEEF);
	ck_assert_uint_eq(mmio_rd32(&rig, entry(2) + E_ADDR_LO), 0xFEE0F00Cu);
	ck_assert_uint_eq(mmio_rd32(&rig, entry(2) + E_ADDR_HI), 0);
	ck_assert_uint_eq(mmio_rd64(&rig, entry(2) + E_DATA), (uint64_t)1 << 32 | 0xBEEF);
	ck_assert_uint_eq(mmio_rd64(&rig, entry(1)), 0x00000001FEE01000ULL); /* untouched */
}
END_TEST

START_TEST(test_table_byte_and_word_writes_ignored)
{
	program(0, MSI_ADDR(0), 0x11223344, true);
	for (unsigned off = E_DATA; off < E_DATA + 4; off++)
		write_len(entry(0) + off, 1, 0xAA);
	write_len(entry(0) + E_DATA, 2, 0xBBBB);
	write_len(entry(0) + E_DATA + 2, 2, 0xCCCC);
	ck_assert_uint_eq(mmio_rd32(&rig, entry(0) + E_DATA), 0x11223344);
	write_len(entry(0) + E_CTRL, 1, 0x00); /* cannot unmask with a byte */
	write_len(entry(0) + E_CTRL, 2, 0x0000);
	ck_assert_uint_eq(mmio_rd32(&rig, entry(0) + E_CTRL), 1);
	uint8_t b[2];
	bus_read(&rig.mmio, entry(0) + E_DATA, b, 1); /* must not crash */
	bus_read(&rig.mmio, entry(0) + E_DATA + 2, b, 2);
}
END_TEST

START_TEST(test_table_misaligned_dword_writes_ignored)
{
	program(0, MSI_ADDR(1), 0x55667788, true);
	write_len(entry(0) + 2, 4, 0xDEADBEEF);
	write_len(entry(0) + 9, 4, 0xDEADBEEF);
	write_len(entry(0) + 13, 4, 0xDEADBEEF); /* over ctrl into entry 1 */
	ck_assert_uint_eq(mmio_rd64(&rig, entry(0)), MSI_ADDR(1));
	ck_assert_uint_eq(mmio_rd32(&rig, entry(0) + E_DATA), 0x55667788);
	ck_assert_uint_eq(mmio_rd32(&rig, entry(0) + E_CTRL), 1);
	ck_assert_uint_eq(mmio_rd32(&rig, entry(1) + E_ADDR_LO), 0);
	uint8_t b[4];
	bus_read(&rig.mmio, entry(0) + 2, b, 4);
}
END_TEST

START_TEST(test_accesses_beyond_table_ignored)
{
	program(NVEC - 1, MSI_ADDR(2), 0x99, true);
	uint64_t end = entry(NVEC); /* first byte after the table */
	uint32_t before = mmio_rd32(&rig, end);
	mmio_wr32(&rig, end, 0);
	mmio_wr64(&rig, end + 8, 0);
	mmio_wr32(&rig, end + 0x100, 0x12345678);
	mmio_wr32(&rig, bar1 + 0xFFC, 0xFFFFFFFF);
	ck_assert_uint_eq(mmio_rd32(&rig, end), before);
	ck_assert_uint_eq(mmio_rd64(&rig, entry(NVEC - 1)), MSI_ADDR(2));
	ck_assert_uint_eq(mmio_rd32(&rig, entry(NVEC - 1) + E_CTRL), 1);
	ck_assert_uint_eq(mmio_rd32(&rig, entry(0) + E_CTRL), 1);
}
END_TEST

START_TEST(test_vector_control_reserved_bits_read_zero)
{
	mmio_wr32(&rig, entry(0) + E_CTRL, 0xFFFFFFFFu);
	ck_assert_uint_eq(mmio_rd32(&rig, entry(0) + E_CTRL), 1);
	mmio_wr32(&rig, entry(0) + E_CTRL, 0xFFFFFFFEu);
	ck_assert_uint_eq(mmio_rd32(&rig, entry(0) + E_CTRL), 0);
}
END_TEST

START_TEST(test_pba_is_read_only)
{
	msix_ctrl(PCI_MSIX_FLAGS_ENABLE, 0);
	program(1, MSI_ADDR(0), MSI_DATA(1), true);
	ring(1);
	ck_assert(pba_bit(1));
	mmio_wr64(&rig, pba(), 0);
	mmio_wr32(&rig, pba(), 0);
	ck_assert(pba_bit(1));
	mmio_wr64(&rig, pba(), ~0ULL);
	ck_assert_uint_eq(mmio_rd64(&rig, pba()), 1u << 1);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 0);
	mmio_wr32(&rig, entry(1) + E_CTRL, 0); /* still pending: delivered on unmask */
	ck_assert_uint_eq(rig.sink.signal_msi_n, 1);
}
END_TEST

/* ---- doorbell ---- */

START_TEST(test_doorbell_with_msix_disabled_asserts_intx)
{
	ring(0);
	ring(2);
	ck_assert_uint_eq(mmio_rd32(&rig, bar0 + TESTDEV_REG_INTX_PENDING), 2);
	ck_assert_uint_eq(mmio_rd32(&rig, bar0 + TESTDEV_REG_DOORBELLS), 2);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, PIN, 1), 1);
	ck_assert_int_eq(rig.sink.calls[sink_rec_find(&rig.sink, SINK_SET_LINE, 0)].level, 1);
	ck_assert_uint_eq(cfg_rd(&rig, slot, PCI_STATUS, 2) & PCI_STATUS_INTERRUPT,
			  PCI_STATUS_INTERRUPT);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 0);
	ck_assert(!pba_bit(0));
	mmio_wr32(&rig, bar0 + TESTDEV_REG_INTX_ACK, 1);
	ck_assert_uint_eq(mmio_rd32(&rig, bar0 + TESTDEV_REG_INTX_PENDING), 0);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, PIN, 0), 1);
	ck_assert_uint_eq(cfg_rd(&rig, slot, PCI_STATUS, 2) & PCI_STATUS_INTERRUPT, 0);
}
END_TEST

START_TEST(test_masked_entry_pends_then_unmask_delivers_once)
{
	msix_ctrl(PCI_MSIX_FLAGS_ENABLE, 0);
	program(2, MSI_ADDR(1), MSI_DATA(2), true);
	ring(2);
	ring(2);
	ring(2);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 0);
	ck_assert_uint_eq(rig.sink.set_line_n, 0);
	ck_assert(pba_bit(2));
	ck_assert(!pba_bit(0) && !pba_bit(1) && !pba_bit(3));
	mmio_wr32(&rig, entry(2) + E_CTRL, 0);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 1);
	assert_delivered(0, MSI_ADDR(1), MSI_DATA(2));
	ck_assert(!pba_bit(2));
	mmio_wr32(&rig, entry(2) + E_CTRL, 0); /* unmasking again: nothing left */
	ck_assert_uint_eq(rig.sink.signal_msi_n, 1);
}
END_TEST

START_TEST(test_unmasked_entry_delivers_each_ring)
{
	msix_ctrl(PCI_MSIX_FLAGS_ENABLE, 0);
	program(3, MSI_ADDR(3), MSI_DATA(3), false);
	program(0, MSI_ADDR(0), MSI_DATA(0), false);
	ring(3);
	ring(0);
	ring(3);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 3);
	assert_delivered(0, MSI_ADDR(3), MSI_DATA(3));
	assert_delivered(1, MSI_ADDR(0), MSI_DATA(0));
	assert_delivered(2, MSI_ADDR(3), MSI_DATA(3));
	ck_assert(!pba_bit(3));
	ck_assert_uint_eq(rig.sink.set_line_n, 0);
	ck_assert_uint_eq(atomic_load(&dev->msix.vectors[3]->stats.asserts), 2);
}
END_TEST

START_TEST(test_function_mask_pends_and_release_delivers_once)
{
	msix_ctrl(PCI_MSIX_FLAGS_ENABLE, 0);
	program(1, MSI_ADDR(2), MSI_DATA(1), false);
	program(2, MSI_ADDR(2), MSI_DATA(2), true); /* masked by its own bit too */
	msix_ctrl(PCI_MSIX_FLAGS_MASKALL, 0);
	ring(1);
	ring(1);
	ring(2);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 0);
	ck_assert(pba_bit(1));
	ck_assert(pba_bit(2));
	msix_ctrl(0, PCI_MSIX_FLAGS_MASKALL);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 1);
	assert_delivered(0, MSI_ADDR(2), MSI_DATA(1));
	ck_assert(!pba_bit(1));
	ck_assert(pba_bit(2)); /* its entry is still masked */
}
END_TEST

START_TEST(test_doorbell_beyond_table_delivers_nothing)
{
	msix_ctrl(PCI_MSIX_FLAGS_ENABLE, 0);
	for (unsigned n = 0; n < NVEC; n++)
		program(n, MSI_ADDR(0), MSI_DATA(n), false);
	ring(NVEC);
	ring(NVEC + 100);
	ring(0xFFFFFFFFu);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 0);
	ck_assert_uint_eq(rig.sink.set_line_n, 0);
	ck_assert_uint_eq(mmio_rd64(&rig, pba()), 0);
	ck_assert_uint_eq(mmio_rd32(&rig, bar0 + TESTDEV_REG_INTX_PENDING), 0);
}
END_TEST

START_TEST(test_disabling_msix_returns_doorbell_to_intx)
{
	msix_ctrl(PCI_MSIX_FLAGS_ENABLE, 0);
	program(0, MSI_ADDR(0), MSI_DATA(0), false);
	program(1, MSI_ADDR(0), MSI_DATA(1), true);
	ring(0);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 1);
	msix_ctrl(0, PCI_MSIX_FLAGS_ENABLE);
	ring(0);
	ring(1);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 1);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, PIN, 1), 1);
	ck_assert_uint_eq(mmio_rd32(&rig, bar0 + TESTDEV_REG_INTX_PENDING), 2);
	ck_assert_uint_eq(mmio_rd64(&rig, pba()), 0);
	/* Re-enabling finds nothing latched to send. */
	mmio_wr32(&rig, bar0 + TESTDEV_REG_INTX_ACK, 1);
	msix_ctrl(PCI_MSIX_FLAGS_ENABLE, 0);
	mmio_wr32(&rig, entry(1) + E_CTRL, 0);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 1);
}
END_TEST

START_TEST(test_enabling_msix_releases_asserted_intx)
{
	ring(0);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, PIN, 1), 1);
	/* 6.8.2: while MSI-X is enabled the function may not use INTx#. */
	msix_ctrl(PCI_MSIX_FLAGS_ENABLE, 0);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, PIN, 0), 1);
}
END_TEST

START_TEST(test_bad_message_address_counted_not_delivered)
{
	msix_ctrl(PCI_MSIX_FLAGS_ENABLE, 0);
	program(0, 0x12345000ULL, MSI_DATA(0), false);
	program(1, 0x1FEE00000ULL, MSI_DATA(1), false); /* above 4 GiB */
	program(2, 0xFED00000ULL, MSI_DATA(2), false);
	ring(0);
	ring(1);
	ring(2);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 0);
	for (unsigned n = 0; n < 3; n++) {
		ck_assert_uint_eq(atomic_load(&dev->msix.vectors[n]->stats.errors), 1);
		ck_assert_uint_eq(atomic_load(&dev->msix.vectors[n]->stats.asserts), 0);
	}
	program(0, MSI_ADDR(5), MSI_DATA(0), false); /* the guest fixes it */
	ring(0);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 1);
	assert_delivered(0, MSI_ADDR(5), MSI_DATA(0));
}
END_TEST

START_TEST(test_message_the_lapic_refuses_is_counted_coalesced)
{
	msix_ctrl(PCI_MSIX_FLAGS_ENABLE, 0);
	program(0, MSI_ADDR(0), MSI_DATA(0), false);
	rig.sink.signal_ret = 0;
	ring(0);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 1);
	ck_assert_uint_eq(atomic_load(&dev->msix.vectors[0]->stats.coalesced), 1);
	ck_assert_uint_eq(atomic_load(&dev->msix.vectors[0]->stats.errors), 0);
}
END_TEST

/* ---- vector counts ---- */

static void check_vector_count(unsigned n)
{
	struct pci_testdev *t = pci_rig_add(&rig, 2, n);
	ck_assert_int_eq(pci_bus_assign_resources(&rig.pci), 0);
	use_dev(t, 2);
	ck_assert_uint_eq(cfg_rd(&rig, 2, cap + 2u, 2) & 0x7FF, n - 1);
	uint64_t table = (uint64_t)n * 16, pba_off = (table + 4095) & ~4095ULL;
	uint64_t need = pba_off + ((((uint64_t)n + 63) / 64 * 8 + 4095) & ~4095ULL);
	ck_assert_uint_eq(cfg_rd(&rig, 2, cap + 8u, 4), (uint32_t)pba_off | 1);
	uint64_t size = rig_bar_size(&rig, 2, 1);
	ck_assert_uint_ge(size, need);
	ck_assert_uint_eq(size & (size - 1), 0);
	ck_assert_uint_eq(mmio_rd32(&rig, bar0 + TESTDEV_REG_NVECTORS), n);
	for (unsigned i = 0; i < n; i++)
		ck_assert_uint_eq(mmio_rd32(&rig, entry(i) + E_CTRL), 1);
	/* The PBA's last qword is readable, and the last vector works. */
	ck_assert_uint_eq(mmio_rd64(&rig, pba() + ((n - 1) / 64) * 8), 0);
	msix_ctrl(PCI_MSIX_FLAGS_ENABLE, 0);
	program(n - 1, MSI_ADDR(1), 0x7700 + n, true);
	ring(n - 1);
	ck_assert(pba_bit(n - 1));
	ck_assert_uint_eq((mmio_rd32(&rig, pba() + ((n - 1) / 32) * 4) >> ((n - 1) % 32)) & 1, 1);
	mmio_wr32(&rig, entry(n - 1) + E_CTRL, 0);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 1);
	assert_delivered(0, MSI_ADDR(1), 0x7700 + n);
	ck_assert(!pba_bit(n - 1));
	ring(n);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 1);
	ck_assert_uint_eq(rig.sink.set_line_n, 0);
}

START_TEST(test_one_vector)
{
	check_vector_count(1);
}
END_TEST

START_TEST(test_2048_vectors)
{
	check_vector_count(2048);
}
END_TEST

START_TEST(test_vector_counts_outside_1_to_2048_refused)
{
	static struct pci_testdev t;
	ck_assert_int_ne(pci_testdev_init(&t, "zero", &rig.irq, 0, IRQ_MODE_MSIX), 0);
	ck_assert_int_ne(pci_testdev_init(&t, "big", &rig.irq, MSIX_MAX_VECTORS + 1, IRQ_MODE_MSIX),
			 0);
}
END_TEST

START_TEST(test_intx_mode_has_no_capability_and_uses_intx)
{
	static struct pci_testdev t;
	ck_assert_int_eq(pci_testdev_init(&t, "intx", &rig.irq, 4, IRQ_MODE_INTX), 0);
	ck_assert_int_eq(pci_bus_add_device(&rig.pci, &t.pci, 2, 1), 0);
	ck_assert_int_eq(pci_bus_assign_resources(&rig.pci), 0);
	ck_assert_uint_eq(cfg_rd(&rig, 2, PCI_STATUS, 2) & PCI_STATUS_CAP_LIST, 0);
	mmio_wr32(&rig, rig_bar_addr(&rig, 2, 0) + TESTDEV_REG_DOORBELL, 0);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, 18, 1), 1); /* slot 2 INTA# */
	ck_assert_uint_eq(rig.sink.signal_msi_n, 0);
	pci_testdev_destroy(&t);
}
END_TEST

static Suite *msix_suite(void)
{
	Suite *s = suite_create("msix");
	TCase *t = tcase_create("table_pba");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_every_entry_masked_at_reset);
	tcase_add_test(t, test_table_dword_and_qword_accesses);
	tcase_add_test(t, test_table_byte_and_word_writes_ignored);
	tcase_add_test(t, test_table_misaligned_dword_writes_ignored);
	tcase_add_test(t, test_accesses_beyond_table_ignored);
	tcase_add_test(t, test_vector_control_reserved_bits_read_zero);
	tcase_add_test(t, test_pba_is_read_only);
	suite_add_tcase(s, t);

	t = tcase_create("doorbell");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_doorbell_with_msix_disabled_asserts_intx);
	tcase_add_test(t, test_masked_entry_pends_then_unmask_delivers_once);
	tcase_add_test(t, test_unmasked_entry_delivers_each_ring);
	tcase_add_test(t, test_function_mask_pends_and_release_delivers_once);
	tcase_add_test(t, test_doorbell_beyond_table_delivers_nothing);
	tcase_add_test(t, test_disabling_msix_returns_doorbell_to_intx);
	tcase_add_test(t, test_enabling_msix_releases_asserted_intx);
	tcase_add_test(t, test_bad_message_address_counted_not_delivered);
	tcase_add_test(t, test_message_the_lapic_refuses_is_counted_coalesced);
	suite_add_tcase(s, t);

	t = tcase_create("vector_counts");
	tcase_add_checked_fixture(t, bare_setup, teardown);
	tcase_add_test(t, test_one_vector);
	tcase_add_test(t, test_2048_vectors);
	tcase_add_test(t, test_vector_counts_outside_1_to_2048_refused);
	tcase_add_test(t, test_intx_mode_has_no_capability_and_uses_intx);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(msix_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
