/*
 * TSC rate, measured against the 8254 PIT, so guests can turn TSC deltas
 * into time (the kit's hosts do not report the rate in CPUID 0x15/0x16).
 */
#ifndef GUEST_TSC_H
#define GUEST_TSC_H

#include <stdint.h>

/* Counts TSC ticks while PIT channel 2 counts down about 50 ms (8254 data
 * sheet: mode 0, OUT goes high at terminal count; PC/AT port 0x61 bit 0
 * gates channel 2 and bit 5 reads its OUT). Needs port access (CPL 0 or
 * run_user). Returns TSC ticks per second, or 0 if OUT2 never rose within
 * about 2^34 TSC ticks. Restores port 0x61's gate and speaker bits. The
 * median of five ~50 ms rounds, so a host that deschedules the vCPU in
 * one of them does not skew it. */
uint64_t tsc_hz_from_pit(void);

#endif
