/*
 * /init for the multiqueue check of real Linux guests
 * (tests/guest/linux_mq_test.py): a static program that drives virtio-blk
 * and virtio-net from every CPU, so that blk-mq and the virtio-net driver
 * use each CPU's own queue (blk-mq maps hardware queue i to CPU i; the
 * driver's XPS maps transmit queue i to CPU i), then powers the guest
 * off. On our hosts guest system calls need the host-workaround kernels
 * (guests/linux/README.md), and each costs ~0.5 ms: the counts are small.
 *
 * Per CPU c (a child pinned with sched_setaffinity): READS O_DIRECT 4 KiB
 * reads of /dev/vda at sectors that differ per CPU, and FRAMES broadcast
 * frames of EtherType 0x88b5 out of eth0 (an AF_PACKET socket). It prints
 *   mqinit: cpu C: reads R of READS ok, frames F of FRAMES sent
 * then "mqinit: done" and reboot(RB_AUTOBOOT): with the VMM's default
 * reboot=k that is a reset through the i8042, which ends the VM with exit
 * code 0 (there is no ACPI to power off with).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/reboot.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define READS  32
#define FRAMES 32
#define MAXCPU 8

static int reads(int cpu)
{
	static char buf[4096] __attribute__((aligned(4096)));
	int fd = open("/dev/vda", O_RDONLY | O_DIRECT);
	int ok = 0;
	if (fd < 0)
		return -errno;
	for (int i = 0; i < READS; i++)
		ok += pread(fd, buf, sizeof(buf), (off_t)(cpu * READS + i) * 4096) == sizeof(buf);
	close(fd);
	return ok;
}

static int frames(int cpu)
{
	int s = socket(AF_PACKET, SOCK_RAW, htons(0x88b5));
	int sent = 0;
	if (s < 0)
		return -errno;
	unsigned char f[60] = {0};
	memset(f, 0xff, 6);
	f[6] = 0x02;
	f[11] = (unsigned char)cpu;
	f[12] = 0x88;
	f[13] = 0xb5;
	struct sockaddr_ll sll = {
	    .sll_family = AF_PACKET, .sll_ifindex = (int)if_nametoindex("eth0"), .sll_halen = 6};
	memset(sll.sll_addr, 0xff, 6);
	for (int i = 0; i < FRAMES; i++)
		sent +=
		    sendto(s, f, sizeof(f), 0, (struct sockaddr *)&sll, sizeof(sll)) == sizeof(f);
	close(s);
	return sent;
}

static void link_up(const char *name)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
	if (s >= 0 && ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP;
		if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
			dprintf(1, "mqinit: cannot bring %s up (errno %d)\n", name, errno);
	}
	if (s >= 0)
		close(s);
}

int main(void)
{
	mkdir("/dev", 0755);
	mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
	mkdir("/sys", 0755);
	mount("sysfs", "/sys", "sysfs", 0, NULL);
	link_up("eth0");
	int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu < 1)
		ncpu = 1;
	if (ncpu > MAXCPU)
		ncpu = MAXCPU;
	dprintf(1, "mqinit: %d CPUs online\n", ncpu);
	for (int c = 0; c < ncpu; c++) {
		pid_t pid = fork();
		if (pid == 0) {
			cpu_set_t set;
			CPU_ZERO(&set);
			CPU_SET(c, &set);
			if (sched_setaffinity(0, sizeof(set), &set) < 0)
				_exit(2);
			int r = reads(c), f = frames(c);
			dprintf(1, "mqinit: cpu %d: reads %d of %d ok, frames %d of %d sent\n", c,
				r, READS, f, FRAMES);
			_exit(0);
		}
		waitpid(pid, NULL, 0); /* one CPU at a time: the counts per queue stay apart */
	}
	dprintf(1, "mqinit: done\n");
	sync();
	reboot(RB_AUTOBOOT);
	return 0;
}
