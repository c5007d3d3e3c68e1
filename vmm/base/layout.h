/*
 * Guest-physical layout of the machine, in one place.
 *
 *   0x00000000  real-mode IVT, BDA (0x400)
 *   0x00000500  boot GDT
 *   0x00006000  PVH hvm_start_info, module list (+0x100), memory map (+0x200)
 *   0x00007000  zero page (struct boot_params)
 *   0x00009000  boot page tables (PML4, PDPT, 4 PDs: 0-4 GiB, 2 MiB pages)
 *   0x00020000  kernel command line (up to 64 KiB)
 *   0x00030000  setup_data chain (device tree, when --dtb)
 *   0x0009FC00  EBDA                          e820: reserved to 1 MiB
 *   0x000E0000  ACPI: RSDP, then DSDT, FADT, MADT, XSDT (--acpi on)
 *   0x000F0000  MP floating pointer + table (F segment)
 *   0x00100000  kernel (its pref_address or 1 MiB), then initrd near the top
 *   0xC0000000  MMIO hole: boot timer page (0xC0000000),
 *               PCI BAR window 0xD0000000-0xEFFFFFFF, IOAPIC, LAPIC,
 *               KVM's identity-map and TSS pages (0xFFFBC000-0xFFFBFFFF)
 *   0x100000000 RAM above 4 GiB, when --memory exceeds 3 GiB
 */
#ifndef VMM_LAYOUT_H
#define VMM_LAYOUT_H

#define LAYOUT_BDA_EBDA_SEG   0x40E /* BDA word: EBDA segment */
#define LAYOUT_BDA_BASE_KIB   0x413 /* BDA word: base memory in KiB */
#define LAYOUT_GDT	      0x500ULL
#define LAYOUT_BOOT_STACK     0x8FF0ULL
#define LAYOUT_PVH_INFO	      0x6000ULL
#define LAYOUT_PVH_MODLIST    0x6100ULL
#define LAYOUT_PVH_MEMMAP     0x6200ULL
#define LAYOUT_ZERO_PAGE      0x7000ULL
#define LAYOUT_PML4	      0x9000ULL
#define LAYOUT_PDPT	      0xA000ULL
#define LAYOUT_PD	      0xB000ULL /* 4 pages */
#define LAYOUT_CMDLINE	      0x20000ULL
#define LAYOUT_CMDLINE_MAX    0x10000ULL
#define LAYOUT_SETUP_DATA     0x30000ULL
#define LAYOUT_SETUP_DATA_MAX 0x60000ULL
#define LAYOUT_EBDA	      0x9FC00ULL
#define LAYOUT_BIOS_END	      0x100000ULL
#define LAYOUT_ACPI	      0xE0000ULL
#define LAYOUT_ACPI_MAX	      0x10000ULL
#define LAYOUT_MPTABLE	      0xF0000ULL
#define LAYOUT_MPTABLE_MAX    0x10000ULL
#define LAYOUT_KERNEL_MIN     0x100000ULL

#define LAYOUT_PCI_MMIO_START 0xD0000000ULL
#define LAYOUT_PCI_MMIO_END   0xF0000000ULL
#define LAYOUT_PCI_IO_START   0xC000ULL
#define LAYOUT_PCI_IO_END     0x10000ULL

#define LAYOUT_IOAPIC_BASE 0xFEC00000ULL
#define LAYOUT_IOAPIC_SIZE 0x1000ULL
#define LAYOUT_LAPIC_BASE  0xFEE00000ULL
#define LAYOUT_LAPIC_SIZE  0x1000ULL

/* KVM_SET_IDENTITY_MAP_ADDR (one page) and KVM_SET_TSS_ADDR (three), 3
 * pages below the BIOS area, in the hole. */
#define LAYOUT_KVM_IDENT_MAP	0xFFFBC000ULL
#define LAYOUT_KVM_TSS		0xFFFBD000ULL
#define LAYOUT_KVM_PRIVATE_SIZE 0x4000ULL

/* The PCI window and what the machine serves itself, where no guest BAR
 * may go: the initializer of a struct pci_window (devices/pci/pci.h). */
#define LAYOUT_PCI_WINDOW                                                                          \
	{                                                                                          \
		LAYOUT_PCI_MMIO_START, LAYOUT_PCI_MMIO_END, LAYOUT_PCI_IO_START,                   \
		    LAYOUT_PCI_IO_END,                                                             \
		{                                                                                  \
			{LAYOUT_IOAPIC_BASE, LAYOUT_IOAPIC_SIZE, "IOAPIC"},                        \
			    {LAYOUT_LAPIC_BASE, LAYOUT_LAPIC_SIZE, "LAPIC"},                       \
			    {LAYOUT_KVM_IDENT_MAP, LAYOUT_KVM_PRIVATE_SIZE,                        \
			     "KVM TSS and identity map"},                                          \
		}                                                                                  \
	}

#endif
