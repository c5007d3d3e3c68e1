/*
 * Loading a kernel per the Linux x86 boot protocol
 * (Documentation/arch/x86/boot.rst): bzImage (64-bit entry at +0x200, or
 * the host-decompressed vmlinux ELF entered at its 64-bit entry, as
 * Firecracker boots vmlinux) or a bare ELF64 vmlinux; then the zero page,
 * command line, initrd, e820 and the boot page tables and GDT.
 */
#ifndef VMM_BOOT_H
#define VMM_BOOT_H

#include "decompress.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct err;
struct guest_mem;

/* Minimum boot protocol: 2.12 introduced xloadflags/XLF_KERNEL_64 checks. */
#define BOOT_MIN_PROTOCOL 0x020C
#define BOOT_LOADER_TYPE  0xFF /* "undefined" boot loader ID (boot.rst) */

struct boot_config {
	const uint8_t *kernel;
	size_t kernel_len;
	const uint8_t *initrd; /* NULL: no initrd */
	size_t initrd_len;
	const char *cmdline;
	bool guest_decompress; /* enter at +0x200 even if we could decompress */
};

enum boot_path {
	BOOT_PATH_BZIMAGE,	     /* bzImage entered at its 64-bit entry (+0x200) */
	BOOT_PATH_HOST_DECOMPRESSED, /* payload decompressed here, ELF entry */
	BOOT_PATH_ELF,		     /* bare ELF64 vmlinux */
};

struct boot_result {
	enum boot_path path;
	enum payload_format payload;
	char how[200];	    /* one line: which path and why */
	uint16_t protocol;  /* boot protocol version of the image, 0 for ELF */
	uint64_t entry;	    /* RIP */
	uint64_t zero_page; /* RSI */
	uint64_t kernel_start, kernel_end;
	uint64_t initrd_addr, initrd_size;
	size_t cmdline_len;
	size_t decompressed_len;
};

int boot_load(struct guest_mem *m, const struct boot_config *c, struct boot_result *r,
	      struct err *e);

/* Links one setup_data entry (e.g. SETUP_DTB) into a loaded zero page. */
int boot_add_setup_data(struct guest_mem *m, uint64_t zero_page, uint32_t type, const void *data,
			size_t len, struct err *e);

/* Writes the GDT and identity-mapping page tables the 64-bit entry needs. */
void boot_write_cpu_tables(struct guest_mem *m);

/* Segment selectors the 64-bit protocol requires (boot.rst). */
#define BOOT_CS	 0x10
#define BOOT_DS	 0x18
#define BOOT_TSS 0x20

#endif
