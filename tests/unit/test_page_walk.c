/*
 * The page walk the emulation fallbacks access memory with
 * (vmm/cpu/page_walk.c) over page tables built in fake RAM: 4- and 5-level
 * translations, large pages, and each access right the CPU checks (Intel
 * SDM vol. 3, 4.6: U/S, R/W with CR0.WP, NX with EFER.NXE, SMEP, SMAP and
 * RFLAGS.AC) with the #PF error code of 4.7, non-canonical addresses, and
 * the report's peek that checks nothing.
 */
#include "helpers.h"

#include "vmm/cpu/page_walk.h"

#include <check.h>
#include <linux/kvm.h>
#include <stdlib.h>
#include <string.h>

#define P  1ULL
#define RW 2ULL
#define US 4ULL
#define PS 0x80ULL
#define NX (1ULL << 63)

#define CR0_PG	  (1ULL << 31)
#define CR0_WP	  (1ULL << 16)
#define CR4_LA57  (1ULL << 12)
#define CR4_SMEP  (1ULL << 20)
#define CR4_SMAP  (1ULL << 21)
#define EFER_LMA  (1ULL << 10)
#define EFER_NXE  (1ULL << 11)
#define RFLAGS_AC (1ULL << 18)

static struct fake_ram ram;
static struct kvm_sregs sregs;
static uint64_t next_table;

/* A page for a table, zeroed, from 1 MiB up. */
static uint64_t table_page(void)
{
	uint64_t at = next_table;
	next_table += 4096;
	memset(ram.buf + at, 0, 4096);
	return at;
}

/* Maps `lin` (levels: 5 or 4) to `pa` with `leaf` flags at `leaf_level`
 * (0: 4 KiB, 1: 2 MiB, 2: 1 GiB); the upper levels get `upper` flags. */
static void map(int levels, uint64_t lin, uint64_t pa, int leaf_level, uint64_t leaf,
		uint64_t upper)
{
	uint64_t table = sregs.cr3 & ~0xFFFULL;
	for (int level = levels - 1; level > leaf_level; level--) {
		uint64_t idx = (lin >> (12 + 9 * level)) & 0x1FF;
		uint64_t pte = get64(ram.buf + table + idx * 8);
		if (!(pte & P)) {
			pte = table_page() | upper;
			put64(ram.buf + table + idx * 8, pte);
		}
		table = pte & 0x000FFFFFFFFFF000ULL;
	}
	uint64_t idx = (lin >> (12 + 9 * leaf_level)) & 0x1FF;
	put64(ram.buf + table + idx * 8, pa | leaf | (leaf_level ? PS : 0));
}

static void setup(void)
{
	fake_ram_init(&ram, 64 * MiB);
	memset(&sregs, 0, sizeof(sregs));
	next_table = 1 * MiB;
	sregs.cr0 = CR0_PG | CR0_WP | 1;
	sregs.efer = EFER_LMA | EFER_NXE | (1ULL << 8);
	sregs.cr3 = table_page();
}

static void teardown(void)
{
	fake_ram_free(&ram);
}

static int walk(unsigned cpl, uint64_t rflags, uint64_t lin, enum page_access a, uint64_t *pa,
		uint32_t *err)
{
	return page_walk(&ram.m, &sregs, cpl, rflags, lin, a, pa, err);
}

START_TEST(test_translates_4k_2m_1g_pages)
{
	uint64_t pa;
	uint32_t err;
	map(4, 0x400000, 0x200000, 0, P | RW, P | RW);
	map(4, 0x40000000, 0x600000, 1, P | RW, P | RW);
	map(4, 0x8000000000, 0, 2, P | RW, P | RW);
	ck_assert_int_eq(walk(0, 0, 0x400123, PAGE_WALK_READ, &pa, &err), PAGE_WALK_OK);
	ck_assert_uint_eq(pa, 0x200123);
	ck_assert_int_eq(walk(0, 0, 0x40012345, PAGE_WALK_READ, &pa, &err), PAGE_WALK_OK);
	ck_assert_uint_eq(pa, 0x612345);
	ck_assert_int_eq(walk(0, 0, 0x8012345678, PAGE_WALK_READ, &pa, &err), PAGE_WALK_OK);
	ck_assert_uint_eq(pa, 0x12345678);
	sregs.cr0 &= ~CR0_PG; /* paging off: linear is physical */
	ck_assert_int_eq(walk(0, 0, 0x1234, PAGE_WALK_WRITE, &pa, &err), PAGE_WALK_OK);
	ck_assert_uint_eq(pa, 0x1234);
}
END_TEST

START_TEST(test_not_present_is_a_page_fault_with_its_error_code)
{
	uint64_t pa;
	uint32_t err;
	ck_assert_int_eq(walk(3, 0, 0x400000, PAGE_WALK_WRITE, &pa, &err), PAGE_WALK_PF);
	ck_assert_uint_eq(err, PF_ERR_W | PF_ERR_U);
	ck_assert_int_eq(walk(0, 0, 0x400000, PAGE_WALK_FETCH, &pa, &err), PAGE_WALK_PF);
	ck_assert_uint_eq(err, PF_ERR_I);
	ck_assert_int_eq(walk(0, 0, 0x400000, PAGE_WALK_PEEK, &pa, &err), PAGE_WALK_UNREADABLE);
}
END_TEST

START_TEST(test_user_access_needs_us_at_every_level)
{
	uint64_t pa;
	uint32_t err;
	map(4, 0x400000, 0x200000, 0, P | RW | US, P | RW); /* an upper level is supervisor */
	ck_assert_int_eq(walk(3, 0, 0x400000, PAGE_WALK_READ, &pa, &err), PAGE_WALK_PF);
	ck_assert_uint_eq(err, PF_ERR_P | PF_ERR_U);
	ck_assert_int_eq(walk(0, 0, 0x400000, PAGE_WALK_READ, &pa, &err), PAGE_WALK_OK);
	ck_assert_int_eq(walk(0, 0, 0x400000, PAGE_WALK_PEEK, &pa, &err), PAGE_WALK_OK);
	map(4, 0x8000000000, 0x200000, 0, P | RW | US, P | RW | US); /* its own PML4 entry */
	ck_assert_int_eq(walk(3, 0, 0x8000000000, PAGE_WALK_WRITE, &pa, &err), PAGE_WALK_OK);
}
END_TEST

START_TEST(test_writes_need_rw_and_cr0_wp_binds_ring_0)
{
	uint64_t pa;
	uint32_t err;
	map(4, 0x400000, 0x200000, 0, P | US, P | RW | US); /* read-only leaf */
	ck_assert_int_eq(walk(3, 0, 0x400000, PAGE_WALK_WRITE, &pa, &err), PAGE_WALK_PF);
	ck_assert_uint_eq(err, PF_ERR_P | PF_ERR_W | PF_ERR_U);
	ck_assert_int_eq(walk(3, 0, 0x400000, PAGE_WALK_READ, &pa, &err), PAGE_WALK_OK);
	map(4, 0x800000, 0x200000, 0, P, P | RW);
	ck_assert_int_eq(walk(0, 0, 0x800000, PAGE_WALK_WRITE, &pa, &err), PAGE_WALK_PF);
	ck_assert_uint_eq(err, PF_ERR_P | PF_ERR_W);
	sregs.cr0 &= ~CR0_WP;
	ck_assert_int_eq(walk(0, 0, 0x800000, PAGE_WALK_WRITE, &pa, &err), PAGE_WALK_OK);
	ck_assert_int_eq(walk(3, 0, 0x400000, PAGE_WALK_WRITE, &pa, &err), PAGE_WALK_PF);
}
END_TEST

START_TEST(test_nx_binds_fetches_only_with_efer_nxe)
{
	uint64_t pa;
	uint32_t err;
	map(4, 0x400000, 0x200000, 0, P | RW | US | NX, P | RW | US);
	ck_assert_int_eq(walk(3, 0, 0x400000, PAGE_WALK_FETCH, &pa, &err), PAGE_WALK_PF);
	ck_assert_uint_eq(err, PF_ERR_P | PF_ERR_U | PF_ERR_I);
	ck_assert_int_eq(walk(3, 0, 0x400000, PAGE_WALK_READ, &pa, &err), PAGE_WALK_OK);
	sregs.efer &= ~EFER_NXE;
	ck_assert_int_eq(walk(3, 0, 0x400000, PAGE_WALK_FETCH, &pa, &err), PAGE_WALK_OK);
}
END_TEST

START_TEST(test_smep_and_smap_keep_ring_0_off_user_pages)
{
	uint64_t pa;
	uint32_t err;
	map(4, 0x400000, 0x200000, 0, P | RW | US, P | RW | US);
	ck_assert_int_eq(walk(0, 0, 0x400000, PAGE_WALK_FETCH, &pa, &err), PAGE_WALK_OK);
	ck_assert_int_eq(walk(0, 0, 0x400000, PAGE_WALK_WRITE, &pa, &err), PAGE_WALK_OK);
	sregs.cr4 |= CR4_SMEP | CR4_SMAP;
	ck_assert_int_eq(walk(0, 0, 0x400000, PAGE_WALK_FETCH, &pa, &err), PAGE_WALK_PF);
	ck_assert_uint_eq(err, PF_ERR_P | PF_ERR_I);
	ck_assert_int_eq(walk(0, 0, 0x400000, PAGE_WALK_WRITE, &pa, &err), PAGE_WALK_PF);
	ck_assert_uint_eq(err, PF_ERR_P | PF_ERR_W);
	/* stac: RFLAGS.AC lets ring 0 at user data, never at user code. */
	ck_assert_int_eq(walk(0, RFLAGS_AC, 0x400000, PAGE_WALK_WRITE, &pa, &err), PAGE_WALK_OK);
	ck_assert_int_eq(walk(0, RFLAGS_AC, 0x400000, PAGE_WALK_FETCH, &pa, &err), PAGE_WALK_PF);
	ck_assert_int_eq(walk(3, 0, 0x400000, PAGE_WALK_WRITE, &pa, &err), PAGE_WALK_OK);
}
END_TEST

START_TEST(test_non_canonical_is_gp_and_5_level_widens_it)
{
	uint64_t pa;
	uint32_t err;
	uint64_t lin = 0x0080000000000000ULL; /* bit 55: canonical only with LA57 */
	ck_assert_int_eq(walk(0, 0, 0x0000800000000000ULL, PAGE_WALK_READ, &pa, &err),
			 PAGE_WALK_GP);
	ck_assert_int_eq(walk(0, 0, lin, PAGE_WALK_READ, &pa, &err), PAGE_WALK_GP);
	sregs.cr4 |= CR4_LA57;
	map(5, lin, 0x300000, 0, P | RW, P | RW);
	ck_assert_int_eq(walk(0, 0, lin + 0x10, PAGE_WALK_READ, &pa, &err), PAGE_WALK_OK);
	ck_assert_uint_eq(pa, 0x300010);
	ck_assert_int_eq(walk(0, 0, 0x0200000000000000ULL, PAGE_WALK_READ, &pa, &err),
			 PAGE_WALK_GP);
	ck_assert_int_eq(walk(0, 0, 0xFF00000000000000ULL, PAGE_WALK_READ, &pa, &err),
			 PAGE_WALK_PF); /* canonical, not mapped */
}
END_TEST

START_TEST(test_tables_outside_ram_are_unreadable)
{
	uint64_t pa;
	uint32_t err;
	put64(ram.buf + (sregs.cr3 & ~0xFFFULL), (1ULL << 40) | P | RW);
	ck_assert_int_eq(walk(0, 0, 0x1000, PAGE_WALK_READ, &pa, &err), PAGE_WALK_UNREADABLE);
}
END_TEST

static Suite *page_walk_suite(void)
{
	Suite *s = suite_create("page_walk");
	TCase *t = tcase_create("walk");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_translates_4k_2m_1g_pages);
	tcase_add_test(t, test_not_present_is_a_page_fault_with_its_error_code);
	tcase_add_test(t, test_user_access_needs_us_at_every_level);
	tcase_add_test(t, test_writes_need_rw_and_cr0_wp_binds_ring_0);
	tcase_add_test(t, test_nx_binds_fetches_only_with_efer_nxe);
	tcase_add_test(t, test_smep_and_smap_keep_ring_0_off_user_pages);
	tcase_add_test(t, test_non_canonical_is_gp_and_5_level_widens_it);
	tcase_add_test(t, test_tables_outside_ram_are_unreadable);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(page_walk_suite());
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
