#include "devices/pci/pci_irqbench.h"

#include "vmm/base/clock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

static void irqbench_io_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	struct pci_irqbench *b = opaque;
	uint32_t v = 0;
	lock_take(&b->lock);
	if (off == IRQBENCH_REG_DELAY_US)
		v = b->delay_us;
	else if (off == IRQBENCH_REG_SAMPLES)
		v = b->nsamples;
	lock_release(&b->lock);
	memset(data, 0, len);
	memcpy(data, &v, len < 4 ? len : 4);
}

/* Room for one more sample (lock held); the store grows up to the cap. */
static bool irqbench_room(struct pci_irqbench *b)
{
	if (b->nsamples < b->cap)
		return true;
	if (b->cap >= IRQBENCH_MAX_SAMPLES)
		return false;
	uint32_t cap = b->cap ? b->cap * 2 : 4096;
	uint64_t *grown = realloc(b->samples_ns, cap * sizeof(*grown));
	if (!grown)
		return false;
	b->samples_ns = grown;
	b->cap = cap;
	return true;
}

/* The handler's acknowledgement, on a vCPU thread: t1 first. */
static void irqbench_ack(struct pci_irqbench *b)
{
	uint64_t t1 = clock_now_ns();
	atomic_fetch_add(&b->acks, 1);
	lock_take(&b->lock);
	if (!b->outstanding) {
		/* A re-delivery, or a guest that acknowledges twice. */
		atomic_fetch_add(&b->stray_acks, 1);
	} else if (irqbench_room(b)) {
		b->samples_ns[b->nsamples++] = t1 - b->t0_ns;
	} else {
		atomic_fetch_add(&b->dropped, 1);
	}
	b->outstanding = false;
	lock_release(&b->lock);
	pci_device_set_intx(&b->pci, false);
}

static void irqbench_arm(struct pci_irqbench *b, uint32_t what)
{
	lock_take(&b->lock);
	uint32_t us = b->delay_us ? b->delay_us : 1;
	struct itimerspec its = {.it_value = {us / 1000000, (long)(us % 1000000) * 1000}};
	b->armed = what;
	b->timer_running = timerfd_settime(b->timer_fd, 0, &its, NULL) == 0;
	lock_release(&b->lock);
}

static void irqbench_io_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct pci_irqbench *b = opaque;
	uint32_t v = 0;
	memcpy(&v, data, len < 4 ? len : 4);
	switch (off) {
	case IRQBENCH_REG_ACK: irqbench_ack(b); break;
	case IRQBENCH_REG_ARM: irqbench_arm(b, v); break;
	case IRQBENCH_REG_DELAY_US:
		lock_take(&b->lock);
		b->delay_us = v;
		lock_release(&b->lock);
		break;
	default: break; /* SAMPLES is read-only */
	}
}

void pci_irqbench_timer_ready(struct pci_irqbench *b)
{
	uint64_t expirations;
	if (read(b->timer_fd, &expirations, sizeof(expirations)) < 0)
		return;
	lock_take(&b->lock);
	if (!b->timer_running) {
		lock_release(&b->lock);
		return;
	}
	uint32_t what = b->armed;
	b->timer_running = false;
	b->outstanding = true;
	b->t0_ns = clock_now_ns();
	lock_release(&b->lock);
	atomic_fetch_add(&b->fires, 1);
	/* As a completion would: MSI-X vector `what`, or INTx while MSI-X is off. */
	msix_raise(&b->msix, what, NULL, NULL, NULL);
}

static void irqbench_config_written(struct pci_device *d, unsigned off, unsigned len)
{
	struct pci_irqbench *b = d->opaque;
	msix_config_written(&b->msix, off, len);
}

static const struct pci_device_ops irqbench_ops = {
    .config_written = irqbench_config_written,
};

int pci_irqbench_init(struct pci_irqbench *b, const char *name, struct irq_router *irq,
		      unsigned nvectors, enum irq_mode mode)
{
	memset(b, 0, sizeof(*b));
	lock_init(&b->lock, "irqbench", LOCK_RANK_PCI_FUNCTION);
	b->delay_us = IRQBENCH_DELAY_US;
	b->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (b->timer_fd < 0)
		return -errno;
	pci_device_init(&b->pci, name, IRQBENCH_VENDOR, IRQBENCH_DEVICE, 0xFF0000, 1);
	pci_device_set_subsystem(&b->pci, IRQBENCH_VENDOR, 0x0001);
	b->pci.ops = &irqbench_ops;
	b->pci.opaque = b;
	int ret = pci_device_add_bar(&b->pci, 0, PCI_BAR_IO, IRQBENCH_IO_SIZE, false,
				     irqbench_io_read, irqbench_io_write, b);
	return ret ? ret : msix_init(&b->msix, &b->pci, irq, mode, nvectors, IRQBENCH_MSIX_BAR);
}

int pci_irqbench_write_samples(struct pci_irqbench *b, FILE *out)
{
	lock_take(&b->lock);
	fprintf(out,
		"# irqbench %s: t1 - t0 in ns, t0 before the I/O thread raises the interrupt, t1 "
		"at the handler's ACK port write\n"
		"# samples %u fires %llu acks %llu stray-acks %llu dropped %llu\n",
		b->pci.name, b->nsamples, (unsigned long long)atomic_load(&b->fires),
		(unsigned long long)atomic_load(&b->acks),
		(unsigned long long)atomic_load(&b->stray_acks),
		(unsigned long long)atomic_load(&b->dropped));
	for (uint32_t i = 0; i < b->nsamples; i++)
		fprintf(out, "%llu\n", (unsigned long long)b->samples_ns[i]);
	lock_release(&b->lock);
	return ferror(out) ? -EIO : 0;
}

void pci_irqbench_destroy(struct pci_irqbench *b)
{
	if (b->timer_fd >= 0)
		close(b->timer_fd);
	b->timer_fd = -1;
	free(b->samples_ns);
	b->samples_ns = NULL;
	msix_destroy(&b->msix);
}
