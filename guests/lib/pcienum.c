/*
 * Bus-0 enumeration and MP-table INTx routing (see guest/pcienum.h).
 */
#include "guest/pcienum.h"

#include "guest/kit.h"

void pci_func_size_bars(struct pci_func *f)
{
	const uint32_t *orig = f->bar_orig;

	for (unsigned b = 0; b < PCI_NUM_BARS; b++)
		pci_bar_probe(0, f->slot, 0, PCI_BAR0 + 4 * b, &f->bar_orig[b], &f->bar_raw[b]);
	for (unsigned b = 0; b < PCI_NUM_BARS; b++) {
		uint32_t raw = f->bar_raw[b];
		f->bar[b] = f->bar_size[b] = 0;
		if (!raw)
			continue;
		if (raw & PCI_BAR_IO) {
			f->bar[b] = orig[b] & ~3u;
			f->bar_size[b] = (uint16_t) ~(raw & ~3u) + 1u;
			continue;
		}
		f->bar[b] = orig[b] & PCI_BAR_MEM_ADDR_MASK;
		f->bar_size[b] = pci_bar_mem_size(raw);
		/* 6.2.5.1: a 64-bit BAR takes the next slot for its high half. */
		if ((raw & PCI_BAR_MEM_TYPE_MASK) == PCI_BAR_MEM_TYPE_64 && b + 1 < PCI_NUM_BARS) {
			f->bar[b] |= (uint64_t)orig[b + 1] << 32;
			b++;
			f->bar[b] = f->bar_size[b] = 0;
		}
	}
}

unsigned pci_enum_bus0(struct pci_func *out, unsigned max)
{
	unsigned n = 0;

	for (unsigned slot = 0; slot < 32; slot++) {
		uint32_t id = pci_read32(0, slot, 0, PCI_VENDOR_ID);
		if ((id & 0xFFFF) == PCI_VENDOR_NONE)
			continue;
		if (n < max) {
			struct pci_func *f = &out[n];
			memset(f, 0, sizeof(*f));
			f->slot = (uint8_t)slot;
			f->vendor = (uint16_t)id;
			f->device = (uint16_t)(id >> 16);
			f->class_rev = pci_read32(0, slot, 0, PCI_CLASS_REV);
			f->header_type = pci_read8(0, slot, 0, PCI_HEADER_TYPE);
			f->command = pci_read16(0, slot, 0, PCI_COMMAND);
			uint32_t ss = pci_read32(0, slot, 0, 0x2C);
			f->subsys_vendor = (uint16_t)ss;
			f->subsys_id = (uint16_t)(ss >> 16);
			f->irq_line = pci_read8(0, slot, 0, PCI_INTERRUPT_LINE);
			f->irq_pin = pci_read8(0, slot, 0, PCI_INTERRUPT_PIN);
			/* Only type-0 headers have six BARs. */
			if ((f->header_type & PCI_HEADER_TYPE_MASK) == 0)
				pci_func_size_bars(f);
		}
		n++;
	}
	return n;
}

void mp_routing_load(struct mp_routing *r)
{
	const struct mp_floating *mpf = mp_find_floating();
	const char *why = "no \"_MP_\" floating pointer with a valid checksum";
	const struct mp_config *mpc = mpf ? mp_config_table(mpf, &why) : NULL;
	struct mp_intsrc all[MP_ROUTING_MAX_PCI];
	unsigned nall = 0;
	bool pci_bus = false;

	memset(r, 0, sizeof(*r));
	if (!mpc) {
		r->why = why;
		return;
	}
	r->table_found = true;
	struct mp_iter it = mp_iter_start(mpc);
	const uint8_t *e;
	while ((e = mp_iter_next(&it))) {
		if (e[0] == MP_ENTRY_BUS) {
			const struct mp_bus *b = (const void *)e;
			if (!pci_bus && !memcmp(b->bus_type, "PCI   ", 6)) {
				pci_bus = true;
				r->pci_bus = b->bus_id;
			}
		} else if (e[0] == MP_ENTRY_IOAPIC) {
			const struct mp_ioapic *io = (const void *)e;
			if (r->nioapics++ == 0) {
				r->ioapic_id = io->apic_id;
				r->ioapic = io->address;
			}
		} else if (e[0] == MP_ENTRY_IOINT && nall < MP_ROUTING_MAX_PCI) {
			/* Kept until every bus is known: 4.3 does not put bus
			 * entries first. */
			memcpy(&all[nall++], e, sizeof(struct mp_intsrc));
		}
	}
	r->malformed = it.malformed;
	r->malformed_index = it.index;
	r->malformed_off = it.off;
	r->pci_bus_found = pci_bus;
	for (unsigned i = 0; i < nall; i++)
		if (pci_bus && all[i].src_bus == r->pci_bus)
			r->pci[r->npci++] = all[i];
	r->ok = pci_bus && r->nioapics >= 1;
	r->why = !pci_bus	? "no bus entry of type \"PCI\""
		 : !r->nioapics ? "no IOAPIC entry"
				: NULL;
}

const struct mp_intsrc *mp_routing_pci_intx(const struct mp_routing *r, unsigned slot,
					    unsigned intpin, unsigned *matches)
{
	const struct mp_intsrc *m = NULL;

	*matches = 0;
	if (intpin < 1 || intpin > 4)
		return NULL;
	for (unsigned i = 0; i < r->npci; i++) {
		if (r->pci[i].src_bus_irq == MP_PCI_SRC_IRQ(slot, intpin - 1)) {
			if (!(*matches)++)
				m = &r->pci[i];
		}
	}
	return m;
}
