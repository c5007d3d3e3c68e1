/*
 * The VMM's seccomp filters (vmm/host/seccomp.c), each in a child process that
 * puts itself under one thread kind's filter as the VMM's threads do: what
 * the list allows still works, opening a file is refused with EACCES, and
 * a call outside the list stops the process with exit code 12 and one line
 * that names the call and the thread kind.
 */
#include "helpers.h"

#include "devices/backends/disk_uring.h"
#include "devices/virtio/virtio_blk.h"
#include "vmm/base/err.h"
#include "vmm/host/exit_code.h"
#include "vmm/host/seccomp.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/if_tun.h>
#include <linux/kvm.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

enum probe {
	PROBE_ALLOWED,
	PROBE_SOCKET,
	PROBE_IOCTL_CREATE_VM,
	PROBE_EXECVE,
	PROBE_OPEN,
	PROBE_STAT_PATH,
	PROBE_TGKILL_OTHER,
	PROBE_TERMINAL_IOCTL_OTHER_FD,
	PROBE_MANY_ARENAS,
	PROBE_URING_OPENAT,
};

/* Twelve threads allocating at once: glibc 2.36 asks sched_getaffinity
 * when it makes the 9th malloc arena. Returns 0 when all allocated. */
#define ARENA_THREADS 12
static pthread_barrier_t arena_barrier;

static void *arena_thread(void *arg)
{
	const struct vmm_seccomp *s = arg;
	if (vmm_seccomp_apply(s, VMM_THREAD_VCPU))
		return (void *)1;
	pthread_barrier_wait(&arena_barrier); /* all alive: one arena each */
	void *p = malloc(4096);
	pthread_barrier_wait(&arena_barrier);
	free(p);
	return p ? NULL : (void *)1;
}

static int many_arenas(const struct vmm_seccomp *s)
{
	pthread_t t[ARENA_THREADS];
	pthread_barrier_init(&arena_barrier, NULL, ARENA_THREADS);
	for (int i = 0; i < ARENA_THREADS; i++)
		if (pthread_create(&t[i], NULL, arena_thread, (void *)s))
			return 1;
	int bad = 0;
	for (int i = 0; i < ARENA_THREADS; i++) {
		void *r;
		pthread_join(t[i], &r);
		bad |= r != NULL;
	}
	return bad;
}

/* A disk's ring under the filter: the ring accepts the operations the
 * disk uses and refuses IORING_OP_OPENAT (it opened any file before the
 * ring was restricted). Returns 0 when refused. */
static struct virtio_blk uring_disk;

static int uring_openat(void)
{
	struct io_uring *ring = disk_uring_ring(uring_disk.queues[0].dq);
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	struct io_uring_cqe *cqe;
	io_uring_prep_openat(sqe, AT_FDCWD, "/etc/hostname", O_RDONLY, 0);
	if (io_uring_submit(ring) < 0 || io_uring_wait_cqe(ring, &cqe) < 0)
		return 2;
	int res = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	sqe = io_uring_get_sqe(ring); /* and what the disk does still works */
	io_uring_prep_nop(sqe);
	if (io_uring_submit(ring) < 0 || io_uring_wait_cqe(ring, &cqe) < 0 || cqe->res != 0)
		return 3;
	return res == -EACCES ? 0 : 1;
}

/* Runs `probe` in a child under `kind`'s filter; returns its wait status
 * and what it wrote to stderr. The child exits 0 when the probe returned. */
static int run_filtered(enum vmm_thread_kind kind, enum probe probe, char *err, size_t cap)
{
	int pipefd[2];
	ck_assert_int_eq(pipe(pipefd), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct vmm_seccomp s;
		struct err e = {0};
		dup2(pipefd[1], STDERR_FILENO);
		if (probe == PROBE_URING_OPENAT) {
			char path[] = "/tmp/vmm-seccomp-disk-XXXXXX";
			int fd = mkstemp(path);
			if (fd < 0 || ftruncate(fd, 1 << 20) < 0 ||
			    virtio_blk_init(&uring_disk, disk_uring_open(path, false, false, &e), 1,
					    &e))
				_exit(95);
			unlink(path);
			close(fd);
		}
		if (vmm_seccomp_prepare(&s, &e))
			_exit(99);
		if (probe == PROBE_MANY_ARENAS)
			_exit(many_arenas(&s) ? 94 : 0);
		if (vmm_seccomp_apply(&s, kind))
			_exit(99);
		struct stat st;
		char buf[8];
		int efd;
		switch (probe) {
		case PROBE_ALLOWED: /* what a VMM thread does all day */
			efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
			if (efd < 0 || write(efd, "\1\0\0\0\0\0\0\0", 8) != 8 ||
			    read(efd, buf, 8) != 8)
				_exit(98);
			free(malloc(1 << 20));
			close(efd);
			/* A multiqueue tap's queues are attached and detached on
			 * either kind (net control queue, device reset). */
			if (ioctl(-1, TUNSETQUEUE, NULL) != -1 || errno != EBADF)
				_exit(96);
			_exit(0);
		case PROBE_OPEN: /* refused, not fatal: malloc may try it */
			_exit(open("/etc/hostname", O_RDONLY) < 0 && errno == EACCES ? 0 : 97);
		case PROBE_STAT_PATH: /* fstat works; a path is refused, not fatal */
			if (fstat(STDERR_FILENO, &st) < 0)
				_exit(93);
			_exit(stat("/etc/hostname", &st) < 0 && errno == EACCES ? 0 : 92);
		case PROBE_URING_OPENAT: _exit(uring_openat());
		case PROBE_MANY_ARENAS: break;
		case PROBE_TGKILL_OTHER: syscall(SYS_tgkill, 1, 1, 0); break;
		case PROBE_TERMINAL_IOCTL_OTHER_FD: ioctl(STDERR_FILENO, TCGETS, &st); break;
		case PROBE_SOCKET: socket(AF_INET, SOCK_STREAM, 0); break;
		case PROBE_IOCTL_CREATE_VM: ioctl(-1, KVM_CREATE_VM, 0); break;
		case PROBE_EXECVE: execl("/bin/true", "true", (char *)NULL); break;
		}
		_exit(0); /* the forbidden call returned: the filter failed */
	}
	close(pipefd[1]);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ssize_t n = read(pipefd[0], err, cap - 1);
	err[n > 0 ? n : 0] = 0;
	close(pipefd[0]);
	return status;
}

START_TEST(test_allowed_calls_work_under_each_filter)
{
	char err[512];
	for (int k = 0; k < VMM_THREAD_KINDS; k++) {
		int st = run_filtered((enum vmm_thread_kind)k, PROBE_ALLOWED, err, sizeof(err));
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "kind %d: status %#x: %s", k,
			      st, err);
		st = run_filtered((enum vmm_thread_kind)k, PROBE_OPEN, err, sizeof(err));
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "kind %d: open: %#x", k, st);
		st = run_filtered((enum vmm_thread_kind)k, PROBE_STAT_PATH, err, sizeof(err));
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "kind %d: stat: %#x %s", k, st,
			      err);
	}
}
END_TEST

/* More than 8 allocating threads under the filter (the 9th malloc arena
 * asks sched_getaffinity): every thread allocates, none is killed. */
START_TEST(test_nine_allocating_threads_live)
{
	char err[512];
	int st = run_filtered(VMM_THREAD_VCPU, PROBE_MANY_ARENAS, err, sizeof(err));
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, err);
}
END_TEST

/* A disk's io_uring carries its own operations only: IORING_OP_OPENAT,
 * which would open what seccomp refuses, completes with -EACCES. */
START_TEST(test_disk_ring_refuses_openat)
{
	char err[512];
	for (int k = 0; k < VMM_THREAD_KINDS; k++) {
		int st =
		    run_filtered((enum vmm_thread_kind)k, PROBE_URING_OPENAT, err, sizeof(err));
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			      "kind %d: status %#x (exit 1: the ring opened the file): %s", k, st,
			      err);
	}
}
END_TEST

START_TEST(test_forbidden_call_stops_with_12_and_names_it)
{
	static const struct {
		enum vmm_thread_kind kind;
		enum probe probe;
		const char *thread, *call;
	} cases[] = {
	    {VMM_THREAD_VCPU, PROBE_SOCKET, "vCPU thread", "socket"},
	    {VMM_THREAD_IO, PROBE_SOCKET, "I/O thread", "socket"},
	    {VMM_THREAD_VCPU, PROBE_EXECVE, "vCPU thread", "execve"},
	    {VMM_THREAD_IO, PROBE_EXECVE, "I/O thread", "execve"},
	    /* ioctl is allowed for its listed requests only. */
	    {VMM_THREAD_VCPU, PROBE_IOCTL_CREATE_VM, "vCPU thread", "ioctl"},
	    {VMM_THREAD_IO, PROBE_IOCTL_CREATE_VM, "I/O thread", "ioctl"},
	    /* The terminal's requests on standard input only. */
	    {VMM_THREAD_IO, PROBE_TERMINAL_IOCTL_OTHER_FD, "I/O thread", "ioctl"},
	    /* Signals to this process's threads only. */
	    {VMM_THREAD_IO, PROBE_TGKILL_OTHER, "I/O thread", "tgkill"},
	    {VMM_THREAD_VCPU, PROBE_TGKILL_OTHER, "vCPU thread", "tgkill"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[512], want[128];
		int st = run_filtered(cases[i].kind, cases[i].probe, err, sizeof(err));
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == EXIT_SECCOMP,
			      "%s %s: status %#x, expected exit %d", cases[i].thread, cases[i].call,
			      st, EXIT_SECCOMP);
		snprintf(want, sizeof(want),
			 "the %s made a system call its seccomp filter forbids: %s",
			 cases[i].thread, cases[i].call);
		ck_assert_msg(strstr(err, want), "stderr '%s' lacks '%s'", err, want);
	}
}
END_TEST

static Suite *seccomp_suite(void)
{
	Suite *s = suite_create("seccomp");
	TCase *t = tcase_create("filters");
	tcase_add_test(t, test_allowed_calls_work_under_each_filter);
	tcase_add_test(t, test_forbidden_call_stops_with_12_and_names_it);
	tcase_add_test(t, test_nine_allocating_threads_live);
	tcase_add_test(t, test_disk_ring_refuses_openat);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(seccomp_suite());
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
