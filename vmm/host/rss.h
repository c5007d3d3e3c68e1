/* Resident memory of the VMM itself, guest RAM excluded (/proc/self/smaps). */
#ifndef VMM_RSS_H
#define VMM_RSS_H

#include <stdint.h>

/* KiB resident in every mapping except [base, base+len), read from an open
 * /proc/self/smaps; -1 if unknown. */
long rss_kib_excluding(int smaps_fd, const void *base, uint64_t len);

#endif
