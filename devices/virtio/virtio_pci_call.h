/*
 * The interrupts of queues another process serves (virtio.h
 * external_queues; vhost-user), part of the virtio-pci transport. The
 * backend writes a queue's call eventfd, which the transport owns; where
 * that write goes follows the guest's MSI-X state (PCI Local Bus 3.0
 * 6.8.2, virtio 1.2 4.1.5):
 *  - MSI-X on, the queue's vector unmasked with its route in KVM, irqfd
 *    delivery: the fd is bound to the vector's GSI (KVM_IRQFD) and the VMM
 *    neither watches nor reads it, so no hop through the VMM;
 *  - otherwise the queue's loop watches the fd and raises the queue's
 *    interrupt as an in-process device does: the vector (its PBA bit while
 *    masked, sent once on unmask by irq/), nothing for NO_VECTOR, or the
 *    ISR queue bit and INTx with MSI-X off.
 * Transitions, on the vCPU thread of the guest access, before it returns:
 * on mask (or a vector or MSI-X change) unbind, then read the counter and
 * raise what raced the unbind (it pends); on unmask irq/ has sent what
 * was pending, then the counter is read and raised, then the fd is bound.
 * The configuration's call fd is always the VMM's: 4.1.4.5.1 wants the
 * ISR's configuration bit set before the notification, which a write
 * straight to KVM cannot do (and configuration changes are rare).
 *
 * Locks: a queue's binding and its call handler are under the queue's
 * lock; a rebinding also holds the configuration lock, so they are
 * serialized with every register write that moves the queue's vector.
 */
#ifndef DEVICES_VIRTIO_PCI_CALL_H
#define DEVICES_VIRTIO_PCI_CALL_H

#include "devices/virtio/virtio_pci.h"

/* At init, for an external-queue device: the call fds, watched by the
 * queues' loops, and the MSI-X listener. 0 or -errno. */
int vp_calls_init(struct virtio_pci *vp);
/* Closes them (unbinding what is bound). */
void vp_calls_destroy(struct virtio_pci *vp);
/* The configuration lock and q's held: binds or unbinds q's call fd as q's
 * vector now asks. */
void vp_call_sync_locked(struct virtio_pci *vp, struct virtio_pci_queue *q);

/* From virtio_pci.c: queue q's interrupt (q locked), and the
 * configuration's (any lock above the ISR lock, or none), as the
 * transport raises them for an in-process device. */
void vp_raise_queue_locked(struct virtio_pci *vp, struct virtio_pci_queue *q);
void vp_raise_config(struct virtio_pci *vp);

#endif
