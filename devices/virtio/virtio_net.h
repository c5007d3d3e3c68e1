/*
 * virtio-net (virtio 1.2, section 5.1) on a tap: receive and transmit
 * queues, the MAC in config, link status, mergeable receive buffers
 * (VIRTIO_NET_F_MRG_RXBUF). The 12-byte header passes between guest and
 * tap unchanged (the tap speaks the same vnet header). Receive is served on
 * the I/O thread when the tap is readable or the guest posts buffers.
 *
 * Multiqueue (more than one queue pair): VIRTIO_NET_F_MQ and
 * VIRTIO_NET_F_CTRL_VQ are offered, the queues are receiveq1, transmitq1,
 * ..., receiveqN, transmitqN, controlq (5.1.2), and the tap is opened
 * with IFF_MULTI_QUEUE, one file per pair, so each pair is served by its
 * own I/O thread with no state shared with the others. Only the first pair
 * carries traffic until the driver sends VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET
 * (5.1.6.5.5); the tap's queues of the pairs not in use are detached
 * (TUNSETQUEUE), so the host kernel steers no frames to them.
 */
#ifndef DEVICES_VIRTIO_NET_H
#define DEVICES_VIRTIO_NET_H

#include "devices/virtio/virtio.h"

#include <linux/if.h>
#include <stdatomic.h>

#define VIRTIO_NET_QUEUE_MAX 256
#define VIRTIO_NET_HDR_LEN   12
#define VIRTIO_NET_FRAME_MAX (65536 + VIRTIO_NET_HDR_LEN)
#define VIRTIO_NET_MAX_PAIRS ((VIRTIO_MAX_QUEUES - 1) / 2)

struct virtio_net;

/* One queue pair and its tap file: receive state under the receive
 * queue's lock, transmit state under the transmit queue's. */
struct virtio_net_pair {
	struct virtio_net *net;
	unsigned index;
	int tap_fd;
	atomic_bool attached; /* its tap queue is attached (TUNSETQUEUE) */
	struct virtq_elem *rx_elem, *tx_elem;
	uint8_t *frame; /* one frame read from the tap, waiting for buffers */
	size_t frame_len;
};

struct virtio_net {
	struct virtio_dev vdev;
	char ifname[IFNAMSIZ];
	uint8_t mac[6];
	unsigned npairs;	/* queue pairs offered (max_virtqueue_pairs) */
	atomic_uint curr_pairs; /* in use: 1 until VQ_PAIRS_SET (5.1.6.5.5) */
	atomic_uint pairs_set;	/* the last VQ_PAIRS_SET accepted (0: none), for --stats */
	struct virtio_net_pair pairs[VIRTIO_NET_MAX_PAIRS];
	struct virtq_elem *ctrl_elem; /* under the control queue's lock */
	atomic_bool tap_gone;	      /* deleted on the host: tun answers EBADFD from now on */
	bool tap_created;	      /* made (and brought up) by us */
	atomic_bool tx_warned;	      /* a failed transmit was reported (once) */
	struct log *log;
	atomic_uint_fast64_t rx_frames, tx_frames, rx_dropped, tx_errors;
	atomic_uint_fast64_t ctrl_ok, ctrl_err; /* control commands answered OK / ERR */
	atomic_uint_fast64_t pairs_applied;	/* control passes that applied a pair count */
};

struct err;
struct log;
/* mac NULL: a locally administered address derived from the tap name.
 * `pairs` queue pairs (1..VIRTIO_NET_MAX_PAIRS). */
int virtio_net_init(struct virtio_net *n, const char *tap_name, const uint8_t *mac, unsigned pairs,
		    struct log *log, struct err *e);
/* Queue index of pair p's receive / transmit queue, and of the control
 * queue (multiqueue only). */
static inline unsigned virtio_net_rxq(unsigned p)
{
	return 2 * p;
}
static inline unsigned virtio_net_txq(unsigned p)
{
	return 2 * p + 1;
}
static inline unsigned virtio_net_ctrlq(const struct virtio_net *n)
{
	return 2 * n->npairs;
}
/* The I/O thread of pair p: its tap file is readable. */
void virtio_net_tap_ready(struct virtio_net_pair *p);
void virtio_net_destroy(struct virtio_net *n);

#endif
