/*
 * The one stop path: how the VM stops and what is reported. Anything may
 * ask for a stop: a device, a vCPU or an I/O thread through the machine's
 * `struct machine_ctl` with a reason, the main loop for --timeout, a
 * signal or Ctrl-A x. The first request wins: its exit code, its stop
 * kind and its phrase are recorded and the main loop is told to stop.
 * Once the loop has ended, vm_wind_down stops every thread, restores the
 * terminal and writes the stop line, the -v / --stats report and the
 * --boot-timer lines.
 */
#include "vmm/machine/stop.h"

#include "vmm/machine/vm.h"

#include "vmm/cpu/vcpu_diag.h"
#include "vmm/host/rss.h"

#include <stdio.h>
#include <string.h>

int exit_code_for_stop(enum machine_stop_reason reason, uint32_t value)
{
	switch (reason) {
	case MACHINE_STOP_GUEST_RESET: return EXIT_GUEST_OFF;
	case MACHINE_STOP_GUEST_PANIC: return EXIT_GUEST_CRASH;
	case MACHINE_STOP_GUEST_EXIT_VALUE: return (int)(((value << 1) | 1) & 0xFF);
	case MACHINE_STOP_GUEST_STATUS: return (int)(value & 0xFF);
	case MACHINE_STOP_GUEST_CRASH: return EXIT_GUEST_CRASH;
	case MACHINE_STOP_HOST_FAILURE: return EXIT_HOST;
	}
	return EXIT_GUEST_CRASH;
}

const char *stop_kind_for(enum machine_stop_reason reason)
{
	switch (reason) {
	case MACHINE_STOP_GUEST_RESET: return STOP_KIND_RESET;
	case MACHINE_STOP_GUEST_PANIC: return STOP_KIND_PANIC;
	case MACHINE_STOP_GUEST_EXIT_VALUE: return STOP_KIND_DEBUG_EXIT;
	case MACHINE_STOP_GUEST_STATUS: return STOP_KIND_GUEST_STATUS;
	case MACHINE_STOP_GUEST_CRASH: return STOP_KIND_CRASH;
	case MACHINE_STOP_HOST_FAILURE: return STOP_KIND_HOST;
	}
	return STOP_KIND_CRASH;
}

/* The first request's code, kind and phrase are kept; every request marks
 * the machine stopping. */
static void vm_record_stop(struct vm *vm, int code, const char *kind, const char *why)
{
	int expected = -1;
	/* A reboot after a panic is the end of a crash, not a clean reset. */
	if (code == EXIT_GUEST_OFF && atomic_load(&vm->console.panic_seen)) {
		code = EXIT_GUEST_CRASH;
		kind = STOP_KIND_PANIC;
		why = "kernel panic seen on the console";
	}
	if (atomic_compare_exchange_strong(&vm->exit_code, &expected, code)) {
		snprintf(vm->stop_why, sizeof(vm->stop_why), "%s", why);
		vm->stop_kind = kind;
		event_loop_request_stop(&vm->loop);
	}
	atomic_store(&vm->stopping, true);
}

void vm_stop(struct vm *vm, enum machine_stop_reason reason, uint32_t value, const char *why)
{
	vm_record_stop(vm, exit_code_for_stop(reason, value), stop_kind_for(reason), why);
}

void vm_stop_timeout(struct vm *vm)
{
	vm_record_stop(vm, EXIT_TIMEOUT, STOP_KIND_TIMEOUT, "--timeout expired");
}

void vm_stop_interrupted(struct vm *vm, const char *why)
{
	vm_record_stop(vm, EXIT_INTERRUPTED, STOP_KIND_INTERRUPTED, why);
}

static void vm_ctl_request_stop(void *ctx, enum machine_stop_reason reason, uint32_t value,
				const char *why)
{
	vm_stop(ctx, reason, value, why);
}

struct machine_ctl vm_stop_ctl(struct vm *vm)
{
	return (struct machine_ctl){vm_ctl_request_stop, vm};
}

bool vm_stopping(struct vm *vm)
{
	return atomic_load(&vm->stopping);
}

bool vm_env_stopping(void *ctx)
{
	return vm_stopping(ctx);
}

/* "int3 N, clac N, ..." summed over the vCPUs; false if all are 0. */
static bool vm_fallback_text(struct vm *vm, char *text, size_t size)
{
	uint64_t total = 0;
	size_t off = 0;
	text[0] = '\0';
	for (unsigned k = 0; k < VCPU_FALLBACK_COUNT; k++) {
		uint64_t n = 0;
		for (unsigned i = 0; i < vm->nvcpus; i++)
			n += atomic_load(&vm->vcpus[i].stats.fallbacks[k]);
		total += n;
		off += (size_t)snprintf(text + off, size - off, "%s%s %llu", k ? ", " : "",
					vcpu_fallback_names[k], (unsigned long long)n);
	}
	return total != 0;
}

static void vm_report_boot_timer(struct vm *vm, const char *fallbacks)
{
	uint64_t first = atomic_load(&vm->first_run_ns);
	fprintf(stderr, "vmm: boot-timer: boot path: %s\n", vm->boot.how);
	if (first)
		fprintf(stderr, "vmm: boot-timer: exec-to-first-KVM_RUN %llu us (from main())\n",
			(unsigned long long)((first - vm->start_ns) / 1000));
	long rss = rss_kib_excluding(vm->smaps_fd, vm->mem.base, vm->mem.ram_size);
	if (rss >= 0)
		fprintf(stderr, "vmm: boot-timer: VMM RSS excluding guest RAM %ld KiB\n", rss);
	fprintf(stderr, "vmm: boot-timer: ring-0 emulation fallbacks: %s\n", fallbacks);
}

/* The stop line, then what -v, --stats and --boot-timer ask for. */
static void vm_report(struct vm *vm, int code)
{
	enum log_level level = (code == EXIT_GUEST_OFF || (code & 1)) ? LOG_INFO : LOG_WARN;
	/* "stop: KIND" says who chose the code: a status-port byte is the
	 * guest's, whatever its value (README, "Exit codes"). */
	const char *kind = vm->stop_kind ? vm->stop_kind : STOP_KIND_CRASH;
	bool guests = !strcmp(kind, STOP_KIND_GUEST_STATUS);
	log_msg(&vm->log, level, "guest stopped: %s (exit code %d%s; stop: %s)", vm->stop_why, code,
		guests ? ", chosen by the guest" : "", kind);
	char fallbacks[160];
	if (vm_fallback_text(vm, fallbacks, sizeof(fallbacks)))
		log_info(&vm->log, "ring-0 emulation fallbacks on this host: %s", fallbacks);
	if (vm->opts->stats) {
		irq_print_stats(&vm->irq, stderr);
		devices_print_stats(&vm->devices, stderr);
	}
	if (vm->opts->boot_timer)
		vm_report_boot_timer(vm, fallbacks);
}

/* Out of KVM_RUN for good: every vCPU kicked and joined, then each I/O
 * thread told to stop (joined at teardown). */
static void vm_stop_threads(struct vm *vm)
{
	atomic_store(&vm->stopping, true);
	for (unsigned i = 0; i < vm->nvcpus; i++)
		vcpu_kick(&vm->vcpus[i]);
	for (unsigned i = 0; i < vm->nvcpus; i++)
		vcpu_join(&vm->vcpus[i]);
	/* No vCPU notifies any more: every loop stops the same way, running
	 * its on-stop hooks on its own thread (a disk queue waits there for its
	 * requests still in flight): each I/O thread's as it exits (joined at
	 * teardown), the main loop's after the report, so the report comes
	 * first whatever a backend still holds. */
	for (unsigned i = 0; i < vm->nio_threads; i++)
		io_thread_request_stop(&vm->io_threads[i]);
}

int vm_wind_down(struct vm *vm)
{
	vm_stop_threads(vm);
	console_restore(&vm->console);
	vm->log.crlf = 0;
	devices_run_ended(&vm->devices, &vm->log);
	int code = atomic_load(&vm->exit_code);
	/* A guest that ran out of time: say where each vCPU was. */
	if (code == EXIT_TIMEOUT)
		for (unsigned i = 0; i < vm->nvcpus; i++)
			vcpu_dump_where(&vm->vcpus[i]);
	vm_report(vm, code);
	event_loop_finish(&vm->loop);
	return code;
}
