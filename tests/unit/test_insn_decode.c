/*
 * The instruction decoding behind the ring-0 fallbacks: ModRM/SIB/disp
 * effective addresses in 64-bit mode (Intel SDM vol. 2, 2.1.5 and 2.2.1),
 * and the hints for instructions the emulating host does not know.
 */
#include "vmm/vcpu_diag.h"
#include "vmm/vcpu_fallback.h"

#include <check.h>
#include <linux/kvm.h>
#include <stdlib.h>
#include <string.h>

static struct kvm_regs regs;
static struct kvm_sregs sregs;

static void setup(void)
{
	memset(&regs, 0, sizeof(regs));
	memset(&sregs, 0, sizeof(sregs));
	regs.rsp = 0x8000;
	regs.rax = 0x1000;
	regs.rcx = 0x20;
	regs.r8 = 0x300000;
	regs.r9 = 0x40;
	regs.rip = 0xffffffff81000000ULL;
	sregs.gs.base = 0xffff888000000000ULL;
}

START_TEST(test_ldmxcsr_rsp_disp8)
{
	/* ldmxcsr 0x4(%rsp): 0F AE /2, mod 01, rm 100 -> SIB 24 (base rsp), disp8 */
	const uint8_t b[] = {0x0F, 0xAE, 0x54, 0x24, 0x04};
	struct insn_mem_operand op;
	ck_assert_int_eq(insn_decode_mem(b, sizeof(b), &regs, &sregs, &op), 0);
	ck_assert_uint_eq(op.opcode, 0xAE);
	ck_assert_uint_eq(op.reg, 2);
	ck_assert_uint_eq(op.length, 5);
	ck_assert_uint_eq(op.linear, 0x8004);
}
END_TEST

START_TEST(test_rip_relative_counts_from_next_instruction)
{
	/* stmxcsr 0x10(%rip): mod 00, rm 101, disp32 */
	const uint8_t b[] = {0x0F, 0xAE, 0x1D, 0x10, 0x00, 0x00, 0x00};
	struct insn_mem_operand op;
	ck_assert_int_eq(insn_decode_mem(b, sizeof(b), &regs, &sregs, &op), 0);
	ck_assert_uint_eq(op.reg, 3);
	ck_assert_uint_eq(op.length, 7);
	ck_assert_uint_eq(op.linear, regs.rip + 7 + 0x10);
}
END_TEST

START_TEST(test_gs_prefix_sib_without_base)
{
	/* stmxcsr %gs:0x1000: 65, mod 00 rm 100, SIB 25 (no index, base 101 -> disp32) */
	const uint8_t b[] = {0x65, 0x0F, 0xAE, 0x1C, 0x25, 0x00, 0x10, 0x00, 0x00};
	struct insn_mem_operand op;
	ck_assert_int_eq(insn_decode_mem(b, sizeof(b), &regs, &sregs, &op), 0);
	ck_assert_uint_eq(op.length, 9);
	ck_assert_uint_eq(op.linear, sregs.gs.base + 0x1000);
}
END_TEST

START_TEST(test_rex_extends_base_and_index)
{
	/* ldmxcsr 0x8(%r8): REX.B 41, mod 01 rm 000 */
	const uint8_t b1[] = {0x41, 0x0F, 0xAE, 0x50, 0x08};
	/* ldmxcsr -0x10(%rax,%r9,4): REX.X 42, mod 01 rm 100, SIB scale 2 index 001 base 000 */
	const uint8_t b2[] = {0x42, 0x0F, 0xAE, 0x54, 0x88, 0xF0};
	struct insn_mem_operand op;
	ck_assert_int_eq(insn_decode_mem(b1, sizeof(b1), &regs, &sregs, &op), 0);
	ck_assert_uint_eq(op.length, 5);
	ck_assert_uint_eq(op.linear, 0x300008);
	ck_assert_int_eq(insn_decode_mem(b2, sizeof(b2), &regs, &sregs, &op), 0);
	ck_assert_uint_eq(op.length, 6);
	ck_assert_uint_eq(op.linear, 0x1000 + 0x40 * 4 - 0x10);
}
END_TEST

START_TEST(test_register_operand_and_truncation_refused)
{
	struct insn_mem_operand op;
	const uint8_t reg_form[] = {0x0F, 0xAE, 0xD0};	      /* mod 11: not memory */
	const uint8_t cut[] = {0x0F, 0xAE, 0x94, 0x24, 0x10}; /* disp32 cut short */
	const uint8_t not_0f[] = {0x90, 0x90, 0x90, 0x90};
	ck_assert_int_eq(insn_decode_mem(reg_form, sizeof(reg_form), &regs, &sregs, &op), -1);
	ck_assert_int_eq(insn_decode_mem(cut, sizeof(cut), &regs, &sregs, &op), -1);
	ck_assert_int_eq(insn_decode_mem(not_0f, sizeof(not_0f), &regs, &sregs, &op), -1);
}
END_TEST

/* Bit numbers, not names: clearcpuid= takes names only from Linux 5.19, and
 * a 5.10 kernel given names stops at the first one (so the hint named a
 * word that was already on its command line). */
START_TEST(test_hints_name_the_clearcpuid_word)
{
	const uint8_t cx16[] = {0xF0, 0x48, 0x0F, 0xC7, 0x4D, 0x20};
	const uint8_t xrstor[] = {0x48, 0x0F, 0xAE, 0x2F};
	const uint8_t xgetbv[] = {0x0F, 0x01, 0xD0};
	const uint8_t popcnt[] = {0xF3, 0x48, 0x0F, 0xB8, 0xC7};
	const uint8_t movd[] = {0x66, 0x44, 0x0F, 0x6E, 0xF9};
	ck_assert_ptr_nonnull(strstr(vcpu_insn_hint(cx16, sizeof(cx16)), "clearcpuid=141 (cx16)"));
	ck_assert_ptr_nonnull(
	    strstr(vcpu_insn_hint(xrstor, sizeof(xrstor)), "clearcpuid=154 (xsave)"));
	ck_assert_ptr_nonnull(
	    strstr(vcpu_insn_hint(xgetbv, sizeof(xgetbv)), "clearcpuid=154 (xsave)"));
	ck_assert_ptr_nonnull(
	    strstr(vcpu_insn_hint(popcnt, sizeof(popcnt)), "clearcpuid=151 (popcnt)"));
	ck_assert_ptr_null(vcpu_insn_hint(movd, sizeof(movd)));
}
END_TEST

static Suite *insn_suite(void)
{
	Suite *s = suite_create("insn_decode");
	TCase *tc = tcase_create("decode");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_ldmxcsr_rsp_disp8);
	tcase_add_test(tc, test_rip_relative_counts_from_next_instruction);
	tcase_add_test(tc, test_gs_prefix_sib_without_base);
	tcase_add_test(tc, test_rex_extends_base_and_index);
	tcase_add_test(tc, test_register_operand_and_truncation_refused);
	tcase_add_test(tc, test_hints_name_the_clearcpuid_word);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(insn_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
