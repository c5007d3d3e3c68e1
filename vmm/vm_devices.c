/* The machine's PCI devices: the bus, test devices and virtio devices, in
 * command-line order, and the host services virtio needs (ioeventfds,
 * main-loop watches). */
#include "layout.h"
#include "vm.h"
#include "vmm/base/err.h"

#include <errno.h>
#include <linux/kvm.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

static int vm_ioeventfd(void *ctx, uint64_t gpa, unsigned len, int fd, bool assign)
{
	struct vm *vm = ctx;
	/* No datamatch: any 2-byte write to the queue's notify address
	 * (VIRTIO_F_NOTIFICATION_DATA is not offered). */
	struct kvm_ioeventfd io = {
	    .addr = gpa, .len = len, .fd = fd, .flags = assign ? 0 : KVM_IOEVENTFD_FLAG_DEASSIGN};
	return ioctl(vm->kvm.vm_fd, KVM_IOEVENTFD, &io) < 0 ? -errno : 0;
}

static int vm_virtio_watch(void *ctx, int fd, void (*ready)(void *arg), void *arg)
{
	return vm_watch_call_fd(ctx, fd, ready, arg);
}

static void vm_blk_ready(void *arg)
{
	virtio_blk_complete(arg);
}

static void vm_tap_ready(void *arg)
{
	virtio_net_tap_ready(arg);
}

static int vm_slot_for(struct vm *vm, const struct device_spec *d, unsigned i, uint8_t *next,
		       struct err *e)
{
	int slot = d->slot;
	if (slot < 0) {
		while (*next < PCI_SLOTS && vm->pci.slots[*next])
			(*next)++;
		slot = *next;
	}
	if (slot >= PCI_SLOTS || vm->pci.slots[slot])
		return err_set(e, EXIT_USAGE, "device %u: PCI slot %d is %s", i + 1, slot,
			       slot >= PCI_SLOTS ? "out of range" : "already taken");
	return slot;
}

static int vm_add_virtio(struct vm *vm, struct virtio_dev *dev, const char *name, int slot,
			 struct err *e)
{
	struct virtio_pci *vp = calloc(1, sizeof(*vp));
	struct virtio_host host = {vm_ioeventfd, vm_virtio_watch, vm, &vm->log};
	if (!vp)
		return err_set(e, EXIT_HOST, "out of memory");
	vm->virtio[vm->nvirtio++] = vp;
	int ret = virtio_pci_init(vp, dev, name, &vm->irq, &vm->mem, &host,
				  vm->opts->irq_mode == IRQ_MODE_INTX);
	if (!ret)
		ret = pci_bus_add_device(&vm->pci, &vp->pci, (uint8_t)slot, 1);
	if (ret)
		return err_set(e, EXIT_HOST, "cannot create %s: %s", name, strerror(-ret));
	return 0;
}

int vm_create_pci(struct vm *vm, struct err *e)
{
	const struct vm_options *o = vm->opts;
	const struct pci_bus_env env = {
	    &vm->pio,
	    &vm->mmio,
	    &vm->mem,
	    &vm->irq,
	    &vm->log,
	    {LAYOUT_PCI_MMIO_START, LAYOUT_PCI_MMIO_END, LAYOUT_PCI_IO_START, LAYOUT_PCI_IO_END}};
	int ret = pci_bus_init(&vm->pci, &env);
	if (ret)
		return err_set(e, EXIT_HOST, "cannot set up the PCI bus: %s", strerror(-ret));
	uint8_t next_slot = 1;
	for (unsigned i = 0; i < o->ndevices; i++) {
		const struct device_spec *d = &o->devices[i];
		int slot = vm_slot_for(vm, d, i, &next_slot, e);
		char name[24];
		if (slot < 0)
			return -1;
		if (d->kind == DEVICE_TESTDEV) {
			struct pci_testdev *t = calloc(1, sizeof(*t));
			if (!t)
				return err_set(e, EXIT_HOST, "out of memory");
			vm->testdevs[vm->ntestdevs++] = t;
			snprintf(name, sizeof(name), "testdev%u", vm->ntestdevs - 1);
			ret = pci_testdev_init(t, name, &vm->irq, d->vectors,
					       o->irq_mode == IRQ_MODE_INTX);
			if (!ret)
				ret = pci_bus_add_device(&vm->pci, &t->pci, (uint8_t)slot, 1);
			if (ret)
				return err_set(e, EXIT_HOST, "cannot create %s: %s", name,
					       strerror(-ret));
		} else if (d->kind == DEVICE_VIRTIO_BLK) {
			struct virtio_blk *b = calloc(1, sizeof(*b));
			if (!b)
				return err_set(e, EXIT_HOST, "out of memory");
			vm->blks[vm->nblks++] = b;
			snprintf(name, sizeof(name), "virtio-blk%u", vm->nblks - 1);
			if (virtio_blk_init(b, d->path, d->readonly, d->direct, e) ||
			    vm_add_virtio(vm, &b->vdev, name, slot, e))
				return -1;
			if (vm_watch_call_fd(vm, b->completion_fd, vm_blk_ready, b) < 0)
				return err_set(e, EXIT_HOST, "%s: cannot watch its completions",
					       name);
		} else if (d->kind == DEVICE_VIRTIO_NET) {
			struct virtio_net *n = calloc(1, sizeof(*n));
			if (!n)
				return err_set(e, EXIT_HOST, "out of memory");
			vm->nets[vm->nnets++] = n;
			snprintf(name, sizeof(name), "virtio-net%u", vm->nnets - 1);
			if (virtio_net_init(n, d->path, d->has_mac ? d->mac : NULL, e) ||
			    vm_add_virtio(vm, &n->vdev, name, slot, e))
				return -1;
			/* Edge-triggered: without receive buffers the tap stays readable. */
			if (vm_watch_call_fd_edge(vm, n->tap_fd, vm_tap_ready, n) < 0)
				return err_set(e, EXIT_HOST, "%s: cannot watch its tap", name);
			log_info(&vm->log, "%s: tap %s, MAC %02x:%02x:%02x:%02x:%02x:%02x", name,
				 n->ifname, n->mac[0], n->mac[1], n->mac[2], n->mac[3], n->mac[4],
				 n->mac[5]);
		} else if (d->kind == DEVICE_VIRTIO_CONSOLE) {
			struct virtio_console *c = calloc(1, sizeof(*c));
			struct char_sink out = {console_output, &vm->console};
			if (!c || virtio_console_init(c, out)) {
				free(c);
				return err_set(e, EXIT_HOST, "out of memory");
			}
			vm->vconsole = c;
			if (vm_add_virtio(vm, &c->vdev, "virtio-console", slot, e))
				return -1;
		} else {
			struct virtio_rng *r = calloc(1, sizeof(*r));
			if (!r || virtio_rng_init(r, NULL))
				return err_set(e, EXIT_HOST, "out of memory");
			vm->rngs[vm->nrngs++] = r;
			snprintf(name, sizeof(name), "virtio-rng%u", vm->nrngs - 1);
			if (vm_add_virtio(vm, &r->vdev, name, slot, e))
				return -1;
		}
	}
	if (pci_bus_assign_resources(&vm->pci))
		return err_set(e, EXIT_USAGE, "the devices' BARs do not fit in the PCI window");
	return 0;
}

void vm_destroy_pci(struct vm *vm)
{
	for (unsigned i = 0; i < vm->nvirtio; i++) {
		virtio_pci_destroy(vm->virtio[i]);
		free(vm->virtio[i]);
	}
	for (unsigned i = 0; i < vm->nblks; i++) {
		virtio_blk_destroy(vm->blks[i]);
		free(vm->blks[i]);
	}
	for (unsigned i = 0; i < vm->nrngs; i++) {
		virtio_rng_destroy(vm->rngs[i]);
		free(vm->rngs[i]);
	}
	for (unsigned i = 0; i < vm->nnets; i++) {
		virtio_net_destroy(vm->nets[i]);
		free(vm->nets[i]);
	}
	if (vm->vconsole) {
		virtio_console_destroy(vm->vconsole);
		free(vm->vconsole);
		vm->vconsole = NULL;
	}
	for (unsigned i = 0; i < vm->ntestdevs; i++) {
		pci_testdev_destroy(vm->testdevs[i]);
		free(vm->testdevs[i]);
	}
	vm->nvirtio = vm->nblks = vm->nrngs = vm->nnets = vm->ntestdevs = 0;
}

void vm_print_pci_stats(struct vm *vm, FILE *out)
{
#define C(x) ((unsigned long long)atomic_load(&(x)))
	for (unsigned i = 0; i < vm->ntestdevs; i++)
		fprintf(out, "vmm: stats: %s (slot %u): doorbells %llu, beyond the table %llu\n",
			vm->testdevs[i]->pci.name, vm->testdevs[i]->pci.slot,
			C(vm->testdevs[i]->doorbells), C(vm->testdevs[i]->bad_vectors));
	for (unsigned i = 0; i < vm->nvirtio; i++)
		fprintf(
		    out, "vmm: stats: %s (slot %u): notifies %llu, interrupts %llu, broken %llu\n",
		    vm->virtio[i]->pci.name, vm->virtio[i]->pci.slot, C(vm->virtio[i]->notifies),
		    C(vm->virtio[i]->interrupts), C(vm->virtio[i]->broken));
	for (unsigned i = 0; i < vm->nblks; i++) {
		struct virtio_blk_stats *s = &vm->blks[i]->stats;
		fprintf(
		    out,
		    "vmm: stats: virtio-blk%u %s: reads %llu writes %llu flushes %llu get-id %llu "
		    "ioerr %llu unsupported %llu bytes %llu bounced %llu\n",
		    i, vm->blks[i]->path, C(s->reads), C(s->writes), C(s->flushes), C(s->get_ids),
		    C(s->ioerrs), C(s->unsupported), C(s->bytes), C(s->bounced));
	}
	for (unsigned i = 0; i < vm->nrngs; i++)
		fprintf(out, "vmm: stats: virtio-rng%u: bytes %llu\n", i, C(vm->rngs[i]->bytes));
	for (unsigned i = 0; i < vm->nnets; i++)
		fprintf(
		    out,
		    "vmm: stats: virtio-net%u %s: rx %llu tx %llu rx-dropped %llu tx-errors %llu\n",
		    i, vm->nets[i]->ifname, C(vm->nets[i]->rx_frames), C(vm->nets[i]->tx_frames),
		    C(vm->nets[i]->rx_dropped), C(vm->nets[i]->tx_errors));
	if (vm->vconsole)
		fprintf(out, "vmm: stats: virtio-console: tx %llu rx %llu rx-dropped %llu bytes\n",
			C(vm->vconsole->tx_bytes), C(vm->vconsole->rx_bytes),
			C(vm->vconsole->rx_dropped));
#undef C
}
