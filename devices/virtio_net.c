#include "virtio_net.h"

#include "net_tap.h"
#include "vmm/base/err.h"
#include "vmm/base/log.h"

#include <errno.h>
#include <linux/virtio_net.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

enum { NET_RXQ = 0, NET_TXQ = 1 };
#define NET_F(bit) (1ULL << (bit))

static void net_config_read(struct virtio_dev *d, unsigned off, void *data, unsigned len)
{
	struct virtio_net *n = d->priv;
	struct virtio_net_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	memcpy(cfg.mac, n->mac, 6);
	cfg.status = VIRTIO_NET_S_LINK_UP;
	cfg.max_virtqueue_pairs = 1;
	memcpy(data, (uint8_t *)&cfg + off, len);
}

/*
 * Delivers the waiting frame into receive buffers; with MRG_RXBUF it may
 * span several, and num_buffers in the first header says how many
 * (5.1.6.4). First counts whether the posted buffers can hold it (giving
 * them back if not, so no partial frame is ever used: 5.1.6.4.2), then
 * fills them. Returns false when the guest has no room yet. Locked.
 */
static bool net_deliver_frame(struct virtio_net *n)
{
	struct virtq *q = &n->vdev.vqs[NET_RXQ];
	bool mrg = virtio_has_feature(&n->vdev, VIRTIO_NET_F_MRG_RXBUF);
	uint64_t room = 0;
	uint16_t need = 0;
	int ret = 0;
	bool unusable = false;
	while (room < n->frame_len && need < q->size && (ret = virtq_pop(q, n->elem)) == 1) {
		need++;
		if (need == 1 &&
		    (n->elem->nin == 0 || n->elem->in[0].iov_len < VIRTIO_NET_HDR_LEN)) {
			unusable = true; /* the header must fit in the first buffer */
			break;
		}
		room += n->elem->in_len;
		if (!mrg)
			break;
	}
	virtq_unpop(q, need);
	if (ret < 0) {
		virtio_needs_reset(&n->vdev, virtq_error_name(ret));
		return false;
	}
	if (unusable) {
		virtio_needs_reset(&n->vdev, "receive buffer smaller than the 12-byte header");
		return false;
	}
	if (room < n->frame_len) {
		/* Too small for good (one buffer without MRG_RXBUF, or the whole
		 * ring): drop the frame. Else wait until the guest posts more. */
		if (ret == 0 && (mrg || need == 0) && need < q->size)
			return false;
		atomic_fetch_add(&n->rx_dropped, 1);
		n->frame_len = 0;
		return true;
	}
	size_t off = 0;
	uint8_t *first_hdr = NULL;
	for (uint16_t i = 0; i < need; i++) {
		if (virtq_pop(q, n->elem) != 1)
			break; /* the guest rewrote its ring under us: stop */
		if (i == 0 && n->elem->nin && n->elem->in[0].iov_len >= VIRTIO_NET_HDR_LEN)
			first_hdr = n->elem->in[0].iov_base;
		uint64_t done =
		    buf_to_iov(n->elem->in, n->elem->nin, 0, n->frame + off, n->frame_len - off);
		off += done;
		virtq_push(q, n->elem->head, (uint32_t)done);
	}
	/* num_buffers: little-endian u16 at offset 10 of the first header. */
	uint8_t nb[2] = {(uint8_t)need, (uint8_t)(need >> 8)};
	if (first_hdr)
		memcpy(first_hdr + 10, nb, 2);
	atomic_fetch_add(&n->rx_frames, 1);
	n->frame_len = 0;
	return true;
}

/* A tap deleted under us (ip link del) leaves our file detached: tun then
 * answers every read and write with EBADFD, and nothing can attach it
 * again. The device cannot go on (2.1.2): NEEDS_RESET, also after each
 * reset, and no more buffers are used; the VMM and other devices go on.
 * Locked. */
static void net_note_tap_error(struct virtio_net *n)
{
	if (errno == EBADFD)
		n->tap_gone = true;
}

static bool net_check_tap_gone(struct virtio_net *n)
{
	if (n->tap_gone) {
		char why[IFNAMSIZ + 48];
		snprintf(why, sizeof(why), "tap %s is gone (deleted on the host)", n->ifname);
		virtio_needs_reset(&n->vdev, why);
	}
	return n->tap_gone;
}

/* Reads frames from the tap while the guest has room. Locked. */
static void net_rx(struct virtio_net *n)
{
	uint16_t used_before = n->vdev.vqs[NET_RXQ].used_idx;
	if (!n->vdev.vqs[NET_RXQ].size)
		return;
	for (;;) {
		if (n->frame_len == 0) {
			ssize_t r = read(n->tap_fd, n->frame, VIRTIO_NET_FRAME_MAX);
			if (r < 0)
				net_note_tap_error(n);
			if (r <= VIRTIO_NET_HDR_LEN)
				break; /* EAGAIN, error, or a runt */
			n->frame_len = (size_t)r;
		}
		if (!net_deliver_frame(n))
			break;
	}
	virtio_queue_end_pass(&n->vdev, NET_RXQ, 0, used_before);
}

/* A transmit buffer: header and frame go to the tap as they are (the tap
 * takes the same vnet header). */
static uint32_t net_tx(void *ctx, const struct virtq_elem *e)
{
	struct virtio_net *n = ctx;
	if (e->out_len < VIRTIO_NET_HDR_LEN || writev(n->tap_fd, e->out, (int)e->nout) < 0) {
		if (e->out_len >= VIRTIO_NET_HDR_LEN) {
			int err = errno;
			net_note_tap_error(n);
			/* Said once (a down link fails every frame); --stats counts. */
			if (!n->tx_warned && !n->tap_gone)
				log_warn(n->log,
					 "virtio-net: sending to tap %s failed: %s%s (further "
					 "failures are counted in --stats tx-errors)",
					 n->ifname, strerror(err),
					 err == EIO ? " (is the link down?)" : "");
			n->tx_warned = true;
		}
		atomic_fetch_add(&n->tx_errors, 1);
	} else {
		atomic_fetch_add(&n->tx_frames, 1);
	}
	return 0;
}

static void net_notify(struct virtio_dev *d, unsigned qi)
{
	struct virtio_net *n = d->priv;
	if (net_check_tap_gone(n))
		return;
	if (qi == NET_RXQ)
		net_rx(n);
	else
		virtio_queue_serve(d, NET_TXQ, n->elem, net_tx, n);
	net_check_tap_gone(n);
}

static void net_reset(struct virtio_dev *d)
{
	struct virtio_net *n = d->priv;
	n->frame_len = 0;
}

void virtio_net_tap_ready(struct virtio_net *n)
{
	virtio_lock(&n->vdev);
	if (n->vdev.vqs[NET_RXQ].size && virtio_live(&n->vdev))
		net_rx(n);
	else {
		/* Not running: drain and drop, so the tap does not stay readable. */
		ssize_t r;
		while ((r = read(n->tap_fd, n->frame, VIRTIO_NET_FRAME_MAX)) > 0)
			atomic_fetch_add(&n->rx_dropped, 1);
		if (r < 0)
			net_note_tap_error(n);
	}
	net_check_tap_gone(n);
	virtio_unlock(&n->vdev);
}

static const struct virtio_dev_ops net_ops = {
    .type = VIRTIO_ID_NET,
    .pci_class = 0x020000,
    .features =
	NET_F(VIRTIO_NET_F_MAC) | NET_F(VIRTIO_NET_F_MRG_RXBUF) | NET_F(VIRTIO_NET_F_STATUS),
    .num_queues = 2,
    .queue_max = VIRTIO_NET_QUEUE_MAX,
    /* mac, status, max_virtqueue_pairs: what the offered features use. */
    .config_size = offsetof(struct virtio_net_config, mtu),
    .config_read = net_config_read,
    .queue_notify = net_notify,
    .reset = net_reset,
};

int virtio_net_init(struct virtio_net *n, const char *tap_name, const uint8_t *mac, struct log *log,
		    struct err *e)
{
	memset(n, 0, sizeof(*n));
	n->tap_fd = -1;
	n->log = log;
	n->vdev.ops = &net_ops;
	n->vdev.priv = n;
	n->elem = malloc(sizeof(*n->elem));
	n->frame = malloc(VIRTIO_NET_FRAME_MAX);
	if (!n->elem || !n->frame)
		return err_set(e, ERR_HOST, "out of memory");
	n->tap_fd = net_tap_open(tap_name, n->ifname, &n->tap_created, e);
	if (n->tap_fd < 0)
		return -1;
	if (mac) {
		memcpy(n->mac, mac, 6);
	} else {
		/* Locally administered, unicast, stable for a tap name. */
		uint32_t h = 2166136261u;
		for (const char *p = n->ifname; *p; p++)
			h = (h ^ (uint8_t)*p) * 16777619u;
		uint8_t m[6] = {0x52,	   0x54, 0x00, (uint8_t)(h >> 16), (uint8_t)(h >> 8),
				(uint8_t)h};
		memcpy(n->mac, m, 6);
	}
	return 0;
}

void virtio_net_destroy(struct virtio_net *n)
{
	if (n->tap_fd >= 0)
		close(n->tap_fd);
	free(n->elem);
	free(n->frame);
	n->elem = NULL;
	n->frame = NULL;
	n->tap_fd = -1;
}
