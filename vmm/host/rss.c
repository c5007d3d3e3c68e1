#include "vmm/host/rss.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Reads smaps from a descriptor opened before the VMM's seccomp filter:
 * at exit the main thread may not open files. */
long rss_kib_excluding(int smaps_fd, const void *base, uint64_t len)
{
	char buf[8192], line[512];
	size_t have = 0;
	long total = 0;
	int skip = 0;
	uintptr_t lo = (uintptr_t)base, hi = lo + len;
	if (smaps_fd < 0 || lseek(smaps_fd, 0, SEEK_SET) < 0)
		return -1;
	for (;;) {
		ssize_t n = read(smaps_fd, buf + have, sizeof(buf) - have - 1);
		if (n < 0)
			return -1;
		have += (size_t)n;
		buf[have] = 0;
		char *start = buf, *nl;
		while ((nl = strchr(start, '\n')) || (n == 0 && *start)) {
			size_t l = nl ? (size_t)(nl - start) : strlen(start);
			snprintf(line, sizeof(line), "%.*s", (int)l, start);
			start += l + (nl ? 1 : 0);
			unsigned long a, b, kib;
			char *dash = strchr(line, '-'), *space = strchr(line, ' ');
			if (dash && space && dash < space && sscanf(line, "%lx-%lx ", &a, &b) == 2)
				skip = a >= lo && b <= hi;
			else if (!skip && sscanf(line, "Rss: %lu kB", &kib) == 1)
				total += (long)kib;
		}
		have = strlen(start);
		memmove(buf, start, have);
		if (n == 0)
			return total;
		if (have == sizeof(buf) - 1)
			have = 0; /* a line longer than the buffer: not an Rss line */
	}
}
