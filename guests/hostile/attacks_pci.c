/*
 * Attacks through PCI: the MSI-X table and PBA (PCI Local Bus 3.0,
 * 6.8.2), BARs moved where no device may decode (guest RAM, another
 * device's BAR, the LAPIC and IOAPIC windows), and writes to read-only
 * configuration fields (6.1, 6.2, 6.7; virtio 1.2 4.1.4). All on blk.
 *
 * Under --irq-mode intx the devices have no MSI-X at all: no capability
 * and no BAR2 (PCI 3.0 6.2.5.1: it reads 0 and sizes to 0), so the MSI-X
 * cases check that, that sizing it raises nothing, and that INTx goes on;
 * moving BAR2 writes a register that does not decode.
 */
#include "hostile.h"

#include "guest/pci.h"

#define ALL_ONES 0xFFFFFFFFu

/* Entry i of an MSI-X table, four dwords. */
static void entry_read(const struct msix_info *m, unsigned i, uint32_t e[4])
{
	for (unsigned k = 0; k < 4; k++)
		e[k] = mmio_read32(m->table + 16ull * i + 4 * k);
}

/* The whole table as it is, to compare after an attack. */
static uint32_t saved[8][4];

static void table_save(const struct hdev *t)
{
	for (unsigned i = 0; i < t->mx.nvec && i < 8; i++)
		entry_read(&t->mx, i, saved[i]);
}

static bool table_unchanged(const struct hdev *t, const char *what)
{
	for (unsigned i = 0; i < t->mx.nvec && i < 8; i++) {
		uint32_t e[4];
		entry_read(&t->mx, i, e);
		for (unsigned k = 0; k < 4; k++)
			if (!expect(e[k] == saved[i][k],
				    "%s: %s: MSI-X entry %u dword %u is 0x%08x, was 0x%08x",
				    t->name, what, i, k, e[k], saved[i][k]))
				return false;
	}
	return true;
}

static bool no_interrupts_since(uint64_t all0, const char *what)
{
	spin_us(H_QUIET_US);
	return expect(irq_total() == all0, "%s: %lu interrupts", what, irq_total() - all0);
}

/* Under --irq-mode intx: no MSI-X BAR. BAR2 reads 0 and sizes to 0
 * (6.2.5.1: not implemented); sizing it raises nothing, and the device
 * goes on by INTx. */
static void no_msix_bar(struct hdev *t, const char *what)
{
	uint64_t all0 = irq_total();
	uint32_t before = bar_read(t, 2);
	bar_write(t, 2, ALL_ONES);
	uint32_t sized = bar_read(t, 2);
	bar_write(t, 2, before);
	expect(before == 0 && sized == 0 && t->pf->bar_size[2] == 0,
	       "blk: %s: BAR2 reads 0x%08x and 0x%08x after all-ones (size %lu); with no MSI-X "
	       "it is not implemented",
	       what, before, sized, t->pf->bar_size[2]);
	no_interrupts_since(all0, "blk: sizing BAR2 (no MSI-X)");
	hdev_works(t, what);
}

/* 6.8.2: the table has Table Size entries; what lies past it in the BAR
 * is not the table. Writes there must not land in any entry or raise
 * anything. */
void case_msix_past_table(struct hdev *t)
{
	uint64_t end = t->home[2] + t->pf->bar_size[2];
	uint64_t all0 = irq_total();

	if (!t->msix) {
		no_msix_bar(t, "INTx with no MSI-X BAR, without a reset");
		return;
	}
	uint64_t tend = t->mx.table + 16ull * t->mx.nvec;
	uint64_t pba_end = t->mx.pba + 8ull * ((t->mx.nvec + 63) / 64);
	table_save(t);
	for (uint64_t a = tend; a < end; a += 4)
		if (a < t->mx.pba || a >= pba_end)
			mmio_write32(a, ALL_ONES);
	mmio_write64(tend, ~0ull);
	mmio_write64(pba_end, ~0ull);
	mmio_write64(end - 8, ~0ull);
	table_unchanged(t, "after writes past the table and the PBA");
	uint32_t r1 = mmio_read32(tend), r2 = mmio_read32(pba_end), r3 = mmio_read32(end - 4);
	expect(r1 != ALL_ONES && r2 != ALL_ONES && r3 != ALL_ONES,
	       "blk: what was written past the table reads back (0x%08x 0x%08x 0x%08x)", r1, r2,
	       r3);
	no_interrupts_since(all0, "blk: writes past the MSI-X table");
	hdev_works(t, "MSI-X after writes past its table, without a reset");
}

/* 6.8.2: "software must use aligned full DWORD or aligned full QWORD
 * transactions"; anything else has undefined results, which for the VMM
 * means: ignored, never a partial entry. Aligned QWORDs do work. */
void case_msix_odd_sizes(struct hdev *t)
{
	uint64_t tbl = t->mx.table;
	uint64_t all0 = irq_total();

	if (!t->msix) {
		no_msix_bar(t, "INTx with no MSI-X table, without a reset");
		return;
	}
	table_save(t);
	for (unsigned i = 0; i < t->mx.nvec; i++) {
		uint64_t e = tbl + 16ull * i;
		for (unsigned off = 0; off < 16; off++)
			mmio_write8(e + off, 0xFF);
		for (unsigned off = 0; off < 16; off += 2)
			mmio_write16(e + off, 0xFFFF);
		for (unsigned off = 1; off < 16; off++)
			if (off % 4)
				mmio_write32(e + off, ALL_ONES);
		mmio_write64(e + 4, ~0ull);
		mmio_write64(e + 12, ~0ull); /* across into the next entry */
	}
	if (!table_unchanged(t, "after 1-byte, 2-byte and misaligned writes"))
		return;
	no_interrupts_since(all0, "blk: odd-sized writes to the MSI-X table");
	/* An aligned QWORD write of data + vector control masks entry 1... */
	uint64_t e1 = t->mx.table + 16;
	uint64_t dc = mmio_read64(e1 + 8);
	mmio_write64(e1 + 8, (dc & 0xFFFFFFFFull) | (uint64_t)PCI_MSIX_ENTRY_CTRL_MASK << 32);
	uint32_t ctrl = mmio_read32(e1 + 12);
	/* ... and one unmasks it again. */
	mmio_write64(e1 + 8, dc);
	expect((ctrl & PCI_MSIX_ENTRY_CTRL_MASK) && table_unchanged(t, "after QWORD writes"),
	       "blk: an aligned QWORD write to entry 1's data and control did not mask it "
	       "(control 0x%08x)",
	       ctrl);
	hdev_works(t, "MSI-X after odd-sized table writes, without a reset");
}

static bool pba_bit(const struct hdev *t, unsigned i)
{
	return msix_pending(&t->mx, i);
}

static bool pba_bit1(void *arg)
{
	return pba_bit(arg, 1);
}

struct q_wait {
	const struct hdev *d;
	uint64_t before;
};

static bool q_irq(void *arg)
{
	const struct q_wait *w = arg;
	return hdev_qirqs(w->d) > w->before;
}

static bool q_used(void *arg)
{
	return virtq_used_pending(&((const struct hdev *)arg)->vq) != 0;
}

/* 6.8.2.10: Pending Bits are read-only; a write does not set or clear one.
 * A vector masked when its event comes sets its bit, and unmasking it
 * delivers the message. */
void case_msix_pba_write(struct hdev *t)
{
	uint64_t all0 = irq_total();

	if (!t->msix) {
		no_msix_bar(t, "INTx with no PBA, without a reset");
		return;
	}
	mmio_write32(t->mx.pba, ALL_ONES);
	mmio_write32(t->mx.pba + 4, ALL_ONES);
	mmio_write64(t->mx.pba, ~0ull);
	uint64_t p = mmio_read64(t->mx.pba);
	expect(p == 0, "blk: the PBA reads 0x%lx after all-ones writes, nothing was pending", p);
	no_interrupts_since(all0, "blk: all-ones written to the PBA");

	/* A pending bit that the PBA write must not clear. */
	struct q_wait w = {t, hdev_qirqs(t)};
	struct virtq_buf b[3] = {{H.blk_hdr, 16}, {H.blk_data, SECTOR}, {H.blk_status, 1}};
	*H.blk_hdr = (struct blk_hdr){VIRTIO_BLK_T_IN, 0, 0};
	msix_entry_mask(&t->mx, 1, true);
	int head = virtq_add(&t->vq, b, 1, 2);
	virtq_kick(&t->vq);
	bool used = wait_for(q_used, t, H_WAIT_US);
	bool pending = wait_for(pba_bit1, t, H_WAIT_US);
	uint64_t early = hdev_qirqs(t) - w.before;
	mmio_write32(t->mx.pba, 0);
	mmio_write64(t->mx.pba, 0);
	bool still = pba_bit(t, 1);
	msix_entry_mask(&t->mx, 1, false);
	bool came = wait_for(q_irq, &w, H_WAIT_US);
	bool cleared = !pba_bit(t, 1);
	uint16_t id;
	uint32_t len;
	bool got = virtq_get_used(&t->vq, &id, &len);
	expect(used && pending && early == 0 && still && came && cleared && got && id == head,
	       "blk: queue vector masked during a read: used %s, PBA bit 1 %s, %lu interrupts "
	       "while masked, bit after zero writes %s, interrupt at unmask %s, bit after %s",
	       used ? "yes" : "no", pending ? "set" : "clear", early, still ? "set" : "clear",
	       came ? "yes" : "no", cleared ? "clear" : "set");
	hdev_works(t, "after PBA writes, without a reset");
}

/* ---- BARs ---- */

/* Moves BAR `bar` of t to `to` with the INTx service kept off BAR0 while
 * it is away; bar_home() puts it back. */
static void bar_away(struct hdev *t, unsigned bar, uint64_t to)
{
	if (bar == 0)
		t->isr = 0;
	bar_write(t, bar, (uint32_t)to);
}

static void bar_home(struct hdev *t, unsigned bar)
{
	bar_write(t, bar, (uint32_t)t->home[bar]);
	if (bar == 0)
		t->isr = t->vp.isr.addr;
}

/* Back home, the device is as it was: no reset, no NEEDS_RESET, and it
 * serves a request through its notify address (ioeventfds follow BAR0). */
static void back_home(struct hdev *t, unsigned bar, const char *what)
{
	bar_home(t, bar);
	uint32_t rb = bar_read(t, bar);
	expect(rb == (uint32_t)t->home[bar], "%s: BAR%u reads 0x%08x after moving back to 0x%lx",
	       t->name, bar, rb, t->home[bar]);
	if (t->msix && bar == 2)
		table_unchanged(t, what);
	expect_status(t, 0x0F, what);
	hdev_works(t, what);
}

/* The BAR's old place decodes nothing now. */
static void gone_from_home(struct hdev *t, const char *what)
{
	uint8_t s = mmio_read8(t->home[0] + VIRTIO_CC_STATUS);
	expect(s == 0xFF, "%s: %s: its old BAR0 still answers (status reads 0x%02x)", t->name, what,
	       s);
}

/* Guest RAM is RAM: the VMM refuses to decode a BAR over it (it could not
 * anyway: KVM serves RAM first), so accesses there reach RAM, never the
 * device, and the device is unharmed when the BAR comes back. */
void case_bar_over_ram(struct hdev *t)
{
	uint32_t *ram = ram_alloc(0x4000, 0x4000);

	if (!expect(ram != NULL, "out of RAM pool"))
		return;
	for (unsigned i = 0; i < 0x1000; i++)
		ram[i] = 0xA5000000u | i;
	bar_away(t, 0, (uint64_t)ram);
	uint32_t rb = bar_read(t, 0);
	volatile uint32_t *v = ram;
	uint32_t seen = v[VIRTIO_CC_STATUS / 4];
	v[VIRTIO_CC_STATUS / 4] = 0; /* a device reset, were the device there */
	uint32_t after = v[VIRTIO_CC_STATUS / 4];
	expect(seen == (0xA5000000u | VIRTIO_CC_STATUS / 4) && after == 0,
	       "blk: BAR0 moved over RAM at 0x%lx: RAM read 0x%08x, then 0x%08x after a write",
	       (uint64_t)ram, seen, after);
	gone_from_home(t, "BAR0 over RAM");
	info("blk: BAR0 over RAM at 0x%lx reads back 0x%08x (latched)", (uint64_t)ram, rb);
	back_home(t, 0, "BAR0 back from RAM");

	if (!t->msix)
		return;
	/* The MSI-X table's BAR over RAM: messages still go out (the table
	 * lives in the VMM), and the table is intact when it comes back. */
	table_save(t);
	bar_away(t, 2, (uint64_t)ram);
	uint32_t r = v[0x1000 / 4];
	expect(r == (0xA5000000u | 0x400), "blk: BAR2 over RAM: RAM reads 0x%08x", r);
	hdev_works(t, "MSI-X with BAR2 refused over RAM");
	back_home(t, 2, "BAR2 back from RAM");
}

void case_bar_over_bar(struct hdev *t)
{
	struct hdev *rng = &H.dev[HD_RNG], *td = &H.dev[HD_TD];

	/* Onto rng's BAR0, which has the same size. */
	bar_away(t, 0, rng->home[0]);
	uint32_t cfg = mmio_read32(rng->home[0] + VP_DEVICE_OFF);
	expect(cfg != (uint32_t)H.sectors,
	       "blk: BAR0 moved onto rng's: blk's capacity answers at rng's address");
	gone_from_home(t, "BAR0 onto rng's BAR0");
	hdev_works(rng, "while blk's BAR0 claims its address");
	back_home(t, 0, "BAR0 back from rng's");

	/* Over the testdev's (4 KiB) BAR0. */
	bar_away(t, 0, td->home[0] & ~(uint64_t)(VP_BAR0_SIZE - 1));
	uint32_t magic = mmio_read32(td->home[0] + TD_MAGIC);
	expect(magic == TESTDEV_MAGIC, "blk: BAR0 moved over the testdev's: its MAGIC reads 0x%08x",
	       magic);
	hdev_works(td, "while blk's BAR0 covers its BAR0");
	back_home(t, 0, "BAR0 back from the testdev's");

	/* BAR2 onto the device's own BAR0. */
	if (t->msix)
		table_save(t);
	bar_away(t, 2, t->home[0]);
	uint32_t cap = mmio_read32(t->home[0] + VP_DEVICE_OFF);
	expect(cap == (uint32_t)H.sectors,
	       "blk: BAR2 moved onto its own BAR0: BAR0's device config reads 0x%08x", cap);
	expect_status(t, 0x0F, "BAR2 onto its own BAR0");
	hdev_works(t, "with BAR2 refused over its own BAR0");
	back_home(t, 2, "BAR2 back from BAR0");
}

/* The LAPIC and IOAPIC are the machine's (KVM serves them before any
 * exit): a BAR over them would be half shadowed, so the VMM refuses it
 * like one over RAM, and nothing of the device answers anywhere in it. */
static void over_window(struct hdev *t, uint64_t at, const char *name)
{
	char what[64];

	snprintf(what, sizeof(what), "BAR0 over the %s", name);
	bar_away(t, 0, at);
	uint32_t cap = mmio_read32(at + VP_DEVICE_OFF);
	uint8_t isr = mmio_read8(at + 0x1000);
	expect(cap == ALL_ONES && isr == 0xFF,
	       "blk: %s at 0x%lx was mapped: device config reads 0x%08x, ISR 0x%02x", what, at, cap,
	       isr);
	gone_from_home(t, what);
	back_home(t, 0, what);
	if (!t->msix)
		return;
	snprintf(what, sizeof(what), "BAR2 (MSI-X) over the %s", name);
	table_save(t);
	bar_away(t, 2, at);
	uint32_t pba = mmio_read32(at + 0x1000);
	expect(pba == ALL_ONES, "blk: %s at 0x%lx was mapped: the PBA page reads 0x%08x", what, at,
	       pba);
	hdev_works(t, what);
	back_home(t, 2, what);
}

void case_bar_over_lapic(struct hdev *t)
{
	over_window(t, LAPIC_BASE, "LAPIC");
	uint32_t id = lapic_read(LAPIC_ID) >> 24;
	expect(id == H.lapic.apic_id, "the LAPIC ID reads %u, was %u", id, H.lapic.apic_id);
}

void case_bar_over_ioapic(struct hdev *t)
{
	uint32_t ver = ioapic_read(H.mp.ioapic, IOAPIC_REG_VER);
	over_window(t, H.mp.ioapic, "IOAPIC");
	uint32_t ver2 = ioapic_read(H.mp.ioapic, IOAPIC_REG_VER);
	expect(ver2 == ver, "the IOAPIC version register reads 0x%08x, was 0x%08x", ver2, ver);
}

/* ---- read-only fields ---- */

static void ro_cfg(const struct hdev *t, unsigned off, unsigned len, const char *what)
{
	unsigned s = t->pf->slot;
	uint32_t v, r;

	switch (len) {
	case 1:
		v = pci_read8(0, s, 0, off);
		pci_write8(0, s, 0, off, (uint8_t)~v);
		r = pci_read8(0, s, 0, off);
		break;
	case 2:
		v = pci_read16(0, s, 0, off);
		pci_write16(0, s, 0, off, (uint16_t)~v);
		r = pci_read16(0, s, 0, off);
		break;
	default:
		v = pci_read32(0, s, 0, off);
		pci_write32(0, s, 0, off, ~v);
		r = pci_read32(0, s, 0, off);
		break;
	}
	expect(r == v, "%s: config 0x%02x (%s, read-only): 0x%x -> 0x%x after writing its inverse",
	       t->name, off, what, v, r);
}

static void ro_common16(const struct hdev *t, unsigned off, const char *what)
{
	uint16_t v = virtio_cc_read16(&t->vp, off);
	virtio_cc_write16(&t->vp, off, (uint16_t)~v);
	uint16_t r = virtio_cc_read16(&t->vp, off);
	expect(r == v, "%s: common config 0x%02x (%s, read-only): 0x%x -> 0x%x", t->name, off, what,
	       v, r);
}

void case_readonly_config(struct hdev *t)
{
	unsigned s = t->pf->slot;

	/* PCI 3.0 6.1, 6.2: the identity fields, header type, BIST, CIS,
	 * subsystem, the expansion ROM BAR (not implemented: 0), the
	 * capability pointer, Interrupt Pin, Min_Gnt, Max_Lat. */
	ro_cfg(t, 0x00, 4, "vendor and device ID");
	ro_cfg(t, 0x08, 4, "revision and class code");
	ro_cfg(t, 0x0E, 1, "header type");
	ro_cfg(t, 0x0F, 1, "BIST");
	ro_cfg(t, 0x28, 4, "CardBus CIS pointer");
	ro_cfg(t, 0x2C, 4, "subsystem IDs");
	ro_cfg(t, 0x30, 4, "expansion ROM BAR");
	ro_cfg(t, 0x34, 1, "capabilities pointer");
	ro_cfg(t, 0x3D, 1, "Interrupt Pin");
	ro_cfg(t, 0x3E, 2, "Min_Gnt and Max_Lat");
	/* 6.2.3: Interrupt Status and Capabilities List are read-only; the
	 * error bits are write-1-to-clear (and clear here). */
	uint16_t st = pci_read16(0, s, 0, PCI_STATUS);
	pci_write16(0, s, 0, PCI_STATUS, 0);
	uint16_t st0 = pci_read16(0, s, 0, PCI_STATUS);
	pci_write16(0, s, 0, PCI_STATUS, 0xFFFF);
	uint16_t st1 = pci_read16(0, s, 0, PCI_STATUS);
	expect(st0 == st && st1 == st, "blk: status 0x%04x -> 0x%04x (0 written), 0x%04x (ffff)",
	       st, st0, st1);
	/* 6.2.5.1: a BAR's low bits give its type. */
	bar_write(t, 0, (uint32_t)t->home[0] | 0xF);
	uint32_t b0 = bar_read(t, 0);
	expect(b0 == (uint32_t)t->home[0],
	       "blk: BAR0 reads 0x%08x after writing its address | 0xf (type bits are read-only)",
	       b0);

	/* 6.7: the capability list; virtio 4.1.4: its capabilities are the
	 * device's, but for the PCI configuration access capability's
	 * bar/offset/length/data (4.1.4.9). */
	uint8_t offs[48], ids[48];
	const char *err;
	unsigned n = pci_cap_walk(0, s, 0, offs, ids, 48, &err);
	for (unsigned i = 0; i < n && i < 48; i++) {
		uint8_t c = offs[i];
		ro_cfg(t, c, 2, "capability ID and next pointer");
		if (ids[i] == PCI_CAP_ID_VNDR) {
			uint8_t len = pci_read8(0, s, 0, c + VIRTIO_CAP_LEN);
			uint8_t type = pci_read8(0, s, 0, c + VIRTIO_CAP_CFG_TYPE);
			ro_cfg(t, c + 2, 2, "virtio cap_len and cfg_type");
			if (type == VIRTIO_PCI_CAP_PCI_CFG)
				continue;
			for (unsigned o = 4; o + 4 <= len; o += 4)
				ro_cfg(t, c + o, 4, "virtio capability body");
		} else if (ids[i] == PCI_CAP_ID_MSIX) {
			ro_cfg(t, c + PCI_MSIX_TABLE, 4, "MSI-X table offset/BIR");
			ro_cfg(t, c + PCI_MSIX_PBA, 4, "MSI-X PBA offset/BIR");
			uint16_t ctrl = pci_read16(0, s, 0, c + PCI_MSIX_CTRL);
			pci_write16(0, s, 0, c + PCI_MSIX_CTRL, ctrl ^ PCI_MSIX_CTRL_SIZE_MASK);
			uint16_t ctrl2 = pci_read16(0, s, 0, c + PCI_MSIX_CTRL);
			expect(ctrl2 == ctrl,
			       "blk: MSI-X Table Size is read-only: 0x%04x -> 0x%04x", ctrl, ctrl2);
		}
	}
	expect(err == NULL, "blk: the capability list is malformed after the writes: %s", err);

	/* virtio 4.1.4.3: num_queues, queue_notify_off, device_feature and
	 * config_generation are the device's; so are ISR (4.1.4.5) and
	 * virtio-blk's configuration (5.2.4). */
	ro_common16(t, VIRTIO_CC_NUM_QUEUES, "num_queues");
	virtio_cc_write16(&t->vp, VIRTIO_CC_Q_SELECT, 0);
	ro_common16(t, VIRTIO_CC_Q_NOTIFY_OFF, "queue_notify_off");
	for (uint32_t sel = 0; sel < 2; sel++) {
		virtio_cc_write32(&t->vp, VIRTIO_CC_DFSELECT, sel);
		uint32_t f = virtio_cc_read32(&t->vp, VIRTIO_CC_DF);
		virtio_cc_write32(&t->vp, VIRTIO_CC_DF, ~f);
		uint32_t f2 = virtio_cc_read32(&t->vp, VIRTIO_CC_DF);
		expect(f2 == f, "blk: device_feature[%u] 0x%08x -> 0x%08x", sel, f, f2);
	}
	uint8_t gen = virtio_cc_read8(&t->vp, VIRTIO_CC_CFG_GEN);
	virtio_cc_write8(&t->vp, VIRTIO_CC_CFG_GEN, (uint8_t)~gen);
	uint8_t gen2 = virtio_cc_read8(&t->vp, VIRTIO_CC_CFG_GEN);
	expect(gen2 == gen, "blk: config_generation 0x%02x -> 0x%02x", gen, gen2);
	uint64_t cap = virtio_config_read(&t->vp, 0, 8);
	mmio_write32(t->vp.device.addr, 0);
	mmio_write32(t->vp.device.addr + 4, ALL_ONES);
	mmio_write8(t->vp.device.addr + 20, 0x11);
	uint64_t cap2 = virtio_config_read(&t->vp, 0, 8);
	expect(cap2 == cap, "blk: capacity %lu -> %lu after writes (5.2.4)", cap, cap2);
	uint64_t q0 = hdev_qirqs(t), c0 = hdev_cfgirqs(t);
	mmio_write8(t->vp.isr.addr, 0xFF);
	spin_us(H_QUIET_US);
	expect(hdev_qirqs(t) == q0 && hdev_cfgirqs(t) == c0,
	       "blk: writing ISR raised an interrupt (it is read-only, 4.1.4.5)");
	expect_status(t, 0x0F, "after writes to read-only fields");
	hdev_works(t, "after writes to read-only fields, without a reset");
}
