/*
 * virtiotest: drives the VMM's modern virtio-pci devices (virtio 1.2) the
 * way a minimal driver does. Shared between its files.
 *
 * Everything but the interrupt handler (guest/irq.h) runs at CPL 3 under
 * run_user_irq(), where our KVM hosts run natively; CPL 0 is emulated at
 * ~2 us per instruction (shared/notes/kvm-host.md).
 */
#ifndef VIRTIOTEST_H
#define VIRTIOTEST_H

#include "guest/irq.h"
#include "guest/kit.h"
#include "guest/msix.h"
#include "guest/pcienum.h"
#include "guest/virtio.h"

#define VT_MAX_DEVS   8
#define VT_MAX_QUEUES 5 /* two net queue pairs and the control queue */
#define VT_MAX_MQ     2 /* virtiotest.queues */

/* IDT vectors: MSI-X entry i of device n gets VEC_MSIX_BASE + 8n + i
 * (entry 0 = configuration changes, entry 1 + q = queue q); IOAPIC pin p
 * gets VEC_INTX_BASE + p. */
#define VEC_MSIX_BASE	 0x40
#define VEC_MSIX_PER_DEV 8
#define VEC_INTX_BASE	 0xC0

/* How long a request may take, and how long to watch for extra
 * interrupts after it completed (the VMM serves queues on its I/O thread,
 * which a loaded 2-core box may delay). */
#define VT_WAIT_US   2000000
#define VT_SETTLE_US 20000

struct vt_dev {
	const struct pci_func *pf;
	struct virtio_pci_dev vp;
	const char *name; /* "blk", "rng", "console", "net" */
	char tag[24];	  /* "blk 00:01.0", for messages */
	unsigned index;	  /* among the virtio devices found */
	bool usable;	  /* init sequence completed: DRIVER_OK */

	uint64_t offered, features; /* device features, negotiated features */

	/* Interrupts: MSI-X vectors, or an INTx pin with the handler reading ISR. */
	bool msix;
	struct msix_info mx;
	uint8_t vec_config;
	uint8_t vec_queue[VT_MAX_QUEUES];
	unsigned pin; /* IOAPIC input, 0 if none */
	int pin_src;  /* index of this device among the pin's sources */
	uint8_t intx_vec;
	volatile uint8_t isr_seen;    /* ISR values the handler read, ORed */
	volatile uint64_t isr_events; /* handler reads that found ISR non-zero */

	unsigned nq;
	struct virtq vq[VT_MAX_QUEUES];
};

struct virtiotest {
	const char *cmdline;
	unsigned checks, failures;
	bool expect_msix;
	bool ro;
	bool fs_kill;	     /* virtiotest.fskill=1 */
	uint64_t sectors;    /* 0: not given */
	unsigned queues;     /* blk request queues and net queue pairs (1) */
	unsigned want_types; /* bit per virtio device ID, 0: not given */
	uint64_t tsc_hz;
	struct irq_lapic_info lapic;
	struct mp_routing mp;
	unsigned ndev;
	struct vt_dev dev[VT_MAX_DEVS];
};

extern struct virtiotest vt;

/* virtiotest.c: reporting. check() prints "virtiotest: ok   WHAT" or
 * "virtiotest: FAIL WHAT: DETAIL" and returns ok. */
__attribute__((format(printf, 3, 4))) bool check(bool ok, const char *what, const char *fmt, ...);
__attribute__((format(printf, 1, 2))) void info(const char *fmt, ...);
/* check() with WHAT prefixed by the device tag. */
__attribute__((format(printf, 4, 5))) bool dcheck(const struct vt_dev *d, bool ok, const char *what,
						  const char *fmt, ...);

/* vdev.c: the 3.1.1 initialisation sequence with the transport's checks,
 * interrupts (MSI-X or INTx), queue set-up, DRIVER_OK. qmax[q] caps the
 * size of queue q. */
bool vt_bringup(struct vt_dev *d, uint64_t wanted, unsigned nq, const uint16_t *qmax);
/* After a device's tests: status still DRIVER_OK without NEEDS_RESET,
 * then a reset (4.1.4.3.2) that reads back 0. */
void vt_finish(struct vt_dev *d);

/* One request's completion: waits for a used entry on vq (head `head`,
 * or any if head < 0) and for the interrupt it should raise, then a
 * settling time. `strict`: at most `max_irqs` interrupts on the queue's
 * vector (MSI-X) or genuine ones on the pin (INTx); not strict when other
 * queues of the device may complete meanwhile (INTx shares one ISR). */
struct vt_wait {
	bool used;    /* a used entry arrived */
	bool head_ok; /* ... with the expected head */
	uint16_t head;
	uint32_t len;
	uint64_t irqs;	   /* on the queue's MSI-X vector / genuine on the pin */
	uint64_t spurious; /* INTx: found ISR 0 */
	uint64_t others;   /* MSI-X: on the device's config vector */
	uint8_t isr;	   /* INTx: ISR bits the handler saw */
	bool irq_ok;
	char why[160]; /* empty if used && head_ok && irq_ok */
};
void vt_wait_prepare(struct vt_dev *d, struct irq_snap *s);
void vt_wait(struct vt_dev *d, struct virtq *vq, const struct irq_snap *s, int head,
	     uint64_t timeout_us, bool strict, uint64_t max_irqs, struct vt_wait *w);
/* Interrupts for vq since s: on its MSI-X vector, or (INTx) those that
 * found the device's ISR set; and whether there was any. */
uint64_t vt_queue_irqs(const struct vt_dev *d, const struct virtq *vq, const struct irq_snap *s);
bool vt_irq_seen(const struct vt_dev *d, const struct virtq *vq, const struct irq_snap *s);
/* INTx through the MP table's IOAPIC pin, the handler reading ISR
 * (4.1.4.5); used by vt_bringup without MSI-X, and after MSI-X is turned
 * off. */
bool vt_setup_intx(struct vt_dev *d);

/* The device's own tests. */
void vt_blk(struct vt_dev *d);
void vt_rng(struct vt_dev *d);
void vt_console(struct vt_dev *d);
void vt_net(struct vt_dev *d);
void vt_fs(struct vt_dev *d);

#endif
