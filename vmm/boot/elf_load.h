/* ELF64 kernels (vmlinux): PT_LOAD segments at their physical addresses. */
#ifndef VMM_ELF_LOAD_H
#define VMM_ELF_LOAD_H

#include <stddef.h>
#include <stdint.h>

struct err;
struct guest_mem;

struct elf_image {
	uint64_t entry;	     /* physical address of the 64-bit entry */
	uint64_t load_start; /* lowest PT_LOAD paddr */
	uint64_t load_end;   /* highest PT_LOAD paddr + memsz */
	uint64_t pvh_entry;  /* XEN_ELFNOTE_PHYS32_ENTRY, 0 when there is none */
};

/* The PVH entry note (xen/include/public/elfnote.h): "Xen", type 18, the
 * 32-bit physical entry point (Linux with CONFIG_PVH writes it as a quad). */
#define ELF_XEN_NOTE_PHYS32_ENTRY 18

int elf_is_elf64(const uint8_t *p, size_t len);
/* Checks every header and segment against the file and guest RAM before
 * copying anything. */
int elf_load(struct guest_mem *m, const uint8_t *p, size_t len, struct elf_image *out,
	     struct err *e);

#endif
