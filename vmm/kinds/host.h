/*
 * What a device kind's glue (vmm/device_*.c) gets of the machine to build
 * its device into, instead of the whole `struct vm`: guest memory, the
 * interrupt door, the PCI bus, the log, the host console and who reads
 * stdin, KVM's ioeventfds, and the event loops that serve queues
 * (Firecracker's builder passes explicit arguments the same way).
 */
#ifndef VMM_DEVICE_HOST_H
#define VMM_DEVICE_HOST_H

#include "devices/pci/msix.h"

#include <stdbool.h>
#include <stdint.h>

struct console;
struct console_input;
struct event_loop;
struct guest_mem;
struct irq_router;
struct log;
struct pci_bus;

struct device_host {
	struct log *log;
	struct guest_mem *mem;
	struct irq_router *irq;
	struct pci_bus *pci;
	struct console *console;	     /* where a console device writes */
	struct console_input *console_input; /* who gets stdin: a console device takes it */
	enum irq_mode irq_mode;		     /* --irq-mode: every PCI function's */
	struct event_loop *main_loop;	     /* the main thread's */
	/* The loop for the next queue group of a multiqueue device: the I/O
	 * threads round robin, the main loop when there are none. */
	struct event_loop *(*next_loop)(void *ctx);
	/* KVM_IOEVENTFD: writes of len bytes at gpa signal fd (assign), or no
	 * longer. 0 or -errno. NULL in a harness without KVM: the transport
	 * then hands the MMIO write to the queue's loop itself. */
	int (*ioeventfd)(void *ctx, uint64_t gpa, unsigned len, int fd, bool assign);
	void *ctx;
};

#endif
