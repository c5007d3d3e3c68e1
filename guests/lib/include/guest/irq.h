/*
 * Interrupts for kit guests that drive PCI devices: one counting handler
 * for vectors 32..255, LAPIC set-up with a self-test for the "nothing stays
 * in service" behaviour of our KVM hosts, IOAPIC pins for level-triggered
 * INTx with per-pin service callbacks, and bounded TSC-deadline waits.
 * Generalised from pcitest's irq.c; pcitest and virtiotest build their
 * checks on it.
 *
 * Only the handler runs at CPL 0 (and on our hosts every instruction there
 * is emulated, ~2 us each), so it counts, calls the pin's service
 * callbacks and EOIs, nothing else. Everything else is meant for CPL 3
 * under run_user_irq(): the LAPIC and IOAPIC are MMIO in the kit's
 * user-accessible 3..4 GiB.
 *
 * LAPIC: Intel SDM vol. 3, chapter 11 (10 before 2023); IOAPIC: 82093AA
 * datasheet, section 3.
 */
#ifndef GUEST_IRQ_H
#define GUEST_IRQ_H

#include <stdbool.h>
#include <stdint.h>

#define IRQ_VEC_LAPIC_PROBE 0x30 /* the self-test's self-IPI */
#define IRQ_VEC_SPURIOUS    0xFF /* the LAPIC spurious vector (SVR) */
#define IRQ_IOAPIC_PINS	    24
#define IRQ_PIN_SOURCES	    16 /* devices sharing one pin */
/* A level-triggered pin that keeps firing between two snapshots more than
 * this often is masked by the handler, so a check fails instead of the
 * guest hanging in an interrupt storm. */
#define IRQ_STORM_BUDGET 64

/* Called by the handler (CPL 0, interrupts off) for each device on an
 * INTx pin, before the EOI. Must acknowledge the device (so its line drops)
 * and return how many events it acknowledged: 0 if nothing was pending
 * (for most devices 0 or 1; a device that counts its pending events
 * returns the count). Keep it a handful of instructions; no config-space
 * (0xCF8) cycles. */
typedef uint32_t (*irq_pin_service_fn)(void *ctx);

/* CPL 0: installs the handler on vectors 32..255, so an interrupt on an
 * unprogrammed vector is counted rather than faulting. */
void irq_install(void);

struct irq_lapic_info {
	uint8_t apic_id;
	uint32_t version, svr, tpr;
	bool enabled;	      /* SVR and TPR read back as written */
	bool probe_delivered; /* the self-IPI arrived */
	/* The LAPIC does not hold an accepted interrupt in service (ISR clear
	 * before the EOI): true on our kvm_pvm hosts. A still-asserted
	 * level-triggered pin is then sent once more per interrupt. */
	bool auto_eoi;
	uint32_t probe_ppr;	  /* PPR before the self-test's EOI */
	bool probe_isr_after_eoi; /* the probe vector's ISR bit after it */
};

/* Sets the TSC rate the waits use (ticks per second). */
void irq_set_tsc_hz(uint64_t hz);
uint64_t irq_us_to_tsc(uint64_t us);
uint64_t irq_tsc_to_us(uint64_t ticks);

/* SDM 11.4.6, 11.8.3.1, 11.9: reads the APIC ID, sets TPR 0 and SVR
 * (enable | 0xff), then runs the self-IPI test (vector 0x30, whose handler
 * leaves the EOI to this function). */
void irq_lapic_setup(struct irq_lapic_info *out);

/* The IOAPIC (MP table address) the pin functions use. */
void irq_set_ioapic(uint64_t base);
uint32_t irq_ioapic_max_entry(void);
/* Adds a device to `pin`'s service list; returns its index on the pin, or
 * -1 if the pin is out of range or full. Call before irq_pin_route(). */
int irq_pin_add_source(unsigned pin, irq_pin_service_fn fn, void *ctx);
/* The redirection entry low dword for a pin: `vector`, fixed delivery, and
 * trigger/polarity from MP spec table 4-10 flags (00 "conforms to the bus"
 * = level, active low for PCI). */
uint32_t irq_rte_for(uint8_t vector, uint16_t mp_flags);
/* Programs and unmasks `pin` (destination first, 82093AA 3.2.4), returns
 * the entry as read back in *lo, *hi. */
void irq_pin_route(unsigned pin, uint32_t rte_lo, uint8_t apic_id, uint32_t *lo, uint32_t *hi);
/* Deferred: the handler masks the pin (it stays masked until
 * irq_pin_mask(pin, false)) instead of calling its sources, so CPL 3 finds
 * the devices still pending. No spurious or storm counting then. */
void irq_pin_defer(unsigned pin, bool deferred);
void irq_pin_mask(unsigned pin, bool masked);
uint32_t irq_pin_rte(unsigned pin);
bool irq_pin_stormed(unsigned pin);

/* Counters since boot. */
uint64_t irq_count(unsigned vector);
uint64_t irq_pin_spurious(unsigned pin);		 /* found no source pending */
uint64_t irq_pin_genuine(unsigned pin, unsigned source); /* summed service returns */

/* Counters at a point in time, which also marks the start of a wait. */
struct irq_snap {
	uint64_t count[256];
	uint64_t spurious[IRQ_IOAPIC_PINS];
	uint64_t genuine[IRQ_IOAPIC_PINS][IRQ_PIN_SOURCES];
	uint64_t tsc;
};
void irq_snap(struct irq_snap *s);
uint64_t irq_new(const struct irq_snap *s, unsigned vector);
/* New interrupts on every vector but `except` (and the spurious vector);
 * the first such vector goes to *first. Pass except 0 to count all. */
uint64_t irq_new_others(const struct irq_snap *s, unsigned except, unsigned *first);
uint64_t irq_pin_spurious_new(const struct irq_snap *s, unsigned pin);
uint64_t irq_pin_genuine_new(const struct irq_snap *s, unsigned pin, unsigned source);

/* Spins until done(arg) is true or timeout_us after the snapshot passed;
 * returns done(arg). */
bool irq_wait_until(const struct irq_snap *s, bool (*done)(void *arg), void *arg,
		    uint64_t timeout_us);
void irq_spin_us(uint64_t us);

/* Whether `spurious` INTx interrupts besides `genuine` ones are acceptable:
 * none, except where the LAPIC self-test found auto_eoi (then up to one per
 * genuine interrupt, counted in irq_tolerated_redeliveries()). */
bool irq_intx_redeliveries_ok(const struct irq_lapic_info *l, uint64_t genuine, uint64_t spurious);
uint64_t irq_tolerated_redeliveries(void);

#endif
