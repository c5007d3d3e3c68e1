#include "devices/virtio/virtio_net.h"

#include "devices/backends/net_tap.h"
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

#define NET_F(bit) (1ULL << (bit))

static void net_config_read(struct virtio_dev *d, unsigned off, void *data, unsigned len)
{
	struct virtio_net *n = d->priv;
	struct virtio_net_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	memcpy(cfg.mac, n->mac, 6);
	cfg.status = VIRTIO_NET_S_LINK_UP;
	cfg.max_virtqueue_pairs = (uint16_t)n->npairs; /* 5.1.4: read with VIRTIO_NET_F_MQ */
	memcpy(data, (uint8_t *)&cfg + off, len);
}

/*
 * Delivers the pair's waiting frame into its receive buffers; with
 * MRG_RXBUF it may span several, and num_buffers in the first header says
 * how many (5.1.6.4). First counts whether the posted buffers can hold it
 * (giving them back if not, so no partial frame is ever used: 5.1.6.4.2),
 * then fills them. Returns false when the guest has no room yet. Receive
 * queue locked.
 */
static bool net_deliver_frame(struct virtio_net_pair *p)
{
	struct virtio_net *n = p->net;
	struct virtq *q = &n->vdev.vqs[virtio_net_rxq(p->index)];
	struct virtq_elem *elem = p->rx_elem;
	bool mrg = virtio_has_feature(&n->vdev, VIRTIO_NET_F_MRG_RXBUF);
	uint64_t room = 0;
	uint16_t need = 0;
	int ret = 0;
	bool unusable = false;
	while (room < p->frame_len && need < q->size && (ret = virtq_pop(q, elem)) == 1) {
		need++;
		if (need == 1 && (elem->nin == 0 || elem->in[0].iov_len < VIRTIO_NET_HDR_LEN)) {
			unusable = true; /* the header must fit in the first buffer */
			break;
		}
		room += elem->in_len;
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
	if (room < p->frame_len) {
		/* Too small for good (one buffer without MRG_RXBUF, or the whole
		 * ring): drop the frame. Else wait until the guest posts more. */
		if (ret == 0 && (mrg || need == 0) && need < q->size)
			return false;
		atomic_fetch_add(&n->rx_dropped, 1);
		p->frame_len = 0;
		return true;
	}
	size_t off = 0;
	uint8_t *first_hdr = NULL;
	for (uint16_t i = 0; i < need; i++) {
		if (virtq_pop(q, elem) != 1)
			break; /* the guest rewrote its ring under us: stop */
		if (i == 0 && elem->nin && elem->in[0].iov_len >= VIRTIO_NET_HDR_LEN)
			first_hdr = elem->in[0].iov_base;
		uint64_t done =
		    buf_to_iov(elem->in, elem->nin, 0, p->frame + off, p->frame_len - off);
		off += done;
		virtq_fill(q, elem->head, (uint32_t)done);
	}
	/* num_buffers: little-endian u16 at offset 10 of the first header. */
	uint8_t nb[2] = {(uint8_t)need, (uint8_t)(need >> 8)};
	if (first_hdr)
		memcpy(first_hdr + 10, nb, 2);
	atomic_fetch_add(&n->rx_frames, 1);
	p->frame_len = 0;
	return true;
}

/* A tap deleted under us (ip link del) leaves our files detached: tun then
 * answers every read and write with EBADFD, and nothing can attach them
 * again. The device cannot go on (2.1.2): NEEDS_RESET, also after each
 * reset, and no more buffers are used; the VMM and other devices go on.
 * A queue we detached ourselves (a pair not in use) answers EBADFD too:
 * that is not a gone tap. */
static void net_note_tap_error(struct virtio_net_pair *p)
{
	if (errno == EBADFD && atomic_load(&p->attached))
		atomic_store(&p->net->tap_gone, true);
}

static bool net_check_tap_gone(struct virtio_net *n)
{
	bool gone = atomic_load(&n->tap_gone);
	if (gone) {
		char why[IFNAMSIZ + 48];
		snprintf(why, sizeof(why), "tap %s is gone (deleted on the host)", n->ifname);
		virtio_needs_reset(&n->vdev, why);
	}
	return gone;
}

/* 5.1.6.5.5: receive only on the pairs in use. */
static bool net_pair_in_use(const struct virtio_net_pair *p)
{
	return p->index < atomic_load(&p->net->curr_pairs);
}

/* Reads frames from the pair's tap file while the guest has room. Receive
 * queue locked. */
static void net_rx(struct virtio_net_pair *p)
{
	struct virtio_net *n = p->net;
	unsigned qi = virtio_net_rxq(p->index);
	uint16_t used_before = n->vdev.vqs[qi].used_idx;
	struct virtio_budget budget = virtio_budget_pass();
	if (!n->vdev.vqs[qi].size)
		return;
	while (net_pair_in_use(p)) {
		if (!virtio_budget_left(&budget)) {
			/* More may wait in the tap (edge-triggered): after the pass. */
			virtio_queue_yield(&n->vdev, qi);
			break;
		}
		if (p->frame_len == 0) {
			ssize_t r = read(p->tap_fd, p->frame, VIRTIO_NET_FRAME_MAX);
			if (r < 0)
				net_note_tap_error(p);
			if (r <= VIRTIO_NET_HDR_LEN)
				break; /* EAGAIN, error, or a runt */
			p->frame_len = (size_t)r;
		}
		size_t len = p->frame_len;
		if (!net_deliver_frame(p))
			break;
		virtio_budget_spend(&budget, len);
	}
	/* One used-index update and one interrupt decision for the batch. */
	virtio_queue_end_pass(&n->vdev, qi, 0, used_before);
}

/* A transmit buffer: its frame goes to the tap behind a clean vnet header.
 * No offload is offered (5.1.3: no CSUM, no GSO features), so the only
 * header the tap may act on is flags 0, GSO_NONE: the guest's is not
 * passed on (the host stack would trust its checksum and segmentation
 * fields). A frame longer than VIRTIO_NET_FRAME_MAX is dropped unsent. */
static uint32_t net_tx(void *ctx, const struct virtq_elem *e)
{
	struct virtio_net_pair *p = ctx;
	struct virtio_net *n = p->net;
	static const struct virtio_net_hdr_mrg_rxbuf clean = {.hdr.gso_type =
								  VIRTIO_NET_HDR_GSO_NONE};
	struct iovec iov[VIRTQ_MAX_IOV + 1];
	bool fits = e->out_len >= VIRTIO_NET_HDR_LEN && e->out_len <= VIRTIO_NET_FRAME_MAX;
	int niov = 0;
	if (fits) {
		iov[0] = (struct iovec){(void *)&clean, VIRTIO_NET_HDR_LEN};
		niov = 1 + (int)iov_slice(e->out, e->nout, VIRTIO_NET_HDR_LEN,
					  e->out_len - VIRTIO_NET_HDR_LEN, iov + 1, VIRTQ_MAX_IOV);
	}
	if (!fits || writev(p->tap_fd, iov, niov) < 0) {
		if (fits) {
			int err = errno;
			net_note_tap_error(p);
			/* Said once (a down link fails every frame); --stats counts. */
			if (!atomic_load(&n->tap_gone) && atomic_load(&p->attached) &&
			    !atomic_exchange(&n->tx_warned, true))
				log_warn(n->log,
					 "virtio-net: sending to tap %s failed: %s%s (further "
					 "failures are counted in --stats tx-errors)",
					 n->ifname, strerror(err),
					 err == EIO ? " (is the link down?)" : "");
		}
		atomic_fetch_add(&n->tx_errors, 1);
	} else {
		atomic_fetch_add(&n->tx_frames, 1);
	}
	return 0;
}

/* Attaches the tap queues of the pairs in use and detaches the others
 * (multiqueue only; a tap that is gone refuses, which is reported
 * elsewhere). Under the control queue's lock, or every queue's. */
static void net_apply_pairs(struct virtio_net *n, unsigned pairs)
{
	atomic_store(&n->curr_pairs, pairs);
	if (n->npairs < 2)
		return;
	for (unsigned i = 1; i < n->npairs; i++) {
		bool want = i < pairs;
		if (atomic_load(&n->pairs[i].attached) == want)
			continue;
		if (!want)
			atomic_store(&n->pairs[i].attached, false);
		if (net_tap_attach_queue(n->pairs[i].tap_fd, want) == 0 && want)
			atomic_store(&n->pairs[i].attached, true);
	}
}

/* One control command (5.1.6.5): class, command and data are driver-
 * readable, the ack byte device-writable. Returns the ack; a valid
 * VQ_PAIRS_SET leaves its count in *pairs, applied once the pass ends. */
static uint8_t net_ctrl_command(struct virtio_net *n, const struct virtq_elem *e,
				unsigned *pairs_wanted)
{
	uint8_t hdr[2];
	if (iov_to_buf(e->out, e->nout, 0, hdr, sizeof(hdr)) != sizeof(hdr))
		return VIRTIO_NET_ERR;
	/* 5.1.6.5.5: the only command class of the features offered. */
	if (hdr[0] == VIRTIO_NET_CTRL_MQ && hdr[1] == VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET &&
	    virtio_has_feature(&n->vdev, VIRTIO_NET_F_MQ)) {
		uint8_t le[2];
		if (e->out_len != sizeof(hdr) + sizeof(le) ||
		    iov_to_buf(e->out, e->nout, sizeof(hdr), le, sizeof(le)) != sizeof(le))
			return VIRTIO_NET_ERR;
		unsigned pairs = (unsigned)le[0] | (unsigned)le[1] << 8;
		if (pairs < VIRTIO_NET_CTRL_MQ_VQ_PAIRS_MIN || pairs > n->npairs)
			return VIRTIO_NET_ERR;
		*pairs_wanted = pairs;
		return VIRTIO_NET_OK;
	}
	return VIRTIO_NET_ERR; /* a class or command not offered */
}

/* Control queue locked: each command answered in its ack byte, one pass's
 * budget of them. Only the last pair count of the pass is applied (its
 * TUNSETQUEUE calls take RTNL), once, before the acks become visible. */
static void net_ctrl(struct virtio_net *n, unsigned qi)
{
	struct virtq *q = &n->vdev.vqs[qi];
	struct virtio_budget budget = virtio_budget_pass();
	uint16_t used_before = q->used_idx;
	unsigned pairs = 0;
	int ret = 0;
	while (virtio_budget_left(&budget) && (ret = virtq_pop(q, n->ctrl_elem)) == 1) {
		const struct virtq_elem *e = n->ctrl_elem;
		virtio_budget_spend(&budget, e->in_len + e->out_len);
		if (e->in_len < 1 || e->out_len < 2) {
			virtio_needs_reset(&n->vdev, "control command without header or ack byte");
			break;
		}
		uint8_t ack = net_ctrl_command(n, e, &pairs);
		atomic_fetch_add(ack == VIRTIO_NET_OK ? &n->ctrl_ok : &n->ctrl_err, 1);
		buf_to_iov(e->in, e->nin, 0, &ack, 1);
		virtq_fill(q, e->head, 1);
	}
	if (pairs) {
		net_apply_pairs(n, pairs);
		atomic_fetch_add(&n->pairs_applied, 1);
		atomic_store(&n->pairs_set, pairs);
	}
	if (ret == 1 && virtq_has_avail(q))
		virtio_queue_yield(&n->vdev, qi);
	virtio_queue_end_pass(&n->vdev, qi, ret, used_before);
}

/* Queue qi locked. */
static void net_notify(struct virtio_dev *d, unsigned qi)
{
	struct virtio_net *n = d->priv;
	if (net_check_tap_gone(n))
		return;
	if (n->npairs > 1 && qi == virtio_net_ctrlq(n)) {
		net_ctrl(n, qi);
		return;
	}
	struct virtio_net_pair *p = &n->pairs[qi / 2];
	if (qi % 2 == 0)
		net_rx(p);
	else
		virtio_queue_serve(d, qi, p->tx_elem, net_tx, p);
	net_check_tap_gone(n);
}

/* Every queue locked: back to one pair in use (5.1.6.5.5: multiqueue is
 * off until the driver turns it on). */
static void net_reset(struct virtio_dev *d)
{
	struct virtio_net *n = d->priv;
	for (unsigned i = 0; i < n->npairs; i++)
		n->pairs[i].frame_len = 0;
	net_apply_pairs(n, 1);
}

void virtio_net_tap_ready(struct virtio_net_pair *p)
{
	struct virtio_net *n = p->net;
	unsigned qi = virtio_net_rxq(p->index);
	virtio_queue_lock(&n->vdev, qi);
	if (n->vdev.vqs[qi].size && virtio_queue_live(&n->vdev, qi)) {
		net_rx(p);
	} else {
		/* Not running: drain and drop, so the tap does not stay readable;
		 * a pass's worth at a time (the loop comes back while the tap is
		 * readable), so a flooded tap cannot hold the loop. */
		ssize_t r = 0;
		for (unsigned k = 0; k < VIRTIO_PASS_REQUESTS &&
				     (r = read(p->tap_fd, p->frame, VIRTIO_NET_FRAME_MAX)) > 0;
		     k++)
			atomic_fetch_add(&n->rx_dropped, 1);
		if (r < 0)
			net_note_tap_error(p);
	}
	net_check_tap_gone(n);
	virtio_queue_unlock(&n->vdev, qi);
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

int virtio_net_init(struct virtio_net *n, const char *tap_name, const uint8_t *mac, unsigned pairs,
		    struct log *log, struct err *e)
{
	memset(n, 0, sizeof(*n));
	for (unsigned i = 0; i < VIRTIO_NET_MAX_PAIRS; i++)
		n->pairs[i].tap_fd = -1;
	if (pairs < 1 || pairs > VIRTIO_NET_MAX_PAIRS)
		return err_set(e, ERR_INPUT, "queues=%u: must be between 1 and %u", pairs,
			       (unsigned)VIRTIO_NET_MAX_PAIRS);
	n->log = log;
	n->npairs = pairs;
	n->vdev.ops = &net_ops;
	n->vdev.priv = n;
	/* 5.1.2: receiveq1..N, transmitq1..N, then the control queue. */
	n->vdev.num_queues = pairs > 1 ? 2 * pairs + 1 : 2;
	n->vdev.extra_features =
	    pairs > 1 ? NET_F(VIRTIO_NET_F_MQ) | NET_F(VIRTIO_NET_F_CTRL_VQ) : 0;
	n->ctrl_elem = malloc(sizeof(*n->ctrl_elem));
	if (!n->ctrl_elem)
		return err_set(e, ERR_HOST, "out of memory");
	int fds[VIRTIO_NET_MAX_PAIRS];
	for (unsigned i = 0; i < pairs; i++) {
		struct virtio_net_pair *p = &n->pairs[i];
		p->net = n;
		p->index = i;
		p->rx_elem = malloc(sizeof(*p->rx_elem));
		p->tx_elem = malloc(sizeof(*p->tx_elem));
		p->frame = malloc(VIRTIO_NET_FRAME_MAX);
		if (!p->rx_elem || !p->tx_elem || !p->frame)
			return err_set(e, ERR_HOST, "out of memory");
	}
	if (net_tap_open_queues(tap_name, pairs, fds, n->ifname, &n->tap_created, e))
		return -1;
	for (unsigned i = 0; i < pairs; i++) {
		n->pairs[i].tap_fd = fds[i];
		atomic_store(&n->pairs[i].attached, true);
	}
	net_apply_pairs(n, 1);
	if (mac) {
		memcpy(n->mac, mac, 6);
	} else {
		/* Locally administered, unicast, stable for a tap name. */
		uint32_t h = 2166136261u;
		for (const char *c = n->ifname; *c; c++)
			h = (h ^ (uint8_t)*c) * 16777619u;
		uint8_t m[6] = {0x52,	   0x54, 0x00, (uint8_t)(h >> 16), (uint8_t)(h >> 8),
				(uint8_t)h};
		memcpy(n->mac, m, 6);
	}
	return 0;
}

void virtio_net_destroy(struct virtio_net *n)
{
	for (unsigned i = 0; i < VIRTIO_NET_MAX_PAIRS; i++) {
		struct virtio_net_pair *p = &n->pairs[i];
		if (p->tap_fd >= 0)
			close(p->tap_fd);
		p->tap_fd = -1;
		free(p->rx_elem);
		free(p->tx_elem);
		free(p->frame);
		p->rx_elem = p->tx_elem = NULL;
		p->frame = NULL;
	}
	free(n->ctrl_elem);
	n->ctrl_elem = NULL;
}
