/*
 * Hardware access for guests: port I/O, MMIO, a few CPU instructions.
 *
 * Everything is a single instruction in inline asm, so the access width is
 * exactly what the name says (a VMM's MMIO/port handlers see one exit per
 * call) and the compiler cannot merge, split or drop accesses. Port I/O works
 * at CPL 0 and, because run_user() sets IOPL 3, at CPL 3 too.
 *
 * Argument order is (port or address, value), unlike Linux's outb(value, port).
 */
#ifndef GUEST_IO_H
#define GUEST_IO_H

#include <stdbool.h>
#include <stdint.h>

static inline void outb(uint16_t port, uint8_t v)
{
	__asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(port) : "memory");
}

static inline void outw(uint16_t port, uint16_t v)
{
	__asm__ volatile("outw %0, %1" : : "a"(v), "Nd"(port) : "memory");
}

static inline void outl(uint16_t port, uint32_t v)
{
	__asm__ volatile("outl %0, %1" : : "a"(v), "Nd"(port) : "memory");
}

static inline uint8_t inb(uint16_t port)
{
	uint8_t v;
	__asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port) : "memory");
	return v;
}

static inline uint16_t inw(uint16_t port)
{
	uint16_t v;
	__asm__ volatile("inw %1, %0" : "=a"(v) : "Nd"(port) : "memory");
	return v;
}

static inline uint32_t inl(uint16_t port)
{
	uint32_t v;
	__asm__ volatile("inl %1, %0" : "=a"(v) : "Nd"(port) : "memory");
	return v;
}

/* MMIO (and any physical address: the kit identity-maps 0..4 GiB). Taking a
 * plain integer address also keeps gcc's null-page heuristics (-Warray-bounds
 * on constant addresses below 4 KiB, e.g. the BIOS data area) out of it. */
static inline uint8_t mmio_read8(uint64_t addr)
{
	uint8_t v;
	__asm__ volatile("movb (%1), %0" : "=q"(v) : "r"(addr) : "memory");
	return v;
}

static inline uint16_t mmio_read16(uint64_t addr)
{
	uint16_t v;
	__asm__ volatile("movw (%1), %0" : "=r"(v) : "r"(addr) : "memory");
	return v;
}

static inline uint32_t mmio_read32(uint64_t addr)
{
	uint32_t v;
	__asm__ volatile("movl (%1), %0" : "=r"(v) : "r"(addr) : "memory");
	return v;
}

static inline uint64_t mmio_read64(uint64_t addr)
{
	uint64_t v;
	__asm__ volatile("movq (%1), %0" : "=r"(v) : "r"(addr) : "memory");
	return v;
}

static inline void mmio_write8(uint64_t addr, uint8_t v)
{
	__asm__ volatile("movb %0, (%1)" : : "q"(v), "r"(addr) : "memory");
}

static inline void mmio_write16(uint64_t addr, uint16_t v)
{
	__asm__ volatile("movw %0, (%1)" : : "r"(v), "r"(addr) : "memory");
}

static inline void mmio_write32(uint64_t addr, uint32_t v)
{
	__asm__ volatile("movl %0, (%1)" : : "r"(v), "r"(addr) : "memory");
}

static inline void mmio_write64(uint64_t addr, uint64_t v)
{
	__asm__ volatile("movq %0, (%1)" : : "r"(v), "r"(addr) : "memory");
}

struct cpuid_regs {
	uint32_t eax, ebx, ecx, edx;
};

static inline struct cpuid_regs cpuid(uint32_t leaf, uint32_t subleaf)
{
	struct cpuid_regs r;
	__asm__ volatile("cpuid"
			 : "=a"(r.eax), "=b"(r.ebx), "=c"(r.ecx), "=d"(r.edx)
			 : "a"(leaf), "c"(subleaf));
	return r;
}

static inline uint64_t rdtsc(void)
{
	uint32_t lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}

/* rdmsr/wrmsr and the control registers need CPL 0. */
static inline uint64_t rdmsr(uint32_t msr)
{
	uint32_t lo, hi;
	__asm__ volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(msr));
	return ((uint64_t)hi << 32) | lo;
}

static inline void wrmsr(uint32_t msr, uint64_t v)
{
	__asm__ volatile("wrmsr"
			 :
			 : "c"(msr), "a"((uint32_t)v), "d"((uint32_t)(v >> 32))
			 : "memory");
}

static inline uint64_t read_cr2(void)
{
	uint64_t v;
	__asm__ volatile("mov %%cr2, %0" : "=r"(v));
	return v;
}

static inline uint64_t read_cr4(void)
{
	uint64_t v;
	__asm__ volatile("mov %%cr4, %0" : "=r"(v));
	return v;
}

static inline uint64_t read_rflags(void)
{
	uint64_t v;
	__asm__ volatile("pushfq; popq %0" : "=r"(v) : : "memory");
	return v;
}

static inline unsigned current_cpl(void)
{
	uint16_t cs;
	__asm__ volatile("mov %%cs, %0" : "=r"(cs));
	return cs & 3;
}

static inline void cpu_relax(void)
{
	__asm__ volatile("pause" ::: "memory");
}

/* Interrupts stay off unless a guest turns them on (boot.rst: entered with
 * interrupts disabled); these are for guests that install IRQ handlers. */
static inline void irq_enable(void)
{
	__asm__ volatile("sti" ::: "memory");
}

static inline void irq_disable(void)
{
	__asm__ volatile("cli" ::: "memory");
}

#define RFLAGS_IF	 (1ul << 9)
#define RFLAGS_IOPL_MASK (3ul << 12)
#define RFLAGS_AC	 (1ul << 18)

/* Local APIC, xAPIC mode at its reset base (Intel SDM vol. 3 ch. 11.4.1). */
#define LAPIC_BASE    0xFEE00000ul
#define LAPIC_ID      0x020
#define LAPIC_VERSION 0x030
#define LAPIC_EOI     0x0B0
#define LAPIC_SVR     0x0F0

static inline uint32_t lapic_read(uint32_t reg)
{
	return mmio_read32(LAPIC_BASE + reg);
}

static inline void lapic_write(uint32_t reg, uint32_t v)
{
	mmio_write32(LAPIC_BASE + reg, v);
}

static inline void lapic_eoi(void)
{
	lapic_write(LAPIC_EOI, 0);
}

#endif
