/*
 * Shared helpers for the libFuzzer targets: fake guest RAM over an
 * anonymous mapping fenced by PROT_NONE guard pages, so any access past
 * either end of RAM faults at once (ASan does not track mmap()ed memory).
 */
#ifndef TESTS_FUZZ_COMMON_H
#define TESTS_FUZZ_COMMON_H

#include "vmm/base/guest_mem.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define FUZZ_PAGE 4096ULL

struct fuzz_ram {
	struct guest_mem m;
	uint8_t *buf;
	uint64_t size;
};

/* Zero-filled RAM of `size` bytes (page multiple) with a guard page on each side. */
static inline void fuzz_ram_init(struct fuzz_ram *r, uint64_t size)
{
	uint8_t *p =
	    mmap(NULL, size + 2 * FUZZ_PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED || mprotect(p + FUZZ_PAGE, size, PROT_READ | PROT_WRITE))
		abort();
	r->buf = p + FUZZ_PAGE;
	r->size = size;
	guest_mem_init_with(&r->m, r->buf, size);
}

/* Defines the target's guest RAM `name` of `size` bytes, mapped once before
 * the first input (libFuzzer calls LLVMFuzzerInitialize first). */
#define FUZZ_GUEST_RAM(name, size)                                                                 \
	static struct fuzz_ram name;                                                               \
	int LLVMFuzzerInitialize(int *argc, char ***argv)                                          \
	{                                                                                          \
		(void)argc;                                                                        \
		(void)argv;                                                                        \
		fuzz_ram_init(&name, size);                                                        \
		return 0;                                                                          \
	}

/* Back to all zeroes; the kernel drops the pages, so this is cheap. */
static inline void fuzz_ram_reset(struct fuzz_ram *r)
{
	if (madvise(r->buf, r->size, MADV_DONTNEED))
		memset(r->buf, 0, r->size);
	guest_mem_init_with(&r->m, r->buf, r->size);
}

/* /dev/null, for the logs a target does not read; opened once. */
static inline FILE *fuzz_devnull(void)
{
	static FILE *f;
	if (!f && !(f = fopen("/dev/null", "w")))
		abort();
	return f;
}

/* The fuzz input read as a stream of little-endian fields; past its end
 * every field reads 0. */
struct in {
	const uint8_t *p;
	size_t left;
};
static inline uint64_t take(struct in *in, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n && in->left; i++, in->p++, in->left--)
		v |= (uint64_t)*in->p << (8 * i);
	return v;
}

#endif
