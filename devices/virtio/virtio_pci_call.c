/* The call eventfds of an external-queue device (virtio_pci_call.h). */
#include "devices/virtio/virtio_pci_call.h"

#include "vmm/base/log.h"

#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

static void vp_call_watch(struct virtio_pci *vp, unsigned key, int fd, bool on)
{
	if (vp->host.watch_set && vp->host.watch_set(vp->host.ctx, key, fd, on) < 0)
		log_warn(vp->host.log, "%s: cannot %s the call fd of %u", vp->pci.name,
			 on ? "watch" : "unwatch", key);
}

/* q locked: what the backend wrote since the last read, raised as q's
 * interrupt (served from DRIVER_OK to reset only: a write after the reset
 * is for a driver that has gone). */
static void vp_call_drain_locked(struct virtio_pci *vp, struct virtio_pci_queue *q)
{
	uint64_t n;
	lock_assert_held(&q->lock);
	if (read(q->call.fd, &n, sizeof(n)) != sizeof(n))
		return; /* nothing (KVM took it, or nothing came) */
	atomic_fetch_add(&q->call.served, 1);
	if (q->live)
		vp_raise_queue_locked(vp, q);
}

/* Queue q's loop: its call fd is readable. The queue's lock is all this
 * path takes of the transport. */
static void vp_call_ready(void *arg)
{
	struct virtio_pci_queue *q = arg;
	lock_take_nested(&q->lock, q->index);
	vp_call_drain_locked(q->owner, q);
	lock_release(&q->lock);
}

/* The configuration's call fd: a configuration change (4.1.4.3: the
 * generation moves with it). */
static void vp_config_call_ready(void *arg)
{
	struct virtio_pci *vp = arg;
	uint64_t n;
	if (read(vp->config_call.fd, &n, sizeof(n)) != sizeof(n))
		return;
	atomic_fetch_add(&vp->config_call.served, 1);
	if (atomic_load(&vp->status) & VIRTIO_CONFIG_S_DRIVER_OK) {
		atomic_fetch_add(&vp->config_generation, 1);
		vp_raise_config(vp);
	}
}

void vp_call_sync_locked(struct virtio_pci *vp, struct virtio_pci_queue *q)
{
	struct virtio_pci_call *c = &q->call;
	lock_assert_held(&vp->lock);
	lock_assert_held(&q->lock);
	if (c->fd < 0)
		return;
	uint16_t want = q->msix_vector, bound = atomic_load(&c->bound);
	if (bound != VIRTIO_MSI_NO_VECTOR) {
		if (bound == want && msix_fd_bindable(&vp->msix, want))
			return; /* still what KVM should do with it */
		/* PCI 3.0 6.8.2.9: a masked vector sends nothing. KVM does not
		 * look at the mask, so off KVM first, then what raced it pends. */
		msix_unbind_fd(&vp->msix, bound, c->fd);
		atomic_store(&c->bound, VIRTIO_MSI_NO_VECTOR);
		vp_call_watch(vp, q->index, c->fd, true);
	}
	/* Delivered now (or pended) before KVM takes the fd over: nothing is
	 * lost, nothing is sent twice. */
	vp_call_drain_locked(vp, q);
	if (want == VIRTIO_MSI_NO_VECTOR || msix_bind_fd(&vp->msix, want, c->fd) != 0)
		return; /* watched: masked, MSI-X off, INTx, KVM_SIGNAL_MSI, or no vector */
	atomic_store(&c->bound, want);
	atomic_fetch_add(&c->binds, 1);
	vp_call_watch(vp, q->index, c->fd, false);
}

/* The MSI-X listener: vector n (or all) may deliver differently now. */
static void vp_calls_vector_changed(void *opaque, unsigned n)
{
	struct virtio_pci *vp = opaque;
	lock_take(&vp->lock);
	for (unsigned i = 0; i < vp->nq; i++) {
		struct virtio_pci_queue *q = &vp->queues[i];
		if (n != MSIX_ALL_VECTORS && q->msix_vector != n &&
		    atomic_load(&q->call.bound) != n)
			continue;
		lock_take_nested(&q->lock, i);
		vp_call_sync_locked(vp, q);
		lock_release(&q->lock);
	}
	lock_release(&vp->lock);
}

static int vp_call_open(struct virtio_pci *vp, struct virtio_pci_call *c, unsigned key,
			void (*ready)(void *arg), void *arg)
{
	c->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->fd < 0)
		return -errno;
	atomic_store(&c->bound, VIRTIO_MSI_NO_VECTOR);
	return vp->host.watch ? vp->host.watch(vp->host.ctx, key, c->fd, ready, arg) : 0;
}

int vp_calls_init(struct virtio_pci *vp)
{
	for (unsigned i = 0; i < vp->nq; i++) {
		int ret = vp_call_open(vp, &vp->queues[i].call, i, vp_call_ready, &vp->queues[i]);
		if (ret < 0)
			return ret;
	}
	int ret =
	    vp_call_open(vp, &vp->config_call, VIRTIO_PCI_CONFIG_WATCH, vp_config_call_ready, vp);
	if (ret < 0)
		return ret;
	msix_listen(&vp->msix, vp_calls_vector_changed, vp);
	return 0;
}

void vp_calls_destroy(struct virtio_pci *vp)
{
	for (unsigned i = 0; i < VIRTIO_MAX_QUEUES; i++) {
		struct virtio_pci_call *c = &vp->queues[i].call;
		uint16_t bound = atomic_load(&c->bound);
		if (c->fd >= 0 && bound != VIRTIO_MSI_NO_VECTOR)
			msix_unbind_fd(&vp->msix, bound, c->fd);
		if (c->fd >= 0)
			close(c->fd);
		c->fd = -1;
	}
	if (vp->config_call.fd >= 0)
		close(vp->config_call.fd);
	vp->config_call.fd = -1;
}
