/*
 * The VMM's seccomp filters (vmm/seccomp.c), each in a child process that
 * puts itself under one thread kind's filter as the VMM's threads do: what
 * the list allows still works, opening a file is refused with EACCES, and
 * a call outside the list stops the process with exit code 12 and one line
 * that names the call and the thread kind.
 */
#include "helpers.h"

#include "vmm/base/err.h"
#include "vmm/exit_code.h"
#include "vmm/seccomp.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <linux/kvm.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

enum probe { PROBE_ALLOWED, PROBE_SOCKET, PROBE_IOCTL_CREATE_VM, PROBE_EXECVE, PROBE_OPEN };

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
		if (vmm_seccomp_prepare(&s, &e) || vmm_seccomp_apply(&s, kind))
			_exit(99);
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
