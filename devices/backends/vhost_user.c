/*
 * vhost-user frontend messages (QEMU docs/interop/vhost-user.rst, "Message
 * specification"): a 12-byte header (request, flags, size) and a payload of
 * `size` bytes, both little-endian on the one host; fds ride along as
 * SCM_RIGHTS on the first byte. Sockets are used with MSG_DONTWAIT and
 * poll(), so the timeout bounds every wait.
 */
#include "devices/backends/vhost_user.h"

#include "vmm/base/clock.h"
#include "vmm/base/err.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Request ids ("Front-end message types"). */
enum {
	VU_GET_FEATURES = 1,
	VU_SET_FEATURES = 2,
	VU_SET_OWNER = 3,
	VU_SET_MEM_TABLE = 5,
	VU_SET_VRING_NUM = 8,
	VU_SET_VRING_ADDR = 9,
	VU_SET_VRING_BASE = 10,
	VU_GET_VRING_BASE = 11,
	VU_SET_VRING_KICK = 12,
	VU_SET_VRING_CALL = 13,
	VU_SET_VRING_ERR = 14,
	VU_GET_PROTOCOL_FEATURES = 15,
	VU_SET_PROTOCOL_FEATURES = 16,
	VU_GET_QUEUE_NUM = 17,
	VU_SET_VRING_ENABLE = 18,
};

/* Header flags: version in bits 0-1, reply, need_reply. */
#define VU_VERSION	   0x1u
#define VU_VERSION_MASK	   0x3u
#define VU_FLAG_REPLY	   0x4u
#define VU_FLAG_NEED_REPLY 0x8u

/* The u64 payload of SET_VRING_KICK/CALL/ERR: ring index in bits 0-7,
 * bit 8 set when no fd is passed. */
#define VU_VRING_IDX_MASK 0xffu
#define VU_VRING_NOFD	  0x100u

#define VU_MAX_FDS 8 /* per message, the spec's limit */

struct vu_header {
	uint32_t request;
	uint32_t flags;
	uint32_t size;
};

struct vu_vring_state {
	uint32_t index;
	uint32_t num;
};

struct vu_vring_addr {
	uint32_t index;
	uint32_t flags;
	uint64_t desc;
	uint64_t used;
	uint64_t avail;
	uint64_t log;
};

struct vu_mem_region {
	uint64_t guest_phys_addr;
	uint64_t memory_size;
	uint64_t userspace_addr;
	uint64_t mmap_offset;
};

struct vu_mem_table {
	uint32_t nregions;
	uint32_t padding;
	struct vu_mem_region regions[VHOST_USER_MAX_REGIONS];
};

struct vu_msg {
	struct vu_header hdr;
	union {
		uint64_t u64;
		struct vu_vring_state state;
		struct vu_vring_addr addr;
		struct vu_mem_table mem;
	} payload;
};

static const char *vu_name(uint32_t req)
{
	switch (req) {
	case VU_GET_FEATURES: return "GET_FEATURES";
	case VU_SET_FEATURES: return "SET_FEATURES";
	case VU_SET_OWNER: return "SET_OWNER";
	case VU_SET_MEM_TABLE: return "SET_MEM_TABLE";
	case VU_SET_VRING_NUM: return "SET_VRING_NUM";
	case VU_SET_VRING_ADDR: return "SET_VRING_ADDR";
	case VU_SET_VRING_BASE: return "SET_VRING_BASE";
	case VU_GET_VRING_BASE: return "GET_VRING_BASE";
	case VU_SET_VRING_KICK: return "SET_VRING_KICK";
	case VU_SET_VRING_CALL: return "SET_VRING_CALL";
	case VU_SET_VRING_ERR: return "SET_VRING_ERR";
	case VU_GET_PROTOCOL_FEATURES: return "GET_PROTOCOL_FEATURES";
	case VU_SET_PROTOCOL_FEATURES: return "SET_PROTOCOL_FEATURES";
	case VU_GET_QUEUE_NUM: return "GET_QUEUE_NUM";
	case VU_SET_VRING_ENABLE: return "SET_VRING_ENABLE";
	default: return "?";
	}
}

/* Marks the connection broken with the first cause, and reports it. */
static int vu_broken(struct vhost_user *vu, uint32_t req, struct err *e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int vu_broken(struct vhost_user *vu, uint32_t req, struct err *e, const char *fmt, ...)
{
	char why[sizeof(vu->broken_why)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (!vu->broken) {
		vu->broken = true;
		snprintf(vu->broken_why, sizeof(vu->broken_why), "%s: %.120s", vu_name(req), why);
	}
	return err_set(e, ERR_HOST, "vhost-user %s: %s", vu_name(req), why);
}

/* Milliseconds left before `deadline_ns`, 0 when past. */
static int vu_ms_left(uint64_t deadline_ns)
{
	uint64_t now = clock_now_ns();
	if (now >= deadline_ns)
		return 0;
	return (int)((deadline_ns - now + 999999) / 1000000);
}

/* Waits until the socket is ready for `events`: 1, 0 on timeout, -1 on a
 * poll error (errno). */
static int vu_wait(int fd, short events, uint64_t deadline_ns)
{
	for (;;) {
		struct pollfd p = {.fd = fd, .events = events};
		int ms = vu_ms_left(deadline_ns);
		int r = poll(&p, 1, ms);
		if (r > 0)
			return 1;
		if (r == 0)
			return 0;
		if (errno != EINTR)
			return -1;
	}
}

/* Sends header + payload with `fds` on the first byte, in as many writes
 * as the socket takes. 0, or -1 with the connection broken. */
static int vu_send(struct vhost_user *vu, const struct vu_msg *m, const int *fds, unsigned nfds,
		   uint64_t deadline, struct err *e)
{
	/* The wire has the payload right after the 12-byte header, where the
	 * struct has padding (the union is 8-byte aligned). */
	uint8_t buf[sizeof(m->hdr) + sizeof(m->payload)];
	size_t len = sizeof(m->hdr) + m->hdr.size, done = 0;
	memcpy(buf, &m->hdr, sizeof(m->hdr));
	memcpy(buf + sizeof(m->hdr), &m->payload, m->hdr.size);
	union {
		char buf[CMSG_SPACE(sizeof(int) * VU_MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	while (done < len) {
		struct iovec iov = {.iov_base = (void *)(buf + done), .iov_len = len - done};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
		if (done == 0 && nfds) {
			memset(&ctl, 0, sizeof(ctl));
			mh.msg_control = ctl.buf;
			mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
			struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
			memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
		}
		ssize_t n = sendmsg(vu->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return vu_broken(vu, m->hdr.request, e, "sending: %s", strerror(errno));
		int w = vu_wait(vu->fd, POLLOUT, deadline);
		if (w == 0)
			return vu_broken(vu, m->hdr.request, e,
					 "backend not reading: timed out after %u ms",
					 vu->timeout_ms);
		if (w < 0)
			return vu_broken(vu, m->hdr.request, e, "poll: %s", strerror(errno));
	}
	return 0;
}

/* Closes any fds that came with a reply: replies here carry none, and a
 * backend must not make the VMM leak descriptors. */
static void vu_drop_fds(struct msghdr *mh)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			close(fd);
		}
	}
}

/* Reads exactly `len` bytes before the deadline. */
static int vu_recv_exact(struct vhost_user *vu, uint32_t req, void *buf, size_t len,
			 uint64_t deadline, struct err *e)
{
	size_t done = 0;
	while (done < len) {
		union {
			char buf[CMSG_SPACE(sizeof(int) * VU_MAX_FDS)];
			struct cmsghdr align;
		} ctl;
		struct iovec iov = {.iov_base = (uint8_t *)buf + done, .iov_len = len - done};
		struct msghdr mh = {.msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = ctl.buf,
				    .msg_controllen = sizeof(ctl.buf)};
		ssize_t n = recvmsg(vu->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n > 0) {
			vu_drop_fds(&mh);
			done += (size_t)n;
			continue;
		}
		if (n == 0)
			return vu_broken(vu, req, e, "backend closed the connection%s",
					 done ? " mid-reply" : "");
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return vu_broken(vu, req, e, "receiving: %s", strerror(errno));
		int w = vu_wait(vu->fd, POLLIN, deadline);
		if (w == 0)
			return vu_broken(vu, req, e, "no reply from the backend within %u ms",
					 vu->timeout_ms);
		if (w < 0)
			return vu_broken(vu, req, e, "poll: %s", strerror(errno));
	}
	return 0;
}

/* Receives the reply to `req` into `out` (`size` payload bytes): the
 * header must say reply, version 1, the same request and exactly `size`. */
static int vu_recv_reply(struct vhost_user *vu, uint32_t req, void *out, uint32_t size,
			 uint64_t deadline, struct err *e)
{
	struct vu_header h;
	if (vu_recv_exact(vu, req, &h, sizeof(h), deadline, e) < 0)
		return -1;
	if (h.request != req)
		return vu_broken(vu, req, e, "reply is for request %u", h.request);
	if ((h.flags & VU_VERSION_MASK) != VU_VERSION || !(h.flags & VU_FLAG_REPLY))
		return vu_broken(vu, req, e, "reply has flags %#x (want version 1, reply)",
				 h.flags);
	if (h.size != size)
		return vu_broken(vu, req, e, "reply has %u payload bytes, want %u", h.size, size);
	return vu_recv_exact(vu, req, out, size, deadline, e);
}

/* Whether SET-type requests are acknowledged (REPLY_ACK negotiated). */
static bool vu_acks(const struct vhost_user *vu)
{
	return vu->protocol_features & (1ULL << VHOST_USER_PROTOCOL_F_REPLY_ACK);
}

/* Sends `m` and, when `reply` is not NULL, takes a reply of `reply_size`
 * bytes; a request with no reply of its own asks for an ack when the
 * backend gives them (`ack`), and a non-zero ack is a refusal. */
static int vu_call(struct vhost_user *vu, struct vu_msg *m, const int *fds, unsigned nfds,
		   void *reply, uint32_t reply_size, bool ack, struct err *e)
{
	uint32_t req = m->hdr.request;
	if (vu->broken)
		return err_set(e, ERR_HOST, "vhost-user %s: connection broken earlier (%s)",
			       vu_name(req), vu->broken_why);
	if (vu->fd < 0)
		return err_set(e, ERR_HOST, "vhost-user %s: not connected", vu_name(req));
	bool want_ack = !reply && ack && vu_acks(vu);
	m->hdr.flags = VU_VERSION | (want_ack ? VU_FLAG_NEED_REPLY : 0);
	uint64_t deadline = clock_now_ns() + (uint64_t)vu->timeout_ms * 1000000;
	if (vu_send(vu, m, fds, nfds, deadline, e) < 0)
		return -1;
	if (reply)
		return vu_recv_reply(vu, req, reply, reply_size, deadline, e);
	if (!want_ack)
		return 0;
	uint64_t status;
	if (vu_recv_reply(vu, req, &status, sizeof(status), deadline, e) < 0)
		return -1;
	if (status != 0)
		return err_set(e, ERR_HOST, "vhost-user %s: the backend refused it (status %llu)",
			       vu_name(req), (unsigned long long)status);
	return 0;
}

static void vu_msg_init(struct vu_msg *m, uint32_t req, uint32_t size)
{
	memset(m, 0, sizeof(*m));
	m->hdr.request = req;
	m->hdr.size = size;
}

static int vu_get_u64(struct vhost_user *vu, uint32_t req, uint64_t *out, struct err *e)
{
	struct vu_msg m;
	vu_msg_init(&m, req, 0);
	return vu_call(vu, &m, NULL, 0, out, sizeof(*out), false, e);
}

static int vu_set_u64(struct vhost_user *vu, uint32_t req, uint64_t v, bool ack, struct err *e)
{
	struct vu_msg m;
	vu_msg_init(&m, req, sizeof(m.payload.u64));
	m.payload.u64 = v;
	return vu_call(vu, &m, NULL, 0, NULL, 0, ack, e);
}

static int vu_set_state(struct vhost_user *vu, uint32_t req, unsigned idx, unsigned num,
			struct err *e)
{
	struct vu_msg m;
	vu_msg_init(&m, req, sizeof(m.payload.state));
	m.payload.state = (struct vu_vring_state){.index = idx, .num = num};
	return vu_call(vu, &m, NULL, 0, NULL, 0, true, e);
}

/* The ring index travels in 8 bits of the fd messages. */
static int vu_check_idx(unsigned idx, uint32_t req, struct err *e)
{
	if (idx > VU_VRING_IDX_MASK)
		return err_set(e, ERR_HOST, "vhost-user %s: ring %u is out of range", vu_name(req),
			       idx);
	return 0;
}

static int vu_set_vring_fd(struct vhost_user *vu, uint32_t req, unsigned idx, int fd, struct err *e)
{
	struct vu_msg m;
	if (vu_check_idx(idx, req, e) < 0)
		return -1;
	vu_msg_init(&m, req, sizeof(m.payload.u64));
	m.payload.u64 = idx | (fd < 0 ? VU_VRING_NOFD : 0);
	return vu_call(vu, &m, fd < 0 ? NULL : &fd, fd < 0 ? 0 : 1, NULL, 0, true, e);
}

void vhost_user_init(struct vhost_user *vu, int sock_fd, unsigned timeout_ms)
{
	memset(vu, 0, sizeof(*vu));
	vu->fd = sock_fd;
	vu->timeout_ms = timeout_ms;
}

int vhost_user_connect_path(struct vhost_user *vu, const char *path, unsigned timeout_ms,
			    struct err *e)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	vhost_user_init(vu, -1, timeout_ms);
	if (strlen(path) >= sizeof(sa.sun_path))
		return err_set(e, ERR_INPUT, "vhost-user socket path '%s' is too long", path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_set(e, ERR_HOST, "vhost-user socket: %s", strerror(errno));
	/* A unix connect completes or fails at once (no handshake to wait for). */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int saved = errno;
		close(fd);
		return err_set(e, ERR_HOST, "connecting to vhost-user socket '%s': %s", path,
			       strerror(saved));
	}
	vu->fd = fd;
	return 0;
}

void vhost_user_close(struct vhost_user *vu)
{
	if (vu->fd >= 0)
		close(vu->fd);
	vu->fd = -1;
}

int vhost_user_set_owner(struct vhost_user *vu, struct err *e)
{
	struct vu_msg m;
	vu_msg_init(&m, VU_SET_OWNER, 0);
	return vu_call(vu, &m, NULL, 0, NULL, 0, true, e);
}

int vhost_user_get_features(struct vhost_user *vu, uint64_t *features, struct err *e)
{
	return vu_get_u64(vu, VU_GET_FEATURES, features, e);
}

int vhost_user_set_features(struct vhost_user *vu, uint64_t features, struct err *e)
{
	if (vu_set_u64(vu, VU_SET_FEATURES, features, true, e) < 0)
		return -1;
	vu->features = features;
	return 0;
}

int vhost_user_get_protocol_features(struct vhost_user *vu, uint64_t *pf, struct err *e)
{
	return vu_get_u64(vu, VU_GET_PROTOCOL_FEATURES, pf, e);
}

int vhost_user_set_protocol_features(struct vhost_user *vu, uint64_t pf, struct err *e)
{
	/* Never acked itself: REPLY_ACK is what it is negotiating. */
	if (vu_set_u64(vu, VU_SET_PROTOCOL_FEATURES, pf, false, e) < 0)
		return -1;
	vu->protocol_features = pf;
	return 0;
}

int vhost_user_negotiate_protocol(struct vhost_user *vu, uint64_t wanted, struct err *e)
{
	uint64_t offered;
	if (vhost_user_get_protocol_features(vu, &offered, e) < 0)
		return -1;
	return vhost_user_set_protocol_features(
	    vu, offered & wanted & VHOST_USER_PROTOCOL_SUPPORTED, e);
}

int vhost_user_get_queue_num(struct vhost_user *vu, uint64_t *n, struct err *e)
{
	if (!(vu->protocol_features & (1ULL << VHOST_USER_PROTOCOL_F_MQ)))
		return err_set(e, ERR_HOST, "vhost-user GET_QUEUE_NUM: MQ was not negotiated");
	return vu_get_u64(vu, VU_GET_QUEUE_NUM, n, e);
}

int vhost_user_set_mem_table(struct vhost_user *vu, const struct vhost_user_region *r, unsigned n,
			     struct err *e)
{
	struct vu_msg m;
	int fds[VHOST_USER_MAX_REGIONS];
	if (n == 0 || n > VHOST_USER_MAX_REGIONS)
		return err_set(e, ERR_HOST, "vhost-user SET_MEM_TABLE: %u regions (1 to %d)", n,
			       VHOST_USER_MAX_REGIONS);
	/* The payload is the count, padding and the regions actually sent. */
	vu_msg_init(
	    &m, VU_SET_MEM_TABLE,
	    (uint32_t)(offsetof(struct vu_mem_table, regions) + n * sizeof(struct vu_mem_region)));
	m.payload.mem.nregions = n;
	for (unsigned i = 0; i < n; i++) {
		if (r[i].fd < 0)
			return err_set(e, ERR_HOST,
				       "vhost-user SET_MEM_TABLE: region %u has no fd to share", i);
		m.payload.mem.regions[i] = (struct vu_mem_region){
		    .guest_phys_addr = r[i].guest_phys_addr,
		    .memory_size = r[i].memory_size,
		    .userspace_addr = r[i].userspace_addr,
		    .mmap_offset = r[i].mmap_offset,
		};
		fds[i] = r[i].fd;
	}
	return vu_call(vu, &m, fds, n, NULL, 0, true, e);
}

int vhost_user_set_vring_num(struct vhost_user *vu, unsigned idx, unsigned num, struct err *e)
{
	return vu_set_state(vu, VU_SET_VRING_NUM, idx, num, e);
}

int vhost_user_set_vring_addr(struct vhost_user *vu, unsigned idx, uint64_t desc, uint64_t avail,
			      uint64_t used, struct err *e)
{
	struct vu_msg m;
	vu_msg_init(&m, VU_SET_VRING_ADDR, sizeof(m.payload.addr));
	/* flags 0: no dirty logging of the used ring. */
	m.payload.addr =
	    (struct vu_vring_addr){.index = idx, .desc = desc, .used = used, .avail = avail};
	return vu_call(vu, &m, NULL, 0, NULL, 0, true, e);
}

int vhost_user_set_vring_base(struct vhost_user *vu, unsigned idx, unsigned base, struct err *e)
{
	return vu_set_state(vu, VU_SET_VRING_BASE, idx, base, e);
}

int vhost_user_get_vring_base(struct vhost_user *vu, unsigned idx, uint32_t *base, struct err *e)
{
	struct vu_msg m;
	struct vu_vring_state st;
	vu_msg_init(&m, VU_GET_VRING_BASE, sizeof(m.payload.state));
	m.payload.state = (struct vu_vring_state){.index = idx};
	if (vu_call(vu, &m, NULL, 0, &st, sizeof(st), false, e) < 0)
		return -1;
	if (st.index != idx)
		return vu_broken(vu, VU_GET_VRING_BASE, e, "reply is for ring %u, asked %u",
				 st.index, idx);
	*base = st.num;
	return 0;
}

int vhost_user_set_vring_kick(struct vhost_user *vu, unsigned idx, int fd, struct err *e)
{
	return vu_set_vring_fd(vu, VU_SET_VRING_KICK, idx, fd, e);
}

int vhost_user_set_vring_call(struct vhost_user *vu, unsigned idx, int fd, struct err *e)
{
	return vu_set_vring_fd(vu, VU_SET_VRING_CALL, idx, fd, e);
}

int vhost_user_set_vring_err(struct vhost_user *vu, unsigned idx, int fd, struct err *e)
{
	return vu_set_vring_fd(vu, VU_SET_VRING_ERR, idx, fd, e);
}

int vhost_user_set_vring_enable(struct vhost_user *vu, unsigned idx, bool enable, struct err *e)
{
	return vu_set_state(vu, VU_SET_VRING_ENABLE, idx, enable ? 1 : 0, e);
}
