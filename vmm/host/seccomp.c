#include "vmm/host/seccomp.h"

#include "vmm/base/err.h"
#include "vmm/host/exit_code.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <linux/kvm.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

/* What every thread does after set-up: I/O on its descriptors, memory for
 * malloc (never executable), locks, signals of its own, eventfds and
 * timers the interrupt door and devices use, io_uring, its own exit, and
 * a vhost-user device's messages to its backend on the socket set up
 * before the filters (sendmsg/recvmsg with descriptors, each wait bounded
 * by poll), from whichever thread the driver's status write runs on. */
static const char *const common_calls[] = {
    "read",
    "write",
    "readv",
    "writev",
    "pread64",
    "lseek",
    "close",
    "futex",
    "madvise",
    "munmap",
    "brk",
    "mremap",
    "rt_sigprocmask",
    "rt_sigreturn",
    "sched_yield",
    "exit",
    "exit_group",
    "gettid",
    "getpid",
    "clock_gettime",
    "fstat",
    "eventfd2",
    "timerfd_settime",
    "io_uring_enter",
    "restart_syscall",
    "sendmsg",
    "recvmsg",
    "poll",
    "ppoll",
    NULL,
};

/* vCPU threads: take a pending kick before KVM_RUN; turn a loop's watch of
 * a call fd on or off (an MSI-X mask write moves a backend's call fd
 * between KVM and the loop, devices/virtio/virtio_pci_call.h). */
static const char *const vcpu_calls[] = {"rt_sigtimedwait", "epoll_ctl", NULL};

/* The main thread and the I/O threads: the event loops, the rng's
 * entropy, kicking vCPUs, stopping a device's helper process (virtiofsd)
 * through the pidfd the VMM holds. */
static const char *const io_calls[] = {"epoll_wait", "epoll_pwait",	  "epoll_ctl",
				       "getrandom",  "pidfd_send_signal", NULL};

/* ioctl requests, per kind. The door's (lines, MSIs, routes, irqfds),
 * ioeventfds (a BAR moved) and a multiqueue tap's queue attach/detach
 * (virtio-net's control queue, a device reset) run on both: device code
 * runs on both. */
#define DOOR_IOCTLS                                                                                \
	KVM_IRQ_LINE, KVM_SIGNAL_MSI, KVM_SET_GSI_ROUTING, KVM_IRQFD, KVM_IOEVENTFD, TUNSETQUEUE
static const unsigned long vcpu_ioctls[] = {
    DOOR_IOCTLS,   KVM_RUN,	  KVM_GET_REGS,	       KVM_SET_REGS,
    KVM_GET_SREGS, KVM_SET_SREGS, KVM_GET_VCPU_EVENTS, KVM_SET_VCPU_EVENTS,
    KVM_GET_FPU,   KVM_SET_FPU,	  KVM_GET_MP_STATE,    0,
};
/* The main thread reads vCPU state for the --timeout report, and restores
 * the terminal. */
static const unsigned long io_ioctls[] = {
    DOOR_IOCTLS,      KVM_GET_REGS,
    KVM_GET_SREGS,    KVM_GET_VCPU_EVENTS,
    KVM_GET_MP_STATE, TCGETS,
    TCSETS,	      TCSETSW,
    TCSETSF,	      0,
};

/* A sanitizer build's runtime makes calls of its own (alternate signal
 * stacks at thread exit, limits, its report): allowed there, so the
 * sanitizer suite runs with the filters on too. */
static const char *const sanitizer_calls[] = {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    "sigaltstack", "prlimit64", "getrlimit",	   "readlink", "readlinkat", "mincore",
    "prctl",	   "nanosleep", "clock_nanosleep", "getppid",  "uname",
#endif
    NULL,
};

static const char *const *const kind_calls[VMM_THREAD_KINDS] = {vcpu_calls, io_calls};
static const unsigned long *const kind_ioctls[VMM_THREAD_KINDS] = {vcpu_ioctls, io_ioctls};
static const char *const kind_names[VMM_THREAD_KINDS] = {"vCPU", "I/O"};

/* For the report: names resolved before any filter, as the handler may not
 * allocate. */
#define NAMED_CALLS 512
static char *call_names[NAMED_CALLS];
static __thread int thread_kind = -1;

static size_t append(char *buf, size_t at, size_t cap, const char *s)
{
	while (*s && at + 1 < cap)
		buf[at++] = *s++;
	return at;
}

static size_t append_num(char *buf, size_t at, size_t cap, long v)
{
	char digits[24];
	int n = 0;
	do
		digits[n++] = (char)('0' + v % 10);
	while ((v /= 10) > 0 && n < 23);
	while (n > 0 && at + 1 < cap)
		buf[at++] = digits[--n];
	return at;
}

/* SIGSYS from a filter (SECCOMP_RET_TRAP): one line, then exit code 12.
 * Only async-signal-safe calls here. */
static void vmm_seccomp_report(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	char buf[256];
	size_t n = 0;
	int nr = si->si_syscall;
	n = append(buf, n, sizeof(buf), "\nvmm: error: the ");
	n = append(buf, n, sizeof(buf), thread_kind >= 0 ? kind_names[thread_kind] : "VMM's");
	n = append(buf, n, sizeof(buf), " thread made a system call its seccomp filter forbids: ");
	n = append(buf, n, sizeof(buf),
		   nr >= 0 && nr < NAMED_CALLS && call_names[nr] ? call_names[nr] : "?");
	n = append(buf, n, sizeof(buf), " (");
	n = append_num(buf, n, sizeof(buf), nr);
	n = append(buf, n, sizeof(buf),
		   "); a VMM bug, or an attack: the VM stops (exit code 12)\n");
	if (write(STDERR_FILENO, buf, n) < 0) {
		/* nothing more to do */
	}
	_exit(EXIT_SECCOMP);
}

static int add_call(scmp_filter_ctx ctx, const char *name)
{
	int nr = seccomp_syscall_resolve_name(name);
	if (nr == __NR_SCMP_ERROR)
		return -EINVAL;
	/* Memory may be mapped or protected, never executable. */
	if (!strcmp(name, "mmap") || !strcmp(name, "mprotect"))
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
					SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
}

/* The terminal's requests only on standard input (the console restores
 * its mode there); the rest on any descriptor (seccomp cannot tell a KVM
 * descriptor from another; KVM's request numbers are its own, 0xAE). */
static int add_ioctl(scmp_filter_ctx ctx, unsigned long req)
{
	if (req == TCGETS || req == TCSETS || req == TCSETSW || req == TCSETSF)
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 2,
					SCMP_A0(SCMP_CMP_EQ, STDIN_FILENO),
					SCMP_A1(SCMP_CMP_EQ, req));
	return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_EQ, req));
}

/*
 * Calls allowed with some arguments only:
 * - tgkill (kicking a vCPU, raise()) to this process's threads only;
 * - sched_getaffinity of this process only: glibc's malloc asks when it
 *   makes its 9th arena (a 9th allocating thread: vCPUs allocate on MSI
 *   route commits), and the call was killed there;
 * - newfstatat only as fstat (AT_EMPTY_PATH, which glibc's fstat uses); by
 *   a path it is refused with EACCES. (seccomp cannot read the path: with
 *   AT_EMPTY_PATH and a non-empty path the kernel still looks it up, so
 *   this closes the common case, not every one: what it gives is a file's
 *   metadata, never its contents.)
 */
static int add_arg_rules(scmp_filter_ctx ctx, enum vmm_thread_kind kind)
{
	scmp_datum_t pid = (scmp_datum_t)getpid();
	int ret = 0;
	if (kind == VMM_THREAD_IO)
		ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1,
				       SCMP_A0(SCMP_CMP_EQ, pid));
	if (!ret)
		ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(sched_getaffinity), 1,
				       SCMP_A0(SCMP_CMP_EQ, 0));
	if (!ret)
		ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(sched_getaffinity), 1,
				       SCMP_A0(SCMP_CMP_EQ, pid));
	if (!ret)
		ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(newfstatat), 1,
				       SCMP_A3(SCMP_CMP_MASKED_EQ, AT_EMPTY_PATH, AT_EMPTY_PATH));
	if (!ret)
		ret = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(newfstatat), 1,
				       SCMP_A3(SCMP_CMP_MASKED_EQ, AT_EMPTY_PATH, 0));
	return ret;
}

static int build_kind(enum vmm_thread_kind kind, struct sock_fprog *out)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_TRAP);
	int ret = ctx ? 0 : -ENOMEM;
	for (const char *const *c = common_calls; !ret && *c; c++)
		ret = add_call(ctx, *c);
	for (const char *const *c = kind_calls[kind]; !ret && *c; c++)
		ret = add_call(ctx, *c);
	for (const char *const *c = sanitizer_calls; !ret && *c; c++)
		ret = add_call(ctx, *c);
	if (!ret)
		ret = add_call(ctx, "mmap");
	if (!ret)
		ret = add_call(ctx, "mprotect");
	/* Opening a file is refused, not fatal: glibc's malloc reads
	 * /proc/sys/vm/overcommit_memory the first time it trims a thread's
	 * heap, and copes when it cannot. No thread opens anything on purpose
	 * after set-up. */
	if (!ret)
		ret = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(openat), 0);
	if (!ret)
		ret = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(open), 0);
	for (const unsigned long *r = kind_ioctls[kind]; !ret && *r; r++)
		ret = add_ioctl(ctx, *r);
	if (!ret)
		ret = add_arg_rules(ctx, kind);
	/* The BPF program, kept in memory for each thread to load. */
	int fd = ret ? -1 : memfd_create("vmm-seccomp", MFD_CLOEXEC);
	if (!ret && fd < 0)
		ret = -errno;
	if (!ret)
		ret = seccomp_export_bpf(ctx, fd);
	off_t len = ret ? 0 : lseek(fd, 0, SEEK_END);
	if (!ret && (len <= 0 || len % sizeof(struct sock_filter)))
		ret = -EINVAL;
	if (!ret) {
		out->filter = malloc((size_t)len);
		out->len = (unsigned short)(len / sizeof(struct sock_filter));
		if (!out->filter || pread(fd, out->filter, (size_t)len, 0) != len)
			ret = -EIO;
	}
	if (fd >= 0)
		close(fd);
	if (ctx)
		seccomp_release(ctx);
	return ret;
}

int vmm_seccomp_prepare(struct vmm_seccomp *s, struct err *e)
{
	memset(s, 0, sizeof(*s));
	for (int k = 0; k < VMM_THREAD_KINDS; k++) {
		int ret = build_kind((enum vmm_thread_kind)k, &s->prog[k]);
		if (ret)
			return err_set(e, ERR_HOST,
				       "seccomp: cannot build the %s thread's filter: %s",
				       kind_names[k], strerror(-ret));
	}
	for (int nr = 0; nr < NAMED_CALLS; nr++)
		if (!call_names[nr])
			call_names[nr] = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = vmm_seccomp_report;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSYS, &sa, NULL) < 0)
		return err_set(e, ERR_HOST, "seccomp: cannot install the SIGSYS reporter: %s",
			       strerror(errno));
	return 0;
}

int vmm_seccomp_apply(const struct vmm_seccomp *s, enum vmm_thread_kind kind)
{
	/* No new privileges: what an unprivileged filter needs, and right for a
	 * VMM anyway. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	thread_kind = (int)kind;
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &s->prog[kind]) < 0) {
		thread_kind = -1;
		return -errno;
	}
	return 0;
}

void vmm_seccomp_free(struct vmm_seccomp *s)
{
	for (int k = 0; k < VMM_THREAD_KINDS; k++)
		free(s->prog[k].filter);
	memset(s, 0, sizeof(*s));
}

const char *const *vmm_seccomp_allowed(enum vmm_thread_kind kind)
{
	static const char *lists[VMM_THREAD_KINDS][64];
	const char **l = lists[kind];
	if (!l[0]) {
		unsigned n = 0;
		for (const char *const *c = common_calls; *c; c++)
			l[n++] = *c;
		for (const char *const *c = kind_calls[kind]; *c; c++)
			l[n++] = *c;
		l[n++] = "mmap (not PROT_EXEC)";
		l[n++] = "mprotect (not PROT_EXEC)";
		l[n++] = "ioctl (listed requests; the terminal's on stdin only)";
		if (kind == VMM_THREAD_IO)
			l[n++] = "tgkill (this process only)";
		l[n++] = "sched_getaffinity (this process only)";
		l[n++] = "newfstatat (AT_EMPTY_PATH only; by path refused with EACCES)";
		l[n++] = "open, openat (refused with EACCES, not fatal)";
		l[n] = NULL;
	}
	return l;
}
