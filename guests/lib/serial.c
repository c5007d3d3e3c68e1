/*
 * COM1 output and a small printf.
 *
 * The 16550 programming follows the National Semiconductor PC16550D data
 * sheet: DLAB in LCR bit 7 exposes the divisor latch, divisor 1 = 115200
 * baud from the 1.8432 MHz clock, LCR 0x03 = 8N1, THRE (LSR bit 5) means the
 * transmit holding register can take a byte.
 */
#include "guest/kit.h"

#define COM1	       0x3F8
#define UART_THR       0
#define UART_DLL       0
#define UART_IER       1
#define UART_DLM       1
#define UART_FCR       2
#define UART_LCR       3
#define UART_MCR       4
#define UART_LSR       5
#define UART_LCR_DLAB  0x80
#define UART_LCR_8N1   0x03
#define UART_IIR       2
#define UART_LSR_THRE  0x20
#define UART_IIR_FIFOS 0xC0 /* both set: 16550A with working FIFOs */
#define UART_FIFO_SIZE 16

/* Bounded so a UART that never reports THRE (a missing device reads as
 * all-ones, which has THRE set anyway) cannot hang the guest. */
#define THRE_POLLS 100000

/* Every port access is a VM exit, and a slow one from CPL 3 on our KVM
 * hosts (tens of microseconds), so output polls LSR once per FIFO-load
 * rather than once per byte: with FIFOs on, THRE means the whole transmit
 * FIFO is empty (PC16550D, "FIFO interrupt mode operation"), as Linux's
 * 8250 driver assumes with its tx_loadsz. */
static unsigned tx_load = 1; /* bytes per THRE: 16 with FIFOs, else 1 */
static unsigned tx_credit;   /* bytes that may be written before polling */

void serial_init(void)
{
	outb(COM1 + UART_IER, 0x00);
	outb(COM1 + UART_LCR, UART_LCR_DLAB);
	outb(COM1 + UART_DLL, 0x01);
	outb(COM1 + UART_DLM, 0x00);
	outb(COM1 + UART_LCR, UART_LCR_8N1);
	outb(COM1 + UART_FCR, 0x07); /* enable and clear both FIFOs */
	outb(COM1 + UART_MCR, 0x03); /* DTR, RTS */
	bool fifos = (inb(COM1 + UART_IIR) & UART_IIR_FIFOS) == UART_IIR_FIFOS;
	tx_load = fifos ? UART_FIFO_SIZE : 1;
	tx_credit = 0;
}

void serial_putc(char c)
{
	if (tx_credit == 0) {
		for (int i = 0; i < THRE_POLLS; i++) {
			if (inb(COM1 + UART_LSR) & UART_LSR_THRE)
				break;
			cpu_relax();
		}
		tx_credit = tx_load;
	}
	tx_credit--;
	outb(COM1 + UART_THR, (uint8_t)c);
}

void serial_write(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		serial_putc(s[i]);
}

/* The formatter writes through a sink so printf and snprintf share it. */
struct sink {
	char *buf;   /* NULL: serial */
	size_t size; /* buffer size incl. the NUL */
	size_t len;  /* characters produced so far */
};

static void sink_putc(struct sink *s, char c)
{
	if (!s->buf)
		serial_putc(c);
	else if (s->len + 1 < s->size)
		s->buf[s->len] = c;
	s->len++;
}

static void sink_pad(struct sink *s, char c, int n)
{
	while (n-- > 0)
		sink_putc(s, c);
}

static void emit_number(struct sink *s, uint64_t v, bool negative, unsigned base, bool upper,
			int width, bool zero_pad, bool left)
{
	const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
	char tmp[24];
	int n = 0;

	do {
		tmp[n++] = digits[v % base];
		v /= base;
	} while (v);
	int total = n + (negative ? 1 : 0);
	if (!left && !zero_pad)
		sink_pad(s, ' ', width - total);
	if (negative)
		sink_putc(s, '-');
	if (!left && zero_pad)
		sink_pad(s, '0', width - total);
	while (n)
		sink_putc(s, tmp[--n]);
	if (left)
		sink_pad(s, ' ', width - total);
}

static void format(struct sink *s, const char *fmt, va_list ap)
{
	for (; *fmt; fmt++) {
		if (*fmt != '%') {
			sink_putc(s, *fmt);
			continue;
		}
		fmt++;
		bool zero_pad = false, left = false;
		for (;; fmt++) {
			if (*fmt == '0')
				zero_pad = true;
			else if (*fmt == '-')
				left = true;
			else
				break;
		}
		int width = 0;
		if (*fmt == '*') {
			width = va_arg(ap, int);
			fmt++;
		}
		while (*fmt >= '0' && *fmt <= '9')
			width = width * 10 + (*fmt++ - '0');
		int precision = -1; /* only %s uses it: at most that many chars */
		if (*fmt == '.') {
			fmt++;
			precision = 0;
			if (*fmt == '*') {
				precision = va_arg(ap, int);
				fmt++;
			}
			while (*fmt >= '0' && *fmt <= '9')
				precision = precision * 10 + (*fmt++ - '0');
		}
		int longs = 0;
		while (*fmt == 'l' || *fmt == 'z') {
			longs = *fmt == 'z' ? 2 : longs + 1;
			fmt++;
		}

		switch (*fmt) {
		case 'd':
		case 'i': {
			int64_t v = longs ? va_arg(ap, int64_t) : va_arg(ap, int);
			uint64_t mag = v < 0 ? -(uint64_t)v : (uint64_t)v;
			emit_number(s, mag, v < 0, 10, false, width, zero_pad, left);
			break;
		}
		case 'u':
		case 'x':
		case 'X': {
			uint64_t v = longs ? va_arg(ap, uint64_t) : va_arg(ap, unsigned);
			emit_number(s, v, false, *fmt == 'u' ? 10 : 16, *fmt == 'X', width,
				    zero_pad, left);
			break;
		}
		case 'p':
			sink_putc(s, '0');
			sink_putc(s, 'x');
			emit_number(s, (uint64_t)va_arg(ap, void *), false, 16, false, width,
				    zero_pad, left);
			break;
		case 'c':
			sink_pad(s, ' ', left ? 0 : width - 1);
			sink_putc(s, (char)va_arg(ap, int));
			sink_pad(s, ' ', left ? width - 1 : 0);
			break;
		case 's': {
			const char *str = va_arg(ap, const char *);
			if (!str)
				str = "(null)";
			int n =
			    (int)(precision >= 0 ? strnlen(str, (size_t)precision) : strlen(str));
			sink_pad(s, ' ', left ? 0 : width - n);
			for (int i = 0; i < n; i++)
				sink_putc(s, str[i]);
			sink_pad(s, ' ', left ? width - n : 0);
			break;
		}
		case '%': sink_putc(s, '%'); break;
		case '\0': return;
		default:
			/* Unknown conversion: show it rather than guess. */
			sink_putc(s, '%');
			sink_putc(s, *fmt);
			break;
		}
	}
}

int vprintf(const char *fmt, va_list ap)
{
	struct sink s = {NULL, 0, 0};
	format(&s, fmt, ap);
	return (int)s.len;
}

int printf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vprintf(fmt, ap);
	va_end(ap);
	return n;
}

int vsnprintf(char *buf, size_t size, const char *fmt, va_list ap)
{
	struct sink s = {buf, size, 0};
	format(&s, fmt, ap);
	if (size)
		buf[s.len < size ? s.len : size - 1] = '\0';
	return (int)s.len;
}

int snprintf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	return n;
}
