/*
 * Local APIC registers beyond the few in io.h, the I/O APIC (Intel 82093AA
 * I/O Advanced Programmable Interrupt Controller datasheet, section 3), and
 * the MSI message format a device writes to reach a local APIC (Intel SDM
 * vol. 3, 11.11; chapter 10 in editions before 2023).
 *
 * All of it is MMIO in the kit's uncached, user-accessible 3..4 GiB, so it
 * works at CPL 0 and in run_user().
 */
#ifndef GUEST_APIC_H
#define GUEST_APIC_H

#include "guest/io.h"

/* Local APIC register offsets (SDM vol. 3, 11.4.1 table 11-1). */
#define LAPIC_TPR	 0x080
#define LAPIC_PPR	 0x0A0
#define LAPIC_ISR	 0x100 /* 8 registers, 16 bytes apart */
#define LAPIC_TMR	 0x180
#define LAPIC_IRR	 0x200
#define LAPIC_ESR	 0x280
#define LAPIC_ICR_LO	 0x300 /* writing it sends the IPI (11.6.1) */
#define LAPIC_ICR_HI	 0x310
#define LAPIC_LVT_TIMER	 0x320
#define LAPIC_LVT_LINT0	 0x350
#define LAPIC_LVT_LINT1	 0x360
#define LAPIC_LVT_ERROR	 0x370
#define LAPIC_TIMER_INIT 0x380
#define LAPIC_TIMER_CUR	 0x390
#define LAPIC_TIMER_DIV	 0x3E0

/* ICR low dword (11.6.1, figure 11-12): fixed delivery, level assert,
 * destination shorthand 01 = self. */
#define LAPIC_ICR_LEVEL_ASSERT (1u << 14)
#define LAPIC_ICR_DEST_SELF    (1u << 18)

#define LAPIC_SVR_ENABLE 0x100	    /* 11.9, figure 11-23: APIC software enable */
#define LAPIC_LVT_MASKED (1u << 16) /* 11.5.1 */
#define IA32_APIC_BASE	 0x1B	    /* 11.4.4: bit 11 = APIC global enable */
#define APIC_BASE_ENABLE (1u << 11)

/* 11.8.3.1: an interrupt is dispatched only if its priority class (vector
 * bits 7:4) is above the processor priority; TPR 0xF0 holds off every
 * vector, which makes TPR the CPL-3 way to defer interrupts. */
#define LAPIC_TPR_BLOCK_ALL 0xF0

/* One bit of the 256-bit IRR/ISR/TMR arrays: register v / 32 of eight, 16
 * bytes apart (11.8.4). */
static inline bool lapic_vector_bit(uint32_t array, unsigned vector)
{
	return (lapic_read(array + 0x10 * (vector / 32)) >> (vector % 32)) & 1;
}

/* I/O APIC: an index register and a data window (82093AA 3.0, 3.1). */
#define IOAPIC_DEFAULT_BASE 0xFEC00000ul
#define IOAPIC_REGSEL	    0x00
#define IOAPIC_WINDOW	    0x10
#define IOAPIC_REG_ID	    0x00 /* 3.2.1: ID in bits 27:24 */
#define IOAPIC_REG_VER	    0x01 /* 3.2.2: max redirection entry in 23:16 */
#define IOAPIC_REG_REDTBL   0x10 /* 3.2.4: entry n at 0x10 + 2n (low), +1 (high) */

/* Redirection entry, low dword (82093AA 3.2.4). */
#define IOAPIC_RTE_VECTOR_MASK	0xFF
#define IOAPIC_RTE_DM_FIXED	(0u << 8)
#define IOAPIC_RTE_DEST_LOGICAL (1u << 11)
#define IOAPIC_RTE_DELIVS	(1u << 12) /* delivery status (read-only) */
#define IOAPIC_RTE_ACTIVE_LOW	(1u << 13)
#define IOAPIC_RTE_REMOTE_IRR	(1u << 14) /* level: accepted, EOI not yet seen */
#define IOAPIC_RTE_LEVEL	(1u << 15)
#define IOAPIC_RTE_MASKED	(1u << 16)
/* High dword: physical destination APIC ID in bits 31:24 (63:56 of the entry). */
#define IOAPIC_RTE_DEST_SHIFT 24

static inline uint32_t ioapic_read(uint64_t base, uint32_t reg)
{
	mmio_write32(base + IOAPIC_REGSEL, reg);
	return mmio_read32(base + IOAPIC_WINDOW);
}

static inline void ioapic_write(uint64_t base, uint32_t reg, uint32_t v)
{
	mmio_write32(base + IOAPIC_REGSEL, reg);
	mmio_write32(base + IOAPIC_WINDOW, v);
}

/* MSI message (SDM vol. 3, 11.11.1 and 11.11.2): address 0xFEEx_xxxx with
 * the destination APIC ID in bits 19:12, RH (bit 3) and DM (bit 2) clear
 * for a physical destination; data = vector in bits 7:0, delivery mode
 * fixed (10:8 = 0), edge (bit 15 = 0). */
#define MSI_ADDR_BASE 0xFEE00000u
static inline uint32_t msi_address(uint8_t apic_id)
{
	return MSI_ADDR_BASE | (uint32_t)apic_id << 12;
}

static inline uint32_t msi_data_fixed_edge(uint8_t vector)
{
	return vector;
}

#endif
