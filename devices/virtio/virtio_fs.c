#include "devices/virtio/virtio_fs.h"

#include "vmm/base/err.h"
#include "vmm/base/guest_mem.h"

#include <errno.h>
#include <string.h>

/* 5.11.4: struct virtio_fs_config. */
struct fs_config {
	char tag[VIRTIO_FS_TAG_MAX];
	uint32_t num_request_queues; /* le32; the host is little-endian too */
} __attribute__((packed));

static struct virtio_fs *fs_of(struct virtio_dev *d)
{
	return d->priv;
}

static void fs_config_read(struct virtio_dev *d, unsigned off, void *data, unsigned len)
{
	const struct virtio_fs *fs = fs_of(d);
	struct fs_config c;
	memcpy(c.tag, fs->tag, sizeof(c.tag));
	c.num_request_queues = fs->num_request_queues;
	if (off < sizeof(c) && len <= sizeof(c) - off)
		memcpy(data, (const char *)&c + off, len);
	else
		memset(data, 0, len);
}

/* The ring's host address: the backend maps the same RAM (the memory
 * table), so the rings are named in the VMM's address space. */
static uint64_t ring_uaddr(const struct virtio_fs *fs, uint64_t gpa, uint64_t len)
{
	return (uint64_t)(uintptr_t)guest_mem_ptr(fs->mem, gpa, len);
}

/* 2.7: the split ring's parts, with the event index fields. */
static int fs_start_queue(struct virtio_fs *fs, const struct virtio_queue_info *q, struct err *e)
{
	uint64_t n = q->size;
	uint64_t desc = ring_uaddr(fs, q->desc, 16 * n);
	uint64_t avail = ring_uaddr(fs, q->driver, 6 + 2 * n);
	uint64_t used = ring_uaddr(fs, q->device, 6 + 8 * n);
	if (!desc || !avail || !used)
		return err_set(e, ERR_INPUT, "queue %u: a ring outside RAM", q->index);
	struct vhost_user *vu = &fs->vu;
	if (vhost_user_set_vring_num(vu, q->index, q->size, e) ||
	    vhost_user_set_vring_base(vu, q->index, 0, e) ||
	    vhost_user_set_vring_addr(vu, q->index, desc, avail, used, e) ||
	    vhost_user_set_vring_call(vu, q->index, q->call_fd, e))
		return -1;
	/* SET_VRING_KICK starts the ring in the backend (libvhost-user), so it
	 * comes after the call fd: a kick the guest wrote before DRIVER_OK is
	 * already in the fd, and its reply must find the interrupt. From here
	 * on a stop owes the backend a GET_VRING_BASE, even if a later
	 * message fails. */
	fs->started_queues |= 1u << q->index;
	if (vhost_user_set_vring_kick(vu, q->index, q->kick_fd, e))
		return -1;
	if (vu->features & VIRTIO_FEATURE(VHOST_USER_F_PROTOCOL_FEATURES))
		return vhost_user_set_vring_enable(vu, q->index, true, e);
	return 0;
}

/* DRIVER_OK: the negotiated features, then every enabled queue. */
static int fs_start(struct virtio_dev *d, const struct virtio_external_start *s)
{
	struct virtio_fs *fs = fs_of(d);
	struct err e = {0};
	uint64_t features = d->features;
	if (fs->backend_features & VIRTIO_FEATURE(VHOST_USER_F_PROTOCOL_FEATURES))
		features |= VIRTIO_FEATURE(VHOST_USER_F_PROTOCOL_FEATURES);
	int ret = vhost_user_set_features(&fs->vu, features, &e);
	for (unsigned i = 0; !ret && i < s->nq; i++)
		ret = fs_start_queue(fs, &s->q[i], &e);
	if (ret) {
		atomic_fetch_add(&fs->backend_failures, 1);
		return -EIO;
	}
	fs->running = true;
	atomic_fetch_add(&fs->starts, 1);
	return 0;
}

/* Reset or teardown after a start, whole or partial: the backend stops
 * each ring it started (GET_VRING_BASE), and only those: a guest may
 * enable some queues and not others, and virtiofsd dies on a
 * GET_VRING_BASE for a ring it never started (an assertion, or a NULL
 * queue), as QEMU, which skips such rings, never sends one. */
static void fs_stop(struct virtio_dev *d)
{
	struct virtio_fs *fs = fs_of(d);
	struct err e = {0};
	uint32_t base;
	if (fs->running)
		atomic_fetch_add(&fs->stops, 1);
	fs->running = false;
	for (unsigned q = 0; q < d->num_queues && !fs->vu.broken; q++)
		if (fs->started_queues & (1u << q))
			vhost_user_get_vring_base(&fs->vu, q, &base, &e);
	fs->started_queues = 0;
}

static const struct virtio_dev_ops fs_ops = {
    .type = VIRTIO_ID_FS,
    .pci_class = 0x018000, /* mass storage, other */
    .queue_max = 1024,
    .config_size = sizeof(struct fs_config),
    .config_read = fs_config_read,
    .external_queues = true,
    .start = fs_start,
    .stop = fs_stop,
};

/* SET_OWNER, the backend's features and protocol features. */
static int fs_connect(struct virtio_fs *fs, struct err *e)
{
	uint64_t f;
	if (vhost_user_set_owner(&fs->vu, e) || vhost_user_get_features(&fs->vu, &f, e))
		return -1;
	fs->backend_features = f;
	if (!(f & VIRTIO_FEATURE(VIRTIO_F_VERSION_1)))
		return err_set(e, ERR_HOST,
			       "the vhost-user backend does not offer VIRTIO_F_VERSION_1");
	if (f & VIRTIO_FEATURE(VHOST_USER_F_PROTOCOL_FEATURES) &&
	    vhost_user_negotiate_protocol(&fs->vu, VHOST_USER_PROTOCOL_SUPPORTED, e))
		return -1;
	return 0;
}

int virtio_fs_init(struct virtio_fs *fs, int sock_fd, const char *tag,
		   const struct vhost_user_region *regions, unsigned nregions,
		   const struct guest_mem *mem, struct err *e)
{
	memset(fs, 0, sizeof(*fs));
	vhost_user_init(&fs->vu, sock_fd, VIRTIO_FS_BACKEND_TIMEOUT_MS);
	size_t len = strlen(tag);
	if (!len || len > VIRTIO_FS_TAG_MAX) {
		vhost_user_close(&fs->vu);
		return err_set(e, ERR_INPUT, "tag '%s': 1 to %d bytes", tag, VIRTIO_FS_TAG_MAX);
	}
	memcpy(fs->tag, tag, len);
	fs->mem = mem;
	fs->num_request_queues = VIRTIO_FS_MAX_REQUEST_QUEUES;
	fs->vdev.ops = &fs_ops;
	fs->vdev.priv = fs;
	fs->vdev.num_queues = 1 + fs->num_request_queues;
	if (fs_connect(fs, e) || vhost_user_set_mem_table(&fs->vu, regions, nregions, e)) {
		vhost_user_close(&fs->vu);
		return -1;
	}
	/* The offer is what the backend serves (the transport masks its own
	 * ring features by it); the protocol bit is vhost-user's, not virtio's. */
	fs->vdev.backend_features =
	    fs->backend_features & ~VIRTIO_FEATURE(VHOST_USER_F_PROTOCOL_FEATURES);
	return 0;
}

void virtio_fs_destroy(struct virtio_fs *fs)
{
	vhost_user_close(&fs->vu);
}

void virtio_fs_backend_gone(struct virtio_fs *fs, const char *why)
{
	atomic_fetch_add(&fs->backend_failures, 1);
	if (fs->vdev.transport)
		virtio_needs_reset(&fs->vdev, why);
}
