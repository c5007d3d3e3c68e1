/*
 * Constants shared by the kit's assembly and C code. Preprocessor-only so
 * that the .S files can include it.
 */
#ifndef GUEST_ARCH_H
#define GUEST_ARCH_H

/* Segment selectors of the kit's GDT (lib/kit.c). The user ones carry RPL 3. */
#define KERNEL_CS 0x08
#define KERNEL_DS 0x10
#define USER_CS	  (0x18 | 3)
#define USER_DS	  (0x20 | 3)
#define TSS_SEL	  0x28

/* RFLAGS for CPL-3 code: IOPL 3 so port I/O works there, IF clear, and the
 * always-one bit 1 (Intel SDM vol. 1, 3.4.3). */
#define USER_RFLAGS 0x3002
/* The same with IF (bit 9) set, for run_user_irq(). */
#define USER_RFLAGS_IRQ (USER_RFLAGS | 0x200)

/* CR4 bits the kit clears: every page is user-accessible, so SMEP would stop
 * CPL 0 from running kit code and SMAP would stop it from touching data. */
#define CR4_SMEP (1 << 20)
#define CR4_SMAP (1 << 21)

/* boot.rst "64-bit BOOT PROTOCOL": the 64-bit entry is at load address +0x200. */
#define ENTRY64_OFFSET 0x200

/* Exit values for the debug-exit port 0xf4; the VMM exits with (v << 1) | 1. */
#define GUEST_EXIT_EXCEPTION 0x7f /* unexpected exception, reported on COM1 */
#define GUEST_EXIT_STUB	     0x7e /* the hello-gz stub ran */
#define GUEST_EXIT_RETURNED  0x7d /* guest_main returned an unusable value */

#endif
