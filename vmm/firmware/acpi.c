#include "vmm/firmware/acpi.h"

#include "vmm/base/layout.h"
#include "vmm/firmware/aml.h"

#include "devices/legacy/acpi_pm.h"
#include "vmm/base/err.h"
#include "vmm/base/guest_mem.h"

#include <stdio.h>
#include <string.h>

#define OEM_ID	     "VMMMSI"
#define OEM_TABLE_ID "MSIX-VMM"
#define CREATOR_ID   "VMMC"

/* 5.2.6 system description table header */
#define SDT_HEADER 36

uint8_t acpi_sum(const uint8_t *p, size_t len)
{
	uint8_t s = 0;
	while (len--)
		s = (uint8_t)(s + *p++);
	return s;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

struct builder {
	struct acpi_tables *t;
	bool overflow;
};

/* Room for a table of `len` bytes at the next 16-byte boundary; its
 * offset in t->buf, or 0 when it does not fit (offset 0 is the RSDP). */
static size_t reserve(struct builder *b, size_t len)
{
	size_t off = (b->t->len + 15) & ~(size_t)15;
	if (off + len > sizeof(b->t->buf)) {
		b->overflow = true;
		return 0;
	}
	memset(b->t->buf + off, 0, len);
	b->t->len = off + len;
	return off;
}

static void record(struct builder *b, const char *sig, size_t off, size_t len)
{
	struct acpi_table_at *at = &b->t->tables[b->t->ntables++];
	snprintf(at->sig, sizeof(at->sig), "%.4s", sig);
	at->off = off;
	at->len = len;
}

/* Fills a table's header and checksum once its body is written. */
static void sdt_finish(struct builder *b, size_t off, size_t len, const char *sig, uint8_t revision)
{
	uint8_t *h = b->t->buf + off;
	memcpy(h, sig, 4);
	put32(h + 4, (uint32_t)len);
	h[8] = revision;
	memcpy(h + 10, OEM_ID, 6);
	memcpy(h + 16, OEM_TABLE_ID, 8);
	put32(h + 24, 1);
	memcpy(h + 28, CREATOR_ID, 4);
	put32(h + 32, 1);
	h[9] = 0;
	h[9] = (uint8_t)-acpi_sum(h, len);
	record(b, sig, off, len);
}

static uint64_t gpa(const struct builder *b, size_t off)
{
	return b->t->base + off;
}

/* --- DSDT --- */

/* 6.2.13 _PRT: Package {Address (slot << 16 | 0xFFFF: any function), Pin
 * (0 = INTA#), Source (0: a global system interrupt), Source Index (the
 * GSI)}; such an interrupt is level-triggered, active-low, shared. */
static void dsdt_prt(struct aml *a, const struct machine_desc *m)
{
	aml_name(a, "_PRT");
	aml_package(a, (uint8_t)m->npci_irqs);
	for (size_t i = 0; i < m->npci_irqs; i++) {
		const struct machine_pci_irq *p = &m->pci_irqs[i];
		aml_package(a, 4);
		aml_integer(a, (uint64_t)p->slot << 16 | 0xFFFF);
		aml_integer(a, (uint64_t)(p->intx - 1));
		aml_integer(a, 0);
		aml_integer(a, p->ioapic_pin);
		aml_end(a);
	}
	aml_end(a);
}

/* The root bridge's resources (6.4): bus 0, the configuration ports,
 * I/O around them, and the BAR window the VMM places BARs in. */
static void dsdt_pci_crs(struct aml *a)
{
	uint8_t res[128];
	struct aml r;
	aml_init(&r, res, sizeof(res));
	aml_res_word_bus(&r, 0, 0);
	aml_res_io(&r, 0xCF8, 8);
	aml_res_word_io(&r, 0x0000, 0x0CF7);
	aml_res_word_io(&r, 0x0D00, 0xFFFF);
	aml_res_dword_mem(&r, (uint32_t)LAYOUT_PCI_MMIO_START, (uint32_t)(LAYOUT_PCI_MMIO_END - 1));
	aml_res_end(&r);
	if (r.overflow) {
		a->overflow = true;
		return;
	}
	aml_name(a, "_CRS");
	aml_buffer(a, res, r.len);
}

static void dsdt_com1(struct aml *a)
{
	uint8_t res[16];
	struct aml r;
	aml_init(&r, res, sizeof(res));
	aml_res_io(&r, MACHINE_COM1_PORT, 8);
	aml_res_irq(&r, 1u << MACHINE_COM1_IRQ);
	aml_res_end(&r);
	aml_device(a, "COM1");
	aml_name(a, "_HID");
	aml_eisaid(a, "PNP0501");
	aml_name(a, "_UID");
	aml_integer(a, 1);
	aml_name(a, "_CRS");
	aml_buffer(a, res, r.len);
	aml_end(a);
}

static void dsdt_body(struct aml *a, const struct machine_desc *m)
{
	aml_scope(a, "\\_SB_");
	aml_device(a, "PCI0");
	aml_name(a, "_HID");
	aml_eisaid(a, "PNP0A03");
	aml_name(a, "_UID");
	aml_integer(a, 0);
	aml_name(a, "_SEG");
	aml_integer(a, 0);
	aml_name(a, "_BBN");
	aml_integer(a, 0);
	dsdt_pci_crs(a);
	dsdt_prt(a, m);
	aml_end(a);
	dsdt_com1(a);
	/* 8.4: a processor device per vCPU, its _UID the MADT's ACPI
	 * Processor UID. */
	for (unsigned i = 0; i < m->ncpus; i++) {
		char name[16];
		snprintf(name, sizeof(name), "C%03X", i & 0xFFF);
		aml_device(a, name);
		aml_name(a, "_HID");
		aml_string(a, "ACPI0007");
		aml_name(a, "_UID");
		aml_integer(a, i);
		aml_end(a);
	}
	aml_end(a);
	/* 7.4.2: \_S5 {SLP_TYPa, SLP_TYPb, reserved, reserved}: the value the
	 * OS writes to the sleep control register to power off. */
	aml_name(a, "\\_S5_");
	aml_package(a, 4);
	aml_integer(a, ACPI_PM_S5_TYPE);
	aml_integer(a, ACPI_PM_S5_TYPE);
	aml_integer(a, 0);
	aml_integer(a, 0);
	aml_end(a);
}

static size_t build_dsdt(struct builder *b, const struct machine_desc *m)
{
	static uint8_t aml[0x8000];
	struct aml a;
	aml_init(&a, aml, sizeof(aml));
	dsdt_body(&a, m);
	if (a.overflow || a.depth) {
		b->overflow = true;
		return 0;
	}
	size_t len = SDT_HEADER + a.len, off = reserve(b, len);
	if (!b->overflow) {
		memcpy(b->t->buf + off + SDT_HEADER, aml, a.len);
		sdt_finish(b, off, len, "DSDT", 2); /* revision 2: 64-bit integers */
	}
	return off;
}

/* --- FADT (5.2.9, table 5.9) --- */

/* A Generic Address Structure (5.2.3.2) for a byte-wide I/O port. */
static void gas_io8(uint8_t *p, uint16_t port)
{
	p[0] = 1; /* system I/O */
	p[1] = 8; /* bit width */
	p[2] = 0; /* bit offset */
	p[3] = 1; /* byte access */
	put64(p + 4, port);
}

#define FADT_LEN		  276
#define FADT_F_PWR_BUTTON	  (1u << 4) /* no fixed power button */
#define FADT_F_SLP_BUTTON	  (1u << 5) /* no fixed sleep button */
#define FADT_F_RESET_REG_SUP	  (1u << 10)
#define FADT_F_HW_REDUCED	  (1u << 20)
#define FADT_BOOT_LEGACY_DEVICES  (1u << 0)
#define FADT_BOOT_8042		  (1u << 1)
#define FADT_BOOT_VGA_NOT_PRESENT (1u << 2)
#define ACPI_SCI_IRQ		  9

static size_t build_fadt(struct builder *b, size_t dsdt)
{
	size_t off = reserve(b, FADT_LEN);
	if (b->overflow)
		return 0;
	uint8_t *f = b->t->buf + off;
	put32(f + 40, (uint32_t)gpa(b, dsdt)); /* DSDT, and X_DSDT the same */
	put16(f + 46, ACPI_SCI_IRQ);	       /* unused when hardware-reduced */
	put16(f + 109, FADT_BOOT_LEGACY_DEVICES | FADT_BOOT_8042 | FADT_BOOT_VGA_NOT_PRESENT);
	put32(f + 112,
	      FADT_F_PWR_BUTTON | FADT_F_SLP_BUTTON | FADT_F_RESET_REG_SUP | FADT_F_HW_REDUCED);
	gas_io8(f + 116, ACPI_PM_RESET);
	f[128] = ACPI_PM_RESET_VALUE;
	f[131] = 0; /* FADT minor version: ACPI 6.0 */
	put64(f + 140, gpa(b, dsdt));
	gas_io8(f + 244, ACPI_PM_SLEEP_CONTROL);
	gas_io8(f + 256, ACPI_PM_SLEEP_STATUS);
	memcpy(f + 268, "VMM-MSIX", 8); /* hypervisor vendor identity */
	sdt_finish(b, off, FADT_LEN, "FACP", 6);
	return off;
}

/* --- MADT (5.2.12) --- */

#define MADT_PCAT_COMPAT  1
#define MADT_LAPIC	  0
#define MADT_IOAPIC	  1
#define MADT_ISO	  2
#define MADT_LAPIC_NMI	  4
#define MPS_INTI_LEVEL_HI 0x000D /* trigger level (bits 3:2 = 11), polarity high (01) */

static size_t build_madt(struct builder *b, const struct machine_desc *m)
{
	size_t len = SDT_HEADER + 8 + 8 * m->ncpus + 12 + 10 + 6;
	size_t off = reserve(b, len);
	if (b->overflow)
		return 0;
	uint8_t *t = b->t->buf + off, *p = t + SDT_HEADER;
	put32(p, (uint32_t)LAYOUT_LAPIC_BASE);
	put32(p + 4, MADT_PCAT_COMPAT); /* an 8259 pair is there (KVM's PIC) */
	p += 8;
	for (unsigned i = 0; i < m->ncpus; i++, p += 8) {
		p[0] = MADT_LAPIC;
		p[1] = 8;
		p[2] = (uint8_t)i; /* ACPI Processor UID: the DSDT's C%03X _UID */
		p[3] = (uint8_t)i; /* APIC ID, as the MP table's */
		put32(p + 4, 1);   /* enabled */
	}
	p[0] = MADT_IOAPIC;
	p[1] = 12;
	p[2] = machine_ioapic_id(m);
	put32(p + 4, (uint32_t)LAYOUT_IOAPIC_BASE);
	put32(p + 8, 0); /* GSI base: pins 0-23 are GSIs 0-23 */
	p += 12;
	/* ISA IRQs are identity-mapped (IRQ n -> GSI n, IRQ 0 included: KVM's
	 * PIT drives GSI 0), as in the MP table, which needs no override;
	 * the SCI's is given, as the spec expects, even though a
	 * hardware-reduced machine raises none. */
	p[0] = MADT_ISO;
	p[1] = 10;
	p[2] = 0; /* ISA */
	p[3] = ACPI_SCI_IRQ;
	put32(p + 4, ACPI_SCI_IRQ);
	put16(p + 8, MPS_INTI_LEVEL_HI);
	p += 10;
	/* LINT1 is NMI on every processor (0xFF), as the MP table says. */
	p[0] = MADT_LAPIC_NMI;
	p[1] = 6;
	p[2] = 0xFF;
	put16(p + 3, 0);
	p[5] = 1;
	sdt_finish(b, off, len, "APIC", 5);
	return off;
}

/* --- XSDT and RSDP --- */

static size_t build_xsdt(struct builder *b, const size_t *tables, unsigned n)
{
	size_t len = SDT_HEADER + 8 * n, off = reserve(b, len);
	if (b->overflow)
		return 0;
	for (unsigned i = 0; i < n; i++)
		put64(b->t->buf + off + SDT_HEADER + 8 * i, gpa(b, tables[i]));
	sdt_finish(b, off, len, "XSDT", 1);
	return off;
}

/* 5.2.5.3: revision 2 (ACPI 2.0+), the XSDT only (RsdtAddress 0). */
static void build_rsdp(struct builder *b, size_t xsdt)
{
	uint8_t *r = b->t->buf; /* reserved first, at offset 0 */
	memcpy(r, "RSD PTR ", 8);
	memcpy(r + 9, OEM_ID, 6);
	r[15] = 2;
	put32(r + 16, 0);
	put32(r + 20, 36);
	put64(r + 24, gpa(b, xsdt));
	r[8] = (uint8_t)-acpi_sum(r, 20);
	r[32] = (uint8_t)-acpi_sum(r, 36);
	record(b, "RSDP", 0, 36);
}

int acpi_build(const struct machine_desc *m, uint64_t base, struct acpi_tables *t, struct err *e)
{
	if (m->ncpus == 0 || m->ncpus > 254)
		return err_set(e, ERR_INPUT, "%u CPUs do not fit in the MADT", m->ncpus);
	if ((base & 15) || base < 0xE0000 || base + sizeof(t->buf) > LAYOUT_BIOS_END)
		return err_set(e, ERR_INPUT,
			       "ACPI tables at 0x%llx: not 16-byte aligned in the "
			       "BIOS area 0xE0000-0xFFFFF",
			       (unsigned long long)base);
	memset(t, 0, sizeof(*t));
	t->base = base;
	struct builder b = {t, false};
	reserve(&b, 36); /* the RSDP first, where a scan finds it */
	size_t dsdt = build_dsdt(&b, m);
	size_t fadt = build_fadt(&b, dsdt);
	size_t madt = build_madt(&b, m);
	size_t listed[2] = {fadt, madt};
	size_t xsdt = build_xsdt(&b, listed, 2);
	if (b.overflow)
		return err_set(e, ERR_INPUT,
			       "the ACPI tables of %u CPUs and %zu PCI interrupts "
			       "do not fit in %zu KiB",
			       m->ncpus, m->npci_irqs, sizeof(t->buf) >> 10);
	build_rsdp(&b, xsdt);
	t->rsdp = base;
	return 0;
}

int acpi_write(struct guest_mem *mem, const struct acpi_tables *t, struct err *e)
{
	if (guest_mem_write(mem, t->base, t->buf, t->len))
		return err_set(e, ERR_INPUT, "guest RAM does not cover the ACPI tables");
	return 0;
}
