/*
 * The frontend ("master") side of the vhost-user protocol (QEMU's
 * docs/interop/vhost-user.rst): a device whose virtqueues another process
 * serves (virtiofsd for virtio-fs; later vhost-user-blk/-net). It speaks
 * the control messages only; the device model decides what to send when.
 *
 * The backend is another process and is not trusted: every reply is
 * checked (request id, reply flag, version, size) before use, and a reply
 * is awaited with poll() for at most `timeout_ms` (sends too), so a stuck
 * or dead backend costs the caller at most one timeout per call and never
 * blocks a VMM thread for ever. Any protocol error (EOF, short or
 * malformed reply, wrong request id, timeout, send failure) marks the
 * connection broken: every later call fails at once, naming the first
 * cause, and the device should report itself failed (DEVICE_NEEDS_RESET).
 * A negative REPLY_ACK is a refused request, not a broken connection.
 *
 * One thread at a time per connection (the device's lock); the calls
 * block for at most the timeout each. Every call returns 0, or -1 with a
 * one-line error naming the request ("vhost-user SET_VRING_ADDR: ...").
 */
#ifndef DEVICES_BACKENDS_VHOST_USER_H
#define DEVICES_BACKENDS_VHOST_USER_H

#include <stdbool.h>
#include <stdint.h>

struct err;

/* Feature bit 30 of GET/SET_FEATURES: the backend speaks protocol
 * features. Once acked, rings start disabled until SET_VRING_ENABLE. */
#define VHOST_USER_F_PROTOCOL_FEATURES 30

/* Protocol feature bits (vhost-user.rst, "Protocol features"). */
#define VHOST_USER_PROTOCOL_F_MQ		  0
#define VHOST_USER_PROTOCOL_F_LOG_SHMFD		  1
#define VHOST_USER_PROTOCOL_F_RARP		  2
#define VHOST_USER_PROTOCOL_F_REPLY_ACK		  3
#define VHOST_USER_PROTOCOL_F_MTU		  4
#define VHOST_USER_PROTOCOL_F_BACKEND_REQ	  5
#define VHOST_USER_PROTOCOL_F_CONFIG		  9
#define VHOST_USER_PROTOCOL_F_RESET_DEVICE	  13
#define VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS 15

/* What this frontend can use: offer no more than this to
 * vhost_user_negotiate_protocol (others need messages not written here). */
#define VHOST_USER_PROTOCOL_SUPPORTED                                                              \
	((1ULL << VHOST_USER_PROTOCOL_F_MQ) | (1ULL << VHOST_USER_PROTOCOL_F_REPLY_ACK))

/* SET_MEM_TABLE carries at most this many regions (one fd each). */
#define VHOST_USER_MAX_REGIONS 8

struct vhost_user {
	int fd;			    /* connected AF_UNIX stream socket, owned; -1 closed */
	unsigned timeout_ms;	    /* per call: the most one send or reply may take */
	uint64_t features;	    /* as last sent with SET_FEATURES */
	uint64_t protocol_features; /* as negotiated (0 until then) */
	bool broken;
	char broken_why[160]; /* the first protocol error, for later calls */
};

/* One RAM region the backend maps: [userspace_addr, +memory_size) in the
 * frontend's address space is guest [guest_phys_addr, ...), and is
 * `fd` mapped from `mmap_offset` (a shared mapping: memfd RAM). */
struct vhost_user_region {
	uint64_t guest_phys_addr;
	uint64_t memory_size;
	uint64_t userspace_addr;
	uint64_t mmap_offset;
	int fd;
};

/* Takes ownership of an already-connected AF_UNIX stream socket. */
void vhost_user_init(struct vhost_user *vu, int sock_fd, unsigned timeout_ms);
/* Connects to the backend's listening socket at `path`. */
int vhost_user_connect_path(struct vhost_user *vu, const char *path, unsigned timeout_ms,
			    struct err *e);
/* Closes the socket; the backend sees EOF and drops the device. */
void vhost_user_close(struct vhost_user *vu);

int vhost_user_set_owner(struct vhost_user *vu, struct err *e);
/* The device's virtio feature bits plus VHOST_USER_F_PROTOCOL_FEATURES. */
int vhost_user_get_features(struct vhost_user *vu, uint64_t *features, struct err *e);
int vhost_user_set_features(struct vhost_user *vu, uint64_t features, struct err *e);
int vhost_user_get_protocol_features(struct vhost_user *vu, uint64_t *pf, struct err *e);
int vhost_user_set_protocol_features(struct vhost_user *vu, uint64_t pf, struct err *e);
/* GET_PROTOCOL_FEATURES, then SET_PROTOCOL_FEATURES with what both sides
 * have of `wanted` (masked by VHOST_USER_PROTOCOL_SUPPORTED); stores the
 * result in vu->protocol_features. Only after the backend offered
 * VHOST_USER_F_PROTOCOL_FEATURES in GET_FEATURES. From here on, with
 * REPLY_ACK, each request without a reply of its own is acknowledged. */
int vhost_user_negotiate_protocol(struct vhost_user *vu, uint64_t wanted, struct err *e);
/* How many queues the backend has (needs PROTOCOL_F_MQ). */
int vhost_user_get_queue_num(struct vhost_user *vu, uint64_t *n, struct err *e);

/* All of guest RAM, up to VHOST_USER_MAX_REGIONS regions; fds passed
 * with SCM_RIGHTS. Replaces any earlier table. */
int vhost_user_set_mem_table(struct vhost_user *vu, const struct vhost_user_region *r, unsigned n,
			     struct err *e);

int vhost_user_set_vring_num(struct vhost_user *vu, unsigned idx, unsigned num, struct err *e);
/* The rings' addresses in the frontend's address space (userspace_addr
 * terms of the memory table), not guest-physical ones. */
int vhost_user_set_vring_addr(struct vhost_user *vu, unsigned idx, uint64_t desc, uint64_t avail,
			      uint64_t used, struct err *e);
/* The next available index the backend will read. */
int vhost_user_set_vring_base(struct vhost_user *vu, unsigned idx, unsigned base, struct err *e);
/* Stops ring `idx` and returns where it stopped: the next available index
 * it would have read (on device reset or queue reset). */
int vhost_user_get_vring_base(struct vhost_user *vu, unsigned idx, uint32_t *base, struct err *e);
/* Eventfds for the ring (the backend keeps its own copies): KICK, the
 * guest's notify (receiving it starts the ring); CALL, the backend's
 * interrupt; ERR, the backend's error signal. fd -1 sends none (the
 * "invalid fd" flag: the backend polls, or has no interrupt/error fd). */
int vhost_user_set_vring_kick(struct vhost_user *vu, unsigned idx, int fd, struct err *e);
int vhost_user_set_vring_call(struct vhost_user *vu, unsigned idx, int fd, struct err *e);
int vhost_user_set_vring_err(struct vhost_user *vu, unsigned idx, int fd, struct err *e);
/* With protocol features acked, rings start disabled: enables or disables. */
int vhost_user_set_vring_enable(struct vhost_user *vu, unsigned idx, bool enable, struct err *e);

#endif
