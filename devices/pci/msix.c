#include "devices/pci/msix.h"

#include "devices/pci/pci.h"

#include "irq/irq.h"
#include "vmm/base/align.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Entry layout (6.8.2.6-6.8.2.9), as dword indices: address low, address
 * high, data, vector control (bit 0 = mask; the rest reserved). */
enum {
	ENTRY_ADDR_LO = PCI_MSIX_ENTRY_LOWER_ADDR / 4,
	ENTRY_ADDR_HI = PCI_MSIX_ENTRY_UPPER_ADDR / 4,
	ENTRY_DATA = PCI_MSIX_ENTRY_DATA / 4,
	ENTRY_CTRL = PCI_MSIX_ENTRY_VECTOR_CTRL / 4,
};

/* 6.8.2.4: the PBA holds one bit per vector in whole QWORDs. */
static uint64_t msix_pba_bytes(unsigned nvectors)
{
	return (((uint64_t)nvectors + 63) / 64) * 8;
}

uint64_t msix_bar_bytes(unsigned nvectors)
{
	return msix_pba_offset(nvectors) + align_up(msix_pba_bytes(nvectors), 4096);
}

static void msix_bar_read(void *opaque, uint64_t off, void *data, unsigned len);
static void msix_bar_write(void *opaque, uint64_t off, const void *data, unsigned len);

/* The table (every entry masked at reset, 6.8.2.9) and a router vector for
 * each entry. */
static int msix_alloc_vectors(struct msix *m)
{
	m->table = calloc((size_t)m->nvectors * 4, sizeof(uint32_t));
	m->vectors = calloc(m->nvectors, sizeof(*m->vectors));
	if (!m->table || !m->vectors)
		return -ENOMEM;
	for (unsigned i = 0; i < m->nvectors; i++) {
		m->table[i * 4 + ENTRY_CTRL] = PCI_MSIX_ENTRY_CTRL_MASKBIT;
		m->vectors[i] = irq_msi_vector_new(m->irq, m->dev->name, i);
		if (!m->vectors[i])
			return -ENOMEM;
	}
	return 0;
}

/* 6.8.2.3-6.8.2.5: Message Control (table size N-1 read-only; enable and
 * function mask read-write), the table and the PBA at their BIR/offset. */
static int msix_add_capability(struct msix *m)
{
	struct pci_device *d = m->dev;
	m->cap = pci_device_add_capability(d, PCI_CAP_ID_MSIX, PCI_CAP_MSIX_SIZEOF);
	if (!m->cap)
		return -ENOSPC;
	pci_cfg_set16(d, m->cap + PCI_MSIX_FLAGS, (uint16_t)(m->nvectors - 1));
	d->wmask[m->cap + PCI_MSIX_FLAGS + 1] =
	    (PCI_MSIX_FLAGS_ENABLE | PCI_MSIX_FLAGS_MASKALL) >> 8;
	pci_cfg_set32(d, m->cap + PCI_MSIX_TABLE, m->table_offset | m->bar);
	pci_cfg_set32(d, m->cap + PCI_MSIX_PBA, m->pba_offset | m->bar);
	d->msix_vectors = m->nvectors;
	return 0;
}

int msix_init(struct msix *m, struct pci_device *d, struct irq_router *irq, enum irq_mode mode,
	      unsigned nvectors, uint8_t bar)
{
	memset(m, 0, sizeof(*m));
	if (nvectors < 1 || nvectors > MSIX_MAX_VECTORS || bar >= PCI_NUM_BARS)
		return -EINVAL;
	lock_init(&m->lock, "MSI-X table", LOCK_RANK_MSIX);
	m->dev = d;
	m->irq = irq;
	m->bar = bar;
	if (mode == IRQ_MODE_INTX)
		return 0; /* INTx only: no table, no BAR, no vectors, no capability */
	m->nvectors = nvectors;
	m->pba_offset = msix_pba_offset(nvectors);
	uint64_t size = pow2_at_least(msix_bar_bytes(nvectors), 4096);
	int ret = pci_device_add_bar(d, bar, PCI_BAR_MEM32, size, false, msix_bar_read,
				     msix_bar_write, m);
	if (!ret)
		ret = msix_alloc_vectors(m);
	return ret ? ret : msix_add_capability(m);
}

void msix_destroy(struct msix *m)
{
	free(m->table);
	free(m->vectors); /* the vectors belong to the router */
	m->table = NULL;
	m->vectors = NULL;
}

/* Pushes entry n's effective state to the door, inside a route batch
 * (irq_routes_begin/commit); table lock held. */
static void msix_sync_vector_locked(struct msix *m, unsigned n)
{
	lock_assert_held(&m->lock);
	const uint32_t *e = &m->table[n * 4];
	bool masked =
	    !m->enabled || m->function_masked || (e[ENTRY_CTRL] & PCI_MSIX_ENTRY_CTRL_MASKBIT);
	uint64_t addr = e[ENTRY_ADDR_LO] | (uint64_t)e[ENTRY_ADDR_HI] << 32;
	irq_msi_route_update_locked(m->vectors[n], addr, e[ENTRY_DATA], masked);
}

void msix_config_written(struct msix *m, unsigned off, unsigned len)
{
	if (!m->cap || off + len <= m->cap + PCI_MSIX_FLAGS + 0u ||
	    off >= m->cap + PCI_MSIX_TABLE + 0u)
		return; /* Message Control not touched */
	lock_take(&m->lock);
	/* Message Control as the write left it, read under the device's
	 * config lock (MSI-X table < PCI device in the lock order). */
	lock_take(&m->dev->lock);
	uint16_t ctrl = pci_cfg_get16(m->dev, m->cap + PCI_MSIX_FLAGS);
	bool intx = m->dev->intx_level;
	lock_release(&m->dev->lock);
	bool enabled = ctrl & PCI_MSIX_FLAGS_ENABLE, fmask = ctrl & PCI_MSIX_FLAGS_MASKALL;
	bool change = enabled != m->enabled || fmask != m->function_masked;
	if (change) {
		m->enabled = enabled;
		m->function_masked = fmask;
		/* Every vector may change: one routing table for all of them. */
		irq_routes_begin(m->irq);
		for (unsigned i = 0; i < m->nvectors; i++)
			msix_sync_vector_locked(m, i);
		irq_routes_commit(m->irq);
	}
	lock_release(&m->lock);
	/* While MSI-X is enabled the function may not use INTx (6.8.2). */
	if (enabled && intx)
		pci_device_set_intx(m->dev, false);
	if (change && m->changed)
		m->changed(m->changed_opaque, MSIX_ALL_VECTORS);
}

void msix_listen(struct msix *m, void (*changed)(void *opaque, unsigned n), void *opaque)
{
	m->changed = changed;
	m->changed_opaque = opaque;
}

int msix_bind_fd(struct msix *m, unsigned n, int fd)
{
	lock_take(&m->lock);
	bool enabled = m->enabled;
	lock_release(&m->lock);
	/* The door's mask covers enable and the function mask as well; the
	 * early answer only spares it a lock. */
	return enabled && n < m->nvectors ? irq_msi_bind_fd(m->vectors[n], fd) : -EAGAIN;
}

bool msix_fd_bindable(struct msix *m, unsigned n)
{
	return n < m->nvectors && irq_msi_fd_bindable(m->vectors[n]);
}

int msix_unbind_fd(struct msix *m, unsigned n, int fd)
{
	return n < m->nvectors ? irq_msi_unbind_fd(m->vectors[n], fd) : -EINVAL;
}

/* MSI-X on: vector n, or nothing beyond the table. */
static enum msix_sent msix_fire(struct msix *m, unsigned n)
{
	if (n >= m->nvectors)
		return MSIX_SENT_NONE;
	irq_msi_fire(m->vectors[n]);
	return MSIX_SENT_VECTOR;
}

enum msix_sent msix_raise(struct msix *m, unsigned n, struct vmm_lock *lock,
			  void (*latch)(void *arg), void *arg)
{
	lock_take(&m->lock);
	bool enabled = m->enabled;
	lock_release(&m->lock);
	if (enabled)
		return msix_fire(m, n);
	if (lock)
		lock_take(lock);
	if (latch)
		latch(arg);
	pci_device_set_intx(m->dev, true);
	if (lock)
		lock_release(lock);
	return MSIX_SENT_INTX;
}

static bool in_region(uint64_t off, unsigned len, uint64_t start, uint64_t size)
{
	return off >= start && off - start < size && len <= size - (off - start);
}

/* 6.8.2: table and PBA take aligned DWORD or QWORD accesses only. */
static bool msix_access_ok(uint64_t off, unsigned len)
{
	return (len == 4 || len == 8) && (off & (len - 1)) == 0;
}

/* True when [off, off+len) is in the table or PBA: then it was read, or
 * read as all-ones as the spec allows. */
static bool msix_table_read(struct msix *m, uint64_t off, void *data, unsigned len)
{
	uint64_t table_size = (uint64_t)m->nvectors * PCI_MSIX_ENTRY_SIZE;
	uint64_t pba_size = msix_pba_bytes(m->nvectors);
	if (in_region(off, len, m->table_offset, table_size)) {
		memset(data, 0xFF, len);
		if (!msix_access_ok(off, len))
			return true;
		unsigned dw = (unsigned)((off - m->table_offset) / 4);
		lock_take(&m->lock);
		memcpy(data, &m->table[dw], len);
		lock_release(&m->lock);
		return true;
	}
	if (in_region(off, len, m->pba_offset, pba_size)) {
		memset(data, 0xFF, len);
		if (!msix_access_ok(off, len))
			return true;
		uint64_t bits = 0;
		unsigned first = (unsigned)((off - m->pba_offset) * 8);
		for (unsigned i = 0; i < len * 8 && first + i < m->nvectors; i++)
			if (irq_msi_pending(m->vectors[first + i]))
				bits |= 1ULL << i;
		memcpy(data, &bits, len);
		return true;
	}
	return false;
}

/* The BAR: the table, the PBA, and 0 elsewhere (the rest is padding). */
static void msix_bar_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	struct msix *m = opaque;
	if (!msix_table_read(m, off, data, len))
		memset(data, 0, len);
}

/* Writes land in the table only: the PBA is read-only, odd sizes and the
 * padding are ignored. */
static void msix_bar_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct msix *m = opaque;
	uint64_t table_size = (uint64_t)m->nvectors * PCI_MSIX_ENTRY_SIZE;
	if (!in_region(off, len, m->table_offset, table_size) || !msix_access_ok(off, len))
		return;
	unsigned dw = (unsigned)((off - m->table_offset) / 4);
	uint32_t v[2];
	memcpy(v, data, len);
	lock_take(&m->lock);
	for (unsigned i = 0; i < len / 4; i++) {
		uint32_t *slot = &m->table[dw + i];
		/* Vector Control: only the mask bit is writable (6.8.2.9). */
		*slot = ((dw + i) % 4 == ENTRY_CTRL) ? (v[i] & PCI_MSIX_ENTRY_CTRL_MASKBIT) : v[i];
	}
	irq_routes_begin(m->irq);
	msix_sync_vector_locked(m, dw / 4);
	irq_routes_commit(m->irq);
	lock_release(&m->lock);
	if (m->changed)
		m->changed(m->changed_opaque, dw / 4);
}
