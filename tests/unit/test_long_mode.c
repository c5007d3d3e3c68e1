/*
 * The 64-bit entry state (vmm/cpu/long_mode.c) that ./vmm's boot vCPU and
 * tests/bench/kvm_floor.c both start from: the values the 64-bit boot
 * protocol (boot.rst) and the SDM's IA-32e rules (vol. 3, 10.8.5, 3.4.5)
 * ask for, the caller's tables and selectors taken as given, and what
 * the caller did not ask to set kept as KVM_GET_SREGS gave it.
 */
#include "vmm/cpu/long_mode.h"

#include <check.h>
#include <linux/kvm.h>
#include <stdlib.h>
#include <string.h>

static const struct long_mode_entry entry = {.rip = 0x100200,
					     .rsp = 0x8FF0,
					     .cr3 = 0x9000,
					     .gdt = 0x500,
					     .gdt_limit = 55,
					     .idt = 0x2000,
					     .idt_limit = 4095,
					     .code_sel = 0x10,
					     .data_sel = 0x18,
					     .tss_sel = 0x20};

START_TEST(test_paging_on_in_long_mode)
{
	struct kvm_sregs s;
	memset(&s, 0xA5, sizeof(s));
	long_mode_sregs(&s, &entry);
	ck_assert_uint_eq(s.cr0, 0x80050033); /* PG AM WP NE ET MP PE */
	ck_assert_uint_eq(s.cr4, 0x20);	      /* PAE */
	ck_assert_uint_eq(s.efer, 0x500);     /* LME LMA */
	ck_assert_uint_eq(s.cr3, 0x9000);
	ck_assert_uint_eq(s.gdt.base, 0x500);
	ck_assert_uint_eq(s.gdt.limit, 55);
	ck_assert_uint_eq(s.idt.base, 0x2000);
	ck_assert_uint_eq(s.idt.limit, 4095);
	ck_assert_uint_eq(s.cr2, 0xA5A5A5A5A5A5A5A5ull); /* not the entry's: kept */
}
END_TEST

START_TEST(test_flat_64_bit_code_and_data)
{
	struct kvm_sregs s;
	memset(&s, 0, sizeof(s));
	long_mode_sregs(&s, &entry);
	ck_assert_uint_eq(s.cs.selector, 0x10);
	ck_assert(s.cs.type == 0xB && s.cs.s && s.cs.l && !s.cs.db && s.cs.present && s.cs.g);
	ck_assert_uint_eq(s.cs.limit, 0xFFFFFFFF);
	const struct kvm_segment *data[] = {&s.ds, &s.es, &s.fs, &s.gs, &s.ss};
	for (unsigned i = 0; i < 5; i++) {
		ck_assert_uint_eq(data[i]->selector, 0x18);
		ck_assert(data[i]->type == 0x3 && data[i]->s && !data[i]->l && data[i]->db);
		ck_assert(data[i]->present && data[i]->g && data[i]->base == 0);
	}
	ck_assert_uint_eq(s.tr.selector, 0x20);
	ck_assert(s.tr.type == 0xB && !s.tr.s && s.tr.present && !s.tr.g);
	ck_assert_uint_eq(s.tr.limit, 0x67);
}
END_TEST

START_TEST(test_no_tss_keeps_tr_and_regs_start_clean)
{
	struct long_mode_entry lm = entry;
	struct kvm_sregs s;
	struct kvm_regs r;
	lm.tss_sel = 0;
	memset(&s, 0, sizeof(s));
	s.tr.selector = 0x1234;
	long_mode_sregs(&s, &lm);
	ck_assert_uint_eq(s.tr.selector, 0x1234);
	memset(&r, 0xA5, sizeof(r));
	long_mode_regs(&r, &lm);
	ck_assert_uint_eq(r.rip, 0x100200);
	ck_assert_uint_eq(r.rsp, 0x8FF0);
	ck_assert_uint_eq(r.rflags, 0x2); /* interrupts off */
	ck_assert_uint_eq(r.rax | r.rbx | r.rsi | r.rdi | r.rbp | r.r15, 0);
}
END_TEST

static Suite *long_mode_suite(void)
{
	Suite *s = suite_create("long_mode");
	TCase *t = tcase_create("entry");
	tcase_add_test(t, test_paging_on_in_long_mode);
	tcase_add_test(t, test_flat_64_bit_code_and_data);
	tcase_add_test(t, test_no_tss_keeps_tr_and_regs_start_clean);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(long_mode_suite());
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
