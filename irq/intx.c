/*
 * PCI INTx on IOAPIC pins 16-23: level-triggered and shared. The pin's
 * level is the OR of its sharers'. Two deliveries, never mixed on a pin:
 *  - resample: one irqfd + resamplefd per pin. Writing the irqfd asserts
 *    the line; at the guest's EOI KVM lowers it and signals the resamplefd;
 *    then every sharer re-evaluates, and if any still asserts the irqfd is
 *    written again. (A plain irqfd on a level pin would only pulse.)
 *  - line: KVM_IRQ_LINE raise/lower as the OR changes.
 */
#include "irq/irq.h"

#include "vmm/base/clock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

static int intx_pin_prepare(struct irq_router *r, struct irq_intx_pin *p)
{
	if (r->intx_mode != IRQ_INTX_RESAMPLE || p->irqfd_ready)
		return 0;
	p->irqfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p->resamplefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->irqfd < 0 || p->resamplefd < 0)
		return -errno;
	int ret = r->ops->irqfd_assign
		      ? r->ops->irqfd_assign(r->ctx, p->irqfd, p->gsi, p->resamplefd)
		      : -ENOSYS;
	if (ret < 0)
		return ret;
	p->irqfd_ready = true;
	return 0;
}

struct irq_intx_source *irq_intx_attach(struct irq_router *r, uint32_t gsi, const char *owner,
					void (*resample)(void *ctx), void *ctx)
{
	if (gsi < IRQ_INTX_FIRST || gsi >= IRQ_INTX_FIRST + IRQ_INTX_PINS)
		return NULL;
	struct irq_intx_pin *p = &r->pins[gsi - IRQ_INTX_FIRST];
	struct irq_intx_source *s = NULL;
	lock_take(&r->lock);
	if (p->nsharers < IRQ_INTX_MAX_SHARERS && intx_pin_prepare(r, p) == 0) {
		s = calloc(1, sizeof(*s));
		if (s) {
			*s = (struct irq_intx_source){p, r, p->nsharers, owner, resample, ctx};
			p->sharers[p->nsharers++] = s;
		}
	}
	lock_release(&r->lock);
	return s;
}

/* Lock held: tell KVM about a rising or falling OR-level. */
static void intx_pin_drive(struct irq_router *r, struct irq_intx_pin *p, int was, int now)
{
	if (was == now)
		return;
	if (r->intx_mode == IRQ_INTX_LINE) {
		if (r->ops->set_line(r->ctx, p->gsi, now) < 0) {
			atomic_fetch_add(&p->stats.errors, 1);
			return;
		}
		p->line_level = now;
	} else if (now) {
		uint64_t one = 1;
		if (write(p->irqfd, &one, sizeof(one)) != sizeof(one)) {
			atomic_fetch_add(&p->stats.errors, 1);
			return;
		}
	}
	/* In resample delivery a falling level needs nothing: KVM lowers the
	 * line at EOI and the resample finds it low. */
	if (now) {
		atomic_fetch_add(&p->stats.asserts, 1);
		atomic_store(&p->stats.last_ns, clock_now_ns());
	} else {
		atomic_fetch_add(&p->stats.deasserts, 1);
	}
}

void irq_intx_set(struct irq_intx_source *s, int level)
{
	struct irq_router *r = s->router;
	struct irq_intx_pin *p = s->pin;
	lock_take(&r->lock);
	int was = p->levels != 0;
	if (level)
		p->levels |= 1u << s->bit;
	else
		p->levels &= ~(1u << s->bit);
	intx_pin_drive(r, p, was, p->levels != 0);
	lock_release(&r->lock);
}

void irq_intx_handle_resample(struct irq_router *r, unsigned pin_index)
{
	uint64_t count;
	if (pin_index >= IRQ_INTX_PINS)
		return;
	struct irq_intx_pin *p = &r->pins[pin_index];
	if (p->resamplefd < 0 || read(p->resamplefd, &count, sizeof(count)) != sizeof(count))
		return;
	atomic_fetch_add(&p->stats.resamples, 1);
	/* Let each sharer re-evaluate (virtio: ISR still set?) outside the
	 * lock: they call irq_intx_set(). */
	for (unsigned i = 0; i < p->nsharers; i++)
		if (p->sharers[i]->resample)
			p->sharers[i]->resample(p->sharers[i]->resample_ctx);
	lock_take(&r->lock);
	if (p->levels) {
		uint64_t one = 1;
		if (write(p->irqfd, &one, sizeof(one)) == sizeof(one)) {
			atomic_fetch_add(&p->stats.refires, 1);
			atomic_store(&p->stats.last_ns, clock_now_ns());
		} else {
			atomic_fetch_add(&p->stats.errors, 1);
		}
	}
	lock_release(&r->lock);
}
