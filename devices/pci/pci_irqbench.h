/*
 * The interrupt-latency bench device (scripts/vmm-bench, guests/irqbench):
 * the guest arms it, goes idle in hlt, and the device raises the interrupt
 * from the I/O thread through the interrupt door, as a completion does; the
 * guest's handler acknowledges with one port write, on a vCPU thread. The
 * device stamps both ends with the one clock (vmm/base/clock.h) and keeps
 * t1 - t0 per sample.
 *
 * Vendor 0x1234, device 0x7E58, class 0xFF0000, INTA#.
 * BAR0 (I/O, 16 ports), 32-bit registers:
 *   0x0 ACK       WO  the handler's write: t1; ends the INTx condition
 *   0x4 ARM       WO  vector index, or IRQBENCH_ARM_INTX: after DELAY_US the
 *                     I/O thread stamps t0 and raises it: INTx while MSI-X
 *                     is off (always in IRQ_MODE_INTX); with MSI-X on, a
 *                     vector beyond the table (IRQBENCH_ARM_INTX is one)
 *                     sends nothing (6.8.2: no INTx then)
 *   0x8 DELAY_US  RW  default 200
 *   0xC SAMPLES   RO  samples recorded (up before the ACK write returns)
 * BAR1 (MMIO): the MSI-X table at 0 and the PBA on the next page;
 * unimplemented in IRQ_MODE_INTX (devices/pci/msix.h).
 */
#ifndef DEVICES_PCI_IRQBENCH_H
#define DEVICES_PCI_IRQBENCH_H

#include "vmm/base/lock.h"

#include "devices/pci/msix.h"
#include "devices/pci/pci.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#define IRQBENCH_VENDOR	     0x1234
#define IRQBENCH_DEVICE	     0x7E58
#define IRQBENCH_ARM_INTX    0xFFFFFFFFu
#define IRQBENCH_MSIX_BAR    1
#define IRQBENCH_DELAY_US    200
#define IRQBENCH_MAX_SAMPLES (1u << 20)
enum {
	IRQBENCH_REG_ACK = 0x0,
	IRQBENCH_REG_ARM = 0x4,
	IRQBENCH_REG_DELAY_US = 0x8,
	IRQBENCH_REG_SAMPLES = 0xC,
	IRQBENCH_IO_SIZE = 0x10,
};

struct pci_irqbench {
	struct pci_device pci;
	struct msix msix;
	int timer_fd; /* the I/O thread fires when it expires */
	struct vmm_lock lock;
	uint32_t armed;	    /* what ARM asked for, while the timer runs */
	bool timer_running; /* ARM seen, not fired yet */
	bool outstanding;   /* fired, no ACK yet */
	uint64_t t0_ns;
	uint32_t delay_us;
	uint64_t *samples_ns; /* t1 - t0 */
	uint32_t nsamples, cap;
	atomic_uint_fast64_t fires, acks, stray_acks, dropped;
};

int pci_irqbench_init(struct pci_irqbench *b, const char *name, struct irq_router *irq,
		      unsigned nvectors, enum irq_mode mode);
/* The I/O thread: timer_fd is readable. */
void pci_irqbench_timer_ready(struct pci_irqbench *b);
/* Writes "# comment" lines, then one sample in nanoseconds per line. */
int pci_irqbench_write_samples(struct pci_irqbench *b, FILE *out);
void pci_irqbench_destroy(struct pci_irqbench *b);

#endif
