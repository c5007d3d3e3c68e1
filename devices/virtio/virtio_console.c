#include "devices/virtio/virtio_console.h"

#include <errno.h>
#include <linux/virtio_console.h>
#include <stdlib.h>
#include <string.h>

enum { CONSOLE_RXQ = 0, CONSOLE_TXQ = 1 };

static void console_config_read(struct virtio_dev *d, unsigned off, void *data, unsigned len)
{
	struct virtio_console_config cfg;
	(void)d;
	memset(&cfg, 0, sizeof(cfg));
	cfg.cols = 80;
	cfg.rows = 25;
	cfg.max_nr_ports = 1;
	memcpy(data, (uint8_t *)&cfg + off, len);
}

/* Fills posted receive buffers from the host buffer, one pass's budget of
 * them (issue 26: buffers of no length take nothing, so a driver feeding
 * them kept the pass going); receive queue locked. */
static void console_fill_rx(struct virtio_console *c)
{
	struct virtq *q = &c->vdev.vqs[CONSOLE_RXQ];
	struct virtio_budget budget = virtio_budget_pass();
	uint16_t used_before = q->used_idx;
	int ret = 0;
	while (c->rx_count && q->size && virtio_budget_left(&budget) &&
	       (ret = virtq_pop(q, c->elem)) == 1) {
		uint64_t done = 0;
		for (unsigned i = 0; i < c->elem->nin && c->rx_count; i++) {
			struct iovec *v = &c->elem->in[i];
			size_t off = 0;
			while (off < v->iov_len && c->rx_count) {
				size_t run = VIRTIO_CONSOLE_RX_CAP - c->rx_head;
				if (run > c->rx_count)
					run = c->rx_count;
				if (run > v->iov_len - off)
					run = v->iov_len - off;
				memcpy((uint8_t *)v->iov_base + off, c->rx + c->rx_head, run);
				off += run;
				c->rx_head = (c->rx_head + run) % VIRTIO_CONSOLE_RX_CAP;
				c->rx_count -= run;
			}
			done += off;
		}
		virtq_push(q, c->elem->head, (uint32_t)done);
		atomic_fetch_add(&c->rx_bytes, done);
		virtio_budget_spend(&budget, done);
	}
	if (ret == 1 && c->rx_count && virtq_has_avail(q))
		virtio_queue_yield(&c->vdev, CONSOLE_RXQ);
	virtio_queue_end_pass(&c->vdev, CONSOLE_RXQ, ret, used_before);
}

/* A transmit buffer: its bytes go to the host's console, the first
 * VIRTIO_REQUEST_BYTES_MAX of it (hvc sends a line or a page at a time;
 * a bigger buffer is a guest making the host write for it). */
static uint32_t console_tx(void *ctx, const struct virtq_elem *e)
{
	struct virtio_console *c = ctx;
	uint64_t left = VIRTIO_REQUEST_BYTES_MAX;
	for (unsigned i = 0; i < e->nout && left; i++) {
		size_t n = e->out[i].iov_len < left ? e->out[i].iov_len : (size_t)left;
		char_sink_write(&c->out, e->out[i].iov_base, n);
		atomic_fetch_add(&c->tx_bytes, n);
		left -= n;
	}
	if (e->out_len > VIRTIO_REQUEST_BYTES_MAX)
		atomic_fetch_add(&c->tx_dropped, e->out_len - VIRTIO_REQUEST_BYTES_MAX);
	return 0;
}

static void console_notify(struct virtio_dev *d, unsigned qi)
{
	struct virtio_console *c = d->priv;
	if (qi == CONSOLE_RXQ)
		console_fill_rx(c);
	else
		virtio_queue_serve(d, CONSOLE_TXQ, c->tx_elem, console_tx, c);
}

static const struct virtio_dev_ops console_ops = {
    .type = VIRTIO_ID_CONSOLE,
    .pci_class = 0x078000,
    .features = 0,
    .num_queues = 2,
    .queue_max = 64,
    .config_size = sizeof(struct virtio_console_config),
    .config_read = console_config_read,
    .queue_notify = console_notify,
};

int virtio_console_init(struct virtio_console *c, struct char_sink out)
{
	memset(c, 0, sizeof(*c));
	c->vdev.ops = &console_ops;
	c->vdev.priv = c;
	c->out = out;
	c->elem = malloc(sizeof(*c->elem));
	c->tx_elem = malloc(sizeof(*c->tx_elem));
	return c->elem && c->tx_elem ? 0 : -ENOMEM;
}

size_t virtio_console_receive(struct virtio_console *c, const uint8_t *buf, size_t len)
{
	size_t n = 0;
	virtio_queue_lock(&c->vdev, CONSOLE_RXQ);
	while (n < len && c->rx_count < VIRTIO_CONSOLE_RX_CAP) {
		c->rx[(c->rx_head + c->rx_count) % VIRTIO_CONSOLE_RX_CAP] = buf[n++];
		c->rx_count++;
	}
	atomic_fetch_add(&c->rx_dropped, len - n);
	/* Host input is not a driver request: only a live device uses buffers. */
	if (virtio_queue_live(&c->vdev, CONSOLE_RXQ))
		console_fill_rx(c);
	virtio_queue_unlock(&c->vdev, CONSOLE_RXQ);
	return n;
}

void virtio_console_destroy(struct virtio_console *c)
{
	free(c->elem);
	free(c->tx_elem);
	c->elem = c->tx_elem = NULL;
}
