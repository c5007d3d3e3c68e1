/* Registry entry: virtio-fs (devices/virtio/virtio_fs.h) sharing a host
 * directory through a vhost-user backend, `--fs DIR,tag=NAME[,ro][,socket=
 * PATH]`: Debian's virtiofsd started for DIR on a socket only the two
 * processes hold, and stopped with the VM; or, with socket=PATH, a backend
 * the user started (DIR then only names the share in messages). virtiofsd
 * has no read-only mode: for ro it serves a read-only copy of DIR's mount
 * tree that only it holds. */
#include "vmm/base/err.h"
#include "vmm/base/guest_mem.h"
#include "vmm/base/log.h"
#include "vmm/base/stat.h"
#include "vmm/host/child.h"
#include "vmm/host/event_loop.h"
#include "vmm/kinds/virtio.h"

#include "devices/virtio/virtio_fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* Debian's (qemu-system-common); $VMM_VIRTIOFSD names another. */
#define VIRTIOFSD_DEFAULT "/usr/lib/qemu/virtiofsd"
#define VIRTIOFSD_FD	  3 /* the listening socket, --fd=3 */
#define VIRTIOFSD_TREE_FD 4 /* ro: the read-only tree, source=/proc/self/fd/4 */

struct fs_params {
	const char *dir;
	const char *tag;
	const char *socket;
	bool readonly;
};
DEVICE_PARAMS_FIT(struct fs_params);

struct fs_device {
	struct virtio_instance vi; /* first: the registry's state */
	struct virtio_fs fs;
	struct child backend;
	int err_pipe;	/* the backend's stderr; -1: none */
	char line[160]; /* its line being read */
	size_t line_len;
	char last[160]; /* its last whole line, for the line that says why it stopped */
	char name[24];
};

/* The backend's stderr, a line at a time: each at debug level (virtiofsd
 * says "TODO" and "Unexpected poll revents" on every normal stop), the
 * last kept for the error when it stops early. */
static void fs_take_output(struct fs_device *f, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		bool end = p[i] == '\n' || f->line_len == sizeof(f->line) - 1;
		if (end && f->line_len) {
			f->line[f->line_len] = 0;
			log_debug(f->vi.host->log, "%s: %s: %s", f->name, f->backend.name, f->line);
			memcpy(f->last, f->line, f->line_len + 1);
			f->line_len = 0;
		}
		if (p[i] != '\n')
			f->line[f->line_len++] = (p[i] >= 0x20 && p[i] < 0x7f) ? p[i] : '?';
	}
}

static void fs_backend_said(void *arg)
{
	struct fs_device *f = arg;
	char buf[512];
	ssize_t n;
	while ((n = read(f->err_pipe, buf, sizeof(buf))) > 0)
		fs_take_output(f, buf, (size_t)n);
	if (n == 0) { /* it exited (or closed stderr): nothing more to watch */
		fs_take_output(f, "\n", 1);
		event_loop_unwatch(f->vi.host->main_loop, f->err_pipe);
	}
}

static int fs_check(const struct device_spec *spec, struct err *e)
{
	const struct fs_params *p = (const struct fs_params *)spec->params;
	struct stat st;
	if (strlen(p->tag) > VIRTIO_FS_TAG_MAX)
		return err_set(e, ERR_INPUT, "--fs %s tag %s: at most %d bytes", p->dir, p->tag,
			       VIRTIO_FS_TAG_MAX);
	if (p->socket && p->readonly)
		return err_set(e, ERR_INPUT,
			       "--fs %s: ro is for the backend the VMM starts (a socket=PATH "
			       "backend decides for itself)",
			       p->dir);
	if (p->socket)
		return 0;
	if (stat(p->dir, &st))
		return err_set(e, ERR_INPUT, "--fs %s: %s", p->dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return err_set(e, ERR_INPUT, "--fs %s: not a directory", p->dir);
	return 0;
}

/* A listening socket with an abstract name of the kernel's choosing, and
 * our end already connected to it: virtiofsd accepts that connection. */
static int fs_socket_pair(int *listen_fd, int *conn_fd, struct err *e)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	socklen_t len = sizeof(sa_family_t);
	*listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	*conn_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*listen_fd < 0 || *conn_fd < 0 || bind(*listen_fd, (struct sockaddr *)&a, len) ||
	    listen(*listen_fd, 1) ||
	    (len = sizeof(a), getsockname(*listen_fd, (struct sockaddr *)&a, &len)) ||
	    connect(*conn_fd, (struct sockaddr *)&a, len))
		return err_set(e, ERR_HOST, "vhost-user socket: %s", strerror(errno));
	return 0;
}

/* ro: a detached copy of DIR's mount tree (open_tree), every mount in it
 * read-only (mount_setattr, Linux 5.12); no other process sees it, and
 * virtiofsd chroots into it through /proc/self/fd. -1 with an error. */
static int fs_readonly_tree(const char *dir, struct err *e)
{
	struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
	int fd = open_tree(AT_FDCWD, dir, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	if (fd >= 0 && !mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &ro, sizeof(ro)))
		return fd;
	err_set(e, ERR_HOST, "ro: cannot make a read-only copy of its mounts: %s: %s%s",
		fd < 0 ? "open_tree" : "mount_setattr", strerror(errno),
		errno == ENOSYS || errno == EPERM ? " (it needs Linux 5.12 and CAP_SYS_ADMIN)"
						  : "");
	if (fd >= 0)
		close(fd);
	return -1;
}

static int fs_start_backend(struct fs_device *f, const struct fs_params *p, int *conn,
			    struct err *e)
{
	const char *bin = getenv("VMM_VIRTIOFSD");
	char fdarg[16], source[4096 + 16];
	int lfd = -1, tree = -1;
	snprintf(fdarg, sizeof(fdarg), "--fd=%d", VIRTIOFSD_FD);
	if (p->readonly)
		snprintf(source, sizeof(source), "source=/proc/self/fd/%d/", VIRTIOFSD_TREE_FD);
	else
		snprintf(source, sizeof(source), "source=%s", p->dir);
	const char *argv[] = {bin && *bin ? bin : VIRTIOFSD_DEFAULT,
			      fdarg,
			      "-o",
			      source,
			      "-o",
			      "cache=auto",
			      "-o",
			      "sandbox=chroot",
			      "-o",
			      "log_level=warn",
			      NULL};
	int pipe_fds[2] = {-1, -1};
	int ret = 0;
	if (p->readonly && (tree = fs_readonly_tree(p->dir, e)) < 0)
		ret = -1;
	if (!ret)
		ret = fs_socket_pair(&lfd, conn, e);
	if (!ret && pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK))
		ret = err_set(e, ERR_HOST, "pipe: %s", strerror(errno));
	struct child_fd fds[] = {{lfd, VIRTIOFSD_FD}, {tree, VIRTIOFSD_TREE_FD}};
	if (!ret)
		ret = child_spawn(&f->backend, argv, fds, tree >= 0 ? 2 : 1, pipe_fds[1], e);
	if (lfd >= 0)
		close(lfd);
	if (tree >= 0)
		close(tree);
	if (pipe_fds[1] >= 0)
		close(pipe_fds[1]);
	f->err_pipe = pipe_fds[0];
	return ret;
}

/* The memory table: guest RAM as the backend maps it (the memfd). */
static unsigned fs_regions(const struct guest_mem *mem, struct vhost_user_region *r)
{
	struct guest_mem_share sh[GUEST_MEM_MAX_REGIONS];
	int n = guest_mem_share(mem, sh, GUEST_MEM_MAX_REGIONS);
	for (int i = 0; i < n; i++)
		r[i] = (struct vhost_user_region){.guest_phys_addr = sh[i].gpa,
						  .memory_size = sh[i].size,
						  .userspace_addr = sh[i].host,
						  .mmap_offset = sh[i].offset,
						  .fd = sh[i].fd};
	return n > 0 ? (unsigned)n : 0;
}

static void fs_destroy(void *state)
{
	struct fs_device *f = state;
	virtio_pci_destroy(&f->vi.vp);
	virtio_fs_destroy(&f->fs);
	child_stop(&f->backend);
	if (f->err_pipe >= 0)
		close(f->err_pipe);
	free(f);
}

/* The backend's process exited: the device needs a reset, the VMM goes on. */
static void fs_backend_exited(void *arg)
{
	struct fs_device *f = arg;
	fs_backend_said(f);
	log_warn(f->vi.host->log,
		 "%s: its vhost-user backend %s exited%s%s%s; the device needs a reset", f->name,
		 f->backend.name, f->last[0] ? " (its last words: \"" : "", f->last,
		 f->last[0] ? "\")" : "");
	virtio_fs_backend_gone(&f->fs, "the vhost-user backend exited");
	/* Watched once: the pidfd stays readable. */
	event_loop_unwatch(f->vi.host->main_loop, f->backend.pidfd);
}

/* The backend's connected socket: a virtiofsd of our own, or the one the
 * user started (socket=PATH). -1 with an error. */
static int fs_connect(struct fs_device *f, const struct fs_params *p, struct err *e)
{
	struct vhost_user v;
	int conn = -1;
	int ret = p->socket
		      ? vhost_user_connect_path(&v, p->socket, VIRTIO_FS_BACKEND_TIMEOUT_MS, e)
		      : fs_start_backend(f, p, &conn, e);
	if (!ret && p->socket) {
		conn = v.fd; /* virtio_fs_init takes the connection over */
		v.fd = -1;
	}
	if (ret) {
		if (conn >= 0)
			close(conn);
		err_prefix(e, "--fs %s", p->socket ? p->socket : p->dir);
		return -1;
	}
	return conn;
}

static void *fs_create(const struct device_host *h, const struct device_spec *spec,
		       const char *name, uint8_t slot, struct err *e)
{
	const struct fs_params *p = (const struct fs_params *)spec->params;
	struct vhost_user_region r[VHOST_USER_MAX_REGIONS];
	struct fs_device *f = calloc(1, sizeof(*f));
	if (!f) {
		err_set(e, ERR_HOST, "out of memory");
		return NULL;
	}
	f->vi.host = h;
	f->backend.pidfd = -1;
	f->err_pipe = -1;
	f->fs.vu.fd = -1; /* nothing to close until virtio_fs_init */
	snprintf(f->name, sizeof(f->name), "%s", name);
	int conn = fs_connect(f, p, e);
	if (conn < 0)
		goto fail;
	unsigned nr = fs_regions(h->mem, r);
	if (!nr) {
		close(conn);
		err_set(e, ERR_HOST, "--fs %s: guest RAM is not in a memfd the backend could map",
			p->dir);
		goto fail;
	}
	if (virtio_fs_init(&f->fs, conn, p->tag, r, nr, h->mem, e)) {
		if (f->err_pipe >= 0)
			fs_backend_said(f); /* why it went, when it said */
		if (f->last[0])
			err_prefix(e, "%s says \"%s\"", f->backend.name, f->last);
		err_prefix(e, "--fs %s", p->socket ? p->socket : p->dir);
		goto fail;
	}
	if (f->err_pipe >= 0 &&
	    event_loop_watch(h->main_loop, f->err_pipe, false, fs_backend_said, f) < 0) {
		err_set(e, ERR_HOST, "%s: cannot watch its backend's output", name);
		goto fail;
	}
	if (f->backend.pidfd >= 0 &&
	    event_loop_watch(h->main_loop, f->backend.pidfd, false, fs_backend_exited, f) < 0) {
		err_set(e, ERR_HOST, "%s: cannot watch its backend", name);
		goto fail;
	}
	if (virtio_instance_plug(&f->vi, &f->fs.vdev, name, slot, e))
		goto fail;
	return f;
fail:
	fs_destroy(f);
	return NULL;
}

static void fs_print_stats(const struct vm_device *d, FILE *out)
{
	const struct fs_device *f = d->state;
	virtio_print_transport_stats(d, out);
	fprintf(out, "vmm: stats: %s: backend starts %llu stops %llu failures %llu\n", d->name,
		STAT(f->fs.starts), STAT(f->fs.stops), STAT(f->fs.backend_failures));
}

const struct device_kind device_kind_virtio_fs = {
    .cli =
	{
	    .name = "virtio-fs",
	    .option = "fs",
	    .help = "share host directory DIR with the guest over virtio-fs, as tag NAME "
		    "(mount -t virtiofs NAME /mnt): Debian's virtiofsd serves it ($VMM_VIRTIOFSD "
		    "names another), started and stopped with the VM; ro: the guest cannot "
		    "write it (the backend serves a read-only copy of its mounts; Linux 5.12); "
		    "socket=PATH: a vhost-user backend already listening there; repeatable",
	    .props = OPT_TABLE(DEVICE_PROP_PATH("dir", "DIR", struct fs_params, dir),
			       DEVICE_PROP_REQUIRED("tag", "NAME", struct fs_params, tag),
			       DEVICE_PROP_FLAG("ro", struct fs_params, readonly),
			       DEVICE_PROP_STRING("socket", "PATH", struct fs_params, socket)),
	    .check = fs_check,
	},
    .create = fs_create,
    .destroy = fs_destroy,
    .print_stats = fs_print_stats,
    .shares_ram = true,
};
