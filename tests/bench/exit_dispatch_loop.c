/*
 * The VMM's exit dispatch, N times, with no KVM: the machine is built by
 * the same builder as ./vmm (vmm/machine/machine.h, from a command line: a kernel
 * loaded, COM1, a virtio-rng on the PCI bus with its BARs placed), with a
 * quiet interrupt sink instead of KVM; a fake kvm_run area holds the exits
 * vbench measures from the guest (a port-I/O read of COM1's scratch
 * register; an MMIO read of the virtio-pci device's common config,
 * device_feature_select) and vcpu_dispatch() handles each through the
 * machine's buses and devices, as the vCPU thread does after KVM_RUN.
 * exit_dispatch_count.py runs it under callgrind, counting only inside
 * vcpu_dispatch(), and divides by N.
 *   exit_dispatch_loop pio|mmio N KERNEL
 */
#include "devices/legacy/uart8250.h"
#include "devices/virtio/virtio_pci.h"
#include "irq/irq.h"
#include "vmm/base/err.h"
#include "vmm/cpu/vcpu.h"
#include "vmm/kinds/registry.h"
#include "vmm/machine/machine.h"
#include "vmm/options/options.h"

#include <linux/kvm.h>
#include <linux/pci_regs.h>
#include <linux/virtio_pci.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int no_line(void *ctx, uint32_t gsi, int level)
{
	(void)ctx;
	(void)gsi;
	(void)level;
	return 0;
}

static const struct irq_sink_ops quiet_sink = {.set_line = no_line};

/* One 4-byte port access through the dispatcher (conf1, as a guest does). */
static uint32_t pio(struct vcpu *v, uint16_t port, int write, uint32_t value)
{
	struct kvm_run *run = v->run;
	run->exit_reason = KVM_EXIT_IO;
	run->io.direction = write ? KVM_EXIT_IO_OUT : KVM_EXIT_IO_IN;
	run->io.size = 4;
	run->io.port = port;
	run->io.count = 1;
	run->io.data_offset = 2048;
	memcpy((uint8_t *)run + 2048, &value, 4);
	vcpu_dispatch(v);
	memcpy(&value, (uint8_t *)run + 2048, 4);
	return value;
}

int main(int argc, char **argv)
{
	if (argc != 4 || (strcmp(argv[1], "pio") && strcmp(argv[1], "mmio"))) {
		fprintf(stderr, "usage: %s pio|mmio N KERNEL\n", argv[0]);
		return 2;
	}
	bool is_pio = !strcmp(argv[1], "pio");
	unsigned long n = strtoul(argv[2], NULL, 10);
	char *args[] = {argv[0], "--kernel", argv[3], "--memory", "16", "--rng", NULL};
	struct vm_options o;
	struct err e = {0};
	struct machine_backend quiet = {&quiet_sink, NULL};
	struct vm *vm = NULL;
	if (options_parse(&o, 6, args, device_kinds, &e) ||
	    !(vm = machine_create(&o, 0, &quiet, &e))) {
		fprintf(stderr, "exit_dispatch_loop: set-up failed: %s\n", e.msg);
		return 1;
	}
	struct kvm_run *run = calloc(1, 4096);
	struct vcpu v = {.env = machine_vcpu_env(vm), .run = run, .fd = -1};
	if (!run)
		return 1;
	/* The virtio-rng is the first device: slot 1; its BAR0 as the guest
	 * finds it (conf1 address, then data). */
	pio(&v, 0xCF8, 1, 0x80000000u | (1u << 11) | PCI_BASE_ADDRESS_0);
	uint64_t bar0 = pio(&v, 0xCFC, 0, 0) & ~0xFULL;
	pio(&v, 0xCF8, 1, 0x80000000u | (1u << 11) | PCI_BASE_ADDRESS_1);
	bar0 |= (uint64_t)pio(&v, 0xCFC, 0, 0) << 32; /* 64-bit BAR */
	memset(&v.stats, 0, sizeof(v.stats));
	if (is_pio) {
		run->exit_reason = KVM_EXIT_IO;
		run->io.direction = KVM_EXIT_IO_IN;
		run->io.size = 1;
		run->io.port = UART_COM1_BASE + 7; /* scratch */
		run->io.count = 1;
		run->io.data_offset = 2048;
	} else {
		run->exit_reason = KVM_EXIT_MMIO;
		run->mmio.phys_addr = bar0 + VIRTIO_PCI_COMMON_OFF + VIRTIO_PCI_COMMON_DFSELECT;
		run->mmio.len = 4;
		run->mmio.is_write = 0;
	}
	for (unsigned long i = 0; i < n; i++)
		vcpu_dispatch(&v);
	printf("%s exits dispatched: %lu (io_exits %llu, mmio_exits %llu), BAR0 0x%llx\n", argv[1],
	       n, (unsigned long long)v.stats.io_exits, (unsigned long long)v.stats.mmio_exits,
	       (unsigned long long)bar0);
	machine_destroy(vm);
	free(run);
	return (is_pio ? v.stats.io_exits : v.stats.mmio_exits) == n && bar0 ? 0 : 1;
}
