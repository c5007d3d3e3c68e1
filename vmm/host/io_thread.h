/*
 * I/O threads (--io-threads): each runs an event loop of its own
 * (vmm/host/event_loop.h) over the files of the virtqueues it owns (their notify
 * ioeventfds, a virtio-blk queue's io_uring completion eventfd, a virtio-net
 * pair's tap file), so a queue's notifications and its completions are
 * served on one thread and two queues on two threads never wait for each
 * other. Queues are given to the threads round robin when their device is
 * made, and are served by them from DRIVER_OK to the next reset (the
 * transport's per-queue `live`). Each thread runs under the I/O seccomp
 * filter; it knows the machine only through `struct io_thread_env`.
 */
#ifndef VMM_IO_THREAD_H
#define VMM_IO_THREAD_H

#include "vmm/base/machine_ctl.h"
#include "vmm/host/event_loop.h"

#include <pthread.h>
#include <stdbool.h>

struct err;
struct log;
struct vmm_seccomp;

/* What an I/O thread needs of the machine. */
struct io_thread_env {
	struct log *log;
	const struct vmm_seccomp *seccomp; /* NULL: --seccomp off */
	struct machine_ctl ctl;		   /* to stop the machine when it fails */
};

struct io_thread {
	struct event_loop loop;
	struct io_thread_env env;
	unsigned index; /* 1..N: "io1", ... */
	pthread_t thread;
	bool started;
};

/* The loop and its files; no thread yet. 0 or -1 with an error. */
int io_thread_init(struct io_thread *t, const struct io_thread_env *env, unsigned index,
		   struct err *e);
/* Starts the thread: it puts itself under the I/O filter, runs its loop
 * until told to stop, then the loop's on-stop hooks (a disk queue waits
 * there for its requests in flight, so they end on the thread that
 * submitted them), and exits. 0 or -1 with an error. */
int io_thread_start(struct io_thread *t, struct err *e);
/* Tells a started thread to stop, without waiting for it. */
void io_thread_request_stop(struct io_thread *t);
/* Stops it if started, joins it, then closes its files. */
void io_thread_destroy(struct io_thread *t);

#endif
