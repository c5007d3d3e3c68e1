/*
 * A flattened device tree of the machine, built with libfdt: memory, CPUs,
 * the IOAPIC, the serial port, and the PCI host bridge (ranges, bus range,
 * interrupt-map for INTx) with each device's BARs, MSI-X vector count and
 * IOAPIC pin. Written with --dump-dtb; handed to the guest in a SETUP_DTB
 * setup_data entry only with --dtb (an x86 kernel with CONFIG_OF acts on
 * it). Bindings follow Documentation/devicetree/bindings/pci/pci.txt
 * (IEEE 1275 PCI bus binding) where one exists.
 */
#ifndef VMM_FDT_H
#define VMM_FDT_H

#include <stddef.h>

struct err;
struct guest_mem;
struct pci_bus;

struct fdt_machine {
	const struct guest_mem *mem;
	unsigned ncpus;
	const struct pci_bus *pci;
};

/* Builds the tree into a malloc()ed buffer. */
int fdt_build_machine(const struct fdt_machine *m, void **blob, size_t *len, struct err *e);

#endif
