/*
 * 8250/16550A UART (COM1 at 0x3F8, IRQ 4), complete enough for Linux's
 * serial8250 autoconfig to report a 16550A and to drive it with THRE
 * interrupts. Transmission is instantaneous: THR is always empty again
 * right after a write. Reference: National Semiconductor PC16550D data sheet.
 */
#ifndef DEVICES_UART8250_H
#define DEVICES_UART8250_H

#include "vmm/base/lock.h"

#include "vmm/base/machine_ctl.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct irq_line;

#define UART_COM1_BASE 0x3F8
#define UART_COM1_IRQ  4
#define UART_NREGS     8
#define UART_RX_CAP    1024 /* host-side buffer in front of the 16-byte FIFO */

struct uart8250 {
	struct vmm_lock lock;
	struct irq_line *irq;
	struct char_sink out;
	uint8_t ier, lcr, mcr, lsr, msr, scr, fcr, dll, dlm;
	bool thri_pending; /* THR-empty interrupt latched, cleared by IIR read/THR write */
	uint8_t rx[UART_RX_CAP];
	unsigned rx_head, rx_count;
	uint64_t rx_dropped, tx_bytes;
};

void uart8250_init(struct uart8250 *u, struct irq_line *irq, struct char_sink out);
void uart8250_read(void *opaque, uint64_t offset, void *data, unsigned len);
void uart8250_write(void *opaque, uint64_t offset, const void *data, unsigned len);
/* Host input (keyboard) into the receive buffer; returns bytes accepted. */
size_t uart8250_receive(struct uart8250 *u, const uint8_t *buf, size_t len);

#endif
