#include "devices/pci/pci_testdev.h"

#include "vmm/base/align.h"

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

static void testdev_regs_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct pci_testdev *t = opaque;
	uint32_t v;
	if (len != 4 || (off & 3))
		return;
	memcpy(&v, data, 4);
	if (off == TESTDEV_REG_DOORBELL) {
		atomic_fetch_add(&t->doorbells, 1);
		if (v >= t->msix.nvectors && msix_enabled(&t->msix)) {
			atomic_fetch_add(&t->bad_vectors, 1);
			return;
		}
		if (msix_fire(&t->msix, v))
			return;
		lock_take(&t->lock);
		t->intx_pending++;
		pci_device_set_intx(&t->pci, true);
		lock_release(&t->lock);
	} else if (off == TESTDEV_REG_INTX_ACK) {
		lock_take(&t->lock);
		t->intx_pending = 0;
		pci_device_set_intx(&t->pci, false);
		lock_release(&t->lock);
	}
}

static void testdev_msix_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	struct pci_testdev *t = opaque;
	if (!msix_bar_read(&t->msix, 1, off, data, len))
		memset(data, 0, len); /* the rest of the BAR reads 0 */
}

static void testdev_msix_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct pci_testdev *t = opaque;
	msix_bar_write(&t->msix, 1, off, data, len);
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
		     unsigned nvectors, bool msix_hidden)
{
	memset(t, 0, sizeof(*t));
	lock_init(&t->lock, "PCI testdev", LOCK_RANK_PCI_FUNCTION);
	pci_device_init(&t->pci, name, TESTDEV_VENDOR, TESTDEV_DEVICE, 0xFF0000, 1);
	pci_device_set_subsystem(&t->pci, TESTDEV_VENDOR, 0x0001);
	t->pci.ops = &testdev_ops;
	t->pci.opaque = t;
	int ret = pci_device_add_bar(&t->pci, 0, PCI_BAR_MEM32, 4096, false, testdev_regs_read,
				     testdev_regs_write, t);
	if (!ret)
		ret = pci_device_add_bar(&t->pci, 1, PCI_BAR_MEM32,
					 pow2_at_least(msix_bar_bytes(nvectors), 4096), false,
					 testdev_msix_read, testdev_msix_write, t);
	if (!ret)
		ret = msix_init(&t->msix, &t->pci, irq, nvectors, 1, 0, msix_pba_offset(nvectors),
				msix_hidden);
	return ret;
}

void pci_testdev_destroy(struct pci_testdev *t)
{
	msix_destroy(&t->msix);
}
