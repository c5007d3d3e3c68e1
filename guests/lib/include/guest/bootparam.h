/*
 * The x86 boot protocol structures, as a loader hands them to a kernel.
 *
 * Layout from Linux arch/x86/include/uapi/asm/bootparam.h and
 * Documentation/arch/x86/boot.rst ("THE REAL-MODE KERNEL HEADER" and
 * zero-page.rst). Written out here rather than included because guests are
 * freestanding, and the offsets are pinned with static asserts because every
 * field is read by absolute offset on the other side (the VMM, mkbzimage).
 *
 * This header is also used by the host tool mkbzimage, so it needs nothing
 * but <stdint.h> and <stddef.h>.
 */
#ifndef GUEST_BOOTPARAM_H
#define GUEST_BOOTPARAM_H

#include <stddef.h>
#include <stdint.h>

/* boot.rst "Details of header fields". */
#define BOOT_FLAG_MAGIC		   0xAA55
#define SETUP_HDRS_MAGIC	   0x53726448u /* "HdrS" read as a little-endian u32 */
#define LOADFLAG_LOADED_HIGH	   0x01
#define LOADFLAG_KEEP_SEGMENTS	   0x40
#define LOADFLAG_CAN_USE_HEAP	   0x80
#define XLF_KERNEL_64		   (1u << 0)
#define XLF_CAN_BE_LOADED_ABOVE_4G (1u << 1)
#define LOADER_TYPE_UNDEFINED	   0xFF

/* boot.rst "64-bit BOOT PROTOCOL": the 64-bit entry is at +0x200. */
#define BOOT_ENTRY64_OFFSET 0x200

/* e820 types (ACPI address range types as Linux uses them). */
#define E820_TYPE_RAM	   1
#define E820_TYPE_RESERVED 2

#define E820_MAX_ENTRIES_ZEROPAGE 128

struct setup_header {
	uint8_t setup_sects;		/* 0x1f1 */
	uint16_t root_flags;		/* 0x1f2 */
	uint32_t syssize;		/* 0x1f4 */
	uint16_t ram_size;		/* 0x1f8 */
	uint16_t vid_mode;		/* 0x1fa */
	uint16_t root_dev;		/* 0x1fc */
	uint16_t boot_flag;		/* 0x1fe */
	uint16_t jump;			/* 0x200 */
	uint32_t header;		/* 0x202 */
	uint16_t version;		/* 0x206 */
	uint32_t realmode_swtch;	/* 0x208 */
	uint16_t start_sys_seg;		/* 0x20c */
	uint16_t kernel_version;	/* 0x20e */
	uint8_t type_of_loader;		/* 0x210 */
	uint8_t loadflags;		/* 0x211 */
	uint16_t setup_move_size;	/* 0x212 */
	uint32_t code32_start;		/* 0x214 */
	uint32_t ramdisk_image;		/* 0x218 */
	uint32_t ramdisk_size;		/* 0x21c */
	uint32_t bootsect_kludge;	/* 0x220 */
	uint16_t heap_end_ptr;		/* 0x224 */
	uint8_t ext_loader_ver;		/* 0x226 */
	uint8_t ext_loader_type;	/* 0x227 */
	uint32_t cmd_line_ptr;		/* 0x228 */
	uint32_t initrd_addr_max;	/* 0x22c */
	uint32_t kernel_alignment;	/* 0x230 */
	uint8_t relocatable_kernel;	/* 0x234 */
	uint8_t min_alignment;		/* 0x235 */
	uint16_t xloadflags;		/* 0x236 */
	uint32_t cmdline_size;		/* 0x238 */
	uint32_t hardware_subarch;	/* 0x23c */
	uint64_t hardware_subarch_data; /* 0x240 */
	uint32_t payload_offset;	/* 0x248 */
	uint32_t payload_length;	/* 0x24c */
	uint64_t setup_data;		/* 0x250 */
	uint64_t pref_address;		/* 0x258 */
	uint32_t init_size;		/* 0x260 */
	uint32_t handover_offset;	/* 0x264 */
	uint32_t kernel_info_offset;	/* 0x268 */
} __attribute__((packed));

struct boot_e820_entry {
	uint64_t addr;
	uint64_t size;
	uint32_t type;
} __attribute__((packed));

/* The "zero page" (boot.rst, zero-page.rst). Fields this kit never reads are
 * kept as opaque byte arrays of the right size. */
struct boot_params {
	uint8_t screen_info[0x40];	 /* 0x000 */
	uint8_t apm_bios_info[0x14];	 /* 0x040 */
	uint8_t _pad2[4];		 /* 0x054 */
	uint64_t tboot_addr;		 /* 0x058 */
	uint8_t ist_info[0x10];		 /* 0x060 */
	uint64_t acpi_rsdp_addr;	 /* 0x070 */
	uint8_t _pad3[8];		 /* 0x078 */
	uint8_t hd0_info[16];		 /* 0x080 */
	uint8_t hd1_info[16];		 /* 0x090 */
	uint8_t sys_desc_table[0x10];	 /* 0x0a0 */
	uint8_t olpc_ofw_header[0x10];	 /* 0x0b0 */
	uint32_t ext_ramdisk_image;	 /* 0x0c0 */
	uint32_t ext_ramdisk_size;	 /* 0x0c4 */
	uint32_t ext_cmd_line_ptr;	 /* 0x0c8 */
	uint8_t _pad4[112];		 /* 0x0cc */
	uint32_t cc_blob_address;	 /* 0x13c */
	uint8_t edid_info[0x80];	 /* 0x140 */
	uint8_t efi_info[0x20];		 /* 0x1c0 */
	uint32_t alt_mem_k;		 /* 0x1e0 */
	uint32_t scratch;		 /* 0x1e4 */
	uint8_t e820_entries;		 /* 0x1e8 */
	uint8_t eddbuf_entries;		 /* 0x1e9 */
	uint8_t edd_mbr_sig_buf_entries; /* 0x1ea */
	uint8_t kbd_status;		 /* 0x1eb */
	uint8_t secure_boot;		 /* 0x1ec */
	uint8_t _pad5[2];		 /* 0x1ed */
	uint8_t sentinel;		 /* 0x1ef */
	uint8_t _pad6[1];		 /* 0x1f0 */
	struct setup_header hdr;	 /* 0x1f1 */
	uint8_t _pad7[0x290 - 0x1f1 - sizeof(struct setup_header)];
	uint32_t edd_mbr_sig_buffer[16];			      /* 0x290 */
	struct boot_e820_entry e820_table[E820_MAX_ENTRIES_ZEROPAGE]; /* 0x2d0 */
	uint8_t _pad8[48];					      /* 0xcd0 */
	uint8_t eddbuf[6 * 82]; /* 0xd00: EDDMAXNR edd_info entries */
	uint8_t _pad9[276];	/* 0xeec */
} __attribute__((packed));

#define BP_ASSERT_OFFSET(type, field, off)                                                         \
	_Static_assert(offsetof(type, field) == (off), #field " at " #off)
/* setup_header offsets are given as boot.rst gives them: from the start of
 * the image / zero page, which puts the header at 0x1f1. */
#define HDR_ASSERT_OFFSET(field, off) BP_ASSERT_OFFSET(struct setup_header, field, (off)-0x1f1)

HDR_ASSERT_OFFSET(boot_flag, 0x1fe);
HDR_ASSERT_OFFSET(jump, 0x200);
HDR_ASSERT_OFFSET(header, 0x202);
HDR_ASSERT_OFFSET(version, 0x206);
HDR_ASSERT_OFFSET(type_of_loader, 0x210);
HDR_ASSERT_OFFSET(loadflags, 0x211);
HDR_ASSERT_OFFSET(code32_start, 0x214);
HDR_ASSERT_OFFSET(ramdisk_image, 0x218);
HDR_ASSERT_OFFSET(ramdisk_size, 0x21c);
HDR_ASSERT_OFFSET(cmd_line_ptr, 0x228);
HDR_ASSERT_OFFSET(initrd_addr_max, 0x22c);
HDR_ASSERT_OFFSET(kernel_alignment, 0x230);
HDR_ASSERT_OFFSET(relocatable_kernel, 0x234);
HDR_ASSERT_OFFSET(xloadflags, 0x236);
HDR_ASSERT_OFFSET(cmdline_size, 0x238);
HDR_ASSERT_OFFSET(payload_offset, 0x248);
HDR_ASSERT_OFFSET(payload_length, 0x24c);
HDR_ASSERT_OFFSET(setup_data, 0x250);
HDR_ASSERT_OFFSET(pref_address, 0x258);
HDR_ASSERT_OFFSET(init_size, 0x260);
HDR_ASSERT_OFFSET(handover_offset, 0x264);
HDR_ASSERT_OFFSET(kernel_info_offset, 0x268);
_Static_assert(sizeof(struct setup_header) == 0x26c - 0x1f1, "setup_header size");

_Static_assert(sizeof(struct boot_e820_entry) == 20, "e820 entry size");
BP_ASSERT_OFFSET(struct boot_params, acpi_rsdp_addr, 0x070);
BP_ASSERT_OFFSET(struct boot_params, ext_ramdisk_image, 0x0c0);
BP_ASSERT_OFFSET(struct boot_params, ext_ramdisk_size, 0x0c4);
BP_ASSERT_OFFSET(struct boot_params, ext_cmd_line_ptr, 0x0c8);
BP_ASSERT_OFFSET(struct boot_params, cc_blob_address, 0x13c);
BP_ASSERT_OFFSET(struct boot_params, alt_mem_k, 0x1e0);
BP_ASSERT_OFFSET(struct boot_params, e820_entries, 0x1e8);
BP_ASSERT_OFFSET(struct boot_params, sentinel, 0x1ef);
BP_ASSERT_OFFSET(struct boot_params, hdr, 0x1f1);
BP_ASSERT_OFFSET(struct boot_params, edd_mbr_sig_buffer, 0x290);
BP_ASSERT_OFFSET(struct boot_params, e820_table, 0x2d0);
BP_ASSERT_OFFSET(struct boot_params, eddbuf, 0xd00);
_Static_assert(sizeof(struct boot_params) == 0x1000, "boot_params is one page");

#endif
