/*
 * Step 4: MSI-X (PCI Local Bus 3.0, 6.8.2) on one testdev, at CPL 3.
 *
 * The order is a kernel's (Linux msix_capability_init): enable with the
 * function mask set, program the table, clear the function mask. Then
 * delivery per vector, the per-vector mask and the PBA (6.8.2.9, 6.8.2.10),
 * the function mask (6.8.2.3), the table's access rules, doorbells for
 * vectors the device does not have, and the fall-back to INTx once MSI-X
 * is disabled ("the function is prohibited from using its INTx# pin" only
 * while MSI-X Enable is set, 6.8.2.3).
 */
#include "pcitest.h"

/* An impossible vector for irq_new_others(): vector 0 is #DE, never an
 * interrupt, so nothing is excluded. */
#define VEC_NONE 0

static unsigned tested(const struct pt_dev *d)
{
	return d->nvec < VEC_MSIX_COUNT ? d->nvec : VEC_MSIX_COUNT;
}

static unsigned vec(unsigned i)
{
	return VEC_MSIX_BASE + i;
}

/* The entry's address, for the accesses guest/msix.h has no helper for. */
static uint64_t entry(const struct pt_dev *d, unsigned i)
{
	return d->mx.table + (uint64_t)i * PCI_MSIX_ENTRY_SIZE;
}

/* Pending bits over the whole table; the first one goes to *first. */
static unsigned pba_count(const struct pt_dev *d, unsigned *first)
{
	unsigned n = 0;
	*first = 0;
	for (unsigned w = 0; w < (d->nvec + 31) / 32; w++) {
		uint32_t bits = mmio_read32(d->mx.pba + 4 * w);
		for (unsigned b = 0; b < 32 && w * 32 + b < d->nvec; b++) {
			if ((bits >> b) & 1) {
				if (!n)
					*first = w * 32 + b;
				n++;
			}
		}
	}
	return n;
}

/* "No interrupt at all since s", as a check. */
static bool check_none(const struct irq_snap *s, const char *what)
{
	unsigned first;
	uint64_t n = irq_new_others(s, VEC_NONE, &first);
	return check(n == 0, what, "%lu interrupts, the first on vector 0x%02x", n, first);
}

static void check_reset_state(struct pt_dev *d)
{
	unsigned masked = 0, first;
	for (unsigned i = 0; i < d->nvec; i++)
		if (mmio_read32(entry(d, i) + PCI_MSIX_ENTRY_CTRL) & PCI_MSIX_ENTRY_CTRL_MASK)
			masked++;
	check(masked == d->nvec, "every MSI-X entry is masked at reset (6.8.2.9)",
	      "00:%02x.0: %u of %u masked", d->slot, masked, d->nvec);
	unsigned pending = pba_count(d, &first);
	check(pending == 0, "the PBA is clear at reset", "00:%02x.0: %u bits set, the first %u",
	      d->slot, pending, first);
}

/* Enable with the function mask, program entries 0..n-1 masked, clear the
 * function mask. */
static bool enable_and_program(struct pt_dev *d)
{
	unsigned n = tested(d);
	uint16_t want = PCI_MSIX_CTRL_ENABLE | PCI_MSIX_CTRL_FMASK | (uint16_t)(d->nvec - 1);

	/* Not msix_enable(): this checks each step, and clears the function
	 * mask with every entry still masked. The table size bits are
	 * read-only (6.8.2.3): write ones there too. */
	msix_ctrl_write(&d->mx,
			PCI_MSIX_CTRL_ENABLE | PCI_MSIX_CTRL_FMASK | PCI_MSIX_CTRL_SIZE_MASK);
	uint16_t got = msix_ctrl_read(&d->mx);
	if (!check(got == want, "MSI-X enabled with the function mask set; table size read-only",
		   "00:%02x.0: control 0x%04x, expected 0x%04x", d->slot, got, want))
		return false;

	unsigned bad = 0, first = 0;
	uint32_t lo = 0, hi = 0, data = 0, vc = 0;
	for (unsigned i = 0; i < n; i++)
		msix_entry_write(&d->mx, i, pt.lapic.apic_id, (uint8_t)vec(i), true);
	for (unsigned i = 0; i < n; i++) {
		uint64_t e = entry(d, i);
		uint32_t l = mmio_read32(e + PCI_MSIX_ENTRY_ADDR_LO);
		uint32_t h = mmio_read32(e + PCI_MSIX_ENTRY_ADDR_HI);
		uint32_t dt = mmio_read32(e + PCI_MSIX_ENTRY_DATA);
		uint32_t c = mmio_read32(e + PCI_MSIX_ENTRY_CTRL);
		if (l != msi_address(pt.lapic.apic_id) || h || dt != vec(i) ||
		    c != PCI_MSIX_ENTRY_CTRL_MASK) {
			if (!bad++) {
				first = i;
				lo = l, hi = h, data = dt, vc = c;
			}
		}
	}
	check(bad == 0, "MSI-X entries read back address 0xfee00000 | APIC ID << 12, data = vector",
	      "00:%02x.0: %u bad, entry %u reads addr 0x%08x:%08x data 0x%x control 0x%x", d->slot,
	      bad, first, hi, lo, data, vc);

	struct irq_snap s;
	irq_snap(&s);
	msix_ctrl_write(&d->mx, PCI_MSIX_CTRL_ENABLE);
	pt_quiet();
	got = msix_ctrl_read(&d->mx);
	check(got == (PCI_MSIX_CTRL_ENABLE | (d->nvec - 1)), "MSI-X function mask cleared",
	      "00:%02x.0: control 0x%04x", d->slot, got);
	check_none(&s, "clearing the function mask with every entry masked raises nothing");
	return true;
}

static void each_vector_alone(struct pt_dev *d)
{
	unsigned n = tested(d), first;
	char what[128];
	struct irq_snap s;

	if (n < d->nvec)
		info("00:%02x.0: testing MSI-X entries 0-%u of %u (one IDT vector each)", d->slot,
		     n - 1, d->nvec);
	for (unsigned i = 0; i < n; i++) {
		msix_entry_mask(&d->mx, i, false);
		irq_snap(&s);
		td_ring(d, i);
		pt_wait(&s, vec(i), 1);
		snprintf(what, sizeof(what),
			 "MSI-X entry %u alone unmasked, rung: one interrupt, on vector 0x%02x", i,
			 vec(i));
		check_irqs(&s, vec(i), 1, what);
		msix_entry_mask(&d->mx, i, true);
	}
	unsigned pending = pba_count(d, &first);
	uint32_t intx = td_read(d, TD_INTX_PENDING);
	check(pending == 0 && intx == 0 && !td_status_intx(d),
	      "after delivering each vector: PBA clear, no INTx pending (6.8.2.3)",
	      "00:%02x.0: %u PBA bits (first %u), INTX_PENDING %u", d->slot, pending, first, intx);
}

/* 6.8.2.9/6.8.2.10: a masked vector's message is held as a pending bit
 * and sent once when unmasked. The PBA is read-only. */
static void masked_vector(struct pt_dev *d)
{
	struct irq_snap s;
	unsigned first;

	irq_snap(&s);
	td_ring(d, 0);
	td_ring(d, 0);
	pt_quiet();
	check_none(&s, "MSI-X entry 0 masked, rung twice: no interrupt");
	uint32_t w0 = mmio_read32(d->mx.pba);
	unsigned pending = pba_count(d, &first);
	check(msix_pending(&d->mx, 0) && pending == 1,
	      "the masked entry's PBA bit is set, and only it",
	      "00:%02x.0: PBA dword 0 0x%08x, %u bits set", d->slot, w0, pending);

	mmio_write32(d->mx.pba, 0);
	uint32_t after_zero = mmio_read32(d->mx.pba);
	mmio_write32(d->mx.pba, 0xFFFFFFFFu);
	uint32_t after_ones = mmio_read32(d->mx.pba);
	check(after_zero == w0 && after_ones == w0 && pba_count(d, &first) == 1,
	      "writes to the PBA are ignored",
	      "00:%02x.0: PBA 0x%08x, after writing 0: 0x%08x, "
	      "after writing all-ones: 0x%08x",
	      d->slot, w0, after_zero, after_ones);
	check_none(&s, "writing the PBA raises nothing");

	irq_snap(&s);
	msix_entry_mask(&d->mx, 0, false);
	pt_wait(&s, vec(0), 1);
	check_irqs(&s, vec(0), 1, "unmasking the pending entry delivers it once");
	check(!msix_pending(&d->mx, 0), "its PBA bit is clear after delivery",
	      "00:%02x.0: PBA 0x%08x", d->slot, mmio_read32(d->mx.pba));
}

/* 6.8.2.3: the function mask holds every vector pending, whatever the
 * entries' own mask bits say, and leaves those bits alone. Entry 0 is
 * unmasked here, entry 1 masked. */
static void function_mask(struct pt_dev *d)
{
	bool two = tested(d) >= 2;
	struct irq_snap s;

	msix_ctrl_write(&d->mx, PCI_MSIX_CTRL_ENABLE | PCI_MSIX_CTRL_FMASK);
	irq_snap(&s);
	td_ring(d, 0);
	if (two)
		td_ring(d, 1);
	pt_quiet();
	check_none(&s, two ? "function mask set, entries 0 (unmasked) and 1 (masked) rung: no "
			     "interrupt"
			   : "function mask set, entry 0 (unmasked) rung: no interrupt");
	uint32_t w0 = mmio_read32(d->mx.pba);
	check(msix_pending(&d->mx, 0) && (!two || msix_pending(&d->mx, 1)),
	      "the rung entries are pending in the PBA", "00:%02x.0: PBA dword 0 0x%08x", d->slot,
	      w0);
	uint32_t c0 = mmio_read32(entry(d, 0) + PCI_MSIX_ENTRY_CTRL);
	check(c0 == 0, "the function mask leaves the entries' mask bits alone",
	      "00:%02x.0: entry 0 vector control 0x%x", d->slot, c0);

	irq_snap(&s);
	msix_ctrl_write(&d->mx, PCI_MSIX_CTRL_ENABLE);
	pt_wait(&s, vec(0), 1);
	check_irqs(&s, vec(0), 1,
		   "clearing the function mask delivers the pending unmasked entry once");
	check(!msix_pending(&d->mx, 0) && (!two || msix_pending(&d->mx, 1)),
	      "its PBA bit clears; a pending entry still masked by its own bit stays pending",
	      "00:%02x.0: PBA dword 0 0x%08x", d->slot, mmio_read32(d->mx.pba));
	if (!two)
		return;
	irq_snap(&s);
	msix_entry_mask(&d->mx, 1, false);
	pt_wait(&s, vec(1), 1);
	check_irqs(&s, vec(1), 1, "unmasking that entry then delivers it once");
	msix_entry_mask(&d->mx, 1, true);
	check(!msix_pending(&d->mx, 1), "and its PBA bit clears", "00:%02x.0: PBA dword 0 0x%08x",
	      d->slot, mmio_read32(d->mx.pba));
}

/* 6.8.2: software accesses the table with aligned DWORD or QWORD
 * transactions; the VMM ignores anything else. Entry 0, masked. */
static void table_access(struct pt_dev *d)
{
	uint64_t e = entry(d, 0);
	uint32_t lo = msi_address(pt.lapic.apic_id);

	msix_entry_mask(&d->mx, 0, true);
	mmio_write8(e + PCI_MSIX_ENTRY_DATA, 0xAB);
	uint32_t data = mmio_read32(e + PCI_MSIX_ENTRY_DATA);
	check(data == vec(0), "a 1-byte write to the MSI-X table is ignored",
	      "00:%02x.0: entry 0 data 0x%08x after writing 0xab to its low byte, was 0x%x",
	      d->slot, data, vec(0));
	mmio_write16(e + PCI_MSIX_ENTRY_DATA, 0xABCD);
	data = mmio_read32(e + PCI_MSIX_ENTRY_DATA);
	check(data == vec(0), "a 2-byte write to the MSI-X table is ignored",
	      "00:%02x.0: entry 0 data 0x%08x after writing 0xabcd to its low half, was 0x%x",
	      d->slot, data, vec(0));
	mmio_write32(e + 2, 0xDEADBEEFu);
	uint32_t l = mmio_read32(e + PCI_MSIX_ENTRY_ADDR_LO);
	uint32_t h = mmio_read32(e + PCI_MSIX_ENTRY_ADDR_HI);
	check(l == lo && h == 0, "a misaligned 4-byte write to the MSI-X table is ignored",
	      "00:%02x.0: entry 0 address 0x%08x:%08x after writing 0xdeadbeef at +2", d->slot, h,
	      l);

	/* Aligned 8-byte accesses do work: data and vector control at once. */
	uint64_t q = (uint64_t)PCI_MSIX_ENTRY_CTRL_MASK << 32 | 0x5A;
	mmio_write64(e + PCI_MSIX_ENTRY_DATA, q);
	uint64_t rq = mmio_read64(e + PCI_MSIX_ENTRY_DATA);
	uint32_t rd = mmio_read32(e + PCI_MSIX_ENTRY_DATA);
	mmio_write64(e + PCI_MSIX_ENTRY_DATA, (uint64_t)PCI_MSIX_ENTRY_CTRL_MASK << 32 | vec(0));
	uint64_t back = mmio_read64(e + PCI_MSIX_ENTRY_ADDR_LO);
	check(rq == q && rd == 0x5A && back == lo && mmio_read32(e + PCI_MSIX_ENTRY_DATA) == vec(0),
	      "aligned 8-byte writes and reads of the MSI-X table work",
	      "00:%02x.0: wrote 0x%016lx at +8, read 0x%016lx (dword 0x%x); address qword 0x%lx",
	      d->slot, q, rq, rd, back);
}

/* Doorbells for entries the device does not have raise nothing, with
 * every tested entry unmasked so a doorbell wrapped to a real entry
 * would show; then entry 0 still works. */
static void out_of_range(struct pt_dev *d)
{
	unsigned n = tested(d), first;
	struct irq_snap s;

	for (unsigned i = 0; i < n; i++)
		msix_entry_mask(&d->mx, i, false);
	irq_snap(&s);
	td_ring(d, d->nvec);
	td_ring(d, d->nvec + 1);
	td_ring(d, d->nvec + 64);
	td_ring(d, 0xFFFFFFFFu);
	pt_quiet();
	check_none(&s, "doorbells for vectors >= NVECTORS raise no interrupt");
	unsigned pending = pba_count(d, &first);
	uint32_t intx = td_read(d, TD_INTX_PENDING);
	check(pending == 0 && intx == 0, "and set no PBA bit and no INTx",
	      "00:%02x.0: %u PBA bits (first %u), INTX_PENDING %u", d->slot, pending, first, intx);

	irq_snap(&s);
	td_ring(d, 0);
	pt_wait(&s, vec(0), 1);
	check_irqs(&s, vec(0), 1, "entry 0 still delivers once after the table access checks");
	uint32_t db = td_read(d, TD_DOORBELLS);
	check(db == d->doorbells, "DOORBELLS counts every doorbell write",
	      "00:%02x.0: %u, expected %u", d->slot, db, d->doorbells);
}

/* MSI-X Enable cleared: the device is back on INTx (6.8.2.3), and with
 * MSI-X off nothing is latched in the PBA. The entries stay unmasked, so
 * a device still sending MSI-X would show too. */
static void fall_back_to_intx(struct pt_dev *d)
{
	unsigned first;
	struct irq_snap s;

	msix_disable(&d->mx);
	uint16_t c = msix_ctrl_read(&d->mx);
	check(!(c & (PCI_MSIX_CTRL_ENABLE | PCI_MSIX_CTRL_FMASK)), "MSI-X disabled again",
	      "00:%02x.0: control 0x%04x", d->slot, c);
	if (!d->pin) {
		skip("INTx after MSI-X", "no IOAPIC pin for the device");
		return;
	}
	irq_pin_defer(d->pin, false);
	irq_snap(&s);
	td_ring(d, 0);
	pt_wait(&s, intx_vector(d), 1);
	check_intx_irqs(&s, d, 1, true,
			"with MSI-X disabled a doorbell raises one INTx interrupt, no MSI-X");
	uint64_t acked = pt_acked_new(&s, d);
	unsigned pending = pba_count(d, &first);
	check(acked == 1 && pending == 0 && td_read(d, TD_INTX_PENDING) == 0,
	      "the handler acknowledged it, and nothing was latched in the PBA",
	      "00:%02x.0: %lu acknowledged, %u PBA bits (first %u), INTX_PENDING %u", d->slot,
	      acked, pending, first, td_read(d, TD_INTX_PENDING));
	for (unsigned i = 0; i < tested(d); i++)
		msix_entry_mask(&d->mx, i, true);
}

void pt_msix(struct pt_dev *d)
{
	info("--- MSI-X of 00:%02x.0: %u vectors, table at 0x%08lx, PBA at 0x%08lx ---", d->slot,
	     d->nvec, d->mx.table, d->mx.pba);
	check_reset_state(d);
	if (!enable_and_program(d)) {
		msix_disable(&d->mx);
		return;
	}
	each_vector_alone(d);
	masked_vector(d);
	function_mask(d);
	table_access(d);
	out_of_range(d);
	fall_back_to_intx(d);
}
