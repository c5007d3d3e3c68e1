/* --stats: what went through the door, per ISA line, INTx pin and vector. */
#include "irq/irq.h"

#include "vmm/base/stat.h"

void irq_print_stats(struct irq_router *r, FILE *out)
{
	fprintf(out,
		"vmm: stats: interrupt delivery: MSI %s, INTx %s; %llu routing-table updates\n",
		r->msi_mode == IRQ_MSI_IRQFD ? "irqfd" : "KVM_SIGNAL_MSI",
		r->intx_mode == IRQ_INTX_RESAMPLE ? "irqfd+resample" : "KVM_IRQ_LINE",
		STAT(r->route_table_updates));
	for (unsigned i = 0; i < IRQ_ISA_LINES; i++) {
		struct irq_line *l = &r->lines[i];
		if (r->claimed[i])
			fprintf(out, "vmm: stats: ISA IRQ %-2u %-16s asserted %llu errors %llu\n",
				i, l->owner, STAT(l->stats.asserts), STAT(l->stats.errors));
	}
	for (unsigned i = 0; i < IRQ_INTX_PINS; i++) {
		struct irq_intx_pin *p = &r->pins[i];
		if (!p->nsharers)
			continue;
		fprintf(out,
			"vmm: stats: INTx pin %u (%u sharer%s) asserted %llu deasserted %llu "
			"resamples %llu refires %llu errors %llu\n",
			p->gsi, p->nsharers, p->nsharers == 1 ? "" : "s", STAT(p->stats.asserts),
			STAT(p->stats.deasserts), STAT(p->stats.resamples), STAT(p->stats.refires),
			STAT(p->stats.errors));
	}
	for (unsigned i = 0; i < r->nvectors; i++) {
		struct irq_msi_vector *v = r->vectors[i];
		if (!STAT(v->stats.asserts) && !STAT(v->stats.pended) && !STAT(v->stats.errors) &&
		    !STAT(v->binds))
			continue;
		/* A bound fd's deliveries are KVM's alone: the VMM sees the binds. */
		char bound[64] = "";
		if (STAT(v->binds))
			snprintf(bound, sizeof(bound), " irqfd-binds %llu (bound now %u)",
				 STAT(v->binds), v->bound_fds);
		fprintf(out,
			"vmm: stats: MSI %-24s delivered %llu pended %llu coalesced %llu "
			"errors %llu%s%s\n",
			v->name, STAT(v->stats.asserts), STAT(v->stats.pended),
			STAT(v->stats.coalesced), STAT(v->stats.errors), bound,
			r->msi_mode == IRQ_MSI_IRQFD && !v->installed
			    ? " (no route: KVM_SIGNAL_MSI)"
			    : "");
	}
}
