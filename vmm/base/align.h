/* Rounding helpers for addresses and sizes (a: a power of two). */
#ifndef VMM_BASE_ALIGN_H
#define VMM_BASE_ALIGN_H

#include <stdint.h>

static inline uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* The smallest power of two >= v and >= min (min a power of two). */
static inline uint64_t pow2_at_least(uint64_t v, uint64_t min)
{
	uint64_t p = min;
	while (p < v)
		p <<= 1;
	return p;
}

#endif
