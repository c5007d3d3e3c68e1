/*
 * Small devices (QEMU isa-debug-exit, i8042 reset, QEMU pvpanic.rst, boot
 * markers per Firecracker / Cloud Hypervisor) and the irq/ door.
 */
#include "helpers.h"

#include "devices/legacy/boot_timer.h"
#include "devices/legacy/debug_exit.h"
#include "devices/legacy/guest_status.h"
#include "devices/legacy/i8042.h"
#include "devices/legacy/pvpanic.h"
#include "irq/irq.h"
#include "vmm/base/clock.h"
#include "vmm/base/err.h"
#include "vmm/machine/stop.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static struct stop_rec stops;

/* ---- the guest status port ---- */

START_TEST(test_status_port_exit_is_the_status_itself)
{
	struct guest_status g;
	guest_status_init(&g, stop_rec_ctl(&stops), NULL);
	uint8_t v = 3;
	guest_status_write(&g, GUEST_STATUS_EXIT, &v, 1);
	ck_assert_uint_eq(stops.n, 1);
	ck_assert_int_eq(stops.reason, MACHINE_STOP_GUEST_STATUS);
	ck_assert_int_eq(stops.code, 3);
	for (unsigned s = 0; s < 256; s++)
		ck_assert_int_eq(exit_code_for_stop(MACHINE_STOP_GUEST_STATUS, s), (int)s);
}
END_TEST

START_TEST(test_status_port_reports_without_stopping)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	struct log log;
	log_init(&log, LOG_INFO, f);
	struct guest_status g;
	guest_status_init(&g, stop_rec_ctl(&stops), &log);
	uint8_t idx = 2, st = 3, flags = GUEST_STATUS_TIMEOUT, wide[2] = {1, 1};
	guest_status_write(&g, GUEST_STATUS_INDEX, &idx, 1);
	guest_status_write(&g, GUEST_STATUS_REPORT, &st, 1);
	idx = 7;
	guest_status_write(&g, GUEST_STATUS_INDEX, &idx, 1);
	guest_status_write(&g, GUEST_STATUS_FLAGS, &flags, 1);
	st = 137;
	guest_status_write(&g, GUEST_STATUS_REPORT, &st, 1);
	guest_status_write(&g, GUEST_STATUS_REPORT, wide, 2); /* not a byte: ignored */
	fflush(f);
	ck_assert_uint_eq(stops.n, 0);
	ck_assert_uint_eq(g.reports, 2);
	ck_assert_ptr_nonnull(strstr(text, "guest status: command 2 ended with status 3\n"));
	ck_assert_ptr_nonnull(
	    strstr(text, "guest status: command 7 ended with status 137 (stopped by its timeout)"));
	fclose(f);
	free(text);
}
END_TEST

/* ---- debug exit ---- */

START_TEST(test_debug_exit_code_is_value_shifted_or_1_low_byte)
{
	static const uint32_t values[] = {0,	1,    0x10,  0x21,	 0x7F,
					  0x80, 0xFF, 0x100, 0x12345678, 0xFFFFFFFF};
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		uint32_t v = values[i];
		ck_assert_int_eq(exit_code_for_stop(MACHINE_STOP_GUEST_EXIT_VALUE, v),
				 (int)(((v << 1) | 1) & 0xFF));
	}
	/* Always odd: never confused with the VMM's own codes. */
	ck_assert_int_eq(exit_code_for_stop(MACHINE_STOP_GUEST_EXIT_VALUE, 0x10), 0x21);
	ck_assert_int_eq(exit_code_for_stop(MACHINE_STOP_GUEST_EXIT_VALUE, 0), 1);
}
END_TEST

START_TEST(test_debug_exit_byte_write_requests_stop_with_code)
{
	struct debug_exit d;
	debug_exit_init(&d, stop_rec_ctl(&stops));
	uint8_t v = 0x10;
	debug_exit_write(&d, 0, &v, 1);
	ck_assert_uint_eq(stops.n, 1);
	ck_assert_int_eq(stops.reason, MACHINE_STOP_GUEST_EXIT_VALUE);
	ck_assert_uint_eq(stops.value, 0x10);
	ck_assert_int_eq(stops.code, 0x21);
}
END_TEST

START_TEST(test_debug_exit_dword_write_requests_stop_with_code)
{
	struct debug_exit d;
	debug_exit_init(&d, stop_rec_ctl(&stops));
	uint8_t v[4] = {0x03, 0x00, 0x00, 0x00};
	debug_exit_write(&d, 0, v, 4);
	ck_assert_uint_eq(stops.n, 1);
	ck_assert_uint_eq(stops.value, 3);
	ck_assert_int_eq(stops.code, 0x07);
}
END_TEST

/* ---- i8042 ---- */

START_TEST(test_i8042_status_obf_set_ibf_clear)
{
	struct i8042 k;
	i8042_init(&k, stop_rec_ctl(&stops));
	uint8_t st = 0;
	i8042_status_read(&k, 0, &st, 1);
	ck_assert_uint_eq(st & 0x01, 0x01); /* OBF */
	ck_assert_uint_eq(st & 0x02, 0x00); /* IBF */
}
END_TEST

START_TEST(test_i8042_command_0xfe_requests_stop_guest_off)
{
	struct i8042 k;
	i8042_init(&k, stop_rec_ctl(&stops));
	uint8_t c = 0xFE;
	i8042_command_write(&k, 0, &c, 1);
	ck_assert_uint_eq(stops.n, 1);
	ck_assert_int_eq(stops.reason, MACHINE_STOP_GUEST_RESET);
	ck_assert_int_eq(stops.code, EXIT_GUEST_OFF);
}
END_TEST

START_TEST(test_i8042_other_commands_do_not_stop)
{
	struct i8042 k;
	i8042_init(&k, stop_rec_ctl(&stops));
	/* Read/write CTR, self-test, interface test, disable ports, out-port. */
	static const uint8_t cmds[] = {0x20, 0x60, 0xAA, 0xAB, 0xAD, 0xA7, 0xD1, 0xF0, 0xFF, 0x00};
	for (size_t i = 0; i < sizeof(cmds); i++)
		i8042_command_write(&k, 0, &cmds[i], 1);
	uint8_t d = 0xFE; /* 0xFE on the data port is not a command */
	i8042_data_write(&k, 0, &d, 1);
	ck_assert_uint_eq(stops.n, 0);
}
END_TEST

/* ---- pvpanic ---- */

START_TEST(test_pvpanic_read_returns_supported_events)
{
	struct pvpanic p;
	pvpanic_init(&p, stop_rec_ctl(&stops));
	uint8_t v = 0;
	pvpanic_read(&p, 0, &v, 1);
	ck_assert_uint_eq(v, PVPANIC_PANICKED | PVPANIC_CRASH_LOADED);
	ck_assert_uint_eq(v, 3);
}
END_TEST

START_TEST(test_pvpanic_write_panicked_requests_crash_exit)
{
	struct pvpanic p;
	pvpanic_init(&p, stop_rec_ctl(&stops));
	uint8_t v = 1;
	pvpanic_write(&p, 0, &v, 1);
	ck_assert_uint_eq(stops.n, 1);
	ck_assert_int_eq(stops.reason, MACHINE_STOP_GUEST_PANIC);
	ck_assert_int_eq(stops.code, EXIT_GUEST_CRASH);
}
END_TEST

START_TEST(test_pvpanic_write_crash_loaded_does_not_stop)
{
	struct pvpanic p;
	pvpanic_init(&p, stop_rec_ctl(&stops));
	uint8_t v = 2; /* a kdump kernel is taking over: let it run */
	pvpanic_write(&p, 0, &v, 1);
	ck_assert_uint_eq(stops.n, 0);
	v = 0;
	pvpanic_write(&p, 0, &v, 1);
	ck_assert_uint_eq(stops.n, 0);
}
END_TEST

/* ---- boot timer ---- */

START_TEST(test_boot_timer_port_0x80_codes_0x40_to_0x7f_are_marks)
{
	struct boot_timer t;
	boot_timer_init(&t, clock_now_ns(), NULL);
	static const uint8_t codes[] = {0x40, 0x5F, 0x60, 0x7F};
	for (size_t i = 0; i < sizeof(codes); i++)
		boot_timer_port_write(&t, 0, &codes[i], 1);
	ck_assert_uint_eq(t.nmarks, 4);
	for (size_t i = 0; i < sizeof(codes); i++) {
		ck_assert_uint_eq(t.marks[i].code, codes[i]);
		ck_assert_uint_eq(t.marks[i].mmio, 0);
	}
	ck_assert_uint_le(t.marks[0].ns, t.marks[3].ns);
}
END_TEST

START_TEST(test_boot_timer_other_port_0x80_codes_are_not_marks)
{
	struct boot_timer t;
	boot_timer_init(&t, clock_now_ns(), NULL);
	static const uint8_t codes[] = {0x00, 0x01, 0x3F, 0x80, 0xAA, 0xFF};
	for (size_t i = 0; i < sizeof(codes); i++)
		boot_timer_port_write(&t, 0, &codes[i], 1);
	ck_assert_uint_eq(t.nmarks, 0);
}
END_TEST

START_TEST(test_boot_timer_mmio_byte_123_at_offset_0_is_mark)
{
	struct boot_timer t;
	boot_timer_init(&t, clock_now_ns(), NULL);
	uint8_t v = 123;
	boot_timer_mmio_write(&t, 0, &v, 1);
	ck_assert_uint_eq(t.nmarks, 1);
	ck_assert_uint_eq(t.marks[0].mmio, 1);
	ck_assert_uint_eq(t.marks[0].code, 123);
}
END_TEST

START_TEST(test_boot_timer_other_mmio_writes_are_not_marks)
{
	struct boot_timer t;
	boot_timer_init(&t, clock_now_ns(), NULL);
	uint8_t v = 122;
	boot_timer_mmio_write(&t, 0, &v, 1);
	v = 124;
	boot_timer_mmio_write(&t, 0, &v, 1);
	v = 123;
	boot_timer_mmio_write(&t, 8, &v, 1); /* the magic at another offset */
	ck_assert_uint_eq(t.nmarks, 0);
}
END_TEST

/* ---- irq door ---- */

static struct irq_rec rec;
static struct irq_router router;

static void irq_setup(void)
{
	memset(&rec, 0, sizeof(rec));
	irq_router_init(&router, &irq_rec_ops, &rec, NULL);
}

START_TEST(test_irq_line_claimed_once_per_gsi)
{
	struct irq_line *a = irq_line_claim(&router, 4, "uart");
	ck_assert_ptr_nonnull(a);
	ck_assert_uint_eq(a->gsi, 4);
	ck_assert_ptr_null(irq_line_claim(&router, 4, "other"));
	struct irq_line *b = irq_line_claim(&router, 5, "other");
	ck_assert_ptr_nonnull(b);
	ck_assert_ptr_ne(a, b);
	ck_assert_ptr_nonnull(irq_line_claim(&router, 0, "pit"));
	ck_assert_ptr_nonnull(irq_line_claim(&router, IRQ_ISA_LINES - 1, "ide"));
}
END_TEST

START_TEST(test_irq_line_claim_out_of_range_null)
{
	/* ISA lines are GSI 0-15; 16-23 are shared PCI INTx pins (irq_intx_*). */
	ck_assert_ptr_null(irq_line_claim(&router, IRQ_ISA_LINES, "x"));
	ck_assert_ptr_null(irq_line_claim(&router, 23, "x"));
	ck_assert_ptr_null(irq_line_claim(&router, 1000, "x"));
	ck_assert_ptr_null(irq_line_claim(&router, UINT32_MAX, "x"));
}
END_TEST

START_TEST(test_irq_line_set_forwards_only_level_changes)
{
	struct irq_line *l = irq_line_claim(&router, 10, "dev");
	irq_line_set(l, 0); /* already low */
	ck_assert_uint_eq(rec.n, 0);
	irq_line_assert(l);
	irq_line_assert(l);
	irq_line_set(l, 7); /* any non-zero is "asserted" */
	ck_assert_uint_eq(rec.n, 1);
	ck_assert_uint_eq(rec.calls[0].gsi, 10);
	ck_assert_int_eq(rec.calls[0].level, 1);
	irq_line_deassert(l);
	irq_line_deassert(l);
	ck_assert_uint_eq(rec.n, 2);
	ck_assert_uint_eq(rec.calls[1].gsi, 10);
	ck_assert_int_eq(rec.calls[1].level, 0);
}
END_TEST

START_TEST(test_irq_counters_count_transitions)
{
	struct irq_line *l = irq_line_claim(&router, 11, "dev");
	for (int i = 0; i < 3; i++) {
		irq_line_assert(l);
		irq_line_assert(l);
		irq_line_deassert(l);
	}
	irq_line_assert(l);
	ck_assert_uint_eq(atomic_load(&l->stats.asserts), 4);
	ck_assert_uint_eq(atomic_load(&l->stats.deasserts), 3);
	ck_assert_uint_eq(atomic_load(&l->stats.errors), 0);
	ck_assert_uint_ne(atomic_load(&l->stats.last_ns), 0);
}
END_TEST

START_TEST(test_irq_sink_error_counted_in_errors)
{
	struct irq_line *l = irq_line_claim(&router, 3, "dev");
	rec.fail = 1;
	irq_line_assert(l);
	ck_assert_uint_eq(rec.n, 1);
	ck_assert_uint_eq(atomic_load(&l->stats.errors), 1);
	ck_assert_uint_eq(atomic_load(&l->stats.asserts), 0);
}
END_TEST

static Suite *devices_suite(void)
{
	Suite *s = suite_create("devices");
	TCase *t = tcase_create("debug_exit_i8042_pvpanic");
	tcase_add_test(t, test_status_port_exit_is_the_status_itself);
	tcase_add_test(t, test_status_port_reports_without_stopping);
	tcase_add_test(t, test_debug_exit_code_is_value_shifted_or_1_low_byte);
	tcase_add_test(t, test_debug_exit_byte_write_requests_stop_with_code);
	tcase_add_test(t, test_debug_exit_dword_write_requests_stop_with_code);
	tcase_add_test(t, test_i8042_status_obf_set_ibf_clear);
	tcase_add_test(t, test_i8042_command_0xfe_requests_stop_guest_off);
	tcase_add_test(t, test_i8042_other_commands_do_not_stop);
	tcase_add_test(t, test_pvpanic_read_returns_supported_events);
	tcase_add_test(t, test_pvpanic_write_panicked_requests_crash_exit);
	tcase_add_test(t, test_pvpanic_write_crash_loaded_does_not_stop);
	suite_add_tcase(s, t);

	t = tcase_create("boot_timer");
	tcase_add_test(t, test_boot_timer_port_0x80_codes_0x40_to_0x7f_are_marks);
	tcase_add_test(t, test_boot_timer_other_port_0x80_codes_are_not_marks);
	tcase_add_test(t, test_boot_timer_mmio_byte_123_at_offset_0_is_mark);
	tcase_add_test(t, test_boot_timer_other_mmio_writes_are_not_marks);
	suite_add_tcase(s, t);

	t = tcase_create("irq");
	tcase_add_checked_fixture(t, irq_setup, NULL);
	tcase_add_test(t, test_irq_line_claimed_once_per_gsi);
	tcase_add_test(t, test_irq_line_claim_out_of_range_null);
	tcase_add_test(t, test_irq_line_set_forwards_only_level_changes);
	tcase_add_test(t, test_irq_counters_count_transitions);
	tcase_add_test(t, test_irq_sink_error_counted_in_errors);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(devices_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
