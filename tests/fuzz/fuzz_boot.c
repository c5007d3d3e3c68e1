/*
 * libFuzzer target: the input is a kernel image (bzImage, or bare ELF64
 * vmlinux) loaded with boot_load() into 64 MiB of fake guest RAM with a
 * fixed command line. Errors are fine; a crash, hang, or any access outside
 * RAM (guard pages) or outside heap objects (ASan) is a bug.
 *
 * Built with -DFUZZ_BZHDR the target forces the bzImage magics (boot flag
 * 0xAA55, "HdrS", protocol >= 2.12, XLF_KERNEL_64) into the input so the
 * fuzzer spends its time on the header fields and the payload rather than
 * on rediscovering the magic.
 */
#include "fuzz_common.h"

#include "vmm/base/err.h"
#include "vmm/boot/boot.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RAM_SIZE (64ULL << 20)

FUZZ_GUEST_RAM(ram, RAM_SIZE)
static const char cmdline[] = "console=ttyS0 earlyprintk=serial panic=-1 reboot=t quiet";
static const uint8_t initrd[] = "070701 fake initrd bytes";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *kernel = data;
	uint8_t *copy = NULL;
	bool guest_decompress = false, with_initrd = false;

#ifdef FUZZ_BZHDR
	/* First byte: options; the rest is the image with its magics forced. */
	if (size < 1)
		return 0;
	guest_decompress = data[0] & 1;
	with_initrd = data[0] & 2;
	data++;
	size--;
	size_t n = size < 0x300 ? 0x300 : size;
	copy = calloc(1, n); /* exactly sized: ASan sees over-reads */
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	copy[0x1FE] = 0x55;
	copy[0x1FF] = 0xAA;
	memcpy(copy + 0x202, "HdrS", 4);
	uint16_t ver = (uint16_t)(copy[0x206] | copy[0x207] << 8);
	if (ver < BOOT_MIN_PROTOCOL)
		ver = (uint16_t)(BOOT_MIN_PROTOCOL + (ver & 3));
	copy[0x206] = (uint8_t)ver;
	copy[0x207] = (uint8_t)(ver >> 8);
	copy[0x211] |= 0x01; /* LOADED_HIGH */
	copy[0x236] |= 0x01; /* XLF_KERNEL_64 */
	kernel = copy;
	size = n;
#else
	/* Raw image: a bit of the length picks the entry path, so both are hit. */
	copy = malloc(size ? size : 1); /* exactly sized, unlike libFuzzer's buffer */
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	kernel = copy;
	guest_decompress = size & 1;
	with_initrd = size & 2;
#endif

	struct boot_config c = {
	    .kernel = kernel,
	    .kernel_len = size,
	    .initrd = with_initrd ? initrd : NULL,
	    .initrd_len = with_initrd ? sizeof(initrd) : 0,
	    .cmdline = cmdline,
	    .guest_decompress = guest_decompress,
	};
	struct boot_result r;
	struct err e;
	memset(&r, 0, sizeof(r));
	memset(&e, 0, sizeof(e));
	if (boot_load(&ram.m, &c, &r, &e) == 0) {
		/* What a loaded image is given next (vmm/machine/build.c): a DTB in setup_data. */
		boot_add_setup_data(&ram.m, r.zero_page, 2 /* SETUP_DTB */, "dtb!", 4, &e);
	}
	free(copy);
	fuzz_ram_reset(&ram);
	return 0;
}
