/*
 * Kernel command line words (boot.rst: cmd_line_ptr, a NUL-terminated
 * string of space-separated words), for guests that take KEY=VALUE options.
 */
#ifndef GUEST_CMDLINE_H
#define GUEST_CMDLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct boot_params;

/* The command line boot_params points at, or NULL if the pointer is 0, lies
 * above the kit's 4 GiB map, or no NUL ends it within cmdline_size + 1. */
const char *cmdline_get(const struct boot_params *bp);

/* The value of the first word "KEY=VALUE" (VALUE may be empty). */
bool cmdline_value(const char *cmdline, const char *key, const char **val, size_t *len);

/* Decimal, or hexadecimal with 0x; the whole of [s, s + len). */
bool cmdline_parse_u64(const char *s, size_t len, uint64_t *out);

/* KEY's value as a number in lo..hi, into *out. True when KEY is absent
 * (*out unchanged) or valid; false when it is not such a number, with
 * `KEY="VALUE" is not LO..HI` in why. */
bool cmdline_u64_in(const char *cmdline, const char *key, uint64_t *out, uint64_t lo, uint64_t hi,
		    char *why, size_t why_size);

/* Whether [word, word + len) is one of the words (an empty one never is). */
bool cmdline_has_word(const char *cmdline, const char *word, size_t len);

/* Counts the words that start with `prefix` (e.g. "pcitest.") whose key (up
 * to '=' or the end of the word) is not in known[0..nknown); copies the
 * first one's key to first (NUL-terminated, truncated to first_size). */
unsigned cmdline_unknown_keys(const char *cmdline, const char *prefix, const char *const *known,
			      size_t nknown, char *first, size_t first_size);

#endif
