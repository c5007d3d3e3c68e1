/*
 * Loading a kernel per the Linux x86 boot protocol
 * (Documentation/arch/x86/boot.rst): bzImage (64-bit entry at +0x200, or
 * the host-decompressed vmlinux ELF entered at its 64-bit entry, as
 * Firecracker boots vmlinux) or a bare ELF64 vmlinux; then the zero page,
 * command line, initrd, e820 and the boot page tables and GDT.
 */
#ifndef VMM_BOOT_H
#define VMM_BOOT_H

#include "vmm/boot/decompress.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct err;
struct guest_mem;

/* Minimum boot protocol: 2.12 introduced xloadflags/XLF_KERNEL_64 checks. */
#define BOOT_MIN_PROTOCOL 0x020C
#define BOOT_LOADER_TYPE  0xFF /* "undefined" boot loader ID (boot.rst) */

/* --boot: which entry a kernel is started at. */
enum boot_entry {
	BOOT_ENTRY_AUTO,  /* PVH for an ELF vmlinux with the PVH note, else Linux's */
	BOOT_ENTRY_LINUX, /* the 64-bit boot protocol (boot.rst) */
	BOOT_ENTRY_PVH,	  /* the PVH start-info ABI (32-bit, hvm_start_info) */
};

struct boot_config {
	const uint8_t *kernel;
	size_t kernel_len;
	const uint8_t *initrd; /* NULL: no initrd */
	size_t initrd_len;
	const char *cmdline;
	bool guest_decompress; /* enter at +0x200 even if we could decompress */
	enum boot_entry entry;
	uint64_t rsdp; /* the ACPI RSDP's address for the kernel, 0: none */
};

enum boot_path {
	BOOT_PATH_BZIMAGE,	     /* bzImage entered at its 64-bit entry (+0x200) */
	BOOT_PATH_HOST_DECOMPRESSED, /* payload decompressed here, ELF entry */
	BOOT_PATH_ELF,		     /* bare ELF64 vmlinux */
	BOOT_PATH_PVH,		     /* ELF vmlinux at its PVH entry */
};

struct boot_result {
	enum boot_path path;
	enum payload_format payload;
	char how[200];	     /* one line: which path and why */
	uint16_t protocol;   /* boot protocol version of the image, 0 for ELF */
	uint64_t entry;	     /* RIP */
	uint64_t zero_page;  /* RSI (the Linux entry) */
	uint64_t start_info; /* EBX (BOOT_PATH_PVH): the hvm_start_info */
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
#define BOOT_CS		 0x10
#define BOOT_DS		 0x18
#define BOOT_TSS	 0x20
#define BOOT_CS32	 0x30 /* the PVH entry's 32-bit code segment */
#define BOOT_GDT_ENTRIES 7

#endif
