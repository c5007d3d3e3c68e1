/*
 * The machine: guest memory, KVM VM and vCPUs, buses, the interrupt door,
 * the legacy devices, and the main thread's event loop (console input,
 * signals, --timeout, stop requests). No global state: everything hangs
 * off one `struct vm`. Private to the machine's own files, which share
 * it through the functions below:
 *   vmm/machine/build.c    assembly and teardown (machine_create, machine_destroy)
 *   vmm/machine/run.c      the main loop and its handlers (machine_run)
 *   vmm/machine/stop.c     the one stop path: the stop recorded, the wind-down, the report
 *   vmm/machine/outputs.c  the files the command line asks for
 * The rest of the tree builds a machine through vmm/machine/machine.h and
 * knows only the narrow contexts it is given.
 */
#ifndef VMM_VM_H
#define VMM_VM_H

#include "vmm/base/bus.h"
#include "vmm/base/guest_mem.h"
#include "vmm/base/log.h"
#include "vmm/base/machine_ctl.h"
#include "vmm/boot/boot.h"
#include "vmm/cpu/kvm.h"
#include "vmm/cpu/vcpu.h"
#include "vmm/host/console.h"
#include "vmm/host/io_thread.h"
#include "vmm/host/seccomp.h"
#include "vmm/kinds/host.h"
#include "vmm/kinds/registry.h"
#include "vmm/machine/isa_devices.h"
#include "vmm/options/options.h"

#include "devices/pci/pci.h"
#include "irq/irq.h"
#include "irq/kvm_sink.h"

#include <stdatomic.h>
#include <stdbool.h>

#define VM_MAX_VCPUS VMM_MAX_VCPUS
/* After "Kernel panic - not syncing", let the trace print, then stop. */
#define VM_PANIC_GRACE_S 10

struct err;
struct vm;

struct vm {
	const struct vm_options *opts;
	uint64_t start_ns; /* CLOCK_MONOTONIC at main() */
	struct log log;
	struct kvm kvm;
	struct guest_mem mem;
	struct bus pio, mmio;
	struct irq_kvm_sink irq_sink;
	struct irq_router irq;
	struct console console;
	struct machine_ctl ctl;

	struct isa_devices isa; /* COM1, i8042, RTC, debug-exit, pvpanic, boot timer */
	struct pci_bus pci;
	struct machine_devices devices; /* vmm/kinds/registry.h */
	struct device_host host;	/* what the devices' glue gets of the machine */
	/* Where console input goes: the UART, or a device that took it. */
	struct console_input console_input;

	struct vcpu_env vcpu_env; /* what the vCPUs get of the machine */
	struct vcpu vcpus[VM_MAX_VCPUS];
	unsigned nvcpus;	/* the machine's (MP table, CPUID) */
	unsigned vcpus_created; /* of those, created so far */
	struct boot_result boot;
	struct vmm_seccomp seccomp; /* the threads' filters, unless --seccomp off */
	int smaps_fd;		    /* /proc/self/smaps for --boot-timer's RSS */
	void *dtb;		    /* --dump-dtb: the blob, until it is written */
	struct acpi_tables *acpi;   /* --acpi on: the tables as built */
	size_t dtb_len;

	atomic_int exit_code; /* -1 while running */
	char stop_why[160];
	const char *stop_kind; /* stop_kind_for() or a STOP_KIND_* */
	atomic_bool stopping;
	atomic_uint_fast64_t first_run_ns;
	/* The main thread's loop: signals, --timeout, the panic grace timer,
	 * console input, INTx resamples, and every queue no I/O thread owns. */
	struct event_loop loop;
	int signal_fd, timeout_fd, panic_fd;
	struct vm_resample {
		struct irq_router *irq;
		unsigned pin;
	} resample[IRQ_INTX_PINS];
	/* --io-threads: loop k (1..nio_threads) is io_threads[k - 1]; loop 0
	 * is the main thread. */
	struct io_thread io_threads[VMM_MAX_IO_THREADS];
	unsigned nio_threads;
	unsigned next_io_thread; /* round robin over the queue groups */
};

/* run.c: the main loop's timers, signals and panic watch (made before the
 * devices), then what it serves of the devices (INTx resamples, console
 * input). 0 or -1 with e set. */
int vm_setup_loop(struct vm *vm, struct err *e);
int vm_watch_devices(struct vm *vm, struct err *e);
/* struct vcpu_env's first_run: stamps the first KVM_RUN (--boot-timer). */
void vm_env_first_run(void *vm);

/* stop.c: every stop request goes through these; the first one wins. */
void vm_stop(struct vm *vm, enum machine_stop_reason reason, uint32_t value, const char *why);
void vm_stop_timeout(struct vm *vm);
void vm_stop_interrupted(struct vm *vm, const char *why); /* a signal, Ctrl-A x */
/* What the devices, vCPUs and I/O threads stop the machine through. */
struct machine_ctl vm_stop_ctl(struct vm *vm);
bool vm_stopping(struct vm *vm);
bool vm_env_stopping(void *vm); /* struct vcpu_env's stopping */
/* Once the main loop has ended: stops the threads, restores the terminal,
 * reports (the stop line, --stats, --boot-timer); the exit code. */
int vm_wind_down(struct vm *vm);

/* outputs.c: --console-log, --dump-dtb, --dump-acpi: the paths checked
 * with the inputs, the files written once all is built. */
int vm_check_outputs(const struct vm_options *o, struct err *e);
int vm_write_outputs(struct vm *vm, struct err *e);

#endif
