#include "net_tap.h"

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

int net_tap_open(const char *name, char *name_out, bool *created, struct err *e)
{
	struct ifreq ifr;
	int hdr = 12; /* struct virtio_net_hdr_v1 (virtio 1.2, 5.1.6) */
	int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return err_set(e, ERR_HOST, "cannot open /dev/net/tun: %s", strerror(errno));
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	if (name && *name) {
		if (strlen(name) >= IFNAMSIZ) {
			close(fd);
			return err_set(e, ERR_INPUT, "name longer than %d", IFNAMSIZ - 1);
		}
		memcpy(ifr.ifr_name, name, strlen(name));
	}
	*created = !net_tap_exists(name);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		int err = errno;
		close(fd);
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
	int ret = *created ? net_tap_bring_up(ifr.ifr_name) : 0;
	if (ret < 0) {
		close(fd);
		return err_set(e, ERR_HOST, "bringing %s up: %s", ifr.ifr_name, strerror(-ret));
	}
	snprintf(name_out, IFNAMSIZ, "%s", ifr.ifr_name);
	return fd;
}
