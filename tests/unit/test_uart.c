/*
 * 8250/16550A UART against the PC16550D data sheet (register table 2,
 * interrupt table 4) and what Linux's drivers/tty/serial/8250/8250_port.c
 * checks in autoconfig() and serial8250_do_startup().
 */
#include "helpers.h"

#include "devices/legacy/uart8250.h"
#include "irq/irq.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

enum {
	RBR = 0,
	THR = 0,
	DLL = 0,
	IER = 1,
	DLM = 1,
	IIR = 2,
	FCR = 2,
	LCR = 3,
	MCR = 4,
	LSR = 5,
	MSR = 6,
	SCR = 7
};
#define IER_ERBFI 0x01
#define IER_ETBEI 0x02
#define LSR_DR	  0x01
#define LSR_THRE  0x20
#define LSR_TEMT  0x40
#define GSI	  4

static struct irq_rec rec;
static struct irq_router router;
static struct char_rec out;
static struct uart8250 uart;

static void setup(void)
{
	memset(&rec, 0, sizeof(rec));
	irq_router_init(&router, &irq_rec_ops, &rec, NULL);
	struct irq_line *line = irq_line_claim(&router, GSI, "uart");
	ck_assert_ptr_nonnull(line);
	uart8250_init(&uart, line, char_rec_sink(&out));
}

static uint8_t rd(unsigned reg)
{
	uint8_t v = 0x5C;
	uart8250_read(&uart, reg, &v, 1);
	return v;
}

static void wr(unsigned reg, uint8_t v)
{
	uart8250_write(&uart, reg, &v, 1);
}

/* 1 asserted, 0 deasserted, -1 never driven. */
static int line(void)
{
	return irq_rec_last(&rec, GSI);
}

START_TEST(test_lsr_thre_and_temt_set_at_reset)
{
	ck_assert_uint_eq(rd(LSR) & (LSR_THRE | LSR_TEMT), LSR_THRE | LSR_TEMT);
	ck_assert_uint_eq(rd(LSR) & LSR_DR, 0);
	ck_assert_uint_eq(rd(IIR) & 0x0F, 0x01); /* no interrupt pending */
}
END_TEST

START_TEST(test_scratch_register_holds_value)
{
	wr(SCR, 0xA5);
	ck_assert_uint_eq(rd(SCR), 0xA5);
	wr(SCR, 0x5A);
	ck_assert_uint_eq(rd(SCR), 0x5A);
}
END_TEST

START_TEST(test_ier_low_nibble_reads_back_as_autoconfig_checks)
{
	wr(IER, 0x00);
	ck_assert_uint_eq(rd(IER) & 0x0F, 0x00);
	wr(IER, 0x0F);
	ck_assert_uint_eq(rd(IER) & 0x0F, 0x0F);
}
END_TEST

START_TEST(test_lcr_dlab_maps_offsets_0_and_1_to_divisor_latch)
{
	wr(IER, 0x05);
	wr(LCR, 0x83); /* DLAB, 8N1 */
	ck_assert_uint_eq(rd(LCR), 0x83);
	wr(DLL, 0x01);
	wr(DLM, 0x02);
	ck_assert_uint_eq(rd(DLL), 0x01);
	ck_assert_uint_eq(rd(DLM), 0x02);
	ck_assert_uint_eq(out.n, 0); /* DLL write is not a transmitted byte */
	wr(LCR, 0x03);
	ck_assert_uint_eq(rd(IER), 0x05); /* IER untouched by the DLM write */
	wr(IER, 0x00);
	wr(LCR, 0x83);
	ck_assert_uint_eq(rd(DLL), 0x01);
	ck_assert_uint_eq(rd(DLM), 0x02);
}
END_TEST

START_TEST(test_fcr_enable_makes_iir_report_16550a_fifo)
{
	ck_assert_uint_eq(rd(IIR) >> 6, 0); /* FIFOs off at reset */
	wr(FCR, 0x07);
	ck_assert_uint_eq(rd(IIR) >> 6, 3); /* autoconfig: case 3 -> 16550A */
	wr(FCR, 0x00);
	ck_assert_uint_eq(rd(IIR) >> 6, 0);
}
END_TEST

START_TEST(test_loopback_mcr_0x1a_gives_msr_high_nibble_0x90)
{
	/* autoconfig(): MCR = LOOP | RTS | OUT2 -> CTS | DCD. */
	wr(MCR, 0x1A);
	ck_assert_uint_eq(rd(MSR) & 0xF0, 0x90);
	wr(MCR, 0x10 | 0x01 | 0x04); /* DTR -> DSR, OUT1 -> RI */
	ck_assert_uint_eq(rd(MSR) & 0xF0, 0x60);
	wr(MCR, 0x10);
	ck_assert_uint_eq(rd(MSR) & 0xF0, 0x00);
}
END_TEST

START_TEST(test_loopback_thr_byte_appears_in_rbr_and_sets_dr)
{
	wr(MCR, 0x1A);
	wr(THR, 0x55);
	ck_assert_uint_eq(rd(LSR) & LSR_DR, LSR_DR);
	ck_assert_uint_eq(rd(RBR), 0x55);
	ck_assert_uint_eq(rd(LSR) & LSR_DR, 0);
	/* In loopback the transmitter is disconnected from the line. */
	ck_assert_uint_eq(out.n, 0);
}
END_TEST

START_TEST(test_enabling_etbei_with_thr_empty_raises_thri)
{
	wr(IER, IER_ETBEI);
	ck_assert_int_eq(line(), 1);
	ck_assert_uint_eq(rd(IIR), 0x02);
}
END_TEST

START_TEST(test_reading_iir_clears_thri_and_deasserts_line)
{
	wr(IER, IER_ETBEI);
	ck_assert_uint_eq(rd(IIR), 0x02);
	ck_assert_int_eq(line(), 0);
	ck_assert_uint_eq(rd(IIR), 0x01);
}
END_TEST

START_TEST(test_ier_off_then_etbei_again_reasserts_thri)
{
	/* serial8250_do_startup() probes UART_BUG_THRE exactly this way. */
	wr(IER, IER_ETBEI);
	ck_assert_uint_eq(rd(IIR), 0x02);
	wr(IER, 0);
	ck_assert_uint_eq(rd(IIR), 0x01);
	wr(IER, IER_ETBEI);
	ck_assert_int_eq(line(), 1);
	ck_assert_uint_eq(rd(IIR), 0x02);
}
END_TEST

START_TEST(test_thr_write_delivers_byte_and_rearms_thri)
{
	wr(IER, IER_ETBEI);
	ck_assert_uint_eq(rd(IIR), 0x02);
	ck_assert_int_eq(line(), 0);
	wr(THR, 'A');
	wr(THR, 'b');
	ck_assert_uint_eq(out.n, 2);
	ck_assert_mem_eq(out.buf, "Ab", 2);
	ck_assert_int_eq(line(), 1);
	ck_assert_uint_eq(rd(LSR) & (LSR_THRE | LSR_TEMT), LSR_THRE | LSR_TEMT);
	ck_assert_uint_eq(rd(IIR), 0x02);
}
END_TEST

START_TEST(test_thr_write_without_etbei_raises_no_interrupt)
{
	wr(THR, 'z');
	ck_assert_uint_eq(out.n, 1);
	ck_assert_int_ne(line(), 1);
	ck_assert_uint_eq(rd(IIR), 0x01);
}
END_TEST

START_TEST(test_received_data_interrupt_has_priority_over_thri)
{
	wr(IER, IER_ERBFI | IER_ETBEI);
	ck_assert_uint_eq(uart8250_receive(&uart, (const uint8_t *)"hi", 2), 2);
	ck_assert_int_eq(line(), 1);
	ck_assert_uint_eq(rd(LSR) & LSR_DR, LSR_DR);
	ck_assert_uint_eq(rd(IIR), 0x04);
	ck_assert_uint_eq(rd(RBR), 'h');
	ck_assert_uint_eq(rd(IIR), 0x04);
	ck_assert_uint_eq(rd(RBR), 'i');
	ck_assert_uint_eq(rd(LSR) & LSR_DR, 0);
	/* THRI was not the reported source, so reading IIR did not clear it. */
	ck_assert_uint_eq(rd(IIR), 0x02);
	ck_assert_uint_eq(rd(IIR), 0x01);
	ck_assert_int_eq(line(), 0);
}
END_TEST

START_TEST(test_reading_rbr_drains_data_and_deasserts_line)
{
	wr(IER, IER_ERBFI);
	ck_assert_uint_eq(uart8250_receive(&uart, (const uint8_t *)"x", 1), 1);
	ck_assert_int_eq(line(), 1);
	ck_assert_uint_eq(rd(RBR), 'x');
	ck_assert_int_eq(line(), 0);
	ck_assert_uint_eq(rd(IIR), 0x01);
	ck_assert_uint_eq(rd(LSR) & LSR_DR, 0);
}
END_TEST

START_TEST(test_received_data_without_erbfi_sets_dr_only)
{
	ck_assert_uint_eq(uart8250_receive(&uart, (const uint8_t *)"q", 1), 1);
	ck_assert_uint_eq(rd(LSR) & LSR_DR, LSR_DR);
	ck_assert_int_ne(line(), 1);
	ck_assert_uint_eq(rd(IIR), 0x01);
	ck_assert_uint_eq(rd(RBR), 'q');
}
END_TEST

START_TEST(test_full_receive_buffer_accepts_fewer_bytes)
{
	size_t len = 4 * UART_RX_CAP;
	uint8_t *in = malloc(len);
	fill_noise(in, len, 8);
	size_t n = uart8250_receive(&uart, in, len);
	ck_assert_uint_gt(n, 0);
	ck_assert_uint_lt(n, len);
	ck_assert_uint_eq(uart8250_receive(&uart, in, 1), 0);
	/* What was accepted reads back in order, and nothing more. */
	size_t got = 0;
	while ((rd(LSR) & LSR_DR) && got <= len) {
		ck_assert_uint_eq(rd(RBR), in[got]);
		got++;
	}
	ck_assert_uint_eq(got, n);
	/* Room again once drained. */
	ck_assert_uint_eq(uart8250_receive(&uart, in, 1), 1);
	free(in);
}
END_TEST

static Suite *uart_suite(void)
{
	Suite *s = suite_create("uart8250");
	TCase *t = tcase_create("registers");
	tcase_add_checked_fixture(t, setup, NULL);
	tcase_add_test(t, test_lsr_thre_and_temt_set_at_reset);
	tcase_add_test(t, test_scratch_register_holds_value);
	tcase_add_test(t, test_ier_low_nibble_reads_back_as_autoconfig_checks);
	tcase_add_test(t, test_lcr_dlab_maps_offsets_0_and_1_to_divisor_latch);
	tcase_add_test(t, test_fcr_enable_makes_iir_report_16550a_fifo);
	tcase_add_test(t, test_loopback_mcr_0x1a_gives_msr_high_nibble_0x90);
	tcase_add_test(t, test_loopback_thr_byte_appears_in_rbr_and_sets_dr);
	suite_add_tcase(s, t);

	t = tcase_create("interrupts");
	tcase_add_checked_fixture(t, setup, NULL);
	tcase_add_test(t, test_enabling_etbei_with_thr_empty_raises_thri);
	tcase_add_test(t, test_reading_iir_clears_thri_and_deasserts_line);
	tcase_add_test(t, test_ier_off_then_etbei_again_reasserts_thri);
	tcase_add_test(t, test_thr_write_delivers_byte_and_rearms_thri);
	tcase_add_test(t, test_thr_write_without_etbei_raises_no_interrupt);
	tcase_add_test(t, test_received_data_interrupt_has_priority_over_thri);
	tcase_add_test(t, test_reading_rbr_drains_data_and_deasserts_line);
	tcase_add_test(t, test_received_data_without_erbfi_sets_dr_only);
	tcase_add_test(t, test_full_receive_buffer_accepts_fewer_bytes);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(uart_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
