/*
 * Port-I/O and MMIO buses. Devices register address ranges with callbacks;
 * overlapping registrations are refused. An access nobody claims reads as
 * all-ones and its writes are dropped (logged once per address, debug).
 *
 * A callback runs outside the bus lock, on a copy of its range taken under
 * it (a config write that moves a BAR re-registers ranges from inside a bus
 * access, which would otherwise deadlock). That is safe without reference
 * counts (kvmtool's mmio_get/put) because no device goes away while the
 * machine runs: ranges are unregistered only when a BAR moves, and a BAR's
 * owner outlives every vCPU; a stale copy only finishes an access already
 * under way. Count references here the day devices can be unplugged.
 */
#ifndef VMM_BUS_H
#define VMM_BUS_H

#include "vmm/base/lock.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct log;

/* `offset` is relative to the registered base; len is 1, 2, 4 or 8. */
typedef void (*bus_read_fn)(void *opaque, uint64_t offset, void *data, unsigned len);
typedef void (*bus_write_fn)(void *opaque, uint64_t offset, const void *data, unsigned len);

/* A read handler for registers that read as zero (write-only ports). */
void bus_read_zeros(void *opaque, uint64_t offset, void *data, unsigned len);

struct bus_range {
	uint64_t base, len;
	bus_read_fn read;
	bus_write_fn write;
	void *opaque;
};

#define BUS_UNCLAIMED_LOG_MAX 64

struct bus {
	const char *name; /* "pio" or "mmio", for messages */
	struct vmm_rwlock lock;
	struct bus_range *ranges; /* sorted by base, disjoint */
	unsigned nranges, cap;
	struct log *log;
	struct vmm_lock unclaimed_lock;
	uint64_t unclaimed_seen[BUS_UNCLAIMED_LOG_MAX];
	unsigned nunclaimed;
};

void bus_init(struct bus *b, const char *name, struct log *log);
void bus_destroy(struct bus *b);
/* 0, -EEXIST if [base, base+len) overlaps a registered range, -EINVAL for
 * an empty or wrapping range, -ENOMEM. */
int bus_register(struct bus *b, uint64_t base, uint64_t len, bus_read_fn read, bus_write_fn write,
		 void *opaque);
/* Removes the range registered at exactly `base` with this opaque; -ENOENT. */
int bus_unregister(struct bus *b, uint64_t base, void *opaque);
/* Dispatch; returns true when a device claimed the access. */
bool bus_read(struct bus *b, uint64_t addr, void *data, unsigned len);
bool bus_write(struct bus *b, uint64_t addr, const void *data, unsigned len);

#endif
