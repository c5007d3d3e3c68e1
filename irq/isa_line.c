/* ISA line door (GSI 0-15): one owner per line, level changes forwarded. */
#include "irq/irq.h"

#include "vmm/base/clock.h"

#include <stdlib.h>
#include <string.h>

struct irq_line *irq_line_claim(struct irq_router *r, uint32_t gsi, const char *owner)
{
	if (gsi >= IRQ_ISA_LINES || r->claimed[gsi])
		return NULL;
	r->claimed[gsi] = 1;
	r->lines[gsi].owner = owner;
	return &r->lines[gsi];
}

void irq_line_set(struct irq_line *l, int level)
{
	level = !!level;
	lock_take(&l->lock);
	if (l->level != level) {
		/* Under the lock, so the sink sees transitions in order; a refused
		 * change is not recorded, so the next call retries it. */
		if (l->router->ops->set_line(l->router->ctx, l->gsi, level) < 0) {
			atomic_fetch_add(&l->stats.errors, 1);
			lock_release(&l->lock);
			return;
		}
		l->level = level;
		if (level) {
			atomic_fetch_add(&l->stats.asserts, 1);
			atomic_store(&l->stats.last_ns, clock_now_ns());
		} else {
			atomic_fetch_add(&l->stats.deasserts, 1);
		}
	}
	lock_release(&l->lock);
}
