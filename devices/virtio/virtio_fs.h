/*
 * virtio-fs (virtio 1.2, 5.11) whose queues a vhost-user backend serves
 * (virtiofsd): the device keeps the configuration (the tag, the number of
 * request queues) and tells the backend where the rings are; the
 * transport turns the backend's call eventfds into the guest's interrupts
 * (devices/virtio/virtio.h, external_queues). The VMM never reads a FUSE
 * message: what the guest puts in the rings goes to the backend as it is,
 * and the backend (another process) checks it.
 */
#ifndef DEVICES_VIRTIO_FS_H
#define DEVICES_VIRTIO_FS_H

#include "devices/backends/vhost_user.h"
#include "devices/virtio/virtio.h"

#include <stdatomic.h>

struct guest_mem;

/* 5.11.4: the tag is up to 36 bytes, NUL-padded (no NUL when 36 long). */
#define VIRTIO_FS_TAG_MAX 36
/* Request queues: one is what virtiofsd serves today (it has one thread
 * per queue); the hiprio queue comes first. */
#define VIRTIO_FS_MAX_REQUEST_QUEUES 1
_Static_assert(1 + VIRTIO_FS_MAX_REQUEST_QUEUES <= 32, "started_queues has a bit per queue");
/* How long one vhost-user message may take before the backend counts as
 * stuck (the device then needs a reset; the VMM goes on). */
#define VIRTIO_FS_BACKEND_TIMEOUT_MS 5000

struct virtio_fs {
	struct virtio_dev vdev;
	struct vhost_user vu;
	const struct guest_mem *mem;
	char tag[VIRTIO_FS_TAG_MAX];
	uint32_t num_request_queues;
	uint64_t backend_features; /* GET_FEATURES, less the protocol bit */
	bool running;		   /* start succeeded, stop not yet called */
	uint32_t started_queues;   /* rings the backend started (bit = queue), until stop */
	atomic_uint_fast64_t starts, stops, backend_failures;
};

/* Takes the connected socket (and closes it on failure) and sets the
 * backend up: SET_OWNER, features, protocol features, the memory table.
 * 0, or -1 with an error naming what the backend refused. */
int virtio_fs_init(struct virtio_fs *fs, int sock_fd, const char *tag,
		   const struct vhost_user_region *regions, unsigned nregions,
		   const struct guest_mem *mem, struct err *e);
void virtio_fs_destroy(struct virtio_fs *fs);
/* The backend went away (its process exited, its socket hung up): the
 * device needs a reset (virtio 1.2 2.1.2); the VMM and the other devices
 * go on. Any thread, no lock held. */
void virtio_fs_backend_gone(struct virtio_fs *fs, const char *why);

#endif
