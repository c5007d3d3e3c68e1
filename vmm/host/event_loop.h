/*
 * One event loop type, run by the main thread and by every I/O thread
 * (kvmtool's struct kvm__epoll, Cloud Hypervisor's EpollHelper): file
 * watches on an epoll set, a stop eventfd, hooks run once the loop has
 * stopped (a disk queue waits there for its requests in flight), hooks run
 * at the end of every pass, and deferred work: a queue that used up its
 * budget for one pass (devices/virtio/virtio.h) asks to be served again at the end
 * of the pass, after every other ready file, and the loop does not sleep
 * while any is deferred. So one busy queue never starves the loop, and a
 * signal or --timeout acts within one pass.
 */
#ifndef VMM_EVENT_LOOP_H
#define VMM_EVENT_LOOP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct err;

#define EVENT_LOOP_MAX_WATCHES	64
#define EVENT_LOOP_MAX_HOOKS	32
#define EVENT_LOOP_MAX_DEFERRED 64

struct event_watch {
	int fd;
	void (*ready)(void *arg);
	void *arg;
	bool active;
};

struct event_hook {
	void (*fn)(void *arg);
	void *arg;
};

struct event_loop {
	char name[16]; /* "main", "io1", ... */
	int epoll_fd, stop_fd;
	struct event_watch watches[EVENT_LOOP_MAX_WATCHES];
	unsigned nwatches;
	struct event_hook on_stop[EVENT_LOOP_MAX_HOOKS];
	unsigned non_stop;
	struct event_hook pass_end[EVENT_LOOP_MAX_HOOKS];
	unsigned npass_end;
	struct event_hook deferred[EVENT_LOOP_MAX_DEFERRED]; /* run at this pass's end */
	unsigned ndeferred;
	atomic_bool stop_requested;
	atomic_uint_fast64_t wakeups, events; /* epoll_wait returns, fds served */
};

/* The epoll set and the stop eventfd. 0 or -1 with an error. */
int event_loop_init(struct event_loop *l, const char *name, struct err *e);
/* ready(arg) on the loop's thread whenever fd is readable (edge: EPOLLET,
 * the handler drains what it can). 0 or -errno. */
int event_loop_watch(struct event_loop *l, int fd, bool edge, void (*ready)(void *arg), void *arg);
/* Any thread: stop (on = false) or resume ready() calls for a watched fd,
 * which keeps its watch (EPOLL_CTL_MOD to no events: epoll then does not
 * even wake the loop; a wake-up already under way may still call ready).
 * 0 or -errno. */
int event_loop_watch_set(struct event_loop *l, int fd, bool on);
/* Stops watching fd (the console's end of input). 0 or -errno. */
int event_loop_unwatch(struct event_loop *l, int fd);
/* fn(arg) on the loop's thread once it has stopped (event_loop_finish).
 * 0 or -ENOSPC. */
int event_loop_on_stop(struct event_loop *l, void (*fn)(void *arg), void *arg);
/* fn(arg) after every pass over the ready files. 0 or -ENOSPC. */
int event_loop_on_pass_end(struct event_loop *l, void (*fn)(void *arg), void *arg);
/* fn(arg) once, at the end of the current pass, on the loop's thread (the
 * only thread that may call this); the same (fn, arg) twice runs once.
 * 0 or -ENOSPC. */
int event_loop_defer(struct event_loop *l, void (*fn)(void *arg), void *arg);
/* Serves the watches until event_loop_request_stop; -1 with an error when
 * epoll_wait fails (the loop has stopped then too). */
int event_loop_run(struct event_loop *l, struct err *e);
/* Any thread, and signal-safe: the loop returns after its current pass. */
void event_loop_request_stop(struct event_loop *l);
bool event_loop_stopping(const struct event_loop *l);
/* Runs the on-stop hooks, in the order added; the owner calls it on the
 * loop's thread once nothing feeds the loop any more (the main thread after
 * the vCPUs are joined, an I/O thread when its loop returns). */
void event_loop_finish(struct event_loop *l);
void event_loop_destroy(struct event_loop *l);

#endif
