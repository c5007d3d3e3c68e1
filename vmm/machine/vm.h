/*
 * The machine: guest memory, KVM VM and vCPUs, buses, the interrupt door,
 * the legacy devices, and the main thread's event loop (console input,
 * signals, --timeout, stop requests). No global state: everything hangs
 * off one `struct vm`. Private to vmm/machine/vm.c (the machine assembly): the rest
 * of the tree builds a machine through vmm/machine/machine.h and knows only the
 * narrow contexts it is given.
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

	bool no_kvm;		  /* built for a harness (struct machine_backend) */
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

#endif
