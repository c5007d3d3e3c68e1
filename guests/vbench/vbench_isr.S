/*
 * vbench's interrupt handlers, as short as a handler can be (ring 0 is
 * emulated on our KVM hosts, ~2 us per instruction): count, EOI, iretq.
 * The INTx one first reads the device's ISR status register (virtio 1.2,
 * 4.1.4.5: the read returns and clears it, which de-asserts INTx), as a
 * kernel's virtio-pci INTx handler does, and counts the interrupt only if
 * ISR was set.
 */
#define LAPIC_EOI_ADDR 0xFEE000B0

	.text
	.balign	16
	.globl vbench_isr_msix
vbench_isr_msix:
	incq	vbench_irqs(%rip)
	pushq	%rax
	movl	$LAPIC_EOI_ADDR, %eax
	movl	$0, (%rax)
	popq	%rax
	iretq

	.balign	16
	.globl vbench_isr_intx
vbench_isr_intx:
	pushq	%rax
	pushq	%rdx
	movq	vbench_isr_addr(%rip), %rdx
	movb	(%rdx), %al
	testb	%al, %al
	jz	1f
	incq	vbench_irqs(%rip)
	jmp	2f
1:	incq	vbench_spurious(%rip)
2:	movl	$LAPIC_EOI_ADDR, %edx
	movl	$0, (%rdx)
	popq	%rdx
	popq	%rax
	iretq

	.data
	.balign	8
	.globl vbench_irqs
vbench_irqs:
	.quad	0
	.globl vbench_spurious
vbench_spurious:
	.quad	0
	.globl vbench_isr_addr
vbench_isr_addr:
	.quad	0

	.section .note.GNU-stack, "", @progbits
