/*
 * A disk backend (devices/backends/disk.h) in memory, for driving
 * virtio-blk's request parser without a file or a ring: the unit tests and
 * tests/fuzz/fuzz_blk.c. It moves the bytes when a request is prepared and
 * completes it at submit, or, with `hold`, when the test releases it; it
 * fails a request, or refuses one, on demand. It aborts on what the parser
 * must never ask for: I/O past the end of the disk, a write to a read-only
 * disk, an unaligned buffer on a direct disk, a wait with nothing in flight.
 */
#ifndef TESTS_UNIT_DISK_FAKE_H
#define TESTS_UNIT_DISK_FAKE_H

#include "devices/backends/disk.h"

struct disk_fake {
	struct disk disk; /* first; virtio_blk_init takes it */
	uint8_t *data;	  /* disk.bytes of it */
	bool hold;	  /* completions wait for disk_fake_release */
	bool fail_next;	  /* the next request completes with fail_res... */
	int64_t fail_res; /* ...(-errno, or a short count) instead */
	bool refuse_next; /* the next request finds no room */
	bool last_dsync;  /* what the last write asked for */
	unsigned reads, writes, flushes;
};

/* `bytes` of zeroes (at least 512); id "fake-disk". */
struct disk_fake *disk_fake_new(uint64_t bytes, bool readonly, bool direct);
/* Completes up to n held requests of q, oldest first; how many. */
unsigned disk_fake_release(struct disk_queue *q, unsigned n);
/* Requests of q submitted and not yet reaped. */
unsigned disk_fake_pending(const struct disk_queue *q);

#endif
