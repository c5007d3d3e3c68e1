#include "vmm/host/event_loop.h"

#include "vmm/base/err.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define EVENTS_PER_PASS 16

int event_loop_init(struct event_loop *l, const char *name, struct err *e)
{
	memset(l, 0, sizeof(*l));
	snprintf(l->name, sizeof(l->name), "%s", name);
	l->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	l->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->epoll_fd < 0 || l->stop_fd < 0)
		return err_set(e, ERR_HOST, "event loop %s: %s", name, strerror(errno));
	/* The stop eventfd is the one event with no watch. */
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	if (epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, l->stop_fd, &ev) < 0)
		return err_set(e, ERR_HOST, "event loop %s: %s", name, strerror(errno));
	return 0;
}

int event_loop_watch(struct event_loop *l, int fd, bool edge, void (*ready)(void *arg), void *arg)
{
	if (l->nwatches == EVENT_LOOP_MAX_WATCHES)
		return -ENOSPC;
	struct event_watch *w = &l->watches[l->nwatches];
	*w = (struct event_watch){fd, ready, arg, true};
	struct epoll_event ev = {.events = EPOLLIN | (edge ? EPOLLET : 0), .data.ptr = w};
	if (epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	l->nwatches++;
	return 0;
}

int event_loop_watch_set(struct event_loop *l, int fd, bool on)
{
	/* The watches are added before the threads run and never move, so
	 * another thread may look them up. */
	for (unsigned i = 0; i < l->nwatches; i++) {
		struct event_watch *w = &l->watches[i];
		if (w->fd != fd || !w->active)
			continue;
		struct epoll_event ev = {.events = on ? EPOLLIN : 0, .data.ptr = w};
		return epoll_ctl(l->epoll_fd, EPOLL_CTL_MOD, fd, &ev) < 0 ? -errno : 0;
	}
	return -ENOENT;
}

int event_loop_unwatch(struct event_loop *l, int fd)
{
	for (unsigned i = 0; i < l->nwatches; i++)
		if (l->watches[i].active && l->watches[i].fd == fd) {
			l->watches[i].active = false;
			return epoll_ctl(l->epoll_fd, EPOLL_CTL_DEL, fd, NULL) < 0 ? -errno : 0;
		}
	return -ENOENT;
}

static int hook_add(struct event_hook *hooks, unsigned *n, unsigned cap, void (*fn)(void *arg),
		    void *arg)
{
	if (*n == cap)
		return -ENOSPC;
	hooks[(*n)++] = (struct event_hook){fn, arg};
	return 0;
}

int event_loop_on_stop(struct event_loop *l, void (*fn)(void *arg), void *arg)
{
	return hook_add(l->on_stop, &l->non_stop, EVENT_LOOP_MAX_HOOKS, fn, arg);
}

int event_loop_on_pass_end(struct event_loop *l, void (*fn)(void *arg), void *arg)
{
	return hook_add(l->pass_end, &l->npass_end, EVENT_LOOP_MAX_HOOKS, fn, arg);
}

int event_loop_defer(struct event_loop *l, void (*fn)(void *arg), void *arg)
{
	for (unsigned i = 0; i < l->ndeferred; i++)
		if (l->deferred[i].fn == fn && l->deferred[i].arg == arg)
			return 0;
	return hook_add(l->deferred, &l->ndeferred, EVENT_LOOP_MAX_DEFERRED, fn, arg);
}

/* The work deferred during this pass; what it defers again runs next pass. */
static void deferred_run(struct event_loop *l)
{
	struct event_hook now[EVENT_LOOP_MAX_DEFERRED];
	unsigned n = l->ndeferred;
	memcpy(now, l->deferred, n * sizeof(now[0]));
	l->ndeferred = 0;
	for (unsigned i = 0; i < n && !atomic_load(&l->stop_requested); i++)
		now[i].fn(now[i].arg);
}

static void hooks_run(const struct event_hook *hooks, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		hooks[i].fn(hooks[i].arg);
}

int event_loop_run(struct event_loop *l, struct err *e)
{
	struct epoll_event evs[EVENTS_PER_PASS];
	while (!atomic_load(&l->stop_requested)) {
		/* Deferred work waiting: look at the files, do not sleep. */
		int n = epoll_wait(l->epoll_fd, evs, EVENTS_PER_PASS, l->ndeferred ? 0 : -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			atomic_store(&l->stop_requested, true);
			return err_set(e, ERR_HOST, "event loop %s: epoll_wait failed: %s", l->name,
				       strerror(errno));
		}
		atomic_fetch_add_explicit(&l->wakeups, 1, memory_order_relaxed);
		for (int i = 0; i < n && !atomic_load(&l->stop_requested); i++) {
			struct event_watch *w = evs[i].data.ptr;
			if (!w || !w->active)
				continue; /* the stop eventfd: the flag says it */
			atomic_fetch_add_explicit(&l->events, 1, memory_order_relaxed);
			w->ready(w->arg);
		}
		deferred_run(l);
		hooks_run(l->pass_end, l->npass_end);
	}
	return 0;
}

void event_loop_request_stop(struct event_loop *l)
{
	uint64_t one = 1;
	atomic_store(&l->stop_requested, true);
	if (l->stop_fd >= 0 && write(l->stop_fd, &one, sizeof(one)) < 0) {
		/* a nonblocking eventfd that cannot overflow: a write per stop */
	}
}

bool event_loop_stopping(const struct event_loop *l)
{
	return atomic_load(&l->stop_requested);
}

void event_loop_finish(struct event_loop *l)
{
	hooks_run(l->on_stop, l->non_stop);
}

void event_loop_destroy(struct event_loop *l)
{
	if (l->epoll_fd >= 0)
		close(l->epoll_fd);
	if (l->stop_fd >= 0)
		close(l->stop_fd);
	l->epoll_fd = l->stop_fd = -1;
}
