#include "io_thread.h"

#include "exit_code.h"
#include "vm.h"
#include "vmm/base/err.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

int io_thread_init(struct io_thread *t, struct vm *vm, unsigned index, struct err *e)
{
	memset(t, 0, sizeof(*t));
	t->vm = vm;
	t->index = index;
	t->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	t->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (t->epoll_fd < 0 || t->stop_fd < 0)
		return err_set(e, ERR_HOST, "I/O thread %u: %s", index, strerror(errno));
	/* The stop eventfd is the watch with a NULL call. */
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	if (epoll_ctl(t->epoll_fd, EPOLL_CTL_ADD, t->stop_fd, &ev) < 0)
		return err_set(e, ERR_HOST, "I/O thread %u: %s", index, strerror(errno));
	return 0;
}

int io_thread_watch(struct io_thread *t, int fd, bool edge, void (*call)(void *arg), void *arg)
{
	if (t->started)
		return -EBUSY;
	if (t->nwatches == IO_THREAD_MAX_WATCHES)
		return -ENOSPC;
	struct io_thread_watch *w = &t->watches[t->nwatches];
	*w = (struct io_thread_watch){fd, call, arg};
	struct epoll_event ev = {.events = EPOLLIN | (edge ? EPOLLET : 0), .data.ptr = w};
	if (epoll_ctl(t->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	t->nwatches++;
	return 0;
}

int io_thread_on_stop(struct io_thread *t, void (*fn)(void *arg), void *arg)
{
	if (t->started)
		return -EBUSY;
	if (t->ndrains == IO_THREAD_MAX_DRAINS)
		return -ENOSPC;
	t->drains[t->ndrains++] = (struct io_thread_drain){fn, arg};
	return 0;
}

static void io_thread_drain(struct io_thread *t)
{
	for (unsigned i = 0; i < t->ndrains; i++)
		t->drains[i].fn(t->drains[i].arg);
}

static void *io_thread_main(void *arg)
{
	struct io_thread *t = arg;
	char name[16];
	snprintf(name, sizeof(name), "io%u", t->index);
	pthread_setname_np(pthread_self(), name);
	if (!t->vm->opts->seccomp_off) {
		int ret = vmm_seccomp_apply(&t->vm->seccomp, VMM_THREAD_IO);
		if (ret) {
			log_error(&t->vm->log,
				  "I/O thread %u: cannot install its seccomp filter: %s", t->index,
				  strerror(-ret));
			vm_request_stop(t->vm, EXIT_HOST, "seccomp failed");
			return NULL;
		}
	}
	struct epoll_event evs[16];
	bool running = true;
	while (running) {
		int n = epoll_wait(t->epoll_fd, evs, 16, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			log_error(&t->vm->log, "I/O thread %u: epoll_wait failed: %s", t->index,
				  strerror(errno));
			vm_request_stop(t->vm, EXIT_HOST, "I/O thread failure");
			break;
		}
		atomic_fetch_add_explicit(&t->wakeups, 1, memory_order_relaxed);
		for (int i = 0; i < n && running; i++) {
			struct io_thread_watch *w = evs[i].data.ptr;
			running = w != NULL; /* the stop eventfd's watch has none */
			if (w) {
				atomic_fetch_add_explicit(&t->events, 1, memory_order_relaxed);
				w->call(w->arg);
			}
		}
	}
	io_thread_drain(t);
	return NULL;
}

int io_thread_start(struct io_thread *t, struct err *e)
{
	int ret = pthread_create(&t->thread, NULL, io_thread_main, t);
	if (ret)
		return err_set(e, ERR_HOST, "cannot start I/O thread %u: %s", t->index,
			       strerror(ret));
	t->started = true;
	return 0;
}

void io_thread_request_stop(struct io_thread *t)
{
	uint64_t one = 1;
	if (t->started && write(t->stop_fd, &one, sizeof(one)) < 0) {
		/* cannot overflow: a write or two per stop */
	}
}

void io_thread_stop(struct io_thread *t)
{
	if (!t->started)
		return;
	io_thread_request_stop(t);
	pthread_join(t->thread, NULL);
	t->started = false;
}

void io_thread_destroy(struct io_thread *t)
{
	io_thread_stop(t);
	if (t->epoll_fd >= 0)
		close(t->epoll_fd);
	if (t->stop_fd >= 0)
		close(t->stop_fd);
	t->epoll_fd = t->stop_fd = -1;
}
