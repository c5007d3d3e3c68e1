/*
 * A bump allocator over a block of guest RAM for buffers a device reads
 * and writes (virtqueue rings, request buffers). The block is chosen from
 * the e820 map (boot.rst, zero-page.rst) above the kit's image, clear of
 * the initrd and the command line, below 3 GiB (the kit maps 3..4 GiB
 * uncached for MMIO), 2 MiB aligned. Identity-mapped, so a pointer is its
 * guest-physical address. Nothing is ever freed.
 *
 * Zeroing happens in ram_pool_init and ram_alloc, so call them at CPL 3
 * (native speed on our hosts), not at the emulated CPL 0.
 */
#ifndef GUEST_RAM_H
#define GUEST_RAM_H

#include <stdbool.h>
#include <stdint.h>

struct boot_params;

/* Whether one usable (type 1) e820 entry of the zero page covers [base,
 * base + size). */
bool ram_e820_covers(const struct boot_params *bp, uint64_t base, uint64_t size);

bool ram_pool_init(const struct boot_params *bp, uint64_t size, const char **why);
/* `size` bytes aligned to `align` (a power of two), zeroed; NULL when the
 * pool is used up. */
void *ram_alloc(uint64_t size, uint64_t align);
uint64_t ram_pool_base(void);
uint64_t ram_pool_used(void);

#endif
