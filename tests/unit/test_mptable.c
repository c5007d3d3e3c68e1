/*
 * MP configuration table, parsed here from raw bytes per the Intel
 * MultiProcessor Specification 1.4, chapter 4: floating pointer (4.1),
 * table header (4.2) and base entries (4.3, table 4-3 sizes).
 */
#include "helpers.h"

#include "vmm/base/err.h"
#include "vmm/base/layout.h"
#include "vmm/firmware/mptable.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define RAM_SIZE (16 * MiB)

static struct fake_ram ram;

static void setup(void)
{
	fake_ram_init(&ram, RAM_SIZE);
}

static void teardown(void)
{
	fake_ram_free(&ram);
}

enum { E_CPU = 0, E_BUS = 1, E_IOAPIC = 2, E_INTSRC = 3, E_LINTSRC = 4 };

struct mp_entry {
	uint8_t type;
	const uint8_t *p;
};

struct mp_parsed {
	const uint8_t *mpf;
	const uint8_t *table;
	uint16_t length, count;
	struct mp_entry e[512];
	unsigned n;
};

static uint8_t sum8(const uint8_t *p, size_t n)
{
	uint8_t s = 0;
	while (n--)
		s = (uint8_t)(s + *p++);
	return s;
}

static void write_table(const struct machine_desc *c)
{
	struct err e = {0};
	int ret = mptable_write(&ram.m, c, &e);
	ck_assert_msg(ret > 0, "mptable_write failed: %s", e.msg);
}

/* Walks the base table; asserts the structural rules of chapter 4. */
static void parse(struct mp_parsed *mp)
{
	memset(mp, 0, sizeof(*mp));
	mp->mpf = ram.buf + LAYOUT_MPTABLE;
	uint32_t physptr = get32(mp->mpf + 4);
	ck_assert_uint_lt(physptr, RAM_SIZE);
	mp->table = ram.buf + physptr;
	mp->length = get16(mp->table + 4);
	mp->count = get16(mp->table + 34);
	const uint8_t *p = mp->table + 44, *end = mp->table + mp->length;
	while (p < end) {
		static const unsigned size[] = {20, 8, 8, 8, 8};
		ck_assert_msg(*p <= E_LINTSRC, "unknown base entry type %u", *p);
		ck_assert_uint_lt(mp->n, 512);
		mp->e[mp->n].type = *p;
		mp->e[mp->n].p = p;
		mp->n++;
		p += size[*p];
	}
	ck_assert_ptr_eq(p, end);
}

static unsigned count_type(const struct mp_parsed *mp, uint8_t type)
{
	unsigned n = 0;
	for (unsigned i = 0; i < mp->n; i++)
		n += mp->e[i].type == type;
	return n;
}

static const struct machine_desc one_cpu = {.ncpus = 1};

START_TEST(test_floating_pointer_at_layout_mptable_on_16_byte_boundary)
{
	write_table(&one_cpu);
	ck_assert_uint_eq(LAYOUT_MPTABLE % 16, 0);
	const uint8_t *mpf = ram.buf + LAYOUT_MPTABLE;
	ck_assert_mem_eq(mpf, "_MP_", 4);
	ck_assert_uint_eq(mpf[8], 1);  /* length in 16-byte paragraphs */
	ck_assert_uint_eq(mpf[9], 4);  /* spec revision 1.4 */
	ck_assert_uint_eq(mpf[11], 0); /* feature 1: 0 = a configuration table exists */
}
END_TEST

START_TEST(test_floating_pointer_checksum_sums_to_zero)
{
	write_table(&one_cpu);
	ck_assert_uint_eq(sum8(ram.buf + LAYOUT_MPTABLE, 16), 0);
}
END_TEST

START_TEST(test_physptr_points_to_pcmp_table_with_zero_checksum)
{
	struct mp_parsed mp;
	write_table(&one_cpu);
	parse(&mp);
	ck_assert_mem_eq(mp.table, "PCMP", 4);
	ck_assert_uint_eq(mp.table[6], 4); /* spec revision */
	ck_assert_uint_eq(sum8(mp.table, mp.length), 0);
	/* The table lies in the F segment, after the pointer. */
	uint32_t physptr = get32(mp.mpf + 4);
	ck_assert_uint_ge(physptr, LAYOUT_MPTABLE + 16);
	ck_assert_uint_le(physptr + mp.length, LAYOUT_MPTABLE + LAYOUT_MPTABLE_MAX);
}
END_TEST

START_TEST(test_entry_count_matches_entries)
{
	struct mp_parsed mp;
	struct machine_pci_irq pci[] = {{1, 1, 16}, {2, 1, 17}};
	struct machine_desc c = {.ncpus = 3, .pci_irqs = pci, .npci_irqs = 2};
	write_table(&c);
	parse(&mp);
	ck_assert_uint_eq(mp.count, mp.n);
	/* 3 CPUs, 2 buses, 1 IOAPIC, 16 ISA + 2 PCI sources, 2 local. */
	ck_assert_uint_eq(mp.n, 3 + 2 + 1 + 16 + 2 + 2);
}
END_TEST

START_TEST(test_entries_sorted_by_type)
{
	struct mp_parsed mp;
	struct machine_pci_irq pci[] = {{3, 2, 18}};
	struct machine_desc c = {.ncpus = 2, .pci_irqs = pci, .npci_irqs = 1};
	write_table(&c);
	parse(&mp);
	for (unsigned i = 1; i < mp.n; i++)
		ck_assert_uint_ge(mp.e[i].type, mp.e[i - 1].type);
}
END_TEST

START_TEST(test_local_apic_address_is_fee00000)
{
	struct mp_parsed mp;
	write_table(&one_cpu);
	parse(&mp);
	ck_assert_uint_eq(get32(mp.table + 36), 0xFEE00000);
}
END_TEST

START_TEST(test_processor_entries_apic_ids_0_to_n_minus_1_first_is_bsp)
{
	struct mp_parsed mp;
	struct machine_desc c = {
	    .ncpus = 4, .cpu_signature = 0x000806EC, .cpu_features = 0x0781ABFD};
	write_table(&c);
	parse(&mp);
	ck_assert_uint_eq(count_type(&mp, E_CPU), 4);
	unsigned k = 0;
	for (unsigned i = 0; i < mp.n; i++) {
		if (mp.e[i].type != E_CPU)
			continue;
		const uint8_t *p = mp.e[i].p;
		ck_assert_uint_eq(p[1], k);			/* local APIC ID */
		ck_assert_uint_eq(p[3] & 0x01, 0x01);		/* EN */
		ck_assert_uint_eq(p[3] & 0x02, k == 0 ? 2 : 0); /* BP only on the first */
		ck_assert_uint_eq(get32(p + 4), 0x000806EC);
		ck_assert_uint_eq(get32(p + 8), 0x0781ABFD);
		k++;
	}
}
END_TEST

static const uint8_t *find_bus(const struct mp_parsed *mp, uint8_t id)
{
	for (unsigned i = 0; i < mp->n; i++)
		if (mp->e[i].type == E_BUS && mp->e[i].p[1] == id)
			return mp->e[i].p;
	return NULL;
}

START_TEST(test_bus_0_is_pci_bus_1_is_isa)
{
	struct mp_parsed mp;
	write_table(&one_cpu);
	parse(&mp);
	ck_assert_uint_eq(count_type(&mp, E_BUS), 2);
	const uint8_t *pci = find_bus(&mp, 0), *isa = find_bus(&mp, 1);
	ck_assert_ptr_nonnull(pci);
	ck_assert_ptr_nonnull(isa);
	ck_assert_mem_eq(pci + 2, "PCI   ", 6);
	ck_assert_mem_eq(isa + 2, "ISA   ", 6);
}
END_TEST

static const uint8_t *the_ioapic(const struct mp_parsed *mp)
{
	ck_assert_uint_eq(count_type(mp, E_IOAPIC), 1);
	for (unsigned i = 0; i < mp->n; i++)
		if (mp->e[i].type == E_IOAPIC)
			return mp->e[i].p;
	return NULL;
}

START_TEST(test_one_usable_ioapic_at_fec00000)
{
	struct mp_parsed mp;
	struct machine_desc c = {.ncpus = 2};
	write_table(&c);
	parse(&mp);
	const uint8_t *io = the_ioapic(&mp);
	ck_assert_uint_eq(get32(io + 4), 0xFEC00000);
	ck_assert_uint_eq(io[3] & 1, 1); /* EN */
	/* Its ID must not collide with a processor's APIC ID. */
	ck_assert_uint_ge(io[1], c.ncpus);
	ck_assert_uint_eq(io[1], machine_ioapic_id(&c));
}
END_TEST

START_TEST(test_isa_irq_n_routed_to_ioapic_pin_n)
{
	struct mp_parsed mp;
	write_table(&one_cpu);
	parse(&mp);
	uint8_t ioapic_id = the_ioapic(&mp)[1];
	unsigned seen = 0;
	for (unsigned i = 0; i < mp.n; i++) {
		const uint8_t *p = mp.e[i].p;
		if (mp.e[i].type != E_INTSRC || p[4] != MP_BUS_ISA)
			continue;
		ck_assert_uint_eq(p[1], 0);	    /* INT */
		ck_assert_uint_eq(get16(p + 2), 0); /* conforms to the bus (edge, high) */
		ck_assert_uint_lt(p[5], 16);
		ck_assert_uint_eq(p[6], ioapic_id);
		ck_assert_uint_eq(p[7], p[5]); /* IRQ n -> pin n */
		ck_assert_uint_eq(seen & (1u << p[5]), 0);
		seen |= 1u << p[5];
	}
	ck_assert_uint_eq(seen, 0xFFFF);
}
END_TEST

START_TEST(test_pci_irq_entries_use_slot_and_intx_encoding)
{
	struct mp_parsed mp;
	struct machine_pci_irq pci[] = {{1, 1, 16}, {3, 4, 19}, {31, 2, 23}};
	struct machine_desc c = {.ncpus = 1, .pci_irqs = pci, .npci_irqs = 3};
	write_table(&c);
	parse(&mp);
	uint8_t ioapic_id = the_ioapic(&mp)[1];
	unsigned found = 0;
	for (size_t k = 0; k < 3; k++) {
		uint8_t srcbusirq = (uint8_t)((pci[k].slot << 2) | (pci[k].intx - 1));
		for (unsigned i = 0; i < mp.n; i++) {
			const uint8_t *p = mp.e[i].p;
			if (mp.e[i].type != E_INTSRC || p[4] != MP_BUS_PCI || p[5] != srcbusirq)
				continue;
			ck_assert_uint_eq(p[1], 0);	       /* INT */
			ck_assert_uint_eq(get16(p + 2), 0x0F); /* level, active low */
			ck_assert_uint_eq(p[6], ioapic_id);
			ck_assert_uint_eq(p[7], pci[k].ioapic_pin);
			found++;
		}
	}
	ck_assert_uint_eq(found, 3);
	unsigned pci_entries = 0;
	for (unsigned i = 0; i < mp.n; i++)
		pci_entries += mp.e[i].type == E_INTSRC && mp.e[i].p[4] == MP_BUS_PCI;
	ck_assert_uint_eq(pci_entries, 3);
}
END_TEST

START_TEST(test_lint0_extint_lint1_nmi_to_all_local_apics)
{
	struct mp_parsed mp;
	write_table(&one_cpu);
	parse(&mp);
	ck_assert_uint_eq(count_type(&mp, E_LINTSRC), 2);
	int lint0 = 0, lint1 = 0;
	for (unsigned i = 0; i < mp.n; i++) {
		const uint8_t *p = mp.e[i].p;
		if (mp.e[i].type != E_LINTSRC)
			continue;
		ck_assert_uint_eq(p[6], 0xFF); /* all local APICs */
		if (p[7] == 0) {
			ck_assert_uint_eq(p[1], 3); /* ExtINT */
			lint0++;
		} else if (p[7] == 1) {
			ck_assert_uint_eq(p[1], 1); /* NMI */
			lint1++;
		}
	}
	ck_assert_int_eq(lint0, 1);
	ck_assert_int_eq(lint1, 1);
}
END_TEST

static void check_rejected(struct machine_pci_irq bad)
{
	struct machine_desc c = {.ncpus = 1, .pci_irqs = &bad, .npci_irqs = 1};
	struct err e = {0};
	ck_assert_int_eq(mptable_write(&ram.m, &c, &e), -1);
	ck_assert_int_eq(e.kind, ERR_INPUT);
	ck_assert_msg(e.msg[0] != 0, "error without a message");
}

START_TEST(test_invalid_intx_0_rejected)
{
	check_rejected((struct machine_pci_irq){1, 0, 16});
}
END_TEST

START_TEST(test_invalid_intx_5_rejected)
{
	check_rejected((struct machine_pci_irq){1, 5, 16});
}
END_TEST

START_TEST(test_checksums_hold_for_many_cpus)
{
	struct mp_parsed mp;
	struct machine_desc c = {.ncpus = 64};
	write_table(&c);
	parse(&mp);
	ck_assert_uint_eq(sum8(ram.buf + LAYOUT_MPTABLE, 16), 0);
	ck_assert_uint_eq(sum8(mp.table, mp.length), 0);
	ck_assert_uint_eq(count_type(&mp, E_CPU), 64);
	ck_assert_uint_eq(mp.count, mp.n);
}
END_TEST

/* Issue 26: the IOAPIC's ID is no CPU's APIC ID (MP spec 1.4, 4.3.3), for
 * every machine size; it stopped at 15, CPU 15's ID, from 16 vCPUs on. */
START_TEST(test_ioapic_id_is_no_cpus_apic_id)
{
	const unsigned sizes[] = {1, 2, 15, 16, 17, 64, 200, 254};
	for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		struct mp_parsed mp;
		struct machine_desc c = {.ncpus = sizes[k]};
		memset(ram.buf + LAYOUT_MPTABLE, 0, 16);
		write_table(&c);
		parse(&mp);
		uint8_t id = 0xFF;
		for (unsigned i = 0; i < mp.n; i++)
			if (mp.e[i].type == E_IOAPIC)
				id = mp.e[i].p[1];
		ck_assert_uint_ne(id, 0xFF);
		for (unsigned i = 0; i < mp.n; i++)
			if (mp.e[i].type == E_CPU)
				ck_assert_msg(mp.e[i].p[1] != id,
					      "%u vCPUs: IOAPIC ID %u is a CPU's", sizes[k], id);
		ck_assert_uint_eq(id, machine_ioapic_id(&c));
	}
}
END_TEST

static Suite *mptable_suite(void)
{
	Suite *s = suite_create("mptable");
	TCase *t = tcase_create("mptable");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_floating_pointer_at_layout_mptable_on_16_byte_boundary);
	tcase_add_test(t, test_floating_pointer_checksum_sums_to_zero);
	tcase_add_test(t, test_physptr_points_to_pcmp_table_with_zero_checksum);
	tcase_add_test(t, test_entry_count_matches_entries);
	tcase_add_test(t, test_entries_sorted_by_type);
	tcase_add_test(t, test_local_apic_address_is_fee00000);
	tcase_add_test(t, test_processor_entries_apic_ids_0_to_n_minus_1_first_is_bsp);
	tcase_add_test(t, test_bus_0_is_pci_bus_1_is_isa);
	tcase_add_test(t, test_one_usable_ioapic_at_fec00000);
	tcase_add_test(t, test_isa_irq_n_routed_to_ioapic_pin_n);
	tcase_add_test(t, test_pci_irq_entries_use_slot_and_intx_encoding);
	tcase_add_test(t, test_lint0_extint_lint1_nmi_to_all_local_apics);
	tcase_add_test(t, test_invalid_intx_0_rejected);
	tcase_add_test(t, test_invalid_intx_5_rejected);
	tcase_add_test(t, test_checksums_hold_for_many_cpus);
	tcase_add_test(t, test_ioapic_id_is_no_cpus_apic_id);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(mptable_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
