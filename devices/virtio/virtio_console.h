/*
 * virtio-console (virtio 1.2, section 5.3), one port, no multiport: the
 * guest's hvc0. Transmitted bytes go to the machine's console sink; host
 * input waits in a small buffer until the guest posts receive buffers.
 */
#ifndef DEVICES_VIRTIO_CONSOLE_H
#define DEVICES_VIRTIO_CONSOLE_H

#include "devices/virtio/virtio.h"
#include "vmm/base/machine_ctl.h"

#include <stdatomic.h>
#include <stddef.h>

#define VIRTIO_CONSOLE_RX_CAP 4096

struct virtio_console {
	struct virtio_dev vdev;
	struct char_sink out;
	struct virtq_elem *elem, *tx_elem; /* receive, transmit (each under its queue's lock) */
	uint8_t rx[VIRTIO_CONSOLE_RX_CAP]; /* under the receive queue's lock */
	size_t rx_head, rx_count;
	atomic_uint_fast64_t tx_bytes, rx_bytes, rx_dropped;
	atomic_uint_fast64_t tx_dropped; /* bytes past VIRTIO_REQUEST_BYTES_MAX of one buffer */
};

int virtio_console_init(struct virtio_console *c, struct char_sink out);
/* Host input (main loop); returns bytes accepted into the buffer. */
size_t virtio_console_receive(struct virtio_console *c, const uint8_t *buf, size_t len);
void virtio_console_destroy(struct virtio_console *c);

#endif
