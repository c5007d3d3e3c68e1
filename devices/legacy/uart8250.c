#include "devices/legacy/uart8250.h"

#include "irq/irq.h"

#include <string.h>

/* Register offsets and bits (PC16550D data sheet, table 2). */
enum {
	UART_RBR_THR = 0,
	UART_IER = 1,
	UART_IIR_FCR = 2,
	UART_LCR = 3,
	UART_MCR = 4,
	UART_LSR = 5,
	UART_MSR = 6,
	UART_SCR = 7
};
#define LCR_DLAB     0x80
#define IER_ERBFI    0x01 /* received data available */
#define IER_ETBEI    0x02 /* THR empty */
#define IER_ELSI     0x04 /* receiver line status */
#define IER_EDSSI    0x08 /* modem status */
#define IIR_NO_INT   0x01
#define IIR_RLS	     0x06
#define IIR_RDA	     0x04
#define IIR_THRI     0x02
#define IIR_MSI	     0x00
#define IIR_FIFO_ON  0xC0
#define FCR_ENABLE   0x01
#define FCR_CLEAR_RX 0x02
#define LSR_DR	     0x01
#define LSR_OE	     0x02
#define LSR_THRE     0x20
#define LSR_TEMT     0x40
#define MCR_LOOP     0x10
#define MSR_DELTAS   0x0F
#define MSR_CTS	     0x10
#define MSR_DSR	     0x20
#define MSR_RI	     0x40
#define MSR_DCD	     0x80

void uart8250_init(struct uart8250 *u, struct irq_line *irq, struct char_sink out)
{
	memset(u, 0, sizeof(*u));
	lock_init(&u->lock, "UART", LOCK_RANK_DEVICE);
	u->irq = irq;
	u->out = out;
	u->lsr = LSR_THRE | LSR_TEMT;
	u->msr = MSR_DCD | MSR_DSR | MSR_CTS; /* a terminal is attached */
	u->dll = 0x0C;			      /* 9600 baud, the reset value */
}

/* The pending interrupt of highest priority (data sheet, table 4). */
static uint8_t uart_iir(const struct uart8250 *u)
{
	if ((u->ier & IER_ELSI) && (u->lsr & LSR_OE))
		return IIR_RLS;
	if ((u->ier & IER_ERBFI) && u->rx_count)
		return IIR_RDA;
	if ((u->ier & IER_ETBEI) && u->thri_pending)
		return IIR_THRI;
	if ((u->ier & IER_EDSSI) && (u->msr & MSR_DELTAS))
		return IIR_MSI;
	return IIR_NO_INT;
}

static void uart_update_irq(struct uart8250 *u)
{
	if (u->rx_count)
		u->lsr |= LSR_DR;
	else
		u->lsr &= ~LSR_DR;
	if (u->irq)
		irq_line_set(u->irq, uart_iir(u) != IIR_NO_INT);
}

static void uart_rx_push(struct uart8250 *u, uint8_t c)
{
	if (u->rx_count == UART_RX_CAP) {
		u->lsr |= LSR_OE;
		u->rx_dropped++;
		return;
	}
	u->rx[(u->rx_head + u->rx_count) % UART_RX_CAP] = c;
	u->rx_count++;
}

/* Modem status in loopback mirrors MCR outputs (data sheet, MCR bit 4). */
static void uart_set_mcr(struct uart8250 *u, uint8_t v)
{
	uint8_t old = u->msr & ~MSR_DELTAS, now;
	u->mcr = v & 0x1F;
	if (u->mcr & MCR_LOOP)
		now = (uint8_t)(((u->mcr & 0x01) ? MSR_DSR : 0) | ((u->mcr & 0x02) ? MSR_CTS : 0) |
				((u->mcr & 0x04) ? MSR_RI : 0) | ((u->mcr & 0x08) ? MSR_DCD : 0));
	else
		now = MSR_DCD | MSR_DSR | MSR_CTS;
	uint8_t changed = old ^ now;
	uint8_t delta =
	    (uint8_t)(((changed & MSR_CTS) ? 0x01 : 0) | ((changed & MSR_DSR) ? 0x02 : 0) |
		      ((old & MSR_RI) && !(now & MSR_RI) ? 0x04 : 0) |
		      ((changed & MSR_DCD) ? 0x08 : 0));
	u->msr = (uint8_t)(now | (u->msr & MSR_DELTAS) | delta);
}

static uint8_t uart_reg_read(struct uart8250 *u, unsigned reg)
{
	uint8_t v = 0;
	switch (reg) {
	case UART_RBR_THR:
		if (u->lcr & LCR_DLAB)
			return u->dll;
		if (u->rx_count) {
			v = u->rx[u->rx_head];
			u->rx_head = (u->rx_head + 1) % UART_RX_CAP;
			u->rx_count--;
		}
		return v;
	case UART_IER: return (u->lcr & LCR_DLAB) ? u->dlm : u->ier;
	case UART_IIR_FCR:
		v = uart_iir(u);
		if (v == IIR_THRI)
			u->thri_pending = false; /* reading IIR clears THRE (table 4) */
		return (uint8_t)(v | ((u->fcr & FCR_ENABLE) ? IIR_FIFO_ON : 0));
	case UART_LCR: return u->lcr;
	case UART_MCR: return u->mcr;
	case UART_LSR:
		v = u->lsr;
		u->lsr &= ~LSR_OE; /* error bits clear on read */
		return v;
	case UART_MSR:
		v = u->msr;
		u->msr &= ~MSR_DELTAS;
		return v;
	default: return u->scr;
	}
}

static void uart_reg_write(struct uart8250 *u, unsigned reg, uint8_t v)
{
	switch (reg) {
	case UART_RBR_THR:
		if (u->lcr & LCR_DLAB) {
			u->dll = v;
			return;
		}
		if (u->mcr & MCR_LOOP) {
			uart_rx_push(u, v);
		} else {
			u->tx_bytes++;
			char_sink_write(&u->out, &v, 1);
		}
		/* Sent at once: THR is empty again, so THRE re-asserts. */
		u->thri_pending = true;
		return;
	case UART_IER:
		if (u->lcr & LCR_DLAB) {
			u->dlm = v;
			return;
		}
		/* Enabling ETBEI while THR is empty raises THRE at once; Linux's
		 * serial8250 startup tests exactly that (UART_BUG_THRE). */
		if (!(u->ier & IER_ETBEI) && (v & IER_ETBEI))
			u->thri_pending = true;
		u->ier = v & 0x0F;
		return;
	case UART_IIR_FCR:
		if (v & FCR_CLEAR_RX) {
			u->rx_count = 0;
			u->rx_head = 0;
		}
		u->fcr = v & 0xC9; /* enable, DMA mode, trigger level */
		return;
	case UART_LCR: u->lcr = v; return;
	case UART_MCR: uart_set_mcr(u, v); return;
	case UART_LSR:
	case UART_MSR: return; /* read-only */
	default: u->scr = v; return;
	}
}

void uart8250_read(void *opaque, uint64_t offset, void *data, unsigned len)
{
	struct uart8250 *u = opaque;
	uint8_t *out = data;
	lock_take(&u->lock);
	/* A wider access reads consecutive registers, as on an ISA bus. */
	for (unsigned i = 0; i < len; i++)
		out[i] =
		    (offset + i < UART_NREGS) ? uart_reg_read(u, (unsigned)(offset + i)) : 0xFF;
	uart_update_irq(u);
	lock_release(&u->lock);
}

void uart8250_write(void *opaque, uint64_t offset, const void *data, unsigned len)
{
	struct uart8250 *u = opaque;
	const uint8_t *in = data;
	lock_take(&u->lock);
	for (unsigned i = 0; i < len; i++)
		if (offset + i < UART_NREGS)
			uart_reg_write(u, (unsigned)(offset + i), in[i]);
	uart_update_irq(u);
	lock_release(&u->lock);
}

size_t uart8250_receive(struct uart8250 *u, const uint8_t *buf, size_t len)
{
	size_t n = 0;
	lock_take(&u->lock);
	/* In loopback the receiver is disconnected from the line. */
	if (!(u->mcr & MCR_LOOP)) {
		while (n < len && u->rx_count < UART_RX_CAP)
			uart_rx_push(u, buf[n++]);
		uart_update_irq(u);
	}
	lock_release(&u->lock);
	return n;
}
