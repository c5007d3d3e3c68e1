/*
 * virtio-net (virtio 1.2, section 5.1) on a tap: a receive and a transmit
 * queue, the MAC in config, link status, mergeable receive buffers
 * (VIRTIO_NET_F_MRG_RXBUF). The 12-byte header passes between guest and
 * tap unchanged (the tap speaks the same vnet header). Receive is served on
 * the I/O thread when the tap is readable or the guest posts buffers.
 */
#ifndef DEVICES_VIRTIO_NET_H
#define DEVICES_VIRTIO_NET_H

#include "virtio.h"

#include <linux/if.h>
#include <stdatomic.h>

#define VIRTIO_NET_QUEUE_MAX 256
#define VIRTIO_NET_HDR_LEN   12
#define VIRTIO_NET_FRAME_MAX (65536 + VIRTIO_NET_HDR_LEN)

struct virtio_net {
	struct virtio_dev vdev;
	int tap_fd;
	char ifname[IFNAMSIZ];
	uint8_t mac[6];
	struct virtq_elem *elem;
	uint8_t *frame; /* one frame read from the tap, waiting for buffers */
	size_t frame_len;
	bool tap_gone;	  /* deleted on the host: tun answers EBADFD from now on */
	bool tap_created; /* made (and brought up) by us */
	bool tx_warned;	  /* a failed transmit was reported (once) */
	struct log *log;
	atomic_uint_fast64_t rx_frames, tx_frames, rx_dropped, tx_errors;
};

struct err;
struct log;
/* mac NULL: a locally administered address derived from the tap name. */
int virtio_net_init(struct virtio_net *n, const char *tap_name, const uint8_t *mac, struct log *log,
		    struct err *e);
/* The I/O thread: the tap is readable. */
void virtio_net_tap_ready(struct virtio_net *n);
void virtio_net_destroy(struct virtio_net *n);

#endif
