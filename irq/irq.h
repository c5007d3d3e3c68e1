/*
 * The interrupt door. Devices raise interrupts only through these handles;
 * they never call KVM. Behind the door sits a sink (`struct irq_sink_ops`):
 * the KVM one issues ioctls, the unit tests' one records calls.
 *
 *  - ISA lines (GSI 0-15, one owner each, e.g. the UART on IRQ 4):
 *    irq_line_*, driven with KVM_IRQ_LINE.
 *  - PCI INTx pins (IOAPIC pins 16-23, shared, level): irq_intx_*, through
 *    an irqfd + resamplefd per pin, or KVM_IRQ_LINE (never both on a pin).
 *  - MSI vectors: irq_msi_*, through KVM_SIGNAL_MSI or a GSI route +
 *    irqfd. Mask and pending state live here, under the router's lock, so
 *    vCPU and I/O threads agree; unmasking delivers what is pending.
 *
 * Every handle counts what went through it and stamps the last delivery
 * with CLOCK_MONOTONIC, so benchmarks and --stats read the door.
 */
#ifndef IRQ_IRQ_H
#define IRQ_IRQ_H

#include "vmm/base/lock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define IRQ_ISA_LINES	     16 /* GSI 0-15 */
#define IRQ_INTX_FIRST	     16 /* IOAPIC pins 16-23 carry PCI INTx */
#define IRQ_INTX_PINS	     8
#define IRQ_MSI_FIRST_GSI    24 /* MSI routes are allocated from here */
#define IRQ_MAX_ROUTES	     4096
#define IRQ_INTX_MAX_SHARERS 32

enum irq_msi_delivery { IRQ_MSI_IRQFD, IRQ_MSI_SIGNAL };
enum irq_intx_delivery { IRQ_INTX_RESAMPLE, IRQ_INTX_LINE };

/* One entry of the GSI routing table (KVM_SET_GSI_ROUTING). */
enum irq_route_type { IRQ_ROUTE_IRQCHIP, IRQ_ROUTE_MSI };
#define IRQ_CHIP_PIC_MASTER 0
#define IRQ_CHIP_PIC_SLAVE  1
#define IRQ_CHIP_IOAPIC	    2
struct irq_route {
	uint32_t gsi;
	enum irq_route_type type;
	uint32_t chip, pin; /* IRQCHIP */
	uint64_t addr;	    /* MSI */
	uint32_t data;
};

/* What sits behind the door. Each returns 0 (or >0) on success, -errno. */
struct irq_sink_ops {
	int (*set_line)(void *ctx, uint32_t gsi, int level);
	/* >0 delivered, 0 blocked by the guest (coalesced), <0 error */
	int (*signal_msi)(void *ctx, uint64_t addr, uint32_t data);
	int (*set_routes)(void *ctx, const struct irq_route *routes, unsigned n);
	/* Registers `fd` as an irqfd for gsi; resample_fd >= 0 for level pins. */
	int (*irqfd_assign)(void *ctx, int fd, uint32_t gsi, int resample_fd);
	/* Undoes irqfd_assign of `fd` on gsi (KVM_IRQFD_FLAG_DEASSIGN). May be
	 * NULL: then no fd is ever bound by irq_msi_bind_fd. */
	int (*irqfd_deassign)(void *ctx, int fd, uint32_t gsi);
};

struct irq_counters {
	atomic_uint_fast64_t asserts;	/* deliveries / transitions to asserted */
	atomic_uint_fast64_t deasserts; /* transitions to deasserted */
	atomic_uint_fast64_t pended;	/* MSI fired while masked (PBA bit set) */
	atomic_uint_fast64_t coalesced; /* MSI the guest's LAPIC did not accept */
	atomic_uint_fast64_t resamples; /* INTx EOI resamples; refires below */
	atomic_uint_fast64_t refires;
	atomic_uint_fast64_t errors;  /* sink refused, or a bad MSI address */
	atomic_uint_fast64_t last_ns; /* CLOCK_MONOTONIC of the last delivery */
};

struct irq_router;
struct log;

/* One ISA line (GSI 0-15), driven by one device. */
struct irq_line {
	struct irq_router *router;
	uint32_t gsi;
	const char *owner;
	int level;
	struct vmm_lock lock;
	struct irq_counters stats;
};

/* One shared PCI INTx pin (IOAPIC pin 16-23). */
struct irq_intx_source;
struct irq_intx_pin {
	uint32_t gsi;
	uint32_t levels; /* bit per sharer: asserted */
	unsigned nsharers;
	struct irq_intx_source *sharers[IRQ_INTX_MAX_SHARERS];
	int irqfd, resamplefd; /* resample delivery */
	bool irqfd_ready;
	int line_level; /* line delivery: what KVM was last told */
	struct irq_counters stats;
};

/* One device's connection to a pin. */
struct irq_intx_source {
	struct irq_intx_pin *pin;
	struct irq_router *router;
	uint32_t bit;
	const char *owner;
	/* Called at EOI (resample) so the device re-evaluates its level. */
	void (*resample)(void *ctx);
	void *resample_ctx;
};

/* One MSI/MSI-X vector. */
struct irq_msi_vector {
	struct irq_router *router;
	char name[40];
	uint64_t addr;
	uint32_t data;
	bool masked;  /* entry, function or enable mask, as the device says */
	bool pending; /* fired while masked; delivered on unmask (PBA bit) */
	uint32_t gsi; /* irqfd delivery: its route, 0 = none yet */
	int eventfd;
	bool installed;		    /* route in KVM's table is (inst_addr, inst_data) */
	bool staged;		    /* its route changed in the open batch */
	bool irqfd_unassigned;	    /* its eventfd is new: KVM_IRQFD at the commit */
	bool deliver_at_commit;	    /* unmasked while pending, in the open batch */
	bool route_refused;	    /* KVM refused it once: said so, now SIGNAL_MSI */
	unsigned bound_fds;	    /* other processes' eventfds bound to its GSI */
	atomic_uint_fast64_t binds; /* irq_msi_bind_fd successes (--stats) */
	uint64_t inst_addr;
	uint32_t inst_data;
	struct irq_counters stats;
};

struct irq_router {
	const struct irq_sink_ops *ops;
	void *ctx;
	enum irq_msi_delivery msi_mode;
	enum irq_intx_delivery intx_mode;
	struct vmm_lock lock; /* MSI masks/pending/routes and INTx levels */
	struct irq_line lines[IRQ_ISA_LINES];
	unsigned char claimed[IRQ_ISA_LINES];
	struct irq_intx_pin pins[IRQ_INTX_PINS];
	struct irq_msi_vector **vectors;
	unsigned nvectors, cap;
	uint32_t next_gsi;
	atomic_uint_fast64_t route_table_updates; /* KVM_SET_GSI_ROUTING calls */
	struct irq_route *route_table;		  /* the table as last built */
	unsigned nstaged, ndeliver;		  /* vectors with work at the commit */
	struct log *log; /* where the door reports a refusal once; may be NULL */
};

/* How the router delivers, set once at init (NULL: irqfd MSIs, resample
 * INTx, no log). */
struct irq_router_config {
	struct log *log;
	enum irq_msi_delivery msi_mode;
	enum irq_intx_delivery intx_mode;
};
void irq_router_init(struct irq_router *r, const struct irq_sink_ops *ops, void *ctx,
		     const struct irq_router_config *cfg);
void irq_router_destroy(struct irq_router *r);

/* ISA lines. */
struct irq_line *irq_line_claim(struct irq_router *r, uint32_t gsi, const char *owner);
void irq_line_set(struct irq_line *l, int level);
static inline void irq_line_assert(struct irq_line *l)
{
	irq_line_set(l, 1);
}
static inline void irq_line_deassert(struct irq_line *l)
{
	irq_line_set(l, 0);
}

/* PCI INTx. gsi is 16..23. NULL when full or out of range. */
struct irq_intx_source *irq_intx_attach(struct irq_router *r, uint32_t gsi, const char *owner,
					void (*resample)(void *ctx), void *ctx);
/* The device's condition: asserted while it holds (level semantics). */
void irq_intx_set(struct irq_intx_source *s, int level);
/* Main loop: the pin's resamplefd became readable (guest EOI). */
void irq_intx_handle_resample(struct irq_router *r, unsigned pin_index);

/* MSI vectors. */
struct irq_msi_vector *irq_msi_vector_new(struct irq_router *r, const char *owner, unsigned index);
/* The device's view of the vector changed (table write, mask, enable). */
void irq_msi_route_update(struct irq_msi_vector *v, uint64_t addr, uint32_t data, bool masked);
/* Several changes from one guest access: begin, the _locked updates, then
 * commit, which sends the routing table once (if a route changed), assigns
 * new irqfds after it, and delivers what unmasking made due. begin takes
 * the router lock and commit releases it. */
void irq_routes_begin(struct irq_router *r);
void irq_msi_route_update_locked(struct irq_msi_vector *v, uint64_t addr, uint32_t data,
				 bool masked);
void irq_routes_commit(struct irq_router *r);
/* The device raises the vector: delivered, or latched while masked. */
void irq_msi_fire(struct irq_msi_vector *v);
bool irq_msi_pending(struct irq_msi_vector *v);
/*
 * An eventfd another process writes (a vhost-user backend's call fd)
 * delivered by KVM alone: KVM_IRQFD of `fd` on v's GSI, so a write
 * reaches the guest with no hop through the VMM. Only while that is
 * exactly what irq_msi_fire() would do: irqfd delivery, v unmasked (entry,
 * function and enable), its route in KVM's table with v's current address
 * and data. Else -EAGAIN, and the caller watches fd and fires v itself.
 * KVM does not look at the mask once the fd is bound, so the owner of fd
 * must unbind it before (or as) v is masked, then read what raced the
 * unbind and fire v with it: it then pends (PCI 3.0 6.8.2.9).
 */
int irq_msi_bind_fd(struct irq_msi_vector *v, int fd);
/* Whether irq_msi_bind_fd would bind now (an fd bound while this holds
 * may stay bound). */
bool irq_msi_fd_bindable(struct irq_msi_vector *v);
/* Undoes irq_msi_bind_fd (KVM_IRQFD deassign); a write after it stays in
 * the fd's counter. 0 or -errno. */
int irq_msi_unbind_fd(struct irq_msi_vector *v, int fd);
/* Builds the full routing table into `out` (capacity IRQ_MAX_ROUTES). */
unsigned irq_routes_build(struct irq_router *r, struct irq_route *out);

/* --stats: every line, pin and vector that saw traffic. */
void irq_print_stats(struct irq_router *r, FILE *out);

#endif
