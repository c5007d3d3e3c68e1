#include "vmm/base/iov.h"

#include <string.h>

/* Walks the pieces of a list that cover a byte range, one at a time. */
struct iov_cursor {
	const struct iovec *iov;
	unsigned n, i;
	uint64_t skip, left;
};

static bool iov_next(struct iov_cursor *c, struct iovec *piece)
{
	for (; c->i < c->n && c->left; c->i++) {
		const struct iovec *v = &c->iov[c->i];
		if (c->skip >= v->iov_len) {
			c->skip -= v->iov_len;
			continue;
		}
		uint64_t chunk = v->iov_len - c->skip;
		if (chunk > c->left)
			chunk = c->left;
		*piece = (struct iovec){(uint8_t *)v->iov_base + c->skip, chunk};
		c->left -= chunk;
		c->skip = 0;
		c->i++;
		return true;
	}
	return false;
}

static uint64_t iov_copy(const struct iovec *iov, unsigned n, uint64_t skip, void *buf,
			 uint64_t len, bool to_iov)
{
	struct iov_cursor c = {iov, n, 0, skip, len};
	struct iovec p;
	uint64_t done = 0;
	while (iov_next(&c, &p)) {
		uint8_t *flat = (uint8_t *)buf + done;
		if (to_iov)
			memcpy(p.iov_base, flat, p.iov_len);
		else
			memcpy(flat, p.iov_base, p.iov_len);
		done += p.iov_len;
	}
	return done;
}

uint64_t iov_to_buf(const struct iovec *iov, unsigned n, uint64_t skip, void *buf, uint64_t len)
{
	return iov_copy(iov, n, skip, buf, len, false);
}

uint64_t buf_to_iov(const struct iovec *iov, unsigned n, uint64_t skip, const void *buf,
		    uint64_t len)
{
	return iov_copy(iov, n, skip, (void *)buf, len, true);
}

unsigned iov_slice(const struct iovec *src, unsigned n, uint64_t skip, uint64_t len,
		   struct iovec *dst, unsigned max)
{
	struct iov_cursor c = {src, n, 0, skip, len};
	unsigned out = 0;
	while (out < max && iov_next(&c, &dst[out]))
		out++;
	return out;
}

bool iov_aligned(const struct iovec *iov, unsigned n, uintptr_t align)
{
	for (unsigned i = 0; i < n; i++)
		if (((uintptr_t)iov[i].iov_base | iov[i].iov_len) & (align - 1))
			return false;
	return true;
}
