/* The interrupt door's lifetime: one router per machine, holding the ISA
 * lines, the INTx pins and the MSI vectors that devices get from it. */
#include "irq/irq.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void irq_router_init(struct irq_router *r, const struct irq_sink_ops *ops, void *ctx,
		     const struct irq_router_config *cfg)
{
	memset(r, 0, sizeof(*r));
	r->ops = ops;
	r->ctx = ctx;
	if (cfg) {
		r->log = cfg->log;
		r->msi_mode = cfg->msi_mode;
		r->intx_mode = cfg->intx_mode;
	}
	r->next_gsi = IRQ_MSI_FIRST_GSI;
	lock_init(&r->lock, "interrupt router", LOCK_RANK_IRQ_ROUTER);
	for (uint32_t i = 0; i < IRQ_ISA_LINES; i++) {
		r->lines[i].router = r;
		r->lines[i].gsi = i;
		lock_init(&r->lines[i].lock, "ISA line", LOCK_RANK_ISA_LINE);
	}
	for (uint32_t i = 0; i < IRQ_INTX_PINS; i++) {
		r->pins[i].gsi = IRQ_INTX_FIRST + i;
		r->pins[i].irqfd = r->pins[i].resamplefd = -1;
	}
}

void irq_router_destroy(struct irq_router *r)
{
	/* Never set up (the machine stopped before KVM): its zeroed pins hold
	 * no descriptors, and fd 0 is stdin. */
	if (!r->ops)
		return;
	for (unsigned i = 0; i < r->nvectors; i++) {
		if (r->vectors[i]->eventfd >= 0)
			close(r->vectors[i]->eventfd);
		free(r->vectors[i]);
	}
	free(r->vectors);
	free(r->route_table);
	r->vectors = NULL;
	r->route_table = NULL;
	r->nvectors = r->cap = 0;
	for (unsigned i = 0; i < IRQ_INTX_PINS; i++) {
		struct irq_intx_pin *p = &r->pins[i];
		for (unsigned j = 0; j < p->nsharers; j++)
			free(p->sharers[j]);
		p->nsharers = 0;
		if (p->irqfd >= 0)
			close(p->irqfd);
		if (p->resamplefd >= 0)
			close(p->resamplefd);
		p->irqfd = p->resamplefd = -1;
		p->irqfd_ready = false;
	}
}
