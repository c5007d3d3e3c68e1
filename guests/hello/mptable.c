/*
 * MP table checks (Intel MultiProcessor Specification 1.4, chapter 4).
 *
 * The floating pointer is searched where spec 4 says a BIOS puts it, in the
 * order Linux's find_smp_config/smp_scan_config look: the first KiB of the
 * EBDA, the last KiB of base memory, then the BIOS ROM area. The search,
 * the layouts and the entry framing come from the kit's reader
 * (guest/mptable.h); every field is checked here. Runs at CPL 3.
 */
#include "hello.h"

#include "guest/mptable.h"

#define MP_LAPIC_ADDR  0xFEE00000u
#define MP_IOAPIC_ADDR 0xFEC00000u
#define MP_PCI_BUS     0
#define MP_ISA_BUS     1

struct mp_counts {
	unsigned cpus, buses, ioapics, isa_irqs, pci_irqs, lints;
	unsigned bad;	   /* entries that broke a rule (each is reported) */
	uint16_t isa_seen; /* bit per ISA IRQ */
	bool pci_bus, isa_bus, lint0_extint, lint1_nmi;
	uint8_t ioapic_id;
};

static void bad_entry(struct hello *h, struct mp_counts *c, unsigned i, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void bad_entry(struct hello *h, struct mp_counts *c, unsigned i, const char *fmt, ...)
{
	char detail[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	c->bad++;
	check(h, false, "MP table entry", "entry %u: %s", i, detail);
}

static void check_entry(struct hello *h, struct mp_counts *c, unsigned i, const uint8_t *p)
{
	switch (p[0]) {
	case MP_ENTRY_PROCESSOR: {
		const struct mp_processor *cpu = (const void *)p;
		/* APIC IDs 0..n-1 in order, all enabled, the first one the BSP. */
		bool want_bsp = c->cpus == 0;
		if (cpu->apic_id != c->cpus || !(cpu->cpu_flags & MP_CPU_ENABLED) ||
		    !!(cpu->cpu_flags & MP_CPU_BSP) != want_bsp)
			bad_entry(h, c, i, "processor %u has APIC ID %u, flags 0x%x", c->cpus,
				  cpu->apic_id, cpu->cpu_flags);
		c->cpus++;
		break;
	}
	case MP_ENTRY_BUS: {
		const struct mp_bus *bus = (const void *)p;
		if (bus->bus_id == MP_PCI_BUS && !memcmp(bus->bus_type, "PCI   ", 6) && !c->pci_bus)
			c->pci_bus = true;
		else if (bus->bus_id == MP_ISA_BUS && !memcmp(bus->bus_type, "ISA   ", 6) &&
			 !c->isa_bus)
			c->isa_bus = true;
		else
			bad_entry(h, c, i, "unexpected bus %u \"%.6s\"", bus->bus_id,
				  bus->bus_type);
		c->buses++;
		break;
	}
	case MP_ENTRY_IOAPIC: {
		const struct mp_ioapic *io = (const void *)p;
		if (c->ioapics || !(io->flags & MP_IOAPIC_USABLE) || io->address != MP_IOAPIC_ADDR)
			bad_entry(h, c, i, "IOAPIC %u id %u flags 0x%x at 0x%x", c->ioapics,
				  io->apic_id, io->flags, io->address);
		c->ioapics++;
		break;
	}
	case MP_ENTRY_IOINT: {
		const struct mp_intsrc *irq = (const void *)p;
		if (irq->src_bus == MP_ISA_BUS) {
			/* ISA IRQ n -> IOAPIC pin n, vectored (INT). */
			unsigned n = irq->src_bus_irq;
			if (n > 15 || irq->irq_type != MP_IRQ_INT ||
			    irq->dst_apic != c->ioapic_id || irq->dst_irq != n ||
			    (c->isa_seen & (1u << n)))
				bad_entry(h, c, i, "ISA IRQ %u type %u -> IOAPIC %u pin %u%s", n,
					  irq->irq_type, irq->dst_apic, irq->dst_irq,
					  n <= 15 && (c->isa_seen & (1u << n)) ? " (repeated)"
									       : "");
			else
				c->isa_seen |= (uint16_t)(1u << n);
			c->isa_irqs++;
		} else if (irq->src_bus == MP_PCI_BUS) {
			/* PCI INTx: src_bus_irq = slot << 2 | (pin - 1); the
			 * VMM wires them to IOAPIC pins 16..23. */
			if (irq->irq_type != MP_IRQ_INT || irq->dst_apic != c->ioapic_id ||
			    irq->dst_irq < 16 || irq->dst_irq > 23)
				bad_entry(h, c, i, "PCI slot %u INT%c type %u -> IOAPIC %u pin %u",
					  irq->src_bus_irq >> 2, 'A' + (irq->src_bus_irq & 3),
					  irq->irq_type, irq->dst_apic, irq->dst_irq);
			c->pci_irqs++;
		} else {
			bad_entry(h, c, i, "I/O interrupt from unknown bus %u", irq->src_bus);
		}
		break;
	}
	case MP_ENTRY_LINT: {
		const struct mp_intsrc *l = (const void *)p;
		if (l->dst_apic == 0xFF && l->dst_irq == 0 && l->irq_type == MP_IRQ_EXTINT &&
		    !c->lint0_extint)
			c->lint0_extint = true;
		else if (l->dst_apic == 0xFF && l->dst_irq == 1 && l->irq_type == MP_IRQ_NMI &&
			 !c->lint1_nmi)
			c->lint1_nmi = true;
		else
			bad_entry(h, c, i, "local interrupt type %u -> APIC 0x%x LINT%u",
				  l->irq_type, l->dst_apic, l->dst_irq);
		c->lints++;
		break;
	}
	default: break; /* mp_iter_next() stops at an unknown type */
	}
}

void check_mptable(struct hello *h)
{
	struct mp_search where;
	const struct mp_floating *mpf = mp_search_floating(&where);

	info("BDA: EBDA segment at 0x%lx, base memory %lu KiB", where.ebda, where.base_kib);
	if (!mpf) {
		if (where.first_sig)
			check(h, false, "MP floating pointer found (MP spec 4)",
			      "\"_MP_\" at 0x%lx has a bad length or checksum", where.first_sig);
		else
			check(h, false, "MP floating pointer found (MP spec 4)",
			      "no \"_MP_\" in the EBDA, base memory end or 0xf0000-0xfffff");
		return;
	}
	check(h, true, "MP floating pointer found (MP spec 4)", "-");
	info("MP floating pointer at %p in %s, config table at 0x%x", (const void *)mpf,
	     where.where, mpf->physptr);
	check(h, ((uint64_t)mpf & 15) == 0 && mpf->length == 1,
	      "MP floating pointer is one 16-byte paragraph", "length %u", mpf->length);
	check(h, mpf->specification == 4, "MP floating pointer spec rev is 1.4", "rev %u",
	      mpf->specification);
	check(h, mp_checksum(mpf, 16) == 0, "MP floating pointer checksum", "sum 0x%02x",
	      mp_checksum(mpf, 16));
	/* Spec 4.1: feature byte 1 = 0 means "a configuration table is
	 * present"; non-zero selects a default configuration instead. */
	if (!check(h, mpf->feature1 == 0 && mpf->physptr != 0,
		   "MP floating pointer points at a config table", "feature1 %u, physptr 0x%x",
		   mpf->feature1, mpf->physptr))
		return;

	/* Not mp_config_table(): a bad checksum here is one failed check, and
	 * the fields are still checked. */
	const struct mp_config *mpc = (const struct mp_config *)(uint64_t)mpf->physptr;
	const uint8_t *base = (const uint8_t *)mpc;
	if (!check(h, !memcmp(mpc->signature, "PCMP", 4), "MP config table signature is \"PCMP\"",
		   "\"%.4s\"", mpc->signature))
		return;
	check(h, mpc->length >= sizeof(*mpc) && mp_checksum(mpc, mpc->length) == 0,
	      "MP config table base checksum", "length %u, sum 0x%02x", mpc->length,
	      mp_checksum(mpc, mpc->length));
	/* Spec 4.2: the extended checksum plus the extended entries' bytes
	 * sums to zero (an empty extended table has checksum 0). */
	uint8_t ext_sum =
	    (uint8_t)(mp_checksum(base + mpc->length, mpc->ext_length) + mpc->ext_checksum);
	check(h, ext_sum == 0, "MP config table extended checksum", "ext length %u, sum 0x%02x",
	      mpc->ext_length, ext_sum);
	check(h, mpc->spec == 4, "MP config table spec rev is 1.4", "rev %u", mpc->spec);
	check(h, mpc->lapic == MP_LAPIC_ADDR, "MP config table LAPIC address is 0xfee00000", "0x%x",
	      mpc->lapic);
	info("MP config table: OEM \"%.8s\" product \"%.12s\", %u entries", mpc->oem,
	     mpc->productid, mpc->count);

	/* Entries (spec 4.3), framed by mp_iter_next(). A first pass checks
	 * the framing and finds the IOAPIC's id, which the interrupt entries
	 * refer to wherever they sit in the table. */
	struct mp_counts c;
	memset(&c, 0, sizeof(c));
	struct mp_iter it = mp_iter_start(mpc);
	for (const uint8_t *e; (e = mp_iter_next(&it));)
		if (e[0] == MP_ENTRY_IOAPIC)
			c.ioapic_id = ((const struct mp_ioapic *)e)->apic_id;
	if (it.malformed) {
		check(h, false, "MP config table entries are well-formed",
		      "entry %u at offset %zu: type %u, table length %u", it.index, it.off,
		      it.off < mpc->length ? base[it.off] : 0xFF, mpc->length);
		return;
	}
	check(h, it.off == mpc->length, "MP config table entries fill the base table",
	      "entries end at %zu, length %u", it.off, mpc->length);
	it = mp_iter_start(mpc);
	for (const uint8_t *e; (e = mp_iter_next(&it));)
		check_entry(h, &c, it.index - 1, e);
	info("MP entries: %u processors, %u buses, %u IOAPICs, %u ISA + %u PCI I/O interrupts, "
	     "%u local interrupts",
	     c.cpus, c.buses, c.ioapics, c.isa_irqs, c.pci_irqs, c.lints);

	uint64_t want_cpus;
	if (cmdline_number(h, "hello.cpus", &want_cpus))
		check(h, c.cpus == want_cpus, "MP processor count matches hello.cpus",
		      "%u processors, expected %lu", c.cpus, want_cpus);
	else
		check(h, c.cpus >= 1, "MP table lists at least one processor", "none");
	check(h, c.pci_bus && c.isa_bus, "MP buses are 0 \"PCI\" and 1 \"ISA\"", "PCI %s, ISA %s",
	      c.pci_bus ? "found" : "missing", c.isa_bus ? "found" : "missing");
	check(h, c.ioapics == 1, "MP table has exactly one IOAPIC", "%u", c.ioapics);
	check(h, c.isa_seen == 0xFFFF, "MP ISA IRQs 0-15 each route to the same IOAPIC pin",
	      "routed set 0x%04x", c.isa_seen);
	check(h, c.lint0_extint && c.lint1_nmi, "MP LINT0 is ExtINT and LINT1 is NMI on all APICs",
	      "LINT0 %s, LINT1 %s", c.lint0_extint ? "ok" : "missing",
	      c.lint1_nmi ? "ok" : "missing");
	check(h, c.bad == 0, "MP entries all follow the rules", "%u bad entries above", c.bad);
}
