#include "vmm/boot/elf_load.h"

#include "vmm/base/err.h"
#include "vmm/base/guest_mem.h"
#include "vmm/base/layout.h"

#include <elf.h>
#include <string.h>

int elf_is_elf64(const uint8_t *p, size_t len)
{
	return len >= sizeof(Elf64_Ehdr) && !memcmp(p, ELFMAG, SELFMAG) &&
	       p[EI_CLASS] == ELFCLASS64;
}

static int elf_phdrs(size_t len, const Elf64_Ehdr *eh, struct err *e)
{
	if (eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phnum == 0)
		return err_set(e, ERR_INPUT, "ELF kernel has no usable program headers");
	if (eh->e_phoff > len || (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > len - eh->e_phoff)
		return err_set(e, ERR_INPUT,
			       "ELF program headers lie outside the file (truncated?)");
	return 0;
}

static uint64_t get_le(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* The PVH entry from one PT_NOTE segment's notes, or 0. Every size is the
 * file's word: checked against the segment before use. */
static uint64_t elf_pvh_note(const uint8_t *n, uint64_t len)
{
	uint64_t at = 0;
	while (at <= len && len - at >= 12) {
		uint64_t namesz = get_le(n + at, 4), descsz = get_le(n + at + 4, 4);
		uint64_t type = get_le(n + at + 8, 4);
		uint64_t name_at = at + 12, desc_at = name_at + ((namesz + 3) & ~3ULL);
		if (desc_at > len || descsz > len - desc_at)
			return 0; /* a note past the segment: stop reading */
		if (namesz == 4 && !memcmp(n + name_at, "Xen", 4) &&
		    type == ELF_XEN_NOTE_PHYS32_ENTRY && (descsz == 4 || descsz == 8))
			return get_le(n + desc_at, (unsigned)descsz);
		at = desc_at + ((descsz + 3) & ~3ULL);
	}
	return 0;
}

int elf_load(struct guest_mem *m, const uint8_t *p, size_t len, struct elf_image *out,
	     struct err *e)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	uint64_t lo = UINT64_MAX, hi = 0;
	int entry_found = 0;

	if (!elf_is_elf64(p, len))
		return err_set(e, ERR_INPUT, "not an ELF64 file");
	memcpy(&eh, p, sizeof(eh));
	if (eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_machine != EM_X86_64)
		return err_set(e, ERR_INPUT, "ELF kernel is not x86-64 little-endian");
	if (elf_phdrs(len, &eh, e))
		return -1;
	out->entry = eh.e_entry;
	out->pvh_entry = 0;

	/* Pass 1: validate everything, so a bad file changes no guest memory. */
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		memcpy(&ph, p + eh.e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_type == PT_NOTE && ph.p_offset <= len &&
		    ph.p_filesz <= len - ph.p_offset && !out->pvh_entry)
			out->pvh_entry = elf_pvh_note(p + ph.p_offset, ph.p_filesz);
		if (ph.p_type != PT_LOAD || ph.p_memsz == 0)
			continue;
		if (ph.p_filesz > ph.p_memsz || ph.p_offset > len ||
		    ph.p_filesz > len - ph.p_offset)
			return err_set(e, ERR_INPUT,
				       "ELF segment %u lies outside the file (truncated?)", i);
		if (ph.p_paddr < LAYOUT_KERNEL_MIN)
			return err_set(
			    e, ERR_INPUT,
			    "ELF segment %u at 0x%llx lies below 1 MiB (BIOS and boot data)", i,
			    (unsigned long long)ph.p_paddr);
		if (!guest_mem_is_ram(m, ph.p_paddr, ph.p_memsz))
			return err_set(
			    e, ERR_INPUT,
			    "ELF segment %u (0x%llx, %llu KiB) does not fit in guest RAM "
			    "(%llu MiB); try a larger --memory",
			    i, (unsigned long long)ph.p_paddr,
			    (unsigned long long)(ph.p_memsz >> 10),
			    (unsigned long long)(m->ram_size >> 20));
		if (ph.p_paddr < lo)
			lo = ph.p_paddr;
		if (ph.p_paddr + ph.p_memsz > hi)
			hi = ph.p_paddr + ph.p_memsz;
		/* vmlinux's e_entry is physical (ENTRY(phys_startup_64)); accept a
		 * virtual one too by translating it through its segment. */
		if (eh.e_entry >= ph.p_paddr && eh.e_entry - ph.p_paddr < ph.p_memsz) {
			entry_found = 1;
		} else if (!entry_found && eh.e_entry >= ph.p_vaddr &&
			   eh.e_entry - ph.p_vaddr < ph.p_memsz) {
			out->entry = ph.p_paddr + (eh.e_entry - ph.p_vaddr);
			entry_found = 1;
		}
	}
	if (hi == 0)
		return err_set(e, ERR_INPUT, "ELF kernel has no loadable segment");
	if (!entry_found)
		return err_set(e, ERR_INPUT, "ELF entry 0x%llx is not inside a loaded segment",
			       (unsigned long long)eh.e_entry);
	if (out->pvh_entry && (out->pvh_entry < lo || out->pvh_entry >= hi))
		return err_set(e, ERR_INPUT,
			       "the PVH entry note's 0x%llx is not inside the loaded segments",
			       (unsigned long long)out->pvh_entry);

	for (unsigned i = 0; i < eh.e_phnum; i++) {
		memcpy(&ph, p + eh.e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_type != PT_LOAD || ph.p_memsz == 0)
			continue;
		uint8_t *dst = guest_mem_ptr(m, ph.p_paddr, ph.p_memsz);
		memcpy(dst, p + ph.p_offset, ph.p_filesz);
		memset(dst + ph.p_filesz, 0, ph.p_memsz - ph.p_filesz);
	}
	out->load_start = lo;
	out->load_end = hi;
	return 0;
}
