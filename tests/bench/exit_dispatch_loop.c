/*
 * The VMM's exit dispatch, N times, with no KVM: a fake kvm_run area holds
 * the exits vbench measures from the guest (a port-I/O read of COM1's
 * scratch register; an MMIO read of a virtio-pci device's common config,
 * device_feature_select), and vcpu_dispatch() handles each through the
 * machine's buses and devices, as the vCPU thread does after KVM_RUN.
 * exit_dispatch_count.py runs it under callgrind, counting only inside
 * vcpu_dispatch(), and divides by N.
 *   exit_dispatch_loop pio|mmio N
 */
#include "devices/pci.h"
#include "devices/uart8250.h"
#include "devices/virtio_pci.h"
#include "devices/virtio_rng.h"
#include "irq/irq.h"
#include "vmm/base/bus.h"
#include "vmm/base/guest_mem.h"
#include "vmm/base/log.h"
#include "vmm/device_registry.h"
#include "vmm/vcpu.h"
#include "vmm/vm.h"

#include <linux/kvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RAM_BYTES (16u << 20)

static int no_line(void *ctx, uint32_t gsi, int level)
{
	(void)ctx;
	(void)gsi;
	(void)level;
	return 0;
}

static const struct irq_sink_ops quiet_sink = {.set_line = no_line};

static void discard(void *ctx, const uint8_t *buf, size_t len)
{
	(void)ctx;
	(void)buf;
	(void)len;
}

static int fail(const char *what)
{
	fprintf(stderr, "exit_dispatch_loop: set-up failed: %s\n", what);
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "pio") && strcmp(argv[1], "mmio"))) {
		fprintf(stderr, "usage: %s pio|mmio N\n", argv[0]);
		return 2;
	}
	bool pio = !strcmp(argv[1], "pio");
	unsigned long n = strtoul(argv[2], NULL, 10);
	struct vm *vm = calloc(1, sizeof(*vm));
	void *ram = calloc(1, RAM_BYTES);
	struct kvm_run *run = calloc(1, 4096);
	struct virtio_rng *rng = calloc(1, sizeof(*rng));
	struct virtio_pci *vp = calloc(1, sizeof(*vp));
	if (!vm || !ram || !run || !rng || !vp)
		return fail("out of memory");
	log_init(&vm->log, LOG_WARN, stderr);
	guest_mem_init_with(&vm->mem, ram, RAM_BYTES);
	bus_init(&vm->pio, "pio", &vm->log);
	bus_init(&vm->mmio, "mmio", &vm->log);
	irq_router_init(&vm->irq, &quiet_sink, NULL);
	vm->irq.log = &vm->log;
	vm->irq.intx_mode = IRQ_INTX_LINE; /* the quiet sink has no irqfds */
	/* COM1 as the machine has it. */
	uart8250_init(&vm->uart, irq_line_claim(&vm->irq, UART_COM1_IRQ, "uart"),
		      (struct char_sink){discard, NULL});
	if (bus_register(&vm->pio, UART_COM1_BASE, UART_NREGS, uart8250_read, uart8250_write,
			 &vm->uart))
		return fail("COM1 registration");
	/* A virtio-pci device on the machine's PCI bus, BARs placed. */
	const struct pci_bus_env env = vm_pci_bus_env(vm);
	struct virtio_host host = {.log = &vm->log};
	if (pci_bus_init(&vm->pci, &env))
		return fail("PCI bus");
	if (virtio_rng_init(rng, NULL) ||
	    virtio_pci_init(vp, &rng->vdev, "virtio-rng0", &vm->irq, &vm->mem, &host, false))
		return fail("virtio-rng");
	if (pci_bus_add_device(&vm->pci, &vp->pci, 1, 1) || pci_bus_assign_resources(&vm->pci))
		return fail("PCI placement");
	uint64_t bar0 = pci_config_read(&vm->pci, 0, 1 << 3, PCI_BASE_ADDRESS_0, 4) & ~0xFULL;

	struct vcpu v = {.vm = vm, .run = run, .fd = -1};
	if (pio) {
		run->exit_reason = KVM_EXIT_IO;
		run->io.direction = KVM_EXIT_IO_IN;
		run->io.size = 1;
		run->io.port = UART_COM1_BASE + 7; /* scratch */
		run->io.count = 1;
		run->io.data_offset = 2048;
	} else {
		run->exit_reason = KVM_EXIT_MMIO;
		run->mmio.phys_addr = bar0 + VIRTIO_PCI_COMMON_OFF; /* device_feature_select */
		run->mmio.len = 4;
		run->mmio.is_write = 0;
	}
	for (unsigned long i = 0; i < n; i++)
		vcpu_dispatch(&v);
	printf("%s exits dispatched: %lu (io_exits %llu, mmio_exits %llu)\n", argv[1], n,
	       (unsigned long long)v.stats.io_exits, (unsigned long long)v.stats.mmio_exits);
	return (pio ? v.stats.io_exits : v.stats.mmio_exits) == n ? 0 : 1;
}
