/* Counters are atomics bumped on any thread; a report reads each once. */
#ifndef VMM_BASE_STAT_H
#define VMM_BASE_STAT_H

#include <stdatomic.h>

#define STAT(counter) ((unsigned long long)atomic_load(&(counter)))

#endif
