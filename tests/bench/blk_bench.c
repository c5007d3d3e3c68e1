/*
 * Host-side benchmark of the virtio-blk device model (devices/virtio/virtio_blk.c)
 * with no KVM: this program is the guest driver. It builds fake guest RAM
 * (guest_mem_init_with over an aligned buffer), lays out one split
 * virtqueue in it (virtio 1.2, 2.7: descriptor table, available ring, used
 * ring; size 256), gives the device a fake transport, and keeps exactly
 * QD requests in flight: 4 KiB random reads, each a 3-descriptor chain
 * (16-byte header, 4096-byte device-writable data, 1-byte device-writable
 * status). Completions are reaped the way the VMM's I/O thread does:
 * poll() completion_fd, virtio_blk_complete(), then read the used ring.
 *
 *   blk_bench [--verify] FILE SECONDS
 *
 * prints one line of JSON on stdout:
 *   {"iops":..., "mib_s":..., "reads":..., "p50_us":..., "p99_us":...}
 * Latency is per request, from posting it in the avail ring to reaping it
 * from the used ring (CLOCK_MONOTONIC). Offsets come from a fixed-seed
 * PRNG, so runs are repeatable. --verify also compares every 4 KiB read
 * with pread() of the same range (a functional check; slows the run).
 *
 * Exit 0 on success; 1 if any status is not VIRTIO_BLK_S_OK, the device
 * asks for NEEDS_RESET, the used ring is inconsistent, or nothing
 * completes for 5 s; 2 on usage errors.
 */
#include "devices/backends/disk_uring.h"
#include "devices/virtio/virtio.h"
#include "devices/virtio/virtio_blk.h"
#include "devices/virtio/virtqueue.h"
#include "vmm/base/clock.h"
#include "vmm/base/err.h"
#include "vmm/base/guest_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/virtio_blk.h>
#include <linux/virtio_ring.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define QSIZE	  256
#define QD	  32
#define BLOCK	  4096u
#define SECTOR	  512u
#define DESCS_PER 3
#define RAM_SIZE  (64ULL << 20)
#define RAM_ALIGN (2ULL << 20)
#define STALL_MS  5000
#define SEED	  0x5eed0b1c0ffee123ULL

/* Guest-physical layout of the fake guest. */
#define GPA_DESC   0x1000ULL   /* 256 * 16 = 4096 bytes, align 16 */
#define GPA_AVAIL  0x2000ULL   /* 4 + 2 * 256 (+2 used_event), align 2 */
#define GPA_USED   0x3000ULL   /* 4 + 8 * 256 (+2 avail_event), align 4 */
#define GPA_HDR	   0x10000ULL  /* one 16-byte header per slot */
#define GPA_STATUS 0x20000ULL  /* one status byte per slot */
#define GPA_DATA   0x100000ULL /* one 4 KiB buffer per slot, 4 KiB aligned */

/* Ring layouts as the driver sees them (virtio 1.2, 2.7.5, 2.7.6, 2.7.8). */
struct vq_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};
struct vq_avail {
	uint16_t flags;
	uint16_t idx;
	uint16_t ring[QSIZE];
	uint16_t used_event;
};
struct vq_used_elem {
	uint32_t id;
	uint32_t len;
};
struct vq_used {
	uint16_t flags;
	uint16_t idx;
	struct vq_used_elem ring[QSIZE];
	uint16_t avail_event;
};
struct blk_hdr {
	uint32_t type;
	uint32_t reserved;
	uint64_t sector;
};
_Static_assert(sizeof(struct vq_desc) == 16, "descriptor is 16 bytes");
_Static_assert(sizeof(struct vq_avail) == 4 + 2 * QSIZE + 2, "avail ring layout");
_Static_assert(sizeof(struct vq_used) == 4 + 8 * QSIZE + 4, "used ring layout (padded)");
_Static_assert(offsetof(struct vq_used, avail_event) == 4 + 8 * QSIZE, "avail_event offset");
_Static_assert(sizeof(struct blk_hdr) == 16, "virtio-blk header is 16 bytes");
_Static_assert(QD *DESCS_PER <= QSIZE, "chains fit in the descriptor table");

/* ---- fake transport ---- */

struct fake_transport {
	struct virtio_transport t; /* first: the device gets &t */
	unsigned long queue_used_calls;
	bool needs_reset;
	char why[256];
};

static struct fake_transport *ft_of(struct virtio_transport *t)
{
	return (struct fake_transport *)((char *)t - offsetof(struct fake_transport, t));
}

static void ft_queue_used(struct virtio_transport *t, unsigned q)
{
	(void)q;
	ft_of(t)->queue_used_calls++;
}

static void ft_needs_reset(struct virtio_transport *t, const char *why)
{
	struct fake_transport *f = ft_of(t);
	if (!f->needs_reset)
		snprintf(f->why, sizeof(f->why), "%s", why ? why : "(no reason)");
	f->needs_reset = true;
}

static void ft_lock(struct virtio_transport *t, unsigned q)
{
	(void)t;
	(void)q;
}

static void ft_unlock(struct virtio_transport *t, unsigned q)
{
	(void)t;
	(void)q;
}

static const struct virtio_transport_ops ft_ops = {
    .queue_used = ft_queue_used,
    .needs_reset = ft_needs_reset,
    .queue_lock = ft_lock,
    .queue_unlock = ft_unlock,
};

/* ---- helpers ---- */

/* splitmix64: small, fixed seed, same sequence every run. */
static uint64_t rng_state = SEED;
static uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Latencies in ns, one per completed request. */
struct lat_vec {
	uint64_t *v;
	size_t n, cap;
};

static int lat_push(struct lat_vec *l, uint64_t ns)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : (1u << 20);
		uint64_t *v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return -1;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = ns;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted vector. */
static double pct_us(const struct lat_vec *l, double p)
{
	if (!l->n)
		return 0;
	size_t rank = (size_t)(p / 100.0 * (double)l->n + 0.999999);
	if (rank < 1)
		rank = 1;
	if (rank > l->n)
		rank = l->n;
	return (double)l->v[rank - 1] / 1000.0;
}

/* ---- the benchmark ---- */

struct slot {
	bool busy;
	uint64_t sector;
	uint64_t posted_ns;
};

struct bench {
	struct guest_mem mem;
	uint8_t *ram;
	struct virtio_blk blk;
	struct fake_transport ft;
	volatile struct vq_desc *desc;
	volatile struct vq_avail *avail;
	volatile struct vq_used *used;
	struct slot slots[QD];
	uint16_t avail_idx; /* driver's shadow of avail->idx */
	uint16_t last_used; /* next used entry to read */
	unsigned inflight;
	uint64_t nblocks; /* 4 KiB blocks in the file */
	uint64_t posted, reaped, kicks;
	int verify_fd;
	uint8_t verify_buf[BLOCK] __attribute__((aligned(BLOCK)));
};

static uint8_t *gpa(struct bench *b, uint64_t addr)
{
	return b->ram + addr;
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("blk_bench: FAIL: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return -1;
}

/* Builds the 3-descriptor chain of slot s once; posting only rewrites the
 * header's sector and the status byte. */
static void slot_build(struct bench *b, unsigned s)
{
	unsigned d = s * DESCS_PER;
	b->desc[d] = (struct vq_desc){GPA_HDR + 16ULL * s, sizeof(struct blk_hdr),
				      VRING_DESC_F_NEXT, (uint16_t)(d + 1)};
	b->desc[d + 1] =
	    (struct vq_desc){GPA_DATA + (uint64_t)BLOCK * s, BLOCK,
			     VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, (uint16_t)(d + 2)};
	b->desc[d + 2] = (struct vq_desc){GPA_STATUS + s, 1, VRING_DESC_F_WRITE, 0};
}

/* Puts slot s in the avail ring with a new random 4 KiB-aligned read; the
 * caller kicks. */
static void slot_post(struct bench *b, unsigned s)
{
	struct slot *sl = &b->slots[s];
	sl->sector = (rng_next() % b->nblocks) * (BLOCK / SECTOR);
	struct blk_hdr h = {VIRTIO_BLK_T_IN, 0, sl->sector};
	memcpy(gpa(b, GPA_HDR + 16ULL * s), &h, sizeof(h));
	*(volatile uint8_t *)gpa(b, GPA_STATUS + s) = 0xff; /* not a valid status */
	sl->busy = true;
	sl->posted_ns = clock_now_ns();
	b->avail->ring[b->avail_idx % QSIZE] = (uint16_t)(s * DESCS_PER);
	atomic_thread_fence(memory_order_release); /* ring entry before index (2.7.13) */
	b->avail_idx++;
	b->avail->idx = b->avail_idx;
	b->inflight++;
	b->posted++;
}

static int kick(struct bench *b)
{
	atomic_thread_fence(memory_order_seq_cst);
	b->blk.vdev.ops->queue_notify(&b->blk.vdev, 0);
	b->kicks++;
	if (b->ft.needs_reset)
		return fail("device set NEEDS_RESET after a kick: %s", b->ft.why);
	return 0;
}

/* Reads what the device put in the used ring. Returns the slots freed
 * (their indices in freed[]), or -1. */
static int reap_used(struct bench *b, struct lat_vec *lat, unsigned *freed)
{
	int n = 0;
	uint16_t used_idx = b->used->idx;
	atomic_thread_fence(memory_order_acquire); /* index before entries */
	if ((uint16_t)(used_idx - b->last_used) > b->inflight)
		return fail("used idx %u is %u ahead of the %u we read, with only %u in flight",
			    used_idx, (uint16_t)(used_idx - b->last_used), b->last_used,
			    b->inflight);
	uint64_t t = used_idx != b->last_used ? clock_now_ns() : 0;
	while (b->last_used != used_idx) {
		struct vq_used_elem e = b->used->ring[b->last_used % QSIZE];
		b->last_used++;
		if (e.id >= QD * DESCS_PER || e.id % DESCS_PER)
			return fail("used ring returned id %u, which is no chain head we posted",
				    e.id);
		unsigned s = e.id / DESCS_PER;
		struct slot *sl = &b->slots[s];
		if (!sl->busy)
			return fail("used ring returned head %u twice", e.id);
		uint8_t status = *(volatile uint8_t *)gpa(b, GPA_STATUS + s);
		if (status != VIRTIO_BLK_S_OK)
			return fail("read of sector %llu (head %u): status %u, not VIRTIO_BLK_S_OK",
				    (unsigned long long)sl->sector, e.id, status);
		if (e.len != BLOCK + 1)
			return fail("read of sector %llu (head %u): used len %u, expected %u",
				    (unsigned long long)sl->sector, e.id, e.len, BLOCK + 1);
		if (b->verify_fd >= 0) {
			ssize_t r =
			    pread(b->verify_fd, b->verify_buf, BLOCK, (off_t)(sl->sector * SECTOR));
			if (r != (ssize_t)BLOCK)
				return fail("verify pread at sector %llu: %s",
					    (unsigned long long)sl->sector,
					    r < 0 ? strerror(errno) : "short read");
			if (memcmp(b->verify_buf, gpa(b, GPA_DATA + (uint64_t)BLOCK * s), BLOCK))
				return fail(
				    "read of sector %llu (head %u) returned data that differs "
				    "from the file",
				    (unsigned long long)sl->sector, e.id);
		}
		sl->busy = false;
		b->inflight--;
		b->reaped++;
		if (lat_push(lat, t - sl->posted_ns) < 0)
			return fail("out of memory for latencies");
		freed[n++] = s;
	}
	return n;
}

/* Waits for completion_fd, lets the device complete, reaps. */
static int wait_and_reap(struct bench *b, struct lat_vec *lat, unsigned *freed)
{
	for (;;) {
		struct pollfd p = {.fd = b->blk.queues[0].completion_fd, .events = POLLIN};
		int r = poll(&p, 1, STALL_MS);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return fail("poll: %s", strerror(errno));
		if (r == 0)
			return fail("no completion for %d ms with %u requests in flight (device "
				    "inflight %u)",
				    STALL_MS, b->inflight, b->blk.queues[0].inflight);
		virtio_blk_complete(&b->blk.queues[0]);
		if (b->ft.needs_reset)
			return fail("device set NEEDS_RESET while completing: %s", b->ft.why);
		int n = reap_used(b, lat, freed);
		if (n != 0)
			return n; /* a spurious wake-up (n == 0) polls again */
	}
}

static int usage(void)
{
	fprintf(stderr,
		"usage: blk_bench [--verify] FILE SECONDS\n"
		"  4 KiB random reads at queue depth %d through the virtio-blk device model\n"
		"  (O_DIRECT, read-only); prints one line of JSON.\n",
		QD);
	return 2;
}

int main(int argc, char **argv)
{
	bool verify = false;
	int ai = 1;
	if (ai < argc && strcmp(argv[ai], "--verify") == 0) {
		verify = true;
		ai++;
	}
	if (argc - ai != 2)
		return usage();
	const char *path = argv[ai];
	char *end;
	double seconds = strtod(argv[ai + 1], &end);
	if (*end || !(seconds > 0) || seconds > 86400)
		return usage();

	static struct bench bench;
	struct bench *b = &bench;
	b->verify_fd = -1;
	if (posix_memalign((void **)&b->ram, RAM_ALIGN, RAM_SIZE)) {
		fprintf(stderr, "blk_bench: cannot allocate %llu MiB of fake guest RAM\n",
			(unsigned long long)(RAM_SIZE >> 20));
		return 1;
	}
	memset(b->ram, 0, RAM_SIZE);
	guest_mem_init_with(&b->mem, b->ram, RAM_SIZE);
	b->desc = (volatile struct vq_desc *)gpa(b, GPA_DESC);
	b->avail = (volatile struct vq_avail *)gpa(b, GPA_AVAIL);
	b->used = (volatile struct vq_used *)gpa(b, GPA_USED);

	struct err e = {0};
	if (virtio_blk_init(&b->blk, disk_uring_open(path, true, true, &e), 1, &e) < 0) {
		fprintf(stderr, "blk_bench: virtio_blk_init: %s\n", e.msg);
		virtio_blk_destroy(&b->blk);
		return e.kind == ERR_INPUT ? 2 : 1;
	}
	b->nblocks = b->blk.capacity * SECTOR / BLOCK;
	if (b->nblocks == 0) {
		fprintf(stderr, "blk_bench: %s is smaller than one 4 KiB block\n", path);
		virtio_blk_destroy(&b->blk);
		return 2;
	}
	if (verify && (b->verify_fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		fprintf(stderr, "blk_bench: %s: %s\n", path, strerror(errno));
		virtio_blk_destroy(&b->blk);
		return 2;
	}

	b->ft.t.ops = &ft_ops;
	b->blk.vdev.transport = &b->ft.t;
	b->blk.vdev.features = VIRTIO_FEATURE(VIRTIO_F_VERSION_1);
	int ret = virtq_init(&b->blk.vdev.vqs[0], &b->mem, QSIZE, b->blk.vdev.ops->queue_max,
			     GPA_DESC, GPA_AVAIL, GPA_USED, false);
	if (ret != VIRTQ_OK) {
		fprintf(stderr, "blk_bench: virtq_init: %s\n", virtq_error_name(ret));
		virtio_blk_destroy(&b->blk);
		return 1;
	}
	if (b->blk.vdev.ops->activate)
		b->blk.vdev.ops->activate(&b->blk.vdev);

	struct lat_vec lat = {0};
	unsigned freed[QD];
	int rc = 0;
	for (unsigned s = 0; s < QD; s++)
		slot_build(b, s);

	uint64_t start = clock_now_ns();
	uint64_t deadline = start + (uint64_t)(seconds * 1e9);
	for (unsigned s = 0; s < QD; s++)
		slot_post(b, s);
	if (kick(b) < 0) {
		rc = 1;
		goto out;
	}
	/* Steady state: every reaped slot is re-posted at once, one kick per
	 * batch (as blk-mq's commit_rqs), so QD stay in flight. */
	while (clock_now_ns() < deadline) {
		int n = wait_and_reap(b, &lat, freed);
		if (n < 0) {
			rc = 1;
			goto out;
		}
		for (int i = 0; i < n; i++)
			slot_post(b, freed[i]);
		if (kick(b) < 0) {
			rc = 1;
			goto out;
		}
	}
	/* Drain: what is in flight still counts (it was issued in the window). */
	while (b->inflight) {
		if (wait_and_reap(b, &lat, freed) < 0) {
			rc = 1;
			goto out;
		}
	}
	uint64_t elapsed = clock_now_ns() - start;

	if (b->blk.queues[0].inflight != 0) {
		fail("all %llu requests reaped but the device still counts %u in flight",
		     (unsigned long long)b->reaped, b->blk.queues[0].inflight);
		rc = 1;
		goto out;
	}
	uint64_t dev_reads = atomic_load(&b->blk.stats.reads);
	uint64_t dev_bytes = atomic_load(&b->blk.stats.bytes);
	uint64_t dev_errs = atomic_load(&b->blk.stats.ioerrs);
	if (dev_reads != b->posted || dev_bytes != b->posted * BLOCK || dev_errs) {
		fail("device stats disagree: reads %llu bytes %llu ioerrs %llu; posted %llu",
		     (unsigned long long)dev_reads, (unsigned long long)dev_bytes,
		     (unsigned long long)dev_errs, (unsigned long long)b->posted);
		rc = 1;
		goto out;
	}
	if (b->reaped == 0) {
		fail("no read completed");
		rc = 1;
		goto out;
	}

	qsort(lat.v, lat.n, sizeof(*lat.v), cmp_u64);
	double secs = (double)elapsed / 1e9;
	double iops = (double)b->reaped / secs;
	printf(
	    "{\"iops\":%.0f, \"mib_s\":%.1f, \"reads\":%llu, \"p50_us\":%.1f, \"p99_us\":%.1f}\n",
	    iops, iops * BLOCK / (1024.0 * 1024.0), (unsigned long long)b->reaped, pct_us(&lat, 50),
	    pct_us(&lat, 99));
	fflush(stdout);
	fprintf(stderr,
		"blk_bench: %s: %.3f s, qd %d, %llu kicks, %lu queue_used calls, "
		"%.2f reads/kick%s\n",
		path, secs, QD, (unsigned long long)b->kicks, b->ft.queue_used_calls,
		(double)b->reaped / (double)b->kicks, verify ? ", data verified" : "");
out:
	free(lat.v);
	if (b->verify_fd >= 0)
		close(b->verify_fd);
	virtio_blk_destroy(&b->blk);
	free(b->ram);
	return rc;
}
