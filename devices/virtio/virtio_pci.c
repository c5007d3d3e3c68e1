#include "devices/virtio/virtio_pci.h"

#include "devices/virtio/virtio_pci_call.h"
#include "vmm/base/log.h"

#include <errno.h>
#include <linux/virtio_pci.h>
#include <stddef.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* 4.1.2: vendor 0x1AF4; a modern device's ID is 0x1040 + its type; a
 * non-transitional device's subsystem ID is 0x40 or more (4.1.2.1). */
#define VIRTIO_PCI_VENDOR	 0x1AF4
#define VIRTIO_PCI_MODERN_ID	 0x1040
#define VIRTIO_PCI_SUBSYSTEM_MIN 0x40
/* 4.1.4.5: ISR bit 0 is a queue interrupt (bit 1 is VIRTIO_PCI_ISR_CONFIG). */
#define VIRTIO_PCI_ISR_QUEUE 0x1

/* pci_cfg_data of the PCI-configuration-access capability (4.1.4.9). */
#define VIRTIO_PCI_CFG_DATA offsetof(struct virtio_pci_cfg_cap, pci_cfg_data)

/* The common configuration structure (4.1.4.3), as the uapi header lays
 * it out (VIRTIO_PCI_COMMON_* are its offsets). */
#define CC_SIZE sizeof(struct virtio_pci_common_cfg)

static struct virtio_pci *vp_of(struct virtio_transport *t)
{
	return (struct virtio_pci *)((char *)t - offsetof(struct virtio_pci, transport));
}

static void vp_queue_lock(struct virtio_transport *t, unsigned q)
{
	lock_take_nested(&vp_of(t)->queues[q].lock, q);
}

static void vp_queue_unlock(struct virtio_transport *t, unsigned q)
{
	lock_release(&vp_of(t)->queues[q].lock);
}

/* Every queue's lock, in index order, under the configuration lock: what
 * DRIVER_OK and a reset hold, so no queue path runs while they change the
 * queues. */
static void vp_lock_all_queues(struct virtio_pci *vp)
{
	for (unsigned i = 0; i < vp->nq; i++)
		lock_take_nested(&vp->queues[i].lock, i);
}

static void vp_unlock_all_queues(struct virtio_pci *vp)
{
	for (unsigned i = vp->nq; i-- > 0;)
		lock_release(&vp->queues[i].lock);
}

/* The status as the driver reads it. */
static uint8_t vp_status(struct virtio_pci *vp)
{
	return (uint8_t)(atomic_load(&vp->status) |
			 (atomic_load(&vp->needs_reset) ? VIRTIO_CONFIG_S_NEEDS_RESET : 0));
}

/* Everything named _locked runs with vp->lock held; the entry points
 * (BAR accesses, the resample handler) take it once. Queue paths (notify
 * handlers, a device's completions) take only their queue's lock. */

/* The ISR bit an INTx interrupt sets, under isr_lock (msix_raise). */
struct vp_isr_latch {
	struct virtio_pci *vp;
	uint8_t bit;
};

static void vp_isr_latch(void *arg)
{
	const struct vp_isr_latch *l = arg;
	lock_assert_held(&l->vp->isr_lock);
	l->vp->isr |= l->bit;
}

/* Vector `vec` under MSI-X, or ISR bit `isr_bit` + INTx (msix_raise decides,
 * and drops a vector beyond the table, NO_VECTOR included: 4.1.5.1.2, no
 * interrupt then). The configuration bit is set under MSI-X too
 * (4.1.4.5.1). Any lock above isr_lock, or none. Returns how it went: the
 * vector, VIRTIO_PCI_LAST_INTX, or VIRTIO_PCI_LAST_NONE (MSI-X on and no
 * vector assigned). */
static unsigned vp_interrupt(struct virtio_pci *vp, uint16_t vec, uint8_t isr_bit)
{
	struct vp_isr_latch latch = {vp, isr_bit};
	if (isr_bit == VIRTIO_PCI_ISR_CONFIG) {
		lock_take(&vp->isr_lock);
		vp_isr_latch(&latch);
		lock_release(&vp->isr_lock);
	}
	unsigned how = vec;
	switch (msix_raise(&vp->msix, vec, &vp->isr_lock, vp_isr_latch, &latch)) {
	case MSIX_SENT_NONE: return VIRTIO_PCI_LAST_NONE; /* dropped: not an interrupt */
	case MSIX_SENT_INTX: how = VIRTIO_PCI_LAST_INTX; break;
	case MSIX_SENT_VECTOR: break;
	}
	atomic_fetch_add(&vp->interrupts, 1);
	return how;
}

void vp_raise_queue_locked(struct virtio_pci *vp, struct virtio_pci_queue *pq)
{
	lock_assert_held(&pq->lock);
	unsigned how = vp_interrupt(vp, pq->msix_vector, VIRTIO_PCI_ISR_QUEUE);
	if (how != VIRTIO_PCI_LAST_NONE) {
		atomic_fetch_add(&pq->interrupts, 1);
		atomic_store(&pq->last_vector, how);
	}
}

void vp_raise_config(struct virtio_pci *vp)
{
	vp_interrupt(vp, atomic_load(&vp->msix_config), VIRTIO_PCI_ISR_CONFIG);
}

/* Queue q locked. */
static void vp_queue_used_locked(struct virtio_transport *t, unsigned q)
{
	struct virtio_pci *vp = vp_of(t);
	if (q >= vp->nq)
		return;
	struct virtio_pci_queue *pq = &vp->queues[q];
	lock_assert_held(&pq->lock);
	struct virtq *vq = &vp->dev->vqs[q];
	atomic_fetch_add(&pq->requests, (uint16_t)(vq->used_idx - pq->used_counted));
	pq->used_counted = vq->used_idx;
	if (virtq_should_notify(vq))
		vp_raise_queue_locked(vp, pq);
}

/* 2.1.2: a device that cannot go on sets NEEDS_RESET and, once DRIVER_OK
 * was set, sends a configuration change notification. Under the
 * configuration lock or a queue lock: atomics only, the first caller
 * reports. */
static void vp_needs_reset(struct virtio_transport *t, const char *why)
{
	struct virtio_pci *vp = vp_of(t);
	if (atomic_exchange(&vp->needs_reset, true))
		return;
	log_guest_warn(vp->host.log, &vp->reset_warnings, "%s: device needs reset: %s",
		       vp->pci.name, why);
	atomic_fetch_add(&vp->broken, 1);
	if (atomic_load(&vp->status) & VIRTIO_CONFIG_S_DRIVER_OK) {
		atomic_fetch_add(&vp->config_generation, 1);
		vp_raise_config(vp);
	}
}

/* Queue q locked. */
static bool vp_live_locked(struct virtio_transport *t, unsigned q)
{
	struct virtio_pci *vp = vp_of(t);
	if (q < vp->nq)
		lock_assert_held(&vp->queues[q].lock);
	return q < vp->nq && vp->queues[q].live && !atomic_load(&vp->needs_reset);
}

/* A pass the device cut short at its budget: queue_notify again at the end
 * of the loop's pass, on the queue's own thread (it is running there). */
static void vp_queue_again(void *arg)
{
	struct virtio_pci_queue *q = arg;
	struct virtio_pci *vp = q->owner;
	lock_take_nested(&q->lock, q->index);
	if (vp_live_locked(&vp->transport, q->index) && vp->dev->ops->queue_notify)
		vp->dev->ops->queue_notify(vp->dev, q->index);
	lock_release(&q->lock);
}

static void vp_queue_yield(struct virtio_transport *t, unsigned q)
{
	struct virtio_pci *vp = vp_of(t);
	if (q >= vp->nq)
		return;
	lock_assert_held(&vp->queues[q].lock);
	if (!vp->host.defer || vp->host.defer(vp->host.ctx, q, vp_queue_again, &vp->queues[q]))
		/* No loop to come back on: the guest's next notify serves the rest. */
		atomic_fetch_add(&vp->yields_lost, 1);
}

static const struct virtio_transport_ops vp_transport_ops = {
    .queue_used = vp_queue_used_locked,
    .needs_reset = vp_needs_reset,
    .live = vp_live_locked,
    .queue_lock = vp_queue_lock,
    .queue_unlock = vp_queue_unlock,
    .yield = vp_queue_yield,
};

/* The configuration lock and every queue's held: a started backend stops
 * using the rings. */
static void vp_stop_locked(struct virtio_pci *vp)
{
	if (vp->started && vp->dev->ops->stop)
		vp->dev->ops->stop(vp->dev);
	vp->started = false;
}

static void vp_reset_locked(struct virtio_pci *vp)
{
	struct virtio_dev *d = vp->dev;
	lock_assert_held(&vp->lock);
	vp_lock_all_queues(vp);
	vp_stop_locked(vp);
	if (d->ops->reset)
		d->ops->reset(d);
	for (unsigned i = 0; i < vp->nq; i++) {
		struct virtio_pci_queue *q = &vp->queues[i];
		q->size = d->ops->queue_max;
		q->msix_vector = VIRTIO_MSI_NO_VECTOR;
		q->enabled = false;
		q->live = false;
		q->used_counted = 0;
		q->desc = q->driver = q->device = 0;
		memset(&d->vqs[i], 0, sizeof(d->vqs[i]));
		vp_call_sync_locked(vp, q); /* no vector: its call fd is unbound */
	}
	d->features = 0;
	atomic_store(&vp->needs_reset, false);
	atomic_store(&vp->status, 0);
	vp_unlock_all_queues(vp);
	vp->device_feature_select = vp->driver_feature_select = 0;
	vp->driver_features = 0;
	atomic_store(&vp->msix_config, VIRTIO_MSI_NO_VECTOR);
	vp->queue_select = 0;
	vp->late_setup_logged = false;
	lock_take(&vp->isr_lock);
	vp->isr = 0;
	pci_device_set_intx(&vp->pci, false);
	lock_release(&vp->isr_lock);
}

static uint16_t vp_valid_vector(struct virtio_pci *vp, uint16_t v)
{
	/* A vector beyond the table reads back NO_VECTOR (4.1.4.3.2,
	 * 4.1.5.1.2.1: a mapping that failed); in IRQ_MODE_INTX there is no
	 * table, so msix_config and every queue_msix_vector read NO_VECTOR. */
	return v < vp->msix.nvectors ? v : VIRTIO_MSI_NO_VECTOR;
}

/* Field width at a common-config offset; 64-bit addresses are two dwords. */
static unsigned cc_width(unsigned off)
{
	if (off < VIRTIO_PCI_COMMON_MSIX)
		return 4;
	if (off < VIRTIO_PCI_COMMON_STATUS)
		return 2;
	if (off < VIRTIO_PCI_COMMON_Q_SELECT)
		return 1;
	if (off < VIRTIO_PCI_COMMON_Q_DESCLO)
		return 2;
	return off < CC_SIZE ? 4 : 0;
}

static uint32_t vp_common_read_locked(struct virtio_pci *vp, unsigned off)
{
	lock_assert_held(&vp->lock);
	struct virtio_pci_queue *q =
	    vp->queue_select < vp->nq ? &vp->queues[vp->queue_select] : NULL;
	switch (off) {
	case VIRTIO_PCI_COMMON_DFSELECT: return vp->device_feature_select;
	case VIRTIO_PCI_COMMON_DF:
		return vp->device_feature_select < 2
			   ? (uint32_t)(vp->device_features >> (32 * vp->device_feature_select))
			   : 0;
	case VIRTIO_PCI_COMMON_GFSELECT: return vp->driver_feature_select;
	case VIRTIO_PCI_COMMON_GF:
		return vp->driver_feature_select < 2
			   ? (uint32_t)(vp->driver_features >> (32 * vp->driver_feature_select))
			   : 0;
	case VIRTIO_PCI_COMMON_MSIX: return atomic_load(&vp->msix_config);
	case VIRTIO_PCI_COMMON_NUMQ: return vp->nq;
	case VIRTIO_PCI_COMMON_STATUS: return vp_status(vp);
	case VIRTIO_PCI_COMMON_CFGGENERATION: return atomic_load(&vp->config_generation);
	case VIRTIO_PCI_COMMON_Q_SELECT: return vp->queue_select;
	/* 4.1.4.3.2: a selected queue that does not exist has size 0. */
	case VIRTIO_PCI_COMMON_Q_SIZE: return q ? q->size : 0;
	case VIRTIO_PCI_COMMON_Q_MSIX: return q ? q->msix_vector : VIRTIO_MSI_NO_VECTOR;
	case VIRTIO_PCI_COMMON_Q_ENABLE: return q ? q->enabled : 0;
	case VIRTIO_PCI_COMMON_Q_NOFF: return q ? vp->queue_select : 0;
	case VIRTIO_PCI_COMMON_Q_DESCLO: return q ? (uint32_t)q->desc : 0;
	case VIRTIO_PCI_COMMON_Q_DESCHI: return q ? (uint32_t)(q->desc >> 32) : 0;
	case VIRTIO_PCI_COMMON_Q_AVAILLO: return q ? (uint32_t)q->driver : 0;
	case VIRTIO_PCI_COMMON_Q_AVAILHI: return q ? (uint32_t)(q->driver >> 32) : 0;
	case VIRTIO_PCI_COMMON_Q_USEDLO: return q ? (uint32_t)q->device : 0;
	case VIRTIO_PCI_COMMON_Q_USEDHI: return q ? (uint32_t)(q->device >> 32) : 0;
	default: return 0;
	}
}

/* Wakes the I/O thread for queue q as a notify does; `host` marks a wake-up
 * that is the device's own, not the driver's (not counted as a notify). */
static void vp_kick_queue(struct virtio_pci_queue *q, bool host)
{
	uint64_t one = 1;
	if (host)
		atomic_store(&q->host_kick, true);
	if (write(q->notify_fd, &one, sizeof(one)) < 0) {
		/* counter full: a wake-up is pending anyway */
	}
}

/* DRIVER_OK of an external-queue device, every queue locked: the backend
 * gets the enabled queues (their rings checked at enable) and the fds. */
static void vp_start_locked(struct virtio_pci *vp)
{
	struct virtio_external_start st = {.config_call_fd = vp->config_call.fd};
	for (unsigned i = 0; i < vp->nq; i++) {
		const struct virtio_pci_queue *q = &vp->queues[i];
		if (q->enabled)
			st.q[st.nq++] = (struct virtio_queue_info){
			    i, q->size, q->desc, q->driver, q->device, q->notify_fd, q->call.fd};
	}
	int ret = vp->dev->ops->start ? vp->dev->ops->start(vp->dev, &st) : -ENOSYS;
	/* A start that failed part way may have left rings running in the
	 * backend: the stop hook undoes what it did, whole or in part. */
	vp->started = vp->dev->ops->start != NULL;
	if (ret < 0) {
		char why[64];
		snprintf(why, sizeof(why), "its backend did not start: %s", strerror(-ret));
		vp_needs_reset(&vp->transport, why);
	}
}

static void vp_set_status_locked(struct virtio_pci *vp, uint8_t v)
{
	struct virtio_dev *d = vp->dev;
	lock_assert_held(&vp->lock);
	if (v == 0) {
		vp_reset_locked(vp); /* 4.1.4.3.1: writing 0 resets the device */
		return;
	}
	uint8_t old = vp_status(vp);
	/* 2.1.1: "The driver MUST NOT clear a device status bit" (but by
	 * writing 0). A write that does is a broken driver: the bits stay,
	 * the device needs a reset (2.1.2). NEEDS_RESET is the device's bit. */
	if ((old & (uint8_t)~VIRTIO_CONFIG_S_NEEDS_RESET) & (uint8_t)~v) {
		char why[64];
		snprintf(why, sizeof(why), "device status 0x%02x written over 0x%02x", v, old);
		vp_needs_reset(&vp->transport, why);
		return;
	}
	if ((v & VIRTIO_CONFIG_S_FEATURES_OK) && !(old & VIRTIO_CONFIG_S_FEATURES_OK)) {
		/* 3.1.1: accept only a subset of what we offered, with VERSION_1
		 * (Linux requires it; we offer no legacy interface). */
		bool ok = !(vp->driver_features & ~vp->device_features) &&
			  (vp->driver_features & VIRTIO_FEATURE(VIRTIO_F_VERSION_1));
		if (ok)
			d->features = vp->driver_features;
		else
			v &= (uint8_t)~VIRTIO_CONFIG_S_FEATURES_OK;
	}
	v &= (uint8_t)~VIRTIO_CONFIG_S_NEEDS_RESET; /* the device's bit */
	if (!(v & VIRTIO_CONFIG_S_DRIVER_OK) || (old & VIRTIO_CONFIG_S_DRIVER_OK)) {
		atomic_store(&vp->status, v);
		return;
	}
	/* DRIVER_OK: the enabled queues go live, each to the I/O thread that
	 * owns it, until the next reset. */
	bool kick[VIRTIO_MAX_QUEUES] = {false};
	vp_lock_all_queues(vp);
	atomic_store(&vp->status, v);
	for (unsigned i = 0; i < vp->nq; i++) {
		vp->queues[i].live = vp->queues[i].enabled;
		/* The device looks now, on the I/O thread, at each enabled queue
		 * that holds buffers: a driver may have queued them (and
		 * notified, which was dropped) before DRIVER_OK, as Linux 5.10's
		 * virtio-rng does in its probe. */
		kick[i] = vp->queues[i].enabled && virtq_has_avail(&d->vqs[i]);
	}
	/* A device that already needs a reset (a queue refused at enable)
	 * hands its backend nothing: its queues are not live either. */
	if (d->ops->external_queues && !atomic_load(&vp->needs_reset))
		vp_start_locked(vp); /* the notify ioeventfds kept what came before */
	else if (d->ops->activate)
		d->ops->activate(d);
	vp_unlock_all_queues(vp);
	for (unsigned i = 0; i < vp->nq && !d->ops->external_queues; i++)
		if (kick[i])
			vp_kick_queue(&vp->queues[i], true);
}

static void vp_queue_enable_locked(struct virtio_pci *vp, struct virtio_pci_queue *q, unsigned idx)
{
	struct virtio_dev *d = vp->dev;
	lock_assert_held(&vp->lock);
	lock_take_nested(&q->lock, q->index);
	int ret = virtq_init(&d->vqs[idx], vp->mem, q->size, d->ops->queue_max, q->desc, q->driver,
			     q->device, virtio_has_feature(d, VIRTIO_RING_F_EVENT_IDX));
	q->enabled = ret == 0;
	lock_release(&q->lock);
	if (ret) {
		char why[96];
		snprintf(why, sizeof(why), "queue %u enabled with size %u at 0x%llx: %s", idx,
			 q->size, (unsigned long long)q->desc, virtq_error_name(ret));
		vp_needs_reset(&vp->transport, why);
	}
}

static void vp_common_write_locked(struct virtio_pci *vp, unsigned off, uint32_t v)
{
	lock_assert_held(&vp->lock);
	struct virtio_pci_queue *q =
	    vp->queue_select < vp->nq ? &vp->queues[vp->queue_select] : NULL;
	/* Queue set-up counts only between FEATURES_OK and DRIVER_OK; the
	 * vector registers are exempt (Linux 4.15-5.11 write them after reset). */
	uint8_t status = atomic_load(&vp->status);
	bool setup_window =
	    (status & VIRTIO_CONFIG_S_FEATURES_OK) && !(status & VIRTIO_CONFIG_S_DRIVER_OK);
	switch (off) {
	case VIRTIO_PCI_COMMON_DFSELECT: vp->device_feature_select = v; return;
	case VIRTIO_PCI_COMMON_GFSELECT: vp->driver_feature_select = v; return;
	case VIRTIO_PCI_COMMON_GF:
		if (vp->driver_feature_select < 2 && !(status & VIRTIO_CONFIG_S_FEATURES_OK)) {
			unsigned shift = 32 * vp->driver_feature_select;
			vp->driver_features = (vp->driver_features & ~(0xFFFFFFFFULL << shift)) |
					      ((uint64_t)v << shift);
		}
		return;
	case VIRTIO_PCI_COMMON_MSIX:
		atomic_store(&vp->msix_config, vp_valid_vector(vp, (uint16_t)v));
		return;
	case VIRTIO_PCI_COMMON_STATUS: vp_set_status_locked(vp, (uint8_t)v); return;
	case VIRTIO_PCI_COMMON_Q_SELECT: vp->queue_select = (uint16_t)v; return;
	case VIRTIO_PCI_COMMON_Q_MSIX:
		if (q) {
			/* The hot path reads it under the queue's lock. */
			lock_take_nested(&q->lock, q->index);
			q->msix_vector = vp_valid_vector(vp, (uint16_t)v);
			vp_call_sync_locked(vp, q); /* its call fd follows the vector */
			lock_release(&q->lock);
		}
		return;
	default: break;
	}
	if (!q)
		return;
	if (!setup_window || q->enabled) {
		if (!vp->late_setup_logged)
			log_guest_warn(
			    vp->host.log, &vp->reset_warnings,
			    "%s: queue set-up write at 0x%x outside FEATURES_OK..DRIVER_OK ignored "
			    "(logged once)",
			    vp->pci.name, off);
		vp->late_setup_logged = true;
		return;
	}
	switch (off) {
	case VIRTIO_PCI_COMMON_Q_SIZE:
		/* 4.1.4.3.1: queue_size reads 0 or a power of 2; a bad size then
		 * fails at enable (NEEDS_RESET). */
		q->size = (v && !(v & (v - 1))) ? (uint16_t)v : 0;
		break;
	case VIRTIO_PCI_COMMON_Q_ENABLE:
		if (v == 1)
			vp_queue_enable_locked(vp, q, vp->queue_select);
		break;
	case VIRTIO_PCI_COMMON_Q_DESCLO: q->desc = (q->desc & ~0xFFFFFFFFULL) | v; break;
	case VIRTIO_PCI_COMMON_Q_DESCHI:
		q->desc = (q->desc & 0xFFFFFFFFULL) | (uint64_t)v << 32;
		break;
	case VIRTIO_PCI_COMMON_Q_AVAILLO: q->driver = (q->driver & ~0xFFFFFFFFULL) | v; break;
	case VIRTIO_PCI_COMMON_Q_AVAILHI:
		q->driver = (q->driver & 0xFFFFFFFFULL) | (uint64_t)v << 32;
		break;
	case VIRTIO_PCI_COMMON_Q_USEDLO: q->device = (q->device & ~0xFFFFFFFFULL) | v; break;
	case VIRTIO_PCI_COMMON_Q_USEDHI:
		q->device = (q->device & 0xFFFFFFFFULL) | (uint64_t)v << 32;
		break;
	default: break; /* read-only */
	}
}

void virtio_pci_bar_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	struct virtio_pci *vp = opaque;
	uint64_t v = 0;
	lock_take(&vp->lock);
	if (off < VIRTIO_PCI_COMMON_OFF + CC_SIZE) {
		unsigned w = cc_width((unsigned)off);
		if (len == w && (off % w) == 0)
			v = vp_common_read_locked(vp, (unsigned)off);
		else if (len == 8 && off >= VIRTIO_PCI_COMMON_Q_DESCLO && (off % 8) == 0)
			v = vp_common_read_locked(vp, (unsigned)off) |
			    (uint64_t)vp_common_read_locked(vp, (unsigned)off + 4) << 32;
	} else if (off == VIRTIO_PCI_ISR_OFF) {
		/* 4.1.4.5: reading the ISR returns and clears it, and lowers INTx. */
		lock_take(&vp->isr_lock);
		v = vp->isr;
		vp->isr = 0;
		pci_device_set_intx(&vp->pci, false);
		lock_release(&vp->isr_lock);
	} else if (off >= VIRTIO_PCI_DEVICE_OFF &&
		   off - VIRTIO_PCI_DEVICE_OFF + len <= vp->dev->ops->config_size) {
		if (vp->dev->ops->config_read)
			vp->dev->ops->config_read(vp->dev, (unsigned)(off - VIRTIO_PCI_DEVICE_OFF),
						  &v, len);
	}
	lock_release(&vp->lock);
	memcpy(data, &v, len);
}

void virtio_pci_bar_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct virtio_pci *vp = opaque;
	uint64_t v = 0;
	memcpy(&v, data, len);
	if (off >= VIRTIO_PCI_NOTIFY_OFF) {
		/* Without an ioeventfd the write arrives here, on a vCPU thread:
		 * hand it to the I/O thread all the same. */
		uint64_t q = (off - VIRTIO_PCI_NOTIFY_OFF) / VIRTIO_PCI_NOTIFY_MULT;
		if (q < vp->nq)
			vp_kick_queue(&vp->queues[q], false);
		return;
	}
	lock_take(&vp->lock);
	if (off < VIRTIO_PCI_COMMON_OFF + CC_SIZE) {
		unsigned w = cc_width((unsigned)off);
		if (len == w && (off % w) == 0) {
			vp_common_write_locked(vp, (unsigned)off, (uint32_t)v);
		} else if (len == 8 && off >= VIRTIO_PCI_COMMON_Q_DESCLO && (off % 8) == 0) {
			vp_common_write_locked(vp, (unsigned)off, (uint32_t)v);
			vp_common_write_locked(vp, (unsigned)off + 4, (uint32_t)(v >> 32));
		}
	} else if (off >= VIRTIO_PCI_DEVICE_OFF &&
		   off - VIRTIO_PCI_DEVICE_OFF + len <= vp->dev->ops->config_size) {
		if (vp->dev->ops->config_write)
			vp->dev->ops->config_write(vp->dev, (unsigned)(off - VIRTIO_PCI_DEVICE_OFF),
						   data, len);
	}
	lock_release(&vp->lock);
}

/* The queue's I/O thread: its notify eventfd fired. The queue's lock is
 * all this path takes. */
static void vp_notify_ready(void *arg)
{
	struct virtio_pci_queue *q = arg;
	struct virtio_pci *vp = q->owner;
	uint64_t count;
	if (read(q->notify_fd, &count, sizeof(count)) < 0)
		return;
	if (count > (uint64_t)atomic_exchange(&q->host_kick, false)) {
		atomic_fetch_add(&vp->notifies, 1);
		atomic_fetch_add(&q->notifies, 1);
	}
	lock_take_nested(&q->lock, q->index);
	if (vp_live_locked(&vp->transport, q->index) && vp->dev->ops->queue_notify)
		vp->dev->ops->queue_notify(vp->dev, q->index);
	lock_release(&q->lock);
}

/* 4.1.4.9: the PCI-configuration-access capability: cap.bar, cap.offset,
 * cap.length select a BAR window; pci_cfg_data reads or writes it. */
static bool vp_cfg_cap_window(struct virtio_pci *vp, uint32_t *offset, unsigned *len)
{
	const struct pci_device *d = &vp->pci;
	uint8_t bar = d->cfg[vp->cfg_cap + VIRTIO_PCI_CAP_BAR];
	*offset = pci_cfg_get32(d, vp->cfg_cap + VIRTIO_PCI_CAP_OFFSET);
	*len = pci_cfg_get32(d, vp->cfg_cap + VIRTIO_PCI_CAP_LENGTH);
	return bar == 0 && (*len == 1 || *len == 2 || *len == 4) && (*offset % *len) == 0 &&
	       *offset < VIRTIO_PCI_BAR0_SIZE;
}

static bool touches(unsigned off, unsigned len, unsigned start, unsigned n)
{
	return off < start + n && start < off + len;
}

static void vp_config_read_hook(struct pci_device *d, unsigned off, unsigned len)
{
	struct virtio_pci *vp = d->opaque;
	uint32_t offset, v = 0;
	unsigned n;
	if (!vp->cfg_cap || !touches(off, len, vp->cfg_cap + VIRTIO_PCI_CFG_DATA, 4) ||
	    !vp_cfg_cap_window(vp, &offset, &n))
		return;
	virtio_pci_bar_read(vp, offset, &v, n);
	lock_take(&d->lock);
	pci_cfg_set32(d, vp->cfg_cap + VIRTIO_PCI_CFG_DATA, v);
	lock_release(&d->lock);
}

static void vp_config_written(struct pci_device *d, unsigned off, unsigned len)
{
	struct virtio_pci *vp = d->opaque;
	uint32_t offset, v;
	unsigned n;
	msix_config_written(&vp->msix, off, len);
	if (!vp->cfg_cap || !touches(off, len, vp->cfg_cap + VIRTIO_PCI_CFG_DATA, 4) ||
	    !vp_cfg_cap_window(vp, &offset, &n))
		return;
	v = pci_cfg_get32(d, vp->cfg_cap + VIRTIO_PCI_CFG_DATA);
	virtio_pci_bar_write(vp, offset, &v, n);
}

/* BAR0 moved: the notify ioeventfds follow it. */
static void vp_bar_mapped(struct pci_device *d, int bar, uint64_t addr, bool mapped)
{
	struct virtio_pci *vp = d->opaque;
	if (bar != 0 || !vp->host.ioeventfd)
		return;
	for (unsigned i = 0; i < vp->nq; i++) {
		uint64_t gpa = addr + VIRTIO_PCI_NOTIFY_OFF + (uint64_t)i * VIRTIO_PCI_NOTIFY_MULT;
		int ret = vp->host.ioeventfd(vp->host.ctx, gpa, 2, vp->queues[i].notify_fd, mapped);
		if (ret < 0)
			log_warn(vp->host.log,
				 "%s: ioeventfd for queue %u at 0x%llx: %s (notifications "
				 "will exit to the VMM)",
				 d->name, i, (unsigned long long)gpa, strerror(-ret));
	}
}

static void vp_intx_resample(struct pci_device *d)
{
	struct virtio_pci *vp = d->opaque;
	lock_take(&vp->isr_lock);
	pci_device_set_intx(d, vp->isr != 0);
	lock_release(&vp->isr_lock);
}

static const struct pci_device_ops vp_pci_ops = {
    .config_written = vp_config_written,
    .bar_mapped = vp_bar_mapped,
    .config_read = vp_config_read_hook,
    .intx_resample = vp_intx_resample,
};

static uint8_t vp_add_cap(struct virtio_pci *vp, uint8_t type, uint8_t len, uint32_t offset,
			  uint32_t length)
{
	uint8_t c = pci_device_add_capability(&vp->pci, PCI_CAP_ID_VNDR, len);
	if (!c)
		return 0;
	pci_cfg_set8(&vp->pci, c + VIRTIO_PCI_CAP_LEN, len);
	pci_cfg_set8(&vp->pci, c + VIRTIO_PCI_CAP_CFG_TYPE, type);
	pci_cfg_set8(&vp->pci, c + VIRTIO_PCI_CAP_BAR, 0); /* BAR0 */
	pci_cfg_set32(&vp->pci, c + VIRTIO_PCI_CAP_OFFSET, offset);
	pci_cfg_set32(&vp->pci, c + VIRTIO_PCI_CAP_LENGTH, length);
	return c;
}

int virtio_pci_init(struct virtio_pci *vp, struct virtio_dev *dev, const char *name,
		    struct irq_router *irq, const struct guest_mem *mem,
		    const struct virtio_host *host, enum irq_mode mode)
{
	const struct virtio_dev_ops *ops = dev->ops;
	unsigned nq = virtio_num_queues(dev);
	memset(vp, 0, sizeof(*vp));
	for (unsigned i = 0; i < VIRTIO_MAX_QUEUES; i++)
		vp->queues[i].call.fd = vp->queues[i].notify_fd = -1;
	vp->config_call.fd = -1;
	if (nq == 0 || nq > VIRTIO_MAX_QUEUES || ops->queue_max == 0 || ops->config_size > 0x1000)
		return -EINVAL;
	lock_init(&vp->lock, "virtio-pci config", LOCK_RANK_VIRTIO_CONFIG);
	lock_init(&vp->isr_lock, "virtio-pci ISR", LOCK_RANK_VIRTIO_ISR);
	dev->num_queues = nq;
	vp->nq = nq;
	vp->dev = dev;
	vp->host = *host;
	vp->mem = mem;
	vp->transport.ops = &vp_transport_ops;
	dev->transport = &vp->transport;
	vp->device_features =
	    ops->features | dev->extra_features | VIRTIO_FEATURE(VIRTIO_F_VERSION_1) |
	    VIRTIO_FEATURE(VIRTIO_RING_F_INDIRECT_DESC) | VIRTIO_FEATURE(VIRTIO_RING_F_EVENT_IDX);
	if (ops->external_queues) /* the backend walks the rings: offer what it serves */
		vp->device_features &= dev->backend_features;
	/* 4.1.2: modern devices are 0x1040 + type, revision 1. */
	pci_device_init(&vp->pci, name, VIRTIO_PCI_VENDOR,
			(uint16_t)(VIRTIO_PCI_MODERN_ID + ops->type), ops->pci_class, 1);
	/* 4.1.2.1: non-transitional devices use subsystem IDs from 0x40. */
	pci_device_set_subsystem(&vp->pci, VIRTIO_PCI_VENDOR,
				 (uint16_t)(VIRTIO_PCI_SUBSYSTEM_MIN + ops->type));
	vp->pci.ops = &vp_pci_ops;
	vp->pci.opaque = vp;
	for (unsigned i = 0; i < nq; i++) {
		lock_init(&vp->queues[i].lock, "virtio queue", LOCK_RANK_VIRTIO_QUEUE);
		atomic_store(&vp->queues[i].last_vector, VIRTIO_PCI_LAST_NONE);
		vp->queues[i].owner = vp;
		vp->queues[i].index = i;
		vp->queues[i].notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (vp->queues[i].notify_fd < 0)
			return -errno;
		/* An external device's notify fds are its backend's kick fds. */
		if (host->watch && !ops->external_queues) {
			int ret = host->watch(host->ctx, i, vp->queues[i].notify_fd,
					      vp_notify_ready, &vp->queues[i]);
			if (ret < 0)
				return ret;
		}
	}
	int ret = pci_device_add_bar(&vp->pci, 0, PCI_BAR_MEM32, VIRTIO_PCI_BAR0_SIZE, false,
				     virtio_pci_bar_read, virtio_pci_bar_write, vp);
	if (ret)
		return ret;
	const uint8_t cap = sizeof(struct virtio_pci_cap);
	if (!vp_add_cap(vp, VIRTIO_PCI_CAP_COMMON_CFG, cap, VIRTIO_PCI_COMMON_OFF, CC_SIZE) ||
	    !vp_add_cap(vp, VIRTIO_PCI_CAP_ISR_CFG, cap, VIRTIO_PCI_ISR_OFF, 1) ||
	    !vp_add_cap(vp, VIRTIO_PCI_CAP_DEVICE_CFG, cap, VIRTIO_PCI_DEVICE_OFF,
			ops->config_size ? ops->config_size : 4))
		return -ENOSPC;
	uint8_t n = vp_add_cap(vp, VIRTIO_PCI_CAP_NOTIFY_CFG, sizeof(struct virtio_pci_notify_cap),
			       VIRTIO_PCI_NOTIFY_OFF, nq * VIRTIO_PCI_NOTIFY_MULT);
	if (!n)
		return -ENOSPC;
	pci_cfg_set32(&vp->pci, n + VIRTIO_PCI_NOTIFY_CAP_MULT, VIRTIO_PCI_NOTIFY_MULT);
	vp->cfg_cap =
	    vp_add_cap(vp, VIRTIO_PCI_CAP_PCI_CFG, sizeof(struct virtio_pci_cfg_cap), 0, 0);
	if (!vp->cfg_cap)
		return -ENOSPC;
	/* cap.bar, cap.offset, cap.length and pci_cfg_data are the driver's. */
	vp->pci.wmask[vp->cfg_cap + VIRTIO_PCI_CAP_BAR] = 0xFF;
	memset(&vp->pci.wmask[vp->cfg_cap + VIRTIO_PCI_CAP_OFFSET], 0xFF,
	       sizeof(struct virtio_pci_cfg_cap) - VIRTIO_PCI_CAP_OFFSET);
	/* One vector per queue and one for configuration changes: what Linux's
	 * vp_find_vqs_msix() asks for first. Last, after the vendor caps. */
	ret = msix_init(&vp->msix, &vp->pci, irq, mode, nq + 1, VIRTIO_PCI_MSIX_BAR);
	if (!ret && ops->external_queues)
		ret = vp_calls_init(vp);
	if (ret)
		return ret;
	lock_take(&vp->lock);
	vp_reset_locked(vp);
	lock_release(&vp->lock);
	return 0;
}

void virtio_pci_destroy(struct virtio_pci *vp)
{
	/* Never initialized (a kind's set-up failed before plugging it): its
	 * zeroed descriptors are not its own. */
	if (!vp->dev)
		return;
	if (vp->started) {
		lock_take(&vp->lock);
		vp_lock_all_queues(vp);
		vp_stop_locked(vp);
		vp_unlock_all_queues(vp);
		lock_release(&vp->lock);
	}
	vp_calls_destroy(vp);
	for (unsigned i = 0; i < VIRTIO_MAX_QUEUES; i++)
		if (vp->queues[i].owner && vp->queues[i].notify_fd >= 0)
			close(vp->queues[i].notify_fd);
	msix_destroy(&vp->msix);
}
