#include "rss.h"

#include <stdio.h>
#include <string.h>

long rss_kib_excluding(const void *base, uint64_t len)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	long total = 0;
	int skip = 0;
	uintptr_t lo = (uintptr_t)base, hi = lo + len;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long start, end, kib;
		if (sscanf(line, "%lx-%lx ", &start, &end) == 2 &&
		    strchr(line, '-') < strchr(line, ' ')) {
			skip = start >= lo && end <= hi;
			continue;
		}
		if (!skip && sscanf(line, "Rss: %lu kB", &kib) == 1)
			total += (long)kib;
	}
	fclose(f);
	return total;
}
