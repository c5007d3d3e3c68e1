/*
 * Guest entry points, boot page tables and stacks.
 *
 * Image layout (boot.rst "64-bit BOOT PROTOCOL"): the protected-mode image
 * starts with the 32-bit entry at +0 and has the 64-bit entry at +0x200.
 * The linker script puts .head.text first and asserts the offset.
 */
#include "guest/arch.h"

#define CR0_PE 0x1
#define CR0_PG 0x80000000
#define CR4_PAE 0x20
#define MSR_EFER 0xC0000080
#define EFER_LME 0x100
#define XEN_ELFNOTE_PHYS32_ENTRY 18

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
	xorl	%r13d, %r13d
guest_startup_common:
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

	/* PVH (%r13 = hvm_start_info): a zero page made from it, in .bss. */
	testq	%r13, %r13
	jz	1f
	movq	%r13, %rdi
	call	guest_pvh_boot_params
	movq	%rax, %r12
1:	call	guest_kit_init
	movq	%r12, %rdi
	call	guest_kit_run_main
	ud2

/*
 * PVH entry (Xen docs/misc/pvh.pandoc; what QEMU's -kernel does with an ELF
 * that has a XEN_ELFNOTE_PHYS32_ENTRY note): 32-bit protected mode, paging
 * off, flat segments, interrupts off, %ebx = hvm_start_info. Into long mode
 * on the same page tables (they lie below 4 GiB), then the common path.
 */
	.text
	.code32
	.globl guest_pvh_start32
guest_pvh_start32:
	cli
	cld
	movl	%ebx, %edi
	lgdt	guest_pvh_gdt_ptr
	movl	%cr4, %eax
	orl	$CR4_PAE, %eax
	movl	%eax, %cr4
	movl	$guest_pml4, %eax
	movl	%eax, %cr3
	movl	$MSR_EFER, %ecx
	rdmsr
	orl	$EFER_LME, %eax
	wrmsr
	movl	%cr0, %eax
	orl	$(CR0_PE | CR0_PG), %eax
	movl	%eax, %cr0
	ljmp	$KERNEL_CS, $1f
	.code64
1:	movl	$KERNEL_DS, %eax
	movw	%ax, %ds
	movw	%ax, %es
	movw	%ax, %ss
	movl	%edi, %r13d
	xorl	%r12d, %r12d
	jmp	guest_startup_common

/* The kit's selectors (arch.h), before kit.c loads its own GDT. */
	.section .rodata
	.balign	8
guest_pvh_gdt:
	.quad	0
	.quad	0x00AF9A000000FFFF	/* 0x08: 64-bit code, DPL 0 */
	.quad	0x00CF92000000FFFF	/* 0x10: data */
guest_pvh_gdt_end:
	.balign	4
guest_pvh_gdt_ptr:
	.word	guest_pvh_gdt_end - guest_pvh_gdt - 1
	.long	guest_pvh_gdt

/* The ELF note QEMU (and Xen) look for; lib/guest.ld keeps it in a
 * PT_NOTE segment. Linux's arch/x86/platform/pvh/head.S has the same. */
	.section .note.Xen, "a", @note
	.balign	4
	.long	4f - 3f		/* namesz */
	.long	6f - 5f		/* descsz */
	.long	XEN_ELFNOTE_PHYS32_ENTRY
3:	.asciz	"Xen"
4:	.balign	4
5:	.quad	guest_pvh_start32
6:	.balign	4

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
