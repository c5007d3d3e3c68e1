#include "irq/kvm_sink.h"

#include <errno.h>
#include <linux/kvm.h>
#include <stdlib.h>
#include <sys/ioctl.h>

static int irq_kvm_set_line(void *ctx, uint32_t gsi, int level)
{
	struct irq_kvm_sink *s = ctx;
	struct kvm_irq_level irq = {.irq = gsi, .level = level};
	return ioctl(s->vm_fd, KVM_IRQ_LINE, &irq) < 0 ? -errno : 0;
}

static int irq_kvm_signal_msi(void *ctx, uint64_t addr, uint32_t data)
{
	struct irq_kvm_sink *s = ctx;
	struct kvm_msi msi = {
	    .address_lo = (uint32_t)addr, .address_hi = (uint32_t)(addr >> 32), .data = data};
	int ret = ioctl(s->vm_fd, KVM_SIGNAL_MSI, &msi);
	return ret < 0 ? -errno : ret;
}

static int irq_kvm_set_routes(void *ctx, const struct irq_route *routes, unsigned n)
{
	struct irq_kvm_sink *s = ctx;
	struct kvm_irq_routing *t = calloc(1, sizeof(*t) + n * sizeof(t->entries[0]));
	if (!t)
		return -ENOMEM;
	t->nr = n;
	for (unsigned i = 0; i < n; i++) {
		struct kvm_irq_routing_entry *e = &t->entries[i];
		e->gsi = routes[i].gsi;
		if (routes[i].type == IRQ_ROUTE_IRQCHIP) {
			e->type = KVM_IRQ_ROUTING_IRQCHIP;
			e->u.irqchip.irqchip = routes[i].chip;
			e->u.irqchip.pin = routes[i].pin;
		} else {
			e->type = KVM_IRQ_ROUTING_MSI;
			e->u.msi.address_lo = (uint32_t)routes[i].addr;
			e->u.msi.address_hi = (uint32_t)(routes[i].addr >> 32);
			e->u.msi.data = routes[i].data;
		}
	}
	int ret = ioctl(s->vm_fd, KVM_SET_GSI_ROUTING, t);
	free(t);
	return ret < 0 ? -errno : 0;
}

static int irq_kvm_irqfd_assign(void *ctx, int fd, uint32_t gsi, int resample_fd)
{
	struct irq_kvm_sink *s = ctx;
	struct kvm_irqfd irqfd = {.fd = (uint32_t)fd, .gsi = gsi};
	if (resample_fd >= 0) {
		irqfd.flags = KVM_IRQFD_FLAG_RESAMPLE;
		irqfd.resamplefd = (uint32_t)resample_fd;
	}
	return ioctl(s->vm_fd, KVM_IRQFD, &irqfd) < 0 ? -errno : 0;
}

static int irq_kvm_irqfd_deassign(void *ctx, int fd, uint32_t gsi)
{
	struct irq_kvm_sink *s = ctx;
	struct kvm_irqfd irqfd = {.fd = (uint32_t)fd, .gsi = gsi, .flags = KVM_IRQFD_FLAG_DEASSIGN};
	return ioctl(s->vm_fd, KVM_IRQFD, &irqfd) < 0 ? -errno : 0;
}

const struct irq_sink_ops irq_kvm_sink_ops = {
    .set_line = irq_kvm_set_line,
    .signal_msi = irq_kvm_signal_msi,
    .set_routes = irq_kvm_set_routes,
    .irqfd_assign = irq_kvm_irqfd_assign,
    .irqfd_deassign = irq_kvm_irqfd_deassign,
};
