/*
 * The PVH boot ABI, as QEMU's `-kernel` (and Xen, and Firecracker/Cloud
 * Hypervisor) enter an ELF kernel that carries a XEN_ELFNOTE_PHYS32_ENTRY
 * note: 32-bit protected mode, paging off, flat CS/DS, interrupts off,
 * %ebx = the physical address of a struct hvm_start_info.
 *
 * Layout from Xen's public headers (xen/include/public/arch-x86/hvm/
 * start_info.h, docs/misc/pvh.pandoc) and Linux's copy
 * (include/xen/interface/hvm/start_info.h). Every kit guest carries the
 * note (lib/entry.S, lib/guest.ld), and the kit turns the start info into
 * a boot_params zero page (lib/kit.c), so guest_main() sees the same
 * interface whichever way the guest was entered.
 */
#ifndef GUEST_PVH_H
#define GUEST_PVH_H

#include <stddef.h>
#include <stdint.h>

#define XEN_ELFNOTE_PHYS32_ENTRY 18
#define HVM_START_MAGIC		 0x336ec578u

struct hvm_start_info {
	uint32_t magic;		 /* HVM_START_MAGIC */
	uint32_t version;	 /* 0: no memory map; 1: memmap_* valid */
	uint32_t flags;		 /* SIF_* */
	uint32_t nr_modules;	 /* entries at modlist_paddr */
	uint64_t modlist_paddr;	 /* struct hvm_modlist_entry[nr_modules] */
	uint64_t cmdline_paddr;	 /* NUL-terminated, 0 if none */
	uint64_t rsdp_paddr;	 /* ACPI RSDP, 0 if none */
	uint64_t memmap_paddr;	 /* version 1: struct hvm_memmap_table_entry[] */
	uint32_t memmap_entries; /* version 1 */
	uint32_t reserved;
};

struct hvm_modlist_entry {
	uint64_t paddr;
	uint64_t size;
	uint64_t cmdline_paddr;
	uint64_t reserved;
};

struct hvm_memmap_table_entry {
	uint64_t addr;
	uint64_t size;
	uint32_t type; /* E820 types: 1 RAM, 2 reserved, ... */
	uint32_t reserved;
};

_Static_assert(offsetof(struct hvm_start_info, memmap_paddr) == 40, "hvm_start_info layout");
_Static_assert(sizeof(struct hvm_start_info) == 56, "hvm_start_info size");
_Static_assert(sizeof(struct hvm_memmap_table_entry) == 24, "memmap entry size");

/* Whether the kit was entered through the PVH note (lib/entry.S). */
extern unsigned char guest_booted_pvh;

#endif
