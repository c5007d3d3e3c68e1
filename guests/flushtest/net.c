/*
 * flushtest's tapgone mode: a virtio-net device (virtio 1.2, 5.1; VERSION_1
 * only, so every packet starts with the 12-byte header, 5.1.6) whose host
 * tap is deleted while the guest sends frames. The device may not take the
 * VMM down with it: it must set DEVICE_NEEDS_RESET (2.1.2: it cannot go
 * on), a reset and a new initialisation must work (and end in NEEDS_RESET
 * again, the tap being still gone), and the virtio-blk device beside it
 * must still write, flush and read.
 *
 * The exchange with tests/faults/tapgone_test.py: the guest sends broadcast
 * frames (EtherType 0x88b5) one at a time, each waited for; after
 * FRAMES_BEFORE it prints "flushtest: tap in use", the host deletes the
 * tap, and the guest keeps sending until it reads NEEDS_RESET in the
 * device status (at most flushtest.wait_s).
 */
#include "flushtest.h"

#include "guest/ram.h"

#define RXQ	      0
#define TXQ	      1
#define NET_HDR_LEN   12
#define RX_BUFS	      4
#define RX_BUF_LEN    2048
#define FRAME_LEN     60
#define FRAMES_BEFORE 8u

static uint8_t *rx_buf[RX_BUFS];
static uint8_t *tx_hdr, *tx_frame;

static void build_frame(void)
{
	static const char payload[] = "flushtest: frame from guest";
	memset(tx_hdr, 0, NET_HDR_LEN); /* 5.1.6.2: no offloads */
	memset(tx_frame, 0, FRAME_LEN);
	memset(tx_frame, 0xFF, 6);
	tx_frame[6] = 0x02; /* locally administered source */
	tx_frame[11] = 0x01;
	tx_frame[12] = 0x88;
	tx_frame[13] = 0xB5;
	memcpy(tx_frame + 14, payload, sizeof(payload) - 1);
}

static bool net_up(void)
{
	if (!ft_bringup(&ft.net, VIRTIO_ID_NET, 0, 2))
		return false;
	/* 5.1.5: receive buffers first; frames from the host stack are
	 * taken and dropped by the device or left there, never looked at. */
	for (unsigned i = 0; i < RX_BUFS; i++) {
		struct virtq_buf b = {rx_buf[i], RX_BUF_LEN};
		virtq_add(&ft.net.vq[RXQ], &b, 0, 1);
	}
	virtq_kick(&ft.net.vq[RXQ]);
	return true;
}

/* Sends one frame and waits for its used entry or NEEDS_RESET. Returns 1
 * when used, 0 on NEEDS_RESET, -1 on a time-out or error. */
static int send_one(uint64_t deadline)
{
	struct virtq *vq = &ft.net.vq[TXQ];
	struct virtq_buf b[2] = {{tx_hdr, NET_HDR_LEN}, {tx_frame, FRAME_LEN}};
	uint16_t head;
	uint32_t len;

	int h = virtq_add(vq, b, 2, 0);
	if (h < 0) {
		ft_fail("net: no free transmit descriptors");
		return -1;
	}
	virtq_kick(vq);
	while (rdtsc() < deadline) {
		if (virtq_get_used(vq, &head, &len)) {
			if (head != h) {
				ft_fail("net: used id %u, not the frame in flight (%d)", head, h);
				return -1;
			}
			return 1;
		}
		if (ft_needs_reset(&ft.net))
			return 0;
		cpu_relax();
	}
	return -1;
}

/* Sends until NEEDS_RESET; counts frames used meanwhile. */
static bool until_needs_reset(const char *when, uint64_t *used)
{
	uint64_t deadline = rdtsc() + ft_us(ft.wait_s * 1000000);
	for (;;) {
		int r = send_one(deadline);
		if (r == 0)
			return true;
		if (r < 0) {
			if (!ft_needs_reset(&ft.net))
				ft_fail("net: no NEEDS_RESET within %lu s %s (%lu frames used "
					"meanwhile)",
					ft.wait_s, when, *used);
			return ft_needs_reset(&ft.net);
		}
		(*used)++;
	}
}

static bool blk_still_works(void)
{
	ft_fill_block(ft_reqs[0].buf, ft.cycle, 0);
	int st = ft_blk_one(VIRTIO_BLK_T_OUT, 0, "blk write");
	if (st == VIRTIO_BLK_S_OK && ft.flush)
		st = ft_blk_one(VIRTIO_BLK_T_FLUSH, 0, "blk FLUSH");
	if (st != VIRTIO_BLK_S_OK) {
		if (st >= 0)
			ft_fail("blk write or FLUSH after the tap went: status %d", st);
		return false;
	}
	memset(ft_reqs[0].buf, 0, FT_BLOCK);
	st = ft_blk_one(VIRTIO_BLK_T_IN, 0, "blk read");
	int64_t off = ft_check_block(ft_reqs[0].buf, ft.cycle, 0);
	if (st != VIRTIO_BLK_S_OK || off >= 0) {
		if (st >= 0)
			ft_fail("blk read after the tap went: status %d, first wrong byte %ld", st,
				off);
		return false;
	}
	return true;
}

int ft_mode_tapgone(void)
{
	uint64_t used = 0;

	if (!ft.net.pf) {
		ft_fail("no virtio-net device on bus 0");
		return 1;
	}
	for (unsigned i = 0; i < RX_BUFS; i++)
		rx_buf[i] = ram_alloc(RX_BUF_LEN, 64);
	tx_hdr = ram_alloc(NET_HDR_LEN, 16);
	tx_frame = ram_alloc(FRAME_LEN, 64);
	if (!rx_buf[RX_BUFS - 1] || !tx_hdr || !tx_frame) {
		ft_fail("RAM pool too small");
		return 1;
	}
	if (!ft_blk_init() || !net_up())
		return 1;
	build_frame();
	for (unsigned i = 0; i < FRAMES_BEFORE; i++) {
		int r = send_one(rdtsc() + ft_us(ft.wait_s * 1000000));
		if (r != 1) {
			if (r == 0)
				ft_fail("net: NEEDS_RESET before the tap went");
			else
				ft_fail("net: frame %u not sent within %lu s", i, ft.wait_s);
			return 1;
		}
	}
	printf("flushtest: tap in use (%u frames sent)\n", FRAMES_BEFORE);
	if (!until_needs_reset("after the tap went", &used))
		return 1;
	printf("flushtest: net NEEDS_RESET after the tap went (%lu frames used meanwhile)\n", used);

	/* 3.1.1 again on a device whose backend is gone: the reset reads
	 * back 0, the initialisation goes through, and the first frame
	 * brings NEEDS_RESET back. */
	if (!net_up())
		return 1;
	used = 0;
	if (!until_needs_reset("after a reset, with the tap gone", &used))
		return 1;
	if (used)
		ft_fail("net: %lu frames used after the reset, with no tap", used);
	printf("flushtest: net reset and re-initialised: NEEDS_RESET again\n");
	if (!blk_still_works())
		return 1;
	printf("flushtest: blk writes, flushes and reads after the tap went\n");
	return 0;
}
