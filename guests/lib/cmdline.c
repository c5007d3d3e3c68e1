/*
 * Command line words (see guest/cmdline.h).
 */
#include "guest/cmdline.h"
#include "guest/kit.h"

const char *cmdline_get(const struct boot_params *bp)
{
	uint64_t ptr = bp->hdr.cmd_line_ptr | (uint64_t)bp->ext_cmd_line_ptr << 32;
	uint32_t max = bp->hdr.cmdline_size;

	/* boot.rst cmdline_size: the maximum length without the NUL. */
	if (!ptr || ptr + max + 1 > 0x100000000ull)
		return NULL;
	if (strnlen((const char *)ptr, (size_t)max + 1) > max)
		return NULL;
	return (const char *)ptr;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n';
}

/* The next word at or after *p: returns its start and length, advances *p. */
static const char *next_word(const char **p, size_t *len)
{
	const char *s = *p;
	while (*s && is_space(*s))
		s++;
	const char *start = s;
	while (*s && !is_space(*s))
		s++;
	*p = s;
	*len = (size_t)(s - start);
	return *len ? start : NULL;
}

bool cmdline_value(const char *cmdline, const char *key, const char **val, size_t *len)
{
	size_t kl = strlen(key), n;
	const char *p = cmdline, *w;

	while (p && (w = next_word(&p, &n))) {
		if (n > kl && !strncmp(w, key, kl) && w[kl] == '=') {
			*val = w + kl + 1;
			*len = n - kl - 1;
			return true;
		}
	}
	return false;
}

bool cmdline_parse_u64(const char *s, size_t len, uint64_t *out)
{
	unsigned base = 10;
	uint64_t v = 0;

	if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
		len -= 2;
	}
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		unsigned d;
		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (base == 16 && c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else if (base == 16 && c >= 'A' && c <= 'F')
			d = (unsigned)(c - 'A' + 10);
		else
			return false;
		if (v > (UINT64_MAX - d) / base)
			return false;
		v = v * base + d;
	}
	*out = v;
	return true;
}

bool cmdline_has_word(const char *cmdline, const char *word, size_t len)
{
	const char *p = cmdline, *w;
	size_t n;

	while (p && (w = next_word(&p, &n)))
		if (n == len && !strncmp(w, word, n))
			return true;
	return false;
}

unsigned cmdline_unknown_keys(const char *cmdline, const char *prefix, const char *const *known,
			      size_t nknown, char *first, size_t first_size)
{
	size_t pl = strlen(prefix), n;
	const char *p = cmdline, *w;
	unsigned count = 0;

	if (first_size)
		first[0] = '\0';
	while (p && (w = next_word(&p, &n))) {
		if (n < pl || strncmp(w, prefix, pl))
			continue;
		size_t kl = 0;
		while (kl < n && w[kl] != '=')
			kl++;
		bool ok = false;
		for (size_t i = 0; i < nknown && !ok; i++)
			ok = strlen(known[i]) == kl && !strncmp(w, known[i], kl);
		if (!ok && count++ == 0 && first_size)
			snprintf(first, first_size, "%.*s", (int)kl, w);
	}
	return count;
}

bool cmdline_u64_in(const char *cmdline, const char *key, uint64_t *out, uint64_t lo, uint64_t hi,
		    char *why, size_t why_size)
{
	const char *val;
	size_t len;
	uint64_t n;

	if (!cmdline_value(cmdline, key, &val, &len))
		return true;
	if (!cmdline_parse_u64(val, len, &n) || n < lo || n > hi) {
		snprintf(why, why_size, "%s=\"%.*s\" is not %lu..%lu", key, (int)len, val, lo, hi);
		return false;
	}
	*out = n;
	return true;
}
