/*
 * Attacks on virtio-fs (virtio 1.2, 5.11), whose queues another process
 * serves (the VMM's --fs: virtiofsd over vhost-user). Ring addresses and
 * indices now leave the VMM: the frontend must not hand the backend what
 * it would refuse itself (a queue refused at enable, a device that needs
 * a reset, a ring the backend never started), and however the guest
 * drives the device (partial set-ups, resets with requests in flight,
 * reset after reset, descriptors the backend cannot map) the VMM must not
 * hang on its backend: every case here is a bounded wait.
 */
#include "hostile.h"

#define PAGE 4096u
/* How long a case watches that the backend answers nothing: far beyond a
 * FUSE_INIT's round trip (well under 1 ms measured here). */
#define FS_QUIET_US (4 * H_QUIET_US)
#define FS_ROUNDS   20 /* fs-reset-cycles */
#define FS_INFLIGHT 16 /* fs-reset-during-inflight: requests of 4 descriptors */

/* Queue 1 (requests) set up right, then queue 0 (hiprio) by hand with a
 * size or rings a split virtqueue cannot have (2.7, 2.7.2): queue_enable
 * must not take and the device needs a reset (2.1.2). A driver that then
 * writes DRIVER_OK anyway must not get the backend going: a FUSE_INIT on
 * the good queue stays unanswered. */
static void fs_bad_queue(struct hdev *t, uint16_t size, uint64_t desc, uint64_t avail,
			 uint64_t used, const char *what)
{
	const struct virtio_pci_dev *vp = &t->vp;
	uint16_t vec;
	const char *why = "ok";

	t->up = false;
	if (!hdev_to_features_ok(t, 0))
		return;
	bool ok = virtq_setup(vp, FS_REQUEST_Q, t->qsize, t->msix ? 1 : VIRTIO_MSI_NO_VECTOR,
			      &t->vq, &vec, &why);
	if (!expect(ok, "%s: %s: queue %u set up: %s", t->name, what, FS_REQUEST_Q, why))
		return;
	virtio_cc_write16(vp, VIRTIO_CC_Q_SELECT, 0);
	virtio_cc_write16(vp, VIRTIO_CC_Q_SIZE, size);
	virtio_cc_write64(vp, VIRTIO_CC_Q_DESC, desc);
	virtio_cc_write64(vp, VIRTIO_CC_Q_DRIVER, avail);
	virtio_cc_write64(vp, VIRTIO_CC_Q_DEVICE, used);
	virtio_cc_write16(vp, VIRTIO_CC_Q_ENABLE, 1);
	uint16_t en = virtio_cc_read16(vp, VIRTIO_CC_Q_ENABLE);
	expect(en == 0, "%s: %s: hiprio's queue_enable reads %u: the queue went live", t->name,
	       what, en);
	if (!expect_needs_reset(t, false, 0, what))
		return;
	uint64_t q0 = hdev_qirqs(t);
	virtio_set_status(vp, 0x0F);
	int head = fs_post_init(t, true);
	spin_us(FS_QUIET_US);
	uint8_t s = virtio_status(vp);
	expect(head >= 0 && !virtq_used_pending(&t->vq) && hdev_qirqs(t) == q0,
	       "%s: %s: DRIVER_OK written over NEEDS_RESET, then a FUSE_INIT on the good queue: "
	       "answered (%u used, %lu interrupts): the backend was handed a device that needs "
	       "a reset",
	       t->name, what, virtq_used_pending(&t->vq), hdev_qirqs(t) - q0);
	expect(s & VIRTIO_STATUS_NEEDS_RESET,
	       "%s: %s: DRIVER_OK over NEEDS_RESET cleared it: status 0x%02x", t->name, what, s);
	hdev_reset(t);
}

void case_fs_queue_size_not_pow2(struct hdev *t)
{
	static const uint16_t sizes[] = {3, 100, 0, 0xFFFF};
	char what[64];

	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint8_t *d = ram_alloc_page(), *a = ram_alloc_page(), *u = ram_alloc_page();
		if (!expect(d && a && u, "out of RAM pool for rings"))
			return;
		snprintf(what, sizeof(what), "hiprio queue_size %u", sizes[i]);
		fs_bad_queue(t, sizes[i], (uint64_t)d, (uint64_t)a, (uint64_t)u, what);
	}
}

void case_fs_ring_misaligned(struct hdev *t)
{
	uint8_t *dp = ram_alloc_page(), *ap = ram_alloc_page(), *up = ram_alloc_page();

	if (!expect(dp && ap && up, "out of RAM pool for rings"))
		return;
	uint64_t d = (uint64_t)dp, a = (uint64_t)ap, u = (uint64_t)up;
	fs_bad_queue(t, 8, d + 8, a, u, "hiprio descriptor table at +8 (2.7.2: 16-byte aligned)");
	fs_bad_queue(t, 8, d, a + 1, u, "hiprio available ring at +1 (2-byte aligned)");
	fs_bad_queue(t, 8, d, a, u + 2, "hiprio used ring at +2 (4-byte aligned)");
	fs_bad_queue(t, 8, 0xD0000000ull, a, u, "hiprio descriptor table in the PCI MMIO window");
	fs_bad_queue(t, 8, d, a, H.ram_end - 64, "hiprio used ring straddling the end of RAM");
}

static bool status_zero(void *arg)
{
	return virtio_status(&((struct hdev *)arg)->vp) == 0;
}

/* A reset (4.1.4.3.2) that must not find NEEDS_RESET and must read back 0
 * in time; how long it took, in microseconds. */
static uint64_t fs_clean_reset(struct hdev *t, const char *what)
{
	uint8_t s = virtio_status(&t->vp);
	expect(!(s & VIRTIO_STATUS_NEEDS_RESET), "%s: %s: NEEDS_RESET before the reset: 0x%02x",
	       t->name, what, s);
	uint64_t t0 = now_us();
	hdev_reset(t);
	return now_us() - t0;
}

/* 3.1.1 lets a driver use fewer queues than the device has: DRIVER_OK
 * with none enabled, with only the request queue (which must serve), with
 * only hiprio; then a reset. The backend must see a stop only for the
 * rings it was given (virtiofsd dies on a GET_VRING_BASE for another), so
 * the device keeps working. */
void case_fs_partial_queues(struct hdev *t)
{
	static const unsigned masks[] = {0, 2, 1, 0};
	static const char *const names[] = {"no queue", "the request queue only", "hiprio only",
					    "no queue again"};
	char what[64];

	for (unsigned i = 0; i < sizeof(masks) / sizeof(masks[0]); i++) {
		snprintf(what, sizeof(what), "DRIVER_OK with %s", names[i]);
		if (!fs_up_queues(t, masks[i]))
			return;
		if (masks[i] & 2)
			hdev_works(t, what);
		uint64_t took = fs_clean_reset(t, what);
		info("%s: %s, then a reset: %lu us", t->name, what, took);
	}
	/* A fresh bring-up must find the backend alive (run_case checks it
	 * works); NEEDS_RESET here would be a backend that died. */
	if (fs_up_queues(t, 3))
		expect_status(t, 0x0F, "all queues after the partial set-ups");
}

/* A request posted and notified between FEATURES_OK and DRIVER_OK: not
 * the device's until DRIVER_OK (3.1.1), then answered with its interrupt
 * (the notification waited in the backend's kick fd). */
void case_fs_kick_before_driver_ok(struct hdev *t)
{
	uint16_t vec, id = 0;
	uint32_t len = 0;
	const char *why = "ok";
	char rwhy[128];

	t->up = false;
	if (!hdev_to_features_ok(t, 0))
		return;
	uint16_t want = t->msix ? 1 : VIRTIO_MSI_NO_VECTOR;
	bool ok = virtq_setup(&t->vp, 0, FS_HIPRIO_QSIZE, want, &t->hiprio, &vec, &why) &&
		  virtq_setup(&t->vp, FS_REQUEST_Q, t->qsize, want, &t->vq, &vec, &why);
	if (!expect(ok, "%s: queues set up: %s", t->name, why))
		return;
	uint64_t q0 = hdev_qirqs(t);
	int head = fs_post_init(t, true);
	spin_us(FS_QUIET_US);
	expect(head >= 0 && !virtq_used_pending(&t->vq),
	       "%s: a FUSE_INIT notified before DRIVER_OK was answered before it (3.1.1)", t->name);
	virtio_set_status(&t->vp, 0x0F);
	if (!expect_status(t, 0x0F, "DRIVER_OK with a request waiting"))
		return;
	t->up = true;
	uint64_t t0 = now_us();
	bool used = wait_used(t, q0, &id, &len);
	uint64_t took = now_us() - t0;
	if (expect(used && id == (uint16_t)head,
		   "%s: the FUSE_INIT notified before DRIVER_OK: no used entry with its "
		   "interrupt within %u ms of DRIVER_OK (id %u of head %d, %lu interrupts)",
		   t->name, H_WAIT_US / 1000, id, head, hdev_qirqs(t) - q0) &&
	    expect(fs_init_reply_ok(rwhy, sizeof(rwhy)), "%s: that FUSE_INIT: %s", t->name, rwhy))
		info("%s: a request notified before DRIVER_OK answered %lu us after it", t->name,
		     took);
}

/* 16 requests notified and, without waiting, a reset: the reset reads 0
 * in time, and once it has, the backend writes no used entry and sends
 * no interrupt (the VMM stopped its rings before the reset completed). */
void case_fs_reset_inflight(struct hdev *t)
{
	unsigned posted = 0;
	uint16_t before = t->vq.used->idx;

	for (unsigned i = 0; i < FS_INFLIGHT; i++)
		posted += fs_post_init(t, false) >= 0;
	virtq_kick(&t->vq);
	uint64_t t0 = now_us();
	virtio_set_status(&t->vp, 0);
	t->up = false;
	bool zero = wait_for(status_zero, t, H_WAIT_US);
	uint64_t took = now_us() - t0;
	if (!expect(zero, "%s: a reset with %u requests in flight: status reads 0x%02x after %u ms",
		    t->name, posted, virtio_status(&t->vp), H_WAIT_US / 1000))
		return;
	uint16_t used0 = t->vq.used->idx;
	uint64_t q0 = hdev_qirqs(t);
	spin_us(FS_QUIET_US);
	uint16_t used1 = t->vq.used->idx;
	expect(used1 == used0 && hdev_qirqs(t) == q0,
	       "%s: after the reset read 0: used idx %u -> %u, %lu queue interrupts (late writes "
	       "from the backend)",
	       t->name, used0, used1, hdev_qirqs(t) - q0);
	info("%s: reset with %u requests in flight: %u answered before it completed, in %lu us",
	     t->name, posted, (uint16_t)(used0 - before), took);
}

/* Set-up, DRIVER_OK and reset, FS_ROUNDS times: each round starts and
 * stops the backend's rings; none may leave the device needing a reset,
 * and the backend must still answer afterwards (run_case's FUSE_INIT). */
void case_fs_reset_cycles(struct hdev *t)
{
	unsigned nr0 = t->needs_reset_seen;
	uint64_t longest = 0, t0 = now_us();

	for (unsigned i = 0; i < FS_ROUNDS; i++) {
		uint64_t r0 = now_us();
		if (!hdev_up(t, 0) || !expect_status(t, 0x0F, "a set-up round"))
			return;
		if (now_us() - r0 > longest)
			longest = now_us() - r0;
	}
	hdev_works(t, "after the set-up rounds");
	expect(t->needs_reset_seen == nr0, "%s: %u NEEDS_RESET states in %u set-up/reset rounds",
	       t->name, t->needs_reset_seen - nr0, FS_ROUNDS);
	info("%s: %u set-up/DRIVER_OK/reset rounds in %lu us, the longest %lu us", t->name,
	     FS_ROUNDS, now_us() - t0, longest);
}

static bool answered_or_broken(void *arg)
{
	struct hdev *d = arg;
	return virtq_used_pending(&d->vq) || (virtio_status(&d->vp) & VIRTIO_STATUS_NEEDS_RESET);
}

/* One chain on the request queue whose in-header lies at `addr` (outside
 * RAM); the reply header is in RAM. The VMM cannot check a descriptor it
 * never reads: the backend must refuse it. Either it answers (an error)
 * or the device goes NEEDS_RESET (the backend gave up, or died) within
 * the bound, with a configuration interrupt. Returns whether the backend
 * answered. */
static bool fs_bad_desc(struct hdev *t, uint64_t addr, const char *what)
{
	struct fs_msg *m = H.fs_msg;

	memset(m, 0, sizeof(*m));
	uint64_t cfg0 = hdev_cfgirqs(t);
	uint16_t head = t->vq.free_head;
	uint16_t next = t->vq.desc[head].next;
	raw_desc(&t->vq, head, addr, sizeof(struct fuse_in_header), VIRTQ_DESC_F_NEXT, next);
	raw_desc(&t->vq, next, (uint64_t)&m->out, sizeof(m->out) + sizeof(m->reply),
		 VIRTQ_DESC_F_WRITE, 0);
	uint64_t t0 = now_us();
	raw_publish(&t->vq, head);
	bool came = wait_for(answered_or_broken, t, H_WAIT_US);
	uint64_t took = now_us() - t0;
	uint8_t s = virtio_status(&t->vp);
	if (!expect(came, "%s: %s: neither an answer nor NEEDS_RESET within %u ms (status 0x%02x)",
		    t->name, what, H_WAIT_US / 1000, s))
		return false;
	if (!(s & VIRTIO_STATUS_NEEDS_RESET)) {
		info("%s: %s: answered in %lu us, error %d, used len %u", t->name, what, took,
		     m->out.error, t->vq.used->ring[t->vq.last_used % t->vq.size].len);
		return true;
	}
	info("%s: %s: NEEDS_RESET after %lu us", t->name, what, took);
	expect_needs_reset(t, true, cfg0, what);
	return false;
}

/* A bring-up whose failure is the outcome being measured, not the case's:
 * the status it leaves, and how long it took (microseconds). */
static uint8_t fs_try_up(struct hdev *t, uint64_t *took)
{
	bool clean = !H.why[0];
	uint64_t t0 = now_us();

	fs_up_queues(t, 3);
	*took = now_us() - t0;
	if (clean)
		H.why[0] = 0;
	return virtio_status(&t->vp);
}

/* Descriptors past the end of RAM and in the PCI MMIO hole, after a
 * proper set-up. Whatever the backend makes of them, the VMM and the
 * other devices go on (run_case), and the device comes back from a reset
 * or, when its backend has gone, says so at once on every DRIVER_OK
 * (NEEDS_RESET, no wait on a dead backend). */
void case_fs_desc_past_ram(struct hdev *t)
{
	static const char *const what[] = {"a descriptor past the end of RAM",
					   "a descriptor in the PCI MMIO hole"};
	const uint64_t addr[] = {H.ram_end + (1ull << 20), 0xD0000000ull};
	uint64_t took;

	for (unsigned i = 0; i < 2 && !H.why[0]; i++) {
		if (!t->up && !hdev_up(t, 0))
			return;
		if (fs_bad_desc(t, addr[i], what[i])) {
			hdev_reset(t);
			continue;
		}
		if (H.why[0])
			return;
		/* NEEDS_RESET: a reset, then does the device come back? */
		hdev_reset(t);
		uint8_t s = fs_try_up(t, &took);
		expect(took < H_WAIT_US, "%s: the set-up after NEEDS_RESET took %lu us", t->name,
		       took);
		if (s == 0x0F) {
			info("%s: after %s the device works again after a reset", t->name, what[i]);
			continue;
		}
		expect(s & VIRTIO_STATUS_NEEDS_RESET,
		       "%s: the set-up after NEEDS_RESET: status 0x%02x, neither 0x0F nor "
		       "NEEDS_RESET",
		       t->name, s);
		info("%s: after %s the backend is gone: DRIVER_OK gives NEEDS_RESET at once (%lu "
		     "us)",
		     t->name, what[i], took);
		hdev_reset(t);
		s = fs_try_up(t, &took);
		expect(took < H_WAIT_US && (s & VIRTIO_STATUS_NEEDS_RESET),
		       "%s: a second set-up without the backend: status 0x%02x after %lu us",
		       t->name, s, took);
		hdev_reset(t);
		H.fs_gone = true;
		return;
	}
}
