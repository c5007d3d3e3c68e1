/*
 * mkbzimage: wraps a kit guest ELF into a bzImage (Linux
 * Documentation/arch/x86/boot.rst), for a loader that takes the 64-bit
 * entry.
 *
 *   mkbzimage -o OUT KERNEL.elf
 *   mkbzimage -o OUT --payload-gzip PAYLOAD.elf KERNEL.elf
 *
 * The image is a boot sector and one setup sector carrying the setup header
 * (no real-mode code: the 16-bit entry at 0x200 just halts), followed by the
 * protected-mode kernel: KERNEL.elf's PT_LOAD contents flattened from its
 * lowest paddr, which must be the load address with the 64-bit entry at
 * +0x200. With --payload-gzip, gzip(PAYLOAD.elf) follows the kernel and
 * payload_offset/payload_length describe it, the way a Linux bzImage
 * describes its compressed vmlinux (boot.rst, payload_offset).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <elf.h>
#include <zlib.h>

#include "guest/bootparam.h"

#define SECTOR		      512
#define SETUP_SECTS	      1 /* boot.rst: setup_sects 0 means 4, so say 1 */
#define REAL_MODE_SIZE	      ((1 + SETUP_SECTS) * SECTOR)
#define HDR_OFFSET	      0x1f1
#define HDR_END		      0x26c /* end of the 2.15 setup header */
#define PROTOCOL_VERSION      0x020F
#define KERNEL_ALIGNMENT      0x100000 /* the 1 MiB load address is aligned to it */
#define CMDLINE_SIZE	      2047
#define INITRD_ADDR_MAX	      0x7fffffff
#define PAYLOAD_ALIGN	      16
#define PAGE		      4096
#define VERSION_STRING_OFFSET 0x300 /* inside the setup sector */

struct buf {
	uint8_t *data;
	size_t len;
};

struct flat_image {
	struct buf bytes; /* file contents, flattened from lowest paddr */
	uint64_t load_addr;
	uint64_t mem_size; /* incl. bss: highest paddr + memsz - load_addr */
	uint64_t entry;
};

static const char *prog = "mkbzimage";

__attribute__((noreturn, format(printf, 1, 2))) static void die(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static struct buf read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		die("%s: %s", path, strerror(errno));
	struct buf b = {NULL, 0};
	size_t cap = 0;
	for (;;) {
		if (b.len == cap) {
			cap = cap ? cap * 2 : 65536;
			b.data = realloc(b.data, cap);
			if (!b.data)
				die("out of memory");
		}
		size_t n = fread(b.data + b.len, 1, cap - b.len, f);
		b.len += n;
		if (n == 0)
			break;
	}
	if (ferror(f))
		die("%s: read error", path);
	fclose(f);
	return b;
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

/* Validates an x86-64 executable ELF and flattens its PT_LOAD segments. */
static struct flat_image flatten_elf(const char *path, const struct buf *elf)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)elf->data;
	if (elf->len < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0)
		die("%s: not an ELF file", path);
	if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB ||
	    eh->e_machine != EM_X86_64 || eh->e_type != ET_EXEC)
		die("%s: not an x86-64 ELF executable", path);
	if (eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phoff > elf->len ||
	    (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > elf->len - eh->e_phoff)
		die("%s: bad program header table", path);

	const Elf64_Phdr *ph = (const Elf64_Phdr *)(elf->data + eh->e_phoff);
	uint64_t lo = UINT64_MAX, file_hi = 0, mem_hi = 0;
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type != PT_LOAD || ph[i].p_memsz == 0)
			continue;
		if (ph[i].p_filesz > ph[i].p_memsz || ph[i].p_offset > elf->len ||
		    ph[i].p_filesz > elf->len - ph[i].p_offset ||
		    ph[i].p_paddr + ph[i].p_memsz < ph[i].p_paddr)
			die("%s: PT_LOAD %u out of bounds", path, i);
		if (ph[i].p_paddr < lo)
			lo = ph[i].p_paddr;
		if (ph[i].p_paddr + ph[i].p_filesz > file_hi)
			file_hi = ph[i].p_paddr + ph[i].p_filesz;
		if (ph[i].p_paddr + ph[i].p_memsz > mem_hi)
			mem_hi = ph[i].p_paddr + ph[i].p_memsz;
	}
	if (lo == UINT64_MAX)
		die("%s: no PT_LOAD segment", path);
	if (file_hi < lo)
		file_hi = lo;
	/* Flattening puts segments at paddr - lo; overlapping ones would
	 * silently clobber each other. */
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		for (unsigned j = i + 1; j < eh->e_phnum; j++) {
			if (ph[i].p_type != PT_LOAD || ph[j].p_type != PT_LOAD || !ph[i].p_memsz ||
			    !ph[j].p_memsz)
				continue;
			if (ph[i].p_paddr < ph[j].p_paddr + ph[j].p_memsz &&
			    ph[j].p_paddr < ph[i].p_paddr + ph[i].p_memsz)
				die("%s: PT_LOAD %u and %u overlap", path, i, j);
		}
	}

	struct flat_image img = {{NULL, file_hi - lo}, lo, mem_hi - lo, eh->e_entry};
	img.bytes.data = calloc(1, img.bytes.len ? img.bytes.len : 1);
	if (!img.bytes.data)
		die("out of memory");
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type == PT_LOAD && ph[i].p_filesz)
			memcpy(img.bytes.data + (ph[i].p_paddr - lo), elf->data + ph[i].p_offset,
			       ph[i].p_filesz);
	}
	if (img.entry < lo || img.entry >= mem_hi)
		die("%s: entry 0x%llx is outside the loaded image", path,
		    (unsigned long long)img.entry);
	return img;
}

/* gzip (RFC 1952) via zlib: windowBits 15 + 16 selects the gzip wrapper. */
static struct buf gzip_buffer(const struct buf *in)
{
	z_stream zs;
	memset(&zs, 0, sizeof(zs));
	if (deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		die("deflateInit2 failed");
	uLong bound = deflateBound(&zs, (uLong)in->len);
	struct buf out = {malloc(bound), 0};
	if (!out.data)
		die("out of memory");
	zs.next_in = in->data;
	zs.avail_in = (uInt)in->len;
	zs.next_out = out.data;
	zs.avail_out = (uInt)bound;
	if (deflate(&zs, Z_FINISH) != Z_STREAM_END)
		die("deflate did not finish");
	out.len = zs.total_out;
	deflateEnd(&zs);
	return out;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)v);
	put16(p + 2, (uint16_t)(v >> 16));
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

#define HDR_FIELD(field) (HDR_OFFSET + offsetof(struct setup_header, field))

/* Fills the boot sector and setup sector (boot.rst, "THE REAL-MODE KERNEL
 * HEADER" and "Details of header fields"). */
static void build_setup(uint8_t *rm, const struct flat_image *k, uint64_t pm_len,
			uint64_t payload_offset, uint64_t payload_len, uint64_t init_size)
{
	static const uint8_t halt_loop[] = {0xFA, 0xF4, 0xEB, 0xFD}; /* cli; hlt; jmp $-1 */
	static const char version[] = "guest-kit test image";

	memset(rm, 0, REAL_MODE_SIZE);
	/* Nothing boots this from a disk; a BIOS that tries just halts. */
	memcpy(rm, halt_loop, sizeof(halt_loop));

	rm[HDR_FIELD(setup_sects)] = SETUP_SECTS;
	put32(rm + HDR_FIELD(syssize), (uint32_t)((pm_len + 15) / 16));
	put16(rm + HDR_FIELD(vid_mode), 0xFFFF); /* "normal" */
	put16(rm + HDR_FIELD(boot_flag), BOOT_FLAG_MAGIC);
	/* The jump at 0x200 skips the header; its 8-bit offset also tells a
	 * loader where the header ends (0x202 + byte at 0x201). The target
	 * is a real-mode halt loop: only the 64-bit entry is supported. */
	rm[0x200] = 0xEB;
	rm[0x201] = (uint8_t)(HDR_END - 0x202);
	memcpy(rm + HDR_END, halt_loop, sizeof(halt_loop));
	put32(rm + HDR_FIELD(header), SETUP_HDRS_MAGIC);
	put16(rm + HDR_FIELD(version), PROTOCOL_VERSION);
	put16(rm + HDR_FIELD(start_sys_seg), 0x1000);
	/* kernel_version: offset of a NUL-terminated string, minus 0x200. */
	memcpy(rm + VERSION_STRING_OFFSET, version, sizeof(version));
	put16(rm + HDR_FIELD(kernel_version), VERSION_STRING_OFFSET - 0x200);
	rm[HDR_FIELD(loadflags)] = LOADFLAG_LOADED_HIGH;
	put32(rm + HDR_FIELD(code32_start), (uint32_t)k->load_addr);
	put32(rm + HDR_FIELD(initrd_addr_max), INITRD_ADDR_MAX);
	put32(rm + HDR_FIELD(kernel_alignment), KERNEL_ALIGNMENT);
	/* Not relocatable: the kit is linked for one address. */
	rm[HDR_FIELD(relocatable_kernel)] = 0;
	rm[HDR_FIELD(min_alignment)] = 20; /* log2(KERNEL_ALIGNMENT) */
	put16(rm + HDR_FIELD(xloadflags), XLF_KERNEL_64 | XLF_CAN_BE_LOADED_ABOVE_4G);
	put32(rm + HDR_FIELD(cmdline_size), CMDLINE_SIZE);
	put32(rm + HDR_FIELD(payload_offset), (uint32_t)payload_offset);
	put32(rm + HDR_FIELD(payload_length), (uint32_t)payload_len);
	put64(rm + HDR_FIELD(pref_address), k->load_addr);
	put32(rm + HDR_FIELD(init_size), (uint32_t)init_size);
}

static void write_file(const char *path, const uint8_t *a, size_t alen, const uint8_t *b,
		       size_t blen)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		die("%s: %s", path, strerror(errno));
	if (fwrite(a, 1, alen, f) != alen || fwrite(b, 1, blen, f) != blen || fclose(f) != 0)
		die("%s: write error", path);
}

static void usage(void)
{
	fprintf(stderr, "usage: %s -o OUT [--payload-gzip PAYLOAD.elf] KERNEL.elf\n", prog);
	exit(2);
}

int main(int argc, char **argv)
{
	const char *out = NULL, *payload_path = NULL, *kernel_path = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-o") && i + 1 < argc)
			out = argv[++i];
		else if (!strcmp(argv[i], "--payload-gzip") && i + 1 < argc)
			payload_path = argv[++i];
		else if (argv[i][0] != '-' && !kernel_path)
			kernel_path = argv[i];
		else
			usage();
	}
	if (!out || !kernel_path)
		usage();

	struct buf kernel_elf = read_file(kernel_path);
	struct flat_image k = flatten_elf(kernel_path, &kernel_elf);
	if (k.entry != k.load_addr + BOOT_ENTRY64_OFFSET)
		die("%s: entry 0x%llx is not load address + 0x200 (boot.rst 64-bit entry)",
		    kernel_path, (unsigned long long)k.entry);
	if (k.load_addr < 0x100000 || k.load_addr + k.mem_size > 0xFFFFFFFFull)
		die("%s: must load between 1 MiB and 4 GiB (code32_start is 32 bits)", kernel_path);

	/* The protected-mode part: the flattened kernel, then the payload. */
	struct buf pm = k.bytes;
	uint64_t payload_offset = 0, payload_len = 0;
	if (payload_path) {
		struct buf payload_elf = read_file(payload_path);
		/* Same checks a VMM's ELF loader should pass. */
		struct flat_image p = flatten_elf(payload_path, &payload_elf);
		free(p.bytes.data);
		struct buf gz = gzip_buffer(&payload_elf);
		payload_offset = align_up(k.bytes.len, PAYLOAD_ALIGN);
		payload_len = gz.len;
		pm.len = payload_offset + payload_len;
		pm.data = calloc(1, pm.len);
		if (!pm.data)
			die("out of memory");
		memcpy(pm.data, k.bytes.data, k.bytes.len);
		memcpy(pm.data + payload_offset, gz.data, gz.len);
		free(gz.data);
		free(payload_elf.data);
	}
	if (pm.len > UINT32_MAX)
		die("protected-mode part too large");

	/* init_size: boot.rst "the amount of linear contiguous memory starting
	 * at the kernel runtime start address that the kernel needs": the
	 * whole image incl. .bss and stacks, and the payload if longer. */
	uint64_t footprint = k.mem_size > pm.len ? k.mem_size : pm.len;
	uint64_t init_size = align_up(footprint, PAGE);

	uint8_t rm[REAL_MODE_SIZE];
	build_setup(rm, &k, pm.len, payload_offset, payload_len, init_size);
	write_file(out, rm, sizeof(rm), pm.data, pm.len);

	/* Freed so a sanitizer build (b_sanitize=address) runs clean. */
	if (pm.data != k.bytes.data)
		free(pm.data);
	free(k.bytes.data);
	free(kernel_elf.data);
	return 0;
}
