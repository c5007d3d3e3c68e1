/*
 * Minimal MC146818 RTC/CMOS at ports 0x70 (index) / 0x71 (data): host time,
 * 24-hour BCD by default, the valid-RAM bit set, update-in-progress never
 * set (Linux 4.15-5.11 spin on UIP at boot when kvm-clock is off), and
 * battery-backed RAM at 0x0E-0x7F (0x32 is the century, as on PCs). While
 * register B's SET bit is 1 the clock is frozen and the time bytes are
 * written as one (the data sheet's update inhibit); clearing SET makes
 * them the new time. No periodic/alarm interrupts (IRQ 8).
 * Reference: Motorola MC146818A data sheet, "Register A-D".
 */
#ifndef DEVICES_RTC_H
#define DEVICES_RTC_H

#include "vmm/base/lock.h"

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#define RTC_INDEX_PORT 0x70
#define RTC_NREGS      128

struct rtc {
	struct vmm_lock lock;
	uint8_t index;
	uint8_t cmos[RTC_NREGS];  /* registers A-D and RAM; time fields unused */
	int64_t offset_s;	  /* guest time - host time, from guest writes */
	struct tm frozen;	  /* the time while SET = 1 */
	time_t (*now)(void *ctx); /* host clock; tests replace it */
	void *now_ctx;
};

void rtc_init(struct rtc *r, time_t (*now)(void *ctx), void *now_ctx);
/* Registered as a 2-port range at RTC_INDEX_PORT. */
void rtc_read(void *opaque, uint64_t offset, void *data, unsigned len);
void rtc_write(void *opaque, uint64_t offset, const void *data, unsigned len);

#endif
