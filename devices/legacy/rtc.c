#include "devices/legacy/rtc.h"

#include <stdbool.h>
#include <string.h>

enum {
	RTC_SEC = 0,
	RTC_SEC_ALARM,
	RTC_MIN,
	RTC_MIN_ALARM,
	RTC_HOUR,
	RTC_HOUR_ALARM,
	RTC_WDAY,
	RTC_MDAY,
	RTC_MONTH,
	RTC_YEAR,
	RTC_REG_A,
	RTC_REG_B,
	RTC_REG_C,
	RTC_REG_D,
	RTC_CENTURY = 0x32
};
#define REG_A_UIP 0x80
#define REG_B_SET 0x80
#define REG_B_DM  0x04 /* binary, not BCD */
#define REG_B_24H 0x02
#define REG_D_VRT 0x80 /* valid RAM and time */

static time_t rtc_host_now(void *ctx)
{
	(void)ctx;
	return time(NULL);
}

void rtc_init(struct rtc *r, time_t (*now)(void *ctx), void *now_ctx)
{
	memset(r, 0, sizeof(*r));
	lock_init(&r->lock, "RTC", LOCK_RANK_DEVICE);
	r->now = now ? now : rtc_host_now;
	r->now_ctx = now_ctx;
	r->cmos[RTC_REG_A] = 0x26; /* 32.768 kHz time base, 1024 Hz rate */
	r->cmos[RTC_REG_B] = REG_B_24H;
	r->cmos[RTC_REG_D] = REG_D_VRT;
}

/* Two BCD digits of v's last two decimal digits: every register holds
 * 0..99, and a host clock before year 0 (tm_year % 100 < 0) must not make
 * a negative digit. */
static uint8_t to_bcd(int v)
{
	v = (v % 100 + 100) % 100;
	return (uint8_t)(((v / 10) << 4) | (v % 10));
}

static int from_bcd(uint8_t v)
{
	return (v >> 4) * 10 + (v & 0x0F);
}

static uint8_t rtc_encode(const struct rtc *r, int v)
{
	return (r->cmos[RTC_REG_B] & REG_B_DM) ? (uint8_t)v : to_bcd(v);
}

static int rtc_decode(const struct rtc *r, uint8_t v)
{
	return (r->cmos[RTC_REG_B] & REG_B_DM) ? v : from_bcd(v);
}

static void rtc_guest_tm(struct rtc *r, struct tm *tm)
{
	if (r->cmos[RTC_REG_B] & REG_B_SET) {
		*tm = r->frozen; /* no update cycle while SET = 1 */
		return;
	}
	/* A host clock (or a clock plus the guest's offset) that time_t or
	 * gmtime_r cannot express reads as the epoch rather than as whatever
	 * the stack held. */
	int64_t sum;
	time_t t = 0;
	if (!__builtin_add_overflow((int64_t)r->now(r->now_ctx), r->offset_s, &sum))
		t = (time_t)sum;
	if (!gmtime_r(&t, tm)) {
		time_t zero = 0;
		gmtime_r(&zero, tm);
	}
}

/* The guest's time becomes tm: the offset from the host clock. Against a
 * host clock far from any time a guest can set (found by fuzz_isa: now =
 * -2^63 + 1), the offset is left as it was. */
static void rtc_set_time(struct rtc *r, struct tm *tm)
{
	time_t target = timegm(tm);
	int64_t off;
	if (target != (time_t)-1 &&
	    !__builtin_sub_overflow((int64_t)target, (int64_t)r->now(r->now_ctx), &off))
		r->offset_s = off;
}

/* The frozen time becomes the clock's time (SET 1 -> 0). */
static void rtc_commit_time(struct rtc *r)
{
	struct tm tm = r->frozen;
	rtc_set_time(r, &tm);
}

static uint8_t rtc_hour_reg(const struct rtc *r, int hour)
{
	if (r->cmos[RTC_REG_B] & REG_B_24H)
		return rtc_encode(r, hour);
	/* 12-hour mode: 12, 1..11 with bit 7 for PM (data sheet, table 3). */
	int h12 = hour % 12 == 0 ? 12 : hour % 12;
	return (uint8_t)(rtc_encode(r, h12) | (hour >= 12 ? 0x80 : 0));
}

static uint8_t rtc_reg_read(struct rtc *r, uint8_t reg)
{
	struct tm tm;
	uint8_t v;
	switch (reg) {
	case RTC_SEC:
	case RTC_MIN:
	case RTC_HOUR:
	case RTC_WDAY:
	case RTC_MDAY:
	case RTC_MONTH:
	case RTC_YEAR:
	case RTC_CENTURY:
		rtc_guest_tm(r, &tm);
		switch (reg) {
		case RTC_SEC: return rtc_encode(r, tm.tm_sec > 59 ? 59 : tm.tm_sec);
		case RTC_MIN: return rtc_encode(r, tm.tm_min);
		case RTC_HOUR: return rtc_hour_reg(r, tm.tm_hour);
		case RTC_WDAY: return rtc_encode(r, tm.tm_wday + 1);
		case RTC_MDAY: return rtc_encode(r, tm.tm_mday);
		case RTC_MONTH: return rtc_encode(r, tm.tm_mon + 1);
		case RTC_YEAR: return rtc_encode(r, tm.tm_year % 100);
		default: return rtc_encode(r, (tm.tm_year + 1900) / 100);
		}
	case RTC_REG_A: return r->cmos[RTC_REG_A] & ~REG_A_UIP; /* never mid-update */
	case RTC_REG_C:
		v = r->cmos[RTC_REG_C];
		r->cmos[RTC_REG_C] = 0; /* flags clear on read */
		return v;
	default: return r->cmos[reg];
	}
}

/*
 * A guest write to a time field. While SET = 1 it only changes the frozen
 * copy, so a sequence through an impossible date (Feb 31 on the way from
 * Jan 31 to Feb 15) is never normalised; with SET = 0 it moves the clock.
 */
/*
 * The value a time register write stands for, or -1 when it is outside the
 * field's range (data sheet, table 3: seconds 0-59, minutes 0-59, hours
 * 1-12 or 0-23, date 1-31, month 1-12, year 0-99; the century byte 0-99):
 * such a write is ignored, so no sequence of writes can carry the year
 * past 9999 (0xFF written to the year as BCD is 165, and used to add a
 * century and more each time until the arithmetic overflowed).
 */
static int rtc_field_value(const struct rtc *r, uint8_t reg, uint8_t v)
{
	static const uint8_t lo[RTC_YEAR + 1] = {[RTC_MDAY] = 1, [RTC_MONTH] = 1};
	static const uint8_t hi[RTC_YEAR + 1] = {
	    [RTC_SEC] = 59,  [RTC_MIN] = 59,   [RTC_HOUR] = 23,
	    [RTC_MDAY] = 31, [RTC_MONTH] = 12, [RTC_YEAR] = 99};
	if (reg == RTC_HOUR && !(r->cmos[RTC_REG_B] & REG_B_24H)) {
		int h = rtc_decode(r, v & 0x7F);
		return h >= 1 && h <= 12 ? h % 12 + ((v & 0x80) ? 12 : 0) : -1;
	}
	int val = rtc_decode(r, v);
	if (reg == RTC_CENTURY)
		return val <= 99 ? val : -1;
	return reg <= RTC_YEAR && val >= lo[reg] && val <= hi[reg] ? val : -1;
}

static void rtc_set_time_field(struct rtc *r, uint8_t reg, uint8_t v)
{
	struct tm tm;
	bool frozen = r->cmos[RTC_REG_B] & REG_B_SET;
	int val = rtc_field_value(r, reg, v);
	if (val < 0 || reg == RTC_WDAY)
		return; /* out of range, or the weekday (derived) */
	rtc_guest_tm(r, &tm);
	switch (reg) {
	case RTC_SEC: tm.tm_sec = val; break;
	case RTC_MIN: tm.tm_min = val; break;
	case RTC_HOUR: tm.tm_hour = val; break;
	case RTC_MDAY: tm.tm_mday = val; break;
	case RTC_MONTH: tm.tm_mon = val - 1; break;
	case RTC_YEAR: tm.tm_year = (tm.tm_year + 1900) / 100 * 100 + val - 1900; break;
	case RTC_CENTURY: tm.tm_year = val * 100 + (tm.tm_year + 1900) % 100 - 1900; break;
	default: return;
	}
	if (frozen) {
		r->frozen = tm;
		return;
	}
	rtc_set_time(r, &tm);
}

static void rtc_reg_write(struct rtc *r, uint8_t reg, uint8_t v)
{
	switch (reg) {
	case RTC_SEC:
	case RTC_MIN:
	case RTC_HOUR:
	case RTC_MDAY:
	case RTC_MONTH:
	case RTC_YEAR:
	case RTC_CENTURY:
	case RTC_WDAY: rtc_set_time_field(r, reg, v); return;
	case RTC_REG_A:
		r->cmos[RTC_REG_A] = v & ~REG_A_UIP; /* UIP is read-only */
		return;
	case RTC_REG_B:
		if (!(r->cmos[RTC_REG_B] & REG_B_SET) && (v & REG_B_SET))
			rtc_guest_tm(r, &r->frozen); /* freeze what the guest sees now */
		else if ((r->cmos[RTC_REG_B] & REG_B_SET) && !(v & REG_B_SET)) {
			r->cmos[RTC_REG_B] = v;
			rtc_commit_time(r);
			return;
		}
		r->cmos[RTC_REG_B] = v;
		return;
	case RTC_REG_C:
	case RTC_REG_D: return; /* read-only */
	default: r->cmos[reg] = v;
	}
}

void rtc_read(void *opaque, uint64_t offset, void *data, unsigned len)
{
	struct rtc *r = opaque;
	uint8_t *out = data;
	memset(data, 0xFF, len);
	lock_take(&r->lock);
	if (offset == 0)
		out[0] = r->index;
	else
		out[0] = rtc_reg_read(r, r->index);
	lock_release(&r->lock);
}

void rtc_write(void *opaque, uint64_t offset, const void *data, unsigned len)
{
	struct rtc *r = opaque;
	uint8_t v = *(const uint8_t *)data;
	(void)len;
	lock_take(&r->lock);
	if (offset == 0)
		r->index = v & 0x7F; /* bit 7 is the NMI mask on PCs */
	else
		rtc_reg_write(r, r->index, v);
	lock_release(&r->lock);
}
