/*
 * MC146818A RTC/CMOS (Motorola data sheet: address map, registers A-D,
 * table 3 time/calendar formats) over a fake clock.
 * Fake time: Sunday 2021-03-14 15:09:26 UTC = 1615734566.
 */
#include "helpers.h"

#include "devices/legacy/rtc.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_NOW ((time_t)1615734566)

enum {
	SEC = 0,
	MIN = 2,
	HOUR = 4,
	WDAY = 6,
	MDAY = 7,
	MONTH = 8,
	YEAR = 9,
	REG_A = 0x0A,
	REG_B = 0x0B,
	REG_C = 0x0C,
	REG_D = 0x0D,
	CENTURY = 0x32
};

static time_t fake_time;
static struct rtc rtc;

static time_t fake_now(void *ctx)
{
	return *(time_t *)ctx;
}

static void setup(void)
{
	fake_time = FAKE_NOW;
	rtc_init(&rtc, fake_now, &fake_time);
}

static void sel(uint8_t index)
{
	rtc_write(&rtc, 0, &index, 1);
}

static uint8_t rd(uint8_t reg)
{
	uint8_t v = 0;
	sel(reg);
	rtc_read(&rtc, 1, &v, 1);
	return v;
}

static void wr(uint8_t reg, uint8_t v)
{
	sel(reg);
	rtc_write(&rtc, 1, &v, 1);
}

START_TEST(test_register_a_uip_never_set)
{
	for (int i = 0; i < 10000; i++) {
		ck_assert_uint_eq(rd(REG_A) & 0x80, 0);
		if (i % 100 == 0)
			fake_time++; /* across second boundaries too */
	}
	wr(REG_A, 0x80 | 0x26); /* UIP is read-only */
	ck_assert_uint_eq(rd(REG_A) & 0x80, 0);
}
END_TEST

START_TEST(test_register_b_24_hour_bcd_by_default)
{
	uint8_t b = rd(REG_B);
	ck_assert_uint_eq(b & 0x02, 0x02); /* 24/12 = 1: 24-hour */
	ck_assert_uint_eq(b & 0x04, 0x00); /* DM = 0: BCD */
	ck_assert_uint_eq(b & 0x80, 0x00); /* SET = 0: updating */
}
END_TEST

START_TEST(test_register_d_valid_ram_and_time)
{
	ck_assert_uint_eq(rd(REG_D), 0x80);
}
END_TEST

START_TEST(test_time_registers_are_bcd_of_clock)
{
	ck_assert_uint_eq(rd(SEC), 0x26);
	ck_assert_uint_eq(rd(MIN), 0x09);
	ck_assert_uint_eq(rd(HOUR), 0x15);
	ck_assert_uint_eq(rd(WDAY), 0x01); /* Sunday = 1 */
	ck_assert_uint_eq(rd(MDAY), 0x14);
	ck_assert_uint_eq(rd(MONTH), 0x03);
	ck_assert_uint_eq(rd(YEAR), 0x21);
	ck_assert_uint_eq(rd(CENTURY), 0x20);
}
END_TEST

START_TEST(test_time_registers_binary_when_dm_set)
{
	wr(REG_B, 0x02 | 0x04);
	ck_assert_uint_eq(rd(SEC), 26);
	ck_assert_uint_eq(rd(MIN), 9);
	ck_assert_uint_eq(rd(HOUR), 15);
	ck_assert_uint_eq(rd(MDAY), 14);
	ck_assert_uint_eq(rd(MONTH), 3);
	ck_assert_uint_eq(rd(YEAR), 21);
}
END_TEST

START_TEST(test_12_hour_mode_sets_pm_bit)
{
	wr(REG_B, 0x00);			  /* 12-hour, BCD */
	ck_assert_uint_eq(rd(HOUR), 0x80 | 0x03); /* 15h = 3 PM */
	wr(REG_B, 0x04);			  /* 12-hour, binary */
	ck_assert_uint_eq(rd(HOUR), 0x80 | 3);
	fake_time = FAKE_NOW - 15 * 3600; /* 00:09: 12 AM */
	wr(REG_B, 0x00);
	ck_assert_uint_eq(rd(HOUR), 0x12);
	fake_time = FAKE_NOW - 3 * 3600; /* 12:09: 12 PM */
	ck_assert_uint_eq(rd(HOUR), 0x80 | 0x12);
}
END_TEST

START_TEST(test_time_follows_host_clock)
{
	fake_time += 10;
	ck_assert_uint_eq(rd(SEC), 0x36);
	fake_time += 3600;
	ck_assert_uint_eq(rd(HOUR), 0x16);
}
END_TEST

START_TEST(test_writing_minutes_moves_clock)
{
	wr(MIN, 0x45);
	ck_assert_uint_eq(rd(MIN), 0x45);
	ck_assert_uint_eq(rd(HOUR), 0x15); /* other fields unchanged */
	ck_assert_uint_eq(rd(MDAY), 0x14);
	/* The written time keeps running with the host clock. */
	fake_time += 60;
	ck_assert_uint_eq(rd(MIN), 0x46);
}
END_TEST

START_TEST(test_writing_year_and_hour_moves_clock)
{
	wr(YEAR, 0x30);
	ck_assert_uint_eq(rd(YEAR), 0x30);
	ck_assert_uint_eq(rd(MONTH), 0x03);
	wr(HOUR, 0x07);
	ck_assert_uint_eq(rd(HOUR), 0x07);
	ck_assert_uint_eq(rd(YEAR), 0x30);
}
END_TEST

START_TEST(test_writing_hour_in_12_hour_mode_uses_pm_bit)
{
	wr(REG_B, 0x00);
	wr(HOUR, 0x80 | 0x09); /* 9 PM */
	wr(REG_B, 0x02);
	ck_assert_uint_eq(rd(HOUR), 0x21);
}
END_TEST

START_TEST(test_writing_time_in_binary_mode)
{
	wr(REG_B, 0x02 | 0x04);
	wr(SEC, 59);
	ck_assert_uint_eq(rd(SEC), 59);
	wr(REG_B, 0x02);
	ck_assert_uint_eq(rd(SEC), 0x59);
}
END_TEST

/*
 * Linux's mc146818_set_time(): SET in register B, then year, month, day,
 * hours, minutes, seconds, then SET cleared. The data sheet: with SET = 1
 * "the program may initialize the time and calendar bytes without an
 * update occurring"; the clock takes the bytes as written. From Jan 31,
 * writing month = 2 before day = 15 passes through "Feb 31".
 */
START_TEST(test_set_time_sequence_through_invalid_intermediate_date)
{
	fake_time = 1612094400; /* 2021-01-31 12:00:00 UTC */
	uint8_t b = rd(REG_B);
	wr(REG_B, b | 0x80);
	wr(YEAR, 0x21);
	wr(MONTH, 0x02);
	wr(MDAY, 0x15);
	wr(HOUR, 0x10);
	wr(MIN, 0x20);
	wr(SEC, 0x30);
	wr(REG_B, b);
	ck_assert_uint_eq(rd(YEAR), 0x21);
	ck_assert_uint_eq(rd(MONTH), 0x02);
	ck_assert_uint_eq(rd(MDAY), 0x15);
	ck_assert_uint_eq(rd(HOUR), 0x10);
	ck_assert_uint_eq(rd(MIN), 0x20);
	ck_assert_uint_eq(rd(SEC), 0x30);
}
END_TEST

START_TEST(test_clock_does_not_advance_while_set_bit_is_1)
{
	/* Data sheet, register B bit 7: SET = 1 inhibits the update cycle. */
	wr(REG_B, 0x02 | 0x80);
	wr(SEC, 0x10);
	fake_time += 5;
	ck_assert_uint_eq(rd(SEC), 0x10);
	wr(REG_B, 0x02);
	fake_time += 5;
	ck_assert_uint_eq(rd(SEC), 0x15);
}
END_TEST

/* 0xFF written to the year again and again (BCD 165) once added a century
 * and more each time until the year arithmetic overflowed (UBSan). */
START_TEST(test_out_of_range_time_writes_are_ignored)
{
	for (int i = 0; i < 100000; i++) {
		wr(YEAR, 0xFF);
		wr(CENTURY, 0xFF);
		wr(MONTH, 0x13);
		wr(MDAY, 0x00);
		wr(HOUR, 0x24);
	}
	ck_assert_uint_eq(rd(YEAR), 0x21);
	ck_assert_uint_eq(rd(CENTURY), 0x20);
	ck_assert_uint_eq(rd(MONTH), 0x03);
	ck_assert_uint_eq(rd(MDAY), 0x14);
	ck_assert_uint_eq(rd(HOUR), 0x15);
	wr(CENTURY, 0x99);
	wr(YEAR, 0x99); /* the largest the registers can say: 9999 */
	ck_assert_uint_eq(rd(CENTURY), 0x99);
	ck_assert_uint_eq(rd(YEAR), 0x99);
	wr(REG_B, 0x02 | 0x80); /* 12-hour mode: hour 0 and 13 are not hours */
	wr(REG_B, 0x80);
	wr(HOUR, 0x00);
	wr(HOUR, 0x13);
	wr(REG_B, 0x02);
	ck_assert_uint_eq(rd(HOUR), 0x15);
}
END_TEST

/* A host clock gmtime_r cannot express reads as the epoch, not as stack. */
START_TEST(test_unrepresentable_host_clock_reads_epoch)
{
	fake_time = (time_t)INT64_MAX;
	ck_assert_uint_eq(rd(YEAR), 0x70);
	ck_assert_uint_eq(rd(CENTURY), 0x19);
	ck_assert_uint_eq(rd(MONTH), 0x01);
	ck_assert_uint_eq(rd(MDAY), 0x01);
}
END_TEST

/* A guest setting the time against a host clock near -2^63 (fuzz_isa's
 * find): no overflow (UBSan in the sanitizer suite), the offset stays. */
START_TEST(test_setting_time_against_extreme_host_clock_keeps_offset)
{
	fake_time = (time_t)(INT64_MIN + 1);
	wr(YEAR, 0x99); /* 1999 - (-2^63 + 1) overflows: the write is dropped */
	ck_assert_int_eq(rtc.offset_s, 0);
	ck_assert_uint_eq(rd(YEAR), 0x70); /* the clock itself: unrepresentable */
	wr(REG_B, rd(REG_B) | 0x80);	   /* SET */
	wr(YEAR, 0x42);			   /* 1942 fits */
	wr(REG_B, rd(REG_B) & ~0x80);	   /* commit */
	ck_assert_uint_eq(rd(YEAR), 0x42);
	int64_t kept = rtc.offset_s;
	wr(REG_B, rd(REG_B) | 0x80);
	wr(YEAR, 0x99); /* overflows again, at the commit this time */
	wr(REG_B, rd(REG_B) & ~0x80);
	ck_assert_int_eq(rtc.offset_s, kept);
	ck_assert_uint_eq(rd(YEAR), 0x42);
}
END_TEST

START_TEST(test_cmos_ram_bytes_read_back)
{
	/* 0x0E-0x7F is RAM; 0x32 is the PC century byte, tested above. */
	for (unsigned i = 0x0E; i < 0x80; i++)
		if (i != CENTURY)
			wr((uint8_t)i, (uint8_t)(i * 37 + 11));
	for (unsigned i = 0x0E; i < 0x80; i++)
		if (i != CENTURY)
			ck_assert_uint_eq(rd((uint8_t)i), (uint8_t)(i * 37 + 11));
	/* RAM writes do not disturb the clock. */
	ck_assert_uint_eq(rd(SEC), 0x26);
}
END_TEST

START_TEST(test_register_c_clears_on_read)
{
	rtc.cmos[REG_C] = 0xF0; /* as if IRQF|PF|AF|UF had latched */
	ck_assert_uint_eq(rd(REG_C), 0xF0);
	ck_assert_uint_eq(rd(REG_C), 0x00);
	wr(REG_C, 0xFF); /* read-only */
	ck_assert_uint_eq(rd(REG_C), 0x00);
}
END_TEST

START_TEST(test_index_port_masks_nmi_bit)
{
	uint8_t idx = 0x80 | REG_D; /* NMI disabled + register D */
	uint8_t v = 0;
	rtc_write(&rtc, 0, &idx, 1);
	rtc_read(&rtc, 1, &v, 1);
	ck_assert_uint_eq(v, 0x80);
	idx = 0x80 | 0x20;
	rtc_write(&rtc, 0, &idx, 1);
	v = 0x77;
	rtc_write(&rtc, 1, &v, 1);
	ck_assert_uint_eq(rd(0x20), 0x77);
}
END_TEST

START_TEST(test_index_port_reads_return_index)
{
	uint8_t v = 0;
	sel(0x0B);
	rtc_read(&rtc, 0, &v, 1);
	ck_assert_uint_eq(v, 0x0B);
	sel(0x80 | 0x33);
	rtc_read(&rtc, 0, &v, 1);
	ck_assert_uint_eq(v, 0x33);
}
END_TEST

START_TEST(test_no_register_reads_all_ones)
{
	/* All-ones from port 0x71 hangs Linux's boot-time RTC read. */
	for (unsigned i = 0; i < 0x0E; i++)
		ck_assert_uint_ne(rd((uint8_t)i), 0xFF);
}
END_TEST

static Suite *rtc_suite(void)
{
	Suite *s = suite_create("rtc");
	TCase *t = tcase_create("rtc");
	tcase_add_checked_fixture(t, setup, NULL);
	tcase_add_test(t, test_register_a_uip_never_set);
	tcase_add_test(t, test_register_b_24_hour_bcd_by_default);
	tcase_add_test(t, test_register_d_valid_ram_and_time);
	tcase_add_test(t, test_time_registers_are_bcd_of_clock);
	tcase_add_test(t, test_time_registers_binary_when_dm_set);
	tcase_add_test(t, test_12_hour_mode_sets_pm_bit);
	tcase_add_test(t, test_time_follows_host_clock);
	tcase_add_test(t, test_writing_minutes_moves_clock);
	tcase_add_test(t, test_writing_year_and_hour_moves_clock);
	tcase_add_test(t, test_setting_time_against_extreme_host_clock_keeps_offset);
	tcase_add_test(t, test_writing_hour_in_12_hour_mode_uses_pm_bit);
	tcase_add_test(t, test_writing_time_in_binary_mode);
	tcase_add_test(t, test_set_time_sequence_through_invalid_intermediate_date);
	tcase_add_test(t, test_clock_does_not_advance_while_set_bit_is_1);
	tcase_add_test(t, test_out_of_range_time_writes_are_ignored);
	tcase_add_test(t, test_unrepresentable_host_clock_reads_epoch);
	tcase_add_test(t, test_cmos_ram_bytes_read_back);
	tcase_add_test(t, test_register_c_clears_on_read);
	tcase_add_test(t, test_index_port_masks_nmi_bit);
	tcase_add_test(t, test_index_port_reads_return_index);
	tcase_add_test(t, test_no_register_reads_all_ones);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(rtc_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
