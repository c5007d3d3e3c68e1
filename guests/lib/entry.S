/*
 * Guest entry points, boot page tables and stacks.
 *
 * Image layout (boot.rst "64-bit BOOT PROTOCOL"): the protected-mode image
 * starts with the 32-bit entry at +0 and has the 64-bit entry at +0x200.
 * The linker script puts .head.text first and asserts the offset.
 */
#include "guest/arch.h"

	.section .head.text, "ax"
	.code32
	.globl guest_startup_32
guest_startup_32:
	/* The 32-bit boot protocol is not supported: a loader that takes it
	 * parks the CPU here, which a VMM test sees as a timeout. */
1:	cli
	hlt
	jmp	1b

	.org	ENTRY64_OFFSET
	.code64
	.globl guest_startup_64
guest_startup_64:
	/* Entered in long mode, interrupts off, %rsi = boot_params, on the
	 * loader's GDT (CS 0x10, DS 0x18) and identity map; no stack is
	 * promised. Every instruction until run_user() is emulated on our KVM
	 * hosts, so this path stays short: the page tables below are built
	 * by the assembler, not at run time. */
	cli
	cld
	movq	%rsi, %r12
	leaq	guest_boot_stack_top(%rip), %rsp

	/* Clear SMEP/SMAP before switching to page tables whose pages all
	 * have the U bit, or the next instruction fetch would fault. */
	movq	%cr4, %rax
	andq	$~(CR4_SMEP | CR4_SMAP), %rax
	movq	%rax, %cr4
	leaq	guest_pml4(%rip), %rax
	movq	%rax, %cr3

	/* A bzImage loader copies the file part only (boot.rst does not
	 * promise zeroed memory past it), so clear .bss here. Stacks live in
	 * .stack, which needs no clearing. */
	leaq	__bss_start(%rip), %rdi
	leaq	__bss_end(%rip), %rcx
	subq	%rdi, %rcx
	shrq	$3, %rcx
	xorl	%eax, %eax
	rep stosq

	call	guest_kit_init
	movq	%r12, %rdi
	call	guest_kit_run_main
	ud2

/*
 * Page tables: 0..4 GiB identity-mapped with 2 MiB pages, present, writable
 * and user-accessible (U) so CPL-3 code can reach RAM and MMIO. The 3..4 GiB
 * gigabyte, where the e820 leaves a hole for MMIO (LAPIC, IOAPIC, the boot
 * timer at 0xc0000000), is cacheable-off (PCD|PWT). Intel SDM vol. 3, 4.5.
 */
#define PTE_P 0x001
#define PTE_RW 0x002
#define PTE_US 0x004
#define PTE_PWT 0x008
#define PTE_PCD 0x010
#define PTE_PS 0x080

	.section .data.pagetables, "aw"
	.balign	4096
	.globl guest_pml4
guest_pml4:
	.quad	guest_pdpt + (PTE_P | PTE_RW | PTE_US)
	.fill	511, 8, 0
guest_pdpt:
	.quad	guest_pd + 0x0000 + (PTE_P | PTE_RW | PTE_US)
	.quad	guest_pd + 0x1000 + (PTE_P | PTE_RW | PTE_US)
	.quad	guest_pd + 0x2000 + (PTE_P | PTE_RW | PTE_US)
	.quad	guest_pd + 0x3000 + (PTE_P | PTE_RW | PTE_US)
	.fill	508, 8, 0
guest_pd:
	.set	pde, 0
	.rept	2048
	/* pde / 1536 is 1 exactly for the last gigabyte. */
	.quad	(pde << 21) | (PTE_P | PTE_RW | PTE_US | PTE_PS) | ((pde / 1536) * (PTE_PCD | PTE_PWT))
	.set	pde, pde + 1
	.endr

	.section .stack, "aw", @nobits
	.balign	4096
guest_boot_stack:
	.skip	16384
	.globl guest_boot_stack_top
guest_boot_stack_top:
	/* TSS.rsp0: where interrupts and exceptions from CPL 3 land. */
	.skip	16384
	.globl guest_trap_stack_top
guest_trap_stack_top:
	/* TSS.ist1: #DF, NMI and #MC get a known-good stack. */
	.skip	8192
	.globl guest_ist_stack_top
guest_ist_stack_top:
	.skip	65536
	.globl guest_user_stack_top
guest_user_stack_top:

	.section .note.GNU-stack, "", @progbits
