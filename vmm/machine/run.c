/*
 * The running machine: the main thread's event loop (signals, --timeout,
 * the post-panic grace timer, console input, INTx resamples, and every
 * queue no I/O thread owns) and machine_run, which starts the I/O and
 * vCPU threads, serves the loop until a stop is asked, and hands over to
 * the stop path (vmm/machine/stop.c).
 */
#include "vmm/machine/machine.h"
#include "vmm/machine/stop.h"
#include "vmm/machine/vm.h"

#include "vmm/base/clock.h"
#include "vmm/base/err.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

static void vm_drain_fd(int fd)
{
	uint64_t count;
	if (read(fd, &count, sizeof(count)) < 0) {
		/* nonblocking: a timerfd that has not fired */
	}
}

static void vm_on_timeout(void *arg)
{
	struct vm *vm = arg;
	vm_drain_fd(vm->timeout_fd);
	vm_stop_timeout(vm);
}

/* "Kernel panic - not syncing" on the console: the trace may print for
 * VM_PANIC_GRACE_S, then the VM stops. */
static void vm_on_panic(void *ctx)
{
	struct vm *vm = ctx;
	struct itimerspec its = {.it_value = {VM_PANIC_GRACE_S, 0}};
	log_warn(&vm->log, "\"%s\" on the console: the VM ends with exit code %d",
		 CONSOLE_PANIC_TEXT, exit_code_for_stop(MACHINE_STOP_GUEST_PANIC, 0));
	if (vm->panic_fd >= 0)
		timerfd_settime(vm->panic_fd, 0, &its, NULL);
}

static void vm_on_panic_grace(void *arg)
{
	struct vm *vm = arg;
	vm_drain_fd(vm->panic_fd);
	vm_stop(vm, MACHINE_STOP_GUEST_PANIC, 0, "kernel panic seen on the console");
}

static void vm_on_signal(void *arg)
{
	struct vm *vm = arg;
	struct signalfd_siginfo si;
	if (read(vm->signal_fd, &si, sizeof(si)) == sizeof(si))
		vm_stop_interrupted(vm, si.ssi_signo == SIGINT	  ? "SIGINT"
					: si.ssi_signo == SIGTERM ? "SIGTERM"
								  : "SIGHUP");
}

static void vm_on_console(void *arg)
{
	struct vm *vm = arg;
	uint8_t buf[CONSOLE_INPUT_MAX];
	size_t n;
	enum console_input_result r = console_read_input(&vm->console, buf, sizeof(buf), &n);
	if (n) {
		size_t taken = vm->console_input.receive(vm->console_input.ctx, buf, n);
		if (taken < n)
			log_debug(&vm->log, "console: guest receive buffer full, %zu bytes dropped",
				  n - taken);
	}
	if (r == CONSOLE_INPUT_QUIT) {
		vm_stop_interrupted(vm, "Ctrl-A x on the console");
	} else if (r == CONSOLE_INPUT_EOF) {
		event_loop_unwatch(&vm->loop, vm->console.in_fd);
		vm->console.in_fd = -1; /* end of input; the guest keeps running */
	}
}

static void vm_on_resample(void *arg)
{
	struct vm_resample *r = arg;
	irq_intx_handle_resample(r->irq, r->pin);
}

/* --timeout as a one-shot timer (a value under a nanosecond fires at once). */
static void vm_arm_timeout(struct vm *vm)
{
	double s = vm->opts->timeout_s;
	struct itimerspec its = {0};
	its.it_value.tv_sec = (time_t)s;
	its.it_value.tv_nsec = (long)((s - floor(s)) * 1e9);
	if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
		its.it_value.tv_nsec = 1;
	timerfd_settime(vm->timeout_fd, 0, &its, NULL);
}

int vm_setup_loop(struct vm *vm, struct err *e)
{
	sigset_t sigs;
	if (event_loop_init(&vm->loop, "main", e))
		return -1;
	vm->timeout_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	vm->panic_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	vm->signal_fd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	if (vm->timeout_fd < 0 || vm->panic_fd < 0 || vm->signal_fd < 0)
		return err_set(e, ERR_HOST, "cannot set up the event loop: %s", strerror(errno));
	int ret = event_loop_watch(&vm->loop, vm->timeout_fd, false, vm_on_timeout, vm);
	if (!ret)
		ret = event_loop_watch(&vm->loop, vm->panic_fd, false, vm_on_panic_grace, vm);
	if (!ret)
		ret = event_loop_watch(&vm->loop, vm->signal_fd, false, vm_on_signal, vm);
	if (ret)
		return err_set(e, ERR_HOST, "cannot set up the event loop: %s", strerror(-ret));
	vm->console.on_panic = vm_on_panic;
	vm->console.on_panic_ctx = vm;
	if (vm->opts->timeout_s > 0)
		vm_arm_timeout(vm);
	return 0;
}

int vm_watch_devices(struct vm *vm, struct err *e)
{
	int ret = 0;
	for (unsigned i = 0; !ret && i < IRQ_INTX_PINS; i++) {
		vm->resample[i] = (struct vm_resample){&vm->irq, i};
		if (vm->irq.pins[i].resamplefd >= 0)
			ret = event_loop_watch(&vm->loop, vm->irq.pins[i].resamplefd, false,
					       vm_on_resample, &vm->resample[i]);
	}
	if (ret)
		return err_set(e, ERR_HOST, "cannot watch the INTx resample fds: %s",
			       strerror(-ret));
	/* A regular file or /dev/null cannot be polled: no input then. */
	if (vm->console.in_fd >= 0 &&
	    event_loop_watch(&vm->loop, vm->console.in_fd, false, vm_on_console, vm) < 0)
		vm->console.in_fd = -1;
	return 0;
}

void vm_env_first_run(void *ctx)
{
	struct vm *vm = ctx;
	uint_fast64_t zero = 0;
	if (atomic_load(&vm->first_run_ns) == 0)
		atomic_compare_exchange_strong(&vm->first_run_ns, &zero, clock_now_ns());
}

/* The I/O threads first (a queue may be notified from the first KVM_RUN
 * on), then the vCPUs; a thread that cannot start stops the machine. */
static void vm_start_threads(struct vm *vm, struct err *e)
{
	for (unsigned i = 0; i < vm->nio_threads; i++)
		if (io_thread_start(&vm->io_threads[i], e)) {
			vm_stop(vm, MACHINE_STOP_HOST_FAILURE, 0, "I/O thread start failed");
			break;
		}
	for (unsigned i = 0; i < vm->nvcpus && !vm_stopping(vm); i++)
		if (vcpu_start(&vm->vcpus[i], e)) {
			vm_stop(vm, MACHINE_STOP_HOST_FAILURE, 0, "vCPU start failed");
			break;
		}
}

/* The main thread is the I/O thread from here on: under its filter (the
 * vCPU threads put themselves under theirs). */
static void vm_filter_main_thread(struct vm *vm)
{
	if (!vm->opts->seccomp)
		return;
	int ret = vmm_seccomp_apply(&vm->seccomp, VMM_THREAD_IO);
	if (ret) {
		log_error(&vm->log,
			  "seccomp: cannot filter the main thread: %s (--seccomp off runs without)",
			  strerror(-ret));
		vm_stop(vm, MACHINE_STOP_HOST_FAILURE, 0, "seccomp failed");
	}
}

int machine_run(struct vm *vm, struct err *e)
{
	console_enter_raw(&vm->console);
	if (vm->console.raw)
		vm->log.crlf = 1;
	vm_start_threads(vm, e);
	vm_filter_main_thread(vm);
	struct err loop_err = {0};
	if (event_loop_run(&vm->loop, &loop_err)) {
		log_error(&vm->log, "%s", loop_err.msg);
		vm_stop(vm, MACHINE_STOP_HOST_FAILURE, 0, "event loop failure");
	}
	return vm_wind_down(vm);
}
