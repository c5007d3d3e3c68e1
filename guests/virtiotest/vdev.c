/*
 * The device-independent part: the initialisation sequence of virtio 1.2
 * section 3.1.1 over the modern PCI transport (4.1), interrupts through
 * MSI-X (4.1.5.1.2) or INTx with the ISR status register (4.1.4.5), and
 * the completion wait every request goes through. All at CPL 3.
 */
#include "virtiotest.h"

#include "guest/apic.h"
#include "guest/pci.h"

#define RESET_POLLS 100000

static const char *yn(bool b)
{
	return b ? "yes" : "no";
}

/* ---- interrupts ---- */

/* The INTx service callback (CPL 0, in the handler): 4.1.4.5.1, reading
 * ISR returns its bits and clears them, which drops the device's INTx. */
static uint32_t isr_service(void *ctx)
{
	struct vt_dev *d = ctx;
	uint8_t v = mmio_read8(d->vp.isr.addr);

	if (!v)
		return 0;
	d->isr_seen |= v;
	d->isr_events++;
	return 1;
}

static bool setup_msix(struct vt_dev *d, unsigned nq)
{
	const char *why;
	bool found = msix_probe(d->pf->slot, d->pf->bar, &d->mx, &why);

	if (!vt.expect_msix)
		return dcheck(d, !found && d->mx.cap == 0,
			      "has no MSI-X capability (--irq-mode intx, virtiotest.expect=intx)",
			      "MSI-X capability at 0x%02x", d->mx.cap);
	if (!dcheck(d, found, "has an MSI-X capability with a usable table", "%s", why))
		return false;
	info("%s MSI-X: %u entries, table BAR%u+0x%x, PBA BAR%u+0x%x", d->tag, d->mx.nvec,
	     d->mx.table_bir, d->mx.table_off, d->mx.pba_bir, d->mx.pba_off);
	dcheck(d, d->mx.table_bir == 2 && d->mx.pba_bir == 2,
	       "MSI-X table and PBA are in BAR2, apart from the virtio structures",
	       "table BIR %u, PBA BIR %u", d->mx.table_bir, d->mx.pba_bir);
	if (!dcheck(d, d->mx.nvec >= nq + 1,
		    "MSI-X table has an entry for configuration changes and one per queue",
		    "%u entries for %u queues", d->mx.nvec, nq))
		return false;

	uint8_t vecs[1 + VT_MAX_QUEUES];
	d->vec_config = (uint8_t)(VEC_MSIX_BASE + VEC_MSIX_PER_DEV * d->index);
	vecs[0] = d->vec_config;
	for (unsigned q = 0; q < nq; q++)
		vecs[1 + q] = d->vec_queue[q] = (uint8_t)(d->vec_config + 1 + q);
	bool ok = msix_enable(&d->mx, vt.lapic.apic_id, vecs, 1 + nq, &why);
	if (!dcheck(d, ok, "MSI-X enabled, entries programmed and unmasked (PCI 3.0, 6.8.2)", "%s",
		    why))
		return false;
	d->msix = true;

	/* 4.1.4.3 / 4.1.5.1.2: msix_config takes an MSI-X table entry; a
	 * vector the device cannot use reads back NO_VECTOR. */
	virtio_cc_write16(&d->vp, VIRTIO_CC_MSIX_CONFIG, d->mx.nvec);
	uint16_t beyond = virtio_cc_read16(&d->vp, VIRTIO_CC_MSIX_CONFIG);
	virtio_cc_write16(&d->vp, VIRTIO_CC_MSIX_CONFIG, 0);
	uint16_t zero = virtio_cc_read16(&d->vp, VIRTIO_CC_MSIX_CONFIG);
	dcheck(d, beyond == VIRTIO_MSI_NO_VECTOR && zero == 0,
	       "config_msix_vector: entry = table size reads back 0xffff, entry 0 reads back 0 "
	       "(4.1.5.1.2)",
	       "wrote %u, read 0x%04x; wrote 0, read 0x%04x", d->mx.nvec, beyond, zero);
	return zero == 0;
}

bool vt_setup_intx(struct vt_dev *d)
{
	unsigned matches;
	const struct mp_intsrc *m =
	    vt.mp.ok ? mp_routing_pci_intx(&vt.mp, d->pf->slot, d->pf->irq_pin, &matches) : NULL;

	if (!dcheck(d, d->pf->irq_pin >= 1 && d->pf->irq_pin <= 4,
		    "Interrupt Pin names INTA#-INTD# (PCI 3.0, 6.2.4)", "Interrupt Pin %u",
		    d->pf->irq_pin))
		return false;
	if (!dcheck(d, m && matches == 1,
		    "the MP table has one I/O interrupt entry for its INTx (MP spec 1.4, 4.3.4)",
		    "%s; %u entries for source bus IRQ 0x%02x", vt.mp.ok ? "table read" : vt.mp.why,
		    m ? matches : 0, MP_PCI_SRC_IRQ(d->pf->slot, d->pf->irq_pin - 1)))
		return false;
	if (!dcheck(d,
		    m->irq_type == MP_IRQ_INT && m->dst_irq == d->pf->irq_line &&
			m->dst_irq < IRQ_IOAPIC_PINS &&
			(m->dst_apic == vt.mp.ioapic_id || m->dst_apic == 0xFF),
		    "MP entry: INT to the IOAPIC pin in Interrupt Line",
		    "type %u to IOAPIC %u pin %u, Interrupt Line %u", m->irq_type, m->dst_apic,
		    m->dst_irq, d->pf->irq_line))
		return false;
	d->pin = m->dst_irq;
	d->intx_vec = (uint8_t)(VEC_INTX_BASE + d->pin);
	d->pin_src = irq_pin_add_source(d->pin, isr_service, d);
	if (!dcheck(d, d->pin_src >= 0, "INTx pin has room for another device", "pin %u", d->pin))
		return false;
	uint32_t rte = irq_rte_for(d->intx_vec, m->flags), lo, hi;
	irq_pin_route(d->pin, rte, vt.lapic.apic_id, &lo, &hi);
	char what[112];
	snprintf(what, sizeof(what), "IOAPIC pin %u: vector 0x%02x, %s, %s, unmasked", d->pin,
		 d->intx_vec, rte & IOAPIC_RTE_LEVEL ? "level" : "edge",
		 rte & IOAPIC_RTE_ACTIVE_LOW ? "active low" : "active high");
	return dcheck(d,
		      (lo & ~(IOAPIC_RTE_DELIVS | IOAPIC_RTE_REMOTE_IRR)) == rte &&
			  hi >> 24 == vt.lapic.apic_id,
		      what, "entry reads 0x%08x %08x, wrote 0x%08x", hi, lo, rte);
}

/* ---- the init sequence (3.1.1) ---- */

static bool reset_and_greet(struct vt_dev *d, const char *when)
{
	char what[96];

	/* 4.1.4.3.2: after writing 0 the driver waits for a 0 read. */
	bool reset = virtio_reset(&d->vp, RESET_POLLS);
	virtio_set_status(&d->vp, VIRTIO_STATUS_ACKNOWLEDGE);
	uint8_t s1 = virtio_status(&d->vp);
	virtio_set_status(&d->vp, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	uint8_t s2 = virtio_status(&d->vp);
	snprintf(what, sizeof(what),
		 "%s: reset reads 0, then ACKNOWLEDGE, DRIVER (3.1.1 steps 1-3)", when);
	return dcheck(d, reset && s1 == VIRTIO_STATUS_ACKNOWLEDGE && s2 == 3, what,
		      "reset %s, status 0x%02x after ACKNOWLEDGE, 0x%02x after DRIVER",
		      reset ? "read 0" : "never read 0", s1, s2);
}

/* The device must refuse a feature set without VERSION_1 (the VMM offers
 * no legacy interface; 6.1: a device MAY fail to operate without it), and
 * queue registers must not take writes before FEATURES_OK (the VMM's rule:
 * set-up only between FEATURES_OK and DRIVER_OK). */
static void refuse_without_version_1(struct vt_dev *d, uint64_t wanted)
{
	virtio_set_driver_features(&d->vp, wanted & d->offered & ~VIRTIO_F_BIT(VIRTIO_F_VERSION_1));
	virtio_cc_write16(&d->vp, VIRTIO_CC_Q_SELECT, 0);
	virtio_cc_write32(&d->vp, VIRTIO_CC_Q_DESC, 0x10000);
	uint32_t desc = virtio_cc_read32(&d->vp, VIRTIO_CC_Q_DESC);
	dcheck(d, desc == 0,
	       "queue_desc ignores writes before FEATURES_OK (the VMM's set-up window)",
	       "queue 0 queue_desc reads 0x%x after writing 0x10000 in status DRIVER", desc);
	virtio_set_status(&d->vp, 3 | VIRTIO_STATUS_FEATURES_OK);
	uint8_t s = virtio_status(&d->vp);
	dcheck(d, !(s & VIRTIO_STATUS_FEATURES_OK),
	       "features without VIRTIO_F_VERSION_1: FEATURES_OK does not stick (3.1.1 step 6)",
	       "status 0x%02x", s);
}

bool vt_bringup(struct vt_dev *d, uint64_t wanted, unsigned nq, const uint16_t *qmax)
{
	const struct virtio_pci_dev *vp = &d->vp;

	/* Memory decoding and bus mastering (the device writes the rings). */
	uint16_t cmd = pci_read16(0, d->pf->slot, 0, PCI_COMMAND);
	pci_write16(0, d->pf->slot, 0, PCI_COMMAND, cmd | PCI_CMD_MEMORY | PCI_CMD_MASTER);

	if (!reset_and_greet(d, "first attempt"))
		return false;
	d->offered = virtio_device_features(vp);
	info("%s device features 0x%016lx", d->tag, d->offered);
	if (!dcheck(d, d->offered & VIRTIO_F_BIT(VIRTIO_F_VERSION_1),
		    "offers VIRTIO_F_VERSION_1 (bit 32, 6.1)", "features 0x%016lx", d->offered))
		return false;
	info("%s offers EVENT_IDX %s, INDIRECT_DESC %s (not used)", d->tag,
	     yn(d->offered & VIRTIO_F_BIT(VIRTIO_F_EVENT_IDX)),
	     yn(d->offered & VIRTIO_F_BIT(VIRTIO_F_INDIRECT_DESC)));
	refuse_without_version_1(d, wanted);

	if (!reset_and_greet(d, "second attempt"))
		return false;
	/* 3.1.1 step 4: a subset of the offer; step 5: FEATURES_OK; step 6:
	 * re-read it. */
	d->features = (wanted & d->offered) | VIRTIO_F_BIT(VIRTIO_F_VERSION_1);
	virtio_set_driver_features(vp, d->features);
	uint64_t back = virtio_driver_features(vp);
	virtio_set_status(vp, 3 | VIRTIO_STATUS_FEATURES_OK);
	uint8_t s = virtio_status(vp);
	info("%s driver features 0x%016lx", d->tag, d->features);
	if (!dcheck(d, back == d->features && s == (3 | VIRTIO_STATUS_FEATURES_OK),
		    "driver features read back; FEATURES_OK set and re-read (3.1.1 steps 4-6)",
		    "driver_feature reads 0x%016lx, status 0x%02x", back, s))
		return false;

	/* 4.1.4.9: the same register through the PCI-configuration window. */
	uint16_t nqueues = virtio_cc_read16(vp, VIRTIO_CC_NUM_QUEUES);
	uint32_t via_cfg =
	    virtio_pci_cfg_read(vp, vp->common.bar, vp->common.offset + VIRTIO_CC_NUM_QUEUES, 2);
	uint32_t status_cfg =
	    virtio_pci_cfg_read(vp, vp->common.bar, vp->common.offset + VIRTIO_CC_STATUS, 1);
	dcheck(d, vp->pci_cfg_cap && via_cfg == nqueues && status_cfg == s,
	       "num_queues and device_status read alike through the PCI cfg access capability "
	       "(4.1.4.9)",
	       "capability at 0x%02x: num_queues %u (MMIO %u), status 0x%02x (MMIO 0x%02x)",
	       vp->pci_cfg_cap, via_cfg, nqueues, status_cfg, s);
	if (!dcheck(d, nqueues >= nq, "num_queues covers the queues the device type has",
		    "num_queues %u, need %u", nqueues, nq))
		return false;

	/* Interrupts before the queues: queue vectors need MSI-X set up. */
	bool irq_ok = vt.expect_msix ? setup_msix(d, nq) : vt_setup_intx(d);
	if (!irq_ok)
		return false;
	if (d->msix) {
		virtio_cc_write16(vp, VIRTIO_CC_Q_SELECT, 0);
		virtio_cc_write16(vp, VIRTIO_CC_Q_MSIX, d->mx.nvec);
		uint16_t beyond = virtio_cc_read16(vp, VIRTIO_CC_Q_MSIX);
		dcheck(d, beyond == VIRTIO_MSI_NO_VECTOR,
		       "queue_msix_vector: entry = table size reads back 0xffff (4.1.5.1.2)",
		       "wrote %u, read 0x%04x", d->mx.nvec, beyond);
	}

	/* 3.1.1 step 7 / 4.1.5.1.3: the queues. */
	for (unsigned q = 0; q < nq; q++) {
		const char *why;
		uint16_t want_vec = d->msix ? (uint16_t)(1 + q) : VIRTIO_MSI_NO_VECTOR, got_vec;
		bool ok = virtq_setup(vp, q, qmax[q], want_vec, &d->vq[q], &got_vec, &why);
		char what[112];
		snprintf(
		    what, sizeof(what), "queue %u set up (4.1.5.1.3): size %u of the device's %u%s",
		    q, d->vq[q].size, d->vq[q].dev_size, d->msix ? ", MSI-X entry read back" : "");
		if (!dcheck(d, ok && (!d->msix || got_vec == want_vec), what,
			    "%s; queue_msix_vector 0x%04x for entry %u", ok ? "ok" : why, got_vec,
			    want_vec))
			return false;
	}
	d->nq = nq;

	/* 3.1.1 step 8. */
	virtio_set_status(vp, 3 | VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK);
	s = virtio_status(vp);
	d->usable = dcheck(d, s == 0x0F, "DRIVER_OK set; status reads 0x0f (3.1.1 step 8)",
			   "status 0x%02x", s);
	return d->usable;
}

void vt_finish(struct vt_dev *d)
{
	uint8_t s = virtio_status(&d->vp);
	dcheck(d, s == 0x0F, "after its tests: status still 0x0f, no NEEDS_RESET or FAILED (2.1)",
	       "status 0x%02x%s", s, s & VIRTIO_STATUS_NEEDS_RESET ? " (NEEDS_RESET)" : "");
	bool reset = virtio_reset(&d->vp, RESET_POLLS);
	dcheck(d, reset, "reset at the end reads back 0 (4.1.4.3.2)", "status 0x%02x",
	       virtio_status(&d->vp));
	if (d->msix)
		msix_disable(&d->mx);
	if (d->pin)
		info("%s: the handler found ISR set %lu times", d->tag, d->isr_events);
}

/* ---- completions ---- */

void vt_wait_prepare(struct vt_dev *d, struct irq_snap *s)
{
	d->isr_seen = 0;
	irq_snap(s);
}

uint64_t vt_queue_irqs(const struct vt_dev *d, const struct virtq *vq, const struct irq_snap *s)
{
	if (d->msix)
		return irq_new(s, d->vec_queue[vq->index]);
	if (d->pin)
		return irq_pin_genuine_new(s, d->pin, (unsigned)d->pin_src);
	return 0;
}

bool vt_irq_seen(const struct vt_dev *d, const struct virtq *vq, const struct irq_snap *s)
{
	return vt_queue_irqs(d, vq, s) > 0;
}

struct wait_arg {
	const struct vt_dev *d;
	const struct virtq *vq;
	const struct irq_snap *s;
};

static bool used_and_irq(void *p)
{
	const struct wait_arg *a = p;
	return virtq_used_pending(a->vq) && vt_irq_seen(a->d, a->vq, a->s);
}

void vt_wait(struct vt_dev *d, struct virtq *vq, const struct irq_snap *s, int head,
	     uint64_t timeout_us, bool strict, uint64_t max_irqs, struct vt_wait *w)
{
	struct wait_arg a = {d, vq, s};

	memset(w, 0, sizeof(*w));
	irq_wait_until(s, used_and_irq, &a, timeout_us);
	irq_spin_us(VT_SETTLE_US);
	w->used = virtq_get_used(vq, &w->head, &w->len);
	w->head_ok = w->used && (head < 0 || w->head == (uint16_t)head);
	w->irqs = vt_queue_irqs(d, vq, s);
	if (d->msix) {
		w->others = irq_new(s, d->vec_config);
		w->irq_ok = w->irqs >= 1 && (!strict || w->irqs <= max_irqs) && w->others == 0;
	} else if (d->pin) {
		w->spurious = irq_pin_spurious_new(s, d->pin);
		w->isr = d->isr_seen;
		w->irq_ok = w->irqs >= 1 && (!strict || w->irqs <= max_irqs) &&
			    (w->isr & VIRTIO_ISR_QUEUE) && !(w->isr & VIRTIO_ISR_CONFIG) &&
			    irq_intx_redeliveries_ok(&vt.lapic, w->irqs, w->spurious);
	}
	if (!w->used)
		snprintf(w->why, sizeof(w->why), "no used entry within %lu ms (%lu interrupts)",
			 timeout_us / 1000, w->irqs);
	else if (!w->head_ok)
		snprintf(w->why, sizeof(w->why), "used entry has id %u, expected %d", w->head,
			 head);
	else if (!w->irq_ok && d->msix)
		snprintf(w->why, sizeof(w->why),
			 "%lu interrupts on vector 0x%02x (expected 1%s), %lu on the config vector",
			 w->irqs, d->vec_queue[vq->index],
			 strict ? (max_irqs > 1 ? " or more, one per buffer" : "") : " or more",
			 w->others);
	else if (!w->irq_ok)
		snprintf(w->why, sizeof(w->why),
			 "INTx pin %u: %lu interrupts with ISR set (expected 1%s), %lu with ISR 0, "
			 "ISR bits seen 0x%x (expected queue bit 0x1 only)",
			 d->pin, w->irqs, strict ? "" : " or more", w->spurious, w->isr);
}
