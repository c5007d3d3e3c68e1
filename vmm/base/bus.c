#include "vmm/base/bus.h"

#include "vmm/base/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void bus_init(struct bus *b, const char *name, struct log *log)
{
	memset(b, 0, sizeof(*b));
	b->name = name;
	b->log = log;
	rwlock_init(&b->lock, "bus ranges", LOCK_RANK_BUS);
	lock_init(&b->unclaimed_lock, "bus unclaimed counter", LOCK_RANK_BUS_UNCLAIMED);
}

void bus_destroy(struct bus *b)
{
	free(b->ranges);
	rwlock_destroy(&b->lock);
	lock_destroy(&b->unclaimed_lock);
	b->ranges = NULL;
	b->nranges = b->cap = 0;
}

/* Index of the first range whose end is above addr (binary search). */
static unsigned bus_lower_bound(const struct bus *b, uint64_t addr)
{
	unsigned lo = 0, hi = b->nranges;
	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		const struct bus_range *r = &b->ranges[mid];
		if (r->base + (r->len - 1) < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int bus_register(struct bus *b, uint64_t base, uint64_t len, bus_read_fn read, bus_write_fn write,
		 void *opaque)
{
	int ret = 0;
	if (len == 0 || base + (len - 1) < base)
		return -EINVAL;
	rwlock_write(&b->lock);
	unsigned i = bus_lower_bound(b, base);
	if (i < b->nranges && b->ranges[i].base <= base + (len - 1)) {
		ret = -EEXIST;
		goto out;
	}
	if (b->nranges == b->cap) {
		unsigned cap = b->cap ? b->cap * 2 : 16;
		struct bus_range *n = realloc(b->ranges, cap * sizeof(*n));
		if (!n) {
			ret = -ENOMEM;
			goto out;
		}
		b->ranges = n;
		b->cap = cap;
	}
	memmove(&b->ranges[i + 1], &b->ranges[i], (b->nranges - i) * sizeof(b->ranges[0]));
	b->ranges[i] = (struct bus_range){base, len, read, write, opaque};
	b->nranges++;
out:
	rwlock_release(&b->lock);
	return ret;
}

int bus_unregister(struct bus *b, uint64_t base, void *opaque)
{
	int ret = -ENOENT;
	rwlock_write(&b->lock);
	unsigned i = bus_lower_bound(b, base);
	if (i < b->nranges && b->ranges[i].base == base && b->ranges[i].opaque == opaque) {
		memmove(&b->ranges[i], &b->ranges[i + 1],
			(b->nranges - i - 1) * sizeof(b->ranges[0]));
		b->nranges--;
		ret = 0;
	}
	rwlock_release(&b->lock);
	return ret;
}

static void bus_note_unclaimed(struct bus *b, uint64_t addr, unsigned len, bool write)
{
	bool first = true;
	lock_take(&b->unclaimed_lock);
	for (unsigned i = 0; i < b->nunclaimed; i++)
		if (b->unclaimed_seen[i] == addr)
			first = false;
	if (first && b->nunclaimed < BUS_UNCLAIMED_LOG_MAX)
		b->unclaimed_seen[b->nunclaimed++] = addr;
	else
		first = false;
	lock_release(&b->unclaimed_lock);
	if (first)
		log_debug(b->log, "%s: unclaimed %u-byte %s at 0x%llx (logged once per address)",
			  b->name, len, write ? "write" : "read", (unsigned long long)addr);
}

/* Finds the range wholly containing [addr, addr+len); caller holds lock. */
static const struct bus_range *bus_find(const struct bus *b, uint64_t addr, unsigned len)
{
	unsigned i = bus_lower_bound(b, addr);
	if (i >= b->nranges)
		return NULL;
	const struct bus_range *r = &b->ranges[i];
	if (addr < r->base || addr - r->base > r->len - len || len > r->len)
		return NULL;
	return r;
}

/*
 * The callback runs after the lock is dropped: a device may then map or
 * unmap ranges (a PCI BAR move from a config write) without deadlock.
 * Devices live as long as the machine, so a range unmapped meanwhile only
 * lets an access that had already started finish at the old address.
 */
static bool bus_lookup(struct bus *b, uint64_t addr, unsigned len, struct bus_range *out)
{
	rwlock_read(&b->lock);
	const struct bus_range *r = bus_find(b, addr, len);
	if (r)
		*out = *r;
	rwlock_release(&b->lock);
	return r != NULL;
}

bool bus_read(struct bus *b, uint64_t addr, void *data, unsigned len)
{
	struct bus_range r;
	if (!bus_lookup(b, addr, len, &r)) {
		memset(data, 0xff, len);
		bus_note_unclaimed(b, addr, len, false);
		return false;
	}
	if (r.read)
		r.read(r.opaque, addr - r.base, data, len);
	else
		memset(data, 0xff, len);
	return true;
}

bool bus_write(struct bus *b, uint64_t addr, const void *data, unsigned len)
{
	struct bus_range r;
	if (!bus_lookup(b, addr, len, &r)) {
		bus_note_unclaimed(b, addr, len, true);
		return false;
	}
	if (r.write)
		r.write(r.opaque, addr - r.base, data, len);
	return true;
}

void bus_read_zeros(void *opaque, uint64_t offset, void *data, unsigned len)
{
	(void)opaque;
	(void)offset;
	memset(data, 0, len);
}
