/*
 * MSI vectors and the GSI routing table.
 *
 * irqfd delivery: a vector gets a GSI (from 24 up) and an eventfd the first
 * time it is unmasked with a valid address; its route is installed before
 * its irqfd (a host panic on AMD was traced to the reverse order) and the
 * irqfd then stays registered: masking is checked here, before the eventfd
 * write. KVM_SET_GSI_ROUTING replaces the whole table, KVM's defaults
 * included, so every send carries GSI 0-23 too; it is sent only when an
 * unmasked route really changed (needless updates cost another VMM ~30% of
 * guest boot time), and once for all the changes of one guest access
 * (irq_routes_begin/commit, as QEMU's kvm_irqchip_commit_routes): enabling
 * MSI-X with N vectors unmasked is one table, not N.
 */
#include "irq/irq.h"

#include "vmm/base/clock.h"
#include "vmm/base/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* An MSI address targets the LAPIC window 0xFEExxxxx (Intel SDM vol. 3,
 * 11.11.1); anything else is a broken guest, not an interrupt. */
static bool msi_address_valid(uint64_t addr)
{
	return (addr >> 20) == 0xFEE;
}

unsigned irq_routes_build(struct irq_router *r, struct irq_route *out)
{
	unsigned n = 0;
	/* KVM's defaults (irq_comm.c): GSI 0-15 on both PICs and the IOAPIC,
	 * GSI 16-23 on the IOAPIC. */
	for (uint32_t gsi = 0; gsi < IRQ_ISA_LINES; gsi++) {
		out[n++] =
		    (struct irq_route){.gsi = gsi,
				       .type = IRQ_ROUTE_IRQCHIP,
				       .chip = gsi < 8 ? IRQ_CHIP_PIC_MASTER : IRQ_CHIP_PIC_SLAVE,
				       .pin = gsi % 8};
		out[n++] = (struct irq_route){
		    .gsi = gsi, .type = IRQ_ROUTE_IRQCHIP, .chip = IRQ_CHIP_IOAPIC, .pin = gsi};
	}
	for (uint32_t gsi = IRQ_INTX_FIRST; gsi < IRQ_INTX_FIRST + IRQ_INTX_PINS; gsi++)
		out[n++] = (struct irq_route){
		    .gsi = gsi, .type = IRQ_ROUTE_IRQCHIP, .chip = IRQ_CHIP_IOAPIC, .pin = gsi};
	for (unsigned i = 0; i < r->nvectors && n < IRQ_MAX_ROUTES; i++) {
		const struct irq_msi_vector *v = r->vectors[i];
		if (v->gsi && v->installed)
			out[n++] = (struct irq_route){.gsi = v->gsi,
						      .type = IRQ_ROUTE_MSI,
						      .addr = v->inst_addr,
						      .data = v->inst_data};
	}
	return n;
}

/* Lock held. The table is built in a buffer the router keeps. */
static int msi_send_routes(struct irq_router *r)
{
	if (!r->route_table && !(r->route_table = malloc(IRQ_MAX_ROUTES * sizeof(*r->route_table))))
		return -ENOMEM;
	unsigned n = irq_routes_build(r, r->route_table);
	int ret = r->ops->set_routes ? r->ops->set_routes(r->ctx, r->route_table, n) : -ENOSYS;
	atomic_fetch_add(&r->route_table_updates, 1);
	return ret;
}

struct irq_msi_vector *irq_msi_vector_new(struct irq_router *r, const char *owner, unsigned index)
{
	struct irq_msi_vector *v = calloc(1, sizeof(*v));
	if (!v)
		return NULL;
	v->router = r;
	v->masked = true; /* PCI 3.0 6.8.2.9: every entry masked at reset */
	v->eventfd = -1;
	snprintf(v->name, sizeof(v->name), "%s vector %u", owner, index);
	lock_take(&r->lock);
	if (r->nvectors == r->cap) {
		unsigned cap = r->cap ? r->cap * 2 : 64;
		struct irq_msi_vector **nv = realloc(r->vectors, cap * sizeof(*nv));
		if (!nv) {
			lock_release(&r->lock);
			free(v);
			return NULL;
		}
		r->vectors = nv;
		r->cap = cap;
	}
	r->vectors[r->nvectors++] = v;
	lock_release(&r->lock);
	return v;
}

/* Gives up on irqfd delivery for v: it falls back to KVM_SIGNAL_MSI and its
 * route leaves the table at the next send. Lock held. */
static void msi_uninstall(struct irq_msi_vector *v)
{
	if (v->eventfd >= 0)
		close(v->eventfd);
	v->eventfd = -1;
	v->installed = false;
}

/* KVM would not take v's route or irqfd: v goes by KVM_SIGNAL_MSI. */
static void msi_refused(struct irq_msi_vector *v, int err)
{
	msi_uninstall(v);
	atomic_fetch_add(&v->stats.errors, 1);
	if (!v->route_refused)
		log_warn(v->router->log,
			 "%s: cannot install MSI route (%s); using KVM_SIGNAL_MSI for it", v->name,
			 strerror(-err));
	v->route_refused = true;
}

/* irqfd delivery: stage v's route for the commit that ends this batch, if
 * KVM's differs from the vector's. Lock held. */
static int msi_stage(struct irq_msi_vector *v)
{
	struct irq_router *r = v->router;
	if (v->installed && v->inst_addr == v->addr && v->inst_data == v->data)
		return 0; /* unchanged: no table update */
	if (!v->gsi) {
		/* The table holds the 40 default entries too (irq_routes_build). */
		const uint32_t defaults = 2 * IRQ_ISA_LINES + IRQ_INTX_PINS;
		if (r->next_gsi - IRQ_MSI_FIRST_GSI + defaults >= IRQ_MAX_ROUTES)
			return -ENOSPC;
		v->gsi = r->next_gsi++;
	}
	if (v->eventfd < 0) {
		v->eventfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (v->eventfd < 0)
			return -errno;
		v->irqfd_unassigned = true;
	}
	v->inst_addr = v->addr;
	v->inst_data = v->data;
	v->installed = true;
	if (!v->staged) {
		v->staged = true;
		r->nstaged++;
	}
	return 0;
}

/* Lock held; the vector is unmasked. */
static void msi_deliver(struct irq_msi_vector *v)
{
	struct irq_router *r = v->router;
	if (!msi_address_valid(v->addr)) {
		atomic_fetch_add(&v->stats.errors, 1);
		return;
	}
	if (r->msi_mode == IRQ_MSI_SIGNAL || v->eventfd < 0) {
		int ret =
		    r->ops->signal_msi ? r->ops->signal_msi(r->ctx, v->addr, v->data) : -ENOSYS;
		if (ret < 0) {
			atomic_fetch_add(&v->stats.errors, 1);
			return;
		}
		if (ret == 0)
			atomic_fetch_add(&v->stats.coalesced, 1);
	} else {
		uint64_t one = 1;
		if (write(v->eventfd, &one, sizeof(one)) != sizeof(one)) {
			atomic_fetch_add(&v->stats.errors, 1);
			return;
		}
	}
	atomic_fetch_add(&v->stats.asserts, 1);
	atomic_store(&v->stats.last_ns, clock_now_ns());
}

void irq_routes_begin(struct irq_router *r)
{
	lock_take(&r->lock);
}

void irq_msi_route_update_locked(struct irq_msi_vector *v, uint64_t addr, uint32_t data,
				 bool masked)
{
	struct irq_router *r = v->router;
	lock_assert_held(&r->lock);
	v->addr = addr;
	v->data = data;
	v->masked = masked;
	if (!masked && r->msi_mode == IRQ_MSI_IRQFD && msi_address_valid(addr)) {
		int ret = msi_stage(v);
		if (ret < 0)
			msi_refused(v, ret);
	}
	if (!masked && v->pending && !v->deliver_at_commit) {
		/* PCI 3.0 6.8.2.9: pending is sent on unmask, once its route is in. */
		v->deliver_at_commit = true;
		r->ndeliver++;
	}
}

void irq_routes_commit(struct irq_router *r)
{
	int sent = 0;
	lock_assert_held(&r->lock); /* taken by irq_routes_begin, on this thread */
	if (r->nstaged)
		sent = msi_send_routes(r);
	for (unsigned i = 0; i < r->nvectors && (r->nstaged || r->ndeliver); i++) {
		struct irq_msi_vector *v = r->vectors[i];
		if (v->staged) {
			v->staged = false;
			r->nstaged--;
			/* Route first, then the irqfd that points at it. */
			int ret = sent;
			if (ret >= 0 && v->irqfd_unassigned)
				ret = r->ops->irqfd_assign
					  ? r->ops->irqfd_assign(r->ctx, v->eventfd, v->gsi, -1)
					  : -ENOSYS;
			v->irqfd_unassigned = false;
			if (ret < 0)
				msi_refused(v, ret);
		}
		if (v->deliver_at_commit) {
			v->deliver_at_commit = false;
			r->ndeliver--;
			if (!v->masked) {
				v->pending = false;
				msi_deliver(v);
			}
		}
	}
	lock_release(&r->lock);
}

void irq_msi_route_update(struct irq_msi_vector *v, uint64_t addr, uint32_t data, bool masked)
{
	irq_routes_begin(v->router);
	irq_msi_route_update_locked(v, addr, data, masked);
	irq_routes_commit(v->router);
}

void irq_msi_fire(struct irq_msi_vector *v)
{
	struct irq_router *r = v->router;
	lock_take(&r->lock);
	if (v->masked) {
		/* Every masked fire counts; the PBA holds one bit however many. */
		atomic_fetch_add(&v->stats.pended, 1);
		v->pending = true;
	} else {
		msi_deliver(v);
	}
	lock_release(&r->lock);
}

bool irq_msi_pending(struct irq_msi_vector *v)
{
	lock_take(&v->router->lock);
	bool p = v->pending;
	lock_release(&v->router->lock);
	return p;
}

/* Lock held: what irq_msi_fire() would do now is one write to v's GSI. */
static bool msi_fd_bindable(const struct irq_msi_vector *v)
{
	const struct irq_router *r = v->router;
	return r->msi_mode == IRQ_MSI_IRQFD && !v->masked && v->gsi && v->installed &&
	       v->inst_addr == v->addr && v->inst_data == v->data && msi_address_valid(v->addr);
}

bool irq_msi_fd_bindable(struct irq_msi_vector *v)
{
	lock_take(&v->router->lock);
	bool ok = msi_fd_bindable(v);
	lock_release(&v->router->lock);
	return ok;
}

int irq_msi_bind_fd(struct irq_msi_vector *v, int fd)
{
	struct irq_router *r = v->router;
	int ret = -EAGAIN;
	lock_take(&r->lock);
	if (fd >= 0 && r->ops->irqfd_assign && r->ops->irqfd_deassign && msi_fd_bindable(v))
		ret = r->ops->irqfd_assign(r->ctx, fd, v->gsi, -1);
	if (ret == 0) {
		v->bound_fds++;
		atomic_fetch_add(&v->binds, 1);
	} else if (ret != -EAGAIN) {
		atomic_fetch_add(&v->stats.errors, 1);
	}
	lock_release(&r->lock);
	return ret;
}

int irq_msi_unbind_fd(struct irq_msi_vector *v, int fd)
{
	struct irq_router *r = v->router;
	lock_take(&r->lock);
	/* The GSI never changes once given, so it is the one bound. */
	int ret = r->ops->irqfd_deassign ? r->ops->irqfd_deassign(r->ctx, fd, v->gsi) : -ENOSYS;
	if (ret < 0)
		atomic_fetch_add(&v->stats.errors, 1);
	if (v->bound_fds)
		v->bound_fds--;
	lock_release(&r->lock);
	return ret;
}
