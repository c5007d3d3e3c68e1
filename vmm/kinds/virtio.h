/*
 * What every virtio kind's glue (vmm/kinds/blk.c, device_net.c,
 * device_rng.c, device_console.c) shares: a virtio device behind its
 * virtio-pci transport, the loop serving each queue, and the transport's
 * --stats lines. A kind embeds `struct virtio_instance` first in its own
 * state.
 */
#ifndef VMM_DEVICE_VIRTIO_H
#define VMM_DEVICE_VIRTIO_H

#include "vmm/kinds/host.h"
#include "vmm/kinds/registry.h"

#include "devices/virtio/virtio_pci.h"

#include <stdio.h>

struct virtio_instance {
	struct virtio_pci vp;
	const struct device_host *host;
	struct event_loop *loop[VIRTIO_MAX_QUEUES]; /* NULL: the main loop */
};

/* The loop serving queue q. */
struct event_loop *virtio_queue_loop(const struct virtio_instance *v, unsigned q);
/* The loops of `ngroups` queue groups (a blk request queue, a net pair),
 * the I/O threads round robin. */
void virtio_assign_loops(const struct virtio_instance *v, struct event_loop **group_loop,
			 unsigned ngroups);
/* Puts the device on the bus behind a virtio-pci transport, last (a
 * device on the bus is never taken back). 0 or -1 with an error. */
int virtio_instance_plug(struct virtio_instance *v, struct virtio_dev *dev, const char *name,
			 uint8_t slot, struct err *e);
/* The device's line, then one per queue: its loop, the vector its
 * interrupts went to (or INTx), notifies, requests and interrupts. */
void virtio_print_transport_stats(const struct vm_device *d, FILE *out);

#endif
