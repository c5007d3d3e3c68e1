#include "kvm_sink.h"

#include <errno.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>

static int irq_kvm_set_line(void *ctx, uint32_t gsi, int level)
{
	struct irq_kvm_sink *s = ctx;
	struct kvm_irq_level irq = {.irq = gsi, .level = level};
	return ioctl(s->vm_fd, KVM_IRQ_LINE, &irq) < 0 ? -errno : 0;
}

const struct irq_sink_ops irq_kvm_sink_ops = {
	.set_line = irq_kvm_set_line,
};
