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
	/* A memfd that `base` maps whole from offset 0 (MAP_SHARED), so that
	 * another process (a vhost-user backend) can map guest RAM; -1 when
	 * RAM is private anonymous memory. Owned with base. */
	int fd;
};

/* Where one RAM region lies: what a vhost-user SET_MEM_TABLE entry needs. */
struct guest_mem_share {
	uint64_t gpa;
	uint64_t size;
	uint64_t host;	 /* the VMM's address of gpa */
	uint64_t offset; /* of gpa in fd */
	int fd;
};

/* Maps `ram_size` bytes of RAM and lays it out below the hole and above
 * 4 GiB. `shared` (a vhost-user device will map it): a memfd ("guest-ram")
 * mapped shared, so that it can be handed to another process; else, or
 * where memfd_create is refused, private anonymous memory (fd -1), which
 * only in-process devices can use. Private is the default because
 * transparent huge pages back shmem only where shmem_enabled allows it
 * (often "never"), and anonymous memory wherever MADV_HUGEPAGE is honoured. */
int guest_mem_create(struct guest_mem *m, uint64_t ram_size, bool shared, struct err *e);
/* Same layout over caller-provided memory (unit tests, fake guests). */
void guest_mem_init_with(struct guest_mem *m, void *host, uint64_t ram_size);
void guest_mem_destroy(struct guest_mem *m);

/* Host pointer for [gpa, gpa+len), or NULL unless wholly inside RAM. */
void *guest_mem_ptr(const struct guest_mem *m, uint64_t gpa, uint64_t len);
bool guest_mem_is_ram(const struct guest_mem *m, uint64_t gpa, uint64_t len);
int guest_mem_read(const struct guest_mem *m, uint64_t gpa, void *buf, uint64_t len);
int guest_mem_write(const struct guest_mem *m, uint64_t gpa, const void *buf, uint64_t len);
/* Fills out[0..nregions-1] (up to `max`) with the RAM regions and the
 * memfd behind them; how many, or 0 when RAM cannot be shared (no fd). */
int guest_mem_share(const struct guest_mem *m, struct guest_mem_share *out, int max);
/* Highest RAM address below the MMIO hole, +1. */
uint64_t guest_mem_low_end(const struct guest_mem *m);

#endif
