/*
 * virtio-fs (virtio 1.2, 5.11): a hiprio queue and request queues
 * (5.11.2); the configuration holds the tag and num_request_queues
 * (5.11.4); requests are FUSE messages, a device-readable fuse_in_header
 * and its arguments, then a device-writable fuse_out_header and the reply
 * (5.11.6). The queues are served by a vhost-user backend in another
 * process (the VMM's --fs), so these checks are about what reaches the
 * guest from there: each reply with exactly one interrupt, under MSI-X and
 * under INTx, and (MSI-X) a reply that arrives while its vector is masked
 * sets the PBA bit and is delivered exactly once on unmask (PCI 3.0
 * 6.8.2.9, 6.8.2.10).
 *
 * The host's side (tests/guest/virtio_fs_test.py): the shared directory
 * has FS_READ_NAME holding FS_READ_TEXT; the guest creates FS_WRITE_NAME
 * with FS_WRITE_TEXT, which the host checks after the VM stopped. The tag
 * is FS_TAG.
 */
#include "virtiotest.h"

#include "guest/fuse.h"
#include "guest/ram.h"

#define FS_TAG	      "virtiotest"
#define FS_READ_NAME  "from-host.txt"
#define FS_READ_TEXT  "virtio-fs: the host's file, read by the guest\n"
#define FS_WRITE_NAME "from-guest.txt"
#define FS_WRITE_TEXT "virtio-fs: written by virtiotest over FUSE\n"

/* 5.11.4: struct virtio_fs_config. */
#define FS_EROFS	  30 /* Linux errno, as FUSE replies carry it */
#define FS_CFG_TAG	  0
#define FS_TAG_BYTES	  36
#define FS_CFG_NUM_QUEUES 36

/* How long the host may take to kill the backend (measured: well under
 * 1 s on the emulated host). */
#define FS_KILL_WAIT_US 60000000

struct fuse_release_in {
	uint64_t fh;
	uint32_t flags, release_flags;
	uint64_t lock_owner;
};

#define FS_ARGS_MAX  256 /* the largest request argument block (create: 16 + name) */
#define FS_REPLY_MAX 512

/* One request's buffers (in RAM the guest owns). */
struct fs_req {
	struct fuse_in_header *in;
	uint8_t *args;
	struct fuse_out_header *out;
	uint8_t *reply;
	uint64_t unique;
};

static struct fs_req rq;

/* Posts one FUSE request on the first request queue; returns the head. */
static int fs_post(struct vt_dev *d, uint32_t opcode, uint64_t nodeid, const void *args,
		   uint32_t alen, uint32_t rlen)
{
	memset(rq.in, 0, sizeof(*rq.in));
	memset(rq.out, 0, sizeof(*rq.out));
	memset(rq.reply, 0, FS_REPLY_MAX);
	memcpy(rq.args, args, alen);
	rq.in->len = (uint32_t)sizeof(*rq.in) + alen;
	rq.in->opcode = opcode;
	rq.in->unique = ++rq.unique;
	rq.in->nodeid = nodeid;
	struct virtq_buf b[4] = {
	    {rq.in, sizeof(*rq.in)}, {rq.args, alen}, {rq.out, sizeof(*rq.out)}, {rq.reply, rlen}};
	int head = virtq_add(&d->vq[1], alen ? b : b + 1, alen ? 2 : 1, rlen ? 2 : 1);
	virtq_kick(&d->vq[1]);
	return head;
}

/* One request and its reply with exactly one interrupt: whether it came
 * back right (w says how it did not). */
static bool fs_roundtrip(struct vt_dev *d, uint32_t opcode, uint64_t nodeid, const void *args,
			 uint32_t alen, uint32_t rlen, struct vt_wait *w)
{
	struct irq_snap s;
	vt_wait_prepare(d, &s);
	int head = fs_post(d, opcode, nodeid, args, alen, rlen);
	vt_wait(d, &d->vq[1], &s, head, VT_WAIT_US, true, 1, w);
	return head >= 0 && !w->why[0] && rq.out->unique == rq.unique &&
	       rq.out->len >= sizeof(*rq.out) && rq.out->len <= sizeof(*rq.out) + rlen;
}

/* The round trip as a check named `what`: the reply's error (0 =
 * success), or 1 when it did not come back right. */
static int fs_call(struct vt_dev *d, const char *what, uint32_t opcode, uint64_t nodeid,
		   const void *args, uint32_t alen, uint32_t rlen)
{
	struct vt_wait w;
	bool ok = fs_roundtrip(d, opcode, nodeid, args, alen, rlen, &w);
	dcheck(d, ok && rq.out->error == 0, what,
	       "%s%sused len %u, reply unique %lu (sent %lu), len %u, error %d", w.why,
	       w.why[0] ? "; " : "", w.len, rq.out->unique, rq.unique, rq.out->len, rq.out->error);
	return ok ? rq.out->error : 1;
}

static bool used_pending_fs(void *p)
{
	return virtq_used_pending(p) != 0;
}

/* 5.11.4: the tag is the host's name for the share, NUL-padded. */
static void fs_config(struct vt_dev *d)
{
	char tag[FS_TAG_BYTES + 1];
	for (unsigned i = 0; i < FS_TAG_BYTES; i++)
		tag[i] = (char)virtio_config_read(&d->vp, FS_CFG_TAG + i, 1);
	tag[FS_TAG_BYTES] = 0;
	uint32_t nq = (uint32_t)virtio_config_read(&d->vp, FS_CFG_NUM_QUEUES, 4);
	dcheck(d, !strcmp(tag, FS_TAG) && nq >= 1,
	       "config: tag \"" FS_TAG "\", num_request_queues >= 1 (5.11.4)", "tag \"%s\", %u",
	       tag, nq);
}

static bool fs_init(struct vt_dev *d)
{
	struct fuse_init_in in = {.major = 7, .minor = 31, .max_readahead = 0, .flags = 0};
	if (fs_call(d, "FUSE_INIT: the backend answers (protocol 7)", FUSE_INIT, 0, &in, sizeof(in),
		    sizeof(struct fuse_init_out)))
		return false;
	const struct fuse_init_out *o = (const void *)rq.reply;
	return dcheck(d, o->major == 7, "FUSE_INIT reply: major 7", "major %u minor %u", o->major,
		      o->minor);
}

/* LOOKUP + OPEN + READ + RELEASE of the host's file. */
static void fs_read_host_file(struct vt_dev *d)
{
	static const char name[] = FS_READ_NAME;
	if (fs_call(d, "FUSE_LOOKUP of the host's file", FUSE_LOOKUP, FUSE_ROOT_ID, name,
		    sizeof(name), sizeof(struct fuse_entry_out)))
		return;
	uint64_t node = ((const struct fuse_entry_out *)rq.reply)->nodeid;
	struct fuse_open_in oi = {.flags = 0};
	if (fs_call(d, "FUSE_OPEN read-only", FUSE_OPEN, node, &oi, sizeof(oi),
		    sizeof(struct fuse_open_out)))
		return;
	uint64_t fh = ((const struct fuse_open_out *)rq.reply)->fh;
	struct fuse_rw_in ri = {.fh = fh, .offset = 0, .size = FS_REPLY_MAX};
	if (!fs_call(d, "FUSE_READ of the host's file", FUSE_READ, node, &ri, sizeof(ri),
		     FS_REPLY_MAX)) {
		uint32_t n = rq.out->len - (uint32_t)sizeof(*rq.out);
		dcheck(d, n == sizeof(FS_READ_TEXT) - 1 && !memcmp(rq.reply, FS_READ_TEXT, n),
		       "the guest reads the host's bytes", "%u bytes: \"%.*s\"", n, (int)n,
		       (const char *)rq.reply);
	}
	struct fuse_release_in rel = {.fh = fh};
	fs_call(d, "FUSE_RELEASE", FUSE_RELEASE, node, &rel, sizeof(rel), 0);
}

/* CREATE + WRITE + RELEASE of the guest's file; on a read-only share
 * (virtiotest.ro=1, --fs ...,ro) CREATE must fail with EROFS. */
static void fs_write_guest_file(struct vt_dev *d)
{
	uint8_t args[sizeof(struct fuse_create_in) + sizeof(FS_WRITE_NAME)];
	struct fuse_create_in ci = {.flags = O_WRONLY_ | O_CREAT_ | O_TRUNC_, .mode = 0100644};
	memcpy(args, &ci, sizeof(ci));
	memcpy(args + sizeof(ci), FS_WRITE_NAME, sizeof(FS_WRITE_NAME));
	if (vt.ro) {
		struct vt_wait w;
		bool ok = fs_roundtrip(d, FUSE_CREATE, FUSE_ROOT_ID, args, sizeof(args), 0, &w);
		dcheck(d, ok && rq.out->error == -FS_EROFS,
		       "virtiotest.ro=1: FUSE_CREATE in the share fails with EROFS", "%s%serror %d",
		       w.why, w.why[0] ? "; " : "", ok ? rq.out->error : 0);
		return;
	}
	if (fs_call(d, "FUSE_CREATE of a file in the share", FUSE_CREATE, FUSE_ROOT_ID, args,
		    sizeof(args), sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out)))
		return;
	uint64_t node = ((const struct fuse_entry_out *)rq.reply)->nodeid;
	uint64_t fh =
	    ((const struct fuse_open_out *)(rq.reply + sizeof(struct fuse_entry_out)))->fh;
	uint8_t w[sizeof(struct fuse_rw_in) + sizeof(FS_WRITE_TEXT) - 1];
	struct fuse_rw_in wi = {.fh = fh, .offset = 0, .size = sizeof(FS_WRITE_TEXT) - 1};
	memcpy(w, &wi, sizeof(wi));
	memcpy(w + sizeof(wi), FS_WRITE_TEXT, sizeof(FS_WRITE_TEXT) - 1);
	if (!fs_call(d, "FUSE_WRITE into it", FUSE_WRITE, node, w, sizeof(w),
		     sizeof(struct fuse_write_out)))
		dcheck(d, ((const struct fuse_write_out *)rq.reply)->size == wi.size,
		       "FUSE_WRITE wrote every byte", "%u of %u",
		       ((const struct fuse_write_out *)rq.reply)->size, wi.size);
	struct fuse_release_in rel = {.fh = fh};
	fs_call(d, "FUSE_RELEASE of the written file", FUSE_RELEASE, node, &rel, sizeof(rel), 0);
}

/* PCI 3.0 6.8.2.9/10: the backend answers while the queue's vector is
 * masked: no message, the PBA bit set; on unmask exactly one message and
 * the bit clear. The backend signals its call eventfd either way: the VMM
 * must hold it while the vector is masked. */
static void fs_masked_vector(struct vt_dev *d)
{
	static const char name[] = FS_READ_NAME;
	unsigned entry = 1 + 1; /* configuration is entry 0; queue q is 1 + q */
	uint8_t vec = d->vec_queue[1];
	struct irq_snap s;
	uint16_t head;
	uint32_t len;

	msix_entry_mask(&d->mx, entry, true);
	vt_wait_prepare(d, &s);
	fs_post(d, FUSE_LOOKUP, FUSE_ROOT_ID, name, sizeof(name), sizeof(struct fuse_entry_out));
	bool came = irq_wait_until(&s, used_pending_fs, &d->vq[1], VT_WAIT_US);
	irq_spin_us(VT_SETTLE_US);
	bool pending = msix_pending(&d->mx, entry);
	uint64_t masked_irqs = irq_new(&s, vec);
	dcheck(d, came && pending && masked_irqs == 0,
	       "a reply while the queue's vector is masked: no interrupt, PBA bit set (6.8.2.9)",
	       "reply %s, PBA %u, %lu interrupts", came ? "arrived" : "missing", pending,
	       masked_irqs);
	msix_entry_mask(&d->mx, entry, false);
	irq_spin_us(VT_SETTLE_US * 2);
	uint64_t after = irq_new(&s, vec);
	bool still = msix_pending(&d->mx, entry);
	dcheck(d, after == 1 && !still,
	       "on unmask: exactly one interrupt, the PBA bit clear (6.8.2.10)",
	       "%lu interrupts, PBA %u", after, still);
	bool got = virtq_get_used(&d->vq[1], &head, &len);
	dcheck(d, got && rq.out->error == 0, "the masked-time reply is a successful LOOKUP",
	       "used %s, error %d", got ? "found" : "missing", rq.out->error);
}

#define FS_TIMED 200 /* LOOKUPs per timing */

/* One LOOKUP polled (VIRTQ_AVAIL_F_NO_INTERRUPT, 2.7.7): the backend
 * sends no interrupt; whether its reply came. */
static bool fs_polled_lookup(struct vt_dev *d)
{
	static const char name[] = FS_READ_NAME;
	struct irq_snap s;
	uint16_t head;
	uint32_t len;
	vt_wait_prepare(d, &s);
	fs_post(d, FUSE_LOOKUP, FUSE_ROOT_ID, name, sizeof(name), sizeof(struct fuse_entry_out));
	return irq_wait_until(&s, used_pending_fs, &d->vq[1], VT_WAIT_US) &&
	       virtq_get_used(&d->vq[1], &head, &len) && rq.out->error == 0;
}

/* A LOOKUP's reply and its interrupt, no longer: the round trip timed
 * (fs_call also watches for extra interrupts afterwards). */
struct fs_irq_wait {
	struct vt_dev *d;
	const struct irq_snap *s;
};

static bool fs_reply_and_irq(void *arg)
{
	const struct fs_irq_wait *w = arg;
	return virtq_used_pending(&w->d->vq[1]) && vt_queue_irqs(w->d, &w->d->vq[1], w->s) >= 1;
}

static bool fs_irq_lookup(struct vt_dev *d)
{
	static const char name[] = FS_READ_NAME;
	struct irq_snap s;
	struct fs_irq_wait w = {d, &s};
	uint16_t head;
	uint32_t len;
	vt_wait_prepare(d, &s);
	fs_post(d, FUSE_LOOKUP, FUSE_ROOT_ID, name, sizeof(name), sizeof(struct fuse_entry_out));
	return irq_wait_until(&s, fs_reply_and_irq, &w, VT_WAIT_US) &&
	       virtq_get_used(&d->vq[1], &head, &len) && rq.out->error == 0;
}

/* What an interrupt from the backend costs the guest: a LOOKUP's round
 * trip with its interrupt (MSI-X: the backend's call eventfd is the
 * vector's irqfd; INTx: the VMM reads it and drives the pin) against the
 * same request polled. Reported, not judged (an emulated host is slow
 * and noisy). */
static void fs_interrupt_cost(struct vt_dev *d)
{
	unsigned ok_irq = 0, ok_poll = 0;
	uint64_t t0 = rdtsc();
	for (unsigned i = 0; i < FS_TIMED; i++)
		ok_irq += fs_irq_lookup(d);
	uint64_t t1 = rdtsc();
	virtq_set_no_interrupt(&d->vq[1], true);
	for (unsigned i = 0; i < FS_TIMED; i++)
		ok_poll += fs_polled_lookup(d);
	virtq_set_no_interrupt(&d->vq[1], false);
	uint64_t t2 = rdtsc();
	uint64_t irq_ns = (t1 - t0) * 1000000000ull / vt.tsc_hz / FS_TIMED;
	uint64_t poll_ns = (t2 - t1) * 1000000000ull / vt.tsc_hz / FS_TIMED;
	dcheck(d, ok_irq == FS_TIMED && ok_poll == FS_TIMED,
	       "200 LOOKUPs with an interrupt each and 200 polled all come back", "%u and %u",
	       ok_irq, ok_poll);
	info("%s: LOOKUP round trip (%s): %lu ns with its interrupt, %lu ns polled: the interrupt "
	     "%ld ns",
	     d->tag, d->msix ? "MSI-X, the backend's call fd as irqfd" : "INTx through the VMM",
	     irq_ns, poll_ns, (long)irq_ns - (long)poll_ns);
}

/* Requests one after another until the device says its backend went. */
struct fs_traffic {
	struct vt_dev *d;
	unsigned replies;
	bool in_flight;
};

static bool fs_keep_asking(void *arg)
{
	static const char name[] = FS_READ_NAME;
	struct fs_traffic *t = arg;
	uint16_t head;
	uint32_t len;
	if (virtio_status(&t->d->vp) & VIRTIO_STATUS_NEEDS_RESET)
		return true;
	if (t->in_flight && virtq_get_used(&t->d->vq[1], &head, &len)) {
		t->in_flight = false;
		t->replies++;
	}
	if (!t->in_flight)
		t->in_flight = fs_post(t->d, FUSE_LOOKUP, FUSE_ROOT_ID, name, sizeof(name),
				       sizeof(struct fuse_entry_out)) >= 0;
	return false;
}

/* virtiotest.fskill=1: the host kills the backend while requests flow
 * (tests/guest/virtio_fs_test.py --kill-backend, on this line): the device
 * reports DEVICE_NEEDS_RESET with a configuration interrupt (2.1.2,
 * 4.1.5.3), the VMM goes on, and a reset brings the device back to 0. */
static void fs_backend_killed(struct vt_dev *d)
{
	struct fs_traffic t = {.d = d};
	struct irq_snap s;
	vt_wait_prepare(d, &s);
	printf("virtiotest: fs: stop the backend now\n");
	bool gone = irq_wait_until(&s, fs_keep_asking, &t, FS_KILL_WAIT_US);
	irq_spin_us(VT_SETTLE_US);
	uint64_t cfg = irq_new(&s, d->msix ? d->vec_config : d->intx_vec);
	dcheck(d, gone && cfg >= 1,
	       "the backend killed while requests flow: DEVICE_NEEDS_RESET and a configuration "
	       "interrupt (2.1.2)",
	       "status 0x%02x after %u replies, %lu configuration interrupts",
	       virtio_status(&d->vp), t.replies, cfg);
	dcheck(d, virtio_reset(&d->vp, 1000000), "a reset brings the device back to 0 (4.1.4.3.2)",
	       "status 0x%02x", virtio_status(&d->vp));
}

void vt_fs(struct vt_dev *d)
{
	static const uint16_t qmax[2] = {8, 32};

	rq.in = ram_alloc(sizeof(*rq.in), 16);
	rq.args = ram_alloc(FS_ARGS_MAX, 16);
	rq.out = ram_alloc(sizeof(*rq.out), 16);
	rq.reply = ram_alloc(FS_REPLY_MAX, 16);
	if (!dcheck(d, rq.in && rq.args && rq.out && rq.reply, "request buffers allocated",
		    "out of RAM pool"))
		return;
	if (!vt_bringup(d, 0, 2, qmax))
		return;
	fs_config(d);
	if (!fs_init(d))
		return;
	if (vt.fs_kill) {
		fs_backend_killed(d);
		return;
	}
	fs_read_host_file(d);
	fs_write_guest_file(d);
	fs_interrupt_cost(d);
	if (d->msix)
		fs_masked_vector(d);
	vt_finish(d);
}
