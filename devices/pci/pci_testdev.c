#include "devices/pci/pci_testdev.h"

#include <string.h>

static void testdev_regs_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	struct pci_testdev *t = opaque;
	uint32_t v = 0xFFFFFFFFu;
	memset(data, 0xFF, len);
	if (len != 4 || (off & 3))
		return;
	switch (off) {
	case TESTDEV_REG_MAGIC: v = TESTDEV_MAGIC; break;
	case TESTDEV_REG_NVECTORS: v = t->msix.nvectors; break;
	case TESTDEV_REG_INTX_PENDING:
		lock_take(&t->lock);
		v = t->intx_pending;
		lock_release(&t->lock);
		break;
	case TESTDEV_REG_DOORBELLS: v = (uint32_t)atomic_load(&t->doorbells); break;
	default: v = 0; break;
	}
	memcpy(data, &v, 4);
}

/* An INTx doorbell, under t->lock before the pin rises: one more to ack. */
static void testdev_latch(void *opaque)
{
	struct pci_testdev *t = opaque;
	t->intx_pending++;
}

static void testdev_regs_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct pci_testdev *t = opaque;
	uint32_t v;
	if (len != 4 || (off & 3))
		return;
	memcpy(&v, data, 4);
	if (off == TESTDEV_REG_DOORBELL) {
		atomic_fetch_add(&t->doorbells, 1);
		if (msix_raise(&t->msix, v, &t->lock, testdev_latch, t) == MSIX_SENT_NONE)
			atomic_fetch_add(&t->bad_vectors, 1);
	} else if (off == TESTDEV_REG_INTX_ACK) {
		lock_take(&t->lock);
		t->intx_pending = 0;
		pci_device_set_intx(&t->pci, false);
		lock_release(&t->lock);
	}
}

static void testdev_config_written(struct pci_device *d, unsigned off, unsigned len)
{
	struct pci_testdev *t = d->opaque;
	msix_config_written(&t->msix, off, len);
}

static const struct pci_device_ops testdev_ops = {
    .config_written = testdev_config_written,
};

int pci_testdev_init(struct pci_testdev *t, const char *name, struct irq_router *irq,
		     unsigned nvectors, enum irq_mode mode)
{
	memset(t, 0, sizeof(*t));
	lock_init(&t->lock, "PCI testdev", LOCK_RANK_PCI_FUNCTION);
	pci_device_init(&t->pci, name, TESTDEV_VENDOR, TESTDEV_DEVICE, 0xFF0000, 1);
	pci_device_set_subsystem(&t->pci, TESTDEV_VENDOR, 0x0001);
	t->pci.ops = &testdev_ops;
	t->pci.opaque = t;
	int ret = pci_device_add_bar(&t->pci, 0, PCI_BAR_MEM32, 4096, false, testdev_regs_read,
				     testdev_regs_write, t);
	return ret ? ret : msix_init(&t->msix, &t->pci, irq, mode, nvectors, TESTDEV_MSIX_BAR);
}

void pci_testdev_destroy(struct pci_testdev *t)
{
	msix_destroy(&t->msix);
}
