/*
 * Steps 5 and 6: INTx (PCI Local Bus 3.0, 2.2.6: level-sensitive, shared
 * INTx# lines; 6.2.2 command bit 10 Interrupt Disable; 6.2.3 status bit 3
 * Interrupt Status) through the IOAPIC pin the MP table names, at CPL 3.
 *
 * Exactly-once for a level-triggered line means: every doorbell is
 * acknowledged exactly once by the handler (INTX_PENDING summed over the
 * acknowledgements equals the doorbells rung), no interrupt finds nothing
 * to acknowledge, and nothing is left pending. When the handler can only
 * run once per doorbell (each one waited for), that is also one interrupt
 * per doorbell; doorbells rung back to back may share one. The one
 * exception is a host whose LAPIC does not hold interrupts in service
 * (guest/irq.h's self-test; our kvm_pvm hosts): there the IOAPIC sends a level
 * that is still asserted once more as soon as it is accepted, and one such
 * re-delivery per genuine interrupt, finding nothing pending, is allowed
 * (and counted in the summary).
 */
#include "pcitest.h"

static const char *yn(bool b)
{
	return b ? "set" : "clear";
}

/* The handler masks the pin (as a threaded handler's top half would);
 * CPL 3 then sees the device pending, acknowledges it, and unmasks. */
static void pending_then_ack(struct pt_dev *d)
{
	unsigned v = intx_vector(d), first;
	struct irq_snap s;

	irq_pin_defer(d->pin, true);
	irq_snap(&s);
	td_ring(d, 0);
	pt_wait(&s, v, 1);
	irq_pin_defer(d->pin, false);
	check_intx_irqs(&s, d, 1, false,
			"a doorbell raises one INTx interrupt (handler masks the pin)");

	uint32_t pending = td_read(d, TD_INTX_PENDING);
	bool status = td_status_intx(d);
	check(pending == 1 && status, "while pending: INTX_PENDING 1, status bit 3 set (6.2.3)",
	      "00:%02x.0: INTX_PENDING %u, status bit 3 %s", d->slot, pending, yn(status));
	mmio_write32(d->bar0 + TD_INTX_ACK, 0);
	pending = td_read(d, TD_INTX_PENDING);
	status = td_status_intx(d);
	check(pending == 0 && !status, "after INTX_ACK: INTX_PENDING 0, status bit 3 clear",
	      "00:%02x.0: INTX_PENDING %u, status bit 3 %s", d->slot, pending, yn(status));
	/* The EOI reached the IOAPIC although the pin was masked. */
	uint32_t rte = irq_pin_rte(d->pin);
	check((rte & IOAPIC_RTE_MASKED) && !(rte & IOAPIC_RTE_REMOTE_IRR),
	      "the handler's EOI cleared remote IRR of the masked pin (82093AA 3.2.4)",
	      "pin %u entry low dword 0x%08x", d->pin, rte);

	irq_snap(&s);
	irq_pin_mask(d->pin, false);
	pt_quiet();
	uint64_t again = irq_new(&s, v);
	check(again == 0 && irq_new_others(&s, v, &first) == 0,
	      "unmasking the pin after the acknowledgement raises nothing",
	      "00:%02x.0: %lu more interrupts on 0x%02x (the handler acknowledged %lu doorbells "
	      "and found nothing pending %lu times)",
	      d->slot, again, v, pt_acked_new(&s, d), pt_spurious_new(&s, d));
}

/* 6.2.2 bit 10: the device may not assert INTx#, but (6.2.3) still shows
 * its interrupt condition in status bit 3; clearing the bit asserts it. */
static void interrupt_disable(struct pt_dev *d)
{
	unsigned v = intx_vector(d), first;
	uint16_t cmd = cfg_read16(d, PCI_COMMAND);
	struct irq_snap s;

	cfg_write16(d, PCI_COMMAND, cmd | PCI_CMD_INTX_DISABLE);
	irq_snap(&s);
	td_ring(d, 0);
	pt_quiet();
	uint64_t n = irq_new_others(&s, 0, &first);
	uint32_t pending = td_read(d, TD_INTX_PENDING);
	bool status = td_status_intx(d);
	check(n == 0 && pending == 1 && status,
	      "Interrupt Disable set (command bit 10): a doorbell raises nothing, status bit 3 set",
	      "00:%02x.0: %lu interrupts (first vector 0x%02x), INTX_PENDING %u, status bit 3 %s",
	      d->slot, n, first, pending, yn(status));

	irq_snap(&s);
	cfg_write16(d, PCI_COMMAND, cmd);
	pt_wait(&s, v, 1);
	check_intx_irqs(&s, d, 1, true,
			"clearing Interrupt Disable delivers the pending INTx once");
	uint64_t acked = pt_acked_new(&s, d);
	pending = td_read(d, TD_INTX_PENDING);
	status = td_status_intx(d);
	check(acked == 1 && pending == 0 && !status,
	      "the handler acknowledged it: INTX_PENDING 0, status bit 3 clear",
	      "00:%02x.0: %lu acknowledged, INTX_PENDING %u, status bit 3 %s", d->slot, acked,
	      pending, yn(status));
}

/* Five doorbells, each waited for, then five back to back. */
static void five_in_a_row(struct pt_dev *d)
{
	unsigned v = intx_vector(d), first;
	struct irq_snap s;

	irq_snap(&s);
	for (unsigned k = 1; k <= 5; k++) {
		td_ring(d, 0);
		pt_wait_acked(&s, d, k);
	}
	uint64_t seen = irq_new(&s, v), acked = pt_acked_new(&s, d);
	uint64_t spur = pt_spurious_new(&s, d), others = irq_new_others(&s, v, &first);
	info("00:%02x.0: 5 doorbells each waited for: %lu interrupts, %lu doorbells acknowledged, "
	     "%lu interrupts with nothing pending",
	     d->slot, seen, acked, spur);
	check(seen - spur == 5 && acked == 5 &&
		  irq_intx_redeliveries_ok(&pt.lapic, seen - spur, spur) && others == 0,
	      "5 doorbells, each waited for: 5 genuine interrupts, 5 acknowledged in the handler",
	      "00:%02x.0: %lu interrupts, %lu acknowledged, %lu with nothing pending, %lu on "
	      "other vectors",
	      d->slot, seen, acked, spur, others);

	irq_snap(&s);
	for (unsigned k = 0; k < 5; k++)
		td_ring(d, 0);
	pt_wait_acked(&s, d, 5);
	seen = irq_new(&s, v);
	acked = pt_acked_new(&s, d);
	spur = pt_spurious_new(&s, d);
	others = irq_new_others(&s, v, &first);
	uint32_t pending = td_read(d, TD_INTX_PENDING);
	info("00:%02x.0: 5 doorbells back to back: %lu interrupts, %lu doorbells acknowledged, "
	     "%lu interrupts with nothing pending",
	     d->slot, seen, acked, spur);
	check(acked == 5 && seen - spur >= 1 && seen - spur <= 5 &&
		  irq_intx_redeliveries_ok(&pt.lapic, seen - spur, spur) && others == 0 &&
		  pending == 0 && !td_status_intx(d),
	      "5 doorbells back to back: all 5 acknowledged once, no interrupt without a doorbell",
	      "00:%02x.0: %lu interrupts, %lu acknowledged, %lu with nothing pending, %lu on other "
	      "vectors, INTX_PENDING %u",
	      d->slot, seen, acked, spur, others, pending);
}

void pt_intx(struct pt_dev *d)
{
	if (!check(d->pin != 0, "the MP table gives the testdev an IOAPIC pin 16-23",
		   "00:%02x.0: no usable I/O interrupt entry", d->slot))
		return;
	info("--- INTx of 00:%02x.0: IOAPIC pin %u, vector 0x%02x ---", d->slot, d->pin,
	     intx_vector(d));
	uint16_t cmd = cfg_read16(d, PCI_COMMAND);
	uint32_t pending = td_read(d, TD_INTX_PENDING);
	check(!(cmd & PCI_CMD_INTX_DISABLE) && pending == 0 && !td_status_intx(d),
	      "INTx idle: Interrupt Disable clear, nothing pending, status bit 3 clear",
	      "00:%02x.0: command 0x%04x, INTX_PENDING %u, status 0x%04x", d->slot, cmd, pending,
	      cfg_read16(d, PCI_STATUS));
	pending_then_ack(d);
	interrupt_disable(d);
	five_in_a_row(d);
	uint32_t db = td_read(d, TD_DOORBELLS);
	check(db == d->doorbells, "DOORBELLS counts every doorbell write",
	      "00:%02x.0: %u, expected %u", d->slot, db, d->doorbells);
}

/* ---- step 6 ---- */

/* One doorbell on `one`: one interrupt, the handler finds `one` pending
 * and leaves `other` alone. */
static void shared_single(struct pt_dev *one, struct pt_dev *other)
{
	unsigned v = intx_vector(one);
	struct irq_snap s;
	char what[120];

	irq_snap(&s);
	td_ring(one, 0);
	pt_wait(&s, v, 1);
	snprintf(what, sizeof(what),
		 "pin %u shared: a doorbell on 00:%02x.0 alone raises one interrupt", one->pin,
		 one->slot);
	check_intx_irqs(&s, one, 1, true, what);
	uint64_t a1 = pt_acked_new(&s, one), a2 = pt_acked_new(&s, other);
	snprintf(what, sizeof(what), "the handler acknowledged 00:%02x.0 only", one->slot);
	check(a1 == 1 && a2 == 0 && td_read(one, TD_INTX_PENDING) == 0, what,
	      "acknowledged %lu on 00:%02x.0, %lu on 00:%02x.0", a1, one->slot, a2, other->slot);
}

static void shared_pin(struct pt_dev *a, struct pt_dev *b)
{
	unsigned v = intx_vector(a), first;
	struct irq_snap s;
	char what[140];

	info("--- 00:%02x.0 and 00:%02x.0 share IOAPIC pin %u ---", a->slot, b->slot, a->pin);
	irq_pin_defer(a->pin, false);
	shared_single(a, b);
	shared_single(b, a);

	/* Both before the handler runs: TPR 0xf0 holds the interrupt in the
	 * LAPIC's IRR (SDM vol. 3, 11.8.3.1) while both doorbells ring. */
	lapic_write(LAPIC_TPR, LAPIC_TPR_BLOCK_ALL);
	irq_snap(&s);
	td_ring(a, 0);
	td_ring(b, 0);
	pt_quiet();
	uint64_t early = irq_new_others(&s, 0, &first);
	uint32_t pa = td_read(a, TD_INTX_PENDING), pb = td_read(b, TD_INTX_PENDING);
	bool sa = td_status_intx(a), sb = td_status_intx(b);
	snprintf(what, sizeof(what),
		 "pin %u shared, TPR 0xf0: both devices pending, status bit 3 set on both", a->pin);
	check(early == 0 && pa == 1 && pb == 1 && sa && sb, what,
	      "%lu interrupts got through; INTX_PENDING %u and %u, status bit 3 %s and %s", early,
	      pa, pb, yn(sa), yn(sb));

	s.tsc = rdtsc();
	lapic_write(LAPIC_TPR, 0);
	pt_wait(&s, v, 1);
	uint64_t seen = irq_new(&s, v), others = irq_new_others(&s, v, &first);
	uint64_t aa = pt_acked_new(&s, a), ab = pt_acked_new(&s, b);
	uint64_t spur = pt_spurious_new(&s, a);
	pa = td_read(a, TD_INTX_PENDING);
	pb = td_read(b, TD_INTX_PENDING);
	info("pin %u: both rung before the handler ran: %lu interrupts, acknowledged %lu + %lu, "
	     "%lu with nothing pending",
	     a->pin, seen, aa, ab, spur);
	snprintf(what, sizeof(what),
		 "pin %u shared, TPR 0: 1 or 2 interrupts, both devices acknowledged, none pending",
		 a->pin);
	check(seen >= 1 && seen <= 2 && seen > spur && others == 0 && aa == 1 && ab == 1 &&
		  pa == 0 && pb == 0 && !td_status_intx(a) && !td_status_intx(b),
	      what,
	      "%lu interrupts (%lu on other vectors), acknowledged %lu and %lu, INTX_PENDING %u "
	      "and %u",
	      seen, others, aa, ab, pa, pb);
}

void pt_shared_pins(void)
{
	bool any = false;

	for (unsigned pin = PCI_IOAPIC_PIN_FIRST; pin < PCI_IOAPIC_PIN_FIRST + PCI_IOAPIC_PINS;
	     pin++) {
		struct pt_dev *a = NULL, *b = NULL;
		for (unsigned i = 0; i < pt.ndev && !b; i++) {
			struct pt_dev *d = &pt.dev[i];
			if (!d->usable || d->pin != pin)
				continue;
			if (!a)
				a = d;
			else
				b = d;
		}
		if (b) {
			any = true;
			shared_pin(a, b);
		}
	}
	if (!any)
		skip("shared INTx pin checks", pt.ndev >= 2 ? "no two testdevs share an IOAPIC pin"
							    : "fewer than two testdevs");
}
