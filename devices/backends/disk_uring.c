#include "devices/backends/disk_uring.h"

#include "vmm/base/err.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define SECTOR 512u

struct uring_disk {
	struct disk disk; /* first */
	int fd;
};

struct uring_queue {
	struct disk_queue q; /* first */
	struct io_uring ring;
	int fd;
};

static struct uring_queue *uq_of(struct disk_queue *q)
{
	return (struct uring_queue *)q;
}

struct io_uring *disk_uring_ring(struct disk_queue *q)
{
	return &uq_of(q)->ring;
}

/* An SQE, sending what is prepared first when the SQ ring is full. */
static struct io_uring_sqe *uring_sqe(struct uring_queue *uq)
{
	if (io_uring_sq_space_left(&uq->ring) == 0)
		io_uring_submit(&uq->ring);
	return io_uring_get_sqe(&uq->ring);
}

/* A single buffer goes as READ/WRITE, without an iovec to import. (The file
 * is not registered with the ring: the kernel drops a registered file only
 * when it tears the ring down, asynchronously, after the VMM exited, and a
 * file system unmounted right then would still be busy.) */
static bool uring_rw(struct disk_queue *q, bool write, const struct iovec *iov, unsigned niov,
		     uint64_t off, bool dsync, uint64_t cookie)
{
	struct uring_queue *uq = uq_of(q);
	struct io_uring_sqe *sqe = uring_sqe(uq);
	if (!sqe)
		return false;
	if (niov == 0)
		io_uring_prep_nop(sqe);
	else if (!write && niov == 1)
		io_uring_prep_read(sqe, uq->fd, iov[0].iov_base, (unsigned)iov[0].iov_len, off);
	else if (!write)
		io_uring_prep_readv(sqe, uq->fd, iov, niov, off);
	else if (niov == 1)
		io_uring_prep_write(sqe, uq->fd, iov[0].iov_base, (unsigned)iov[0].iov_len, off);
	else
		io_uring_prep_writev(sqe, uq->fd, iov, niov, off);
	if (write && niov && dsync)
		sqe->rw_flags = RWF_DSYNC;
	io_uring_sqe_set_data64(sqe, cookie);
	return true;
}

static bool uring_flush(struct disk_queue *q, uint64_t cookie)
{
	struct uring_queue *uq = uq_of(q);
	struct io_uring_sqe *sqe = uring_sqe(uq);
	if (!sqe)
		return false;
	io_uring_prep_fsync(sqe, uq->fd, IORING_FSYNC_DATASYNC);
	io_uring_sqe_set_data64(sqe, cookie);
	return true;
}

static void uring_submit(struct disk_queue *q)
{
	struct uring_queue *uq = uq_of(q);
	if (io_uring_sq_ready(&uq->ring))
		io_uring_submit(&uq->ring);
}

static unsigned uring_reap(struct disk_queue *q, struct disk_completion *c, unsigned max)
{
	struct uring_queue *uq = uq_of(q);
	struct io_uring_cqe *cqes[64];
	unsigned n = io_uring_peek_batch_cqe(&uq->ring, cqes, max < 64 ? max : 64);
	for (unsigned i = 0; i < n; i++)
		c[i] = (struct disk_completion){io_uring_cqe_get_data64(cqes[i]), cqes[i]->res};
	io_uring_cq_advance(&uq->ring, n);
	return n;
}

static int uring_wait(struct disk_queue *q)
{
	struct io_uring_cqe *cqe;
	return io_uring_wait_cqe(&uq_of(q)->ring, &cqe);
}

/*
 * The operations a queue's ring may carry, and nothing else: the sandboxed
 * threads can submit to the ring, and an unrestricted ring would do for
 * them what seccomp refuses (IORING_OP_OPENAT opens any file the VMM's
 * user can). io_uring_register(2), IORING_REGISTER_RESTRICTIONS: a ring
 * made disabled takes restrictions once, then is enabled; no register
 * operation is allowed after that, and no SQE flag.
 */
static const uint8_t ring_ops[] = {IORING_OP_NOP,   IORING_OP_READ,   IORING_OP_WRITE,
				   IORING_OP_READV, IORING_OP_WRITEV, IORING_OP_FSYNC};

static int ring_restrict(struct io_uring *ring)
{
	struct io_uring_restriction res[sizeof(ring_ops) + 1];
	memset(res, 0, sizeof(res));
	for (size_t i = 0; i < sizeof(ring_ops); i++) {
		res[i].opcode = IORING_RESTRICTION_SQE_OP;
		res[i].sqe_op = ring_ops[i];
	}
	res[sizeof(ring_ops)].opcode = IORING_RESTRICTION_SQE_FLAGS_ALLOWED;
	res[sizeof(ring_ops)].sqe_flags = 0;
	int ret = io_uring_register_restrictions(ring, res, sizeof(ring_ops) + 1);
	return ret < 0 ? ret : io_uring_enable_rings(ring);
}

/* A disabled ring with the notify eventfd registered, then restricted. */
static int ring_init(struct io_uring *ring, unsigned depth, int notify_fd, struct err *e)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_R_DISABLED;
	int ret = io_uring_queue_init_params(depth, ring, &p);
	if (ret == -EINVAL)
		return err_set(e, ERR_HOST,
			       "io_uring: this kernel cannot make a restricted ring "
			       "(IORING_SETUP_R_DISABLED, Linux 5.10)");
	if (ret < 0)
		return err_set(e, ERR_HOST, "io_uring_queue_init: %s", strerror(-ret));
	if (io_uring_register_eventfd(ring, notify_fd) < 0)
		ret = err_set(e, ERR_HOST, "cannot register the completion eventfd");
	else if ((ret = ring_restrict(ring)) < 0)
		ret =
		    err_set(e, ERR_HOST, "io_uring: cannot restrict the ring: %s", strerror(-ret));
	if (ret < 0)
		io_uring_queue_exit(ring);
	return ret;
}

static struct disk_queue *uring_queue_open(struct disk *d, unsigned depth, int notify_fd,
					   struct err *e)
{
	struct uring_queue *uq = calloc(1, sizeof(*uq));
	if (!uq) {
		err_set(e, ERR_HOST, "out of memory");
		return NULL;
	}
	if (ring_init(&uq->ring, depth, notify_fd, e)) {
		free(uq);
		return NULL;
	}
	uq->q = (struct disk_queue){d, notify_fd};
	uq->fd = ((struct uring_disk *)d)->fd;
	return &uq->q;
}

static void uring_queue_close(struct disk_queue *q)
{
	io_uring_queue_exit(&uq_of(q)->ring);
	free(q);
}

static void uring_close(struct disk *d)
{
	struct uring_disk *ud = (struct uring_disk *)d;
	if (ud->fd >= 0)
		close(ud->fd);
	free(ud);
}

static const struct disk_ops uring_ops = {
    .queue_open = uring_queue_open,
    .queue_close = uring_queue_close,
    .rw = uring_rw,
    .flush = uring_flush,
    .submit = uring_submit,
    .reap = uring_reap,
    .wait = uring_wait,
    .close = uring_close,
};

/* The file's size and identity; 0 or an error. */
static int uring_stat(struct uring_disk *ud, bool direct, struct err *e)
{
	struct stat st;
	if (fstat(ud->fd, &st) < 0)
		return err_set(e, ERR_INPUT, "%s", strerror(errno));
	if (!S_ISBLK(st.st_mode) && !S_ISREG(st.st_mode))
		return err_set(e, ERR_INPUT, "not a regular file or block device");
	if (fcntl(ud->fd, F_SETFL, direct ? O_DIRECT : 0) < 0)
		return err_set(e, ERR_HOST, "fcntl: %s", strerror(errno));
	uint64_t bytes = (uint64_t)st.st_size;
	if (S_ISBLK(st.st_mode) && ioctl(ud->fd, BLKGETSIZE64, &bytes) < 0)
		return err_set(e, ERR_INPUT, "cannot read its size: %s", strerror(errno));
	if (bytes < SECTOR)
		return err_set(e, ERR_INPUT, "smaller than one 512-byte sector");
	ud->disk.bytes = bytes;
	/* GET_ID: the file's device and inode, stable across runs. */
	snprintf(ud->disk.id, sizeof(ud->disk.id), "vmm-%llx-%llx", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	return 0;
}

struct disk *disk_uring_open(const char *path, bool readonly, bool direct, struct err *e)
{
	struct uring_disk *ud = calloc(1, sizeof(*ud));
	if (!ud) {
		err_set(e, ERR_HOST, "out of memory");
		return NULL;
	}
	ud->disk = (struct disk){.ops = &uring_ops, .readonly = readonly, .direct = direct};
	snprintf(ud->disk.name, sizeof(ud->disk.name), "%s", path);
	/* O_NONBLOCK until the type is known: a FIFO must not block the open
	 * (SIGTERM would not end it); regular files and block devices ignore
	 * the flag for I/O, and it is cleared before any. */
	ud->fd = open(path, (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NONBLOCK | O_NOCTTY |
				(direct ? O_DIRECT : 0));
	if (ud->fd < 0)
		err_set(e, ERR_INPUT, "%s", strerror(errno));
	if (ud->fd < 0 || uring_stat(ud, direct, e)) {
		uring_close(&ud->disk);
		return NULL;
	}
	return &ud->disk;
}
