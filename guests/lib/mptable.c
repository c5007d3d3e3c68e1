/*
 * MP table reader (Intel MultiProcessor Specification 1.4, chapter 4). See
 * guest/mptable.h. Plain memory reads, so it runs at any CPL.
 */
#include "guest/mptable.h"
#include "guest/kit.h"

uint8_t mp_checksum(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint8_t sum = 0;
	while (n--)
		sum = (uint8_t)(sum + *b++);
	return sum;
}

/* 4.1: the pointer sits on a 16-byte boundary; its length and checksum
 * tell it from a stray "_MP_" in memory. */
static const struct mp_floating *mp_scan(uint64_t base, uint64_t len, uint64_t *first_sig)
{
	for (uint64_t a = base; a + 16 <= base + len; a += 16) {
		const struct mp_floating *mpf = (const struct mp_floating *)a;
		if (memcmp(mpf->signature, "_MP_", 4))
			continue;
		if (!*first_sig)
			*first_sig = a;
		if (mpf->length == 1 && mp_checksum(mpf, 16) == 0)
			return mpf;
	}
	return NULL;
}

const struct mp_floating *mp_search_floating(struct mp_search *s)
{
	/* BIOS data area: word 0x40e = EBDA segment, word 0x413 = base memory
	 * in KiB (read through mmio_read16 so gcc sees no null-page access). */
	const struct mp_floating *mpf = NULL;

	s->ebda = (uint64_t)mmio_read16(0x40E) << 4;
	s->base_kib = mmio_read16(0x413);
	s->first_sig = 0;
	s->where = NULL;
	if (s->ebda && (mpf = mp_scan(s->ebda, 1024, &s->first_sig)))
		s->where = "the EBDA";
	else if (s->base_kib >= 1 && s->base_kib <= 640 &&
		 (mpf = mp_scan((s->base_kib - 1) * 1024, 1024, &s->first_sig)))
		s->where = "the last KiB of base memory";
	else if ((mpf = mp_scan(0xF0000, 0x10000, &s->first_sig)))
		s->where = "the BIOS ROM area";
	return mpf;
}

const struct mp_floating *mp_find_floating(void)
{
	struct mp_search s;
	return mp_search_floating(&s);
}

const struct mp_config *mp_config_table(const struct mp_floating *mpf, const char **why)
{
	/* 4.1: a non-zero feature byte 1 selects a default configuration
	 * (chapter 5) instead of a table. */
	if (mpf->feature1 != 0 || mpf->physptr == 0) {
		*why = "the floating pointer names a default configuration, not a table";
		return NULL;
	}
	const struct mp_config *mpc = (const struct mp_config *)(uint64_t)mpf->physptr;
	if (memcmp(mpc->signature, "PCMP", 4)) {
		*why = "no \"PCMP\" signature at the address the floating pointer gives";
		return NULL;
	}
	if (mpc->length < sizeof(*mpc) || mp_checksum(mpc, mpc->length)) {
		*why = "the base table's length or checksum is wrong";
		return NULL;
	}
	*why = NULL;
	return mpc;
}

const uint8_t *mp_iter_next(struct mp_iter *it)
{
	const uint8_t *base = (const uint8_t *)it->mpc;

	if (it->malformed || it->index >= it->mpc->count)
		return NULL;
	if (it->off >= it->mpc->length || base[it->off] > MP_ENTRY_LINT) {
		it->malformed = true;
		return NULL;
	}
	/* 4.3: processor entries are 20 bytes, every other base entry 8. */
	size_t size = base[it->off] == MP_ENTRY_PROCESSOR ? 20 : 8;
	if (it->off + size > it->mpc->length) {
		it->malformed = true;
		return NULL;
	}
	const uint8_t *e = base + it->off;
	it->off += size;
	it->index++;
	return e;
}
