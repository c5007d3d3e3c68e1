/*
 * Interrupt handler, LAPIC/IOAPIC set-up and bounded waits (see
 * guest/irq.h). Derived from guests/pcitest/irq.c.
 */
#include "guest/irq.h"

#include "guest/apic.h"
#include "guest/kit.h"

struct pin_source {
	irq_pin_service_fn fn;
	void *ctx;
	volatile uint64_t genuine; /* the sum of what fn returned */
};

struct pin_state {
	uint8_t nsrc;
	struct pin_source src[IRQ_PIN_SOURCES];
	volatile uint64_t spurious;
	volatile uint32_t deferred; /* mask the pin instead of calling the sources */
	volatile uint32_t budget;
	volatile uint32_t stormed;
	uint32_t rte_lo; /* the low dword, unmasked */
};

static struct {
	volatile uint64_t count[256];
	uint64_t ioapic;
	uint64_t tsc_hz;
	uint64_t tolerated;
	struct pin_state pin[IRQ_IOAPIC_PINS];
	uint8_t vec_pin[256]; /* vector -> pin + 1 for routed pins, 0 otherwise */
} irqs;

/* ---- CPL 0 ---- */

/* Masks a pin from the handler. It may have interrupted CPL-3 code between
 * its IOREGSEL write and the window access, so IOREGSEL is restored. */
static void pin_mask_from_irq(unsigned pin, const struct pin_state *p)
{
	uint32_t sel = mmio_read32(irqs.ioapic + IOAPIC_REGSEL);
	ioapic_write(irqs.ioapic, IOAPIC_REG_REDTBL + 2 * pin, p->rte_lo | IOAPIC_RTE_MASKED);
	mmio_write32(irqs.ioapic + IOAPIC_REGSEL, sel);
}

/* 82093AA 3.2.4: a level-triggered entry's remote IRR stays set until the
 * EOI, and the IOAPIC sends again if the line is still asserted then; so
 * every device on the pin is acknowledged before the EOI, as a kernel's
 * shared handler does, or the pin is masked so CPL 3 can look at the
 * devices first (a threaded handler's top half). */
static void pin_service(unsigned pin, struct pin_state *p)
{
	bool any = false;

	if (p->deferred) {
		pin_mask_from_irq(pin, p);
		return;
	}
	for (unsigned i = 0; i < p->nsrc; i++) {
		uint32_t n = p->src[i].fn(p->src[i].ctx);
		if (n) {
			p->src[i].genuine += n;
			any = true;
		}
	}
	if (!any)
		p->spurious++;
	if (p->budget && --p->budget)
		return;
	p->stormed = 1;
	pin_mask_from_irq(pin, p);
}

static void on_interrupt(struct trap_frame *f)
{
	unsigned v = (unsigned)f->vector & 0xFF;

	irqs.count[v]++;
	/* SDM vol. 3, 11.9: the spurious vector sets no ISR bit, so no EOI;
	 * the self-test EOIs at CPL 3, after it looked at ISR. */
	if (v == IRQ_VEC_SPURIOUS || v == IRQ_VEC_LAPIC_PROBE)
		return;
	if (irqs.vec_pin[v])
		pin_service(irqs.vec_pin[v] - 1u, &irqs.pin[irqs.vec_pin[v] - 1u]);
	/* 11.8.5: for a level-triggered vector the EOI is broadcast and the
	 * IOAPIC clears remote IRR. */
	lapic_eoi();
}

void irq_install(void)
{
	for (unsigned v = 32; v < 256; v++)
		trap_set_handler(v, on_interrupt);
}

/* ---- time ---- */

void irq_set_tsc_hz(uint64_t hz)
{
	irqs.tsc_hz = hz ? hz : 3000000000ull;
}

uint64_t irq_us_to_tsc(uint64_t us)
{
	return us * (irqs.tsc_hz ? irqs.tsc_hz : 3000000000ull) / 1000000;
}

uint64_t irq_tsc_to_us(uint64_t t)
{
	return t * 1000000 / (irqs.tsc_hz ? irqs.tsc_hz : 3000000000ull);
}

void irq_spin_us(uint64_t us)
{
	uint64_t end = rdtsc() + irq_us_to_tsc(us);
	while (rdtsc() < end)
		cpu_relax();
}

/* ---- LAPIC ---- */

#define PROBE_WAIT_US 500000

/* SDM vol. 3, 11.8.4: an accepted fixed interrupt sits in ISR and raises
 * PPR until its EOI. A self-IPI whose handler does not EOI shows whether
 * this LAPIC does that (guests/README.md, "Running pcitest"). */
static void lapic_self_test(struct irq_lapic_info *l)
{
	uint64_t before = irqs.count[IRQ_VEC_LAPIC_PROBE];
	uint64_t deadline = rdtsc() + irq_us_to_tsc(PROBE_WAIT_US);

	lapic_write(LAPIC_ICR_HI, 0);
	lapic_write(LAPIC_ICR_LO,
		    LAPIC_ICR_DEST_SELF | LAPIC_ICR_LEVEL_ASSERT | IRQ_VEC_LAPIC_PROBE);
	while (irqs.count[IRQ_VEC_LAPIC_PROBE] == before && rdtsc() < deadline)
		cpu_relax();
	l->probe_delivered = irqs.count[IRQ_VEC_LAPIC_PROBE] != before;
	bool in_service = lapic_vector_bit(LAPIC_ISR, IRQ_VEC_LAPIC_PROBE);
	l->probe_ppr = lapic_read(LAPIC_PPR);
	lapic_eoi();
	l->probe_isr_after_eoi = lapic_vector_bit(LAPIC_ISR, IRQ_VEC_LAPIC_PROBE);
	l->auto_eoi = l->probe_delivered && !in_service;
}

void irq_lapic_setup(struct irq_lapic_info *l)
{
	uint32_t id = lapic_read(LAPIC_ID);

	l->apic_id = (uint8_t)(id >> 24); /* 11.4.6: xAPIC ID in bits 31:24 */
	l->version = lapic_read(LAPIC_VERSION);
	lapic_write(LAPIC_TPR, 0);
	lapic_write(LAPIC_SVR, LAPIC_SVR_ENABLE | IRQ_VEC_SPURIOUS);
	l->svr = lapic_read(LAPIC_SVR);
	l->tpr = lapic_read(LAPIC_TPR);
	l->enabled = (l->svr & 0x1FF) == (LAPIC_SVR_ENABLE | IRQ_VEC_SPURIOUS) && l->tpr == 0;
	l->probe_delivered = l->auto_eoi = l->probe_isr_after_eoi = false;
	l->probe_ppr = 0;
	if (l->enabled)
		lapic_self_test(l);
}

/* ---- IOAPIC ---- */

void irq_set_ioapic(uint64_t base)
{
	irqs.ioapic = base;
}

uint32_t irq_ioapic_max_entry(void)
{
	return (ioapic_read(irqs.ioapic, IOAPIC_REG_VER) >> 16) & 0xFF;
}

int irq_pin_add_source(unsigned pin, irq_pin_service_fn fn, void *ctx)
{
	if (pin >= IRQ_IOAPIC_PINS || !fn)
		return -1;
	struct pin_state *p = &irqs.pin[pin];
	if (p->nsrc >= IRQ_PIN_SOURCES)
		return -1;
	p->src[p->nsrc] = (struct pin_source){fn, ctx, 0};
	return p->nsrc++;
}

uint32_t irq_rte_for(uint8_t vector, uint16_t mp_flags)
{
	uint32_t lo = (uint32_t)vector | IOAPIC_RTE_DM_FIXED;

	/* MP spec table 4-10: polarity 01 = high, 11 = low, 00 = "conforms
	 * to the bus", which for PCI is active low and level (PCI 3.0, 2.2.6). */
	if ((mp_flags & 0x3) != 0x1)
		lo |= IOAPIC_RTE_ACTIVE_LOW;
	if ((mp_flags & 0xC) != 0x4)
		lo |= IOAPIC_RTE_LEVEL;
	return lo;
}

void irq_pin_route(unsigned pin, uint32_t rte_lo, uint8_t apic_id, uint32_t *lo, uint32_t *hi)
{
	struct pin_state *p = &irqs.pin[pin];

	p->rte_lo = rte_lo & ~IOAPIC_RTE_MASKED;
	p->budget = IRQ_STORM_BUDGET;
	p->stormed = 0;
	irqs.vec_pin[rte_lo & 0xFF] = (uint8_t)(pin + 1);
	ioapic_write(irqs.ioapic, IOAPIC_REG_REDTBL + 2 * pin + 1,
		     (uint32_t)apic_id << IOAPIC_RTE_DEST_SHIFT);
	ioapic_write(irqs.ioapic, IOAPIC_REG_REDTBL + 2 * pin, p->rte_lo);
	*lo = ioapic_read(irqs.ioapic, IOAPIC_REG_REDTBL + 2 * pin);
	*hi = ioapic_read(irqs.ioapic, IOAPIC_REG_REDTBL + 2 * pin + 1);
}

void irq_pin_defer(unsigned pin, bool deferred)
{
	irqs.pin[pin].deferred = deferred;
}

void irq_pin_mask(unsigned pin, bool masked)
{
	struct pin_state *p = &irqs.pin[pin];
	ioapic_write(irqs.ioapic, IOAPIC_REG_REDTBL + 2 * pin,
		     p->rte_lo | (masked ? IOAPIC_RTE_MASKED : 0));
}

uint32_t irq_pin_rte(unsigned pin)
{
	return ioapic_read(irqs.ioapic, IOAPIC_REG_REDTBL + 2 * pin);
}

bool irq_pin_stormed(unsigned pin)
{
	return pin < IRQ_IOAPIC_PINS && irqs.pin[pin].stormed;
}

/* ---- counters and waits, CPL 3 ---- */

uint64_t irq_count(unsigned vector)
{
	return irqs.count[vector & 0xFF];
}

uint64_t irq_pin_spurious(unsigned pin)
{
	return pin < IRQ_IOAPIC_PINS ? irqs.pin[pin].spurious : 0;
}

uint64_t irq_pin_genuine(unsigned pin, unsigned source)
{
	return pin < IRQ_IOAPIC_PINS && source < IRQ_PIN_SOURCES ? irqs.pin[pin].src[source].genuine
								 : 0;
}

void irq_snap(struct irq_snap *s)
{
	for (unsigned v = 0; v < 256; v++)
		s->count[v] = irqs.count[v];
	for (unsigned p = 0; p < IRQ_IOAPIC_PINS; p++) {
		s->spurious[p] = irqs.pin[p].spurious;
		for (unsigned i = 0; i < IRQ_PIN_SOURCES; i++)
			s->genuine[p][i] = irqs.pin[p].src[i].genuine;
		if (!irqs.pin[p].stormed)
			irqs.pin[p].budget = IRQ_STORM_BUDGET;
	}
	s->tsc = rdtsc();
}

uint64_t irq_new(const struct irq_snap *s, unsigned vector)
{
	return irqs.count[vector & 0xFF] - s->count[vector & 0xFF];
}

uint64_t irq_new_others(const struct irq_snap *s, unsigned except, unsigned *first)
{
	uint64_t n = 0;

	*first = 0;
	for (unsigned v = 32; v < 256; v++) {
		uint64_t k = irqs.count[v] - s->count[v];
		if (v == except || v == IRQ_VEC_SPURIOUS || !k)
			continue;
		if (!n)
			*first = v;
		n += k;
	}
	return n;
}

uint64_t irq_pin_spurious_new(const struct irq_snap *s, unsigned pin)
{
	return pin < IRQ_IOAPIC_PINS ? irqs.pin[pin].spurious - s->spurious[pin] : 0;
}

uint64_t irq_pin_genuine_new(const struct irq_snap *s, unsigned pin, unsigned source)
{
	return pin < IRQ_IOAPIC_PINS && source < IRQ_PIN_SOURCES
		   ? irqs.pin[pin].src[source].genuine - s->genuine[pin][source]
		   : 0;
}

bool irq_wait_until(const struct irq_snap *s, bool (*done)(void *arg), void *arg,
		    uint64_t timeout_us)
{
	uint64_t deadline = s->tsc + irq_us_to_tsc(timeout_us);

	while (!done(arg)) {
		if (rdtsc() >= deadline)
			return done(arg);
		cpu_relax();
	}
	return true;
}

bool irq_intx_redeliveries_ok(const struct irq_lapic_info *l, uint64_t genuine, uint64_t spurious)
{
	if (spurious == 0)
		return true;
	if (!l->auto_eoi || spurious > genuine)
		return false;
	irqs.tolerated += spurious;
	return true;
}

uint64_t irq_tolerated_redeliveries(void)
{
	return irqs.tolerated;
}
