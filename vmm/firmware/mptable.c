#include "vmm/firmware/mptable.h"

#include "vmm/base/err.h"
#include "vmm/base/guest_mem.h"
#include "vmm/base/layout.h"

#include <string.h>

/* MP spec 1.4 section 4.1 (floating pointer) and 4.2 (table header). */
struct mpf_intel {
	char signature[4];
	uint32_t physptr;
	uint8_t length;
	uint8_t specification;
	uint8_t checksum;
	uint8_t feature[5];
} __attribute__((packed));

struct mpc_table {
	char signature[4];
	uint16_t length;
	uint8_t spec;
	uint8_t checksum;
	char oem[8];
	char productid[12];
	uint32_t oemptr;
	uint16_t oemsize;
	uint16_t entry_count;
	uint32_t lapic;
	uint16_t ext_length;
	uint8_t ext_checksum;
	uint8_t reserved;
} __attribute__((packed));

/* Section 4.3, entry types 0-4. */
struct mpc_cpu {
	uint8_t type, apicid, apicver, cpuflag;
	uint32_t cpufeature_sig, featureflag;
	uint32_t reserved[2];
} __attribute__((packed));

struct mpc_bus {
	uint8_t type, busid;
	char bustype[6];
} __attribute__((packed));

struct mpc_ioapic {
	uint8_t type, apicid, apicver, flags;
	uint32_t apicaddr;
} __attribute__((packed));

struct mpc_intsrc {
	uint8_t type, irqtype;
	uint16_t irqflag;
	uint8_t srcbus, srcbusirq, dstapic, dstirq;
} __attribute__((packed));

enum { MP_PROCESSOR = 0, MP_BUS = 1, MP_IOAPIC = 2, MP_INTSRC = 3, MP_LINTSRC = 4 };
enum { MP_INT = 0, MP_NMI = 1, MP_EXTINT = 3 };
#define CPU_ENABLED	1
#define CPU_BOOTPROC	2
#define MPC_APIC_USABLE 1
#define MP_IRQ_CONFORM	0x00
/* Level-triggered (bits 3:2 = 11), active low (bits 1:0 = 11): PCI INTx. */
#define MP_IRQ_PCI_LEVEL_LOW 0x0F
#define LAPIC_VERSION	     0x14
#define IOAPIC_VERSION	     0x11

static uint8_t mp_checksum(const uint8_t *p, size_t len)
{
	uint8_t sum = 0;
	while (len--)
		sum = (uint8_t)(sum + *p++);
	return (uint8_t)-sum;
}

struct mp_writer {
	uint8_t buf[LAYOUT_MPTABLE_MAX];
	size_t len;
	uint16_t count;
	int overflow;
};

static void mp_put(struct mp_writer *w, const void *entry, size_t len)
{
	if (w->len + len > sizeof(w->buf)) {
		w->overflow = 1;
		return;
	}
	memcpy(w->buf + w->len, entry, len);
	w->len += len;
	w->count++;
}

static void mp_intsrc(struct mp_writer *w, uint8_t type, uint8_t irqtype, uint16_t flags,
		      uint8_t bus, uint8_t busirq, uint8_t dst, uint8_t dstpin)
{
	struct mpc_intsrc s = {type, irqtype, flags, bus, busirq, dst, dstpin};
	mp_put(w, &s, sizeof(s));
}

int mptable_write(struct guest_mem *m, const struct machine_desc *c, struct err *e)
{
	struct mp_writer w; /* 64 KiB scratch on the stack: no shared state */
	struct mpf_intel mpf;
	struct mpc_table hdr;
	uint8_t ioapic_id = machine_ioapic_id(c);
	const size_t table_off = sizeof(mpf);

	if (c->ncpus == 0 || c->ncpus > 254)
		return err_set(e, ERR_INPUT, "%u CPUs do not fit in an MP table", c->ncpus);
	memset(&w, 0, sizeof(w));
	w.len = table_off + sizeof(hdr);
	for (unsigned i = 0; i < c->ncpus; i++) {
		struct mpc_cpu cpu = {
		    .type = MP_PROCESSOR,
		    .apicid = (uint8_t)i,
		    .apicver = LAPIC_VERSION,
		    .cpuflag = (uint8_t)(CPU_ENABLED | (i == 0 ? CPU_BOOTPROC : 0)),
		    .cpufeature_sig = c->cpu_signature,
		    .featureflag = c->cpu_features,
		};
		mp_put(&w, &cpu, sizeof(cpu));
	}
	struct mpc_bus pci = {MP_BUS, MP_BUS_PCI, {'P', 'C', 'I', ' ', ' ', ' '}};
	struct mpc_bus isa = {MP_BUS, MP_BUS_ISA, {'I', 'S', 'A', ' ', ' ', ' '}};
	mp_put(&w, &pci, sizeof(pci));
	mp_put(&w, &isa, sizeof(isa));
	struct mpc_ioapic ioapic = {MP_IOAPIC, ioapic_id, IOAPIC_VERSION, MPC_APIC_USABLE,
				    (uint32_t)LAYOUT_IOAPIC_BASE};
	mp_put(&w, &ioapic, sizeof(ioapic));
	/* ISA IRQs are identity-mapped onto IOAPIC pins 0-15, as KVM wires
	 * them (the PIT is on GSI 0, not pin 2). */
	for (uint8_t irq = 0; irq < 16; irq++)
		mp_intsrc(&w, MP_INTSRC, MP_INT, MP_IRQ_CONFORM, MP_BUS_ISA, irq, ioapic_id, irq);
	/* PCI: source IRQ = (slot << 2) | (INTx# - 1) (MP spec 1.4, D.3). */
	for (size_t i = 0; i < c->npci_irqs; i++) {
		const struct machine_pci_irq *p = &c->pci_irqs[i];
		if (p->intx < 1 || p->intx > 4 || p->slot > 31)
			return err_set(e, ERR_INPUT, "bad PCI interrupt source slot %u INT%c#",
				       p->slot, 'A' + p->intx - 1);
		mp_intsrc(&w, MP_INTSRC, MP_INT, MP_IRQ_PCI_LEVEL_LOW, MP_BUS_PCI,
			  (uint8_t)((p->slot << 2) | (p->intx - 1)), ioapic_id, p->ioapic_pin);
	}
	/* LINT0 is the 8259's virtual wire, LINT1 NMI, on every local APIC. */
	mp_intsrc(&w, MP_LINTSRC, MP_EXTINT, MP_IRQ_CONFORM, MP_BUS_ISA, 0, 0xFF, 0);
	mp_intsrc(&w, MP_LINTSRC, MP_NMI, MP_IRQ_CONFORM, MP_BUS_ISA, 0, 0xFF, 1);
	if (w.overflow)
		return err_set(e, ERR_INPUT, "MP table does not fit in the F segment");

	memset(&hdr, 0, sizeof(hdr));
	memcpy(hdr.signature, "PCMP", 4);
	hdr.length = (uint16_t)(w.len - table_off);
	hdr.spec = 4;
	memcpy(hdr.oem, "VMM     ", 8);
	memcpy(hdr.productid, "MSIX-VMM    ", 12);
	hdr.entry_count = w.count;
	hdr.lapic = (uint32_t)LAYOUT_LAPIC_BASE;
	memcpy(w.buf + table_off, &hdr, sizeof(hdr));
	w.buf[table_off + offsetof(struct mpc_table, checksum)] =
	    mp_checksum(w.buf + table_off, hdr.length);

	memset(&mpf, 0, sizeof(mpf));
	memcpy(mpf.signature, "_MP_", 4);
	mpf.physptr = (uint32_t)(LAYOUT_MPTABLE + table_off);
	mpf.length = 1; /* in 16-byte units */
	mpf.specification = 4;
	memcpy(w.buf, &mpf, sizeof(mpf));
	w.buf[offsetof(struct mpf_intel, checksum)] = mp_checksum(w.buf, sizeof(mpf));
	if (guest_mem_write(m, LAYOUT_MPTABLE, w.buf, w.len))
		return err_set(e, ERR_INPUT, "guest RAM does not cover the MP table");
	return (int)w.len;
}
