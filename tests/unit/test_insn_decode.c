/*
 * The instruction decoding behind the ring-0 fallbacks: ModRM/SIB/disp
 * effective addresses in 64-bit mode (Intel SDM vol. 2, 2.1.5 and 2.2.1),
 * and the hints for instructions the emulating host does not know.
 */
#include "vmm/cpu/vcpu_diag.h"
#include "vmm/cpu/vcpu_fallback.h"

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
static const char *hint(const uint8_t *insn, unsigned n)
{
	static char buf[160];
	return vcpu_insn_hint(insn, n, buf, sizeof(buf));
}

#define ASSERT_HINT(bytes, want)                                                                   \
	do {                                                                                       \
		const char *h_ = hint(bytes, sizeof(bytes));                                       \
		ck_assert_msg(h_ &&strstr(h_, want), "%s: got %s", #bytes, h_ ? h_ : "NULL");      \
	} while (0)

START_TEST(test_hints_name_the_clearcpuid_word)
{
	const uint8_t cx16[] = {0xF0, 0x48, 0x0F, 0xC7, 0x4D, 0x20};
	const uint8_t cx8[] = {0xF0, 0x0F, 0xC7, 0x4D, 0x20}; /* no REX.W: cmpxchg8b */
	const uint8_t xrstor[] = {0x48, 0x0F, 0xAE, 0x2F};
	const uint8_t xgetbv[] = {0x0F, 0x01, 0xD0};
	const uint8_t popcnt[] = {0xF3, 0x48, 0x0F, 0xB8, 0xC7};
	const uint8_t movd[] = {0x66, 0x44, 0x0F, 0x6E, 0xF9}; /* SSE2: no bit avoids it */
	ASSERT_HINT(cx16, "clearcpuid=141 (cx16)");
	ASSERT_HINT(xrstor, "clearcpuid=154 (xsave)");
	ASSERT_HINT(xgetbv, "clearcpuid=154 (xsave)");
	ASSERT_HINT(popcnt, "clearcpuid=151 (popcnt)");
	ck_assert_ptr_null(hint(movd, sizeof(movd)));
	ck_assert_ptr_null(hint(cx8, sizeof(cx8)));
}
END_TEST

/* The instructions of other kernels' crypto code that this host's ring 0
 * does not know (seen: pshufb in crc_t10dif_pcl, 66 41 0f 38 00 fb), by
 * Linux's X86_FEATURE_* numbers (cpufeatures.h). */
START_TEST(test_hints_for_crypto_and_vector_instructions)
{
	const uint8_t pshufb[] = {0x66, 0x41, 0x0F, 0x38, 0x00, 0xFB};
	const uint8_t palignr[] = {0x66, 0x0F, 0x3A, 0x0F, 0xC1, 0x08};
	const uint8_t pclmul[] = {0x66, 0x0F, 0x3A, 0x44, 0xC1, 0x00};
	const uint8_t sha256[] = {0x0F, 0x38, 0xCB, 0xCA};
	const uint8_t sha1rnds4[] = {0x0F, 0x3A, 0xCC, 0xC1, 0x00};
	const uint8_t aesenc[] = {0x66, 0x0F, 0x38, 0xDC, 0xC1};
	const uint8_t crc32[] = {0xF2, 0x48, 0x0F, 0x38, 0xF1, 0xC1};
	const uint8_t movbe[] = {0x0F, 0x38, 0xF0, 0x07};
	const uint8_t ptest[] = {0x66, 0x0F, 0x38, 0x17, 0xC1};
	const uint8_t vpxor[] = {0xC5, 0xF1, 0xEF, 0xC0};
	const uint8_t evex[] = {0x62, 0xF1, 0x7D, 0x48, 0xEF, 0xC0};
	const uint8_t rdrand[] = {0x48, 0x0F, 0xC7, 0xF0};
	ASSERT_HINT(pshufb, "clearcpuid=137 (ssse3)");
	ASSERT_HINT(palignr, "clearcpuid=137 (ssse3)");
	ASSERT_HINT(pclmul, "clearcpuid=129 (pclmulqdq)");
	ASSERT_HINT(sha256, "clearcpuid=317 (sha_ni)");
	ASSERT_HINT(sha1rnds4, "clearcpuid=317 (sha_ni)");
	ASSERT_HINT(aesenc, "clearcpuid=153 (aes)");
	ASSERT_HINT(crc32, "clearcpuid=148 (sse4_2)");
	ASSERT_HINT(movbe, "clearcpuid=150 (movbe)");
	ASSERT_HINT(ptest, "clearcpuid=147 (sse4_1)");
	ASSERT_HINT(vpxor, "clearcpuid=156 (avx)");
	ASSERT_HINT(evex, "clearcpuid=304 (avx512f)");
	ASSERT_HINT(rdrand, "clearcpuid=158 (rdrand)");
	/* Truncated encodings decode to nothing, never past the end. */
	ck_assert_ptr_null(hint(pshufb, 4));
	ck_assert_ptr_null(hint(pshufb, 0));
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
	tcase_add_test(tc, test_hints_for_crypto_and_vector_instructions);
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
