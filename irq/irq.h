/*
 * The interrupt door. Devices raise interrupts only through these handles;
 * they never call KVM. Behind the door sits a sink (`struct irq_sink_ops`):
 * the KVM one issues ioctls, the unit tests' one records calls.
 *
 * Every handle counts what went through it and stamps the last change with
 * CLOCK_MONOTONIC, so benchmarks and --stats read the door, not the device.
 */
#ifndef IRQ_IRQ_H
#define IRQ_IRQ_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* What sits behind the door. */
struct irq_sink_ops {
	/* Drive GSI `gsi` to `level` (KVM_IRQ_LINE semantics). 0 or -errno. */
	int (*set_line)(void *ctx, uint32_t gsi, int level);
};

struct irq_counters {
	atomic_uint_fast64_t asserts;   /* transitions to asserted */
	atomic_uint_fast64_t deasserts; /* transitions to deasserted */
	atomic_uint_fast64_t errors;    /* sink refused */
	atomic_uint_fast64_t last_ns;   /* CLOCK_MONOTONIC of the last assert */
};

struct irq_router;

/* One ISA/IOAPIC input line (GSI), driven by one device. */
struct irq_line {
	struct irq_router *router;
	uint32_t gsi;
	const char *owner;
	int level;
	pthread_mutex_t lock;
	struct irq_counters stats;
};

#define IRQ_MAX_LINES 24 /* IOAPIC pins; GSI 0-15 are the ISA IRQs */

struct irq_router {
	const struct irq_sink_ops *ops;
	void *ctx;
	struct irq_line lines[IRQ_MAX_LINES];
	unsigned char claimed[IRQ_MAX_LINES];
};

void irq_router_init(struct irq_router *r, const struct irq_sink_ops *ops, void *ctx);
/* Hands out the line for `gsi` to one owner; NULL if taken or out of range. */
struct irq_line *irq_line_claim(struct irq_router *r, uint32_t gsi, const char *owner);
/* Drive the line; only level changes reach the sink. */
void irq_line_set(struct irq_line *l, int level);
static inline void irq_line_assert(struct irq_line *l)
{
	irq_line_set(l, 1);
}
static inline void irq_line_deassert(struct irq_line *l)
{
	irq_line_set(l, 0);
}

uint64_t irq_now_ns(void);

#endif
