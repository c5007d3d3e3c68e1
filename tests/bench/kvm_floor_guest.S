/*
 * The raw-KVM floor's guest: position-independent 64-bit code that
 * kvm_floor.c copies into guest RAM and enters in long mode (its page
 * tables, GDT and IDT are built by the host). It enables the LAPIC, runs
 * irqbench's measuring loop with irqbench's interrupt handler (both from
 * guests/irqbench/irqbench.inc, the same instructions the irqbench guest
 * runs under the VMM), and leaves through port 0xf4.
 *
 * kvm_floor.c fills the parameter block before the first KVM_RUN.
 */
#include "irqbench.inc"

#define LAPIC_SVR_ADDR 0xFEE000F0
#define LAPIC_TPR_ADDR 0xFEE00080
#define FLOOR_DONE_PORT 0xF4

	.section .rodata, "a"
	.balign	4096
	.globl kvm_floor_guest_start
kvm_floor_guest_start:
	/* Parameters (offsets fixed for kvm_floor.c). */
	.globl kvm_floor_guest_base_port
kvm_floor_guest_base_port:		/* +0 */
	.long	0
	.globl kvm_floor_guest_arm_value
kvm_floor_guest_arm_value:		/* +4 */
	.long	0
	.globl kvm_floor_guest_count
kvm_floor_guest_count:			/* +8 */
	.quad	0
floor_ack_port:				/* +16: the handler's port variable */
	.word	0

	.balign	16
	.globl kvm_floor_guest_entry
kvm_floor_guest_entry:
	/* SDM vol. 3, 11.9: software-enable the LAPIC, spurious vector 0xff;
	 * TPR 0 (11.8.3.1). */
	movl	$LAPIC_SVR_ADDR, %edx
	movl	$0x1FF, %eax
	movl	%eax, (%rdx)
	movl	$LAPIC_TPR_ADDR, %edx
	xorl	%eax, %eax
	movl	%eax, (%rdx)
	movl	kvm_floor_guest_base_port(%rip), %edi
	movw	%di, floor_ack_port(%rip)
	movl	kvm_floor_guest_arm_value(%rip), %esi
	movq	kvm_floor_guest_count(%rip), %rdx
	call	floor_loop
	movl	$FLOOR_DONE_PORT, %edx
	outl	%eax, %dx
1:	cli
	hlt
	jmp	1b

floor_loop:
	IRQBENCH_LOOP

	.balign	16
	.globl kvm_floor_guest_isr
kvm_floor_guest_isr:
	IRQBENCH_ISR floor_ack_port

	.balign	16
	.globl kvm_floor_guest_tick_isr
kvm_floor_guest_tick_isr:
	IRQBENCH_TICK_ISR

	.globl kvm_floor_guest_end
kvm_floor_guest_end:

	.section .note.GNU-stack, "", @progbits
