/*
 * kvmrun_shim: an LD_PRELOAD library that measures a KVM process's
 * footprint the same way for every VMM (ours, QEMU, kvm_floor): at the
 * process's first ioctl(KVM_RUN) it takes the time since exec (stamped by
 * exec_stamp, which exec()s the VMM with this library preloaded) and the
 * resident set from /proc/self/smaps without the mappings that back guest
 * memory (every range the process handed to KVM_SET_USER_MEMORY_REGION),
 * and appends one JSON line to $KVMRUN_SHIM_OUT:
 *
 *   {"exec_to_first_run_us": U, "rss_kib": R, "rss_total_kib": T,
 *    "guest_kib": G, "slots": S, "comm": "NAME"}
 *
 * rss_kib = T - G: the VMM's own memory (code, libraries, heap, stacks,
 * device state), G the resident part of the mappings behind memory slots
 * (guest RAM, and for QEMU also its firmware ROMs, which are guest memory
 * too). Nothing else is changed: the ioctls go through as they came.
 *
 * Environment: KVMRUN_SHIM_OUT (required, else the shim is inert),
 * KVMRUN_SHIM_EXEC_NS (CLOCK_MONOTONIC at exec, from exec_stamp; without
 * it exec_to_first_run_us is -1).
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_SLOTS 256

static int (*real_ioctl)(int, unsigned long, ...);
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	uint64_t start, end;
} ranges[MAX_SLOTS];
static unsigned nranges;
static atomic_int first_run_seen;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void note_region(uint64_t addr, uint64_t size)
{
	if (!size)
		return; /* a slot being deleted */
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < nranges; i++)
		if (ranges[i].start == addr && ranges[i].end == addr + size)
			goto out;
	if (nranges < MAX_SLOTS) {
		ranges[nranges].start = addr;
		ranges[nranges].end = addr + size;
		nranges++;
	}
out:
	pthread_mutex_unlock(&lock);
}

static bool overlaps_guest(uint64_t lo, uint64_t hi)
{
	for (unsigned i = 0; i < nranges; i++)
		if (lo < ranges[i].end && ranges[i].start < hi)
			return true;
	return false;
}

/* Opened when the library loads, before the VMM runs: a VMM under a
 * seccomp filter may not open files by the time of its first KVM_RUN. */
static int smaps_fd = -1, comm_fd = -1, out_fd = -1;

__attribute__((constructor)) static void shim_open(void)
{
	const char *out = getenv("KVMRUN_SHIM_OUT");
	if (!out)
		return;
	smaps_fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
	comm_fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
	out_fd = open(out, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

/* All of an open /proc file, from its start, NUL-terminated (malloc). */
static char *read_whole(int fd)
{
	size_t cap = 65536, len = 0;
	char *buf = malloc(cap);
	ssize_t n;
	if (!buf || fd < 0 || lseek(fd, 0, SEEK_SET) < 0) {
		free(buf);
		return NULL;
	}
	while ((n = read(fd, buf + len, cap - len - 1)) > 0) {
		len += (size_t)n;
		if (len + 1 == cap) {
			char *more = realloc(buf, cap *= 2);
			if (!more)
				break;
			buf = more;
		}
	}
	buf[len] = 0;
	return buf;
}

static void report(uint64_t t_run)
{
	const char *exec_ns = getenv("KVMRUN_SHIM_EXEC_NS");
	char comm[64] = "?", buf[512];
	unsigned long total = 0, guest = 0;
	bool in_guest = false;
	double us = -1;

	if (exec_ns && *exec_ns)
		us = ((double)t_run - (double)strtoull(exec_ns, NULL, 10)) / 1000.0;
	char *smaps = read_whole(smaps_fd), *save = NULL;
	pthread_mutex_lock(&lock);
	for (char *line = smaps ? strtok_r(smaps, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		unsigned long lo, hi, kib;
		char *dash = strchr(line, '-'), *space = strchr(line, ' ');
		if (dash && space && dash < space && sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
			in_guest = overlaps_guest(lo, hi);
			continue;
		}
		if (sscanf(line, "Rss: %lu kB", &kib) == 1) {
			total += kib;
			if (in_guest)
				guest += kib;
		}
	}
	pthread_mutex_unlock(&lock);
	free(smaps);
	char *c = read_whole(comm_fd);
	if (c) {
		snprintf(comm, sizeof(comm), "%s", c);
		comm[strcspn(comm, "\n\"\\")] = 0;
		free(c);
	}
	int n = snprintf(buf, sizeof(buf),
			 "{\"exec_to_first_run_us\": %.1f, \"rss_kib\": %lu, \"rss_total_kib\": "
			 "%lu, \"guest_kib\": %lu, \"slots\": %u, \"comm\": \"%s\"}\n",
			 us, total - guest, total, guest, nranges, comm);
	if (out_fd >= 0 && write(out_fd, buf, (size_t)n) != n)
		perror("kvmrun_shim: write");
}

int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);

	if (!real_ioctl)
		real_ioctl = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
	if (getenv("KVMRUN_SHIM_OUT")) {
		if (req == KVM_SET_USER_MEMORY_REGION && arg) {
			const struct kvm_userspace_memory_region *r = arg;
			note_region(r->userspace_addr, r->memory_size);
		}
#ifdef KVM_SET_USER_MEMORY_REGION2
		if (req == KVM_SET_USER_MEMORY_REGION2 && arg) {
			const struct kvm_userspace_memory_region2 *r = arg;
			note_region(r->userspace_addr, r->memory_size);
		}
#endif
		if (req == KVM_RUN && !atomic_exchange(&first_run_seen, 1))
			report(now_ns());
	}
	return real_ioctl(fd, req, arg);
}
