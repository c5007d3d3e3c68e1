#include "vmm/machine/vm.h"

#include "vmm/machine/isa_devices.h"
#include "vmm/machine/machine.h"

#include "vmm/firmware/acpi.h"

#include "vmm/base/clock.h"
#include "vmm/base/err.h"
#include "vmm/base/file.h"
#include "vmm/base/layout.h"
#include "vmm/cpu/cpu_model.h"
#include "vmm/cpu/vcpu_diag.h"
#include "vmm/firmware/fdt.h"
#include "vmm/firmware/mptable.h"
#include "vmm/host/exit_code.h"
#include "vmm/host/rss.h"

#include <asm/bootparam.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#define KERNEL_FILE_MAX (512u << 20)

static void vm_request_stop(struct vm *vm, int code, const char *kind, const char *why);

static void vm_ctl_request_stop(void *ctx, enum machine_stop_reason reason, uint32_t value,
				const char *why)
{
	vm_request_stop(ctx, exit_code_for_stop(reason, value), stop_kind_for(reason), why);
}

static void vm_on_panic(void *ctx)
{
	struct vm *vm = ctx;
	struct itimerspec its = {.it_value = {VM_PANIC_GRACE_S, 0}};
	log_warn(&vm->log, "\"%s\" on the console: the VM ends with exit code %d",
		 CONSOLE_PANIC_TEXT, EXIT_GUEST_CRASH);
	if (vm->panic_fd >= 0)
		timerfd_settime(vm->panic_fd, 0, &its, NULL);
}

static bool vm_log_needs_break(void *ctx)
{
	return console_fresh_line(ctx);
}

static void vm_request_stop(struct vm *vm, int code, const char *kind, const char *why)
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

static bool vm_stopping(struct vm *vm)
{
	return atomic_load(&vm->stopping);
}

static void vm_note_first_run(struct vm *vm)
{
	uint_fast64_t zero = 0;
	if (atomic_load(&vm->first_run_ns) == 0)
		atomic_compare_exchange_strong(&vm->first_run_ns, &zero, clock_now_ns());
}

static bool vm_env_stopping(void *ctx)
{
	return vm_stopping(ctx);
}

static void vm_env_first_run(void *ctx)
{
	vm_note_first_run(ctx);
}

static int vm_create_devices(struct vm *vm, struct err *e)
{
	const struct isa_env env = {
	    .pio = &vm->pio,
	    .mmio = &vm->mmio,
	    .irq = &vm->irq,
	    .console = {console_output, &vm->console},
	    .console_input = &vm->console_input,
	    .ctl = vm->ctl,
	    .start_ns = vm->start_ns,
	    .boot_timer_out = vm->opts->boot_timer ? stderr : NULL,
	    .log = &vm->log,
	};
	return isa_devices_create(&vm->isa, &env, e);
}

static int vm_cpu_signature(const struct kvm *k, uint32_t *sig, uint32_t *features);

/* The machine as the guest is told it, once: both the MP table and the
 * ACPI tables are written from this (vmm/firmware/machine_desc.h). */
static void vm_machine_desc(struct vm *vm, struct machine_desc *d, struct machine_pci_irq *irqs)
{
	*d = (struct machine_desc){.ncpus = vm->nvcpus, .pci_irqs = irqs};
	vm_cpu_signature(&vm->kvm, &d->cpu_signature, &d->cpu_features);
	for (unsigned s = 0; s < PCI_SLOTS; s++) {
		const struct pci_device *dev = vm->pci.slots[s];
		uint8_t pin = dev ? dev->cfg[PCI_INTERRUPT_PIN] : 0;
		if (pin)
			irqs[d->npci_irqs++] = (struct machine_pci_irq){
			    (uint8_t)s, pin, pci_intx_ioapic_pin((uint8_t)s, pin)};
	}
}

/* The MP table always (kernels with X86_MPPARSE and no ACPI read it), the
 * ACPI tables with --acpi on (kernels with ACPI prefer them). */
static int vm_write_tables(struct vm *vm, struct err *e)
{
	struct machine_pci_irq irqs[PCI_SLOTS];
	struct machine_desc d;
	vm_machine_desc(vm, &d, irqs);
	if (mptable_write(&vm->mem, &d, e) < 0)
		return -1;
	if (!vm->opts->acpi)
		return 0;
	vm->acpi = malloc(sizeof(*vm->acpi));
	if (!vm->acpi)
		return err_set(e, ERR_HOST, "out of memory");
	if (acpi_build(&d, LAYOUT_ACPI, vm->acpi, e) || acpi_write(&vm->mem, vm->acpi, e))
		return -1;
	log_info(&vm->log,
		 "acpi: RSDP at 0x%llx, %zu bytes of tables (FADT hardware-reduced, "
		 "MADT %u CPUs, DSDT _PRT %zu entries)",
		 (unsigned long long)vm->acpi->rsdp, vm->acpi->len, d.ncpus, d.npci_irqs);
	return 0;
}

/* --dump-acpi DIR: each table as DIR/name.dat, the form iasl -d reads. */
static int vm_dump_acpi(struct vm *vm, struct err *e)
{
	const char *dir = vm->opts->dump_acpi;
	if (!dir || !vm->acpi)
		return 0;
	for (unsigned i = 0; i < vm->acpi->ntables; i++) {
		const struct acpi_table_at *t = &vm->acpi->tables[i];
		char path[4096], name[5];
		for (int k = 0; k < 5; k++)
			name[k] = (char)tolower((unsigned char)t->sig[k]);
		snprintf(path, sizeof(path), "%s/%s.dat", dir, name);
		if (file_write_output("--dump-acpi", path, vm->acpi->buf + t->off, t->len, e))
			return -1;
	}
	return 0;
}

static int vm_device_tree(struct vm *vm, struct err *e)
{
	const struct vm_options *o = vm->opts;
	void *blob;
	size_t len;
	if (!o->dump_dtb && !o->dtb)
		return 0;
	struct fdt_machine fm = {&vm->mem, vm->nvcpus, &vm->pci};
	if (fdt_build_machine(&fm, &blob, &len, e))
		return -1;
	int ret = 0;
	if (o->dtb)
		ret = boot_add_setup_data(&vm->mem, vm->boot.zero_page, SETUP_DTB, blob, len, e);
	if (o->dump_dtb && !ret) {
		vm->dtb = blob; /* written with the other outputs, once all is built */
		vm->dtb_len = len;
	} else {
		free(blob);
	}
	return ret;
}

/* The files the command line asks for, made last: a machine that fails to
 * build leaves none behind (their paths were checked first). */
static int vm_write_outputs(struct vm *vm, struct err *e)
{
	const struct vm_options *o = vm->opts;
	/* The console log first: the output most likely refused (a FIFO
	 * nobody reads, a link another user owns); made here, it goes again
	 * if a later output fails. */
	bool made_log = o->console_log && access(o->console_log, F_OK) != 0;
	if (o->console_log && console_open_log(&vm->console, o->console_log, e))
		return -1;
	int ret = 0;
	if (vm->dtb) {
		ret = file_write_output("--dump-dtb", o->dump_dtb, vm->dtb, vm->dtb_len, e);
		free(vm->dtb);
		vm->dtb = NULL;
	}
	if (ret || vm_dump_acpi(vm, e) || devices_built(&vm->devices, e)) {
		if (made_log)
			unlink(o->console_log);
		return -1;
	}
	return 0;
}

static int vm_load_guest(struct vm *vm, struct err *e)
{
	const struct vm_options *o = vm->opts;
	uint8_t *kernel = NULL, *initrd = NULL;
	size_t kernel_len = 0, initrd_len = 0;
	char *cmdline = options_kernel_cmdline(o);
	int ret = -1;
	if (!cmdline)
		return err_set(e, ERR_HOST, "out of memory");
	if (file_read_all("kernel", o->kernel, KERNEL_FILE_MAX, &kernel, &kernel_len, e))
		goto out;
	/* Up to 4 GiB is read; whether it fits in RAM is the loader's call,
	 * which says where it would have to go. */
	if (o->initrd &&
	    file_read_all("initrd", o->initrd, (size_t)1 << 32, &initrd, &initrd_len, e))
		goto out;
	struct boot_config bc = {
	    .kernel = kernel,
	    .kernel_len = kernel_len,
	    .initrd = initrd,
	    .initrd_len = initrd_len,
	    .cmdline = cmdline,
	    .guest_decompress = o->guest_decompress,
	    .entry = o->boot_entry,
	    .rsdp = o->acpi ? LAYOUT_ACPI : 0, /* the tables follow, once the PCI bus is built */
	};
	if (boot_load(&vm->mem, &bc, &vm->boot, e)) {
		err_prefix(e, "kernel '%s'", o->kernel);
		goto out;
	}
	log_info(&vm->log, "boot: %s", vm->boot.how);
	ret = 0;
out:
	free(kernel);
	free(initrd);
	free(cmdline);
	return ret;
}

static int vm_cpu_signature(const struct kvm *k, uint32_t *sig, uint32_t *features)
{
	const struct cpuid_leaf *l = cpuid_find(k->cpuid, k->ncpuid, 1, 0);
	if (!l)
		return -1;
	*sig = l->eax;
	*features = l->edx;
	return 0;
}

/* The loop for the next queue group: the I/O threads round robin, the
 * main loop when there are none (struct device_host's next_loop). */
static struct event_loop *vm_next_loop(void *ctx)
{
	struct vm *vm = ctx;
	if (!vm->nio_threads)
		return &vm->loop;
	return &vm->io_threads[vm->next_io_thread++ % vm->nio_threads].loop;
}

static int vm_ioeventfd(void *ctx, uint64_t gpa, unsigned len, int fd, bool assign)
{
	struct vm *vm = ctx;
	/* No datamatch: any 2-byte write to the queue's notify address
	 * (VIRTIO_F_NOTIFICATION_DATA is not offered). */
	struct kvm_ioeventfd io = {
	    .addr = gpa, .len = len, .fd = fd, .flags = assign ? 0 : KVM_IOEVENTFD_FLAG_DEASSIGN};
	return ioctl(vm->kvm.vm_fd, KVM_IOEVENTFD, &io) < 0 ? -errno : 0;
}

static struct pci_bus_env vm_pci_bus_env(struct vm *vm)
{
	return (struct pci_bus_env){
	    .pio = &vm->pio,
	    .mmio = &vm->mmio,
	    .mem = &vm->mem,
	    .irq = &vm->irq,
	    .log = &vm->log,
	    .window = LAYOUT_PCI_WINDOW,
	};
}

/* The PCI bus and the devices of the command line on it. */
static int vm_create_pci(struct vm *vm, struct err *e)
{
	const struct pci_bus_env env = vm_pci_bus_env(vm);
	int ret = pci_bus_init(&vm->pci, &env);
	if (ret)
		return err_set(e, ERR_HOST, "cannot set up the PCI bus: %s", strerror(-ret));
	vm->host = (struct device_host){
	    .log = &vm->log,
	    .mem = &vm->mem,
	    .irq = &vm->irq,
	    .pci = &vm->pci,
	    .console = &vm->console,
	    .console_input = &vm->console_input,
	    .irq_mode = vm->opts->irq_mode,
	    .main_loop = &vm->loop,
	    .next_loop = vm_next_loop,
	    .ioeventfd = vm->no_kvm ? NULL : vm_ioeventfd,
	    .ctx = vm,
	};
	return devices_create(&vm->devices, &vm->host, vm->opts, e);
}

/* --io-threads N, or by default one per device with more than one queue
 * group, at most one per host CPU. Made before the devices, which give
 * them their queues; started in vm_run. */
static int vm_setup_io_threads(struct vm *vm, struct err *e)
{
	const struct vm_options *o = vm->opts;
	unsigned n = 0;
	if (o->io_threads >= 0) {
		n = (unsigned)o->io_threads;
	} else {
		for (unsigned i = 0; i < o->ndevices; i++) {
			const struct device_kind *k = device_kind_of(o->devices[i].kind);
			n += k->queue_groups && k->queue_groups(&o->devices[i]) > 1;
		}
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		if (cpus > 0 && n > (unsigned long)cpus)
			n = (unsigned)cpus;
		if (n > VMM_MAX_IO_THREADS)
			n = VMM_MAX_IO_THREADS;
	}
	struct io_thread_env env = {&vm->log, o->seccomp ? &vm->seccomp : NULL, vm->ctl};
	for (unsigned i = 0; i < n; i++) {
		vm->nio_threads++; /* a half-made one is destroyed too */
		if (io_thread_init(&vm->io_threads[i], &env, i + 1, e))
			return -1;
	}
	if (n)
		log_info(&vm->log, "%u I/O thread%s for the virtio-blk and virtio-net queues", n,
			 n == 1 ? "" : "s");
	return 0;
}

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
	vm_request_stop(vm, EXIT_TIMEOUT, STOP_KIND_TIMEOUT, "--timeout expired");
}

static void vm_on_panic_grace(void *arg)
{
	struct vm *vm = arg;
	vm_drain_fd(vm->panic_fd);
	vm_request_stop(vm, EXIT_GUEST_CRASH, STOP_KIND_PANIC, "kernel panic seen on the console");
}

static void vm_on_signal(void *arg)
{
	struct vm *vm = arg;
	struct signalfd_siginfo si;
	if (read(vm->signal_fd, &si, sizeof(si)) == sizeof(si))
		vm_request_stop(vm, EXIT_INTERRUPTED, STOP_KIND_INTERRUPTED,
				si.ssi_signo == SIGINT	  ? "SIGINT"
				: si.ssi_signo == SIGTERM ? "SIGTERM"
							  : "SIGHUP");
}

static void vm_on_console(void *arg);

static void vm_on_resample(void *arg)
{
	struct vm_resample *r = arg;
	irq_intx_handle_resample(r->irq, r->pin);
}

/* What the main loop serves once the devices exist: INTx resamples and
 * the console. */
static int vm_watch_devices(struct vm *vm, struct err *e)
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

static int vm_setup_loop(struct vm *vm, struct err *e)
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
	if (vm->opts->timeout_s > 0) {
		struct itimerspec its = {0};
		its.it_value.tv_sec = (time_t)vm->opts->timeout_s;
		its.it_value.tv_nsec =
		    (long)((vm->opts->timeout_s - floor(vm->opts->timeout_s)) * 1e9);
		if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
			its.it_value.tv_nsec = 1;
		timerfd_settime(vm->timeout_fd, 0, &its, NULL);
	}
	return 0;
}

/* KVM and the interrupt door over it; or, for a harness, the door over
 * the backend's sink and no KVM at all. */
static int vm_setup_kvm(struct vm *vm, const struct machine_backend *backend, struct err *e)
{
	const struct vm_options *o = vm->opts;
	vm->nvcpus = o->cpus;
	struct irq_router_config irq = {
	    .log = &vm->log,
	    .msi_mode = o->msi_delivery,
	    .intx_mode = o->intx_delivery,
	};
	if (backend) {
		vm->no_kvm = true;
		vm->kvm.run_size = 4096; /* the harness's run areas */
		irq_router_init(&vm->irq, backend->irq_sink, backend->irq_sink_ctx, &irq);
		return 0;
	}
	/* Inside the emulated host (scripts/vmm-host sets VMM_EMULATED_HOST)
	 * there is no further host to go to. */
	bool may_move = !getenv("VMM_EMULATED_HOST");
	if (o->host == HOST_EMULATED && may_move)
		return err_set(e, ERR_NO_KVM, "--host emulated");
	if (kvm_open(&vm->kvm, NULL, e)) {
		if (o->host == HOST_AUTO && may_move && e->kind == ERR_HOST)
			e->kind = ERR_NO_KVM;
		return -1;
	}
	log_info(&vm->log, "host: %s", kvm_host_kind(&vm->kvm));
	if (o->cpus > (unsigned)vm->kvm.max_vcpus)
		return err_set(e, ERR_INPUT, "--cpus %u: KVM on this host allows at most %d vCPUs",
			       o->cpus, vm->kvm.max_vcpus);
	if (o->intx_delivery == IRQ_INTX_RESAMPLE && !vm->kvm.has_irqfd_resample)
		return err_set(
		    e, ERR_HOST,
		    "--intx-delivery resample: KVM on this host lacks KVM_CAP_IRQFD_RESAMPLE");
	if (kvm_create_vm(&vm->kvm, &vm->mem, e) ||
	    kvm_set_ioapic_id(&vm->kvm, machine_ioapic_id_for(vm->nvcpus), e))
		return -1;
	vm->irq_sink.vm_fd = vm->kvm.vm_fd;
	irq_router_init(&vm->irq, &irq_kvm_sink_ops, &vm->irq_sink, &irq);
	return 0;
}

/* --dump-acpi's directory exists and is writable (checked with the other
 * inputs: the files themselves are written once all is built). */
static int vm_check_dump_dir(const char *dir, struct err *e)
{
	struct stat st;
	if (stat(dir, &st) < 0)
		return err_set(e, ERR_INPUT, "--dump-acpi %s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return err_set(e, ERR_INPUT, "--dump-acpi %s: not a directory", dir);
	if (access(dir, W_OK | X_OK) < 0)
		return err_set(e, ERR_INPUT, "--dump-acpi %s: %s", dir, strerror(errno));
	return 0;
}

static int vm_build(struct vm *vm, const struct vm_options *o, uint64_t start_ns,
		    const struct machine_backend *backend, struct err *e)
{
	memset(vm, 0, sizeof(*vm));
	vm->opts = o;
	vm->start_ns = start_ns;
	vm->kvm.dev_fd = vm->kvm.vm_fd = -1;
	vm->loop.epoll_fd = vm->loop.stop_fd = -1;
	vm->signal_fd = vm->timeout_fd = vm->panic_fd = -1;
	vm->smaps_fd = -1;
	atomic_init(&vm->exit_code, -1);
	log_init(&vm->log,
		 o->verbosity >= 2   ? LOG_DEBUG
		 : o->verbosity == 1 ? LOG_INFO
				     : LOG_WARN,
		 stderr);
	bus_init(&vm->pio, "pio", &vm->log);
	bus_init(&vm->mmio, "mmio", &vm->log);
	vm->ctl = (struct machine_ctl){vm_ctl_request_stop, vm};
	console_open(&vm->console);
	vm->console.on_panic = vm_on_panic;
	vm->console.on_panic_ctx = vm;
	/* The VMM's own lines start on a line of their own on the terminal. */
	vm->log.needs_break = vm_log_needs_break;
	vm->log.needs_break_ctx = &vm->console;

	/* Inputs first: a bad kernel is exit 2 even where KVM is missing. */
	if ((o->console_log && file_check_writable("--console-log", o->console_log, e)) ||
	    (o->dump_dtb && file_check_writable("--dump-dtb", o->dump_dtb, e)) ||
	    (o->dump_acpi && vm_check_dump_dir(o->dump_acpi, e)) ||
	    guest_mem_create(&vm->mem, o->memory_mib << 20, e) || vm_load_guest(vm, e))
		return -1;
	if (vm_setup_kvm(vm, backend, e))
		return -1;
	if (vm_setup_loop(vm, e) || vm_setup_io_threads(vm, e) || vm_create_devices(vm, e) ||
	    vm_create_pci(vm, e) || vm_write_tables(vm, e) || vm_device_tree(vm, e) ||
	    vm_watch_devices(vm, e))
		return -1;
	/* The filters are compiled before the vCPUs exist (the vCPU threads
	 * apply theirs from the first instruction they run). */
	if (o->seccomp && !vm->no_kvm && vmm_seccomp_prepare(&vm->seccomp, e))
		return -1;
	vm->vcpu_env = (struct vcpu_env){
	    .kvm = &vm->kvm,
	    .mem = &vm->mem,
	    .pio = &vm->pio,
	    .mmio = &vm->mmio,
	    .log = &vm->log,
	    .seccomp = o->seccomp ? &vm->seccomp : NULL,
	    .nvcpus = vm->nvcpus,
	    .kvm_pv = o->kvm_pv,
	    .kvm_pv_mask = o->kvm_pv_mask,
	    .ctl = vm->ctl,
	    .stopping = vm_env_stopping,
	    .first_run = vm_env_first_run,
	    .ctx = vm,
	};
	if (vm->no_kvm)
		return 0; /* a harness: it dispatches exits itself, nothing is written */
	for (unsigned i = 0; i < vm->nvcpus; i++) {
		vm->vcpus_created++; /* a half-made vCPU is destroyed too */
		if (vcpu_create(&vm->vcpu_env, &vm->vcpus[i], i, e))
			return -1;
	}
	bool pvh = vm->boot.path == BOOT_PATH_PVH;
	if (vcpu_set_boot_state(&vm->vcpus[0], vm->boot.entry,
				pvh ? vm->boot.start_info : vm->boot.zero_page, pvh, e))
		return -1;
	/* What the threads will need and may then no longer open. */
	if (o->boot_timer)
		vm->smaps_fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
	return vm_write_outputs(vm, e);
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
		vm_request_stop(vm, EXIT_INTERRUPTED, STOP_KIND_INTERRUPTED,
				"Ctrl-A x on the console");
	} else if (r == CONSOLE_INPUT_EOF) {
		event_loop_unwatch(&vm->loop, vm->console.in_fd);
		vm->console.in_fd = -1; /* end of input; the guest keeps running */
	}
}

static void vm_report(struct vm *vm, int code)
{
	enum log_level level = (code == EXIT_GUEST_OFF || (code & 1)) ? LOG_INFO : LOG_WARN;
	/* "stop: KIND" says who chose the code: a status-port byte is the
	 * guest's, whatever its value (README, "Exit codes"). */
	const char *kind = vm->stop_kind ? vm->stop_kind : STOP_KIND_CRASH;
	bool guests = !strcmp(kind, STOP_KIND_GUEST_STATUS);
	log_msg(&vm->log, level, "guest stopped: %s (exit code %d%s; stop: %s)", vm->stop_why, code,
		guests ? ", chosen by the guest" : "", kind);
	uint64_t fb[VCPU_FALLBACK_COUNT] = {0}, fb_total = 0;
	char fb_text[160] = "";
	size_t off = 0;
	for (unsigned k = 0; k < VCPU_FALLBACK_COUNT; k++) {
		for (unsigned i = 0; i < vm->nvcpus; i++)
			fb[k] += atomic_load(&vm->vcpus[i].stats.fallbacks[k]);
		fb_total += fb[k];
		off += (size_t)snprintf(fb_text + off, sizeof(fb_text) - off, "%s%s %llu",
					k ? ", " : "", vcpu_fallback_names[k],
					(unsigned long long)fb[k]);
	}
	if (fb_total)
		log_info(&vm->log, "ring-0 emulation fallbacks on this host: %s", fb_text);
	if (vm->opts->stats) {
		irq_print_stats(&vm->irq, stderr);
		devices_print_stats(&vm->devices, stderr);
	}
	if (vm->opts->boot_timer) {
		uint64_t first = atomic_load(&vm->first_run_ns);
		fprintf(stderr, "vmm: boot-timer: boot path: %s\n", vm->boot.how);
		if (first)
			fprintf(stderr,
				"vmm: boot-timer: exec-to-first-KVM_RUN %llu us (from main())\n",
				(unsigned long long)((first - vm->start_ns) / 1000));
		long rss = rss_kib_excluding(vm->smaps_fd, vm->mem.base, vm->mem.ram_size);
		if (rss >= 0)
			fprintf(stderr, "vmm: boot-timer: VMM RSS excluding guest RAM %ld KiB\n",
				rss);
		fprintf(stderr, "vmm: boot-timer: ring-0 emulation fallbacks: %s\n", fb_text);
	}
}

struct vm *machine_create(const struct vm_options *o, uint64_t start_ns,
			  const struct machine_backend *backend, struct err *e)
{
	struct vm *vm = calloc(1, sizeof(*vm));
	if (!vm) {
		err_set(e, ERR_HOST, "out of memory");
		return NULL;
	}
	if (vm_build(vm, o, start_ns, backend, e)) {
		machine_destroy(vm);
		return NULL;
	}
	return vm;
}

const struct vcpu_env *machine_vcpu_env(struct vm *vm)
{
	return &vm->vcpu_env;
}

int machine_run(struct vm *vm, struct err *e)
{
	console_enter_raw(&vm->console);
	if (vm->console.raw)
		vm->log.crlf = 1;
	/* The I/O threads first: a queue may be notified from the first
	 * KVM_RUN on. */
	for (unsigned i = 0; i < vm->nio_threads; i++)
		if (io_thread_start(&vm->io_threads[i], e)) {
			vm_request_stop(vm, EXIT_HOST, STOP_KIND_HOST, "I/O thread start failed");
			break;
		}
	for (unsigned i = 0; i < vm->nvcpus && !vm_stopping(vm); i++)
		if (vcpu_start(&vm->vcpus[i], e)) {
			vm_request_stop(vm, EXIT_HOST, STOP_KIND_HOST, "vCPU start failed");
			break;
		}
	/* The main thread is the I/O thread from here on: under its filter
	 * (the vCPU threads put themselves under theirs). */
	if (vm->opts->seccomp) {
		int ret = vmm_seccomp_apply(&vm->seccomp, VMM_THREAD_IO);
		if (ret) {
			log_error(&vm->log,
				  "seccomp: cannot filter the main thread: %s (--seccomp off runs "
				  "without)",
				  strerror(-ret));
			vm_request_stop(vm, EXIT_HOST, STOP_KIND_HOST, "seccomp failed");
		}
	}
	struct err loop_err = {0};
	if (event_loop_run(&vm->loop, &loop_err)) {
		log_error(&vm->log, "%s", loop_err.msg);
		vm_request_stop(vm, EXIT_HOST, STOP_KIND_HOST, "event loop failure");
	}
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

void machine_destroy(struct vm *vm)
{
	if (!vm)
		return;
	free(vm->dtb);
	free(vm->acpi);
	vmm_seccomp_free(&vm->seccomp);
	if (vm->smaps_fd >= 0)
		close(vm->smaps_fd);
	/* Only what exists: a failure before the vCPUs leaves none to close. */
	for (unsigned i = 0; i < vm->vcpus_created; i++)
		vcpu_destroy(&vm->vcpus[i]);
	event_loop_destroy(&vm->loop);
	int fds[] = {vm->signal_fd, vm->timeout_fd, vm->panic_fd};
	for (unsigned i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	for (unsigned i = 0; i < vm->nio_threads; i++)
		io_thread_destroy(&vm->io_threads[i]);
	devices_destroy(&vm->devices);
	irq_router_destroy(&vm->irq);
	kvm_close(&vm->kvm);
	guest_mem_destroy(&vm->mem);
	console_close(&vm->console);
	bus_destroy(&vm->pio);
	bus_destroy(&vm->mmio);
	free(vm);
}
