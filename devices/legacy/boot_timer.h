/*
 * Boot-time markers from the guest, compatible with Firecracker (byte 123
 * written to MMIO 0xC0000000) and Cloud Hypervisor (port 0x80 codes
 * 0x40-0x7f; other port-0x80 values are Linux's io_delay and are ignored).
 */
#ifndef DEVICES_BOOT_TIMER_H
#define DEVICES_BOOT_TIMER_H

#include "vmm/base/lock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#define BOOT_TIMER_MMIO_BASE  0xC0000000ULL
#define BOOT_TIMER_MMIO_SIZE  0x1000
#define BOOT_TIMER_MAGIC      123
#define BOOT_TIMER_PORT	      0x80
#define BOOT_TIMER_CODE_FIRST 0x40
#define BOOT_TIMER_CODE_LAST  0x7F
#define BOOT_TIMER_MAX_MARKS  64

struct boot_mark {
	uint64_t ns;  /* since process start */
	uint8_t code; /* 0x40-0x7f, or BOOT_TIMER_MAGIC for the MMIO marker */
	uint8_t mmio;
};

struct boot_timer {
	struct vmm_lock lock;
	uint64_t start_ns; /* CLOCK_MONOTONIC at process start */
	FILE *report;	   /* where markers are printed as they come; NULL = quiet */
	struct boot_mark marks[BOOT_TIMER_MAX_MARKS];
	unsigned nmarks;
	atomic_uint_fast64_t io_delay_writes;
};

void boot_timer_init(struct boot_timer *t, uint64_t start_ns, FILE *report);
void boot_timer_mmio_read(void *opaque, uint64_t offset, void *data, unsigned len);
void boot_timer_mmio_write(void *opaque, uint64_t offset, const void *data, unsigned len);
void boot_timer_port_read(void *opaque, uint64_t offset, void *data, unsigned len);
void boot_timer_port_write(void *opaque, uint64_t offset, const void *data, unsigned len);

#endif
