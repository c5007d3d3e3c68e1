/*
 * The vhost-user frontend (devices/backends/vhost_user.c) against a
 * scripted backend on a socketpair: a thread that reads each message,
 * checks its request, flags, payload and fds against the script, and
 * answers as scripted, well or badly (vhost-user.rst, "Message
 * specification", "Communication").
 */
#include "helpers.h"

#include "devices/backends/vhost_user.h"
#include "vmm/base/err.h"
#include "vmm/base/guest_mem.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

enum {
	GET_FEATURES = 1,
	SET_FEATURES = 2,
	SET_OWNER = 3,
	SET_MEM_TABLE = 5,
	SET_VRING_NUM = 8,
	SET_VRING_ADDR = 9,
	SET_VRING_BASE = 10,
	GET_VRING_BASE = 11,
	SET_VRING_KICK = 12,
	SET_VRING_CALL = 13,
	SET_VRING_ERR = 14,
	GET_PROTOCOL_FEATURES = 15,
	SET_PROTOCOL_FEATURES = 16,
	GET_QUEUE_NUM = 17,
	SET_VRING_ENABLE = 18,
};

#define F_VERSION    0x1u
#define F_REPLY	     0x4u
#define F_NEED_REPLY 0x8u
#define TIMEOUT_MS   200
#define ACK_PF	     ((1ULL << VHOST_USER_PROTOCOL_F_MQ) | (1ULL << VHOST_USER_PROTOCOL_F_REPLY_ACK))

enum action {
	ACT_NONE,  /* no answer: the request has none */
	ACT_REPLY, /* a well-formed reply of reply_len bytes */
	ACT_RAW,   /* header fields as given, then raw_len payload bytes */
	ACT_CLOSE, /* close the socket instead of answering */
	ACT_HANG,  /* answer nothing, wait for the frontend to give up */
};

struct msg {
	uint32_t req, flags, size;
	uint8_t payload[512];
	int fds[8];
	int nfds;
};

struct step {
	uint32_t req;
	bool need_reply;				    /* the NEED_REPLY flag expected */
	int size;					    /* expected payload bytes, -1: any */
	int nfds;					    /* expected fds */
	void (*check)(const struct step *s, struct msg *m); /* more checks */
	enum action act;
	uint8_t reply[64];
	uint32_t reply_len;
	uint32_t raw_req, raw_flags, raw_size; /* ACT_RAW's header */
	bool close_after;		       /* then close the socket */
	void *ctx;
};

struct backend {
	int fd;
	const struct step *steps;
	int nsteps;
	pthread_t thread;
};

static void rd(int fd, void *buf, size_t len, int *fds, int *nfds)
{
	size_t done = 0;
	while (done < len) {
		union {
			char b[CMSG_SPACE(sizeof(int) * 8)];
			struct cmsghdr a;
		} ctl;
		struct iovec iov = {(uint8_t *)buf + done, len - done};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
		if (fds) {
			mh.msg_control = ctl.b;
			mh.msg_controllen = sizeof(ctl.b);
		}
		ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
		ck_assert_int_gt(n, 0);
		done += (size_t)n;
		for (struct cmsghdr *c = fds ? CMSG_FIRSTHDR(&mh) : NULL; c;
		     c = CMSG_NXTHDR(&mh, c)) {
			int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			memcpy(fds + *nfds, CMSG_DATA(c), sizeof(int) * (size_t)k);
			*nfds += k;
		}
	}
}

static void wr(int fd, const void *buf, size_t len)
{
	ck_assert_int_eq(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
}

/* One send for header and payload: the frontend may close as soon as it
 * has read a bad header, and a second send would then fail. */
static void send_msg(int fd, uint32_t req, uint32_t flags, uint32_t size, const void *payload,
		     uint32_t len)
{
	uint8_t buf[12 + 64];
	uint32_t h[3] = {req, flags, size};
	memcpy(buf, h, sizeof(h));
	memcpy(buf + sizeof(h), payload, len);
	wr(fd, buf, sizeof(h) + len);
}

static void *backend_run(void *arg)
{
	struct backend *b = arg;
	for (int i = 0; i < b->nsteps; i++) {
		const struct step *s = &b->steps[i];
		struct msg m = {0};
		uint32_t h[3];
		rd(b->fd, h, sizeof(h), m.fds, &m.nfds);
		m.req = h[0], m.flags = h[1], m.size = h[2];
		ck_assert_uint_eq(m.req, s->req);
		ck_assert_uint_eq(m.flags, F_VERSION | (s->need_reply ? F_NEED_REPLY : 0));
		if (s->size >= 0)
			ck_assert_uint_eq(m.size, (uint32_t)s->size);
		ck_assert_uint_le(m.size, sizeof(m.payload));
		rd(b->fd, m.payload, m.size, m.fds, &m.nfds);
		ck_assert_int_eq(m.nfds, s->nfds);
		if (s->check)
			s->check(s, &m);
		for (int k = 0; k < m.nfds; k++)
			close(m.fds[k]);
		switch (s->act) {
		case ACT_NONE: break;
		case ACT_REPLY:
			send_msg(b->fd, s->req, F_VERSION | F_REPLY, s->reply_len, s->reply,
				 s->reply_len);
			break;
		case ACT_RAW:
			send_msg(b->fd, s->raw_req, s->raw_flags, s->raw_size, s->reply,
				 s->reply_len);
			if (s->close_after) {
				close(b->fd);
				return NULL;
			}
			break;
		case ACT_CLOSE: close(b->fd); return NULL;
		case ACT_HANG: break;
		}
	}
	/* Nothing more: the frontend closes, and sent nothing else (a reset
	 * when it closed with part of a bad reply unread). */
	char c;
	ssize_t n = read(b->fd, &c, 1);
	ck_assert_msg(n == 0 || (n < 0 && errno == ECONNRESET), "read %zd", n);
	close(b->fd);
	return NULL;
}

static struct vhost_user vu;
static struct backend be;
static struct err e;

static void start(const struct step *steps, int n)
{
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	vhost_user_init(&vu, sv[0], TIMEOUT_MS);
	be = (struct backend){.fd = sv[1], .steps = steps, .nsteps = n};
	memset(&e, 0, sizeof(e));
	ck_assert_int_eq(pthread_create(&be.thread, NULL, backend_run, &be), 0);
}

static void finish(void)
{
	vhost_user_close(&vu);
	ck_assert_int_eq(pthread_join(be.thread, NULL), 0);
}

#define U64(v)                                                                                     \
	.reply_len = 8, .reply = {(uint8_t)(v),                                                    \
				  (uint8_t)((uint64_t)(v) >> 8),                                   \
				  (uint8_t)((uint64_t)(v) >> 16),                                  \
				  (uint8_t)((uint64_t)(v) >> 24),                                  \
				  (uint8_t)((uint64_t)(v) >> 32),                                  \
				  (uint8_t)((uint64_t)(v) >> 40),                                  \
				  (uint8_t)((uint64_t)(v) >> 48),                                  \
				  (uint8_t)((uint64_t)(v) >> 56)}
#define ACK(r)                                                                                     \
	{                                                                                          \
		.req = (r), .need_reply = true, .size = 8, .act = ACT_REPLY, U64(0)                \
	}

/* The negotiation every connected test starts with: protocol features
 * offered, REPLY_ACK and MQ taken, CONFIG (not supported here) left. */
#define NEGOTIATE                                                                                  \
	{.req = GET_FEATURES,                                                                      \
	 .size = 0,                                                                                \
	 .act = ACT_REPLY,                                                                         \
	 U64((1ULL << 32) | (1ULL << VHOST_USER_F_PROTOCOL_FEATURES))},                            \
	    {.req = GET_PROTOCOL_FEATURES,                                                         \
	     .size = 0,                                                                            \
	     .act = ACT_REPLY,                                                                     \
	     U64(ACK_PF | (1ULL << VHOST_USER_PROTOCOL_F_CONFIG))},                                \
	{                                                                                          \
		.req = SET_PROTOCOL_FEATURES, .size = 8, .check = check_pf, .act = ACT_NONE        \
	}

static void check_pf(const struct step *s, struct msg *m)
{
	(void)s;
	ck_assert_uint_eq(get64(m->payload), ACK_PF);
}

static void negotiate(void)
{
	uint64_t f;
	ck_assert_int_eq(vhost_user_get_features(&vu, &f, &e), 0);
	ck_assert(f & (1ULL << VHOST_USER_F_PROTOCOL_FEATURES));
	ck_assert_int_eq(vhost_user_negotiate_protocol(&vu, ~0ULL, &e), 0);
	ck_assert_uint_eq(vu.protocol_features, ACK_PF);
}

/* SET_MEM_TABLE: two regions of one memfd; the backend maps it and must
 * see what the frontend wrote through its own mapping, and the reverse. */
static void check_mem(const struct step *s, struct msg *m)
{
	struct guest_mem *gm = s->ctx;
	ck_assert_uint_eq(get32(m->payload), 2);
	for (int i = 0; i < 2; i++) {
		const uint8_t *r = m->payload + 8 + 32 * i;
		uint64_t gpa = get64(r), size = get64(r + 8), uaddr = get64(r + 16),
			 off = get64(r + 24);
		ck_assert_uint_eq(gpa, gm->regions[i].gpa);
		ck_assert_uint_eq(size, gm->regions[i].size);
		ck_assert_uint_eq(uaddr, (uint64_t)(uintptr_t)gm->regions[i].host);
		/* Map only a page of the region, at its offset in the fd. */
		uint8_t *p =
		    mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, m->fds[i], (off_t)off);
		ck_assert(p != MAP_FAILED);
		ck_assert_uint_eq(p[16], 0xA0 + i);
		p[17] = (uint8_t)(0xB0 + i);
		munmap(p, 4096);
	}
}

/* KICK: the fd received is the frontend's eventfd (a write shows there). */
static void check_kick(const struct step *s, struct msg *m)
{
	(void)s;
	ck_assert_uint_eq(get64(m->payload), 1);
	uint64_t one = 1;
	ck_assert_int_eq(write(m->fds[0], &one, 8), 8);
}

static void check_nofd(const struct step *s, struct msg *m)
{
	(void)s;
	ck_assert_uint_eq(get64(m->payload), 0x100 | 1);
}

static void check_addr(const struct step *s, struct msg *m)
{
	(void)s;
	ck_assert_uint_eq(get32(m->payload), 1);	   /* index */
	ck_assert_uint_eq(get32(m->payload + 4), 0);	   /* flags: no logging */
	ck_assert_uint_eq(get64(m->payload + 8), 0x1000);  /* desc */
	ck_assert_uint_eq(get64(m->payload + 16), 0x3000); /* used */
	ck_assert_uint_eq(get64(m->payload + 24), 0x2000); /* avail */
}

static void check_state(const struct step *s, struct msg *m)
{
	uint64_t want = (uint64_t)(uintptr_t)s->ctx;
	ck_assert_uint_eq(get32(m->payload), 1);
	ck_assert_uint_eq(get32(m->payload + 4), want);
}

START_TEST(full_setup)
{
	struct guest_mem gm;
	struct guest_mem_share sh[GUEST_MEM_MAX_REGIONS];
	struct vhost_user_region r[GUEST_MEM_MAX_REGIONS];
	/* Above the MMIO hole: two regions, the second at an fd offset. */
	ck_assert_int_eq(guest_mem_create(&gm, 4 * GiB, true, &e), 0);
	ck_assert_int_ge(gm.fd, 0);
	ck_assert_int_eq(guest_mem_share(&gm, sh, GUEST_MEM_MAX_REGIONS), 2);
	for (int i = 0; i < 2; i++) {
		r[i] = (struct vhost_user_region){sh[i].gpa, sh[i].size, sh[i].host, sh[i].offset,
						  sh[i].fd};
		gm.regions[i].host[16] = (uint8_t)(0xA0 + i);
	}
	int kick = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ck_assert_int_ge(kick, 0);
	const struct step steps[] = {
	    {.req = SET_OWNER, .size = 0, .act = ACT_NONE},
	    NEGOTIATE,
	    {.req = GET_QUEUE_NUM, .size = 0, .act = ACT_REPLY, U64(2)},
	    {.req = SET_FEATURES, .need_reply = true, .size = 8, .act = ACT_REPLY, U64(0)},
	    {.req = SET_MEM_TABLE,
	     .need_reply = true,
	     .size = 8 + 2 * 32,
	     .nfds = 2,
	     .check = check_mem,
	     .act = ACT_REPLY,
	     .ctx = &gm,
	     U64(0)},
	    {.req = SET_VRING_NUM,
	     .need_reply = true,
	     .size = 8,
	     .check = check_state,
	     .ctx = (void *)256,
	     .act = ACT_REPLY,
	     U64(0)},
	    {.req = SET_VRING_ADDR,
	     .need_reply = true,
	     .size = 40,
	     .check = check_addr,
	     .act = ACT_REPLY,
	     U64(0)},
	    {.req = SET_VRING_BASE,
	     .need_reply = true,
	     .size = 8,
	     .check = check_state,
	     .ctx = (void *)5,
	     .act = ACT_REPLY,
	     U64(0)},
	    {.req = SET_VRING_CALL,
	     .need_reply = true,
	     .size = 8,
	     .check = check_nofd,
	     .act = ACT_REPLY,
	     U64(0)},
	    ACK(SET_VRING_ERR),
	    {.req = SET_VRING_KICK,
	     .need_reply = true,
	     .size = 8,
	     .nfds = 1,
	     .check = check_kick,
	     .act = ACT_REPLY,
	     U64(0)},
	    {.req = SET_VRING_ENABLE,
	     .need_reply = true,
	     .size = 8,
	     .check = check_state,
	     .ctx = (void *)1,
	     .act = ACT_REPLY,
	     U64(0)},
	    {.req = GET_VRING_BASE,
	     .size = 8,
	     .check = check_state,
	     .ctx = (void *)0,
	     .act = ACT_REPLY,
	     .reply_len = 8,
	     .reply = {1, 0, 0, 0, 9, 0, 0, 0}},
	};
	start(steps, sizeof(steps) / sizeof(steps[0]));
	/* Before SET_PROTOCOL_FEATURES nothing is acked. */
	ck_assert_int_eq(vhost_user_set_owner(&vu, &e), 0);
	negotiate();
	uint64_t n;
	ck_assert_int_eq(vhost_user_get_queue_num(&vu, &n, &e), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(vhost_user_set_features(&vu, 1ULL << 32, &e), 0);
	ck_assert_uint_eq(vu.features, 1ULL << 32);
	ck_assert_int_eq(vhost_user_set_mem_table(&vu, r, 2, &e), 0);
	ck_assert_int_eq(vhost_user_set_vring_num(&vu, 1, 256, &e), 0);
	ck_assert_int_eq(vhost_user_set_vring_addr(&vu, 1, 0x1000, 0x2000, 0x3000, &e), 0);
	ck_assert_int_eq(vhost_user_set_vring_base(&vu, 1, 5, &e), 0);
	ck_assert_int_eq(vhost_user_set_vring_call(&vu, 1, -1, &e), 0);
	ck_assert_int_eq(vhost_user_set_vring_err(&vu, 1, -1, &e), 0);
	ck_assert_int_eq(vhost_user_set_vring_kick(&vu, 1, kick, &e), 0);
	ck_assert_int_eq(vhost_user_set_vring_enable(&vu, 1, true, &e), 0);
	uint32_t base;
	ck_assert_int_eq(vhost_user_get_vring_base(&vu, 1, &base, &e), 0);
	ck_assert_uint_eq(base, 9);
	ck_assert(!vu.broken);
	finish();
	/* The backend's write through the shared fd, in the VMM's mapping. */
	ck_assert_uint_eq(gm.regions[0].host[17], 0xB0);
	ck_assert_uint_eq(gm.regions[1].host[17], 0xB1);
	uint64_t v;
	ck_assert_int_eq(read(kick, &v, 8), 8);
	ck_assert_uint_eq(v, 1);
	close(kick);
	guest_mem_destroy(&gm);
}
END_TEST

/* A non-zero ack is a refusal: an error naming the request, the
 * connection still good for the next one. */
START_TEST(ack_failure)
{
	const struct step steps[] = {
	    NEGOTIATE,
	    {.req = SET_VRING_NUM, .need_reply = true, .size = 8, .act = ACT_REPLY, U64(1)},
	    ACK(SET_VRING_NUM),
	};
	start(steps, sizeof(steps) / sizeof(steps[0]));
	negotiate();
	ck_assert_int_eq(vhost_user_set_vring_num(&vu, 0, 1024, &e), -1);
	ck_assert_ptr_nonnull(strstr(e.msg, "SET_VRING_NUM"));
	ck_assert_ptr_nonnull(strstr(e.msg, "refused"));
	ck_assert(!vu.broken);
	ck_assert_int_eq(vhost_user_set_vring_num(&vu, 0, 128, &e), 0);
	finish();
}
END_TEST

/* A broken connection: the call fails with `what` in its message, and
 * every later call fails at once, naming the first cause. */
static void assert_broken(int rc, const char *what)
{
	ck_assert_int_eq(rc, -1);
	ck_assert(vu.broken);
	ck_assert_msg(strstr(e.msg, what), "'%s' lacks '%s'", e.msg, what);
	struct err e2 = {0};
	uint64_t f;
	ck_assert_int_eq(vhost_user_get_features(&vu, &f, &e2), -1);
	ck_assert_ptr_nonnull(strstr(e2.msg, "broken earlier"));
	ck_assert_ptr_nonnull(strstr(e2.msg, what));
}

START_TEST(wrong_request_id)
{
	const struct step steps[] = {
	    {.req = GET_FEATURES,
	     .size = 0,
	     .act = ACT_RAW,
	     .raw_req = GET_PROTOCOL_FEATURES,
	     .raw_flags = F_VERSION | F_REPLY,
	     .raw_size = 8,
	     U64(0)},
	};
	uint64_t f;
	start(steps, 1);
	assert_broken(vhost_user_get_features(&vu, &f, &e), "reply is for request 15");
	finish();
}
END_TEST

START_TEST(wrong_flags)
{
	const struct step steps[] = {
	    {.req = GET_FEATURES,
	     .size = 0,
	     .act = ACT_RAW,
	     .raw_req = GET_FEATURES,
	     .raw_flags = F_VERSION,
	     .raw_size = 8,
	     U64(0)},
	};
	uint64_t f;
	start(steps, 1);
	assert_broken(vhost_user_get_features(&vu, &f, &e), "flags");
	finish();
}
END_TEST

/* A reply whose size is not the request's: never read as one. */
START_TEST(short_reply)
{
	const struct step steps[] = {
	    {.req = GET_FEATURES,
	     .size = 0,
	     .act = ACT_RAW,
	     .raw_req = GET_FEATURES,
	     .raw_flags = F_VERSION | F_REPLY,
	     .raw_size = 4,
	     .reply_len = 4},
	};
	uint64_t f;
	start(steps, 1);
	assert_broken(vhost_user_get_features(&vu, &f, &e), "4 payload bytes, want 8");
	finish();
}
END_TEST

/* An ack that is not 8 bytes. */
START_TEST(oversized_ack)
{
	const struct step steps[] = {
	    NEGOTIATE,
	    {.req = SET_OWNER,
	     .need_reply = true,
	     .size = 0,
	     .act = ACT_RAW,
	     .raw_req = SET_OWNER,
	     .raw_flags = F_VERSION | F_REPLY,
	     .raw_size = 0x10000},
	};
	start(steps, sizeof(steps) / sizeof(steps[0]));
	negotiate();
	assert_broken(vhost_user_set_owner(&vu, &e), "65536 payload bytes");
	finish();
}
END_TEST

/* The backend dies after half a reply. */
START_TEST(close_mid_reply)
{
	const struct step steps[] = {
	    {.req = GET_FEATURES,
	     .size = 0,
	     .act = ACT_RAW,
	     .raw_req = GET_FEATURES,
	     .raw_flags = F_VERSION | F_REPLY,
	     .raw_size = 8,
	     .reply_len = 4,
	     .close_after = true},
	};
	uint64_t f;
	start(steps, 1);
	assert_broken(vhost_user_get_features(&vu, &f, &e), "closed the connection mid-reply");
	finish();
}
END_TEST

START_TEST(close_instead_of_reply)
{
	const struct step steps[] = {
	    {.req = GET_VRING_BASE, .size = 8, .act = ACT_CLOSE},
	};
	uint32_t base;
	start(steps, 1);
	assert_broken(vhost_user_get_vring_base(&vu, 0, &base, &e), "closed the connection");
	finish();
}
END_TEST

/* A backend that never answers costs one timeout, then the connection is
 * broken; the call returns, whatever the backend does. */
START_TEST(no_answer_times_out)
{
	const struct step steps[] = {
	    {.req = GET_VRING_BASE, .size = 8, .act = ACT_HANG},
	};
	uint32_t base;
	start(steps, 1);
	assert_broken(vhost_user_get_vring_base(&vu, 3, &base, &e), "no reply");
	ck_assert_ptr_nonnull(strstr(e.msg, "GET_VRING_BASE"));
	finish();
}
END_TEST

/* The reply's ring must be the one asked for. */
START_TEST(vring_base_wrong_ring)
{
	const struct step steps[] = {
	    {.req = GET_VRING_BASE,
	     .size = 8,
	     .act = ACT_REPLY,
	     .reply_len = 8,
	     .reply = {2, 0, 0, 0, 9, 0, 0, 0}},
	};
	uint32_t base = 77;
	start(steps, 1);
	assert_broken(vhost_user_get_vring_base(&vu, 1, &base, &e), "ring 2");
	ck_assert_uint_eq(base, 77);
	finish();
}
END_TEST

/* A dead peer on send: an error (EPIPE), not SIGPIPE. */
START_TEST(send_to_closed_peer)
{
	const struct step steps[] = {{.req = SET_OWNER, .size = 0, .act = ACT_CLOSE}};
	start(steps, 1);
	ck_assert_int_eq(vhost_user_set_owner(&vu, &e), 0);
	ck_assert_int_eq(pthread_join(be.thread, NULL), 0);
	ck_assert_int_eq(vhost_user_set_vring_num(&vu, 0, 8, &e), -1);
	ck_assert(vu.broken);
	vhost_user_close(&vu);
}
END_TEST

/* Requests the frontend refuses to send. */
START_TEST(bad_arguments)
{
	struct vhost_user_region r[VHOST_USER_MAX_REGIONS + 1] = {0};
	int sv[2];
	uint64_t n;
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	vhost_user_init(&vu, sv[0], TIMEOUT_MS);
	ck_assert_int_eq(vhost_user_set_mem_table(&vu, r, 0, &e), -1);
	ck_assert_int_eq(vhost_user_set_mem_table(&vu, r, VHOST_USER_MAX_REGIONS + 1, &e), -1);
	r[0].fd = -1;
	ck_assert_int_eq(vhost_user_set_mem_table(&vu, r, 1, &e), -1);
	ck_assert_int_eq(vhost_user_set_vring_kick(&vu, 256, -1, &e), -1);
	ck_assert_int_eq(vhost_user_get_queue_num(&vu, &n, &e), -1); /* MQ not negotiated */
	ck_assert(!vu.broken);
	vhost_user_close(&vu);
	char c;
	ck_assert_int_eq(read(sv[1], &c, 1), 0); /* nothing was sent */
	close(sv[1]);
}
END_TEST

START_TEST(connect_path)
{
	char dir[] = "/tmp/vhost-user-test-XXXXXX", path[128];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/sock", dir);
	ck_assert_int_eq(vhost_user_connect_path(&vu, path, TIMEOUT_MS, &e), -1);
	ck_assert_ptr_nonnull(strstr(e.msg, path));
	int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, path, strlen(path) + 1);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(l, 1), 0);
	memset(&e, 0, sizeof(e));
	ck_assert_int_eq(vhost_user_connect_path(&vu, path, TIMEOUT_MS, &e), 0);
	int c = accept(l, NULL, NULL);
	ck_assert_int_ge(c, 0);
	/* The accepted side reads what the frontend sends. */
	ck_assert_int_eq(vhost_user_set_owner(&vu, &e), 0);
	uint32_t h[3];
	ck_assert_int_eq(read(c, h, sizeof(h)), (ssize_t)sizeof(h));
	ck_assert_uint_eq(h[0], SET_OWNER);
	vhost_user_close(&vu);
	close(c);
	close(l);
	unlink(path);
	rmdir(dir);
}
END_TEST

static Suite *vhost_user_suite(void)
{
	Suite *s = suite_create("vhost_user");
	TCase *t = tcase_create("protocol");
	tcase_add_test(t, full_setup);
	tcase_add_test(t, ack_failure);
	tcase_add_test(t, wrong_request_id);
	tcase_add_test(t, wrong_flags);
	tcase_add_test(t, short_reply);
	tcase_add_test(t, oversized_ack);
	tcase_add_test(t, close_mid_reply);
	tcase_add_test(t, close_instead_of_reply);
	tcase_add_test(t, no_answer_times_out);
	tcase_add_test(t, vring_base_wrong_ring);
	tcase_add_test(t, send_to_closed_peer);
	tcase_add_test(t, bad_arguments);
	tcase_add_test(t, connect_path);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(vhost_user_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
