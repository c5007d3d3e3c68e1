/* The KVM side of the door, the only file in irq/ that calls KVM: lines
 * (KVM_IRQ_LINE), MSIs (KVM_SIGNAL_MSI), the GSI routing table
 * (KVM_SET_GSI_ROUTING) and irqfds with or without resample, assigned and
 * deassigned (KVM_IRQFD), all on the VM fd. */
#ifndef IRQ_KVM_SINK_H
#define IRQ_KVM_SINK_H

#include "irq/irq.h"

struct irq_kvm_sink {
	int vm_fd;
};

extern const struct irq_sink_ops irq_kvm_sink_ops;

#endif
