/*
 * Guest RAM and the one bounds-checked guest-physical translation every
 * device uses. It fails closed: an (address, length) that is not wholly
 * inside one RAM region yields NULL, never a partial or wrapped pointer.
 */
#ifndef VMM_GUEST_MEM_H
#define VMM_GUEST_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct err;

/* The 32-bit PCI/MMIO hole: RAM stops here and resumes at 4 GiB. */
#define GUEST_MMIO_HOLE_START 0xC0000000ULL
#define GUEST_4G	      0x100000000ULL

#define GUEST_MEM_MAX_REGIONS 2

struct guest_region {
	uint64_t gpa;
	uint64_t size;
	uint8_t *host;
};

struct guest_mem {
	struct guest_region regions[GUEST_MEM_MAX_REGIONS];
	int nregions;
	uint64_t ram_size; /* total bytes of RAM */
	uint8_t *base;	   /* host mapping of all RAM, contiguous */
	bool owned;	   /* base was mmap()ed by guest_mem_create */
};

/* Maps `ram_size` bytes of anonymous memory and lays it out below the hole
 * and above 4 GiB. */
int guest_mem_create(struct guest_mem *m, uint64_t ram_size, struct err *e);
/* Same layout over caller-provided memory (unit tests, fake guests). */
void guest_mem_init_with(struct guest_mem *m, void *host, uint64_t ram_size);
void guest_mem_destroy(struct guest_mem *m);

/* Host pointer for [gpa, gpa+len), or NULL unless wholly inside RAM. */
void *guest_mem_ptr(const struct guest_mem *m, uint64_t gpa, uint64_t len);
bool guest_mem_is_ram(const struct guest_mem *m, uint64_t gpa, uint64_t len);
int guest_mem_read(const struct guest_mem *m, uint64_t gpa, void *buf, uint64_t len);
int guest_mem_write(const struct guest_mem *m, uint64_t gpa, const void *buf, uint64_t len);
/* Highest RAM address below the MMIO hole, +1. */
uint64_t guest_mem_low_end(const struct guest_mem *m);

#endif
