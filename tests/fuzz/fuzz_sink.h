/* What the PCI fuzz targets share: the interrupt sink (counts what reaches
 * it, remembers the level of each line) and the machine's BAR window. */
#ifndef FUZZ_SINK_H
#define FUZZ_SINK_H

#include "devices/pci/pci.h"
#include "irq/irq.h"
#include "vmm/base/layout.h"

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

#endif
