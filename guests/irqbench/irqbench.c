/*
 * irqbench: the guest of the host-side interrupt latency benchmark
 * (scripts/vmm-bench). It finds the VMM's irqbench PCI device (vendor
 * 0x1234, device 0x7E58, class 0xFF0000; BAR0 = 16 I/O ports, BAR1 = the
 * MSI-X table and PBA), routes its interrupt to one IDT vector (MSI-X table
 * entry, or the INTx pin's IOAPIC entry from the MP table), and then, in
 * ring 0, for each sample: `out ARM`, `sti; hlt`; the handler is `out ACK`,
 * the LAPIC EOI and iretq (irqbench.inc, the same code as the raw-KVM
 * floor's guest). The VMM stamps both ends and writes the samples
 * (`--device irqbench,samples=FILE`); the guest only drives.
 *
 * Keys: irqbench.mode=msix|intx (default msix), irqbench.samples=N
 * (default 2000), irqbench.vector=I (MSI-X table entry, default 0). Any
 * other irqbench.* key is an error.
 *
 * Output: "irqbench: ..." lines; the last is "irqbench: done: N samples
 * ..." and the guest leaves through the debug-exit port with 0 (VMM exit
 * code 1), or "irqbench: FAIL ..." and exit value 1 (VMM exit code 3).
 *
 * Set-up and reporting run at CPL 3 (native on our KVM hosts); only the
 * loop and the handler run in the emulated ring 0.
 */
#include "guest/apic.h"
#include "guest/cmdline.h"
#include "guest/irq.h"
#include "guest/kit.h"
#include "guest/msix.h"
#include "guest/pcienum.h"

#define IRQBENCH_VENDOR 0x1234
#define IRQBENCH_DEVICE 0x7E58
#define IRQBENCH_CLASS	0xFF0000u
#define REG_ACK		0x0
#define REG_ARM		0x4
#define REG_DELAY	0x8
#define REG_SAMPLES	0xC
#define ARM_INTX	0xFFFFFFFFu

#define VECTOR		0x50
#define TICK_VECTOR	0x51 /* irqbench.inc: IRQBENCH_TICK_VECTOR, the rescue tick */
#define DEFAULT_SAMPLES 2000
#define MAX_FUNCS	32

uint32_t irqbench_loop(uint32_t base_port, uint32_t arm_value, uint64_t samples);
void irqbench_isr(void);
void irqbench_tick_isr(void);
extern uint16_t irqbench_ack_port;

static struct {
	bool msix;
	uint64_t samples;
	unsigned vec_index;
	uint16_t base;
	uint32_t arm;
	uint32_t delay_us;
	uint32_t before, after;
	unsigned slot, pin;
	char why[160];
} b;

static struct pci_func funcs[MAX_FUNCS];
static const char *const known_keys[] = {"irqbench.mode", "irqbench.samples", "irqbench.vector"};

__attribute__((format(printf, 1, 2))) static bool fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b.why, sizeof(b.why), fmt, ap);
	va_end(ap);
	return false;
}

static bool parse_cmdline(const struct boot_params *bp)
{
	const char *cl = cmdline_get(bp), *val;
	size_t len;
	uint64_t n;
	char first[64];

	b.msix = true;
	b.samples = DEFAULT_SAMPLES;
	if (!cl)
		return true;
	if (cmdline_unknown_keys(cl, "irqbench.", known_keys, 3, first, sizeof(first)))
		return fail("unknown command-line key \"%s\"", first);
	if (cmdline_value(cl, "irqbench.mode", &val, &len)) {
		if (len == 4 && !strncmp(val, "msix", 4))
			b.msix = true;
		else if (len == 4 && !strncmp(val, "intx", 4))
			b.msix = false;
		else
			return fail("irqbench.mode is \"%.*s\", not msix or intx", (int)len, val);
	}
	if (cmdline_value(cl, "irqbench.samples", &val, &len)) {
		if (!cmdline_parse_u64(val, len, &n) || n > 100000000)
			return fail("irqbench.samples \"%.*s\" is not a count", (int)len, val);
		b.samples = n;
	}
	if (cmdline_value(cl, "irqbench.vector", &val, &len)) {
		if (!cmdline_parse_u64(val, len, &n) || n > 2047)
			return fail("irqbench.vector \"%.*s\" is not 0..2047", (int)len, val);
		b.vec_index = (unsigned)n;
	}
	return true;
}

static bool route_msix(const struct pci_func *f, uint8_t apic_id)
{
	struct msix_info m;
	const char *why;
	uint8_t vecs[2048];

	if (!msix_probe(f->slot, f->bar, &m, &why))
		return fail("MSI-X: %s", why);
	if (b.vec_index >= m.nvec)
		return fail("irqbench.vector %u, but the table has %u entries", b.vec_index,
			    m.nvec);
	/* Entries up to the chosen one on the benchmark vector, the rest
	 * masked; only the chosen one is ever fired. */
	for (unsigned i = 0; i <= b.vec_index; i++)
		vecs[i] = VECTOR;
	if (!msix_enable(&m, apic_id, vecs, b.vec_index + 1, &why))
		return fail("MSI-X: %s", why);
	b.arm = b.vec_index;
	printf("irqbench: MSI-X: %u entries, table BAR%u+0x%x; entry %u -> vector 0x%02x\n", m.nvec,
	       m.table_bir, m.table_off, b.vec_index, VECTOR);
	return true;
}

static bool route_intx(const struct pci_func *f, uint8_t apic_id)
{
	struct mp_routing mp;
	unsigned matches;
	uint32_t lo, hi;

	mp_routing_load(&mp);
	if (!mp.ok)
		return fail("MP table: %s", mp.why);
	const struct mp_intsrc *e = mp_routing_pci_intx(&mp, f->slot, f->irq_pin, &matches);
	if (!e || e->dst_irq >= IRQ_IOAPIC_PINS)
		return fail("no MP I/O interrupt entry for 00:%02x.0 INT%c#", f->slot,
			    'A' + f->irq_pin - 1);
	irq_set_ioapic(mp.ioapic);
	uint32_t rte = irq_rte_for(VECTOR, e->flags);
	irq_pin_route(e->dst_irq, rte, apic_id, &lo, &hi);
	b.pin = e->dst_irq;
	b.arm = ARM_INTX;
	printf("irqbench: INTx: INT%c# -> IOAPIC pin %u, vector 0x%02x, %s, %s\n",
	       'A' + f->irq_pin - 1, b.pin, VECTOR, rte & IOAPIC_RTE_LEVEL ? "level" : "edge",
	       rte & IOAPIC_RTE_ACTIVE_LOW ? "active low" : "active high");
	return true;
}

static bool prepare(const struct boot_params *bp)
{
	const struct pci_func *f = NULL;

	if (!parse_cmdline(bp))
		return false;
	unsigned n = pci_enum_bus0(funcs, MAX_FUNCS);
	for (unsigned i = 0; i < n && i < MAX_FUNCS && !f; i++)
		if (funcs[i].vendor == IRQBENCH_VENDOR && funcs[i].device == IRQBENCH_DEVICE)
			f = &funcs[i];
	if (!f)
		return fail("no irqbench device (%04x:%04x) on bus 0 (the VMM needs "
			    "--device irqbench)",
			    IRQBENCH_VENDOR, IRQBENCH_DEVICE);
	b.slot = f->slot;
	if ((f->class_rev >> 8) != IRQBENCH_CLASS)
		return fail("00:%02x.0 has class 0x%06x, not 0x%06x", f->slot, f->class_rev >> 8,
			    IRQBENCH_CLASS);
	if (!(f->bar_raw[0] & PCI_BAR_IO) || f->bar_size[0] < 16 || !f->bar[0] ||
	    f->bar[0] > 0xFFF0)
		return fail("BAR0 is not 16 I/O ports (raw 0x%x, size %lu)", f->bar_raw[0],
			    f->bar_size[0]);
	b.base = (uint16_t)f->bar[0];
	pci_write16(0, f->slot, 0, PCI_COMMAND,
		    (uint16_t)(f->command | PCI_CMD_IO | PCI_CMD_MEMORY | PCI_CMD_MASTER));

	/* LAPIC: software-enabled, spurious vector 0xff, TPR 0 (SDM 11.9, 11.8.3.1). */
	uint8_t apic_id = (uint8_t)(lapic_read(LAPIC_ID) >> 24);
	lapic_write(LAPIC_TPR, 0);
	lapic_write(LAPIC_SVR, LAPIC_SVR_ENABLE | 0xFF);
	if (!(b.msix ? route_msix(f, apic_id) : route_intx(f, apic_id)))
		return false;
	b.delay_us = inl((uint16_t)(b.base + REG_DELAY));
	b.before = inl((uint16_t)(b.base + REG_SAMPLES));
	printf("irqbench: device 00:%02x.0, ports 0x%x-0x%x, delay %u us, %lu samples (%s)\n",
	       f->slot, b.base, b.base + 15, b.delay_us, b.samples, b.msix ? "MSI-X" : "INTx");
	return true;
}

static uint64_t setup(void *arg)
{
	if (prepare(arg))
		return 0;
	printf("irqbench: FAIL %s\n", b.why);
	return 1;
}

static uint64_t report(void *arg)
{
	(void)arg;
	uint32_t done = b.after - b.before;
	if (done < b.samples) {
		printf("irqbench: FAIL the device counted %u samples, %lu wanted\n", done,
		       b.samples);
		return 1;
	}
	printf("irqbench: done: %lu samples (%s, device SAMPLES %u)\n", b.samples,
	       b.msix ? "MSI-X" : "INTx", b.after);
	return 0;
}

static void on_spurious(struct trap_frame *frame)
{
	(void)frame; /* SDM 11.9: no EOI for the spurious vector */
}

int guest_main(struct boot_params *bp)
{
	if (run_user(setup, bp))
		return 1;
	trap_set_handler(0xFF, on_spurious);
	trap_set_raw_gate(VECTOR, irqbench_isr);
	trap_set_raw_gate(TICK_VECTOR, irqbench_tick_isr);
	irqbench_ack_port = (uint16_t)(b.base + REG_ACK);
	b.after = irqbench_loop(b.base, b.arm, b.samples);
	if (run_user(report, NULL))
		return 1;
	guest_exit(0);
}
