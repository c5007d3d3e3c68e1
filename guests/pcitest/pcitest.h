/*
 * pcitest: PCI enumeration, BAR, MSI-X and INTx checks against the VMM's
 * PCI test device ("testdev"). Shared between its files.
 *
 * Everything but the interrupt handler runs at CPL 3 (run_user_irq), where
 * our KVM hosts run natively and interrupts are taken as under an OS.
 */
#ifndef PCITEST_H
#define PCITEST_H

#include "guest/apic.h"
#include "guest/irq.h"
#include "guest/kit.h"
#include "guest/msix.h"
#include "guest/pcienum.h"

/* The testdev as the VMM defines it (devices/pci/pci_testdev.h). */
#define TESTDEV_VENDOR	    0x1234
#define TESTDEV_DEVICE	    0x7E57
#define TESTDEV_CLASS	    0xFF0000u
#define TESTDEV_REVISION    1
#define TESTDEV_MAGIC	    0x56454454u /* "TDEV" */
#define TESTDEV_BAR0_SIZE   4096
#define TD_MAGIC	    0x00
#define TD_NVECTORS	    0x04
#define TD_DOORBELL	    0x08
#define TD_INTX_PENDING	    0x0C
#define TD_INTX_ACK	    0x10
#define TD_DOORBELLS	    0x14
#define TESTDEV_MAX_VECTORS 2048 /* 6.8.2.3: table size is an 11-bit N-1 */

/* Where the VMM puts BARs, and where pcitest may move one. */
#define PCI_WINDOW_START 0xD0000000ull
#define PCI_WINDOW_END	 0xF0000000ull

#define PT_MAX_DEVS 16

/* Vectors. MSI-X entry i of the device under test gets VEC_MSIX_BASE + i
 * (devices are tested one at a time, so they share the range); IOAPIC pin
 * p gets VEC_INTX_BASE + p - 16. guest/irq.h has the LAPIC spurious
 * vector (0xFF) and the self-test's (0x30). */
#define VEC_MSIX_BASE	     0x40
#define VEC_MSIX_COUNT	     64
#define VEC_INTX_BASE	     0xC0
#define PCI_IOAPIC_PIN_FIRST 16 /* the VMM wires PCI INTx to pins 16..23 */
#define PCI_IOAPIC_PINS	     8
_Static_assert(PT_MAX_DEVS <= IRQ_PIN_SOURCES, "every testdev fits on one IOAPIC pin");

struct pt_dev {
	unsigned slot;
	uint32_t bar0, bar1; /* addresses as assigned by the VMM */
	uint64_t bar1_size;
	uint32_t nvec;	     /* NVECTORS */
	struct msix_info mx; /* mx.cap 0: no MSI-X (or none that can be tested) */
	uint8_t line;	     /* Interrupt Line register */
	uint8_t pin;	     /* IOAPIC input from the MP table, 0 if none */
	uint8_t pin_flags;   /* MP I/O interrupt entry flags */
	unsigned pin_slot;   /* index among the devices on that pin (irq_pin_add_source) */
	bool usable;	     /* BAR0 answers with MAGIC: interrupt tests can drive it */
	uint32_t doorbells;  /* what DOORBELLS should read */
};

struct pcitest {
	const char *cmdline;
	unsigned checks, failures;
	bool expect_msix;
	unsigned want_devs;
	unsigned ndev;
	struct pt_dev dev[PT_MAX_DEVS];

	struct mp_routing mp; /* the MP table (Intel MP spec 1.4, chapter 4) */
	/* The BSP's LAPIC (apic_id: MSI and IOAPIC destination) and its
	 * self-test (auto_eoi: an accepted interrupt does not stay in service
	 * until its EOI, true on our kvm_pvm hosts). */
	struct irq_lapic_info lapic;
	uint64_t tsc_hz;
};

extern struct pcitest pt;

/* pcitest.c: reporting. check() prints "pcitest: ok   WHAT" or
 * "pcitest: FAIL WHAT: DETAIL" and returns ok. */
__attribute__((format(printf, 3, 4))) bool check(bool ok, const char *what, const char *fmt, ...);
__attribute__((format(printf, 1, 2))) void info(const char *fmt, ...);
void skip(const char *what, const char *why);

/* Config space of a testdev (bus 0, function 0). */
static inline uint32_t cfg_read32(const struct pt_dev *d, unsigned off)
{
	return pci_read32(0, d->slot, 0, off);
}
static inline uint16_t cfg_read16(const struct pt_dev *d, unsigned off)
{
	return pci_read16(0, d->slot, 0, off);
}
static inline void cfg_write32(const struct pt_dev *d, unsigned off, uint32_t v)
{
	pci_write32(0, d->slot, 0, off, v);
}
static inline void cfg_write16(const struct pt_dev *d, unsigned off, uint16_t v)
{
	pci_write16(0, d->slot, 0, off, v);
}

static inline uint32_t td_read(const struct pt_dev *d, unsigned reg)
{
	return mmio_read32(d->bar0 + reg);
}

/* A doorbell write, counted so DOORBELLS can be checked. */
static inline void td_ring(struct pt_dev *d, uint32_t n)
{
	d->doorbells++;
	mmio_write32(d->bar0 + TD_DOORBELL, n);
}

static inline bool td_status_intx(const struct pt_dev *d)
{
	return cfg_read16(d, PCI_STATUS) & PCI_STATUS_INTERRUPT;
}

/* enum.c: steps 1 and 2. */
void pt_enumerate(void);
void pt_relocate_bar0(struct pt_dev *d);

/* irq.c: the set-up on guest/irq.h (whose handler irq_install() puts on
 * vectors 32..255 at CPL 0), the waits the checks use, the summary. The
 * counters are guest/irq.h's: irq_snap(), irq_new(), irq_new_others(). */
bool pt_irq_setup(void);
void pt_irq_report(void);

/* Spins (at CPL 3) until `vector` has `want` new interrupts since s or the
 * wait limit passes, then a settling time for extra ones; returns the count. */
uint64_t pt_wait(const struct irq_snap *s, unsigned vector, uint64_t want);
/* The same, until the handler has acknowledged `want` doorbells of d. */
uint64_t pt_wait_acked(const struct irq_snap *s, const struct pt_dev *d, uint64_t want);
/* Spins for the time in which an interrupt that should not come would. */
void pt_quiet(void);
/* INTx doorbells of d the handler acknowledged since s (the INTX_PENDING
 * values it read), and interrupts on d's pin that found nothing pending. */
uint64_t pt_acked_new(const struct irq_snap *s, const struct pt_dev *d);
uint64_t pt_spurious_new(const struct irq_snap *s, const struct pt_dev *d);
/* One check: exactly `want` new interrupts on `vector`, none elsewhere. */
bool check_irqs(const struct irq_snap *s, unsigned vector, uint64_t want, const char *what);
/* check_irqs() for d's INTx vector: `want` genuine interrupts, with
 * re-deliveries as irq_intx_redeliveries_ok() allows. handler_acks: the
 * handler was acknowledging (it then tells genuine from spurious), or it
 * was masking the pin (irq_pin_defer; then every interrupt beyond `want`
 * is a re-delivery). */
bool check_intx_irqs(const struct irq_snap *s, const struct pt_dev *d, uint64_t want,
		     bool handler_acks, const char *what);

unsigned intx_vector(const struct pt_dev *d);

/* msix.c: step 4. */
void pt_msix(struct pt_dev *d);

/* intx.c: steps 5 and 6. */
void pt_intx(struct pt_dev *d);
void pt_shared_pins(void);

#endif
