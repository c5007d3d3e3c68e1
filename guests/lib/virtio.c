/*
 * virtio-pci modern transport and split virtqueues, driver side (see
 * guest/virtio.h). virtio 1.2 sections 4.1 and 2.7.
 */
#include "guest/virtio.h"

#include "guest/kit.h"
#include "guest/pci.h"
#include "guest/ram.h"

/* ---- capabilities (4.1.4) ---- */

static struct virtio_region *region_for(struct virtio_pci_dev *d, uint8_t type)
{
	switch (type) {
	case VIRTIO_PCI_CAP_COMMON_CFG: return &d->common;
	case VIRTIO_PCI_CAP_NOTIFY_CFG: return &d->notify;
	case VIRTIO_PCI_CAP_ISR_CFG: return &d->isr;
	case VIRTIO_PCI_CAP_DEVICE_CFG: return &d->device;
	default: return NULL;
	}
}

bool virtio_pci_parse(unsigned slot, uint16_t type, const uint64_t bar[6],
		      const uint64_t bar_size[6], struct virtio_pci_dev *d, const char **why)
{
	uint8_t offs[48], ids[48];
	const char *err;
	unsigned n = pci_cap_walk(0, slot, 0, offs, ids, 48, &err);

	memset(d, 0, sizeof(*d));
	d->slot = (uint8_t)slot;
	d->type = type;
	for (unsigned b = 0; b < 6; b++)
		d->bar[b] = bar[b];
	if (err) {
		*why = err;
		return false;
	}
	for (unsigned i = 0; i < n && i < 48; i++) {
		if (ids[i] != PCI_CAP_ID_VNDR)
			continue;
		d->nvendor_caps++;
		uint8_t c = offs[i];
		uint8_t cfg_type = pci_read8(0, slot, 0, c + VIRTIO_CAP_CFG_TYPE);
		uint8_t b = pci_read8(0, slot, 0, c + VIRTIO_CAP_BAR);
		if (cfg_type == VIRTIO_PCI_CAP_PCI_CFG) {
			if (!d->pci_cfg_cap)
				d->pci_cfg_cap = c;
			continue;
		}
		struct virtio_region *r = region_for(d, cfg_type);
		if (!r || r->present)
			continue;
		/* 4.1.4.1: a BAR value 0x0-0x5 names a BAR; the driver ignores
		 * capabilities with reserved values or BARs it cannot use. */
		if (b > 5 || !bar[b]) {
			d->bad_bar_caps++;
			continue;
		}
		r->cap = c;
		r->bar = b;
		r->offset = pci_read32(0, slot, 0, c + VIRTIO_CAP_OFFSET);
		r->length = pci_read32(0, slot, 0, c + VIRTIO_CAP_LENGTH);
		if ((uint64_t)r->offset + r->length > bar_size[b]) {
			*why = "a virtio structure runs past the end of its BAR";
			return false;
		}
		r->addr = bar[b] + r->offset;
		r->present = true;
		if (cfg_type == VIRTIO_PCI_CAP_NOTIFY_CFG)
			d->notify_mult = pci_read32(0, slot, 0, c + VIRTIO_CAP_NOTIFY_MULT);
	}
	if (!d->common.present || !d->notify.present || !d->isr.present) {
		*why = "no usable common, notify or ISR capability";
		return false;
	}
	if (d->common.length < VIRTIO_CC_SIZE) {
		*why = "the common configuration structure is shorter than 0x38 bytes";
		return false;
	}
	*why = NULL;
	return true;
}

/* ---- common configuration ---- */

uint8_t virtio_cc_read8(const struct virtio_pci_dev *d, unsigned off)
{
	return mmio_read8(d->common.addr + off);
}

uint16_t virtio_cc_read16(const struct virtio_pci_dev *d, unsigned off)
{
	return mmio_read16(d->common.addr + off);
}

uint32_t virtio_cc_read32(const struct virtio_pci_dev *d, unsigned off)
{
	return mmio_read32(d->common.addr + off);
}

void virtio_cc_write8(const struct virtio_pci_dev *d, unsigned off, uint8_t v)
{
	mmio_write8(d->common.addr + off, v);
}

void virtio_cc_write16(const struct virtio_pci_dev *d, unsigned off, uint16_t v)
{
	mmio_write16(d->common.addr + off, v);
}

void virtio_cc_write32(const struct virtio_pci_dev *d, unsigned off, uint32_t v)
{
	mmio_write32(d->common.addr + off, v);
}

uint64_t virtio_cc_read64(const struct virtio_pci_dev *d, unsigned off)
{
	uint64_t lo = virtio_cc_read32(d, off);
	return lo | (uint64_t)virtio_cc_read32(d, off + 4) << 32;
}

void virtio_cc_write64(const struct virtio_pci_dev *d, unsigned off, uint64_t v)
{
	virtio_cc_write32(d, off, (uint32_t)v);
	virtio_cc_write32(d, off + 4, (uint32_t)(v >> 32));
}

bool virtio_reset(const struct virtio_pci_dev *d, unsigned polls)
{
	virtio_set_status(d, 0);
	for (unsigned i = 0; i < polls; i++) {
		if (virtio_status(d) == 0)
			return true;
		cpu_relax();
	}
	return false;
}

uint64_t virtio_device_features(const struct virtio_pci_dev *d)
{
	virtio_cc_write32(d, VIRTIO_CC_DFSELECT, 0);
	uint64_t lo = virtio_cc_read32(d, VIRTIO_CC_DF);
	virtio_cc_write32(d, VIRTIO_CC_DFSELECT, 1);
	return lo | (uint64_t)virtio_cc_read32(d, VIRTIO_CC_DF) << 32;
}

void virtio_set_driver_features(const struct virtio_pci_dev *d, uint64_t f)
{
	virtio_cc_write32(d, VIRTIO_CC_GFSELECT, 0);
	virtio_cc_write32(d, VIRTIO_CC_GF, (uint32_t)f);
	virtio_cc_write32(d, VIRTIO_CC_GFSELECT, 1);
	virtio_cc_write32(d, VIRTIO_CC_GF, (uint32_t)(f >> 32));
}

uint64_t virtio_driver_features(const struct virtio_pci_dev *d)
{
	virtio_cc_write32(d, VIRTIO_CC_GFSELECT, 0);
	uint64_t lo = virtio_cc_read32(d, VIRTIO_CC_GF);
	virtio_cc_write32(d, VIRTIO_CC_GFSELECT, 1);
	return lo | (uint64_t)virtio_cc_read32(d, VIRTIO_CC_GF) << 32;
}

static uint64_t config_read_once(const struct virtio_pci_dev *d, unsigned off, unsigned len)
{
	uint64_t a = d->device.addr + off;
	switch (len) {
	case 1: return mmio_read8(a);
	case 2: return mmio_read16(a);
	case 4: return mmio_read32(a);
	default: {
		uint64_t lo = mmio_read32(a);
		return lo | (uint64_t)mmio_read32(a + 4) << 32;
	}
	}
}

uint64_t virtio_config_read(const struct virtio_pci_dev *d, unsigned off, unsigned len)
{
	uint64_t v;
	uint8_t before, after;
	unsigned tries = 0;

	do {
		before = virtio_cc_read8(d, VIRTIO_CC_CFG_GEN);
		v = config_read_once(d, off, len);
		after = virtio_cc_read8(d, VIRTIO_CC_CFG_GEN);
	} while (before != after && ++tries < 100);
	return v;
}

uint32_t virtio_pci_cfg_read(const struct virtio_pci_dev *d, uint8_t bar, uint32_t offset,
			     unsigned len)
{
	unsigned c = d->pci_cfg_cap;

	if (!c)
		return 0xFFFFFFFFu;
	pci_write8(0, d->slot, 0, c + VIRTIO_CAP_BAR, bar);
	pci_write32(0, d->slot, 0, c + VIRTIO_CAP_OFFSET, offset);
	pci_write32(0, d->slot, 0, c + VIRTIO_CAP_LENGTH, len);
	switch (len) {
	case 1: return pci_read8(0, d->slot, 0, c + VIRTIO_CAP_PCI_CFG_DATA);
	case 2: return pci_read16(0, d->slot, 0, c + VIRTIO_CAP_PCI_CFG_DATA);
	default: return pci_read32(0, d->slot, 0, c + VIRTIO_CAP_PCI_CFG_DATA);
	}
}

/* ---- split virtqueues (2.7) ---- */

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

static void barrier(void)
{
	/* x86 keeps stores in order (and loads with loads), so a compiler
	 * barrier is the write/read barrier 2.7.13 asks for; mfence for the
	 * store->load order before reading the device's flags (2.7.13.3). */
	__asm__ volatile("" ::: "memory");
}

static void full_barrier(void)
{
	__asm__ volatile("mfence" ::: "memory");
}

bool virtq_setup(const struct virtio_pci_dev *d, unsigned index, uint16_t max_size,
		 uint16_t msix_vector, struct virtq *vq, uint16_t *vec_readback, const char **why)
{
	memset(vq, 0, sizeof(*vq));
	vq->dev = d;
	vq->index = (uint16_t)index;
	*vec_readback = VIRTIO_MSI_NO_VECTOR;
	virtio_cc_write16(d, VIRTIO_CC_Q_SELECT, (uint16_t)index);
	vq->dev_size = virtio_cc_read16(d, VIRTIO_CC_Q_SIZE);
	if (vq->dev_size == 0) {
		*why = "queue_size reads 0: the queue is not available";
		return false;
	}
	if (virtio_cc_read16(d, VIRTIO_CC_Q_ENABLE) != 0) {
		*why = "queue_enable reads non-zero before the driver enabled the queue";
		return false;
	}
	uint16_t size = 1;
	while ((uint32_t)size * 2 <= vq->dev_size && size * 2 <= max_size &&
	       size * 2 <= VIRTQ_GUEST_MAX)
		size = (uint16_t)(size * 2);
	vq->size = size;

	/* 2.7: table 16 * size; driver area 6 + 2 * size; device area 6 + 8 * size. */
	uint64_t desc_sz = 16ull * size, avail_sz = 6 + 2ull * size, used_sz = 6 + 8ull * size;
	vq->desc = ram_alloc(align_up(desc_sz, 4096), 4096);
	vq->avail = ram_alloc(align_up(avail_sz, 4096), 4096);
	vq->used = ram_alloc(align_up(used_sz, 4096), 4096);
	if (!vq->desc || !vq->avail || !vq->used) {
		*why = "out of ring memory";
		return false;
	}
	for (uint16_t i = 0; i < size; i++)
		vq->desc[i].next = (uint16_t)(i + 1);
	vq->free_head = 0;
	vq->num_free = size;

	virtio_cc_write16(d, VIRTIO_CC_Q_SIZE, size);
	virtio_cc_write64(d, VIRTIO_CC_Q_DESC, (uint64_t)vq->desc);
	virtio_cc_write64(d, VIRTIO_CC_Q_DRIVER, (uint64_t)vq->avail);
	virtio_cc_write64(d, VIRTIO_CC_Q_DEVICE, (uint64_t)vq->used);
	if (msix_vector != VIRTIO_MSI_NO_VECTOR) {
		virtio_cc_write16(d, VIRTIO_CC_Q_MSIX, msix_vector);
		*vec_readback = virtio_cc_read16(d, VIRTIO_CC_Q_MSIX);
	}
	if (virtio_cc_read16(d, VIRTIO_CC_Q_SIZE) != size ||
	    virtio_cc_read64(d, VIRTIO_CC_Q_DESC) != (uint64_t)vq->desc ||
	    virtio_cc_read64(d, VIRTIO_CC_Q_DRIVER) != (uint64_t)vq->avail ||
	    virtio_cc_read64(d, VIRTIO_CC_Q_DEVICE) != (uint64_t)vq->used) {
		*why = "queue_size or a ring address does not read back as written";
		return false;
	}
	vq->notify_off = virtio_cc_read16(d, VIRTIO_CC_Q_NOTIFY_OFF);
	/* 4.1.4.4: cap.offset + queue_notify_off * notify_off_multiplier. */
	uint64_t off = (uint64_t)vq->notify_off * d->notify_mult;
	if (off + 2 > d->notify.length) {
		*why = "the queue's notify address lies outside the notify structure";
		return false;
	}
	vq->notify_addr = d->notify.addr + off;
	virtio_cc_write16(d, VIRTIO_CC_Q_ENABLE, 1);
	if (virtio_cc_read16(d, VIRTIO_CC_Q_ENABLE) != 1) {
		*why = "queue_enable does not read back 1";
		return false;
	}
	*why = NULL;
	return true;
}

int virtq_add(struct virtq *vq, const struct virtq_buf *bufs, unsigned nout, unsigned nin)
{
	unsigned n = nout + nin;

	if (n == 0 || n > vq->num_free)
		return -1;
	uint16_t head = vq->free_head, i = head, last = head;
	for (unsigned k = 0; k < n; k++) {
		volatile struct virtq_desc *dsc = &vq->desc[i];
		last = i;
		dsc->addr = (uint64_t)bufs[k].addr;
		dsc->len = bufs[k].len;
		dsc->flags = (uint16_t)((k >= nout ? VIRTQ_DESC_F_WRITE : 0) |
					(k + 1 < n ? VIRTQ_DESC_F_NEXT : 0));
		i = dsc->next;
	}
	vq->free_head = vq->desc[last].next;
	vq->num_free = (uint16_t)(vq->num_free - n);
	vq->chain_len[head] = (uint16_t)n;

	/* 2.7.13.1/2.7.13.2: the ring entry, a write barrier, then idx. */
	vq->avail->ring[vq->avail_idx % vq->size] = head;
	barrier();
	vq->avail_idx++;
	vq->avail->idx = vq->avail_idx;
	return head;
}

void virtq_kick(struct virtq *vq)
{
	full_barrier();
	/* 2.7.10 (no EVENT_IDX): flags 1 = the device asks not to be notified. */
	if (!(vq->used->flags & VIRTQ_USED_F_NO_NOTIFY))
		mmio_write16(vq->notify_addr, vq->index);
}

uint16_t virtq_used_pending(const struct virtq *vq)
{
	return (uint16_t)(vq->used->idx - vq->last_used);
}

bool virtq_get_used(struct virtq *vq, uint16_t *head, uint32_t *len)
{
	if (vq->used->idx == vq->last_used)
		return false;
	barrier(); /* 2.7.14: read idx before the entry it covers */
	volatile struct virtq_used_elem *e = &vq->used->ring[vq->last_used % vq->size];
	uint32_t id = e->id;
	*len = e->len;
	vq->last_used++;
	*head = (uint16_t)id;
	if (id >= vq->size || !vq->chain_len[id])
		return true; /* a bogus id: reported by the caller, nothing freed */
	uint16_t n = vq->chain_len[id], i = (uint16_t)id;
	for (uint16_t k = 1; k < n; k++)
		i = vq->desc[i].next;
	vq->desc[i].next = vq->free_head;
	vq->free_head = (uint16_t)id;
	vq->num_free = (uint16_t)(vq->num_free + n);
	vq->chain_len[id] = 0;
	return true;
}

void virtq_set_no_interrupt(struct virtq *vq, bool on)
{
	vq->avail->flags = on ? VIRTQ_AVAIL_F_NO_INTERRUPT : 0;
	full_barrier();
}
