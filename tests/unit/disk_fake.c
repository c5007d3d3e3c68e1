#include "disk_fake.h"

#include "vmm/base/err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Entries in order: [0, ready) completed, [ready, submitted) held,
 * [submitted, n) prepared. */
struct fake_queue {
	struct disk_queue q; /* first */
	unsigned depth, ready, submitted, n;
	struct disk_completion c[];
};

static struct disk_fake *fake_of(struct disk *d)
{
	return (struct disk_fake *)d;
}

static struct fake_queue *fq_of(struct disk_queue *q)
{
	return (struct fake_queue *)q;
}

static void fake_bug(const char *what)
{
	fprintf(stderr, "disk_fake: %s\n", what);
	abort();
}

/* Wakes the I/O thread when completions wait. */
static void fake_signal(struct fake_queue *fq)
{
	uint64_t one = 1;
	if (fq->ready && fq->q.notify_fd >= 0 && write(fq->q.notify_fd, &one, 8) != 8)
		fake_bug("cannot signal the notify eventfd");
}

/* Takes a slot for the request with its result, unless refused. */
static bool fake_add(struct fake_queue *fq, uint64_t cookie, int64_t res)
{
	struct disk_fake *f = fake_of(fq->q.disk);
	if (f->refuse_next || fq->n == fq->depth) {
		f->refuse_next = false;
		return false;
	}
	if (f->fail_next)
		res = f->fail_res;
	f->fail_next = false;
	fq->c[fq->n++] = (struct disk_completion){cookie, res};
	return true;
}

/* Moves the bytes (before the result is known: a failed request may have
 * moved some, as a real disk may). */
static uint64_t fake_copy(struct disk_fake *f, bool write, const struct iovec *iov, unsigned niov,
			  uint64_t off)
{
	uint64_t done = 0;
	for (unsigned i = 0; i < niov; i++) {
		if (f->disk.direct && ((uintptr_t)iov[i].iov_base % 512 || iov[i].iov_len % 512))
			fake_bug("an unaligned buffer on a direct disk");
		if (off + done > f->disk.bytes || iov[i].iov_len > f->disk.bytes - off - done)
			fake_bug("I/O past the end of the disk");
		uint8_t *at = f->data + off + done;
		if (write)
			memcpy(at, iov[i].iov_base, iov[i].iov_len);
		else
			memcpy(iov[i].iov_base, at, iov[i].iov_len);
		done += iov[i].iov_len;
	}
	return done;
}

static bool fake_rw(struct disk_queue *q, bool write, const struct iovec *iov, unsigned niov,
		    uint64_t off, bool dsync, uint64_t cookie)
{
	struct disk_fake *f = fake_of(q->disk);
	if (write && f->disk.readonly)
		fake_bug("a write to a read-only disk");
	if (off > f->disk.bytes)
		fake_bug("I/O past the end of the disk");
	struct fake_queue *fq = fq_of(q);
	if (f->refuse_next || fq->n == fq->depth)
		return fake_add(fq, cookie, 0); /* refused: no byte moves */
	uint64_t done = fake_copy(f, write, iov, niov, off);
	if (write) {
		f->writes++;
		f->last_dsync = dsync;
	} else {
		f->reads++;
	}
	return fake_add(fq, cookie, (int64_t)done);
}

static bool fake_flush(struct disk_queue *q, uint64_t cookie)
{
	bool ok = fake_add(fq_of(q), cookie, 0);
	fake_of(q->disk)->flushes += ok;
	return ok;
}

static void fake_submit(struct disk_queue *q)
{
	struct fake_queue *fq = fq_of(q);
	fq->submitted = fq->n;
	if (!fake_of(q->disk)->hold)
		fq->ready = fq->n;
	fake_signal(fq);
}

unsigned disk_fake_release(struct disk_queue *q, unsigned n)
{
	struct fake_queue *fq = fq_of(q);
	unsigned held = fq->submitted - fq->ready;
	n = n < held ? n : held;
	fq->ready += n;
	fake_signal(fq);
	return n;
}

unsigned disk_fake_pending(const struct disk_queue *q)
{
	const struct fake_queue *fq = (const struct fake_queue *)q;
	return fq->submitted;
}

static unsigned fake_reap(struct disk_queue *q, struct disk_completion *c, unsigned max)
{
	struct fake_queue *fq = fq_of(q);
	unsigned n = fq->ready < max ? fq->ready : max;
	memcpy(c, fq->c, n * sizeof(*c));
	memmove(fq->c, fq->c + n, (fq->n - n) * sizeof(*c));
	fq->ready -= n;
	fq->submitted -= n;
	fq->n -= n;
	return n;
}

/* What is held completes now; nothing submitted is a parser bug (it
 * waits only with requests in flight, and submits each pass). */
static int fake_wait(struct disk_queue *q)
{
	struct fake_queue *fq = fq_of(q);
	if (fq->submitted == 0)
		fake_bug("a wait with nothing in flight");
	disk_fake_release(q, fq->submitted);
	return 0;
}

static struct disk_queue *fake_queue_open(struct disk *d, unsigned depth, int notify_fd,
					  struct err *e)
{
	struct fake_queue *fq = calloc(1, sizeof(*fq) + depth * sizeof(fq->c[0]));
	if (!fq) {
		err_set(e, ERR_HOST, "out of memory");
		return NULL;
	}
	fq->q = (struct disk_queue){d, notify_fd};
	fq->depth = depth;
	return &fq->q;
}

static void fake_queue_close(struct disk_queue *q)
{
	free(q);
}

static void fake_close(struct disk *d)
{
	free(fake_of(d)->data);
	free(d);
}

static const struct disk_ops fake_ops = {
    .queue_open = fake_queue_open,
    .queue_close = fake_queue_close,
    .rw = fake_rw,
    .flush = fake_flush,
    .submit = fake_submit,
    .reap = fake_reap,
    .wait = fake_wait,
    .close = fake_close,
};

struct disk_fake *disk_fake_new(uint64_t bytes, bool readonly, bool direct)
{
	struct disk_fake *f = calloc(1, sizeof(*f));
	if (!f || !(f->data = calloc(1, bytes)))
		abort();
	f->disk =
	    (struct disk){.ops = &fake_ops, .bytes = bytes, .readonly = readonly, .direct = direct};
	snprintf(f->disk.id, sizeof(f->disk.id), "fake-disk");
	snprintf(f->disk.name, sizeof(f->disk.name), "fake");
	return f;
}
