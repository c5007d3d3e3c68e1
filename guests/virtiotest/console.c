/*
 * virtio-console (virtio 1.2, 5.3), no features (no F_SIZE, no MULTIPORT):
 * port 0's receiveq is queue 0 and its transmitq queue 1 (5.3.2). Output
 * is device-readable buffers on the transmitq (5.3.6); input arrives in
 * device-writable buffers the driver keeps posted on the receiveq
 * (5.3.6.1: the driver SHOULD fill it).
 *
 * The VMM's stdout is this console (and COM1, which carries the check
 * lines): the test expects the line "virtiotest: console says hello", then
 * feeds one line on stdin, which the guest sends back as "echo: LINE".
 */
#include "virtiotest.h"

#include "guest/ram.h"

#define RXQ	   0
#define TXQ	   1
#define RX_BUFS	   4
#define RX_BUF_LEN 64
#define LINE_MAX   120
#define RX_WAIT_US 20000000 /* the host writes its line at start-up */

static const char hello[] = "virtiotest: console says hello\n";

static uint8_t *rx_buf[RX_BUFS];
static char *tx_buf;

static bool transmit(struct vt_dev *d, const char *text, size_t len, const char *what)
{
	struct virtq *vq = &d->vq[TXQ];
	struct irq_snap s;
	struct vt_wait w;

	memcpy(tx_buf, text, len);
	struct virtq_buf b = {tx_buf, (uint32_t)len};
	vt_wait_prepare(d, &s);
	int head = virtq_add(vq, &b, 1, 0);
	virtq_kick(vq);
	/* Not strict under INTx: receive completions share the ISR. */
	vt_wait(d, vq, &s, head, VT_WAIT_US, d->msix, 1, &w);
	/* The device writes nothing into a transmit buffer: used len 0. */
	return dcheck(d, head >= 0 && !w.why[0] && w.len == 0, what, "%s%sused len %u", w.why,
		      w.why[0] ? "; " : "", w.len);
}

static void post_rx(struct virtq *vq, unsigned i)
{
	struct virtq_buf b = {rx_buf[i], RX_BUF_LEN};
	virtq_add(vq, &b, 0, 1);
}

static bool rx_pending(void *p)
{
	return virtq_used_pending(p) != 0;
}

/* Collects bytes until a newline (or LINE_MAX); returns the line length,
 * or -1 if none came in time. *irq: an interrupt for the receiveq came. */
static int receive_line(struct vt_dev *d, char *line, unsigned *bufs, bool *irq, bool *bad)
{
	struct virtq *vq = &d->vq[RXQ];
	struct irq_snap s;
	unsigned n = 0;

	*bufs = 0;
	*bad = false;
	vt_wait_prepare(d, &s);
	for (unsigned i = 0; i < RX_BUFS; i++)
		post_rx(vq, i);
	virtq_kick(vq);
	while (n < LINE_MAX) {
		if (!irq_wait_until(&s, rx_pending, vq, RX_WAIT_US))
			break;
		uint16_t head;
		uint32_t len;
		virtq_get_used(vq, &head, &len);
		(*bufs)++;
		unsigned i = RX_BUFS;
		for (unsigned k = 0; k < RX_BUFS; k++)
			if (vq->desc[head].addr == (uint64_t)rx_buf[k])
				i = k;
		if (i == RX_BUFS || len > RX_BUF_LEN) {
			*bad = true;
			break;
		}
		for (uint32_t k = 0; k < len && n < LINE_MAX; k++) {
			char c = (char)rx_buf[i][k];
			if (c == '\n') {
				line[n] = 0;
				irq_spin_us(VT_SETTLE_US);
				*irq = vt_irq_seen(d, vq, &s);
				return (int)n;
			}
			if (c != '\r')
				line[n++] = c;
		}
		post_rx(vq, i);
		virtq_kick(vq);
	}
	line[n] = 0;
	*irq = vt_irq_seen(d, vq, &s);
	return n ? (int)n : -1;
}

void vt_console(struct vt_dev *d)
{
	static const uint16_t qmax[2] = {16, 16};
	char line[LINE_MAX + 1], echo[LINE_MAX + 16];
	unsigned bufs;
	bool irq = false, bad;

	for (unsigned i = 0; i < RX_BUFS; i++)
		rx_buf[i] = ram_alloc(RX_BUF_LEN, 64);
	tx_buf = ram_alloc(256, 64);
	if (!dcheck(d, rx_buf[RX_BUFS - 1] && tx_buf, "buffers allocated", "out of RAM pool"))
		return;
	if (!vt_bringup(d, 0, 2, qmax))
		return;

	/* Before any receive buffer is posted, so no receive completion
	 * can mix with this one. */
	transmit(d, hello, sizeof(hello) - 1,
		 "transmitq: the hello line goes out (used len 0, one interrupt; 5.3.6)");

	int n = receive_line(d, line, &bufs, &irq, &bad);
	bool printable = n > 0;
	for (int i = 0; i < n; i++)
		printable = printable && line[i] >= 0x20 && line[i] < 0x7F;
	if (!dcheck(d, n > 0 && !bad && printable && irq,
		    "receiveq: a line from the host's stdin arrives, with an interrupt (5.3.6.1)",
		    "%s (%u used buffers, %d bytes%s%s)",
		    n < 0 ? "no line within 20 s"
		    : bad ? "a used entry that is no posted buffer"
			  : "a line came",
		    bufs, n < 0 ? 0 : n, n > 0 && !printable ? ", unprintable" : "",
		    n > 0 && !irq ? ", no interrupt" : ""))
		return;
	info("%s received \"%s\" in %u buffer%s", d->tag, line, bufs, bufs == 1 ? "" : "s");
	int len = snprintf(echo, sizeof(echo), "echo: %s\n", line);
	transmit(d, echo, (size_t)len, "transmitq: the echo line goes out (used len 0)");
	vt_finish(d);
}
