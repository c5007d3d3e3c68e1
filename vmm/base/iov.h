/*
 * Scatter lists (struct iovec) as the virtio devices see a guest buffer:
 * copies between a list and a flat buffer, and the sub-list covering a
 * byte range. Every address in a list was checked by the guest-memory
 * translation before it got here; these only walk lengths.
 */
#ifndef VMM_BASE_IOV_H
#define VMM_BASE_IOV_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

/* Copies between bytes [skip, skip+len) of an iovec list and a flat buffer;
 * returns the bytes copied (less when the list is shorter). */
uint64_t iov_to_buf(const struct iovec *iov, unsigned n, uint64_t skip, void *buf, uint64_t len);
uint64_t buf_to_iov(const struct iovec *iov, unsigned n, uint64_t skip, const void *buf,
		    uint64_t len);
/* The pieces of src covering [skip, skip+len) into dst (at most max);
 * returns how many. */
unsigned iov_slice(const struct iovec *src, unsigned n, uint64_t skip, uint64_t len,
		   struct iovec *dst, unsigned max);
/* Whether every base and length is a multiple of `align` (a power of 2). */
bool iov_aligned(const struct iovec *iov, unsigned n, uintptr_t align);

#endif
