/* The virtio-pci transport's glue shared by every virtio kind: KVM_IOEVENTFD
 * and the loop watches through the device host, the transport's stats. */
#include "vmm/kinds/virtio.h"

#include "vmm/base/err.h"
#include "vmm/base/stat.h"
#include "vmm/host/event_loop.h"

#include <errno.h>
#include <string.h>

struct event_loop *virtio_queue_loop(const struct virtio_instance *v, unsigned q)
{
	struct event_loop *l = q < VIRTIO_MAX_QUEUES ? v->loop[q] : NULL;
	return l ? l : v->host->main_loop;
}

void virtio_assign_loops(const struct virtio_instance *v, struct event_loop **group_loop,
			 unsigned ngroups)
{
	for (unsigned g = 0; g < ngroups; g++)
		group_loop[g] = v->host->next_loop(v->host->ctx);
}

static int virtio_ioeventfd(void *ctx, uint64_t gpa, unsigned len, int fd, bool assign)
{
	const struct device_host *h = ((struct virtio_instance *)ctx)->host;
	return h->ioeventfd ? h->ioeventfd(h->ctx, gpa, len, fd, assign) : -ENOSYS;
}

/* A queue's notify eventfd goes to the loop that owns the queue. */
static int virtio_watch(void *ctx, unsigned q, int fd, void (*ready)(void *arg), void *arg)
{
	return event_loop_watch(virtio_queue_loop(ctx, q), fd, false, ready, arg);
}

/* A call fd bound as an irqfd is KVM's: its loop stops looking at it. */
static int virtio_watch_set(void *ctx, unsigned q, int fd, bool on)
{
	return event_loop_watch_set(virtio_queue_loop(ctx, q), fd, on);
}

/* A pass cut short at its budget comes back at the end of its loop's pass. */
static int virtio_defer(void *ctx, unsigned q, void (*fn)(void *arg), void *arg)
{
	return event_loop_defer(virtio_queue_loop(ctx, q), fn, arg);
}

int virtio_instance_plug(struct virtio_instance *v, struct virtio_dev *dev, const char *name,
			 uint8_t slot, struct err *e)
{
	const struct device_host *h = v->host;
	struct virtio_host vh = {virtio_ioeventfd, virtio_watch,    virtio_defer, v,
				 h->log,	   virtio_watch_set};
	int ret = virtio_pci_init(&v->vp, dev, name, h->irq, h->mem, &vh, h->irq_mode);
	if (!ret)
		ret = pci_bus_add_device(h->pci, &v->vp.pci, slot, 1);
	if (ret)
		return err_set(e, ERR_HOST, "cannot create %s: %s", name, strerror(-ret));
	return 0;
}

void virtio_print_transport_stats(const struct vm_device *d, FILE *out)
{
	const struct virtio_instance *v = d->state;
	fprintf(out, "vmm: stats: %s (slot %u): notifies %llu, interrupts %llu, broken %llu\n",
		d->name, d->slot, STAT(v->vp.notifies), STAT(v->vp.interrupts), STAT(v->vp.broken));
	for (unsigned q = 0; q < v->vp.nq; q++) {
		const struct virtio_pci_queue *pq = &v->vp.queues[q];
		char vec[24];
		unsigned last = atomic_load(&pq->last_vector);
		if (last == VIRTIO_PCI_LAST_INTX)
			snprintf(vec, sizeof(vec), "INTx");
		else if (last == VIRTIO_PCI_LAST_NONE)
			snprintf(vec, sizeof(vec), "none");
		else
			snprintf(vec, sizeof(vec), "MSI-X %u", last);
		/* An external queue: interrupts are those the VMM raised from the
		 * backend's calls; a bound call fd's go by KVM alone. */
		char call[64] = "";
		uint16_t bound = atomic_load(&pq->call.bound);
		if (pq->call.fd >= 0 && bound != VIRTIO_MSI_NO_VECTOR)
			snprintf(call, sizeof(call),
				 ", calls %llu, irqfd binds %llu (on vector %u)",
				 STAT(pq->call.served), STAT(pq->call.binds), bound);
		else if (pq->call.fd >= 0)
			snprintf(call, sizeof(call), ", calls %llu, irqfd binds %llu",
				 STAT(pq->call.served), STAT(pq->call.binds));
		fprintf(out,
			"vmm: stats: %s queue %u (%s): vector %s, notifies %llu, requests %llu, "
			"interrupts %llu%s\n",
			d->name, q, virtio_queue_loop(v, q)->name, vec, STAT(pq->notifies),
			STAT(pq->requests), STAT(pq->interrupts), call);
	}
}
