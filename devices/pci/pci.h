/*
 * PCI bus 0: the host bridge at 00:00.0, configuration mechanism #1
 * (ports 0xCF8/0xCFC; PCI Local Bus 3.0, 3.2.2.3.2), type-0 configuration
 * space with per-byte write masks (read-only, read-write, write-1-to-clear),
 * the capability list, BARs (32/64-bit memory, I/O) and INTx wiring.
 *
 * The VMM acts as firmware: pci_bus_assign_resources() gives every BAR an
 * address in the PCI hole and turns decoding on. After that the guest owns
 * the BARs: writes are always latched, sizing with all-ones works, and a
 * BAR is on the bus only while its decoding is on and its value is not the
 * sizing pattern. A guest move re-maps it; overlap with RAM, another range
 * or a range the machine reserves (the LAPIC, the IOAPIC) is refused,
 * logged, and leaves that BAR unmapped.
 */
#ifndef DEVICES_PCI_H
#define DEVICES_PCI_H

#include "vmm/base/lock.h"

#include "vmm/base/bus.h"

#include <linux/pci_regs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct guest_mem;
struct irq_router;
struct irq_intx_source;
struct log;

#define PCI_SLOTS      32
#define PCI_CFG_SIZE   256
#define PCI_NUM_BARS   6
#define PCI_CONF1_ADDR 0xCF8
#define PCI_CONF1_DATA 0xCFC

/* Register offsets and bits (type-0 header, command, status, capability
 * IDs, MSI-X) come from the kernel's <linux/pci_regs.h>. */

enum pci_bar_type { PCI_BAR_NONE, PCI_BAR_MEM32, PCI_BAR_MEM64, PCI_BAR_IO };

struct pci_bar {
	enum pci_bar_type type;
	bool prefetch;
	uint64_t size; /* power of two; mem >= 16, io >= 4 */
	bus_read_fn read;
	bus_write_fn write;
	void *opaque;
	bool mapped;
	uint64_t mapped_at;
};

struct pci_device;

struct pci_device_ops {
	/* After a guest write landed in config space [off, off+len). */
	void (*config_written)(struct pci_device *d, unsigned off, unsigned len);
	/* A BAR was mapped (at `addr`) or unmapped: ioeventfds follow it. */
	void (*bar_mapped)(struct pci_device *d, int bar, uint64_t addr, bool mapped);
	/* Before a guest read of [off, off+len): refresh computed fields. */
	void (*config_read)(struct pci_device *d, unsigned off, unsigned len);
	/* INTx resample (guest EOI): re-evaluate the interrupt condition. */
	void (*intx_resample)(struct pci_device *d);
};

struct pci_device {
	struct pci_bus *bus;
	char name[32];
	uint8_t slot;
	uint8_t cfg[PCI_CFG_SIZE];
	uint8_t wmask[PCI_CFG_SIZE];
	uint8_t w1cmask[PCI_CFG_SIZE];
	struct pci_bar bars[PCI_NUM_BARS];
	uint8_t cap_last, cap_free; /* capability list tail, next free byte */
	const struct pci_device_ops *ops;
	void *opaque;
	struct irq_intx_source *intx;
	bool intx_level;       /* the device's interrupt condition */
	unsigned msix_vectors; /* advertised MSI-X table size, 0 = none */
	unsigned bar_warnings; /* guest-triggered warnings so far (rate limit) */
	struct vmm_lock lock;  /* config space and BAR state */
};

/* Guest-physical memory the machine serves without the VMM's MMIO bus
 * (KVM's in-kernel LAPIC and IOAPIC, its TSS pages): a BAR there would be
 * partly shadowed, so a guest move onto one is refused like one onto RAM. */
#define PCI_MAX_RESERVED 4
struct pci_reserved {
	uint64_t base, size; /* size 0: unused */
	const char *name;
};

struct pci_bus {
	struct pci_device *slots[PCI_SLOTS];
	struct pci_device host_bridge;
	struct vmm_lock conf1_lock;
	uint32_t conf1_addr;
	struct bus *pio, *mmio;
	const struct guest_mem *mem;
	struct irq_router *irq;
	struct log *log;
	uint64_t mmio_next, mmio_end;
	uint64_t io_next, io_end;
	struct pci_reserved reserved[PCI_MAX_RESERVED];
};

/* Where firmware places BARs and where no BAR may go: the machine's policy
 * (vmm/base/layout.h), given to the bus so devices/ knows no machine layout.
 * Ends are exclusive. */
struct pci_window {
	uint64_t mmio_start, mmio_end;
	uint64_t io_start, io_end;
	struct pci_reserved reserved[PCI_MAX_RESERVED];
};

/* What the bus works with; all of it outlives the bus. */
struct pci_bus_env {
	struct bus *pio, *mmio;
	const struct guest_mem *mem;
	struct irq_router *irq;
	struct log *log;
	struct pci_window window;
};

/* Registers conf1 on env->pio and puts the host bridge at 00:00.0. */
int pci_bus_init(struct pci_bus *b, const struct pci_bus_env *env);
void pci_device_init(struct pci_device *d, const char *name, uint16_t vendor, uint16_t device,
		     uint32_t class_code, uint8_t revision);
void pci_device_set_subsystem(struct pci_device *d, uint16_t vendor, uint16_t id);
/* Declares BAR `idx` (a 64-bit BAR also takes idx+1). 0 or -EINVAL. */
int pci_device_add_bar(struct pci_device *d, int idx, enum pci_bar_type type, uint64_t size,
		       bool prefetch, bus_read_fn read, bus_write_fn write, void *opaque);
/* Appends a capability of `len` bytes (ID and next pointer included) to
 * the list; returns its config offset, or 0 when space is exhausted. */
uint8_t pci_device_add_capability(struct pci_device *d, uint8_t cap_id, uint8_t len);
/* Puts the device in `slot`; intx_pin 1..4 = INTA#..INTD#, 0 = none. */
int pci_bus_add_device(struct pci_bus *b, struct pci_device *d, uint8_t slot, uint8_t intx_pin);
/* IOAPIC pin of (slot, INTx#): 16 + (slot + intx - 1) mod 8. */
static inline uint8_t pci_intx_ioapic_pin(uint8_t slot, uint8_t intx_pin)
{
	return (uint8_t)(16 + (slot + intx_pin - 1) % 8);
}
/* Firmware: assigns addresses to every BAR and turns decoding on. */
int pci_bus_assign_resources(struct pci_bus *b);

/* Configuration access by (devfn, offset); all-ones where nothing is. */
uint32_t pci_config_read(struct pci_bus *b, uint8_t bus, uint8_t devfn, unsigned off, unsigned len);
void pci_config_write(struct pci_bus *b, uint8_t bus, uint8_t devfn, unsigned off, unsigned len,
		      uint32_t val);

/* The device's INTx condition: Interrupt Status follows it; the pin is
 * asserted only while Interrupt Disable is clear (PCI 3.0, 6.2.2/6.2.3). */
void pci_device_set_intx(struct pci_device *d, bool level);

/* Little-endian config-space field helpers (device set-up). */
void pci_cfg_set8(struct pci_device *d, unsigned off, uint8_t v);
void pci_cfg_set16(struct pci_device *d, unsigned off, uint16_t v);
void pci_cfg_set32(struct pci_device *d, unsigned off, uint32_t v);
uint16_t pci_cfg_get16(const struct pci_device *d, unsigned off);
uint32_t pci_cfg_get32(const struct pci_device *d, unsigned off);

#endif
