/*
 * bzImage loading per Documentation/arch/x86/boot.rst: header validation,
 * placement of the protected-mode code, zero page, command line, initrd and
 * e820. Images are built in memory by helpers.c from the documented offsets.
 */
#include "helpers.h"

#include "vmm/base/err.h"
#include "vmm/base/guest_mem.h"
#include "vmm/base/layout.h"
#include "vmm/boot/boot.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define RAM_SIZE (64 * MiB)
#define PM_LEN	 0x3000

static struct fake_ram ram;
static uint8_t pm[PM_LEN];

static void setup(void)
{
	fake_ram_init(&ram, RAM_SIZE);
	fill_noise(pm, sizeof(pm), 1234);
}

static void teardown(void)
{
	fake_ram_free(&ram);
}

static int load_on(struct guest_mem *m, const uint8_t *img, size_t len, const char *cmdline,
		   const uint8_t *initrd, size_t initrd_len, struct boot_result *r, struct err *e)
{
	struct boot_config c = {
	    .kernel = img,
	    .kernel_len = len,
	    .initrd = initrd,
	    .initrd_len = initrd_len,
	    .cmdline = cmdline,
	};
	memset(e, 0, sizeof(*e));
	return boot_load(m, &c, r, e);
}

static int load(const uint8_t *img, size_t len, const char *cmdline, struct boot_result *r,
		struct err *e)
{
	return load_on(&ram.m, img, len, cmdline, NULL, 0, r, e);
}

#define ck_assert_usage_error(ret, e)                                                              \
	do {                                                                                       \
		ck_assert_int_eq((ret), -1);                                                       \
		ck_assert_int_eq((e).kind, ERR_INPUT);                                             \
		ck_assert_msg((e).msg[0] != 0, "error without a message");                         \
	} while (0)

static uint8_t *zero_page(void)
{
	return ram.buf + LAYOUT_ZERO_PAGE;
}

/* Builds the default image and loads it, expecting success. */
static void load_default(struct bz_params *p, const char *cmdline, struct boot_result *r)
{
	size_t len;
	struct err e;
	uint8_t *img = bz_build(p, &len);
	int ret = load(img, len, cmdline, r, &e);
	free(img);
	ck_assert_msg(ret == 0, "boot_load failed: %s", e.msg);
}

static void check_error(struct bz_params *p, size_t cut_to)
{
	size_t len;
	struct err e;
	struct boot_result r;
	uint8_t *img = bz_build(p, &len);
	if (cut_to)
		len = cut_to;
	int ret = load(img, len, "console=ttyS0", &r, &e);
	free(img);
	ck_assert_usage_error(ret, e);
}

/* ---- a valid image ---- */

START_TEST(test_plain_bzimage_entered_at_load_address_plus_0x200)
{
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	struct boot_result r;
	load_default(&p, "console=ttyS0", &r);
	/* Not relocatable: it must run at pref_address (boot.rst, 2.10+). */
	ck_assert_uint_eq(r.path, BOOT_PATH_BZIMAGE);
	ck_assert_uint_eq(r.entry, p.pref_address + 0x200);
	ck_assert_uint_eq(r.protocol, 0x020F);
	ck_assert_uint_eq(r.zero_page, LAYOUT_ZERO_PAGE);
}
END_TEST

START_TEST(test_protected_mode_code_copied_at_load_address)
{
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	struct boot_result r;
	load_default(&p, "", &r);
	ck_assert_mem_eq(ram.buf + p.pref_address, pm, sizeof(pm));
}
END_TEST

START_TEST(test_setup_sects_zero_means_four)
{
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	struct boot_result r;
	p.setup_sects = 0; /* boot.rst: "If this field is 0, the real value is 4" */
	load_default(&p, "", &r);
	ck_assert_mem_eq(ram.buf + r.entry - 0x200, pm, sizeof(pm));
}
END_TEST

START_TEST(test_relocatable_kernel_loaded_aligned_above_1mib)
{
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	struct boot_result r;
	p.relocatable = 1;
	p.kernel_alignment = 0x200000;
	p.pref_address = 0x1100000; /* not aligned: the loader must align it */
	load_default(&p, "", &r);
	uint64_t load_addr = r.entry - 0x200;
	ck_assert_uint_eq(load_addr % p.kernel_alignment, 0);
	ck_assert_uint_ge(load_addr, LAYOUT_KERNEL_MIN);
	ck_assert_uint_le(load_addr + p.init_size, RAM_SIZE);
	ck_assert_mem_eq(ram.buf + load_addr, pm, sizeof(pm));
}
END_TEST

START_TEST(test_zero_page_holds_copied_setup_header)
{
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	struct boot_result r;
	p.cmdline_size = 1000;
	p.initrd_addr_max = 0x2FFFFFFF;
	load_default(&p, "", &r);
	const uint8_t *zp = zero_page();
	/* Fields the loader only reads must arrive unchanged (boot.rst). */
	ck_assert_uint_eq(zp[HDR_SETUP_SECTS], p.setup_sects);
	ck_assert_uint_eq(get32(zp + HDR_SYSSIZE), (sizeof(pm) + 15) / 16);
	ck_assert_uint_eq(get16(zp + HDR_BOOT_FLAG), 0xAA55);
	ck_assert_mem_eq(zp + HDR_HEADER, "HdrS", 4);
	ck_assert_uint_eq(get16(zp + HDR_VERSION), p.version);
	ck_assert_uint_eq(get16(zp + HDR_XLOADFLAGS), XLF_KERNEL_64);
	ck_assert_uint_eq(get32(zp + HDR_CMDLINE_SIZE), 1000);
	ck_assert_uint_eq(get32(zp + HDR_INITRD_ADDR_MAX), 0x2FFFFFFF);
	ck_assert_uint_eq(get64(zp + HDR_PREF_ADDRESS), p.pref_address);
	ck_assert_uint_eq(get32(zp + HDR_INIT_SIZE), p.init_size);
	ck_assert_uint_eq(zp[HDR_LOADFLAGS] & LOADED_HIGH_FLAG, LOADED_HIGH_FLAG);
}
END_TEST

START_TEST(test_zero_page_type_of_loader_is_0xff)
{
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	struct boot_result r;
	load_default(&p, "", &r);
	ck_assert_uint_eq(zero_page()[HDR_TYPE_OF_LOADER], 0xFF);
}
END_TEST

static const char *guest_cmdline(void)
{
	const uint8_t *zp = zero_page();
	uint64_t ptr = get32(zp + HDR_CMD_LINE_PTR) | (uint64_t)get32(zp + ZP_EXT_CMD_LINE_PTR)
							  << 32;
	ck_assert_uint_ne(ptr, 0);
	ck_assert_uint_lt(ptr, RAM_SIZE);
	return (const char *)ram.buf + ptr;
}

START_TEST(test_cmd_line_ptr_points_to_command_line)
{
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	struct boot_result r;
	const char *cmdline = "console=ttyS0 reboot=k panic=-1 root=/dev/vda";
	load_default(&p, cmdline, &r);
	/* NUL-terminated, no longer than cmdline_size. */
	ck_assert_str_eq(guest_cmdline(), cmdline);
}
END_TEST

static void e820_entry(unsigned i, uint64_t *addr, uint64_t *size, uint32_t *type)
{
	const uint8_t *t = zero_page() + ZP_E820_TABLE + i * ZP_E820_ENTRY_SIZE;
	*addr = get64(t);
	*size = get64(t + 8);
	*type = get32(t + 16);
}

#define ck_assert_e820(i, a, s, t)                                                                 \
	do {                                                                                       \
		uint64_t ea, es;                                                                   \
		uint32_t et;                                                                       \
		e820_entry((i), &ea, &es, &et);                                                    \
		ck_assert_msg(ea == (a) && es == (s) && et == (t),                                 \
			      "e820[%u] = [0x%llx, +0x%llx) type %u, want [0x%llx, +0x%llx) "      \
			      "type %u",                                                           \
			      (unsigned)(i), (unsigned long long)ea, (unsigned long long)es, et,   \
			      (unsigned long long)(a), (unsigned long long)(s), (unsigned)(t));    \
	} while (0)

START_TEST(test_e820_low_ram_usable_ebda_bios_reserved)
{
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	struct boot_result r;
	load_default(&p, "", &r);
	ck_assert_uint_eq(zero_page()[ZP_E820_ENTRIES], 3);
	ck_assert_e820(0, 0, 0x9FC00, 1);
	ck_assert_e820(1, 0x9FC00, 0x100000 - 0x9FC00, 2);
	ck_assert_e820(2, 0x100000, RAM_SIZE - 0x100000, 1);
}
END_TEST

START_TEST(test_e820_ram_above_4g_after_the_hole)
{
	/* 3 GiB + 64 MiB of RAM: sparse, only touched pages are backed. */
	const uint64_t size = 3 * GiB + 64 * MiB;
	uint8_t *host = mmap(NULL, size, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ck_assert_msg(host != MAP_FAILED, "cannot map a sparse 3 GiB + 64 MiB region");
	struct guest_mem m;
	guest_mem_init_with(&m, host, size);
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	size_t len;
	struct boot_result r;
	struct err e;
	uint8_t *img = bz_build(&p, &len);
	int ret = load_on(&m, img, len, "", NULL, 0, &r, &e);
	free(img);
	ck_assert_msg(ret == 0, "boot_load failed: %s", e.msg);
	const uint8_t *zp = host + LAYOUT_ZERO_PAGE;
	ck_assert_uint_eq(zp[ZP_E820_ENTRIES], 4);
	/* Read through the mapping actually used. */
	memcpy(ram.buf + LAYOUT_ZERO_PAGE, zp, 4096);
	ck_assert_e820(0, 0, 0x9FC00, 1);
	ck_assert_e820(1, 0x9FC00, 0x100000 - 0x9FC00, 2);
	ck_assert_e820(2, 0x100000, GUEST_MMIO_HOLE_START - 0x100000, 1);
	ck_assert_e820(3, GUEST_4G, 64 * MiB, 1);
	munmap(host, size);
}
END_TEST

/* ---- header validation ---- */

START_TEST(test_wrong_header_magic_rejected)
{
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	size_t len;
	struct err e;
	struct boot_result r;
	uint8_t *img = bz_build(&p, &len);
	memcpy(img + HDR_HEADER, "HdrZ", 4);
	int ret = load(img, len, "", &r, &e);
	free(img);
	ck_assert_usage_error(ret, e);
}
END_TEST

START_TEST(test_boot_flag_not_aa55_rejected)
{
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	size_t len;
	struct err e;
	struct boot_result r;
	uint8_t *img = bz_build(&p, &len);
	put16(img + HDR_BOOT_FLAG, 0x55AA);
	int ret = load(img, len, "", &r, &e);
	free(img);
	ck_assert_usage_error(ret, e);
}
END_TEST

START_TEST(test_protocol_2_11_too_old_rejected)
{
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	p.version = 0x020B;
	check_error(&p, 0);
}
END_TEST

START_TEST(test_protocol_2_12_accepted)
{
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	struct boot_result r;
	p.version = 0x020C;
	load_default(&p, "", &r);
	ck_assert_uint_eq(r.entry, p.pref_address + 0x200);
}
END_TEST

START_TEST(test_xlf_kernel_64_clear_rejected)
{
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	p.xloadflags = 0x0002; /* XLF_CAN_BE_LOADED_ABOVE_4G only */
	check_error(&p, 0);
}
END_TEST

START_TEST(test_truncated_inside_setup_header_rejected)
{
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	check_error(&p, HDR_END - 8); /* the byte at 0x201 says the header is longer */
}
END_TEST

START_TEST(test_truncated_inside_setup_sectors_rejected)
{
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	check_error(&p, bz_pm_offset(&p) - 512);
}
END_TEST

START_TEST(test_syssize_past_end_of_file_rejected)
{
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	size_t len;
	struct err e;
	struct boot_result r;
	uint8_t *img = bz_build(&p, &len);
	put32(img + HDR_SYSSIZE, (uint32_t)(sizeof(pm) / 16 + 1));
	int ret = load(img, len, "", &r, &e);
	free(img);
	ck_assert_usage_error(ret, e);
}
END_TEST

START_TEST(test_payload_past_end_of_file_rejected)
{
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	p.payload_offset = 0x400;
	p.payload_length = (uint32_t)sizeof(pm) - 0x400 + 1;
	check_error(&p, 0);
}
END_TEST

START_TEST(test_init_size_larger_than_ram_rejected)
{
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	p.init_size = (uint32_t)(RAM_SIZE + 1 * MiB);
	check_error(&p, 0);
}
END_TEST

/* ---- command line ---- */

static char *cmdline_of(size_t n)
{
	char *s = malloc(n + 1);
	for (size_t i = 0; i < n; i++)
		s[i] = (char)('a' + i % 26);
	s[n] = 0;
	return s;
}

START_TEST(test_cmdline_longer_than_cmdline_size_rejected)
{
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	p.cmdline_size = 100;
	size_t len;
	struct err e;
	struct boot_result r;
	uint8_t *img = bz_build(&p, &len);
	char *cmd = cmdline_of(101);
	int ret = load(img, len, cmd, &r, &e);
	free(cmd);
	free(img);
	ck_assert_usage_error(ret, e);
}
END_TEST

START_TEST(test_cmdline_exactly_cmdline_size_accepted)
{
	/* cmdline_size: "maximum size of the command line without the
	 * terminating zero" (boot.rst, 2.06+). */
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	p.cmdline_size = 100;
	struct boot_result r;
	char *cmd = cmdline_of(100);
	load_default(&p, cmd, &r);
	ck_assert_str_eq(guest_cmdline(), cmd);
	free(cmd);
}
END_TEST

/* ---- initrd ---- */

static void load_initrd(struct bz_params *p, const uint8_t *initrd, size_t initrd_len,
			struct boot_result *r, struct err *e, int *ret)
{
	size_t len;
	uint8_t *img = bz_build(p, &len);
	*ret = load_on(&ram.m, img, len, "", initrd, initrd_len, r, e);
	free(img);
}

static void check_initrd_placement(struct bz_params *p, size_t initrd_len, uint64_t limit)
{
	uint8_t *initrd = malloc(initrd_len);
	struct boot_result r;
	struct err e;
	int ret;
	fill_noise(initrd, initrd_len, 99);
	load_initrd(p, initrd, initrd_len, &r, &e, &ret);
	ck_assert_msg(ret == 0, "boot_load failed: %s", e.msg);
	const uint8_t *zp = zero_page();
	uint64_t addr = get32(zp + HDR_RAMDISK_IMAGE) | (uint64_t)get32(zp + ZP_EXT_RAMDISK_IMAGE)
							    << 32;
	uint64_t size = get32(zp + HDR_RAMDISK_SIZE) | (uint64_t)get32(zp + ZP_EXT_RAMDISK_SIZE)
							   << 32;
	ck_assert_uint_eq(size, initrd_len);
	ck_assert_uint_eq(addr % 4096, 0);
	/* initrd_addr_max is the highest address the initrd may occupy. */
	ck_assert_uint_le(addr + size, (uint64_t)p->initrd_addr_max + 1);
	ck_assert_uint_le(addr + size, limit);
	ck_assert_uint_le(addr + size, RAM_SIZE);
	/* Above the kernel and the memory it claims at boot (init_size). */
	ck_assert_uint_ge(addr, p->pref_address + p->init_size);
	ck_assert_mem_eq(ram.buf + addr, initrd, initrd_len);
	free(initrd);
}

START_TEST(test_initrd_page_aligned_below_ram_end_above_kernel)
{
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	check_initrd_placement(&p, 1 * MiB + 123, RAM_SIZE);
}
END_TEST

START_TEST(test_initrd_ends_at_or_below_initrd_addr_max)
{
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	p.initrd_addr_max = 0x2FFFFFF; /* 48 MiB - 1, below the 64 MiB RAM end */
	check_initrd_placement(&p, 1 * MiB + 123, 0x3000000);
}
END_TEST

START_TEST(test_initrd_too_large_rejected)
{
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	size_t n = 50 * MiB; /* the kernel owns 16..20 MiB of 64 */
	uint8_t *initrd = calloc(1, n);
	struct boot_result r;
	struct err e;
	int ret;
	load_initrd(&p, initrd, n, &r, &e, &ret);
	free(initrd);
	ck_assert_usage_error(ret, e);
}
END_TEST

START_TEST(test_initrd_below_initrd_addr_max_too_large_rejected)
{
	struct bz_params p = bz_defaults(pm, sizeof(pm));
	p.initrd_addr_max = 0x17FFFFF; /* 24 MiB - 1: 4 MiB above the kernel */
	size_t n = 5 * MiB;
	uint8_t *initrd = calloc(1, n);
	struct boot_result r;
	struct err e;
	int ret;
	load_initrd(&p, initrd, n, &r, &e, &ret);
	free(initrd);
	ck_assert_usage_error(ret, e);
}
END_TEST

static Suite *boot_bzimage_suite(void)
{
	Suite *s = suite_create("boot_bzimage");
	TCase *t = tcase_create("valid");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_plain_bzimage_entered_at_load_address_plus_0x200);
	tcase_add_test(t, test_protected_mode_code_copied_at_load_address);
	tcase_add_test(t, test_setup_sects_zero_means_four);
	tcase_add_test(t, test_relocatable_kernel_loaded_aligned_above_1mib);
	tcase_add_test(t, test_zero_page_holds_copied_setup_header);
	tcase_add_test(t, test_zero_page_type_of_loader_is_0xff);
	tcase_add_test(t, test_cmd_line_ptr_points_to_command_line);
	tcase_add_test(t, test_e820_low_ram_usable_ebda_bios_reserved);
	tcase_add_test(t, test_e820_ram_above_4g_after_the_hole);
	suite_add_tcase(s, t);

	t = tcase_create("header");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_wrong_header_magic_rejected);
	tcase_add_test(t, test_boot_flag_not_aa55_rejected);
	tcase_add_test(t, test_protocol_2_11_too_old_rejected);
	tcase_add_test(t, test_protocol_2_12_accepted);
	tcase_add_test(t, test_xlf_kernel_64_clear_rejected);
	tcase_add_test(t, test_truncated_inside_setup_header_rejected);
	tcase_add_test(t, test_truncated_inside_setup_sectors_rejected);
	tcase_add_test(t, test_syssize_past_end_of_file_rejected);
	tcase_add_test(t, test_payload_past_end_of_file_rejected);
	tcase_add_test(t, test_init_size_larger_than_ram_rejected);
	suite_add_tcase(s, t);

	t = tcase_create("cmdline_initrd");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_cmdline_longer_than_cmdline_size_rejected);
	tcase_add_test(t, test_cmdline_exactly_cmdline_size_accepted);
	tcase_add_test(t, test_initrd_page_aligned_below_ram_end_above_kernel);
	tcase_add_test(t, test_initrd_ends_at_or_below_initrd_addr_max);
	tcase_add_test(t, test_initrd_too_large_rejected);
	tcase_add_test(t, test_initrd_below_initrd_addr_max_too_large_rejected);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(boot_bzimage_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
