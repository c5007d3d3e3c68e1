/*
 * The vhost-user frontend against a real backend: Debian's virtiofsd
 * (QEMU 7.2's, libvhost-user), the set-up sequence a virtio-fs device will
 * send, over guest RAM from guest_mem_create (a memfd). Skipped (77) where
 * virtiofsd is missing or we are not root (its chroot sandbox needs it).
 */
#include "devices/backends/vhost_user.h"
#include "vmm/base/err.h"
#include "vmm/base/guest_mem.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define VIRTIOFSD "/usr/lib/qemu/virtiofsd"
#define SKIP	  77

static pid_t start_virtiofsd(const char *dir, const char *sock)
{
	char src[400], path[400];
	snprintf(src, sizeof(src), "source=%s", dir);
	snprintf(path, sizeof(path), "--socket-path=%s", sock);
	pid_t pid = fork();
	if (pid == 0) {
		execl(VIRTIOFSD, "virtiofsd", path, "-o", src, "-o", "sandbox=chroot", "-o",
		      "log_level=warn", (char *)NULL);
		_exit(127);
	}
	/* virtiofsd creates the socket once it is ready to accept. */
	for (int i = 0; i < 100 && access(sock, F_OK); i++)
		usleep(50000);
	return pid;
}

/* The set-up of two rings over RAM, started, then stopped again. */
static int run(struct vhost_user *vu, struct guest_mem *m, struct err *e)
{
	struct guest_mem_share sh[GUEST_MEM_MAX_REGIONS];
	struct vhost_user_region r[GUEST_MEM_MAX_REGIONS];
	uint64_t f, nq;
	if (vhost_user_get_features(vu, &f, e) < 0 ||
	    vhost_user_negotiate_protocol(vu, ~0ULL, e) < 0 || vhost_user_set_owner(vu, e) < 0 ||
	    vhost_user_get_queue_num(vu, &nq, e) < 0)
		return -1;
	if (!(vu->protocol_features & (1ULL << VHOST_USER_PROTOCOL_F_REPLY_ACK)) || nq < 2) {
		fprintf(stderr, "protocol features %#llx, %llu queues\n",
			(unsigned long long)vu->protocol_features, (unsigned long long)nq);
		return -1;
	}
	if (vhost_user_set_features(
		vu, f & ((1ULL << 32) | (1ULL << VHOST_USER_F_PROTOCOL_FEATURES)), e) < 0)
		return -1;
	int n = guest_mem_share(m, sh, GUEST_MEM_MAX_REGIONS);
	for (int i = 0; i < n; i++)
		r[i] = (struct vhost_user_region){sh[i].gpa, sh[i].size, sh[i].host, sh[i].offset,
						  sh[i].fd};
	if (n == 0 || vhost_user_set_mem_table(vu, r, (unsigned)n, e) < 0)
		return -1;
	int kick = eventfd(0, EFD_CLOEXEC), call = eventfd(0, EFD_CLOEXEC);
	uint64_t b = (uint64_t)(uintptr_t)m->base;
	for (unsigned q = 0; q < 2; q++) {
		uint64_t ring = b + 0x100000 + q * 0x10000;
		if (vhost_user_set_vring_num(vu, q, 128, e) < 0 ||
		    vhost_user_set_vring_addr(vu, q, ring, ring + 0x1000, ring + 0x2000, e) < 0 ||
		    vhost_user_set_vring_base(vu, q, 0, e) < 0 ||
		    vhost_user_set_vring_call(vu, q, call, e) < 0 ||
		    vhost_user_set_vring_err(vu, q, -1, e) < 0 ||
		    vhost_user_set_vring_kick(vu, q, kick, e) < 0 ||
		    vhost_user_set_vring_enable(vu, q, true, e) < 0)
			return -1;
	}
	for (unsigned q = 0; q < 2; q++) {
		uint32_t base = 1;
		if (vhost_user_get_vring_base(vu, q, &base, e) < 0)
			return -1;
		if (base != 0) {
			fprintf(stderr, "ring %u stopped at %u, nothing was posted\n", q, base);
			return -1;
		}
	}
	close(kick);
	close(call);
	return 0;
}

int main(void)
{
	char dir[] = "/tmp/vhost-user-virtiofsd-XXXXXX", share[300], sock[300];
	struct err e = {0};
	struct vhost_user vu;
	struct guest_mem m = {0};
	if (access(VIRTIOFSD, X_OK) || geteuid() != 0) {
		printf("skipped: no %s, or not root\n", VIRTIOFSD);
		return SKIP;
	}
	if (!mkdtemp(dir))
		return 1;
	snprintf(share, sizeof(share), "%s/share", dir);
	snprintf(sock, sizeof(sock), "%s/sock", dir);
	mkdir(share, 0755);
	vhost_user_init(&vu, -1, 5000);
	pid_t pid = start_virtiofsd(share, sock);
	int rc = guest_mem_create(&m, 64 << 20, true, &e) ||
		 vhost_user_connect_path(&vu, sock, 5000, &e) || run(&vu, &m, &e);
	vhost_user_close(&vu);
	/* The backend exits when its frontend goes away. */
	int st = 0;
	for (int i = 0; i < 100 && waitpid(pid, &st, WNOHANG) == 0; i++)
		usleep(50000);
	if (waitpid(pid, &st, WNOHANG) == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		fprintf(stderr, "virtiofsd did not exit on EOF\n");
		rc = 1;
	}
	guest_mem_destroy(&m);
	unlink(sock);
	rmdir(share);
	rmdir(dir);
	if (rc)
		fprintf(stderr, "FAIL: %s\n", e.msg);
	else
		printf("OK: virtiofsd took the set-up and stopped its rings\n");
	return rc ? 1 : 0;
}
