/*
 * Steps 1 and 2: enumeration of bus 0 through configuration mechanism #1
 * (PCI Local Bus 3.0, 3.2.2.3.2) as a kernel's probe does it, the host
 * bridge, every testdev's header (6.1, 6.2), capability list (6.7), MSI-X
 * capability (6.8.2), BARs (6.2.5.1) and interrupt routing (6.2.4 and the
 * MP table, Intel MP spec 1.4, 4.3.4); then moving a BAR (6.2.5.1) and
 * turning memory decoding off (6.2.2). The probe itself is the kit's
 * (guest/pcienum.h: pci_enum_bus0, mp_routing_load); this checks what it
 * found. All at CPL 3.
 */
#include "pcitest.h"

#define MIB (1024u * 1024u)

/* Memory ranges the BARs of every function found occupy, so a relocated
 * BAR lands on free space and overlaps can be reported. */
struct range {
	uint64_t base, size;
	unsigned slot, bar;
};
static struct range ranges[32 * PCI_NUM_BARS];
static unsigned nranges;

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

static bool overlaps(uint64_t a, uint64_t as, uint64_t b, uint64_t bs)
{
	return a < b + bs && b < a + as;
}

/* ---- MP table ---- */

static void load_mptable(void)
{
	struct mp_routing *r = &pt.mp;

	mp_routing_load(r);
	if (!check(r->table_found, "MP configuration table found (MP spec 1.4, 4.1 and 4.2)", "%s",
		   r->why))
		return;
	check(!r->malformed, "MP table entries are well-formed (4.3)",
	      "entry %u at offset %zu has a bad type or runs past the table", r->malformed_index,
	      r->malformed_off);
	check(r->pci_bus_found && r->pci_bus == 0, "MP table has bus 0 of type \"PCI\" (4.3.2)",
	      "%s %u", r->pci_bus_found ? "the PCI bus is" : "no PCI bus entry; bus id",
	      r->pci_bus);
	check(r->nioapics == 1 && r->ioapic == IOAPIC_DEFAULT_BASE,
	      "MP table has one IOAPIC, at 0xfec00000 (4.3.3)", "%u IOAPICs, the first at 0x%lx",
	      r->nioapics, r->ioapic);
	info("MP table: IOAPIC id %u at 0x%lx, %u PCI I/O interrupt entries", r->ioapic_id,
	     r->ioapic, r->npci);
}

/* 4.3.4: the entry for INTA# of the device: source bus IRQ = slot << 2 | 0. */
static void check_mp_entry(struct pt_dev *d)
{
	unsigned matches;

	if (!pt.mp.ok) {
		check(false, "MP table routes the testdev's INTA#", "00:%02x.0: no usable MP table",
		      d->slot);
		return;
	}
	const struct mp_intsrc *m = mp_routing_pci_intx(&pt.mp, d->slot, 1, &matches);
	check(matches == 1, "MP table has one I/O interrupt entry for the testdev's INTA#",
	      "00:%02x.0: %u entries with source bus %u IRQ 0x%02x", d->slot, matches,
	      pt.mp.pci_bus, MP_PCI_SRC_IRQ(d->slot, 0));
	if (!m)
		return;
	/* Type INT, level-triggered active-low (flags 0x0f, table 4-10), to
	 * the MP table's IOAPIC (or 0xff, all of them) at the pin the
	 * Interrupt Line register names. */
	check(m->irq_type == MP_IRQ_INT && m->flags == (MP_IRQFLAG_LEVEL | MP_IRQFLAG_ACTIVE_LOW) &&
		  (m->dst_apic == pt.mp.ioapic_id || m->dst_apic == 0xFF) && m->dst_irq == d->line,
	      "MP entry: INT, level, active low, to the IOAPIC pin in Interrupt Line",
	      "00:%02x.0: type %u flags 0x%x -> IOAPIC %u pin %u (Interrupt Line %u, IOAPIC id %u)",
	      d->slot, m->irq_type, m->flags, m->dst_apic, m->dst_irq, d->line, pt.mp.ioapic_id);
	if (m->dst_irq >= PCI_IOAPIC_PIN_FIRST &&
	    m->dst_irq < PCI_IOAPIC_PIN_FIRST + PCI_IOAPIC_PINS) {
		d->pin = m->dst_irq;
		d->pin_flags = (uint8_t)m->flags;
	}
}

/* ---- BARs ---- */

/* Records the memory ranges of a function's BARs (sized by pci_enum_bus0,
 * 6.2.5.1; a 64-bit BAR takes two slots). */
static void record_ranges(const struct pci_func *f)
{
	for (unsigned b = 0; b < PCI_NUM_BARS; b++) {
		uint32_t raw = f->bar_raw[b];
		if (!raw || (raw & PCI_BAR_IO))
			continue;
		if (nranges < sizeof(ranges) / sizeof(ranges[0]))
			ranges[nranges++] = (struct range){f->bar[b], f->bar_size[b], f->slot, b};
		if ((raw & PCI_BAR_MEM_TYPE_MASK) == PCI_BAR_MEM_TYPE_64)
			b++;
	}
}

static bool bars_restored(unsigned slot, const uint32_t orig[PCI_NUM_BARS])
{
	for (unsigned b = 0; b < PCI_NUM_BARS; b++)
		if (pci_read32(0, slot, 0, PCI_BAR0 + 4 * b) != orig[b])
			return false;
	return true;
}

/* A 32-bit memory BAR of the given size (at least min if exact is 0), in
 * the VMM's window and aligned to its size (6.2.5.1). */
static bool check_mem_bar(const struct pt_dev *d, unsigned bar, uint32_t orig, uint32_t raw,
			  uint64_t exact, uint64_t min)
{
	uint64_t size = pci_bar_mem_size(raw);
	uint64_t base = orig & PCI_BAR_MEM_ADDR_MASK;
	char what[96];

	snprintf(what, sizeof(what), "BAR%u is 32-bit memory of %s %lu bytes", bar,
		 exact ? "exactly" : "a power of two >=", exact ? exact : min);
	bool ok = check(
	    raw && !(raw & PCI_BAR_IO) && (raw & PCI_BAR_MEM_TYPE_MASK) == PCI_BAR_MEM_TYPE_32 &&
		(exact ? size == exact : is_pow2(size) && size >= min),
	    what, "00:%02x.0: all-ones read back 0x%08x (size %lu)", d->slot, raw, size);
	if (!ok)
		return false;
	info("00:%02x.0 BAR%u: 0x%08lx, %lu KiB, %sprefetchable", d->slot, bar, base, size / 1024,
	     raw & PCI_BAR_MEM_PREFETCH ? "" : "non-");
	return check(base >= PCI_WINDOW_START && base + size <= PCI_WINDOW_END &&
			 (base & (size - 1)) == 0,
		     "BAR address is in 0xd0000000-0xefffffff and aligned to its size",
		     "00:%02x.0 BAR%u at 0x%lx, size 0x%lx", d->slot, bar, base, size);
}

/* ---- capabilities ---- */

static void check_caps(struct pt_dev *d, unsigned slot, bool is_testdev)
{
	uint8_t offs[48], ids[48];
	const char *err;
	unsigned n = pci_cap_walk(0, slot, 0, offs, ids, 48, &err);
	uint16_t status = pci_read16(0, slot, 0, PCI_STATUS);
	uint8_t ptr = pci_read8(0, slot, 0, PCI_CAP_PTR);
	char list[160] = "";
	size_t used = 0;

	for (unsigned i = 0; i < n && i < 48 && used < sizeof(list) - 16; i++)
		used += (size_t)snprintf(list + used, sizeof(list) - used, " 0x%02x@0x%02x", ids[i],
					 offs[i]);
	info("00:%02x.0 status 0x%04x, capability pointer 0x%02x, capabilities:%s", slot, status,
	     ptr, n ? list : " none");
	check(err == NULL, "capability list is well-formed (6.7)", "00:%02x.0: %s", slot,
	      err ? err : "");
	/* 6.2.3 bit 4: set iff 0x34 points at a list (6.7). */
	check(!!(status & PCI_STATUS_CAP_LIST) == (n > 0),
	      "status bit 4 (capabilities list) is set iff there are capabilities",
	      "00:%02x.0: status 0x%04x, %u capabilities", slot, status, n);
	if (!is_testdev)
		return;
	unsigned msix = 0;
	for (unsigned i = 0; i < n && i < 48; i++) {
		if (ids[i] == PCI_CAP_ID_MSIX) {
			if (!msix++)
				d->mx.cap = offs[i];
		}
	}
	if (pt.expect_msix)
		check(msix == 1, "testdev has one MSI-X capability (ID 0x11)",
		      "00:%02x.0: %u MSI-X capabilities", slot, msix);
	else
		check(msix == 0, "testdev has no MSI-X capability (pcitest.expect=intx)",
		      "00:%02x.0: %u MSI-X capabilities", slot, msix);
}

/* 6.8.2.3 - 6.8.2.5: table size, table and PBA location (as msix_probe
 * decodes them), reset state. */
static void check_msix_cap(struct pt_dev *d)
{
	const uint64_t bars[PCI_NUM_BARS] = {d->bar0, d->bar1};
	struct msix_info *m = &d->mx;
	const char *why;
	msix_probe(d->slot, bars, m, &why);
	uint16_t ctrl = msix_ctrl_read(m);
	uint32_t want_pba = (uint32_t)align_up((uint64_t)d->nvec * PCI_MSIX_ENTRY_SIZE, 4096);

	info("00:%02x.0 MSI-X at 0x%02x: control 0x%04x (%u entries), table 0x%08x, PBA 0x%08x",
	     d->slot, m->cap, ctrl, m->nvec, m->table_off | m->table_bir, m->pba_off | m->pba_bir);
	check(m->nvec == d->nvec, "MSI-X table size matches NVECTORS",
	      "00:%02x.0: table size field %u + 1, NVECTORS %u", d->slot, m->nvec - 1u, d->nvec);
	check(!(ctrl & (PCI_MSIX_CTRL_ENABLE | PCI_MSIX_CTRL_FMASK)),
	      "MSI-X is disabled and unmasked at reset", "00:%02x.0: control 0x%04x", d->slot,
	      ctrl);
	check(m->table_bir == 1 && m->table_off == 0, "MSI-X table is in BAR1 at offset 0",
	      "00:%02x.0: BIR %u offset 0x%x", d->slot, m->table_bir, m->table_off);
	check(m->pba_bir == 1 && m->pba_off == want_pba,
	      "MSI-X PBA is in BAR1 on the page after the table",
	      "00:%02x.0: BIR %u offset 0x%x, expected offset 0x%x", d->slot, m->pba_bir,
	      m->pba_off, want_pba);
	if (m->pba_bir != 1 || m->table_bir != 1 || m->table_off != 0 || m->nvec != d->nvec) {
		m->cap = 0; /* the MSI-X checks would poke the wrong place */
		return;
	}
	/* Where msix_probe located them; it leaves them 0 if BAR1 has no
	 * address (BAR1's check has failed then), and the MSI-X steps still
	 * run there. */
	m->table = d->bar1;
	m->pba = d->bar1 + m->pba_off;
}

/* ---- devices ---- */

static void check_host_bridge(const struct pci_func *f)
{
	const uint32_t *orig = f->bar_orig, *raw = f->bar_raw;
	bool zero = true;

	info("host bridge 00:00.0: %04x:%04x", f->vendor, f->device);
	check(f->class_rev >> 8 == 0x060000, "host bridge 00:00.0 has class 0x060000",
	      "class 0x%06x", f->class_rev >> 8);
	check((f->header_type & PCI_HEADER_TYPE_MASK) == 0, "host bridge has a type-0 header",
	      "header type 0x%02x", f->header_type);
	for (unsigned b = 0; b < PCI_NUM_BARS; b++)
		zero = zero && orig[b] == 0 && raw[b] == 0;
	check(zero, "host bridge BARs 0-5 read 0, also after writing all-ones",
	      "BARs 0x%x 0x%x 0x%x 0x%x 0x%x 0x%x, all-ones read back 0x%x 0x%x 0x%x 0x%x 0x%x "
	      "0x%x",
	      orig[0], orig[1], orig[2], orig[3], orig[4], orig[5], raw[0], raw[1], raw[2], raw[3],
	      raw[4], raw[5]);
	check_caps(NULL, 0, false);
}

/* NVECTORS is the MSI-X table size: 1..2048, or 0 with no MSI-X at all
 * (--irq-mode intx: no capability, no table, no vectors). */
static bool check_nvectors(const struct pt_dev *d)
{
	if (!pt.expect_msix)
		return check(d->nvec == 0, "testdev NVECTORS is 0 (pcitest.expect=intx: no MSI-X)",
			     "00:%02x.0: %u", d->slot, d->nvec);
	return check(d->nvec >= 1 && d->nvec <= TESTDEV_MAX_VECTORS, "testdev NVECTORS is 1..2048",
		     "00:%02x.0: %u", d->slot, d->nvec);
}

static void check_testdev(struct pt_dev *d, const struct pci_func *f)
{
	const uint32_t *orig = f->bar_orig, *raw = f->bar_raw;
	uint16_t cmd = f->command; /* before pci_enum_bus0 sized the BARs */

	check(f->class_rev >> 8 == TESTDEV_CLASS && (f->class_rev & 0xFF) == TESTDEV_REVISION,
	      "testdev has class 0xff0000, revision 1", "00:%02x.0: class 0x%06x revision %u",
	      d->slot, f->class_rev >> 8, f->class_rev & 0xFF);
	check(f->header_type == 0, "testdev has a single-function type-0 header",
	      "00:%02x.0: header type 0x%02x", d->slot, f->header_type);
	check(cmd & PCI_CMD_MEMORY, "testdev memory decoding is on at boot (command bit 1)",
	      "00:%02x.0: command 0x%04x", d->slot, cmd);
	check_caps(d, d->slot, true);

	check(bars_restored(d->slot, orig) && cfg_read16(d, PCI_COMMAND) == cmd,
	      "BARs and command register read back as before sizing",
	      "00:%02x.0: command 0x%04x, was 0x%04x", d->slot, cfg_read16(d, PCI_COMMAND), cmd);
	bool bar0_ok = check_mem_bar(d, 0, orig[0], raw[0], TESTDEV_BAR0_SIZE, 0);
	d->bar0 = orig[0] & PCI_BAR_MEM_ADDR_MASK;
	d->bar1 = orig[1] & PCI_BAR_MEM_ADDR_MASK;
	d->bar1_size = pci_bar_mem_size(raw[1]);
	check(!raw[2] && !raw[3] && !raw[4] && !raw[5], "testdev BARs 2-5 are not implemented",
	      "00:%02x.0: all-ones read back 0x%x 0x%x 0x%x 0x%x", d->slot, raw[2], raw[3], raw[4],
	      raw[5]);

	/* BAR0 registers, read while decoding is on as the VMM left it. */
	if (bar0_ok && (cmd & PCI_CMD_MEMORY)) {
		uint32_t magic = td_read(d, TD_MAGIC);
		d->nvec = td_read(d, TD_NVECTORS);
		d->doorbells = td_read(d, TD_DOORBELLS);
		d->usable = check(magic == TESTDEV_MAGIC, "testdev MAGIC reads 0x56454454",
				  "00:%02x.0: 0x%08x at 0x%x", d->slot, magic, d->bar0);
		bool nvec_ok = check_nvectors(d);
		check(td_read(d, TD_INTX_PENDING) == 0, "testdev INTX_PENDING is 0 at boot",
		      "00:%02x.0: %u", d->slot, td_read(d, TD_INTX_PENDING));
		info("00:%02x.0: NVECTORS %u, DOORBELLS %u", d->slot, d->nvec, d->doorbells);
		if (!nvec_ok)
			d->usable = false;
	}
	if (!pt.expect_msix)
		check(!orig[1] && !raw[1],
		      "testdev BAR1 is not implemented: no MSI-X table (pcitest.expect=intx)",
		      "00:%02x.0: 0x%08x, all-ones read back 0x%08x", d->slot, orig[1], raw[1]);

	if (d->mx.cap && d->usable) {
		uint64_t table = align_up((uint64_t)d->nvec * PCI_MSIX_ENTRY_SIZE, 4096);
		uint64_t pba = align_up((d->nvec + 63) / 64 * 8, 4096);
		check_mem_bar(d, 1, orig[1], raw[1], 0, table + pba);
		check_msix_cap(d);
		if (d->bar1_size < table + pba)
			d->mx.cap = 0;
	} else if (!d->mx.cap && raw[1]) {
		info("00:%02x.0 BAR1: 0x%08x, size %lu (not checked: no MSI-X capability)", d->slot,
		     orig[1], d->bar1_size);
	}

	/* 6.2.4: Interrupt Pin 1 = INTA#; the VMM's Interrupt Line is the
	 * IOAPIC pin, 16 + slot mod 8. */
	d->line = f->irq_line;
	check(f->irq_pin == 1, "testdev Interrupt Pin is 1 (INTA#)", "00:%02x.0: %u", d->slot,
	      f->irq_pin);
	check(d->line == PCI_IOAPIC_PIN_FIRST + d->slot % 8,
	      "testdev Interrupt Line is 16 + slot mod 8", "00:%02x.0: %u, expected %u", d->slot,
	      d->line, PCI_IOAPIC_PIN_FIRST + d->slot % 8);
	check_mp_entry(d);
}

void pt_enumerate(void)
{
	static struct pci_func funcs[32];
	unsigned empty = 0, empty_bad = 0, first_bad_slot = 0, next = 0;
	uint32_t first_bad = 0;
	bool bridge = false;

	load_mptable();
	/* 6.2.1: a read of a function that is not there returns vendor
	 * 0xffff; a kernel's probe stops there. */
	unsigned nfunc = pci_enum_bus0(funcs, 32);
	for (unsigned slot = 0; slot < 32; slot++) {
		struct pci_func *f =
		    next < nfunc && funcs[next].slot == slot ? &funcs[next++] : NULL;
		if (!f) { /* vendor 0xffff: the whole dword must read all-ones */
			uint32_t id = pci_read32(0, slot, 0, PCI_VENDOR_ID);
			empty++;
			if (id != 0xFFFFFFFFu && !empty_bad++) {
				first_bad = id;
				first_bad_slot = slot;
			}
			continue;
		}
		/* pci_enum_bus0 sizes the BARs of type-0 headers only; pcitest
		 * sizes all six slots of every function, to check them and to
		 * keep clear of them. */
		if ((f->header_type & PCI_HEADER_TYPE_MASK) != 0)
			pci_func_size_bars(f);
		info("00:%02x.0 %04x:%04x class 0x%06x rev %u header type 0x%02x", slot, f->vendor,
		     f->device, f->class_rev >> 8, f->class_rev & 0xFF, f->header_type);
		if (slot == 0) {
			bridge = true;
			check_host_bridge(f);
		} else if (f->vendor == TESTDEV_VENDOR && f->device == TESTDEV_DEVICE) {
			if (!check(pt.ndev < PT_MAX_DEVS, "at most 16 testdevs", "slot %u", slot))
				continue;
			struct pt_dev *d = &pt.dev[pt.ndev++];
			d->slot = slot;
			check_testdev(d, f);
		}
		record_ranges(f);
	}
	check(bridge, "a host bridge answers at 00:00.0", "vendor 0xffff");
	check(empty_bad == 0, "empty slots read all-ones",
	      "%u of %u empty slots, first 00:%02x.0 reads 0x%08x", empty_bad, empty,
	      first_bad_slot, first_bad);
	check(pt.ndev == pt.want_devs, "number of testdevs matches pcitest.devices",
	      "found %u, expected %u", pt.ndev, pt.want_devs);

	bool apart = true;
	for (unsigned i = 0; i < nranges; i++)
		for (unsigned j = i + 1; j < nranges; j++)
			if (overlaps(ranges[i].base, ranges[i].size, ranges[j].base,
				     ranges[j].size)) {
				apart = false;
				info("overlap: 00:%02x.0 BAR%u [0x%lx, +0x%lx) and 00:%02x.0 BAR%u "
				     "[0x%lx, +0x%lx)",
				     ranges[i].slot, ranges[i].bar, ranges[i].base, ranges[i].size,
				     ranges[j].slot, ranges[j].bar, ranges[j].base, ranges[j].size);
			}
	check(apart, "memory BARs do not overlap", "see the info lines above");
}

/* ---- step 2 ---- */

static bool range_free(uint64_t base, uint64_t size)
{
	if (base < PCI_WINDOW_START || base + size > PCI_WINDOW_END)
		return false;
	for (unsigned i = 0; i < nranges; i++)
		if (overlaps(base, size, ranges[i].base, ranges[i].size))
			return false;
	return true;
}

void pt_relocate_bar0(struct pt_dev *d)
{
	uint32_t old = d->bar0, target = 0;
	uint16_t cmd = cfg_read16(d, PCI_COMMAND);
	uint32_t low_bits = cfg_read32(d, PCI_BAR0) & ~PCI_BAR_MEM_ADDR_MASK;

	/* +16 MiB first, then other 16 MiB steps through the window. */
	for (uint64_t step = 1; step < 32 && !target; step++) {
		uint64_t up = old + step * 16 * MIB, down = old - step * 16 * MIB;
		if (range_free(up, TESTDEV_BAR0_SIZE))
			target = (uint32_t)up;
		else if (old >= step * 16 * MIB && range_free(down, TESTDEV_BAR0_SIZE))
			target = (uint32_t)down;
	}
	if (!check(target != 0, "a free 4 KiB range for BAR0 in the window", "none"))
		return;
	info("moving 00:%02x.0 BAR0 from 0x%08x to 0x%08x", d->slot, old, target);
	check(mmio_read32(target + TD_MAGIC) == 0xFFFFFFFFu,
	      "the relocation target reads all-ones before the move", "0x%08x at 0x%x",
	      mmio_read32(target + TD_MAGIC), target);

	/* 6.2.5.1: software may move a BAR while decoding is on; the device
	 * decodes the new address from then on. */
	cfg_write32(d, PCI_BAR0, target);
	uint32_t readback = cfg_read32(d, PCI_BAR0);
	check(readback == (target | low_bits), "BAR0 reads back the new address",
	      "0x%08x, expected 0x%08x", readback, target | low_bits);
	uint32_t at_new = mmio_read32(target + TD_MAGIC), at_old = mmio_read32(old + TD_MAGIC);
	check(at_new == TESTDEV_MAGIC && mmio_read32(target + TD_NVECTORS) == d->nvec,
	      "MAGIC and NVECTORS read at the new BAR0 address", "MAGIC 0x%08x at 0x%x", at_new,
	      target);
	check(at_old == 0xFFFFFFFFu, "the old BAR0 address reads all-ones after the move",
	      "0x%08x at 0x%x", at_old, old);

	/* 6.2.2 bit 1: with memory space off the function answers no
	 * memory cycles, BAR1 (the MSI-X table) included. */
	cfg_write16(d, PCI_COMMAND, cmd & (uint16_t)~PCI_CMD_MEMORY);
	at_new = mmio_read32(target + TD_MAGIC);
	uint32_t table = d->bar1 ? mmio_read32(d->bar1 + PCI_MSIX_ENTRY_CTRL) : 0xFFFFFFFFu;
	check(at_new == 0xFFFFFFFFu && table == 0xFFFFFFFFu,
	      "with memory decoding off, BAR0 and BAR1 read all-ones",
	      "MAGIC 0x%08x, BAR1 +0xc 0x%08x", at_new, table);
	cfg_write16(d, PCI_COMMAND, cmd);
	at_new = mmio_read32(target + TD_MAGIC);
	check(at_new == TESTDEV_MAGIC, "with memory decoding back on, MAGIC reads again",
	      "0x%08x at 0x%x", at_new, target);

	/* A BAR holding the sizing pattern decodes nothing, even with
	 * memory space on (the VMM's rule; hardware would decode 0xfffff000). */
	cfg_write32(d, PCI_BAR0, 0xFFFFFFFFu);
	at_new = mmio_read32(target + TD_MAGIC);
	at_old = mmio_read32(old + TD_MAGIC);
	check(at_new == 0xFFFFFFFFu && at_old == 0xFFFFFFFFu,
	      "with the sizing pattern in BAR0 and decoding on, nothing answers",
	      "0x%08x at the new address, 0x%08x at the old", at_new, at_old);

	cfg_write32(d, PCI_BAR0, old);
	at_old = mmio_read32(old + TD_MAGIC);
	at_new = mmio_read32(target + TD_MAGIC);
	check(cfg_read32(d, PCI_BAR0) == (old | low_bits) && at_old == TESTDEV_MAGIC &&
		  at_new == 0xFFFFFFFFu,
	      "BAR0 moved back: MAGIC at the old address, all-ones at the new",
	      "BAR0 0x%08x, 0x%08x at 0x%x, 0x%08x at 0x%x", cfg_read32(d, PCI_BAR0), at_old, old,
	      at_new, target);
}
