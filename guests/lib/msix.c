/*
 * MSI-X capability and table (see guest/msix.h). PCI Local Bus 3.0,
 * 6.8.2.1 - 6.8.2.10.
 */
#include "guest/msix.h"

#include "guest/apic.h"
#include "guest/kit.h"
#include "guest/pci.h"

bool msix_probe(unsigned slot, const uint64_t bar[6], struct msix_info *m, const char **why)
{
	uint8_t offs[48], ids[48];
	const char *err;
	unsigned n = pci_cap_walk(0, slot, 0, offs, ids, 48, &err);

	memset(m, 0, sizeof(*m));
	m->slot = (uint8_t)slot;
	for (unsigned i = 0; i < n && i < 48 && !m->cap; i++)
		if (ids[i] == PCI_CAP_ID_MSIX)
			m->cap = offs[i];
	if (!m->cap) {
		*why = err ? err : "no MSI-X capability (ID 0x11)";
		return false;
	}
	uint16_t ctrl = pci_read16(0, slot, 0, m->cap + PCI_MSIX_CTRL);
	uint32_t table = pci_read32(0, slot, 0, m->cap + PCI_MSIX_TABLE);
	uint32_t pba = pci_read32(0, slot, 0, m->cap + PCI_MSIX_PBA);
	m->nvec = (uint16_t)((ctrl & PCI_MSIX_CTRL_SIZE_MASK) + 1);
	m->table_bir = table & PCI_MSIX_BIR_MASK;
	m->pba_bir = pba & PCI_MSIX_BIR_MASK;
	m->table_off = table & ~PCI_MSIX_BIR_MASK;
	m->pba_off = pba & ~PCI_MSIX_BIR_MASK;
	/* 6.8.2.4/6.8.2.5: BIR 0-5 name a BAR; 6 and 7 are reserved. */
	if (m->table_bir > 5 || m->pba_bir > 5 || !bar[m->table_bir] || !bar[m->pba_bir]) {
		*why = "the table or PBA BIR names a reserved or unassigned BAR";
		return false;
	}
	m->table = bar[m->table_bir] + m->table_off;
	m->pba = bar[m->pba_bir] + m->pba_off;
	*why = NULL;
	return true;
}

uint16_t msix_ctrl_read(const struct msix_info *m)
{
	return pci_read16(0, m->slot, 0, m->cap + PCI_MSIX_CTRL);
}

void msix_ctrl_write(const struct msix_info *m, uint16_t v)
{
	pci_write16(0, m->slot, 0, m->cap + PCI_MSIX_CTRL, v);
}

static uint64_t entry(const struct msix_info *m, unsigned i)
{
	return m->table + (uint64_t)i * PCI_MSIX_ENTRY_SIZE;
}

void msix_entry_write(const struct msix_info *m, unsigned i, uint8_t apic_id, uint8_t vector,
		      bool masked)
{
	uint64_t e = entry(m, i);
	/* 6.8.2.9: change an entry only while it (or the function) is masked. */
	mmio_write32(e + PCI_MSIX_ENTRY_CTRL, PCI_MSIX_ENTRY_CTRL_MASK);
	mmio_write32(e + PCI_MSIX_ENTRY_ADDR_LO, msi_address(apic_id));
	mmio_write32(e + PCI_MSIX_ENTRY_ADDR_HI, 0);
	mmio_write32(e + PCI_MSIX_ENTRY_DATA, msi_data_fixed_edge(vector));
	if (!masked)
		mmio_write32(e + PCI_MSIX_ENTRY_CTRL, 0);
}

void msix_entry_mask(const struct msix_info *m, unsigned i, bool masked)
{
	mmio_write32(entry(m, i) + PCI_MSIX_ENTRY_CTRL, masked ? PCI_MSIX_ENTRY_CTRL_MASK : 0);
}

bool msix_entry_is(const struct msix_info *m, unsigned i, uint8_t apic_id, uint8_t vector,
		   bool masked)
{
	uint64_t e = entry(m, i);
	return mmio_read32(e + PCI_MSIX_ENTRY_ADDR_LO) == msi_address(apic_id) &&
	       mmio_read32(e + PCI_MSIX_ENTRY_ADDR_HI) == 0 &&
	       mmio_read32(e + PCI_MSIX_ENTRY_DATA) == msi_data_fixed_edge(vector) &&
	       (mmio_read32(e + PCI_MSIX_ENTRY_CTRL) & PCI_MSIX_ENTRY_CTRL_MASK) ==
		   (masked ? PCI_MSIX_ENTRY_CTRL_MASK : 0u);
}

bool msix_pending(const struct msix_info *m, unsigned i)
{
	return (mmio_read32(m->pba + 4 * (i / 32)) >> (i % 32)) & 1;
}

bool msix_enable(const struct msix_info *m, uint8_t apic_id, const uint8_t *vectors, unsigned n,
		 const char **why)
{
	uint16_t size_bits = (uint16_t)(m->nvec - 1);

	if (n > m->nvec) {
		*why = "more vectors asked for than the table has";
		return false;
	}
	msix_ctrl_write(m, PCI_MSIX_CTRL_ENABLE | PCI_MSIX_CTRL_FMASK);
	if (msix_ctrl_read(m) != (PCI_MSIX_CTRL_ENABLE | PCI_MSIX_CTRL_FMASK | size_bits)) {
		*why = "Message Control does not read back Enable | Function Mask";
		return false;
	}
	for (unsigned i = 0; i < n; i++) {
		msix_entry_write(m, i, apic_id, vectors[i], true);
		if (!msix_entry_is(m, i, apic_id, vectors[i], true)) {
			*why = "a table entry does not read back as written";
			return false;
		}
	}
	for (unsigned i = 0; i < n; i++)
		msix_entry_mask(m, i, false);
	msix_ctrl_write(m, PCI_MSIX_CTRL_ENABLE);
	if (msix_ctrl_read(m) != (PCI_MSIX_CTRL_ENABLE | size_bits)) {
		*why = "Message Control does not read back Enable after clearing Function Mask";
		return false;
	}
	*why = NULL;
	return true;
}

void msix_disable(const struct msix_info *m)
{
	msix_ctrl_write(m, 0);
}
