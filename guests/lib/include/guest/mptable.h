/*
 * Intel MultiProcessor Specification 1.4, chapter 4: the MP floating
 * pointer and the MP configuration table, as a kernel reads them. Guests
 * that find their interrupt routing here use mp_find_floating() and
 * mp_config_table(); hello/mptable.c, which checks the table's every field,
 * uses mp_search_floating(), mp_checksum() and the entry iterator.
 */
#ifndef GUEST_MPTABLE_H
#define GUEST_MPTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 4.1, table 4-1. */
struct mp_floating {
	char signature[4]; /* "_MP_" */
	uint32_t physptr;
	uint8_t length; /* in 16-byte units: 1 */
	uint8_t specification;
	uint8_t checksum;
	uint8_t feature1; /* 0: a configuration table is present */
	uint8_t feature2;
	uint8_t feature3[3];
} __attribute__((packed));
_Static_assert(sizeof(struct mp_floating) == 16, "MP floating pointer is 16 bytes");

/* 4.2, table 4-2. */
struct mp_config {
	char signature[4]; /* "PCMP" */
	uint16_t length;   /* base table, header included */
	uint8_t spec;
	uint8_t checksum;
	char oem[8];
	char productid[12];
	uint32_t oemptr;
	uint16_t oemsize;
	uint16_t count; /* number of base entries */
	uint32_t lapic;
	uint16_t ext_length;
	uint8_t ext_checksum;
	uint8_t reserved;
} __attribute__((packed));
_Static_assert(sizeof(struct mp_config) == 44, "MP config table header is 44 bytes");

/* 4.3, table 4-3: entry types; processor entries are 20 bytes, others 8. */
enum { MP_ENTRY_PROCESSOR, MP_ENTRY_BUS, MP_ENTRY_IOAPIC, MP_ENTRY_IOINT, MP_ENTRY_LINT };

/* 4.3.1, table 4-4. */
struct mp_processor {
	uint8_t type, apic_id, apic_version, cpu_flags;
	uint32_t cpu_signature, feature_flags;
	uint32_t reserved[2];
} __attribute__((packed));
_Static_assert(sizeof(struct mp_processor) == 20, "processor entry is 20 bytes");
#define MP_CPU_ENABLED 0x1
#define MP_CPU_BSP     0x2

/* 4.3.2, table 4-5. */
struct mp_bus {
	uint8_t type, bus_id;
	char bus_type[6]; /* "PCI   ", "ISA   " */
} __attribute__((packed));

/* 4.3.3, table 4-6. */
struct mp_ioapic {
	uint8_t type, apic_id, apic_version, flags;
	uint32_t address;
} __attribute__((packed));
#define MP_IOAPIC_USABLE 0x1 /* flags bit 0 */

/* 4.3.4, table 4-7 (I/O interrupt) and 4.3.5, table 4-9 (local interrupt)
 * share this layout. */
struct mp_intsrc {
	uint8_t type, irq_type;
	uint16_t flags; /* bits 1:0 polarity, 3:2 trigger mode */
	uint8_t src_bus, src_bus_irq, dst_apic, dst_irq;
} __attribute__((packed));
_Static_assert(sizeof(struct mp_intsrc) == 8, "interrupt entries are 8 bytes");

/* 4.3.4, table 4-8: interrupt types. */
enum { MP_IRQ_INT, MP_IRQ_NMI, MP_IRQ_SMI, MP_IRQ_EXTINT };
/* Table 4-10: polarity 11 = active low, trigger mode 11 = level. */
#define MP_IRQFLAG_POLARITY_MASK 0x3
#define MP_IRQFLAG_ACTIVE_HIGH	 0x1
#define MP_IRQFLAG_ACTIVE_LOW	 0x3
#define MP_IRQFLAG_TRIGGER_MASK	 0xC
#define MP_IRQFLAG_EDGE		 0x4
#define MP_IRQFLAG_LEVEL	 0xC
/* 4.3.4: a PCI source bus IRQ is the device number in bits 6:2 and the
 * pin (0 = INTA#) in bits 1:0 (also Appendix D.3). */
#define MP_PCI_SRC_IRQ(slot, intx_index) ((uint8_t)((slot) << 2 | (intx_index)))

/* The byte sum of [p, p + n): 0 for a valid pointer or table (4.1, 4.2). */
uint8_t mp_checksum(const void *p, size_t n);

/* Searches where 4 (and Linux's smp_scan_config) looks: the first KiB of the
 * EBDA, the last KiB of base memory, then 0xF0000-0xFFFFF, for a 16-byte
 * aligned "_MP_" with length 1 and a zero checksum. NULL if none. */
const struct mp_floating *mp_find_floating(void);
/* The same search, saying where it looked and what it saw. */
struct mp_search {
	uint64_t ebda;	    /* BDA word 0x40e << 4 (0: no EBDA, not searched) */
	uint64_t base_kib;  /* BDA word 0x413, base memory in KiB */
	const char *where;  /* "the EBDA", "the last KiB of base memory",
			       "the BIOS ROM area"; NULL if not found */
	uint64_t first_sig; /* the first "_MP_" seen, valid or not; 0 if none */
};
const struct mp_floating *mp_search_floating(struct mp_search *s);
/* The configuration table the pointer names, if the pointer says there is
 * one (feature1 = 0) and it has the "PCMP" signature and a zero base
 * checksum; NULL otherwise (with *why set). */
const struct mp_config *mp_config_table(const struct mp_floating *mpf, const char **why);
/* Base entries one by one, in table order:
 *   struct mp_iter it = mp_iter_start(mpc);
 *   for (const uint8_t *e; (e = mp_iter_next(&it));) ...
 * It stops after `count` entries, or early (it.malformed set) at an
 * unknown type or an entry that runs past the table's length. */
struct mp_iter {
	const struct mp_config *mpc;
	size_t off;
	unsigned index;
	bool malformed;
};

static inline struct mp_iter mp_iter_start(const struct mp_config *mpc)
{
	return (struct mp_iter){mpc, sizeof(*mpc), 0, false};
}

const uint8_t *mp_iter_next(struct mp_iter *it);

#endif
