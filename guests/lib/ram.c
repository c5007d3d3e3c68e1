/*
 * RAM pool for device-visible buffers (see guest/ram.h).
 */
#include "guest/ram.h"

#include "guest/kit.h"

#define MIB	   (1024ull * 1024ull)
#define POOL_ALIGN (2 * MIB)
#define CACHED_END (3ull << 30) /* the kit maps 3..4 GiB uncached */

extern char __guest_end[];

static uint64_t pool_base, pool_size, pool_used;

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

static bool overlaps(uint64_t a, uint64_t as, uint64_t b, uint64_t bs)
{
	return as && bs && a < b + bs && b < a + as;
}

bool ram_e820_covers(const struct boot_params *bp, uint64_t base, uint64_t size)
{
	for (unsigned i = 0; i < bp->e820_entries && i < E820_MAX_ENTRIES_ZEROPAGE; i++) {
		const struct boot_e820_entry *e = &bp->e820_table[i];
		if (e->type == E820_TYPE_RAM && base >= e->addr && base + size <= e->addr + e->size)
			return true;
	}
	return false;
}

bool ram_pool_init(const struct boot_params *bp, uint64_t size, const char **why)
{
	uint64_t initrd = bp->hdr.ramdisk_image | (uint64_t)bp->ext_ramdisk_image << 32;
	uint64_t initrd_size = bp->hdr.ramdisk_size | (uint64_t)bp->ext_ramdisk_size << 32;
	uint64_t cmdline = bp->hdr.cmd_line_ptr | (uint64_t)bp->ext_cmd_line_ptr << 32;
	uint64_t bp_addr = (uint64_t)bp;
	/* Candidates: above the image (at least 4 MiB), then above the initrd. */
	uint64_t cand[2] = {
	    align_up((uint64_t)__guest_end > 4 * MIB ? (uint64_t)__guest_end : 4 * MIB, POOL_ALIGN),
	    align_up(initrd + initrd_size, POOL_ALIGN)};

	size = align_up(size, 4096);
	for (unsigned i = 0; i < 2; i++) {
		uint64_t b = cand[i];
		if (b + size > CACHED_END || !ram_e820_covers(bp, b, size) ||
		    overlaps(b, size, initrd, initrd_size) ||
		    overlaps(b, size, cmdline, (uint64_t)bp->hdr.cmdline_size + 1) ||
		    overlaps(b, size, bp_addr, sizeof(*bp)))
			continue;
		pool_base = b;
		pool_size = size;
		pool_used = 0;
		memset((void *)b, 0, size);
		*why = NULL;
		return true;
	}
	*why = "no e820 RAM block of that size above the image, clear of the initrd and "
	       "command line, below 3 GiB";
	return false;
}

void *ram_alloc(uint64_t size, uint64_t align)
{
	uint64_t off = align_up(pool_used, align ? align : 1);

	if (!pool_base || off + size > pool_size)
		return NULL;
	pool_used = off + size;
	void *p = (void *)(pool_base + off);
	memset(p, 0, size);
	return p;
}

uint64_t ram_pool_base(void)
{
	return pool_base;
}

uint64_t ram_pool_used(void)
{
	return pool_used;
}
