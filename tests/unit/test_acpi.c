/*
 * The AML emitter (vmm/firmware/aml.c: ACPI 6.5 chapter 20 encodings, 6.4 resource
 * descriptors) and the ACPI tables built from a machine description
 * (vmm/firmware/acpi.c): checksums (5.2.6), the RSDP (5.2.5.3) and XSDT pointers,
 * the hardware-reduced FADT, a MADT that says what the MP table says
 * (CPUs, the IOAPIC's ID), and a DSDT whose _PRT gives each slot's pin
 * the IOAPIC input of the machine description. (iasl -d of the same
 * tables: tests/guest/acpi_tables_test.py.)
 */
#include "helpers.h"

#include "vmm/base/err.h"
#include "vmm/base/layout.h"
#include "vmm/firmware/acpi.h"
#include "vmm/firmware/aml.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static struct acpi_tables tables;

START_TEST(test_pkglen_encodings)
{
	uint8_t b[4];
	ck_assert_uint_eq(aml_pkglen_encode(0, b), 1);
	ck_assert_uint_eq(b[0], 0x01); /* it counts itself */
	ck_assert_uint_eq(aml_pkglen_encode(62, b), 1);
	ck_assert_uint_eq(b[0], 0x3F);
	ck_assert_uint_eq(aml_pkglen_encode(63, b), 2); /* 65 in all: 0x41, 0x04 */
	ck_assert_uint_eq(b[0], 0x41);
	ck_assert_uint_eq(b[1], 0x04);
	ck_assert_uint_eq(aml_pkglen_encode(4093, b), 2);
	ck_assert_uint_eq(aml_pkglen_encode(4094, b), 3); /* 4097 */
	ck_assert_uint_eq(b[0], 0x80 | 0x01);
	ck_assert_uint_eq(b[1], 0x00);
	ck_assert_uint_eq(b[2], 0x01);
	ck_assert_uint_eq(aml_pkglen_encode(1u << 28, b), 0);
}
END_TEST

static size_t emit(void (*f)(struct aml *a), uint8_t *out)
{
	struct aml a;
	aml_init(&a, out, 256);
	f(&a);
	ck_assert(!a.overflow);
	return a.len;
}

static void names(struct aml *a)
{
	aml_name_string(a, "_HID");
	aml_name_string(a, "\\_SB_.PCI0");
	aml_name_string(a, "A.B.C");
	aml_name_string(a, "COM");
}

START_TEST(test_name_strings)
{
	uint8_t b[256];
	size_t n = emit(names, b);
	const uint8_t want[] = {'_', 'H', 'I', 'D',  0x5C, 0x2E, '_', 'S', 'B', '_', 'P',
				'C', 'I', '0', 0x2F, 3,	   'A',	 '_', '_', '_', 'B', '_',
				'_', '_', 'C', '_',  '_',  '_',	 'C', 'O', 'M', '_'};
	ck_assert_uint_eq(n, sizeof(want));
	ck_assert_mem_eq(b, want, sizeof(want));
}
END_TEST

static void integers(struct aml *a)
{
	aml_integer(a, 0);
	aml_integer(a, 1);
	aml_integer(a, 0xFF);
	aml_integer(a, 0x100);
	aml_integer(a, 0x10000);
	aml_integer(a, 1ULL << 32);
}

START_TEST(test_integers_take_the_shortest_form)
{
	uint8_t b[256];
	size_t n = emit(integers, b);
	const uint8_t want[] = {0x00, 0x01, 0x0A, 0xFF, 0x0B, 0x00, 0x01, 0x0C, 0x00, 0x00, 0x01,
				0x00, 0x0E, 0,	  0,	0,    0,    1,	  0,	0,    0};
	ck_assert_uint_eq(n, sizeof(want));
	ck_assert_mem_eq(b, want, sizeof(want));
}
END_TEST

START_TEST(test_eisaid)
{
	ck_assert_uint_eq(aml_eisaid_value("PNP0A03"), 0x030AD041);
	ck_assert_uint_eq(aml_eisaid_value("PNP0501"), 0x0105D041);
	ck_assert_uint_eq(aml_eisaid_value("pnp0a03"), 0);
	ck_assert_uint_eq(aml_eisaid_value("PNP0A0"), 0);
	ck_assert_uint_eq(aml_eisaid_value("PNP0A0G"), 0);
}
END_TEST

static void nested(struct aml *a)
{
	aml_scope(a, "\\_SB_");
	aml_device(a, "DEV0");
	aml_name(a, "_UID");
	aml_integer(a, 7);
	aml_end(a);
	aml_end(a);
}

START_TEST(test_scopes_and_devices_get_their_lengths)
{
	uint8_t b[256];
	size_t n = emit(nested, b);
	/* Scope: 10 len '\' _SB_ { Device: 5B 82 len DEV0 { 08 _UID 0A 07 } } */
	const uint8_t want[] = {0x10, 0x14, 0x5C, '_',	'S', 'B', '_', 0x5B, 0x82, 0x0C, 'D',
				'E',  'V',  '0',  0x08, '_', 'U', 'I', 'D',  0x0A, 0x07};
	ck_assert_uint_eq(n, sizeof(want));
	ck_assert_mem_eq(b, want, sizeof(want));
}
END_TEST

START_TEST(test_overflow_is_sticky_and_unbalanced_end_fails)
{
	uint8_t b[8];
	struct aml a;
	aml_init(&a, b, sizeof(b));
	aml_string(&a, "longer than eight");
	ck_assert(a.overflow);
	aml_init(&a, b, sizeof(b));
	aml_end(&a);
	ck_assert(a.overflow);
}
END_TEST

static const struct machine_pci_irq irqs[] = {{1, 1, 17}, {2, 1, 18}, {31, 4, 18}};
static const struct machine_desc desc = {2, 0x00A00F11, 0x178BFBFF, irqs, 3};

static const uint8_t *table(const char *sig, size_t *len)
{
	for (unsigned i = 0; i < tables.ntables; i++)
		if (!strcmp(tables.tables[i].sig, sig)) {
			*len = tables.tables[i].len;
			return tables.buf + tables.tables[i].off;
		}
	ck_abort_msg("no %s table", sig);
	return NULL;
}

static const uint8_t *at_gpa(uint64_t gpa)
{
	ck_assert(gpa >= tables.base && gpa < tables.base + tables.len);
	return tables.buf + (gpa - tables.base);
}

static void build(const struct machine_desc *d)
{
	struct err e = {0};
	ck_assert_msg(acpi_build(d, LAYOUT_ACPI, &tables, &e) == 0, "%s", e.msg);
}

START_TEST(test_every_table_sums_to_zero)
{
	build(&desc);
	ck_assert_uint_eq(tables.ntables, 5);
	for (unsigned i = 0; i < tables.ntables; i++) {
		const struct acpi_table_at *t = &tables.tables[i];
		if (!strcmp(t->sig, "RSDP")) {
			ck_assert_uint_eq(acpi_sum(tables.buf + t->off, 20), 0);
			ck_assert_uint_eq(acpi_sum(tables.buf + t->off, 36), 0);
		} else {
			ck_assert_uint_eq(get32(tables.buf + t->off + 4), t->len);
			ck_assert_msg(acpi_sum(tables.buf + t->off, t->len) == 0, "%s", t->sig);
		}
	}
}
END_TEST

START_TEST(test_rsdp_xsdt_fadt_dsdt_point_at_each_other)
{
	size_t len;
	build(&desc);
	ck_assert_uint_eq(tables.rsdp, LAYOUT_ACPI);
	const uint8_t *r = tables.buf;
	ck_assert_mem_eq(r, "RSD PTR ", 8);
	ck_assert_uint_eq(r[15], 2);
	const uint8_t *x = at_gpa(get64(r + 24));
	ck_assert_mem_eq(x, "XSDT", 4);
	ck_assert_uint_eq(get32(x + 4), 36 + 16);
	ck_assert_mem_eq(at_gpa(get64(x + 36)), "FACP", 4);
	ck_assert_mem_eq(at_gpa(get64(x + 44)), "APIC", 4);
	const uint8_t *f = table("FACP", &len);
	ck_assert_uint_eq(len, 276);
	ck_assert_uint_eq(f[8], 6);
	ck_assert_uint_eq(get32(f + 112) & (1u << 20), 1u << 20); /* HW_REDUCED_ACPI */
	ck_assert_uint_eq(get16(f + 109) & (1u << 3), 0);	  /* MSI is not "not supported" */
	ck_assert_uint_eq(get64(f + 140), get32(f + 40));	  /* X_DSDT = DSDT */
	ck_assert_mem_eq(at_gpa(get64(f + 140)), "DSDT", 4);
	ck_assert_uint_eq(f[244], 1); /* sleep control: system I/O */
	ck_assert_uint_eq(get64(f + 248), 0x600);
}
END_TEST

START_TEST(test_madt_says_what_the_mp_table_says)
{
	size_t len;
	build(&desc);
	const uint8_t *m = table("APIC", &len), *p = m + 44;
	ck_assert_uint_eq(get32(m + 36), 0xFEE00000);
	unsigned lapics = 0, ioapics = 0;
	while (p < m + len) {
		ck_assert_uint_ge(p[1], 2);
		if (p[0] == 0) {
			ck_assert_uint_eq(p[2], lapics); /* UID */
			ck_assert_uint_eq(p[3], lapics); /* APIC ID */
			ck_assert_uint_eq(get32(p + 4) & 1, 1);
			lapics++;
		} else if (p[0] == 1) {
			ck_assert_uint_eq(p[2], machine_ioapic_id(&desc));
			ck_assert_uint_eq(get32(p + 4), 0xFEC00000);
			ck_assert_uint_eq(get32(p + 8), 0);
			ioapics++;
		} else if (p[0] == 2) {
			ck_assert_uint_ne(p[3], 0); /* no override of IRQ 0: identity */
		}
		p += p[1];
	}
	ck_assert_uint_eq(lapics, desc.ncpus);
	ck_assert_uint_eq(ioapics, 1);
}
END_TEST

/* The bytes of _PRT's entry for one slot and pin: Package(4) {DWord
 * slot << 16 | 0xFFFF, pin, Zero, Byte gsi}. */
static bool prt_has(const uint8_t *d, size_t len, const struct machine_pci_irq *i)
{
	uint32_t addr = (uint32_t)i->slot << 16 | 0xFFFF;
	uint8_t pin[2] = {0, 0};
	size_t pinlen = i->intx - 1 <= 1 ? 1 : 2;
	if (i->intx - 1 <= 1)
		pin[0] = (uint8_t)(i->intx - 1);
	else {
		pin[0] = 0x0A;
		pin[1] = (uint8_t)(i->intx - 1);
	}
	uint8_t want[16] = {0x12,
			    0,
			    0x04,
			    0x0C,
			    (uint8_t)addr,
			    (uint8_t)(addr >> 8),
			    (uint8_t)(addr >> 16),
			    (uint8_t)(addr >> 24)};
	size_t n = 8;
	memcpy(want + n, pin, pinlen);
	n += pinlen;
	want[n++] = 0x00;
	want[n++] = 0x0A;
	want[n++] = i->ioapic_pin;
	want[1] = (uint8_t)(n - 1); /* the PkgLength: everything after the opcode */
	for (size_t k = 0; k + n <= len; k++)
		if (!memcmp(d + k, want, n))
			return true;
	return false;
}

START_TEST(test_prt_gives_each_pin_its_ioapic_input)
{
	size_t len;
	build(&desc);
	const uint8_t *d = table("DSDT", &len);
	for (size_t i = 0; i < desc.npci_irqs; i++)
		ck_assert_msg(prt_has(d, len, &irqs[i]), "no _PRT entry for slot %u INT%c#",
			      irqs[i].slot, 'A' + irqs[i].intx - 1);
	const struct machine_pci_irq wrong = {1, 1, 19};
	ck_assert(!prt_has(d, len, &wrong));
}
END_TEST

START_TEST(test_254_cpus_fit_and_255_are_refused)
{
	struct machine_desc big = desc;
	big.ncpus = 254;
	build(&big);
	size_t len;
	table("APIC", &len);
	ck_assert_uint_eq(len, 44 + 8 * 254 + 12 + 10 + 6);
	big.ncpus = 255;
	struct err e = {0};
	ck_assert_int_ne(acpi_build(&big, LAYOUT_ACPI, &tables, &e), 0);
	ck_assert_ptr_nonnull(strstr(e.msg, "255 CPUs"));
}
END_TEST

static Suite *acpi_suite(void)
{
	Suite *s = suite_create("acpi");
	TCase *t = tcase_create("aml");
	tcase_add_test(t, test_pkglen_encodings);
	tcase_add_test(t, test_name_strings);
	tcase_add_test(t, test_integers_take_the_shortest_form);
	tcase_add_test(t, test_eisaid);
	tcase_add_test(t, test_scopes_and_devices_get_their_lengths);
	tcase_add_test(t, test_overflow_is_sticky_and_unbalanced_end_fails);
	suite_add_tcase(s, t);
	t = tcase_create("tables");
	tcase_add_test(t, test_every_table_sums_to_zero);
	tcase_add_test(t, test_rsdp_xsdt_fadt_dsdt_point_at_each_other);
	tcase_add_test(t, test_madt_says_what_the_mp_table_says);
	tcase_add_test(t, test_prt_gives_each_pin_its_ioapic_input);
	tcase_add_test(t, test_254_cpus_fit_and_255_are_refused);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(acpi_suite());
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
