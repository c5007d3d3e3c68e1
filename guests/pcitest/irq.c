/*
 * Step 3: the interrupt side, built on the kit's guest/irq.h: its counting
 * handler on vectors 32..255 (installed at CPL 0 by guest_main), its LAPIC
 * set-up with the in-service self-test, IOAPIC pins whose service
 * callback acknowledges the testdevs on them, and bounded waits. Here: the
 * checks of that set-up, pcitest's vector layout, the waits its checks use,
 * latency figures and the summary.
 *
 * The handler is the only code pcitest runs at CPL 0 after boot, and on
 * our KVM hosts every instruction there is emulated (~2 us each), so
 * td_service() does what a kernel's handler must and nothing else. It never
 * touches 0xCF8 (conf1 is not interrupt-safe).
 *
 * Waits are bounded TSC-deadline spins at CPL 3 reading the counters, with
 * interrupts taken at CPL 3 (run_user_irq): a missing interrupt makes a
 * check fail after WAIT_US, never a hang.
 */
#include "pcitest.h"

/* An expected interrupt gets this long to arrive. */
#define WAIT_US 500000
/* After it arrives (or after a doorbell that must raise nothing), this long
 * for a duplicate or a late one: the VMM's irqfd and resample paths run
 * on other host threads, which a loaded 2-core CI box may delay. */
#define SETTLE_US 30000
#define QUIET_US  30000

struct latency {
	uint64_t n, sum, min, max; /* TSC ticks */
};
static struct latency lat_msi, lat_intx;

/* ---- CPL 0 ---- */

/* A level-triggered INTx (82093AA 3.2.4: remote IRR stays set until the
 * EOI, and the IOAPIC sends the interrupt again if the line is still
 * asserted then), so the handler acknowledges every pending testdev on the
 * pin before the EOI, as a kernel's shared handler does. INTX_PENDING
 * counts the doorbells not yet acknowledged; one INTX_ACK clears them. */
static uint32_t td_service(void *ctx)
{
	const struct pt_dev *d = ctx;
	uint32_t n = mmio_read32(d->bar0 + TD_INTX_PENDING);

	if (n)
		mmio_write32(d->bar0 + TD_INTX_ACK, 1);
	return n;
}

/* ---- set-up, CPL 3 ---- */

/* SDM vol. 3, 11.8.4: a fixed interrupt the CPU accepted sits in ISR, and
 * raises PPR, until the EOI write; 11.8.5: only then does a level-triggered
 * one's EOI reach the IOAPIC. irq_lapic_setup() sends a self-IPI whose
 * handler does not EOI to see whether this LAPIC does that. On our kvm_pvm
 * hosts it does not (QEMU with KVM there behaves the same, QEMU with TCG
 * does not): ISR and PPR read 0 while the interrupt is "in service", and
 * an IOAPIC pin whose line is still asserted is delivered once more
 * straight away. The INTx checks then allow one such re-delivery per
 * interrupt. */
static void report_lapic_self_test(const struct irq_lapic_info *l)
{
	check(l->probe_delivered, "a self-IPI reaches its handler (SDM vol. 3, 11.6.1)",
	      "vector 0x%02x not delivered within %u ms", IRQ_VEC_LAPIC_PROBE, WAIT_US / 1000);
	if (!l->probe_delivered)
		return;
	if (!l->auto_eoi)
		info("LAPIC self-test: an accepted interrupt stays in service until EOI (ISR set, "
		     "PPR 0x%02x; after the EOI ISR %s)",
		     l->probe_ppr, l->probe_isr_after_eoi ? "still set" : "clear");
	else
		info("LAPIC self-test: an accepted interrupt does NOT stay in service (ISR clear, "
		     "PPR 0x%02x before its EOI), as if EOId on acceptance: a host (kvm_pvm) "
		     "property. A still-asserted level INTx is then sent once more, so INTx checks "
		     "allow one re-delivery (finding nothing pending) per interrupt",
		     l->probe_ppr);
}

bool pt_irq_setup(void)
{
	const struct irq_lapic_info *l = &pt.lapic;

	/* SDM vol. 3, 11.4.6: xAPIC ID in bits 31:24; 11.9: SVR bit 8
	 * enables the APIC, bits 7:0 are the spurious vector; 11.8.3.1:
	 * TPR 0 accepts every priority class. */
	irq_lapic_setup(&pt.lapic);
	info("LAPIC: ID %u, version 0x%02x with %u LVT entries, SVR 0x%03x", l->apic_id,
	     l->version & 0xFF, ((l->version >> 16) & 0xFF) + 1, l->svr);
	if (!check(l->enabled,
		   "LAPIC software-enabled, spurious vector 0xff, TPR 0 (SDM vol. 3, 11.9)",
		   "SVR 0x%x, TPR 0x%x", l->svr, l->tpr))
		return false;
	report_lapic_self_test(l);

	if (!pt.mp.ok) {
		skip("IOAPIC set-up", "no usable MP table");
		return true;
	}
	irq_set_ioapic(pt.mp.ioapic);
	uint32_t iover = ioapic_read(pt.mp.ioapic, IOAPIC_REG_VER);
	uint32_t ioid = (ioapic_read(pt.mp.ioapic, IOAPIC_REG_ID) >> 24) & 0xF;
	unsigned max_entry = (iover >> 16) & 0xFF;
	info("IOAPIC at 0x%lx: ID register %u (MP table: %u), version 0x%02x, %u entries",
	     pt.mp.ioapic, ioid, pt.mp.ioapic_id, iover & 0xFF, max_entry + 1);
	check(max_entry == 23, "IOAPIC has 24 redirection entries (82093AA 3.2.2)",
	      "maximum redirection entry %u", max_entry);

	uint32_t rte_lo[PCI_IOAPIC_PINS] = {0};
	bool used[PCI_IOAPIC_PINS] = {false};
	for (unsigned i = 0; i < pt.ndev; i++) {
		struct pt_dev *d = &pt.dev[i];
		if (!d->usable || !d->pin)
			continue;
		/* Never -1: a pin has room for every testdev (pcitest.h). */
		d->pin_slot = (unsigned)irq_pin_add_source(d->pin, td_service, d);
		used[d->pin - PCI_IOAPIC_PIN_FIRST] = true;
		rte_lo[d->pin - PCI_IOAPIC_PIN_FIRST] =
		    irq_rte_for((uint8_t)intx_vector(d), d->pin_flags);
	}
	for (unsigned pin = PCI_IOAPIC_PIN_FIRST; pin < PCI_IOAPIC_PIN_FIRST + PCI_IOAPIC_PINS;
	     pin++) {
		uint32_t want = rte_lo[pin - PCI_IOAPIC_PIN_FIRST], lo, hi;
		if (!used[pin - PCI_IOAPIC_PIN_FIRST] || pin > max_entry)
			continue;
		irq_pin_route(pin, want, l->apic_id, &lo, &hi);
		char what[120];
		snprintf(
		    what, sizeof(what),
		    "IOAPIC pin %u: vector 0x%02x, fixed, physical to APIC %u, %s, %s, unmasked",
		    pin, want & 0xFF, l->apic_id, want & IOAPIC_RTE_LEVEL ? "level" : "edge",
		    want & IOAPIC_RTE_ACTIVE_LOW ? "active low" : "active high");
		check((lo & ~(IOAPIC_RTE_DELIVS | IOAPIC_RTE_REMOTE_IRR)) == want &&
			  !(lo & IOAPIC_RTE_REMOTE_IRR) && hi >> 24 == l->apic_id,
		      what, "entry reads 0x%08x %08x, wrote 0x%08x with destination %u", hi, lo,
		      want, l->apic_id);
	}
	return true;
}

/* ---- waits and counters, CPL 3 ---- */

uint64_t pt_acked_new(const struct irq_snap *s, const struct pt_dev *d)
{
	return d->pin ? irq_pin_genuine_new(s, d->pin, d->pin_slot) : 0;
}

uint64_t pt_spurious_new(const struct irq_snap *s, const struct pt_dev *d)
{
	return d->pin ? irq_pin_spurious_new(s, d->pin) : 0;
}

static void note_latency(unsigned vector, uint64_t ticks)
{
	struct latency *l = vector >= VEC_INTX_BASE ? &lat_intx : &lat_msi;
	if (!l->n || ticks < l->min)
		l->min = ticks;
	if (ticks > l->max)
		l->max = ticks;
	l->sum += ticks;
	l->n++;
}

struct wait_arg {
	const struct irq_snap *s;
	unsigned vector;
	const struct pt_dev *d;
	uint64_t want;
};

static bool vector_done(void *arg)
{
	const struct wait_arg *a = arg;
	return irq_new(a->s, a->vector) >= a->want;
}

static bool acked_done(void *arg)
{
	const struct wait_arg *a = arg;
	return pt_acked_new(a->s, a->d) >= a->want;
}

uint64_t pt_wait(const struct irq_snap *s, unsigned vector, uint64_t want)
{
	struct wait_arg a = {s, vector, NULL, want};
	bool arrived = irq_wait_until(s, vector_done, &a, WAIT_US);
	uint64_t t = rdtsc();

	if (arrived && want == 1)
		note_latency(vector, t - s->tsc);
	irq_spin_us(SETTLE_US);
	return irq_new(s, vector);
}

uint64_t pt_wait_acked(const struct irq_snap *s, const struct pt_dev *d, uint64_t want)
{
	struct wait_arg a = {s, 0, d, want};

	irq_wait_until(s, acked_done, &a, WAIT_US);
	irq_spin_us(SETTLE_US);
	return pt_acked_new(s, d);
}

void pt_quiet(void)
{
	irq_spin_us(QUIET_US);
}

bool check_irqs(const struct irq_snap *s, unsigned vector, uint64_t want, const char *what)
{
	unsigned first;
	uint64_t got = irq_new(s, vector), others = irq_new_others(s, vector, &first);

	return check(got == want && others == 0, what,
		     "%lu on vector 0x%02x (expected %lu), %lu on other vectors (first 0x%02x)",
		     got, vector, want, others, first);
}

bool check_intx_irqs(const struct irq_snap *s, const struct pt_dev *d, uint64_t want,
		     bool handler_acks, const char *what)
{
	unsigned v = intx_vector(d), first;
	uint64_t seen = irq_new(s, v), others = irq_new_others(s, v, &first);
	uint64_t spurious = handler_acks ? pt_spurious_new(s, d) : (seen > want ? seen - want : 0);
	uint64_t genuine = seen - spurious;
	bool ok = others == 0 && genuine == want &&
		  irq_intx_redeliveries_ok(&pt.lapic, genuine, spurious);

	return check(ok, what,
		     "%lu on vector 0x%02x, %lu of them %s (expected %lu%s), %lu on other vectors "
		     "(first 0x%02x)",
		     seen, v, spurious, handler_acks ? "found nothing pending" : "beyond the first",
		     want, pt.lapic.auto_eoi ? ", plus up to one re-delivery each" : "", others,
		     first);
}

unsigned intx_vector(const struct pt_dev *d)
{
	return VEC_INTX_BASE + d->pin - PCI_IOAPIC_PIN_FIRST;
}

/* ---- summary ---- */

static void report_latency(const char *what, const struct latency *l)
{
	if (!l->n)
		return;
	info("%s: %lu interrupts, doorbell to handler done (seen at CPL 3) min %lu us, "
	     "mean %lu us, max %lu us",
	     what, l->n, irq_tsc_to_us(l->min), irq_tsc_to_us(l->sum / l->n),
	     irq_tsc_to_us(l->max));
}

void pt_irq_report(void)
{
	uint64_t stray = 0, spurious = irq_count(IRQ_VEC_SPURIOUS);
	unsigned first = 0;

	for (unsigned v = 32; v < IRQ_VEC_SPURIOUS; v++) {
		bool msi = v >= VEC_MSIX_BASE && v < VEC_MSIX_BASE + VEC_MSIX_COUNT;
		bool intx = v >= VEC_INTX_BASE && v < VEC_INTX_BASE + PCI_IOAPIC_PINS;
		if (!msi && !intx && v != IRQ_VEC_LAPIC_PROBE && irq_count(v)) {
			if (!stray)
				first = v;
			stray += irq_count(v);
		}
	}
	check(stray == 0, "no interrupts on vectors pcitest did not program",
	      "%lu, the first on vector 0x%02x", stray, first);
	unsigned stormed = 0;
	for (unsigned pin = PCI_IOAPIC_PIN_FIRST; pin < PCI_IOAPIC_PIN_FIRST + PCI_IOAPIC_PINS;
	     pin++)
		if (irq_pin_stormed(pin) && !stormed++)
			first = pin;
	check(stormed == 0, "no INTx interrupt storm",
	      "%u pins, the first pin %u: more than %u interrupts in one check, so the handler "
	      "masked it",
	      stormed, first, IRQ_STORM_BUDGET);
	if (spurious)
		info("%lu interrupts on the LAPIC spurious vector 0xff", spurious);
	if (irq_tolerated_redeliveries())
		info("%lu INTx re-deliveries that found nothing pending were tolerated (LAPIC "
		     "self-test: no in-service state on this host)",
		     irq_tolerated_redeliveries());
	report_latency("MSI-X latency", &lat_msi);
	report_latency("INTx latency", &lat_intx);
}
