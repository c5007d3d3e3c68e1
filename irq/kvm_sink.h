/* The KVM side of the door: KVM_IRQ_LINE on the VM fd. */
#ifndef IRQ_KVM_SINK_H
#define IRQ_KVM_SINK_H

#include "irq.h"

struct irq_kvm_sink {
	int vm_fd;
};

extern const struct irq_sink_ops irq_kvm_sink_ops;

#endif
