#include "vmm/firmware/fdt.h"

#include "vmm/base/err.h"
#include "vmm/base/guest_mem.h"
#include "vmm/base/layout.h"

#include "devices/legacy/uart8250.h"
#include "devices/pci/pci.h"

#include <libfdt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FDT_BUF_SIZE   (64 * 1024)
#define PHANDLE_IOAPIC 1

/* IEEE 1275 PCI binding, phys.hi: space code in bits 25:24. */
#define PCI_SPACE_IO	0x01000000u
#define PCI_SPACE_MEM32 0x02000000u
#define PCI_SPACE_MEM64 0x03000000u

static int fdt_reg64(void *fdt, const char *name, uint64_t addr, uint64_t size)
{
	fdt64_t cells[2] = {cpu_to_fdt64(addr), cpu_to_fdt64(size)};
	return fdt_property(fdt, name, cells, sizeof(cells));
}

static int fdt_memory(void *fdt, const struct guest_mem *m)
{
	int ret = 0;
	for (int i = 0; i < m->nregions && !ret; i++) {
		char name[32];
		snprintf(name, sizeof(name), "memory@%llx", (unsigned long long)m->regions[i].gpa);
		ret = fdt_begin_node(fdt, name);
		ret = ret ? ret : fdt_property_string(fdt, "device_type", "memory");
		ret = ret ? ret : fdt_reg64(fdt, "reg", m->regions[i].gpa, m->regions[i].size);
		ret = ret ? ret : fdt_end_node(fdt);
	}
	return ret;
}

static int fdt_cpus(void *fdt, unsigned ncpus)
{
	int ret = fdt_begin_node(fdt, "cpus");
	ret = ret ? ret : fdt_property_u32(fdt, "#address-cells", 1);
	ret = ret ? ret : fdt_property_u32(fdt, "#size-cells", 0);
	for (unsigned i = 0; i < ncpus && !ret; i++) {
		char name[16];
		snprintf(name, sizeof(name), "cpu@%u", i);
		ret = fdt_begin_node(fdt, name);
		ret = ret ? ret : fdt_property_string(fdt, "device_type", "cpu");
		ret = ret ? ret : fdt_property_u32(fdt, "reg", i);
		ret = ret ? ret : fdt_end_node(fdt);
	}
	return ret ? ret : fdt_end_node(fdt);
}

static int fdt_ioapic_and_serial(void *fdt)
{
	int ret = fdt_begin_node(fdt, "ioapic@fec00000");
	ret = ret ? ret : fdt_property_string(fdt, "compatible", "intel,ce4100-ioapic");
	ret = ret ? ret : fdt_property(fdt, "interrupt-controller", NULL, 0);
	ret = ret ? ret : fdt_property_u32(fdt, "#interrupt-cells", 2);
	ret = ret ? ret : fdt_property_u32(fdt, "#address-cells", 0); /* for interrupt-map */
	ret = ret ? ret : fdt_reg64(fdt, "reg", LAYOUT_IOAPIC_BASE, 0x1000);
	ret = ret ? ret : fdt_property_u32(fdt, "phandle", PHANDLE_IOAPIC);
	ret = ret ? ret : fdt_end_node(fdt);
	ret = ret ? ret : fdt_begin_node(fdt, "serial@3f8");
	ret = ret ? ret : fdt_property_string(fdt, "compatible", "ns16550a");
	ret = ret ? ret : fdt_reg64(fdt, "reg", UART_COM1_BASE, UART_NREGS);
	ret = ret ? ret : fdt_property_u32(fdt, "reg-io-space", 1);
	ret = ret ? ret : fdt_property_u32(fdt, "clock-frequency", 1843200);
	/* ISA IRQ 4, edge (type 0 in the ce4100 IOAPIC binding: rising edge). */
	fdt32_t irq[2] = {cpu_to_fdt32(UART_COM1_IRQ), cpu_to_fdt32(0)};
	ret = ret ? ret : fdt_property(fdt, "interrupts", irq, sizeof(irq));
	ret = ret ? ret : fdt_property_u32(fdt, "interrupt-parent", PHANDLE_IOAPIC);
	return ret ? ret : fdt_end_node(fdt);
}

static int fdt_pci_device(void *fdt, const struct pci_device *d)
{
	char name[48];
	uint32_t devfn_hi = (uint32_t)d->slot << 11;
	snprintf(name, sizeof(name), "%s@%x", d->name, d->slot);
	int ret = fdt_begin_node(fdt, name);
	fdt32_t reg[5] = {cpu_to_fdt32(devfn_hi), 0, 0, 0, 0};
	ret = ret ? ret : fdt_property(fdt, "reg", reg, sizeof(reg));
	ret = ret ? ret : fdt_property_u32(fdt, "vendor-id", pci_cfg_get16(d, PCI_VENDOR_ID));
	ret = ret ? ret : fdt_property_u32(fdt, "device-id", pci_cfg_get16(d, PCI_DEVICE_ID));
	fdt32_t assigned[PCI_NUM_BARS * 5];
	unsigned n = 0;
	for (int i = 0; i < PCI_NUM_BARS; i++) {
		const struct pci_bar *bar = &d->bars[i];
		if (bar->type == PCI_BAR_NONE || !bar->mapped)
			continue;
		uint32_t space = bar->type == PCI_BAR_IO      ? PCI_SPACE_IO
				 : bar->type == PCI_BAR_MEM64 ? PCI_SPACE_MEM64
							      : PCI_SPACE_MEM32;
		/* phys.hi: n p t ss bbbbbbbb ddddd fff rrrrrrrr; 'n' set: assigned. */
		assigned[n++] =
		    cpu_to_fdt32(0x80000000u | space | (bar->prefetch ? 0x40000000u : 0) |
				 devfn_hi | (uint32_t)(PCI_BASE_ADDRESS_0 + 4 * i));
		assigned[n++] = cpu_to_fdt32((uint32_t)(bar->mapped_at >> 32));
		assigned[n++] = cpu_to_fdt32((uint32_t)bar->mapped_at);
		assigned[n++] = cpu_to_fdt32((uint32_t)(bar->size >> 32));
		assigned[n++] = cpu_to_fdt32((uint32_t)bar->size);
	}
	if (n)
		ret = ret ? ret : fdt_property(fdt, "assigned-addresses", assigned, n * 4);
	if (d->msix_vectors)
		ret = ret ? ret : fdt_property_u32(fdt, "msix-vectors", d->msix_vectors);
	if (d->cfg[PCI_INTERRUPT_PIN])
		ret = ret ? ret : fdt_property_u32(fdt, "ioapic-pin", d->cfg[PCI_INTERRUPT_LINE]);
	return ret ? ret : fdt_end_node(fdt);
}

static int fdt_pci(void *fdt, const struct pci_bus *pci)
{
	int ret = fdt_begin_node(fdt, "pci@cf8");
	ret = ret ? ret : fdt_property_string(fdt, "compatible", "pci-host-conf1");
	ret = ret ? ret : fdt_property_string(fdt, "device_type", "pci");
	ret = ret ? ret : fdt_property_u32(fdt, "#address-cells", 3);
	ret = ret ? ret : fdt_property_u32(fdt, "#size-cells", 2);
	ret = ret ? ret : fdt_property_u32(fdt, "#interrupt-cells", 1);
	fdt32_t bus_range[2] = {0, 0};
	ret = ret ? ret : fdt_property(fdt, "bus-range", bus_range, sizeof(bus_range));
	fdt64_t conf1[2] = {cpu_to_fdt64(PCI_CONF1_ADDR), cpu_to_fdt64(8)};
	ret = ret ? ret : fdt_property(fdt, "reg", conf1, sizeof(conf1));
	/* ranges: child (3 cells), parent (2), size (2): the I/O and MMIO windows. */
	fdt32_t ranges[2 * 7] = {
	    cpu_to_fdt32(PCI_SPACE_IO),
	    0,
	    cpu_to_fdt32((uint32_t)LAYOUT_PCI_IO_START),
	    0,
	    cpu_to_fdt32((uint32_t)LAYOUT_PCI_IO_START),
	    0,
	    cpu_to_fdt32((uint32_t)(LAYOUT_PCI_IO_END - LAYOUT_PCI_IO_START)),
	    cpu_to_fdt32(PCI_SPACE_MEM32),
	    0,
	    cpu_to_fdt32((uint32_t)LAYOUT_PCI_MMIO_START),
	    0,
	    cpu_to_fdt32((uint32_t)LAYOUT_PCI_MMIO_START),
	    0,
	    cpu_to_fdt32((uint32_t)(LAYOUT_PCI_MMIO_END - LAYOUT_PCI_MMIO_START)),
	};
	ret = ret ? ret : fdt_property(fdt, "ranges", ranges, sizeof(ranges));
	/* interrupt-map: (devfn, 0, 0, INTx#) -> IOAPIC pin, level (type 1). */
	fdt32_t map[PCI_SLOTS * 7];
	unsigned n = 0;
	for (unsigned s = 0; s < PCI_SLOTS; s++) {
		const struct pci_device *d = pci->slots[s];
		if (!d || !d->cfg[PCI_INTERRUPT_PIN])
			continue;
		map[n++] = cpu_to_fdt32(s << 11);
		map[n++] = 0;
		map[n++] = 0;
		map[n++] = cpu_to_fdt32(d->cfg[PCI_INTERRUPT_PIN]);
		map[n++] = cpu_to_fdt32(PHANDLE_IOAPIC);
		map[n++] = cpu_to_fdt32(d->cfg[PCI_INTERRUPT_LINE]);
		map[n++] = cpu_to_fdt32(1);
	}
	if (n) {
		fdt32_t mask[4] = {cpu_to_fdt32(0xF800), 0, 0, cpu_to_fdt32(7)};
		ret = ret ? ret : fdt_property(fdt, "interrupt-map", map, n * 4);
		ret = ret ? ret : fdt_property(fdt, "interrupt-map-mask", mask, sizeof(mask));
	}
	for (unsigned s = 0; s < PCI_SLOTS && !ret; s++)
		if (pci->slots[s] && s != 0)
			ret = fdt_pci_device(fdt, pci->slots[s]);
	return ret ? ret : fdt_end_node(fdt);
}

int fdt_build_machine(const struct fdt_machine *m, void **blob, size_t *len, struct err *e)
{
	void *fdt = malloc(FDT_BUF_SIZE);
	if (!fdt)
		return err_set(e, ERR_HOST, "out of memory for the device tree");
	int ret = fdt_create(fdt, FDT_BUF_SIZE);
	ret = ret ? ret : fdt_finish_reservemap(fdt);
	ret = ret ? ret : fdt_begin_node(fdt, "");
	ret = ret ? ret : fdt_property_string(fdt, "compatible", "vmm,msix-machine");
	ret = ret ? ret : fdt_property_string(fdt, "model", "vmm MSI-X/INTx machine");
	ret = ret ? ret : fdt_property_u32(fdt, "#address-cells", 2);
	ret = ret ? ret : fdt_property_u32(fdt, "#size-cells", 2);
	ret = ret ? ret : fdt_property_u32(fdt, "interrupt-parent", PHANDLE_IOAPIC);
	ret = ret ? ret : fdt_memory(fdt, m->mem);
	ret = ret ? ret : fdt_cpus(fdt, m->ncpus);
	ret = ret ? ret : fdt_ioapic_and_serial(fdt);
	ret = ret ? ret : fdt_pci(fdt, m->pci);
	ret = ret ? ret : fdt_end_node(fdt);
	ret = ret ? ret : fdt_finish(fdt);
	if (ret) {
		free(fdt);
		return err_set(e, ERR_HOST, "building the device tree failed: %s",
			       fdt_strerror(ret));
	}
	*blob = fdt;
	*len = fdt_totalsize(fdt);
	return 0;
}
