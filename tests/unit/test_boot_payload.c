/*
 * bzImage payloads (boot.rst payload_offset/payload_length: the compressed
 * vmlinux ELF) decompressed by the VMM, the +0x200 fallback, and bare ELF64
 * kernels whose PT_LOAD segments go to their physical addresses.
 */
#include "helpers.h"

#include "vmm/base/err.h"
#include "vmm/base/guest_mem.h"
#include "vmm/base/layout.h"
#include "vmm/boot/boot.h"

#include <check.h>
#include <elf.h>
#include <lzma.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define RAM_SIZE (64 * MiB)

/* The test kernel: one PT_LOAD at 2 MiB with a bss tail. */
#define K_PADDR	 0x200000ULL
#define K_VADDR	 0xFFFFFFFF81000000ULL
#define K_FILESZ 0x3000
#define K_MEMSZ	 0x5000
#define K_ENTRY	 (K_PADDR + 0x40)

static struct fake_ram ram;
static uint8_t kdata[K_FILESZ];

static void setup(void)
{
	fake_ram_init(&ram, RAM_SIZE);
	fill_noise(kdata, sizeof(kdata), 4242);
}

static void teardown(void)
{
	fake_ram_free(&ram);
}

#define ck_assert_usage_error(ret, e)                                                              \
	do {                                                                                       \
		ck_assert_int_eq((ret), -1);                                                       \
		ck_assert_int_eq((e).kind, ERR_INPUT);                                             \
		ck_assert_msg((e).msg[0] != 0, "error without a message");                         \
	} while (0)

static uint8_t *kernel_elf(size_t *len)
{
	struct elf_seg seg = {PT_LOAD, K_PADDR, K_VADDR, kdata, K_FILESZ, K_MEMSZ};
	return elf_build(K_ENTRY, &seg, 1, len);
}

static int load(const uint8_t *img, size_t len, bool guest_decompress, struct boot_result *r,
		struct err *e)
{
	struct boot_config c = {
	    .kernel = img,
	    .kernel_len = len,
	    .cmdline = "console=ttyS0",
	    .guest_decompress = guest_decompress,
	};
	memset(e, 0, sizeof(*e));
	return boot_load(&ram.m, &c, r, e);
}

/* Wraps `payload` in a bzImage and loads it. */
static int load_payload(const uint8_t *payload, size_t plen, bool guest_decompress,
			struct boot_result *r, struct err *e, struct bz_params *used)
{
	size_t len;
	uint8_t *img = bz_with_payload(payload, plen, &len, used);
	int ret = load(img, len, guest_decompress, r, e);
	free(img);
	return ret;
}

static void check_kernel_loaded(const struct boot_result *r)
{
	ck_assert_uint_eq(r->entry, K_ENTRY);
	ck_assert_mem_eq(ram.buf + K_PADDR, kdata, K_FILESZ);
	ck_assert_msg(bytes_all(ram.buf + K_PADDR + K_FILESZ, K_MEMSZ - K_FILESZ, 0),
		      "bss not zeroed");
}

/* ---- gzip ---- */

START_TEST(test_gzip_payload_elf_loaded_at_paddr_entered_at_e_entry)
{
	size_t elen, glen;
	uint8_t *elf = kernel_elf(&elen);
	uint8_t *gz = gzip_bytes(elf, elen, &glen);
	struct boot_result r;
	struct err e;
	memset(ram.buf + K_PADDR, 0xCC, K_MEMSZ); /* bss must be cleared, not assumed */
	int ret = load_payload(gz, glen, false, &r, &e, NULL);
	free(gz);
	free(elf);
	ck_assert_msg(ret == 0, "boot_load failed: %s", e.msg);
	ck_assert_uint_eq(r.path, BOOT_PATH_HOST_DECOMPRESSED);
	ck_assert_uint_eq(r.payload, PAYLOAD_GZIP);
	check_kernel_loaded(&r);
}
END_TEST

START_TEST(test_gzip_payload_with_guest_decompress_enters_at_plus_0x200)
{
	size_t elen, glen, len;
	uint8_t *elf = kernel_elf(&elen);
	uint8_t *gz = gzip_bytes(elf, elen, &glen);
	struct bz_params p;
	struct boot_result r;
	struct err e;
	uint8_t *img = bz_with_payload(gz, glen, &len, &p);
	int ret = load(img, len, true, &r, &e);
	ck_assert_msg(ret == 0, "boot_load failed: %s", e.msg);
	ck_assert_uint_eq(r.path, BOOT_PATH_BZIMAGE);
	ck_assert_uint_eq(r.entry, p.pref_address + 0x200);
	/* The compressed image itself is what the guest runs. */
	ck_assert_mem_eq(ram.buf + p.pref_address, img + bz_pm_offset(&p), len - bz_pm_offset(&p));
	free(img);
	free(gz);
	free(elf);
}
END_TEST

START_TEST(test_corrupt_gzip_rejected)
{
	size_t elen, glen;
	uint8_t *elf = kernel_elf(&elen);
	uint8_t *gz = gzip_bytes(elf, elen, &glen);
	struct boot_result r;
	struct err e;
	for (size_t i = glen / 2 - 8; i < glen / 2 + 8; i++)
		gz[i] ^= 0xA5;
	int ret = load_payload(gz, glen, false, &r, &e, NULL);
	free(gz);
	free(elf);
	ck_assert_usage_error(ret, e);
}
END_TEST

START_TEST(test_truncated_gzip_rejected)
{
	size_t elen, glen;
	uint8_t *elf = kernel_elf(&elen);
	uint8_t *gz = gzip_bytes(elf, elen, &glen);
	struct boot_result r;
	struct err e;
	int ret = load_payload(gz, glen * 2 / 3, false, &r, &e, NULL);
	free(gz);
	free(elf);
	ck_assert_usage_error(ret, e);
}
END_TEST

START_TEST(test_gzip_payload_that_is_not_elf_rejected)
{
	uint8_t text[4096];
	size_t glen;
	for (size_t i = 0; i < sizeof(text); i++)
		text[i] = (uint8_t)("not a kernel, just text. "[i % 25]);
	uint8_t *gz = gzip_bytes(text, sizeof(text), &glen);
	struct boot_result r;
	struct err e;
	int ret = load_payload(gz, glen, false, &r, &e, NULL);
	free(gz);
	ck_assert_usage_error(ret, e);
}
END_TEST

/* ---- LZ4 legacy ---- */

START_TEST(test_lz4_legacy_payload_loads)
{
	size_t elen, zlen;
	uint8_t *elf = kernel_elf(&elen);
	uint8_t *lz = lz4_legacy_bytes(elf, elen, &zlen);
	struct boot_result r;
	struct err e;
	memset(ram.buf + K_PADDR, 0xCC, K_MEMSZ);
	int ret = load_payload(lz, zlen, false, &r, &e, NULL);
	free(lz);
	free(elf);
	ck_assert_msg(ret == 0, "boot_load failed: %s", e.msg);
	ck_assert_uint_eq(r.path, BOOT_PATH_HOST_DECOMPRESSED);
	ck_assert_uint_eq(r.payload, PAYLOAD_LZ4);
	check_kernel_loaded(&r);
}
END_TEST

START_TEST(test_lz4_legacy_payload_of_two_8mib_blocks_loads)
{
	/* A 9 MiB segment: the frame holds two blocks. */
	const size_t big = 9 * MiB;
	uint8_t *data = malloc(big);
	for (size_t i = 0; i < big; i += 4096)
		fill_noise(data + i, 512, (uint32_t)(i / 4096 + 1));
	for (size_t i = 0; i < big; i += 4096)
		memset(data + i + 512, (int)(i >> 12), 4096 - 512);
	struct elf_seg seg = {PT_LOAD, K_PADDR, K_VADDR, data, big, big};
	size_t elen, zlen;
	uint8_t *elf = elf_build(K_ENTRY, &seg, 1, &elen);
	uint8_t *lz = lz4_legacy_bytes(elf, elen, &zlen);
	struct boot_result r;
	struct err e;
	int ret = load_payload(lz, zlen, false, &r, &e, NULL);
	ck_assert_msg(ret == 0, "boot_load failed: %s", e.msg);
	ck_assert_uint_eq(r.path, BOOT_PATH_HOST_DECOMPRESSED);
	ck_assert_uint_eq(r.entry, K_ENTRY);
	ck_assert_int_eq(memcmp(ram.buf + K_PADDR, data, big), 0);
	free(lz);
	free(elf);
	free(data);
}
END_TEST

/* Offset of the first block's data: magic, then its LE32 size. */
#define LZ4_BLOCK0 8

START_TEST(test_corrupt_lz4_rejected)
{
	size_t elen, zlen;
	uint8_t *elf = kernel_elf(&elen);
	uint8_t *lz = lz4_legacy_bytes(elf, elen, &zlen);
	struct boot_result r;
	struct err e;
	/* A block of 0xFF tokens: literal lengths that run past the block. */
	memset(lz + LZ4_BLOCK0, 0xFF, get32(lz + 4));
	int ret = load_payload(lz, zlen, false, &r, &e, NULL);
	free(lz);
	free(elf);
	ck_assert_usage_error(ret, e);
}
END_TEST

START_TEST(test_truncated_lz4_rejected)
{
	size_t elen, zlen;
	uint8_t *elf = kernel_elf(&elen);
	uint8_t *lz = lz4_legacy_bytes(elf, elen, &zlen);
	struct boot_result r;
	struct err e;
	int ret = load_payload(lz, zlen / 2, false, &r, &e, NULL);
	free(lz);
	free(elf);
	ck_assert_usage_error(ret, e);
}
END_TEST

START_TEST(test_lz4_block_cut_short_with_size_trailer_rejected)
{
	size_t elen, zlen;
	uint8_t *elf = kernel_elf(&elen);
	uint8_t *lz = lz4_legacy_bytes(elf, elen, &zlen);
	struct boot_result r;
	struct err e;
	/* Keep the trailer, drop the second half of the block. */
	size_t cut = (zlen - 4 - LZ4_BLOCK0) / 2;
	memmove(lz + zlen - 4 - cut, lz + zlen - 4, 4);
	int ret = load_payload(lz, zlen - cut, false, &r, &e, NULL);
	free(lz);
	free(elf);
	ck_assert_usage_error(ret, e);
}
END_TEST

/* ---- formats the VMM does not decompress ---- */

static void check_fallback(const uint8_t *payload, size_t plen, enum payload_format want)
{
	struct bz_params p;
	struct boot_result r;
	struct err e;
	int ret = load_payload(payload, plen, false, &r, &e, &p);
	ck_assert_msg(ret == 0, "boot_load failed: %s", e.msg);
	ck_assert_uint_eq(r.path, BOOT_PATH_BZIMAGE);
	ck_assert_uint_eq(r.payload, want);
	ck_assert_uint_eq(r.entry, p.pref_address + 0x200);
	ck_assert_mem_eq(ram.buf + p.pref_address + BZ_PAYLOAD_STUB, payload, plen);
}

START_TEST(test_bzip2_payload_falls_back_to_plus_0x200)
{
	uint8_t bz2[256];
	fill_noise(bz2, sizeof(bz2), 5);
	memcpy(bz2, "BZh91AY&SY", 10);
	check_fallback(bz2, sizeof(bz2), PAYLOAD_BZIP2);
}
END_TEST

START_TEST(test_unknown_payload_format_falls_back_to_plus_0x200)
{
	uint8_t junk[256];
	fill_noise(junk, sizeof(junk), 6);
	memcpy(junk, "QQQQQQ", 6);
	check_fallback(junk, sizeof(junk), PAYLOAD_UNKNOWN);
}
END_TEST

/* ---- bare ELF ---- */

START_TEST(test_bare_elf_kernel_loaded_at_paddr)
{
	size_t elen;
	uint8_t *elf = kernel_elf(&elen);
	struct boot_result r;
	struct err e;
	memset(ram.buf + K_PADDR, 0xCC, K_MEMSZ);
	int ret = load(elf, elen, false, &r, &e);
	free(elf);
	ck_assert_msg(ret == 0, "boot_load failed: %s", e.msg);
	ck_assert_uint_eq(r.path, BOOT_PATH_ELF);
	check_kernel_loaded(&r);
	/* The kernel still gets a zero page with the command line. */
	const uint8_t *zp = ram.buf + LAYOUT_ZERO_PAGE;
	ck_assert_uint_eq(zp[HDR_TYPE_OF_LOADER], 0xFF);
	uint64_t cl = get32(zp + HDR_CMD_LINE_PTR) | (uint64_t)get32(zp + ZP_EXT_CMD_LINE_PTR)
							 << 32;
	ck_assert_uint_lt(cl, RAM_SIZE);
	ck_assert_str_eq((const char *)ram.buf + cl, "console=ttyS0");
}
END_TEST

/* Loads a bad ELF over RAM filled with a pattern; nothing may change. */
static void check_bad_elf_untouched(uint8_t *elf, size_t elen)
{
	struct boot_result r;
	struct err e;
	memset(ram.buf, 0x5A, RAM_SIZE);
	int ret = load(elf, elen, false, &r, &e);
	ck_assert_usage_error(ret, e);
	ck_assert_msg(bytes_all(ram.buf, RAM_SIZE, 0x5A), "a rejected ELF changed guest memory");
}

static uint8_t *two_segment_elf(uint64_t bad_paddr, uint64_t bad_memsz, size_t *elen)
{
	static uint8_t small[0x100];
	struct elf_seg segs[2] = {
	    {PT_LOAD, K_PADDR, K_VADDR, kdata, K_FILESZ, K_MEMSZ},
	    {PT_LOAD, bad_paddr, bad_paddr, small, sizeof(small), bad_memsz},
	};
	return elf_build(K_ENTRY, segs, 2, elen);
}

START_TEST(test_elf_segment_outside_ram_rejected_memory_untouched)
{
	size_t elen;
	uint8_t *elf = two_segment_elf(RAM_SIZE - 0x1000, 0x2000, &elen);
	check_bad_elf_untouched(elf, elen);
	free(elf);
}
END_TEST

START_TEST(test_elf_segment_below_1mib_rejected_memory_untouched)
{
	size_t elen;
	uint8_t *elf = two_segment_elf(0x80000, 0x1000, &elen);
	check_bad_elf_untouched(elf, elen);
	free(elf);
}
END_TEST

START_TEST(test_elf_segment_past_end_of_file_rejected_memory_untouched)
{
	size_t elen;
	uint8_t *elf = two_segment_elf(0x400000, 0x1000, &elen);
	/* Second segment's file bytes run past the end of the file. */
	uint8_t *ph = elf + elf_phdr_off(1);
	uint64_t off = get64(ph + offsetof(Elf64_Phdr, p_offset));
	put64(ph + offsetof(Elf64_Phdr, p_filesz), elen - off + 1);
	put64(ph + offsetof(Elf64_Phdr, p_memsz), elen - off + 0x1000);
	check_bad_elf_untouched(elf, elen);
	free(elf);
}
END_TEST

START_TEST(test_elf_entry_outside_every_segment_rejected)
{
	struct elf_seg seg = {PT_LOAD, K_PADDR, K_PADDR, kdata, K_FILESZ, K_MEMSZ};
	size_t elen;
	uint8_t *elf = elf_build(K_PADDR + K_MEMSZ + 0x100000, &seg, 1, &elen);
	check_bad_elf_untouched(elf, elen);
	free(elf);
}
END_TEST

START_TEST(test_gzip_payload_with_bad_elf_segment_rejected)
{
	size_t elen, glen;
	uint8_t *elf = two_segment_elf(RAM_SIZE - 0x1000, 0x2000, &elen);
	uint8_t *gz = gzip_bytes(elf, elen, &glen);
	struct boot_result r;
	struct err e;
	int ret = load_payload(gz, glen, false, &r, &e, NULL);
	free(gz);
	free(elf);
	ck_assert_usage_error(ret, e);
}
END_TEST

/* ---- payload_decompress / payload_detect directly ---- */

static void check_decompress_rejected(enum payload_format f, const uint8_t *p, size_t len,
				      size_t max_out)
{
	uint8_t *out = NULL;
	size_t out_len = 0;
	struct err e = {0};
	int ret = payload_decompress(f, p, len, max_out, &out, &out_len, &e);
	free(out);
	ck_assert_usage_error(ret, e);
}

START_TEST(test_lz4_frame_missing_its_last_block_rejected)
{
	/* Two blocks; drop the second, keep the size trailer (9 MiB). */
	const size_t big = 9 * MiB;
	uint8_t *data = malloc(big);
	for (size_t i = 0; i < big; i++)
		data[i] = (uint8_t)(i * 2654435761u >> 24);
	size_t zlen;
	uint8_t *lz = lz4_legacy_bytes(data, big, &zlen);
	size_t block1 = LZ4_BLOCK0 + get32(lz + 4);
	ck_assert_uint_lt(block1 + 4, zlen);
	memmove(lz + block1, lz + zlen - 4, 4);
	check_decompress_rejected(PAYLOAD_LZ4, lz, block1 + 4, 64 * MiB);
	free(lz);
	free(data);
}
END_TEST

START_TEST(test_lz4_size_trailer_larger_than_stream_rejected)
{
	uint8_t data[5000];
	fill_noise(data, sizeof(data), 11);
	size_t zlen;
	uint8_t *lz = lz4_legacy_bytes(data, sizeof(data), &zlen);
	put32(lz + zlen - 4, sizeof(data) + 100);
	check_decompress_rejected(PAYLOAD_LZ4, lz, zlen, 64 * MiB);
	free(lz);
}
END_TEST

START_TEST(test_lz4_round_trip_output_matches_input)
{
	uint8_t data[20000];
	fill_noise(data, sizeof(data), 12);
	memset(data + 5000, 'k', 8000);
	size_t zlen, out_len = 0;
	uint8_t *lz = lz4_legacy_bytes(data, sizeof(data), &zlen), *out = NULL;
	struct err e = {0};
	ck_assert_int_eq(payload_decompress(PAYLOAD_LZ4, lz, zlen, 64 * MiB, &out, &out_len, &e),
			 0);
	ck_assert_uint_eq(out_len, sizeof(data));
	ck_assert_mem_eq(out, data, sizeof(data));
	free(out);
	free(lz);
}
END_TEST

START_TEST(test_gzip_output_larger_than_max_out_rejected)
{
	uint8_t data[64 * 1024];
	memset(data, 'z', sizeof(data));
	size_t glen;
	uint8_t *gz = gzip_bytes(data, sizeof(data), &glen);
	check_decompress_rejected(PAYLOAD_GZIP, gz, glen, sizeof(data) / 2);
	free(gz);
}
END_TEST

START_TEST(test_payload_detect_kernel_magics)
{
	/* The magics of lib/decompress.c compressed_formats[] and ELF. */
	static const struct {
		uint8_t m[6];
		enum payload_format f;
	} cases[] = {
	    {{0x1F, 0x8B, 0x08, 0, 0, 0}, PAYLOAD_GZIP},
	    {{0x02, 0x21, 0x4C, 0x18, 0, 0}, PAYLOAD_LZ4},
	    {{0xFD, '7', 'z', 'X', 'Z', 0x00}, PAYLOAD_XZ},
	    {{0x28, 0xB5, 0x2F, 0xFD, 0, 0}, PAYLOAD_ZSTD},
	    {{'B', 'Z', 'h', '9', 0, 0}, PAYLOAD_BZIP2},
	    {{0x5D, 0x00, 0x00, 0x80, 0, 0}, PAYLOAD_LZMA},
	    {{0x89, 'L', 'Z', 'O', 0, 0}, PAYLOAD_LZO},
	    {{0x7F, 'E', 'L', 'F', 2, 1}, PAYLOAD_ELF},
	    {{'M', 'Z', 0, 0, 0, 0}, PAYLOAD_UNKNOWN},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ck_assert_int_eq(payload_detect(cases[i].m, 6), cases[i].f);
	ck_assert_int_eq(payload_detect(cases[0].m, 1), PAYLOAD_UNKNOWN); /* too short */
	ck_assert(!payload_supported(PAYLOAD_BZIP2));
	ck_assert(payload_supported(PAYLOAD_GZIP) && payload_supported(PAYLOAD_LZ4));
}
END_TEST

/* The kernel's xz and zstd payloads end with the LE32 decompressed size
 * (scripts/Makefile.lib size_append), like LZ4's. */
static uint8_t *with_size_trailer(uint8_t *buf, size_t n, size_t orig, size_t *out_len)
{
	put32(buf + n, (uint32_t)orig);
	*out_len = n + 4;
	return buf;
}

static uint8_t *xz_bytes(const uint8_t *in, size_t len, size_t *out_len)
{
	size_t cap = len + len / 2 + 4096, pos = 0;
	uint8_t *out = malloc(cap + 4);
	ck_assert(lzma_easy_buffer_encode(6, LZMA_CHECK_CRC32, NULL, in, len, out, &pos, cap) ==
		  LZMA_OK);
	return with_size_trailer(out, pos, len, out_len);
}

static uint8_t *zstd_bytes(const uint8_t *in, size_t len, size_t *out_len)
{
	size_t cap = ZSTD_compressBound(len);
	uint8_t *out = malloc(cap + 4);
	/* With the content checksum, as the zstd tool that builds kernels
	 * writes it by default. */
	ZSTD_CCtx *c = ZSTD_createCCtx();
	ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 19);
	ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
	size_t n = ZSTD_compress2(c, out, cap, in, len);
	ZSTD_freeCCtx(c);
	ck_assert(!ZSTD_isError(n));
	return with_size_trailer(out, n, len, out_len);
}

START_TEST(test_xz_payload_loads)
{
	size_t elen, zlen;
	uint8_t *elf = kernel_elf(&elen);
	uint8_t *xz = xz_bytes(elf, elen, &zlen);
	struct boot_result r;
	struct err e;
	memset(ram.buf + K_PADDR, 0xCC, K_MEMSZ);
	int ret = load_payload(xz, zlen, false, &r, &e, NULL);
	free(xz);
	free(elf);
	ck_assert_msg(ret == 0, "boot_load failed: %s", e.msg);
	ck_assert_uint_eq(r.path, BOOT_PATH_HOST_DECOMPRESSED);
	ck_assert_uint_eq(r.payload, PAYLOAD_XZ);
	check_kernel_loaded(&r);
}
END_TEST

START_TEST(test_zstd_payload_loads)
{
	size_t elen, zlen;
	uint8_t *elf = kernel_elf(&elen);
	uint8_t *zs = zstd_bytes(elf, elen, &zlen);
	struct boot_result r;
	struct err e;
	memset(ram.buf + K_PADDR, 0xCC, K_MEMSZ);
	int ret = load_payload(zs, zlen, false, &r, &e, NULL);
	free(zs);
	free(elf);
	ck_assert_msg(ret == 0, "boot_load failed: %s", e.msg);
	ck_assert_uint_eq(r.path, BOOT_PATH_HOST_DECOMPRESSED);
	ck_assert_uint_eq(r.payload, PAYLOAD_ZSTD);
	check_kernel_loaded(&r);
}
END_TEST

/* A crafted image may ask the decoder for gigabytes: an xz dictionary of
 * 4 GiB (the block header's LZMA2 dictionary byte, .xz format 5.3.1, with
 * its CRC32 made right) and a zstd window of 2^31 (a streamed frame with
 * no content size, so the decoder would allocate the whole window). Both
 * are refused, with what they asked, before any such allocation. */
START_TEST(test_decoder_memory_asked_by_the_image_is_bounded)
{
	size_t elen, xlen;
	uint8_t *elf = kernel_elf(&elen);
	uint8_t *xz = xz_bytes(elf, elen, &xlen);
	struct boot_result r;
	struct err e = {0};
	/* Stream header (12 bytes), then the block header: size byte, flags
	 * (one filter; bits 6 and 7: compressed and uncompressed sizes follow
	 * as varints), filter ID 0x21 (LZMA2), 1 property byte. */
	ck_assert_uint_eq(xz[13] & 0x3F, 0x00);
	size_t at = 14;
	for (int sizes = !!(xz[13] & 0x40) + !!(xz[13] & 0x80); sizes > 0; sizes--)
		while (xz[at++] & 0x80)
			;
	ck_assert_uint_eq(xz[at], 0x21);
	ck_assert_uint_eq(xz[at + 1], 0x01);
	size_t hsize = ((size_t)xz[12] + 1) * 4;
	xz[at + 2] = 40; /* 4 GiB - 1 */
	put32(xz + 12 + hsize - 4, lzma_crc32(xz + 12, hsize - 4, 0));
	ck_assert_int_ne(load_payload(xz, xlen, false, &r, &e, NULL), 0);
	ck_assert_int_eq(e.kind, ERR_INPUT);
	ck_assert_msg(strstr(e.msg, "xz payload asks for more than 128 MiB of decoder memory"),
		      "%s", e.msg);
	free(xz);

	size_t cap = ZSTD_compressBound(elen) + 4;
	uint8_t *zs = malloc(cap);
	ZSTD_CCtx *c = ZSTD_createCCtx();
	ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0);
	size_t zlen = ZSTD_compress2(c, zs, cap - 4, elf, elen);
	ZSTD_freeCCtx(c);
	ck_assert(!ZSTD_isError(zlen));
	/* RFC 8878 3.1.1.1: with no content size and Single_Segment_Flag (bit
	 * 5 of the descriptor) clear, the Window_Descriptor follows: exponent
	 * in bits 7-3, window 2^(10 + exponent). */
	ck_assert_uint_eq(zs[4] & 0x20, 0);
	zs[5] = (31 - 10) << 3;
	put32(zs + zlen, (uint32_t)elen);
	memset(&e, 0, sizeof(e));
	ck_assert_int_ne(load_payload(zs, zlen + 4, false, &r, &e, NULL), 0);
	ck_assert_int_eq(e.kind, ERR_INPUT);
	ck_assert_msg(strstr(e.msg, "zstd payload asks for a window larger than 2^27 bytes"), "%s",
		      e.msg);
	free(zs);
	free(elf);
}
END_TEST

START_TEST(test_corrupt_xz_and_zstd_rejected)
{
	size_t elen, xlen, zlen;
	uint8_t *elf = kernel_elf(&elen);
	uint8_t *xz = xz_bytes(elf, elen, &xlen);
	uint8_t *zs = zstd_bytes(elf, elen, &zlen);
	struct boot_result r;
	struct err e;
	/* Flip bytes in the middle of each compressed stream. */
	for (size_t i = 0; i < 16; i++) {
		xz[xlen / 2 + i] ^= 0x5A;
		zs[zlen / 2 + i] ^= 0x5A;
	}
	ck_assert_int_ne(load_payload(xz, xlen, false, &r, &e, NULL), 0);
	ck_assert_int_eq(e.kind, ERR_INPUT);
	ck_assert_ptr_nonnull(strstr(e.msg, "xz payload is corrupt"));
	memset(&e, 0, sizeof(e));
	ck_assert_int_ne(load_payload(zs, zlen, false, &r, &e, NULL), 0);
	ck_assert_int_eq(e.kind, ERR_INPUT);
	ck_assert_ptr_nonnull(strstr(e.msg, "zstd payload is corrupt"));
	/* Truncated: half of the zstd stream, trailer kept. */
	uint8_t *half = malloc(zlen / 2 + 4);
	memcpy(half, zs, zlen / 2);
	put32(half + zlen / 2, (uint32_t)elen);
	memset(&e, 0, sizeof(e));
	ck_assert_int_ne(load_payload(half, zlen / 2 + 4, false, &r, &e, NULL), 0);
	ck_assert_ptr_nonnull(strstr(e.msg, "zstd payload is corrupt or truncated"));
	free(half);
	free(xz);
	free(zs);
	free(elf);
}
END_TEST

static Suite *boot_payload_suite(void)
{
	Suite *s = suite_create("boot_payload");
	TCase *t = tcase_create("gzip");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_gzip_payload_elf_loaded_at_paddr_entered_at_e_entry);
	tcase_add_test(t, test_gzip_payload_with_guest_decompress_enters_at_plus_0x200);
	tcase_add_test(t, test_corrupt_gzip_rejected);
	tcase_add_test(t, test_truncated_gzip_rejected);
	tcase_add_test(t, test_gzip_payload_that_is_not_elf_rejected);
	tcase_add_test(t, test_gzip_payload_with_bad_elf_segment_rejected);
	suite_add_tcase(s, t);

	t = tcase_create("lz4");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_lz4_legacy_payload_loads);
	tcase_add_test(t, test_xz_payload_loads);
	tcase_add_test(t, test_zstd_payload_loads);
	tcase_add_test(t, test_corrupt_xz_and_zstd_rejected);
	tcase_add_test(t, test_decoder_memory_asked_by_the_image_is_bounded);
	tcase_add_test(t, test_lz4_legacy_payload_of_two_8mib_blocks_loads);
	tcase_add_test(t, test_corrupt_lz4_rejected);
	tcase_add_test(t, test_truncated_lz4_rejected);
	tcase_add_test(t, test_lz4_block_cut_short_with_size_trailer_rejected);
	suite_add_tcase(s, t);

	t = tcase_create("decompress");
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_lz4_frame_missing_its_last_block_rejected);
	tcase_add_test(t, test_lz4_size_trailer_larger_than_stream_rejected);
	tcase_add_test(t, test_lz4_round_trip_output_matches_input);
	tcase_add_test(t, test_gzip_output_larger_than_max_out_rejected);
	tcase_add_test(t, test_payload_detect_kernel_magics);
	suite_add_tcase(s, t);

	t = tcase_create("fallback");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_bzip2_payload_falls_back_to_plus_0x200);
	tcase_add_test(t, test_unknown_payload_format_falls_back_to_plus_0x200);
	suite_add_tcase(s, t);

	t = tcase_create("elf");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_bare_elf_kernel_loaded_at_paddr);
	tcase_add_test(t, test_elf_segment_outside_ram_rejected_memory_untouched);
	tcase_add_test(t, test_elf_segment_below_1mib_rejected_memory_untouched);
	tcase_add_test(t, test_elf_segment_past_end_of_file_rejected_memory_untouched);
	tcase_add_test(t, test_elf_entry_outside_every_segment_rejected);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(boot_payload_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
