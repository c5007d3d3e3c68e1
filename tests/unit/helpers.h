/*
 * Shared fixtures for the unit tests: fake guest RAM, images built in memory
 * (bzImage per Documentation/arch/x86/boot.rst, ELF64 per the System V ABI),
 * compressors for payloads, and recorders that stand in for the machine.
 */
#ifndef TESTS_UNIT_HELPERS_H
#define TESTS_UNIT_HELPERS_H

#include "irq/irq.h"
#include "vmm/guest_mem.h"
#include "vmm/machine_ctl.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MiB (1024ULL * 1024ULL)
#define GiB (1024ULL * MiB)

/* Little-endian field access, independent of any struct layout. */
void put16(uint8_t *p, uint16_t v);
void put32(uint8_t *p, uint32_t v);
void put64(uint8_t *p, uint64_t v);
uint16_t get16(const uint8_t *p);
uint32_t get32(const uint8_t *p);
uint64_t get64(const uint8_t *p);

/* Deterministic filler that compresses badly (so payload corruption bites). */
void fill_noise(uint8_t *p, size_t len, uint32_t seed);

/* Guest RAM over a calloc()ed buffer. */
struct fake_ram {
	struct guest_mem m;
	uint8_t *buf;
	uint64_t size;
};
void fake_ram_init(struct fake_ram *r, uint64_t size);
void fake_ram_free(struct fake_ram *r);
/* True if every byte of [off, off+len) of the host buffer equals v. */
bool bytes_all(const uint8_t *p, size_t len, uint8_t v);

/* Setup header offsets within the image and the zero page (boot.rst). */
enum {
	HDR_SETUP_SECTS = 0x1F1,
	HDR_SYSSIZE = 0x1F4,
	HDR_BOOT_FLAG = 0x1FE,
	HDR_JUMP = 0x200,
	HDR_HEADER = 0x202,
	HDR_VERSION = 0x206,
	HDR_TYPE_OF_LOADER = 0x210,
	HDR_LOADFLAGS = 0x211,
	HDR_RAMDISK_IMAGE = 0x218,
	HDR_RAMDISK_SIZE = 0x21C,
	HDR_CMD_LINE_PTR = 0x228,
	HDR_INITRD_ADDR_MAX = 0x22C,
	HDR_KERNEL_ALIGNMENT = 0x230,
	HDR_RELOCATABLE = 0x234,
	HDR_XLOADFLAGS = 0x236,
	HDR_CMDLINE_SIZE = 0x238,
	HDR_PAYLOAD_OFFSET = 0x248,
	HDR_PAYLOAD_LENGTH = 0x24C,
	HDR_PREF_ADDRESS = 0x258,
	HDR_INIT_SIZE = 0x260,
	HDR_END = 0x26C, /* end of the 2.15 header (kernel_info_offset) */
};
/* Zero page fields outside the setup header (zero-page.rst). */
enum {
	ZP_EXT_RAMDISK_IMAGE = 0x0C0,
	ZP_EXT_RAMDISK_SIZE = 0x0C4,
	ZP_EXT_CMD_LINE_PTR = 0x0C8,
	ZP_E820_ENTRIES = 0x1E8,
	ZP_E820_TABLE = 0x2D0,
	ZP_E820_ENTRY_SIZE = 20,
};
#define XLF_KERNEL_64 0x0001
#define LOADED_HIGH_FLAG 0x01

struct bz_params {
	uint16_t version;
	uint16_t xloadflags;
	uint8_t setup_sects; /* 0 means 4 (boot.rst) */
	uint32_t init_size;
	uint64_t pref_address;
	uint8_t relocatable;
	uint32_t kernel_alignment;
	uint32_t cmdline_size;
	uint32_t initrd_addr_max;
	const uint8_t *pm; /* protected-mode code */
	size_t pm_len;
	uint32_t payload_offset, payload_length; /* relative to pm */
};
/* Sensible 2.15, 64-bit, non-relocatable defaults at pref_address 16 MiB. */
struct bz_params bz_defaults(const uint8_t *pm, size_t pm_len);
/* Returns a malloc()ed image; *len its size. */
uint8_t *bz_build(const struct bz_params *p, size_t *len);
/* Offset of the protected-mode code in an image built with these params. */
size_t bz_pm_offset(const struct bz_params *p);

struct elf_seg {
	uint32_t type; /* PT_LOAD etc. */
	uint64_t paddr, vaddr;
	const uint8_t *data;
	uint64_t filesz, memsz;
};
/* ELF64 x86-64 ET_EXEC with one program header per segment. */
uint8_t *elf_build(uint64_t entry, const struct elf_seg *segs, unsigned nsegs, size_t *len);
/* Byte offset of program header i (for patching fields in tests). */
size_t elf_phdr_off(unsigned i);

/* gzip (RFC 1952) via zlib deflateInit2 windowBits 31. */
uint8_t *gzip_bytes(const uint8_t *in, size_t len, size_t *out_len);
/* LZ4 legacy frame as `lz4 -l` writes it, plus the kernel's LE32 size trailer. */
uint8_t *lz4_legacy_bytes(const uint8_t *in, size_t len, size_t *out_len);

/* A bzImage whose payload is `payload`, placed after a 0x400-byte stub. */
uint8_t *bz_with_payload(const uint8_t *payload, size_t payload_len, size_t *len,
			 struct bz_params *used);
#define BZ_PAYLOAD_STUB 0x400

/* Recording interrupt sink. */
#define IRQ_REC_MAX 256
struct irq_rec {
	struct {
		uint32_t gsi;
		int level;
	} calls[IRQ_REC_MAX];
	unsigned n;
	int fail; /* return -EIO when set */
};
extern const struct irq_sink_ops irq_rec_ops;
/* Level of the last call for gsi, or -1 if none. */
int irq_rec_last(const struct irq_rec *r, uint32_t gsi);

/* Recording machine control. */
struct stop_rec {
	unsigned n;
	int code;
	char why[128];
};
struct machine_ctl stop_rec_ctl(struct stop_rec *r);

/* Collecting char sink. */
struct char_rec {
	uint8_t buf[8192];
	size_t n;
};
struct char_sink char_rec_sink(struct char_rec *r);

#endif
