#include "devices/pci/pci.h"

#include "irq/irq.h"
#include "vmm/base/align.h"
#include "vmm/base/guest_mem.h"
#include "vmm/base/log.h"

#include <errno.h>
#include <string.h>

#define PCI_CAP_FIRST 0x40 /* capabilities live after the type-0 header */
/* The address bits of a BAR's low dword (<linux/pci_regs.h>'s masks). */
#define BAR_IO_MASK  ((uint32_t)PCI_BASE_ADDRESS_IO_MASK)
#define BAR_MEM_MASK ((uint32_t)PCI_BASE_ADDRESS_MEM_MASK)

void pci_cfg_set8(struct pci_device *d, unsigned off, uint8_t v)
{
	d->cfg[off] = v;
}

void pci_cfg_set16(struct pci_device *d, unsigned off, uint16_t v)
{
	d->cfg[off] = (uint8_t)v;
	d->cfg[off + 1] = (uint8_t)(v >> 8);
}

void pci_cfg_set32(struct pci_device *d, unsigned off, uint32_t v)
{
	pci_cfg_set16(d, off, (uint16_t)v);
	pci_cfg_set16(d, off + 2, (uint16_t)(v >> 16));
}

uint16_t pci_cfg_get16(const struct pci_device *d, unsigned off)
{
	return (uint16_t)(d->cfg[off] | d->cfg[off + 1] << 8);
}

uint32_t pci_cfg_get32(const struct pci_device *d, unsigned off)
{
	return pci_cfg_get16(d, off) | (uint32_t)pci_cfg_get16(d, off + 2) << 16;
}

void pci_device_init(struct pci_device *d, const char *name, uint16_t vendor, uint16_t device,
		     uint32_t class_code, uint8_t revision)
{
	memset(d, 0, sizeof(*d));
	lock_init(&d->lock, "PCI device", LOCK_RANK_PCI_DEVICE);
	snprintf(d->name, sizeof(d->name), "%s", name);
	pci_cfg_set16(d, PCI_VENDOR_ID, vendor);
	pci_cfg_set16(d, PCI_DEVICE_ID, device);
	pci_cfg_set8(d, PCI_REVISION_ID, revision);
	pci_cfg_set8(d, PCI_CLASS_PROG, (uint8_t)class_code);
	pci_cfg_set16(d, PCI_CLASS_PROG + 1, (uint16_t)(class_code >> 8));
	/* Writable: command I/O, memory, bus master, parity, SERR, INTx
	 * disable (PCI 3.0 6.2.2); cache line size, latency timer; line. */
	pci_cfg_set16(d, PCI_COMMAND, 0);
	d->wmask[PCI_COMMAND] =
	    PCI_COMMAND_IO | PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER | PCI_COMMAND_PARITY;
	d->wmask[PCI_COMMAND + 1] = (PCI_COMMAND_SERR | PCI_COMMAND_INTX_DISABLE) >> 8;
	/* Status: error bits 15:11 and 8 are write-1-to-clear (6.2.3). */
	d->w1cmask[PCI_STATUS + 1] = 0xF9;
	d->wmask[PCI_CACHE_LINE_SIZE] = 0xFF;
	d->wmask[PCI_LATENCY_TIMER] = 0xFF;
	d->wmask[PCI_INTERRUPT_LINE] = 0xFF;
	d->cap_free = PCI_CAP_FIRST;
}

void pci_device_set_subsystem(struct pci_device *d, uint16_t vendor, uint16_t id)
{
	pci_cfg_set16(d, PCI_SUBSYSTEM_VENDOR_ID, vendor);
	pci_cfg_set16(d, PCI_SUBSYSTEM_ID, id);
}

static uint32_t bar_type_bits(const struct pci_bar *bar)
{
	switch (bar->type) {
	case PCI_BAR_IO: return PCI_BASE_ADDRESS_SPACE_IO;
	case PCI_BAR_MEM64:
		return PCI_BASE_ADDRESS_MEM_TYPE_64 |
		       (bar->prefetch ? PCI_BASE_ADDRESS_MEM_PREFETCH : 0);
	case PCI_BAR_MEM32: return bar->prefetch ? PCI_BASE_ADDRESS_MEM_PREFETCH : 0;
	default: return 0;
	}
}

int pci_device_add_bar(struct pci_device *d, int idx, enum pci_bar_type type, uint64_t size,
		       bool prefetch, bus_read_fn read, bus_write_fn write, void *opaque)
{
	uint64_t min = type == PCI_BAR_IO ? 4 : 16;
	if (idx < 0 || idx >= PCI_NUM_BARS || (type == PCI_BAR_MEM64 && idx == PCI_NUM_BARS - 1) ||
	    size < min || (size & (size - 1)) || (type == PCI_BAR_IO && size > 256) ||
	    (type == PCI_BAR_MEM32 && size > (1ULL << 31)) || d->bars[idx].type != PCI_BAR_NONE ||
	    (idx > 0 && d->bars[idx - 1].type == PCI_BAR_MEM64) ||
	    (type == PCI_BAR_MEM64 && d->bars[idx + 1].type != PCI_BAR_NONE))
		return -EINVAL;
	struct pci_bar *bar = &d->bars[idx];
	*bar = (struct pci_bar){type, prefetch, size, read, write, opaque, false, 0};
	pci_cfg_set32(d, PCI_BASE_ADDRESS_0 + 4 * idx, bar_type_bits(bar));
	return 0; /* a 64-bit BAR's upper register is handled with idx */
}

uint8_t pci_device_add_capability(struct pci_device *d, uint8_t cap_id, uint8_t len)
{
	unsigned off = (d->cap_free + 3u) & ~3u; /* dword aligned (6.7) */
	if (len < 2 || off + len > PCI_CFG_SIZE)
		return 0;
	d->cfg[off] = cap_id;
	d->cfg[off + 1] = 0;
	if (d->cap_last)
		d->cfg[d->cap_last + 1] = (uint8_t)off;
	else
		d->cfg[PCI_CAPABILITY_LIST] = (uint8_t)off;
	d->cfg[PCI_STATUS] |= PCI_STATUS_CAP_LIST;
	d->cap_last = (uint8_t)off;
	d->cap_free = (uint8_t)(off + len);
	return (uint8_t)off;
}

/* --- BAR decoding ---------------------------------------------------- */

static uint64_t bar_address(const struct pci_device *d, int idx)
{
	const struct pci_bar *bar = &d->bars[idx];
	uint64_t v = pci_cfg_get32(d, PCI_BASE_ADDRESS_0 + 4 * idx);
	if (bar->type == PCI_BAR_IO)
		return v & BAR_IO_MASK;
	v &= BAR_MEM_MASK;
	if (bar->type == PCI_BAR_MEM64)
		v |= (uint64_t)pci_cfg_get32(d, PCI_BASE_ADDRESS_0 + 4 * (idx + 1)) << 32;
	return v;
}

/* The value a BAR reads back after all-ones was written to it. */
static bool bar_is_sizing_pattern(const struct pci_device *d, int idx)
{
	const struct pci_bar *bar = &d->bars[idx];
	uint32_t lo = pci_cfg_get32(d, PCI_BASE_ADDRESS_0 + 4 * idx);
	uint32_t mask =
	    (uint32_t) ~(bar->size - 1) & (bar->type == PCI_BAR_IO ? BAR_IO_MASK : BAR_MEM_MASK);
	if (bar->type == PCI_BAR_MEM64 && bar->size > (1ULL << 32))
		mask = BAR_MEM_MASK;
	return (lo & mask) == mask;
}

static bool range_hits_ram(const struct guest_mem *m, uint64_t base, uint64_t size)
{
	for (int i = 0; m && i < m->nregions; i++) {
		const struct guest_region *r = &m->regions[i];
		if (base < r->gpa + r->size && r->gpa < base + size)
			return true;
	}
	return false;
}

static const struct pci_reserved *range_hits_reserved(const struct pci_bus *b, uint64_t base,
						      uint64_t size)
{
	for (int i = 0; i < PCI_MAX_RESERVED; i++) {
		const struct pci_reserved *r = &b->reserved[i];
		if (r->size && base < r->base + r->size && r->base < base + size)
			return r;
	}
	return NULL;
}

static void bar_unmap(struct pci_device *d, int idx)
{
	struct pci_bar *bar = &d->bars[idx];
	if (!bar->mapped)
		return;
	struct bus *b = bar->type == PCI_BAR_IO ? d->bus->pio : d->bus->mmio;
	bus_unregister(b, bar->mapped_at, bar->opaque);
	bar->mapped = false;
	if (d->ops && d->ops->bar_mapped)
		d->ops->bar_mapped(d, idx, bar->mapped_at, false);
}

/* Re-evaluates where BAR idx should decode; device lock held. */
static void bar_update(struct pci_device *d, int idx)
{
	struct pci_bar *bar = &d->bars[idx];
	uint16_t cmd = pci_cfg_get16(d, PCI_COMMAND);
	uint64_t addr = bar_address(d, idx);
	bool io = bar->type == PCI_BAR_IO;
	bool want = (io ? (cmd & PCI_COMMAND_IO) : (cmd & PCI_COMMAND_MEMORY)) && addr != 0 &&
		    !bar_is_sizing_pattern(d, idx);
	if (want && (addr + bar->size < addr || (io && addr + bar->size > 0x10000) ||
		     (!io && addr + bar->size > (1ULL << 52))))
		want = false;
	if (bar->mapped && want && bar->mapped_at == addr)
		return;
	bar_unmap(d, idx);
	if (!want)
		return;
	if (!io && range_hits_ram(d->bus->mem, addr, bar->size)) {
		log_guest_warn(d->bus->log, &d->bar_warnings,
			       "%s: BAR%d at 0x%llx overlaps guest RAM; left unmapped", d->name,
			       idx, (unsigned long long)addr);
		return;
	}
	const struct pci_reserved *r = io ? NULL : range_hits_reserved(d->bus, addr, bar->size);
	if (r) {
		log_guest_warn(d->bus->log, &d->bar_warnings,
			       "%s: BAR%d at 0x%llx (size 0x%llx) overlaps the %s at 0x%llx; left "
			       "unmapped",
			       d->name, idx, (unsigned long long)addr,
			       (unsigned long long)bar->size, r->name, (unsigned long long)r->base);
		return;
	}
	struct bus *b = io ? d->bus->pio : d->bus->mmio;
	int ret = bus_register(b, addr, bar->size, bar->read, bar->write, bar->opaque);
	if (ret) {
		log_guest_warn(
		    d->bus->log, &d->bar_warnings,
		    "%s: BAR%d at %s 0x%llx (size 0x%llx) overlaps another range; left unmapped",
		    d->name, idx, b->name, (unsigned long long)addr, (unsigned long long)bar->size);
		return;
	}
	bar->mapped = true;
	bar->mapped_at = addr;
	if (d->ops && d->ops->bar_mapped)
		d->ops->bar_mapped(d, idx, addr, true);
}

static void pci_device_update_bars(struct pci_device *d)
{
	for (int i = 0; i < PCI_NUM_BARS; i++)
		if (d->bars[i].type != PCI_BAR_NONE)
			bar_update(d, i);
}

/* Which BAR register byte `off` belongs to, and whether it is a 64-bit
 * BAR's upper half (then *idx is the lower BAR). -1 if not a BAR. */
static int bar_of_offset(const struct pci_device *d, unsigned off, int *idx, bool *upper)
{
	if (off < PCI_BASE_ADDRESS_0 || off >= PCI_BASE_ADDRESS_0 + 4 * PCI_NUM_BARS)
		return -1;
	int i = (int)(off - PCI_BASE_ADDRESS_0) / 4;
	if (d->bars[i].type != PCI_BAR_NONE) {
		*idx = i;
		*upper = false;
		return 0;
	}
	if (i > 0 && d->bars[i - 1].type == PCI_BAR_MEM64) {
		*idx = i - 1;
		*upper = true;
		return 0;
	}
	return -1;
}

/* A BAR register write: latch, keeping the size's zero bits and the type. */
static void bar_write_dword(struct pci_device *d, int idx, bool upper, uint32_t v)
{
	struct pci_bar *bar = &d->bars[idx];
	if (upper) {
		uint32_t mask = (uint32_t)(~(bar->size - 1) >> 32);
		pci_cfg_set32(d, PCI_BASE_ADDRESS_0 + 4 * (idx + 1), v & mask);
		return;
	}
	uint32_t mask =
	    (uint32_t) ~(bar->size - 1) & (bar->type == PCI_BAR_IO ? BAR_IO_MASK : BAR_MEM_MASK);
	pci_cfg_set32(d, PCI_BASE_ADDRESS_0 + 4 * idx, (v & mask) | bar_type_bits(bar));
}

/* --- configuration access --------------------------------------------- */

static void pci_device_intx_update(struct pci_device *d)
{
	bool disabled = pci_cfg_get16(d, PCI_COMMAND) & PCI_COMMAND_INTX_DISABLE;
	if (d->intx_level)
		d->cfg[PCI_STATUS] |= PCI_STATUS_INTERRUPT;
	else
		d->cfg[PCI_STATUS] &= ~PCI_STATUS_INTERRUPT;
	if (d->intx)
		irq_intx_set(d->intx, d->intx_level && !disabled);
}

void pci_device_set_intx(struct pci_device *d, bool level)
{
	lock_take(&d->lock);
	d->intx_level = level;
	pci_device_intx_update(d);
	lock_release(&d->lock);
}

static uint32_t pci_device_config_read(struct pci_device *d, unsigned off, unsigned len)
{
	uint32_t v = 0;
	lock_take(&d->lock);
	for (unsigned i = 0; i < len; i++)
		v |= (uint32_t)d->cfg[off + i] << (8 * i);
	lock_release(&d->lock);
	return v;
}

static void pci_device_config_write(struct pci_device *d, unsigned off, unsigned len, uint32_t val)
{
	int bar_idx = -1;
	bool upper = false;
	lock_take(&d->lock);
	uint16_t old_cmd = pci_cfg_get16(d, PCI_COMMAND);
	if (bar_of_offset(d, off, &bar_idx, &upper) == 0) {
		/* A BAR register: merge the written bytes into its dword. */
		unsigned reg = off & ~3u, shift = 8 * (off - reg);
		uint32_t cur = pci_cfg_get32(d, reg);
		uint32_t bytes_mask = (len == 4 ? 0xFFFFFFFFu : ((1u << (8 * len)) - 1)) << shift;
		bar_write_dword(d, bar_idx, upper,
				(cur & ~bytes_mask) | ((val << shift) & bytes_mask));
		pci_device_update_bars(d);
	} else {
		for (unsigned i = 0; i < len; i++) {
			uint8_t b = (uint8_t)(val >> (8 * i)), o = (uint8_t)(off + i);
			d->cfg[o] = (uint8_t)((d->cfg[o] & ~d->wmask[o]) | (b & d->wmask[o]));
			d->cfg[o] &= (uint8_t) ~(b & d->w1cmask[o]);
		}
		uint16_t cmd = pci_cfg_get16(d, PCI_COMMAND);
		if ((cmd ^ old_cmd) & (PCI_COMMAND_IO | PCI_COMMAND_MEMORY))
			pci_device_update_bars(d);
		if ((cmd ^ old_cmd) & PCI_COMMAND_INTX_DISABLE)
			pci_device_intx_update(d);
	}
	lock_release(&d->lock);
	if (d->ops && d->ops->config_written)
		d->ops->config_written(d, off, len);
}

static struct pci_device *pci_lookup(struct pci_bus *b, uint8_t bus, uint8_t devfn)
{
	/* Bus 0 only; single-function devices (function 0). */
	if (bus != 0 || (devfn & 7))
		return NULL;
	return b->slots[devfn >> 3];
}

uint32_t pci_config_read(struct pci_bus *b, uint8_t bus, uint8_t devfn, unsigned off, unsigned len)
{
	struct pci_device *d = pci_lookup(b, bus, devfn);
	/* Naturally aligned 1/2/4-byte accesses within the 256-byte space. */
	if (!d || off >= PCI_CFG_SIZE || (len != 1 && len != 2 && len != 4) || (off & (len - 1)))
		return len >= 4 ? 0xFFFFFFFFu : (1u << (8 * len)) - 1;
	if (d->ops && d->ops->config_read)
		d->ops->config_read(d, off, len);
	return pci_device_config_read(d, off, len);
}

void pci_config_write(struct pci_bus *b, uint8_t bus, uint8_t devfn, unsigned off, unsigned len,
		      uint32_t val)
{
	struct pci_device *d = pci_lookup(b, bus, devfn);
	if (!d || off >= PCI_CFG_SIZE || (len != 1 && len != 2 && len != 4) || (off & (len - 1)))
		return;
	pci_device_config_write(d, off, len, val);
}

/* conf1 (PCI 3.0 3.2.2.3.2): CONFIG_ADDRESS at 0xCF8 (dword accesses
 * only), CONFIG_DATA at 0xCFC-0xCFF for the addressed dword. */
static void conf1_addr_read(void *opaque, uint64_t offset, void *data, unsigned len)
{
	struct pci_bus *b = opaque;
	lock_take(&b->conf1_lock);
	uint64_t v = b->conf1_addr;
	lock_release(&b->conf1_lock);
	v >>= 8 * offset;
	memcpy(data, &v, len);
}

static void conf1_addr_write(void *opaque, uint64_t offset, const void *data, unsigned len)
{
	struct pci_bus *b = opaque;
	if (offset != 0 || len != 4)
		return; /* byte writes to 0xCF8-0xCFB are not CONFIG_ADDRESS */
	lock_take(&b->conf1_lock);
	memcpy(&b->conf1_addr, data, 4);
	b->conf1_addr &= 0x80FFFFFCu; /* reserved bits 30:24 and 1:0 read 0 */
	lock_release(&b->conf1_lock);
}

static bool conf1_target(struct pci_bus *b, uint64_t offset, unsigned len, uint8_t *bus,
			 uint8_t *devfn, unsigned *reg)
{
	lock_take(&b->conf1_lock);
	uint32_t a = b->conf1_addr;
	lock_release(&b->conf1_lock);
	if (!(a & 0x80000000u) || offset + len > 4)
		return false;
	*bus = (uint8_t)(a >> 16);
	*devfn = (uint8_t)(a >> 8);
	*reg = (a & 0xFC) + (unsigned)offset;
	return true;
}

static void conf1_data_read(void *opaque, uint64_t offset, void *data, unsigned len)
{
	struct pci_bus *b = opaque;
	uint8_t bus, devfn;
	unsigned reg;
	uint32_t v = 0xFFFFFFFFu;
	if (conf1_target(b, offset, len, &bus, &devfn, &reg))
		v = pci_config_read(b, bus, devfn, reg, len);
	memcpy(data, &v, len);
}

static void conf1_data_write(void *opaque, uint64_t offset, const void *data, unsigned len)
{
	struct pci_bus *b = opaque;
	uint8_t bus, devfn;
	unsigned reg;
	uint32_t v = 0;
	memcpy(&v, data, len);
	if (conf1_target(b, offset, len, &bus, &devfn, &reg))
		pci_config_write(b, bus, devfn, reg, len, v);
}

int pci_bus_init(struct pci_bus *b, const struct pci_bus_env *env)
{
	memset(b, 0, sizeof(*b));
	lock_init(&b->conf1_lock, "PCI conf1 latch", LOCK_RANK_PCI_CONF1);
	b->pio = env->pio;
	b->mmio = env->mmio;
	b->mem = env->mem;
	b->irq = env->irq;
	b->log = env->log;
	b->mmio_next = env->window.mmio_start;
	b->mmio_end = env->window.mmio_end;
	b->io_next = env->window.io_start;
	b->io_end = env->window.io_end;
	memcpy(b->reserved, env->window.reserved, sizeof(b->reserved));
	/* Host bridge: Linux's conf1 sanity check looks for class 0x0600. */
	pci_device_init(&b->host_bridge, "host-bridge", 0x8086, 0x29C0, 0x060000, 0);
	int ret = pci_bus_add_device(b, &b->host_bridge, 0, 0);
	if (!ret)
		ret = bus_register(b->pio, PCI_CONF1_ADDR, 4, conf1_addr_read, conf1_addr_write, b);
	if (!ret)
		ret = bus_register(b->pio, PCI_CONF1_DATA, 4, conf1_data_read, conf1_data_write, b);
	return ret;
}

static void pci_device_intx_resample(void *ctx)
{
	struct pci_device *d = ctx;
	if (d->ops && d->ops->intx_resample)
		d->ops->intx_resample(d);
}

int pci_bus_add_device(struct pci_bus *b, struct pci_device *d, uint8_t slot, uint8_t intx_pin)
{
	if (slot >= PCI_SLOTS || b->slots[slot] || intx_pin > 4)
		return -EINVAL;
	d->bus = b;
	d->slot = slot;
	if (intx_pin) {
		uint8_t pin = pci_intx_ioapic_pin(slot, intx_pin);
		d->intx = irq_intx_attach(b->irq, pin, d->name, pci_device_intx_resample, d);
		if (!d->intx)
			return -ENOSPC;
		pci_cfg_set8(d, PCI_INTERRUPT_PIN, intx_pin);
		/* What firmware would write: the IOAPIC pin (as on ACPI-less PCs). */
		pci_cfg_set8(d, PCI_INTERRUPT_LINE, pin);
	}
	b->slots[slot] = d;
	return 0;
}

int pci_bus_assign_resources(struct pci_bus *b)
{
	/* Largest BARs first, each aligned to its size, so none is wasted on
	 * alignment more than needed. */
	for (int pass = 0; pass < 2; pass++) {
		/* Every power of two a BAR may have (a 64-bit one may exceed 4 GiB). */
		for (uint64_t size = 1ULL << 62; size >= 4; size >>= 1) {
			for (unsigned s = 0; s < PCI_SLOTS; s++) {
				struct pci_device *d = b->slots[s];
				for (int i = 0; d && i < PCI_NUM_BARS; i++) {
					struct pci_bar *bar = &d->bars[i];
					bool io = bar->type == PCI_BAR_IO;
					if (bar->type == PCI_BAR_NONE || bar->size != size ||
					    io != (pass == 1))
						continue;
					uint64_t *next = io ? &b->io_next : &b->mmio_next;
					uint64_t end = io ? b->io_end : b->mmio_end;
					uint64_t addr = align_up(*next, size);
					if (addr + size > end) {
						log_error(b->log,
							  "%s: no room for BAR%d (%llu bytes) in "
							  "the PCI window",
							  d->name, i, (unsigned long long)size);
						return -ENOSPC;
					}
					*next = addr + size;
					lock_take(&d->lock);
					bar_write_dword(d, i, false, (uint32_t)addr);
					if (bar->type == PCI_BAR_MEM64)
						bar_write_dword(d, i, true, (uint32_t)(addr >> 32));
					lock_release(&d->lock);
				}
			}
		}
	}
	for (unsigned s = 0; s < PCI_SLOTS; s++) {
		struct pci_device *d = b->slots[s];
		if (!d)
			continue;
		bool has_io = false, has_mem = false;
		for (int i = 0; i < PCI_NUM_BARS; i++) {
			has_io |= d->bars[i].type == PCI_BAR_IO;
			has_mem |=
			    d->bars[i].type == PCI_BAR_MEM32 || d->bars[i].type == PCI_BAR_MEM64;
		}
		lock_take(&d->lock);
		uint16_t cmd = pci_cfg_get16(d, PCI_COMMAND) | (has_io ? PCI_COMMAND_IO : 0) |
			       (has_mem ? PCI_COMMAND_MEMORY : 0);
		pci_cfg_set16(d, PCI_COMMAND, cmd);
		pci_device_update_bars(d);
		lock_release(&d->lock);
	}
	return 0;
}
