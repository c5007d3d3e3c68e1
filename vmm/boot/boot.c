#include "vmm/boot/boot.h"

#include "vmm/base/align.h"
#include "vmm/base/err.h"
#include "vmm/base/guest_mem.h"
#include "vmm/base/layout.h"
#include "vmm/boot/elf_load.h"

#include <asm/bootparam.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HDR_OFFSET 0x1F1 /* setup header within the image and the zero page */

#define XLF_KERNEL_64_BIT 0x0001
#define E820_RAM	  1
#define E820_RESERVED	  2
#define ELF_CMDLINE_MAX	  2047 /* COMMAND_LINE_SIZE - 1 on x86 */

/* e820 from the RAM regions: boot.rst leaves the map to the loader. */
static unsigned boot_fill_e820(const struct guest_mem *m, struct boot_params *bp)
{
	unsigned n = 0;
	struct boot_e820_entry *t = bp->e820_table;
	t[n++] = (struct boot_e820_entry){0, LAYOUT_EBDA, E820_RAM};
	t[n++] =
	    (struct boot_e820_entry){LAYOUT_EBDA, LAYOUT_BIOS_END - LAYOUT_EBDA, E820_RESERVED};
	if (guest_mem_low_end(m) > LAYOUT_BIOS_END)
		t[n++] = (struct boot_e820_entry){LAYOUT_BIOS_END,
						  guest_mem_low_end(m) - LAYOUT_BIOS_END, E820_RAM};
	for (int i = 1; i < m->nregions; i++)
		t[n++] = (struct boot_e820_entry){m->regions[i].gpa, m->regions[i].size, E820_RAM};
	return n;
}

/*
 * The PVH start info (xen/include/public/arch-x86/hvm/start_info.h,
 * version 1: with the memory map): what a PVH kernel reads instead of a
 * zero page. Linux's init_pvh_bootparams makes its boot_params from it:
 * e820 from the memory map, the initrd from module 0, the command line,
 * the RSDP.
 */
#define HVM_START_MAGIC 0x336ec578u
struct hvm_start_info {
	uint32_t magic, version, flags, nr_modules;
	uint64_t modlist_paddr, cmdline_paddr, rsdp_paddr, memmap_paddr;
	uint32_t memmap_entries, reserved;
};
struct hvm_modlist_entry {
	uint64_t paddr, size, cmdline_paddr, reserved;
};
struct hvm_memmap_table_entry {
	uint64_t addr, size;
	uint32_t type, reserved;
};
_Static_assert(sizeof(struct hvm_start_info) == 56, "start_info.h layout");
_Static_assert(sizeof(struct hvm_memmap_table_entry) == 24, "start_info.h layout");
_Static_assert(LAYOUT_PVH_MEMMAP + E820_MAX_ENTRIES_ZEROPAGE * 24 <= LAYOUT_PVH_INFO + 0x1000,
	       "the PVH memory map fits its page");

static void boot_write_pvh_info(struct guest_mem *m, const struct boot_params *bp,
				const struct boot_result *r, uint64_t rsdp)
{
	struct hvm_start_info si = {
	    .magic = HVM_START_MAGIC,
	    .version = 1,
	    .cmdline_paddr = LAYOUT_CMDLINE,
	    .rsdp_paddr = rsdp,
	    .memmap_paddr = LAYOUT_PVH_MEMMAP,
	    .memmap_entries = bp->e820_entries,
	};
	if (r->initrd_size) {
		struct hvm_modlist_entry mod = {r->initrd_addr, r->initrd_size, 0, 0};
		guest_mem_write(m, LAYOUT_PVH_MODLIST, &mod, sizeof(mod));
		si.nr_modules = 1;
		si.modlist_paddr = LAYOUT_PVH_MODLIST;
	}
	for (unsigned i = 0; i < bp->e820_entries; i++) {
		const struct boot_e820_entry *e = &bp->e820_table[i];
		struct hvm_memmap_table_entry me = {e->addr, e->size, e->type, 0};
		guest_mem_write(m, LAYOUT_PVH_MEMMAP + i * sizeof(me), &me, sizeof(me));
	}
	guest_mem_write(m, LAYOUT_PVH_INFO, &si, sizeof(si));
}

/* Header of a bare ELF boot: what a bzImage would have told the kernel. */
static void boot_synth_header(struct setup_header *h)
{
	memset(h, 0, sizeof(*h));
	h->boot_flag = 0xAA55;
	h->header = 0x53726448; /* "HdrS" */
	h->version = 0x020F;
	h->loadflags = LOADED_HIGH;
	h->kernel_alignment = 0x200000;
	h->cmdline_size = ELF_CMDLINE_MAX;
	h->initrd_addr_max = 0x7FFFFFFF;
}

struct bzimage {
	struct setup_header hdr;
	size_t hdr_len;	   /* bytes of header present in the image */
	const uint8_t *pm; /* protected-mode kernel */
	size_t pm_len;
	uint64_t load_addr;
};

static int bzimage_parse(const uint8_t *img, size_t len, struct bzimage *bz, struct err *e)
{
	memset(bz, 0, sizeof(*bz));
	if (len < 0x202 + 4 || memcmp(img + 0x202, "HdrS", 4))
		return err_set(e, ERR_INPUT,
			       "not a Linux kernel: no bzImage \"HdrS\" header and no ELF magic");
	/* The header ends at 0x202 + the byte at 0x201 (boot.rst, "Details of
	 * header fields"); never copy more than we know or the file holds. */
	size_t end = 0x202 + img[0x201];
	if (end > HDR_OFFSET + sizeof(struct setup_header))
		end = HDR_OFFSET + sizeof(struct setup_header);
	if (end > len)
		return err_set(e, ERR_INPUT, "bzImage is truncated inside its setup header");
	bz->hdr_len = end - HDR_OFFSET;
	memcpy(&bz->hdr, img + HDR_OFFSET, bz->hdr_len);
	const struct setup_header *h = &bz->hdr;
	if (h->boot_flag != 0xAA55)
		return err_set(e, ERR_INPUT, "bzImage boot_flag is 0x%04x, not 0xAA55",
			       h->boot_flag);
	if (h->version < BOOT_MIN_PROTOCOL)
		return err_set(
		    e, ERR_INPUT,
		    "boot protocol %u.%02u is too old: the 64-bit entry needs 2.12 or later",
		    h->version >> 8, h->version & 0xFF);
	if (!(h->xloadflags & XLF_KERNEL_64_BIT))
		return err_set(e, ERR_INPUT,
			       "kernel has no 64-bit entry point (XLF_KERNEL_64 clear)");
	size_t setup_sects = h->setup_sects ? h->setup_sects : 4;
	size_t setup_len = (setup_sects + 1) * 512;
	if (setup_len >= len)
		return err_set(e, ERR_INPUT, "bzImage is truncated: %zu bytes, setup alone is %zu",
			       len, setup_len);
	bz->pm = img + setup_len;
	bz->pm_len = len - setup_len;
	/* syssize: protected-mode size in 16-byte paragraphs, rounded up
	 * (protocol 2.04+), so the file may end up to 15 bytes short of it. */
	if ((uint64_t)h->syssize * 16 > (uint64_t)bz->pm_len + 15)
		return err_set(
		    e, ERR_INPUT,
		    "bzImage is truncated: header declares %llu bytes of kernel, file has %zu",
		    (unsigned long long)h->syssize * 16, bz->pm_len);
	if (h->payload_length && ((uint64_t)h->payload_offset + h->payload_length > bz->pm_len))
		return err_set(e, ERR_INPUT,
			       "bzImage is truncated: its payload runs past the end of the file");
	/* pref_address (2.10+); a relocatable kernel must honour kernel_alignment. */
	bz->load_addr = h->pref_address ? h->pref_address : LAYOUT_KERNEL_MIN;
	if (h->relocatable_kernel && h->kernel_alignment > 1 &&
	    (h->kernel_alignment & (h->kernel_alignment - 1)) == 0)
		bz->load_addr = align_up(bz->load_addr, h->kernel_alignment);
	if (bz->load_addr < LAYOUT_KERNEL_MIN)
		bz->load_addr = LAYOUT_KERNEL_MIN;
	return 0;
}

static int boot_place_pm(struct guest_mem *m, const struct bzimage *bz, struct boot_result *r,
			 struct err *e)
{
	uint64_t need = bz->pm_len > bz->hdr.init_size ? bz->pm_len : bz->hdr.init_size;
	if (!guest_mem_is_ram(m, bz->load_addr, need) ||
	    bz->load_addr + need > guest_mem_low_end(m))
		return err_set(
		    e, ERR_INPUT,
		    "kernel needs %llu MiB of RAM from 0x%llx (init_size), more than --memory "
		    "%llu MiB gives",
		    (unsigned long long)((need + (1 << 20) - 1) >> 20),
		    (unsigned long long)bz->load_addr, (unsigned long long)(m->ram_size >> 20));
	guest_mem_write(m, bz->load_addr, bz->pm, bz->pm_len);
	r->kernel_start = bz->load_addr;
	r->kernel_end = bz->load_addr + need;
	r->entry = bz->load_addr + 0x200; /* 64-bit entry (boot.rst) */
	return 0;
}

static int boot_host_decompress(struct guest_mem *m, const struct bzimage *bz,
				struct boot_result *r, struct err *e)
{
	uint8_t *elf = NULL;
	size_t elf_len = 0;
	struct elf_image ei;
	const uint8_t *payload = bz->pm + bz->hdr.payload_offset;
	if (payload_decompress(r->payload, payload, bz->hdr.payload_length, m->ram_size, &elf,
			       &elf_len, e))
		return -1;
	if (!elf_is_elf64(elf, elf_len)) {
		free(elf);
		return err_set(e, ERR_INPUT, "decompressed %s payload is not an ELF64 kernel",
			       payload_format_name(r->payload));
	}
	int ret = elf_load(m, elf, elf_len, &ei, e);
	free(elf);
	if (ret)
		return err_prefix(e, "decompressed payload");
	r->decompressed_len = elf_len;
	r->entry = ei.entry;
	r->kernel_start = ei.load_start;
	r->kernel_end = ei.load_end;
	return 0;
}

static int boot_place_initrd(struct guest_mem *m, const struct boot_config *c,
			     const struct setup_header *h, struct boot_result *r, struct err *e)
{
	if (!c->initrd)
		return 0;
	/* Highest page-aligned spot below initrd_addr_max and the PCI hole. */
	uint64_t top = guest_mem_low_end(m);
	uint64_t max = (uint64_t)h->initrd_addr_max + 1;
	if (max < top)
		top = max;
	uint64_t floor = align_up(r->kernel_end, 0x1000);
	if (c->initrd_len == 0 || c->initrd_len > top ||
	    ((top - c->initrd_len) & ~0xFFFULL) < floor)
		return err_set(
		    e, ERR_INPUT,
		    "initrd (%zu KiB) does not fit in guest RAM between the kernel (ends at "
		    "0x%llx) and 0x%llx; try a larger --memory",
		    c->initrd_len >> 10, (unsigned long long)floor, (unsigned long long)top);
	r->initrd_addr = (top - c->initrd_len) & ~0xFFFULL;
	r->initrd_size = c->initrd_len;
	guest_mem_write(m, r->initrd_addr, c->initrd, c->initrd_len);
	return 0;
}

static int boot_place_cmdline(struct guest_mem *m, const char *cmdline,
			      const struct setup_header *h, struct boot_result *r, struct err *e)
{
	size_t len = strlen(cmdline);
	/* cmdline_size excludes the NUL (protocol 2.06+); 255 before that. */
	size_t max = h->version >= 0x0206 ? h->cmdline_size : 255;
	if (max >= LAYOUT_CMDLINE_MAX)
		max = LAYOUT_CMDLINE_MAX - 1;
	if (len > max)
		return err_set(e, ERR_INPUT,
			       "kernel command line is %zu bytes; this kernel accepts at most %zu",
			       len, max);
	guest_mem_write(m, LAYOUT_CMDLINE, cmdline, len + 1);
	r->cmdline_len = len;
	return 0;
}

int boot_add_setup_data(struct guest_mem *m, uint64_t zero_page, uint32_t type, const void *data,
			size_t len, struct err *e)
{
	/* One entry at LAYOUT_SETUP_DATA, linked from hdr.setup_data (2.09+). */
	struct setup_data sd = {.next = 0, .type = type, .len = (uint32_t)len};
	uint64_t ptr = LAYOUT_SETUP_DATA;
	if (len + sizeof(sd) > LAYOUT_SETUP_DATA_MAX)
		return err_set(e, ERR_INPUT, "setup_data of %zu bytes does not fit below 0x%llx",
			       len,
			       (unsigned long long)(LAYOUT_SETUP_DATA + LAYOUT_SETUP_DATA_MAX));
	if (guest_mem_write(m, LAYOUT_SETUP_DATA, &sd, sizeof(sd)) ||
	    guest_mem_write(m, LAYOUT_SETUP_DATA + sizeof(sd), data, len) ||
	    guest_mem_write(m,
			    zero_page + offsetof(struct boot_params, hdr) +
				offsetof(struct setup_header, setup_data),
			    &ptr, sizeof(ptr)))
		return err_set(e, ERR_INPUT, "guest RAM does not cover setup_data");
	return 0;
}

int boot_load(struct guest_mem *m, const struct boot_config *c, struct boot_result *r,
	      struct err *e)
{
	struct boot_params bp;
	struct bzimage bz;
	memset(r, 0, sizeof(*r));
	memset(&bp, 0, sizeof(bp));
	if (guest_mem_low_end(m) < 2 * LAYOUT_KERNEL_MIN)
		return err_set(e, ERR_INPUT, "guest RAM of %llu KiB is too small to boot a kernel",
			       (unsigned long long)(m->ram_size >> 10));

	if (elf_is_elf64(c->kernel, c->kernel_len)) {
		struct elf_image ei;
		if (elf_load(m, c->kernel, c->kernel_len, &ei, e))
			return -1;
		if (c->entry == BOOT_ENTRY_PVH && !ei.pvh_entry)
			return err_set(
			    e, ERR_INPUT,
			    "--boot pvh: this vmlinux has no PVH entry note "
			    "(XEN_ELFNOTE_PHYS32_ENTRY; Linux writes it with CONFIG_PVH)");
		boot_synth_header(&bp.hdr);
		r->kernel_start = ei.load_start;
		r->kernel_end = ei.load_end;
		/* PVH start-info ABI: the entry runs in 32-bit protected mode
		 * with paging off, so it is a physical address below 4 GiB. */
		if (c->entry != BOOT_ENTRY_LINUX && ei.pvh_entry >= (1ULL << 32))
			return err_set(e, ERR_INPUT,
				       "the PVH entry note's 0x%llx is at or above 4 GiB, out of "
				       "reach of a 32-bit entry (--boot linux ignores the note)",
				       (unsigned long long)ei.pvh_entry);
		if (c->entry != BOOT_ENTRY_LINUX && ei.pvh_entry) {
			r->path = BOOT_PATH_PVH;
			r->entry = ei.pvh_entry;
			snprintf(r->how, sizeof(r->how),
				 "ELF64 vmlinux, PVH entry 0x%llx (32-bit, hvm_start_info at "
				 "0x%llx)%s",
				 (unsigned long long)r->entry, (unsigned long long)LAYOUT_PVH_INFO,
				 c->entry == BOOT_ENTRY_AUTO ? ": it has the PVH note" : "");
		} else {
			r->path = BOOT_PATH_ELF;
			r->entry = ei.entry;
			snprintf(r->how, sizeof(r->how),
				 "ELF64 vmlinux, entered at its 64-bit entry 0x%llx%s",
				 (unsigned long long)r->entry,
				 ei.pvh_entry ? " (--boot linux; it has a PVH entry too)" : "");
		}
	} else if (c->entry == BOOT_ENTRY_PVH) {
		return err_set(e, ERR_INPUT,
			       "--boot pvh needs an ELF vmlinux with the PVH note; this is not an "
			       "ELF (a bzImage boots with --boot linux or auto)");
	} else {
		if (bzimage_parse(c->kernel, c->kernel_len, &bz, e))
			return -1;
		memcpy(&bp.hdr, &bz.hdr, bz.hdr_len);
		r->protocol = bz.hdr.version;
		r->payload = bz.hdr.payload_length ? payload_detect(bz.pm + bz.hdr.payload_offset,
								    bz.hdr.payload_length)
						   : PAYLOAD_NONE;
		if (!c->guest_decompress && payload_supported(r->payload)) {
			if (boot_host_decompress(m, &bz, r, e))
				return -1;
			r->path = BOOT_PATH_HOST_DECOMPRESSED;
			snprintf(r->how, sizeof(r->how),
				 "bzImage %s payload decompressed by the VMM (%zu KiB), ELF entry "
				 "0x%llx",
				 payload_format_name(r->payload), r->decompressed_len >> 10,
				 (unsigned long long)r->entry);
		} else {
			if (boot_place_pm(m, &bz, r, e))
				return -1;
			r->path = BOOT_PATH_BZIMAGE;
			snprintf(r->how, sizeof(r->how), "bzImage entered at 0x%llx (+0x200): %s",
				 (unsigned long long)r->entry,
				 c->guest_decompress
				     ? "--guest-decompress, the kernel decompresses itself"
				 : r->payload == PAYLOAD_NONE
				     ? "no compressed payload"
				     : "payload format not decompressed by the VMM");
		}
	}

	if (boot_place_cmdline(m, c->cmdline ? c->cmdline : "", &bp.hdr, r, e) ||
	    boot_place_initrd(m, c, &bp.hdr, r, e))
		return -1;

	/* Zero page (boot.rst "64-bit BOOT PROTOCOL" and "The zero page"). */
	bp.hdr.type_of_loader = BOOT_LOADER_TYPE;
	bp.hdr.cmd_line_ptr = (uint32_t)LAYOUT_CMDLINE;
	bp.ext_cmd_line_ptr = (uint32_t)(LAYOUT_CMDLINE >> 32);
	bp.hdr.ramdisk_image = (uint32_t)r->initrd_addr;
	bp.hdr.ramdisk_size = (uint32_t)r->initrd_size;
	bp.ext_ramdisk_image = (uint32_t)(r->initrd_addr >> 32);
	bp.ext_ramdisk_size = (uint32_t)(r->initrd_size >> 32);
	bp.hdr.hardware_subarch = 0; /* X86_SUBARCH_PC */
	bp.acpi_rsdp_addr = c->rsdp; /* protocol 2.14; older kernels scan for it */
	bp.e820_entries = (uint8_t)boot_fill_e820(m, &bp);
	r->zero_page = LAYOUT_ZERO_PAGE;
	guest_mem_write(m, LAYOUT_ZERO_PAGE, &bp, sizeof(bp));
	if (r->path == BOOT_PATH_PVH) {
		boot_write_pvh_info(m, &bp, r, c->rsdp);
		r->start_info = LAYOUT_PVH_INFO;
	}
	boot_write_cpu_tables(m);
	return 0;
}

void boot_write_cpu_tables(struct guest_mem *m)
{
	/* GDT: null, null, __BOOT_CS 64-bit code, __BOOT_DS data, a TSS (two
	 * slots in long mode), 32-bit code for the PVH entry. */
	const uint64_t gdt[BOOT_GDT_ENTRIES] = {
	    0,
	    0,
	    0x00AF9B000000FFFFULL,
	    0x00CF93000000FFFFULL,
	    0x0000890000000067ULL,
	    0,
	    0x00CF9B000000FFFFULL,
	};
	uint64_t entry;
	guest_mem_write(m, LAYOUT_GDT, gdt, sizeof(gdt));
	/* Identity map 0-4 GiB with 2 MiB pages: covers kernel, zero page,
	 * command line and initrd wherever they were put (boot.rst). */
	entry = LAYOUT_PDPT | 0x3;
	guest_mem_write(m, LAYOUT_PML4, &entry, 8);
	for (uint64_t i = 0; i < 4; i++) {
		entry = (LAYOUT_PD + i * 0x1000) | 0x3;
		guest_mem_write(m, LAYOUT_PDPT + i * 8, &entry, 8);
	}
	for (uint64_t i = 0; i < 4 * 512; i++) {
		entry = (i << 21) | 0x83; /* present, writable, 2 MiB */
		guest_mem_write(m, LAYOUT_PD + i * 8, &entry, 8);
	}
	/* BDA: EBDA segment and base memory size, where MP-table scans look. */
	uint16_t ebda_seg = (uint16_t)(LAYOUT_EBDA >> 4), base_kib = (uint16_t)(LAYOUT_EBDA >> 10);
	guest_mem_write(m, LAYOUT_BDA_EBDA_SEG, &ebda_seg, 2);
	guest_mem_write(m, LAYOUT_BDA_BASE_KIB, &base_kib, 2);
}
