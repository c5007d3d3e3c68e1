/*
 * MP table checks (Intel MultiProcessor Specification 1.4, chapter 4).
 *
 * The floating pointer is searched where spec 4 says a BIOS puts it, in the
 * order Linux's find_smp_config/smp_scan_config look: the first KiB of the
 * EBDA, the last KiB of base memory, then the BIOS ROM area. Runs at CPL 3.
 */
#include "hello.h"

#define MP_LAPIC_ADDR  0xFEE00000u
#define MP_IOAPIC_ADDR 0xFEC00000u
#define MP_PCI_BUS     0
#define MP_ISA_BUS     1

/* Spec 4.1, table 4-1. */
struct mpf_intel {
	char signature[4]; /* "_MP_" */
	uint32_t physptr;
	uint8_t length; /* in 16-byte units */
	uint8_t specification;
	uint8_t checksum;
	uint8_t feature1; /* 0: a configuration table is present */
	uint8_t feature2;
	uint8_t feature3[3];
} __attribute__((packed));
_Static_assert(sizeof(struct mpf_intel) == 16, "MP floating pointer is 16 bytes");

/* Spec 4.2, table 4-2. */
struct mpc_table {
	char signature[4]; /* "PCMP" */
	uint16_t length;   /* base table, header included */
	uint8_t spec;
	uint8_t checksum;
	char oem[8];
	char productid[12];
	uint32_t oemptr;
	uint16_t oemsize;
	uint16_t oemcount; /* number of base entries */
	uint32_t lapic;
	uint16_t ext_length;
	uint8_t ext_checksum;
	uint8_t reserved;
} __attribute__((packed));
_Static_assert(sizeof(struct mpc_table) == 44, "MP config table header is 44 bytes");

/* Spec 4.3, tables 4-3 .. 4-10. */
enum { MP_PROCESSOR, MP_BUS, MP_IOAPIC, MP_INTSRC, MP_LINTSRC };

struct mpc_cpu {
	uint8_t type, apicid, apicver, cpuflag;
	uint32_t cpufeature, featureflag;
	uint32_t reserved[2];
} __attribute__((packed));
_Static_assert(sizeof(struct mpc_cpu) == 20, "processor entry is 20 bytes");
#define CPU_ENABLED	  1
#define CPU_BOOTPROCESSOR 2

struct mpc_bus {
	uint8_t type, busid;
	char bustype[6];
} __attribute__((packed));

struct mpc_ioapic {
	uint8_t type, apicid, apicver, flags;
	uint32_t apicaddr;
} __attribute__((packed));
#define IOAPIC_USABLE 1

/* Both interrupt entry kinds share this layout (tables 4-8 and 4-10). */
struct mpc_irq {
	uint8_t type, irqtype;
	uint16_t irqflag;
	uint8_t srcbus, srcbusirq, dstapic, dstirq;
} __attribute__((packed));
_Static_assert(sizeof(struct mpc_irq) == 8, "interrupt entries are 8 bytes");
enum { MP_IRQ_INT, MP_IRQ_NMI, MP_IRQ_SMI, MP_IRQ_EXTINT };

static uint8_t checksum(const uint8_t *p, size_t n)
{
	uint8_t sum = 0;
	while (n--)
		sum = (uint8_t)(sum + *p++);
	return sum;
}

/* Linux smp_scan_config: 16-byte steps, signature plus length and checksum,
 * so a stray "_MP_" in memory is not taken for the table. */
static const struct mpf_intel *scan(uint64_t base, uint64_t len, uint64_t *first_sig)
{
	for (uint64_t a = base; a + 16 <= base + len; a += 16) {
		const struct mpf_intel *mpf = (const struct mpf_intel *)a;
		if (memcmp(mpf->signature, "_MP_", 4))
			continue;
		if (!*first_sig)
			*first_sig = a;
		if (mpf->length == 1 && checksum((const uint8_t *)mpf, 16) == 0)
			return mpf;
	}
	return NULL;
}

static const struct mpf_intel *find_mpf(const char **where, uint64_t *first_sig)
{
	/* BIOS data area (at 0x400): word 0x0e = EBDA segment, word 0x13 =
	 * base memory in KiB. */
	uint64_t ebda = (uint64_t)mmio_read16(0x40E) << 4;
	uint64_t base_kib = mmio_read16(0x413);
	const struct mpf_intel *mpf;

	*first_sig = 0;
	info("BDA: EBDA segment at 0x%lx, base memory %lu KiB", ebda, base_kib);
	if (ebda && (mpf = scan(ebda, 1024, first_sig))) {
		*where = "the EBDA";
		return mpf;
	}
	if (base_kib >= 1 && base_kib <= 640 &&
	    (mpf = scan((base_kib - 1) * 1024, 1024, first_sig))) {
		*where = "the last KiB of base memory";
		return mpf;
	}
	if ((mpf = scan(0xF0000, 0x10000, first_sig))) {
		*where = "the BIOS ROM area";
		return mpf;
	}
	return NULL;
}

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
	case MP_PROCESSOR: {
		const struct mpc_cpu *cpu = (const void *)p;
		/* APIC IDs 0..n-1 in order, all enabled, the first one the BSP. */
		bool want_bsp = c->cpus == 0;
		if (cpu->apicid != c->cpus || !(cpu->cpuflag & CPU_ENABLED) ||
		    !!(cpu->cpuflag & CPU_BOOTPROCESSOR) != want_bsp)
			bad_entry(h, c, i, "processor %u has APIC ID %u, flags 0x%x", c->cpus,
				  cpu->apicid, cpu->cpuflag);
		c->cpus++;
		break;
	}
	case MP_BUS: {
		const struct mpc_bus *bus = (const void *)p;
		if (bus->busid == MP_PCI_BUS && !memcmp(bus->bustype, "PCI   ", 6) && !c->pci_bus)
			c->pci_bus = true;
		else if (bus->busid == MP_ISA_BUS && !memcmp(bus->bustype, "ISA   ", 6) &&
			 !c->isa_bus)
			c->isa_bus = true;
		else
			bad_entry(h, c, i, "unexpected bus %u \"%.6s\"", bus->busid, bus->bustype);
		c->buses++;
		break;
	}
	case MP_IOAPIC: {
		const struct mpc_ioapic *io = (const void *)p;
		if (c->ioapics || !(io->flags & IOAPIC_USABLE) || io->apicaddr != MP_IOAPIC_ADDR)
			bad_entry(h, c, i, "IOAPIC %u id %u flags 0x%x at 0x%x", c->ioapics,
				  io->apicid, io->flags, io->apicaddr);
		c->ioapics++;
		break;
	}
	case MP_INTSRC: {
		const struct mpc_irq *irq = (const void *)p;
		if (irq->srcbus == MP_ISA_BUS) {
			/* ISA IRQ n -> IOAPIC pin n, vectored (INT). */
			unsigned n = irq->srcbusirq;
			if (n > 15 || irq->irqtype != MP_IRQ_INT || irq->dstapic != c->ioapic_id ||
			    irq->dstirq != n || (c->isa_seen & (1u << n)))
				bad_entry(h, c, i, "ISA IRQ %u type %u -> IOAPIC %u pin %u%s", n,
					  irq->irqtype, irq->dstapic, irq->dstirq,
					  n <= 15 && (c->isa_seen & (1u << n)) ? " (repeated)"
									       : "");
			else
				c->isa_seen |= (uint16_t)(1u << n);
			c->isa_irqs++;
		} else if (irq->srcbus == MP_PCI_BUS) {
			/* PCI INTx: srcbusirq = slot << 2 | (pin - 1); the
			 * VMM wires them to IOAPIC pins 16..23. */
			if (irq->irqtype != MP_IRQ_INT || irq->dstapic != c->ioapic_id ||
			    irq->dstirq < 16 || irq->dstirq > 23)
				bad_entry(h, c, i, "PCI slot %u INT%c type %u -> IOAPIC %u pin %u",
					  irq->srcbusirq >> 2, 'A' + (irq->srcbusirq & 3),
					  irq->irqtype, irq->dstapic, irq->dstirq);
			c->pci_irqs++;
		} else {
			bad_entry(h, c, i, "I/O interrupt from unknown bus %u", irq->srcbus);
		}
		break;
	}
	case MP_LINTSRC: {
		const struct mpc_irq *l = (const void *)p;
		if (l->dstapic == 0xFF && l->dstirq == 0 && l->irqtype == MP_IRQ_EXTINT &&
		    !c->lint0_extint)
			c->lint0_extint = true;
		else if (l->dstapic == 0xFF && l->dstirq == 1 && l->irqtype == MP_IRQ_NMI &&
			 !c->lint1_nmi)
			c->lint1_nmi = true;
		else
			bad_entry(h, c, i, "local interrupt type %u -> APIC 0x%x LINT%u",
				  l->irqtype, l->dstapic, l->dstirq);
		c->lints++;
		break;
	}
	default: break; /* the caller stops at an unknown type */
	}
}

void check_mptable(struct hello *h)
{
	const char *where = "";
	uint64_t first_sig;
	const struct mpf_intel *mpf = find_mpf(&where, &first_sig);

	if (!mpf) {
		if (first_sig)
			check(h, false, "MP floating pointer found (MP spec 4)",
			      "\"_MP_\" at 0x%lx has a bad length or checksum", first_sig);
		else
			check(h, false, "MP floating pointer found (MP spec 4)",
			      "no \"_MP_\" in the EBDA, base memory end or 0xf0000-0xfffff");
		return;
	}
	check(h, true, "MP floating pointer found (MP spec 4)", "-");
	info("MP floating pointer at %p in %s, config table at 0x%x", (const void *)mpf, where,
	     mpf->physptr);
	check(h, ((uint64_t)mpf & 15) == 0 && mpf->length == 1,
	      "MP floating pointer is one 16-byte paragraph", "length %u", mpf->length);
	check(h, mpf->specification == 4, "MP floating pointer spec rev is 1.4", "rev %u",
	      mpf->specification);
	check(h, checksum((const uint8_t *)mpf, 16) == 0, "MP floating pointer checksum",
	      "sum 0x%02x", checksum((const uint8_t *)mpf, 16));
	/* Spec 4.1: feature byte 1 = 0 means "a configuration table is
	 * present"; non-zero selects a default configuration instead. */
	if (!check(h, mpf->feature1 == 0 && mpf->physptr != 0,
		   "MP floating pointer points at a config table", "feature1 %u, physptr 0x%x",
		   mpf->feature1, mpf->physptr))
		return;

	const struct mpc_table *mpc = (const struct mpc_table *)(uint64_t)mpf->physptr;
	const uint8_t *base = (const uint8_t *)mpc;
	if (!check(h, !memcmp(mpc->signature, "PCMP", 4), "MP config table signature is \"PCMP\"",
		   "\"%.4s\"", mpc->signature))
		return;
	check(h, mpc->length >= sizeof(*mpc) && checksum(base, mpc->length) == 0,
	      "MP config table base checksum", "length %u, sum 0x%02x", mpc->length,
	      checksum(base, mpc->length));
	/* Spec 4.2: the extended checksum plus the extended entries' bytes
	 * sums to zero (an empty extended table has checksum 0). */
	uint8_t ext_sum =
	    (uint8_t)(checksum(base + mpc->length, mpc->ext_length) + mpc->ext_checksum);
	check(h, ext_sum == 0, "MP config table extended checksum", "ext length %u, sum 0x%02x",
	      mpc->ext_length, ext_sum);
	check(h, mpc->spec == 4, "MP config table spec rev is 1.4", "rev %u", mpc->spec);
	check(h, mpc->lapic == MP_LAPIC_ADDR, "MP config table LAPIC address is 0xfee00000", "0x%x",
	      mpc->lapic);
	info("MP config table: OEM \"%.8s\" product \"%.12s\", %u entries", mpc->oem,
	     mpc->productid, mpc->oemcount);

	/* Entries. Spec 4.3: processor entries are 20 bytes, all others 8.
	 * A first pass checks the framing and finds the IOAPIC's id, which
	 * the interrupt entries refer to wherever they sit in the table. */
	struct mp_counts c;
	memset(&c, 0, sizeof(c));
	size_t off = sizeof(*mpc);
	for (unsigned i = 0; i < mpc->oemcount; i++) {
		uint8_t type = off < mpc->length ? base[off] : 0xFF;
		size_t size = type == MP_PROCESSOR ? 20 : 8;
		if (type > MP_LINTSRC || off + size > mpc->length) {
			check(h, false, "MP config table entries are well-formed",
			      "entry %u at offset %zu: type %u, table length %u", i, off, type,
			      mpc->length);
			return;
		}
		if (type == MP_IOAPIC)
			c.ioapic_id = base[off + 1];
		off += size;
	}
	check(h, off == mpc->length, "MP config table entries fill the base table",
	      "entries end at %zu, length %u", off, mpc->length);
	off = sizeof(*mpc);
	for (unsigned i = 0; i < mpc->oemcount; i++) {
		check_entry(h, &c, i, base + off);
		off += base[off] == MP_PROCESSOR ? 20 : 8;
	}
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
