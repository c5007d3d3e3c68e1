#include "net_tap.h"

#include "vmm/base/err.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int net_tap_open(const char *name, char *name_out, struct err *e)
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
	snprintf(name_out, IFNAMSIZ, "%s", ifr.ifr_name);
	return fd;
}
