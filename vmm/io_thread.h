/*
 * I/O threads (--io-threads): each runs an epoll loop of its own over the
 * files of the virtqueues it owns (their notify ioeventfds, a virtio-blk
 * queue's io_uring completion eventfd, a virtio-net pair's tap file), so
 * a queue's notifications and its completions are served on one thread
 * and two queues on two threads never wait for each other. Queues are
 * given to the threads round robin when their device is made, and are
 * served by them from DRIVER_OK to the next reset (the transport's
 * per-queue `live`). Each thread runs under the I/O seccomp filter.
 */
#ifndef VMM_IO_THREAD_H
#define VMM_IO_THREAD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

struct err;
struct vm;

#define IO_THREAD_MAX_WATCHES 64
#define IO_THREAD_MAX_DRAINS  32

struct io_thread_watch {
	int fd;
	void (*call)(void *arg);
	void *arg;
};

struct io_thread_drain {
	void (*fn)(void *arg);
	void *arg;
};

struct io_thread {
	struct vm *vm;
	unsigned index; /* 1..N: "io1", ...; 0 is the main thread */
	pthread_t thread;
	bool started;
	int epoll_fd, stop_fd;
	struct io_thread_watch watches[IO_THREAD_MAX_WATCHES];
	unsigned nwatches;
	struct io_thread_drain drains[IO_THREAD_MAX_DRAINS];
	unsigned ndrains;
	atomic_uint_fast64_t wakeups, events; /* epoll_wait returns, fds served */
};

/* The epoll set and stop eventfd; no thread yet. 0 or -1 with an error. */
int io_thread_init(struct io_thread *t, struct vm *vm, unsigned index, struct err *e);
/* call(arg) on the thread whenever fd is readable (edge: EPOLLET, the
 * handler drains what it can). Before io_thread_start only. 0 or -errno. */
int io_thread_watch(struct io_thread *t, int fd, bool edge, void (*call)(void *arg), void *arg);
/* fn(arg) on the thread when it is told to stop, before it exits: a disk
 * queue waits there for its requests still in flight, so they end on the
 * thread that submitted them and nothing depends on what the kernel does
 * with a submitter's requests at its exit (it cancels them when the
 * process exits; at a thread's exit, on 6.18, it was seen to let plain
 * reads and writes finish). Before io_thread_start only. 0 or -errno. */
int io_thread_on_stop(struct io_thread *t, void (*fn)(void *arg), void *arg);
/* Starts the thread (it puts itself under the I/O filter unless
 * --seccomp off). 0 or -1 with an error. */
int io_thread_start(struct io_thread *t, struct err *e);
/* Tells a started thread to stop (it runs its on-stop hooks and exits),
 * without waiting for it. */
void io_thread_request_stop(struct io_thread *t);
/* Stops and joins a started thread. */
void io_thread_stop(struct io_thread *t);
/* Stops it if started, then closes its files. */
void io_thread_destroy(struct io_thread *t);

#endif
