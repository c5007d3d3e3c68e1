#include "devices/backends/net_tap.h"

#include "vmm/base/err.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

/* Whether a network interface of that name exists in this network
 * namespace (asked before TUNSETIFF, which would make it). */
static bool net_tap_exists(const char *name)
{
	struct ifreq ifr;
	if (!name || !*name)
		return false;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return false;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
	bool found = ioctl(s, SIOCGIFINDEX, &ifr) == 0;
	close(s);
	return found;
}

/* Sets IFF_UP: a tap the VMM made itself would stay down, and every frame
 * the guest sends would fail (EIO). A tap the user made is theirs. */
static int net_tap_bring_up(const char *ifname)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", ifname);
	int ret = ioctl(s, SIOCGIFFLAGS, &ifr);
	if (ret == 0 && !(ifr.ifr_flags & IFF_UP)) {
		ifr.ifr_flags |= IFF_UP;
		ret = ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	ret = ret < 0 ? -errno : 0;
	close(s);
	return ret;
}

/* One file of tap `name` (flags: IFF_MULTI_QUEUE or 0); the kernel's name
 * for it into name_out. */
static int net_tap_open_one(const char *name, short flags, char *name_out, struct err *e)
{
	struct ifreq ifr;
	int hdr = 12; /* struct virtio_net_hdr_v1 (virtio 1.2, 5.1.6) */
	int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return err_set(e, ERR_HOST, "cannot open /dev/net/tun: %s", strerror(errno));
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = (short)(IFF_TAP | IFF_NO_PI | IFF_VNET_HDR | flags);
	if (name && *name)
		memcpy(ifr.ifr_name, name, strlen(name));
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		int err = errno;
		close(fd);
		if (err == EINVAL && name && *name && net_tap_exists(name))
			return err_set(
			    e, ERR_INPUT, "TUNSETIFF: %s (%s exists %s)", strerror(err), name,
			    flags ? "without multi_queue: queues=N needs a tap made with "
				    "it, or none"
				  : "with multi_queue: give queues=N");
		return err_set(e, err == EPERM ? ERR_HOST : ERR_INPUT, "TUNSETIFF: %s",
			       strerror(err));
	}
	/* The header the guest sees is the 12-byte one; no offloads until a
	 * driver negotiates them (none are offered yet). */
	if (ioctl(fd, TUNSETVNETHDRSZ, &hdr) < 0 || ioctl(fd, TUNSETOFFLOAD, 0) < 0) {
		int err = errno;
		close(fd);
		return err_set(e, ERR_HOST, "configuring %s: %s", ifr.ifr_name, strerror(err));
	}
	snprintf(name_out, IFNAMSIZ, "%s", ifr.ifr_name);
	return fd;
}

int net_tap_open_queues(const char *name, unsigned n, int *fds, char *name_out, bool *created,
			struct err *e)
{
	if (name && *name && strlen(name) >= IFNAMSIZ)
		return err_set(e, ERR_INPUT, "name longer than %d", IFNAMSIZ - 1);
	*created = !net_tap_exists(name);
	short flags = n > 1 ? IFF_MULTI_QUEUE : 0;
	unsigned opened = 0;
	int ret = 0;
	/* The first file names the tap (the kernel may pick the name); the
	 * others join it as its further queues. */
	for (; opened < n; opened++) {
		int fd = net_tap_open_one(opened ? name_out : name, flags, name_out, e);
		if (fd < 0) {
			ret = -1;
			break;
		}
		fds[opened] = fd;
	}
	if (!ret && *created) {
		int r = net_tap_bring_up(name_out);
		if (r < 0)
			ret = err_set(e, ERR_HOST, "bringing %s up: %s", name_out, strerror(-r));
	}
	if (ret)
		while (opened > 0)
			close(fds[--opened]);
	return ret;
}

int net_tap_open(const char *name, char *name_out, bool *created, struct err *e)
{
	int fd;
	return net_tap_open_queues(name, 1, &fd, name_out, created, e) ? -1 : fd;
}

int net_tap_attach_queue(int fd, bool attach)
{
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = attach ? IFF_ATTACH_QUEUE : IFF_DETACH_QUEUE;
	return ioctl(fd, TUNSETQUEUE, &ifr) < 0 ? -errno : 0;
}
