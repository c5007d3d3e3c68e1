/*
 * The machine's assembly, from one options struct, and the teardown that
 * undoes it: guest memory and the kernel (inputs first: a bad kernel is
 * exit 2 even where KVM is missing), the KVM VM and the interrupt door,
 * the main loop and the I/O threads, the ISA devices, the PCI bus and the
 * devices of the command line (vmm/kinds/registry.h), the firmware tables,
 * the seccomp filters, the vCPUs at the kernel's entry, and last the
 * files the command line asks for (vmm/machine/outputs.c). Running it is
 * vmm/machine/run.c; stopping it, vmm/machine/stop.c.
 */
#include "vmm/machine/machine.h"
#include "vmm/machine/vm.h"

#include "vmm/base/err.h"
#include "vmm/base/file.h"
#include "vmm/base/layout.h"
#include "vmm/cpu/cpu_model.h"
#include "vmm/firmware/acpi.h"
#include "vmm/firmware/fdt.h"
#include "vmm/firmware/mptable.h"

#include <asm/bootparam.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define KERNEL_FILE_MAX (512u << 20)

static bool vm_log_needs_break(void *ctx)
{
	return console_fresh_line(ctx);
}

/* Every field as "nothing made yet", so machine_destroy undoes whatever
 * part of the build was done. */
static void vm_init(struct vm *vm, const struct vm_options *o, uint64_t start_ns)
{
	memset(vm, 0, sizeof(*vm));
	vm->opts = o;
	vm->start_ns = start_ns;
	vm->nvcpus = o->cpus;
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
	vm->ctl = vm_stop_ctl(vm);
	console_open(&vm->console);
	/* The VMM's own lines start on a line of their own on the terminal. */
	vm->log.needs_break = vm_log_needs_break;
	vm->log.needs_break_ctx = &vm->console;
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

/* KVM_IRQ_LINE unless asked: see DESIGN.md, "INTx through KVM_IRQ_LINE". */
static struct irq_router_config vm_irq_config(struct vm *vm)
{
	const struct vm_options *o = vm->opts;
	return (struct irq_router_config){
	    .log = &vm->log,
	    .msi_mode = o->msi_delivery,
	    .intx_mode = o->intx_delivery,
	};
}

/* A harness's machine: the interrupt door over the backend's sink, and no
 * KVM at all. */
static void vm_attach_harness(struct vm *vm, const struct machine_backend *backend)
{
	const struct irq_router_config irq = vm_irq_config(vm);
	vm->kvm.run_size = 4096; /* the harness's run areas */
	irq_router_init(&vm->irq, backend->irq_sink, backend->irq_sink_ctx, &irq);
}

/* ./vmm's machine: KVM (or, with ERR_NO_KVM, the way to the emulated host)
 * and the interrupt door over it. */
static int vm_attach_kvm(struct vm *vm, struct err *e)
{
	const struct vm_options *o = vm->opts;
	const struct irq_router_config irq = vm_irq_config(vm);
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

/* --io-threads N, or by default one per device with more than one queue
 * group, at most one per host CPU. Made before the devices, which give
 * them their queues; started in machine_run. */
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

static int vm_create_isa(struct vm *vm, struct err *e)
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
	    /* Without a KVM VM (a harness) a queue's loop is notified
	     * without ioeventfds. */
	    .ioeventfd = vm->kvm.vm_fd >= 0 ? vm_ioeventfd : NULL,
	    .ctx = vm,
	};
	return devices_create(&vm->devices, &vm->host, vm->opts, e);
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

/* The device tree: --dtb hands it to the guest (setup_data), --dump-dtb
 * keeps it for vm_write_outputs. */
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

/* The main loop, the I/O threads, the devices and the tables that
 * describe them to the guest. */
static int vm_build_board(struct vm *vm, struct err *e)
{
	if (vm_setup_loop(vm, e) || vm_setup_io_threads(vm, e) || vm_create_isa(vm, e) ||
	    vm_create_pci(vm, e) || vm_write_tables(vm, e) || vm_device_tree(vm, e))
		return -1;
	return vm_watch_devices(vm, e);
}

static void vm_set_vcpu_env(struct vm *vm)
{
	const struct vm_options *o = vm->opts;
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
}

/* What ./vmm's machine needs to run and a harness's does not: the
 * filters, compiled before the vCPUs exist (a vCPU thread applies its
 * own from the first instruction it runs); the vCPUs, the boot CPU at the
 * kernel's entry; then the output files. */
static int vm_build_runnable(struct vm *vm, struct err *e)
{
	const struct vm_options *o = vm->opts;
	if (o->seccomp && vmm_seccomp_prepare(&vm->seccomp, e))
		return -1;
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

static int vm_build(struct vm *vm, const struct machine_backend *backend, struct err *e)
{
	const struct vm_options *o = vm->opts;
	/* Inputs first: a bad kernel is exit 2 even where KVM is missing. */
	bool shared = devices_share_ram(o);
	if (vm_check_outputs(o, e) || guest_mem_create(&vm->mem, o->memory_mib << 20, shared, e))
		return -1;
	if (shared && vm->mem.fd < 0)
		log_debug(&vm->log, "guest RAM is private memory (no memfd): no vhost-user device "
				    "can map it");
	if (vm_load_guest(vm, e))
		return -1;
	/* The one place a harness's machine differs from ./vmm's: no KVM,
	 * so no vCPU, no filter and no output file; it dispatches exits on
	 * machine_vcpu_env itself. */
	if (backend)
		vm_attach_harness(vm, backend);
	else if (vm_attach_kvm(vm, e))
		return -1;
	if (vm_build_board(vm, e))
		return -1;
	vm_set_vcpu_env(vm);
	return backend ? 0 : vm_build_runnable(vm, e);
}

struct vm *machine_create(const struct vm_options *o, uint64_t start_ns,
			  const struct machine_backend *backend, struct err *e)
{
	struct vm *vm = calloc(1, sizeof(*vm));
	if (!vm) {
		err_set(e, ERR_HOST, "out of memory");
		return NULL;
	}
	vm_init(vm, o, start_ns);
	if (vm_build(vm, backend, e)) {
		machine_destroy(vm);
		return NULL;
	}
	return vm;
}

const struct vcpu_env *machine_vcpu_env(struct vm *vm)
{
	return &vm->vcpu_env;
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
