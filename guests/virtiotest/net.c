/*
 * virtio-net (virtio 1.2, 5.1) with VIRTIO_NET_F_MAC and _STATUS only:
 * receiveq1 is queue 0, transmitq1 queue 1 (5.1.2). Every packet is
 * preceded by the 12-byte struct virtio_net_hdr (5.1.6: with VERSION_1
 * num_buffers is always there). Without MRG_RXBUF or any GUEST_* offload,
 * receive buffers hold a whole frame: at least 1526 bytes (5.1.6.3.1).
 *
 * The exchange with tests/guest/virtio_net_test.py: the guest posts its
 * receive buffers, then sends a broadcast frame of EtherType 0x88b5 (IEEE
 * 802 "local experimental") with the payload "virtiotest: frame from
 * guest" (retransmitted every 250 ms, since the host brings the tap up
 * and opens its socket while the guest runs) until a 0x88b5 frame from
 * the host arrives; it prints that frame's payload. Other frames (the
 * host stack's IPv6 chatter) are counted and recycled.
 *
 * With virtiotest.queues=2: VIRTIO_NET_F_MQ and VIRTIO_NET_F_CTRL_VQ,
 * max_virtqueue_pairs 2, queues receiveq1, transmitq1, receiveq2,
 * transmitq2, controlq (5.1.2); VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET 2 is
 * answered OK and 3 ERR (5.1.6.5.5); a frame goes out on each transmitq
 * with an interrupt on its own vector, retransmissions alternate between
 * the pairs, and the host's frame may arrive on either receiveq (the tap
 * steers by flow), where buffers are posted on both.
 */
#include "virtiotest.h"

#include "guest/ram.h"

#define RXQ(p) (2 * (p))
#define TXQ(p) (2 * (p) + 1)

#define VIRTIO_NET_F_MAC       5
#define VIRTIO_NET_F_MRG_RXBUF 15
#define VIRTIO_NET_F_STATUS    16
#define VIRTIO_NET_F_CTRL_VQ   17
#define VIRTIO_NET_F_MQ	       22
#define NET_CFG_MAC	       0
#define NET_CFG_STATUS	       6
#define NET_CFG_MAX_PAIRS      8
/* 5.1.6.5: control commands. */
#define VIRTIO_NET_OK			0
#define VIRTIO_NET_ERR			1
#define VIRTIO_NET_CTRL_MQ		4
#define VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET 0
#define VIRTIO_NET_S_LINK_UP		1

#define NET_HDR_LEN		    12
#define VIRTIO_NET_HDR_F_NEEDS_CSUM 1
#define VIRTIO_NET_HDR_GSO_NONE	    0

#define RX_BUFS	    8
#define RX_BUF_LEN  2048
#define ETH_HLEN    14
#define ETH_ZLEN    60
#define ETHERTYPE   0x88B5
#define EXCHANGE_US 30000000
#define RETX_US	    250000

static const char guest_payload[] = "virtiotest: frame from guest";
static const char host_prefix[] = "virtiotest: frame from host";

struct net_hdr { /* 5.1.6 */
	uint8_t flags;
	uint8_t gso_type;
	uint16_t hdr_len, gso_size, csum_start, csum_offset;
	uint16_t num_buffers;
} __attribute__((packed));
_Static_assert(sizeof(struct net_hdr) == NET_HDR_LEN, "virtio_net_hdr is 12 bytes");

static uint8_t *rx_buf[RX_BUFS];
static struct net_hdr *tx_hdr;
static uint8_t *tx_frame;
static uint8_t *ctrl_cmd, *ctrl_ack;
static uint8_t mac[6];
static unsigned npairs = 1;

/* Receive buffer i lives on receiveq (i % npairs). */
static struct virtq *rx_vq_of(struct vt_dev *d, unsigned i)
{
	return &d->vq[RXQ(i % npairs)];
}

static void post_rx(struct vt_dev *d, unsigned i)
{
	struct virtq_buf b = {rx_buf[i], RX_BUF_LEN};
	memset(rx_buf[i], 0, NET_HDR_LEN + ETH_HLEN);
	virtq_add(rx_vq_of(d, i), &b, 0, 1);
}

static int send_frame(struct vt_dev *d, unsigned pair)
{
	struct virtq_buf b[2] = {{tx_hdr, NET_HDR_LEN}, {tx_frame, ETH_ZLEN}};
	int head = virtq_add(&d->vq[TXQ(pair)], b, 2, 0);
	virtq_kick(&d->vq[TXQ(pair)]);
	return head;
}

/* One control command with a 16-bit argument (5.1.6.5): class, command,
 * data device-readable, the ack byte device-writable. Returns the ack
 * (0xEE: the device never answered). */
static uint8_t ctrl_u16(struct vt_dev *d, uint8_t cls, uint8_t cmd, uint16_t arg)
{
	struct virtq *cq = &d->vq[2 * npairs];
	struct irq_snap s;
	struct vt_wait w;
	ctrl_cmd[0] = cls;
	ctrl_cmd[1] = cmd;
	ctrl_cmd[2] = (uint8_t)arg;
	ctrl_cmd[3] = (uint8_t)(arg >> 8);
	*ctrl_ack = 0xEE;
	struct virtq_buf b[3] = {{ctrl_cmd, 2}, {ctrl_cmd + 2, 2}, {ctrl_ack, 1}};
	vt_wait_prepare(d, &s);
	int head = virtq_add(cq, b, 2, 1);
	virtq_kick(cq);
	vt_wait(d, cq, &s, head, VT_WAIT_US, d->msix, 1, &w);
	char what[120];
	snprintf(what, sizeof(what),
		 "controlq: the command is used (len 1) with an interrupt, the ack written "
		 "(5.1.6.5)");
	dcheck(d, head >= 0 && !w.why[0] && w.len == 1 && *ctrl_ack != 0xEE, what,
	       "%s%sused len %u, ack 0x%02x", w.why, w.why[0] ? "; " : "", w.len, *ctrl_ack);
	return *ctrl_ack;
}

static void build_frame(void)
{
	/* 5.1.6.2: flags 0 and gso_type NONE (no offloads); num_buffers 0
	 * on transmit. */
	memset(tx_hdr, 0, NET_HDR_LEN);
	memset(tx_frame, 0, ETH_ZLEN);
	memset(tx_frame, 0xFF, 6);
	memcpy(tx_frame + 6, mac, 6);
	tx_frame[12] = ETHERTYPE >> 8;
	tx_frame[13] = ETHERTYPE & 0xFF;
	memcpy(tx_frame + ETH_HLEN, guest_payload, sizeof(guest_payload) - 1);
}

struct exchange {
	unsigned sent, tx_done, tx_bad, others, bad_used;
	int match; /* rx buffer index holding the host's frame, -1 */
	uint32_t match_len;
	unsigned tx_per_pair[VT_MAX_MQ];
};

static bool is_host_frame(const uint8_t *f, uint32_t len)
{
	return len >= ETH_HLEN + sizeof(host_prefix) - 1 && f[12] == (ETHERTYPE >> 8) &&
	       f[13] == (ETHERTYPE & 0xFF) &&
	       !memcmp(f + ETH_HLEN, host_prefix, sizeof(host_prefix) - 1);
}

static void reap(struct vt_dev *d, struct exchange *x)
{
	uint16_t head;
	uint32_t len;

	for (unsigned p = 0; p < npairs; p++)
		while (virtq_get_used(&d->vq[TXQ(p)], &head, &len)) {
			x->tx_done++;
			if (len != 0)
				x->tx_bad++;
		}
	for (unsigned p = 0; p < npairs; p++) {
		struct virtq *rq = &d->vq[RXQ(p)];
		while (x->match < 0 && virtq_get_used(rq, &head, &len)) {
			unsigned i = RX_BUFS;
			for (unsigned k = p; k < RX_BUFS; k += npairs)
				if (rq->desc[head].addr == (uint64_t)rx_buf[k])
					i = k;
			if (i == RX_BUFS || len > RX_BUF_LEN || len < NET_HDR_LEN) {
				x->bad_used++;
				continue;
			}
			if (is_host_frame(rx_buf[i] + NET_HDR_LEN, len - NET_HDR_LEN)) {
				x->match = (int)i;
				x->match_len = len;
				return;
			}
			x->others++;
			post_rx(d, i);
			virtq_kick(rq);
		}
	}
}

static void check_rx_frame(struct vt_dev *d, const struct exchange *x, bool irq)
{
	const uint8_t *b = rx_buf[x->match];
	const struct net_hdr *h = (const void *)b;
	const uint8_t *f = b + NET_HDR_LEN;
	uint32_t flen = x->match_len - NET_HDR_LEN;
	static const uint8_t bcast[6] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
	char payload[80];
	unsigned n = 0;

	dcheck(d, irq, "receiveq: the host's frame came with an interrupt", "none seen");
	/* 5.1.6.4.1: without MRG_RXBUF num_buffers is 1; without GUEST_CSUM
	 * and GUEST_TSO*, no NEEDS_CSUM and gso_type NONE. */
	dcheck(d,
	       h->num_buffers == 1 && h->gso_type == VIRTIO_NET_HDR_GSO_NONE &&
		   !(h->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM),
	       "receive header: num_buffers 1, gso_type NONE, no NEEDS_CSUM (5.1.6.4.1)",
	       "num_buffers %u, gso_type %u, flags 0x%02x", h->num_buffers, h->gso_type, h->flags);
	dcheck(d, !memcmp(f, mac, 6) || !memcmp(f, bcast, 6),
	       "the host's frame is addressed to this MAC or broadcast",
	       "destination %02x:%02x:%02x:%02x:%02x:%02x", f[0], f[1], f[2], f[3], f[4], f[5]);
	while (n < sizeof(payload) - 1 && ETH_HLEN + n < flen) {
		char c = (char)f[ETH_HLEN + n];
		if (c < 0x20 || c >= 0x7F)
			break;
		payload[n++] = c;
	}
	payload[n] = 0;
	printf("virtiotest: net received host frame: \"%s\" (%u bytes, from "
	       "%02x:%02x:%02x:%02x:%02x:%02x)\n",
	       payload, flen, f[6], f[7], f[8], f[9], f[10], f[11]);
}

/* 5.1.6.5.5: with VIRTIO_NET_F_MQ only the first pair carries traffic
 * until VQ_PAIRS_SET; more pairs than max_virtqueue_pairs is an error. */
static void set_pairs(struct vt_dev *d)
{
	uint16_t max = (uint16_t)virtio_config_read(&d->vp, NET_CFG_MAX_PAIRS, 2);
	bool mq = (d->offered & VIRTIO_F_BIT(VIRTIO_NET_F_MQ)) &&
		  (d->offered & VIRTIO_F_BIT(VIRTIO_NET_F_CTRL_VQ));
	dcheck(d, mq && max == npairs,
	       "virtiotest.queues=2: VIRTIO_NET_F_MQ and _CTRL_VQ offered, max_virtqueue_pairs 2 "
	       "(5.1.3, 5.1.4)",
	       "features 0x%016lx, max_virtqueue_pairs %u", d->offered, max);
	uint8_t too_many = ctrl_u16(d, VIRTIO_NET_CTRL_MQ, VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET,
				    (uint16_t)(npairs + 1));
	dcheck(d, too_many == VIRTIO_NET_ERR,
	       "VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET beyond max_virtqueue_pairs: VIRTIO_NET_ERR",
	       "ack %u", too_many);
	uint8_t ok =
	    ctrl_u16(d, VIRTIO_NET_CTRL_MQ, VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET, (uint16_t)npairs);
	dcheck(d, ok == VIRTIO_NET_OK,
	       "VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET 2: VIRTIO_NET_OK (5.1.6.5.5)", "ack %u", ok);
}

void vt_net(struct vt_dev *d)
{
	static const uint16_t qmax[VT_MAX_QUEUES] = {16, 16, 16, 16, 8};
	uint64_t wanted = VIRTIO_F_BIT(VIRTIO_NET_F_MAC) | VIRTIO_F_BIT(VIRTIO_NET_F_STATUS);
	npairs = vt.queues;
	if (npairs > 1)
		wanted |= VIRTIO_F_BIT(VIRTIO_NET_F_MQ) | VIRTIO_F_BIT(VIRTIO_NET_F_CTRL_VQ);

	for (unsigned i = 0; i < RX_BUFS; i++)
		rx_buf[i] = ram_alloc(RX_BUF_LEN, 64);
	tx_hdr = ram_alloc(NET_HDR_LEN, 16);
	tx_frame = ram_alloc(ETH_ZLEN, 64);
	ctrl_cmd = ram_alloc(4, 16);
	ctrl_ack = ram_alloc(1, 1);
	if (!dcheck(d, rx_buf[RX_BUFS - 1] && tx_hdr && tx_frame && ctrl_ack, "buffers allocated",
		    "out of RAM pool"))
		return;
	if (!vt_bringup(d, wanted, npairs > 1 ? 2 * npairs + 1 : 2, qmax))
		return;
	dcheck(d, (d->offered & wanted) == wanted,
	       "VIRTIO_NET_F_MAC and _STATUS are offered (5.1.3)", "features 0x%016lx", d->offered);
	if (npairs > 1)
		set_pairs(d);
	else
		dcheck(d,
		       !(d->offered &
			 (VIRTIO_F_BIT(VIRTIO_NET_F_MQ) | VIRTIO_F_BIT(VIRTIO_NET_F_CTRL_VQ))),
		       "one queue pair: neither VIRTIO_NET_F_MQ nor _CTRL_VQ is offered",
		       "features 0x%016lx", d->offered);
	info("%s offers MRG_RXBUF %s (not used: the header stays 12 bytes with VERSION_1)", d->tag,
	     d->offered & VIRTIO_F_BIT(VIRTIO_NET_F_MRG_RXBUF) ? "yes" : "no");

	/* 5.1.4: mac is six bytes (8-bit accesses, 4.1.3.1), status 16 bits. */
	for (unsigned i = 0; i < 6; i++)
		mac[i] = (uint8_t)virtio_config_read(&d->vp, NET_CFG_MAC + i, 1);
	uint16_t st = (uint16_t)virtio_config_read(&d->vp, NET_CFG_STATUS, 2);
	info("%s config: MAC %02x:%02x:%02x:%02x:%02x:%02x, status 0x%04x", d->tag, mac[0], mac[1],
	     mac[2], mac[3], mac[4], mac[5], st);
	dcheck(d, !(mac[0] & 1) && (mac[0] | mac[1] | mac[2] | mac[3] | mac[4] | mac[5]),
	       "config mac is a non-zero unicast address", "first byte 0x%02x", mac[0]);
	dcheck(d, st & VIRTIO_NET_S_LINK_UP, "config status: VIRTIO_NET_S_LINK_UP (5.1.4)",
	       "0x%04x", st);

	/* 5.1.5: fill the receive queues before anything else. */
	for (unsigned i = 0; i < RX_BUFS; i++)
		post_rx(d, i);
	for (unsigned p = 0; p < npairs; p++)
		virtq_kick(&d->vq[RXQ(p)]);

	build_frame();
	struct irq_snap s, rx_s;
	struct vt_wait w;
	vt_wait_prepare(d, &s);
	rx_s = s;
	struct exchange x = {.match = -1};
	for (unsigned p = 0; p < npairs; p++) {
		vt_wait_prepare(d, &s);
		int head = send_frame(d, p);
		/* Not strict under INTx: a received frame may share the ISR. */
		vt_wait(d, &d->vq[TXQ(p)], &s, head, VT_WAIT_US, d->msix, 1, &w);
		char what[160];
		snprintf(
		    what, sizeof(what),
		    "transmitq%u: a broadcast frame (12-byte header + 60 bytes, 2 descriptors) "
		    "is used, len 0, with an interrupt%s",
		    p + 1, npairs > 1 && d->msix ? " on its own vector" : "");
		dcheck(d, head >= 0 && !w.why[0] && w.len == 0, what, "%s%sused len %u", w.why,
		       w.why[0] ? "; " : "", w.len);
		x.sent++;
		x.tx_done++;
		x.tx_per_pair[p]++;
	}

	uint64_t deadline = rx_s.tsc + irq_us_to_tsc(EXCHANGE_US);
	uint64_t next_tx = rdtsc() + irq_us_to_tsc(RETX_US);
	while (x.match < 0 && rdtsc() < deadline) {
		reap(d, &x);
		if (x.match < 0 && rdtsc() >= next_tx) {
			unsigned p = x.sent % npairs;
			if (x.tx_done == x.sent && send_frame(d, p) >= 0) {
				x.sent++;
				x.tx_per_pair[p]++;
			}
			next_tx = rdtsc() + irq_us_to_tsc(RETX_US);
		}
		cpu_relax();
	}
	irq_spin_us(VT_SETTLE_US);
	reap(d, &x);
	info("%s: sent the frame %u times (%u used, %u with len != 0), %u other frames received "
	     "and recycled",
	     d->tag, x.sent, x.tx_done, x.tx_bad, x.others);
	dcheck(d, x.tx_bad == 0 && x.bad_used == 0,
	       "every transmit used entry has len 0; every receive used entry is a posted buffer",
	       "%u transmit entries with len != 0, %u bad receive entries", x.tx_bad, x.bad_used);
	if (dcheck(d, x.match >= 0,
		   "receiveq: the host's 0x88b5 frame arrives within 30 s (5.1.6.4)",
		   "nothing after %u transmissions, %u other frames", x.sent, x.others)) {
		struct virtq *rq = rx_vq_of(d, (unsigned)x.match);
		if (npairs > 1)
			info(
			    "%s: the host's frame came on receiveq%u; frames sent per pair: %u, %u",
			    d->tag, (unsigned)x.match % npairs + 1, x.tx_per_pair[0],
			    x.tx_per_pair[1]);
		check_rx_frame(d, &x, vt_irq_seen(d, rq, &rx_s));
	}
	vt_finish(d);
}
