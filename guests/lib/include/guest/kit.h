/*
 * The guest kit: what a freestanding test guest gets before guest_main().
 *
 * Entry (lib/entry.S) follows boot.rst "64-bit BOOT PROTOCOL": the loader
 * jumps to load address + 0x200 in long mode with %rsi = boot_params. The
 * kit installs its own stack, GDT (kernel and user segments, a TSS), IDT
 * (every exception is reported on COM1, then the guest fails through the
 * debug-exit port) and page tables (0..4 GiB identity-mapped with 2 MiB
 * user-accessible pages, 3..4 GiB uncached for MMIO), initialises COM1, and
 * calls guest_main() at CPL 0 with interrupts off.
 *
 * On the KVM our machines have, CPL 0 is instruction-emulated (~2 us per
 * instruction) while CPL 3 runs natively (shared/notes/kvm-host.md), so a
 * guest should do its loops, scans and printing inside run_user().
 */
#ifndef GUEST_KIT_H
#define GUEST_KIT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "guest/arch.h"
#include "guest/bootparam.h"
#include "guest/io.h"

/* Provided by the guest. Runs at CPL 0. Returning 0 resets the machine
 * (guest_reset(), the VMM exits 0); any other value v is guest_exit(v). */
int guest_main(struct boot_params *bp);

/* outl(0xf4, value), then stop. The VMM exits with (value << 1) | 1. */
__attribute__((noreturn)) void guest_exit(uint32_t value);
/* i8042 reset (outb(0x64, 0xfe)); the VMM exits 0. */
__attribute__((noreturn)) void guest_reset(void);

/* Runs fn(arg) at CPL 3 on the kit's user stack and returns fn's return
 * value. Call it at CPL 0 only; it does not nest. All memory is
 * user-accessible and every port is open to CPL 3 (IOPL 3 plus a full TSS
 * I/O bitmap), so fn can use any kit function that does not need CPL 0
 * (printf, port I/O, MMIO, cpuid, rdtsc; not rdmsr, control registers, hlt,
 * or run_user itself). RFLAGS asks for IOPL 3 and IF=0; on our KVM hosts
 * CPL 3 gets IOPL 0 whatever the guest asks (hence the bitmap), and pushf
 * there reads IF=1, so the kit also masks the PIC. */
uint64_t run_user(uint64_t (*fn)(void *arg), void *arg);
/* run_user() with RFLAGS.IF set at CPL 3: interrupts are taken while fn
 * runs, by the handlers set with trap_set_handler() (at CPL 0, on the
 * kit's trap stack), as an OS takes them while user code runs. CPL 3 can
 * hold them off through the LAPIC TPR (apic.h), which is memory-mapped and
 * so reachable there. Returns with interrupts off again. */
uint64_t run_user_irq(uint64_t (*fn)(void *arg), void *arg);

/* Trap handling. The frame the vector stubs build; a handler may change it
 * (e.g. rip) before the iretq. */
struct trap_frame {
	uint64_t r15, r14, r13, r12, r11, r10, r9, r8;
	uint64_t rbp, rdi, rsi, rdx, rcx, rbx, rax;
	uint64_t vector, error_code;
	uint64_t rip, cs, rflags, rsp, ss; /* pushed by the CPU */
};

typedef void (*trap_handler_fn)(struct trap_frame *frame);

/* Installs (or with NULL removes) a handler for vector 0..255, and the IDT
 * gate for it (DPL 0, interrupt gate). Without a handler, the vector is
 * reported as unexpected and the guest exits with GUEST_EXIT_EXCEPTION. */
void trap_set_handler(unsigned vector, trap_handler_fn fn);
/* Points the gate of interrupt vector 32..255 straight at `entry`, an
 * assembly routine that ends in iretq (no kit stub, no trap_frame): for
 * handlers whose every instruction counts, as on hosts that emulate CPL 0
 * (guests/irqbench). */
void trap_set_raw_gate(unsigned vector, void (*entry)(void));

/* COM1, 115200 8N1, polled. '\n' is sent as is (no CR), so the VMM's log
 * lines compare cleanly. */
void serial_init(void);
void serial_putc(char c);
void serial_write(const char *s, size_t len);

/* printf subset: %d %i %u %x %X %p %s %c %%, with flags '0' and '-', a
 * width (or *), a precision for %s (.N or .*), and the length modifiers
 * l, ll, z. */
__attribute__((format(printf, 1, 2))) int printf(const char *fmt, ...);
__attribute__((format(printf, 1, 0))) int vprintf(const char *fmt, va_list ap);
__attribute__((format(printf, 3, 4))) int snprintf(char *buf, size_t size, const char *fmt, ...);
__attribute__((format(printf, 3, 0))) int vsnprintf(char *buf, size_t size, const char *fmt,
						    va_list ap);

/* The freestanding string functions gcc may also call by itself. */
void *memset(void *dst, int c, size_t n);
void *memcpy(void *dst, const void *src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *s);
size_t strnlen(const char *s, size_t max);
int strcmp(const char *a, const char *b);
int strncmp(const char *a, const char *b, size_t n);

#endif
