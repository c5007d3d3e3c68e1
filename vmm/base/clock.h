/* The one clock every timestamp uses: CLOCK_MONOTONIC in nanoseconds, so
 * the interrupt door's stamps, boot markers and benchmarks compare. */
#ifndef VMM_BASE_CLOCK_H
#define VMM_BASE_CLOCK_H

#include <stdint.h>

uint64_t clock_now_ns(void);

#endif
