/* What the PCI fuzz targets share: the interrupt sink (counts what reaches
 * it, remembers the level of each line), the machine's BAR window, and the
 * machine each run builds around its devices (buses, log, interrupt door,
 * PCI bus 0). */
#ifndef FUZZ_SINK_H
#define FUZZ_SINK_H

#include "devices/pci/pci.h"
#include "irq/irq.h"
#include "vmm/base/bus.h"
#include "vmm/base/layout.h"
#include "vmm/base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rec_sink {
	unsigned lines, msis, routes, irqfds;
	int level[64];
};

static int rec_set_line(void *ctx, uint32_t gsi, int level)
{
	struct rec_sink *s = ctx;
	s->lines++;
	if (gsi < 64)
		s->level[gsi] = level;
	return 0;
}
static int rec_signal_msi(void *ctx, uint64_t addr, uint32_t data)
{
	struct rec_sink *s = ctx;
	(void)addr;
	(void)data;
	s->msis++;
	return 1;
}
static int rec_set_routes(void *ctx, const struct irq_route *routes, unsigned n)
{
	struct rec_sink *s = ctx;
	(void)routes;
	(void)n;
	s->routes++;
	return 0;
}
static int rec_irqfd_assign(void *ctx, int fd, uint32_t gsi, int resample_fd)
{
	struct rec_sink *s = ctx;
	(void)fd;
	(void)gsi;
	(void)resample_fd;
	s->irqfds++;
	return 0;
}
static const struct irq_sink_ops rec_ops = {
    .set_line = rec_set_line,
    .signal_msi = rec_signal_msi,
    .set_routes = rec_set_routes,
    .irqfd_assign = rec_irqfd_assign,
};

/* The machine's BAR window (vmm/base/layout.h), as ./vmm places BARs. */
static const struct pci_window fuzz_pci_window = LAYOUT_PCI_WINDOW;

struct fuzz_pci_machine {
	struct bus pio, mmio;
	struct log log;
	struct rec_sink sink;
	struct irq_router irq;
	struct pci_bus pci;
};

/* From zero: the buses, a log into `logf`, the interrupt door over the
 * recording sink (IRQ_MSI_SIGNAL, IRQ_INTX_LINE) and an empty bus 0. */
static inline void fuzz_pci_machine_init(struct fuzz_pci_machine *m, const struct guest_mem *ram,
					 FILE *logf)
{
	memset(m, 0, sizeof(*m));
	log_init(&m->log, LOG_DEBUG, logf);
	bus_init(&m->pio, "pio", &m->log);
	bus_init(&m->mmio, "mmio", &m->log);
	irq_router_init(&m->irq, &rec_ops, &m->sink,
			&(struct irq_router_config){&m->log, IRQ_MSI_SIGNAL, IRQ_INTX_LINE});
	const struct pci_bus_env env = {&m->pio, &m->mmio, ram, &m->irq, &m->log, fuzz_pci_window};
	if (pci_bus_init(&m->pci, &env))
		abort();
}

/* After the devices on it are destroyed. */
static inline void fuzz_pci_machine_destroy(struct fuzz_pci_machine *m)
{
	irq_router_destroy(&m->irq);
	bus_destroy(&m->pio);
	bus_destroy(&m->mmio);
}

/* The address the guest programmed into BAR `bar` of d. */
static inline uint64_t fuzz_bar_addr(const struct pci_device *d, int bar)
{
	return pci_cfg_get32(d, PCI_BASE_ADDRESS_0 + 4 * (unsigned)bar) & ~0xFULL;
}

#endif
