/*
 * seccomp filters for the VMM's threads (libseccomp, compiled once to BPF
 * before any thread runs guest work). After set-up each thread kind runs
 * under its own allow-list: vCPU threads (KVM_RUN, the exit dispatcher and
 * what device code does on them) and the I/O threads: the main thread
 * (the event loop, virtio backends, interrupt delivery, teardown) and the
 * --io-threads that serve virtqueues.
 * A call outside the list stops the VMM at once with exit code 12 and one
 * line naming the call and the thread kind. --seccomp off turns it off
 * (for debugging with strace or gdb).
 */
#ifndef VMM_SECCOMP_H
#define VMM_SECCOMP_H

#include <linux/filter.h>
#include <stdbool.h>

struct err;

enum vmm_thread_kind { VMM_THREAD_VCPU, VMM_THREAD_IO, VMM_THREAD_KINDS };

struct vmm_seccomp {
	struct sock_fprog prog[VMM_THREAD_KINDS];
};

/* Compiles the allow-lists and installs the SIGSYS reporter; 0 or -1. */
int vmm_seccomp_prepare(struct vmm_seccomp *s, struct err *e);
/* Puts the calling thread under its kind's filter for good; 0 or -errno. */
int vmm_seccomp_apply(const struct vmm_seccomp *s, enum vmm_thread_kind kind);
void vmm_seccomp_free(struct vmm_seccomp *s);
/* The system calls a kind may make, by name, NULL-terminated (tests,
 * --help-like listings). */
const char *const *vmm_seccomp_allowed(enum vmm_thread_kind kind);

#endif
