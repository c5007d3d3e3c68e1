/*
 * virtio-rng (virtio 1.2, 5.4): one request queue (5.4.2); the driver
 * posts device-writable buffers and the device fills them with entropy
 * (5.4.6). Also, on the request queue: VIRTQ_AVAIL_F_NO_INTERRUPT (2.7.7)
 * and, under INTx, the ISR status register and the PCI Interrupt Status
 * bit with the IOAPIC pin masked (4.1.4.5).
 */
#include "virtiotest.h"

#include "guest/pci.h"
#include "guest/ram.h"

#define RNG_BYTES 64

static bool all_zero(const uint8_t *p, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static void hex(const uint8_t *p, unsigned n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (unsigned i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = 0;
}

/* One 64-byte request with an interrupt; returns whether it came back. */
static bool request(struct vt_dev *d, uint8_t *buf, unsigned k, const char *how)
{
	struct virtq *vq = &d->vq[0];
	struct virtq_buf b = {buf, RNG_BYTES};
	struct irq_snap s;
	struct vt_wait w;
	char what[160], hx[2 * 8 + 1];

	memset(buf, 0, RNG_BYTES);
	vt_wait_prepare(d, &s);
	int head = virtq_add(vq, &b, 0, 1);
	virtq_kick(vq);
	vt_wait(d, vq, &s, head, VT_WAIT_US, true, 1, &w);
	snprintf(what, sizeof(what),
		 "request %u: 64-byte buffer comes back with used len 64 and one interrupt%s", k,
		 how);
	bool ok = dcheck(d, head >= 0 && !w.why[0] && w.len == RNG_BYTES, what, "%s%sused len %u",
			 w.why, w.why[0] ? "; " : "", w.len);
	hex(buf, 8, hx);
	info("%s request %u: %s... (%lu interrupt%s)", d->tag, k, hx, w.irqs,
	     w.irqs == 1 ? "" : "s");
	return ok;
}

static bool used_pending(void *p)
{
	return virtq_used_pending(p) != 0;
}

/* 2.7.7: with VIRTQ_AVAIL_F_NO_INTERRUPT the device should not interrupt;
 * the driver polls the used ring. */
static void no_interrupt(struct vt_dev *d, uint8_t *buf)
{
	struct virtq *vq = &d->vq[0];
	struct virtq_buf b = {buf, RNG_BYTES};
	struct irq_snap s;
	uint16_t head;
	uint32_t len;

	virtq_set_no_interrupt(vq, true);
	vt_wait_prepare(d, &s);
	virtq_add(vq, &b, 0, 1);
	virtq_kick(vq);
	bool came = irq_wait_until(&s, used_pending, vq, VT_WAIT_US);
	irq_spin_us(VT_SETTLE_US);
	uint64_t n = irq_new(&s, d->msix ? d->vec_queue[0] : d->intx_vec);
	bool got = virtq_get_used(vq, &head, &len);
	virtq_set_no_interrupt(vq, false);
	dcheck(d, came && got && len == RNG_BYTES && n == 0,
	       "VIRTQ_AVAIL_F_NO_INTERRUPT: the request completes (polled) without an interrupt "
	       "(2.7.7)",
	       "used %s, len %u, %lu interrupts", came ? "arrived" : "missing", len, n);
}

/* 4.1.4.5.1: without MSI-X the device sets the queue bit in ISR and the
 * PCI Interrupt Status bit (the OR of ISR) before interrupting; reading
 * ISR clears both. With the pin masked the guest sees that state. */
static void isr_with_pin_masked(struct vt_dev *d, uint8_t *buf)
{
	struct virtq *vq = &d->vq[0];
	struct virtq_buf b = {buf, RNG_BYTES};
	struct irq_snap s;
	uint16_t head;
	uint32_t len;

	irq_pin_mask(d->pin, true);
	vt_wait_prepare(d, &s);
	virtq_add(vq, &b, 0, 1);
	virtq_kick(vq);
	bool came = irq_wait_until(&s, used_pending, vq, VT_WAIT_US);
	irq_spin_us(VT_SETTLE_US);
	bool got = virtq_get_used(vq, &head, &len);
	uint16_t st1 = pci_read16(0, d->pf->slot, 0, PCI_STATUS);
	uint8_t isr1 = mmio_read8(d->vp.isr.addr);
	uint16_t st2 = pci_read16(0, d->pf->slot, 0, PCI_STATUS);
	uint8_t isr2 = mmio_read8(d->vp.isr.addr);
	dcheck(d, came && got && (st1 & PCI_STATUS_INTERRUPT) && isr1 == VIRTIO_ISR_QUEUE,
	       "INTx pin masked: after a completion, PCI status bit 3 is set and ISR reads 0x1 "
	       "(4.1.4.5.1)",
	       "used %s, status 0x%04x, ISR 0x%02x", came && got ? "arrived" : "missing", st1,
	       isr1);
	dcheck(d, !(st2 & PCI_STATUS_INTERRUPT) && isr2 == 0,
	       "reading ISR cleared it and PCI status bit 3 (4.1.4.5: read-to-clear)",
	       "status 0x%04x, ISR 0x%02x on the second read", st2, isr2);
	irq_pin_mask(d->pin, false);
	irq_spin_us(VT_SETTLE_US * 2);
	uint64_t n = irq_new(&s, d->intx_vec);
	dcheck(d, n == 0, "unmasking the pin afterwards raises nothing",
	       "%lu interrupts on vector 0x%02x", n, d->intx_vec);
}

/* PCI 3.0, 6.8.2.3: with MSI-X Enable clear the function goes back to
 * INTx#; virtio 4.1.4.5.1: the device then sets the ISR queue bit before
 * interrupting. The queue's MSI-X vector setting no longer matters. */
static void msix_off(struct vt_dev *d, uint8_t *buf)
{
	msix_disable(&d->mx);
	d->msix = false;
	if (vt_setup_intx(d))
		request(d, buf, 3, ", now as INTx with ISR bit 0 (MSI-X Enable cleared)");
}

void vt_rng(struct vt_dev *d)
{
	static const uint16_t qmax[1] = {16};
	uint8_t *a, *b;

	if (!vt_bringup(d, 0, 1, qmax))
		return;
	a = ram_alloc(RNG_BYTES, 64);
	b = ram_alloc(RNG_BYTES, 64);
	if (!dcheck(d, a && b, "buffers allocated", "out of RAM pool"))
		return;
	bool ok1 = request(d, a, 1, ""), ok2 = request(d, b, 2, "");
	if (ok1 && ok2) {
		dcheck(d, !all_zero(a, RNG_BYTES) && !all_zero(b, RNG_BYTES),
		       "both 64-byte results are not all zero (5.4.6)", "first %s, second %s",
		       all_zero(a, RNG_BYTES) ? "all zero" : "ok",
		       all_zero(b, RNG_BYTES) ? "all zero" : "ok");
		dcheck(d, memcmp(a, b, RNG_BYTES) != 0, "the two results differ",
		       "both requests returned the same 64 bytes");
	}
	no_interrupt(d, a);
	if (d->pin)
		isr_with_pin_masked(d, a);
	else if (d->msix)
		msix_off(d, a);
	vt_finish(d);
}
