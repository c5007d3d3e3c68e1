#include "vmm/host/io_thread.h"

#include "vmm/base/err.h"
#include "vmm/base/log.h"
#include "vmm/host/seccomp.h"

#include <string.h>

int io_thread_init(struct io_thread *t, const struct io_thread_env *env, unsigned index,
		   struct err *e)
{
	char name[16];
	memset(t, 0, sizeof(*t));
	t->env = *env;
	t->index = index;
	snprintf(name, sizeof(name), "io%u", index);
	return event_loop_init(&t->loop, name, e);
}

static void *io_thread_main(void *arg)
{
	struct io_thread *t = arg;
	struct err e = {0};
	pthread_setname_np(pthread_self(), t->loop.name);
	if (t->env.seccomp) {
		int ret = vmm_seccomp_apply(t->env.seccomp, VMM_THREAD_IO);
		if (ret) {
			log_error(t->env.log,
				  "I/O thread %u: cannot install its seccomp filter: %s", t->index,
				  strerror(-ret));
			machine_request_stop(&t->env.ctl, MACHINE_STOP_HOST_FAILURE, 0,
					     "seccomp failed");
			return NULL;
		}
	}
	if (event_loop_run(&t->loop, &e)) {
		log_error(t->env.log, "I/O thread %u: %s", t->index, e.msg);
		machine_request_stop(&t->env.ctl, MACHINE_STOP_HOST_FAILURE, 0,
				     "I/O thread failure");
	}
	event_loop_finish(&t->loop);
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
	if (t->started)
		event_loop_request_stop(&t->loop);
}

void io_thread_destroy(struct io_thread *t)
{
	if (t->started) {
		event_loop_request_stop(&t->loop);
		pthread_join(t->thread, NULL);
		t->started = false;
	}
	event_loop_destroy(&t->loop);
}
