/*
 * Trap entry stubs and the CPL 0 <-> CPL 3 switch.
 */
#include "guest/arch.h"

	.text
/*
 * One 16-byte stub per vector, so vector v's entry is guest_trap_stubs +
 * 16 * v (the linker script checks the total size). Each pushes a dummy
 * error code where the CPU pushes none (Intel SDM vol. 3, 6.13 and table
 * 6-1: 8, 10-14, 17, 21, 29 and 30 push one) so every frame has one shape.
 */
	.balign	16
	.globl guest_trap_stubs
guest_trap_stubs:
	.set	vec, 0
	.rept	256
	.balign	16
	.if (vec == 8) || ((vec >= 10) && (vec <= 14)) || (vec == 17) || (vec == 21) || (vec == 29) || (vec == 30)
	pushq	$vec
	.else
	pushq	$0
	pushq	$vec
	.endif
	jmp	guest_trap_common
	.set	vec, vec + 1
	.endr
	.balign	16
	.globl guest_trap_stubs_end
guest_trap_stubs_end:

/* Builds struct trap_frame (kit.h) and calls guest_trap_dispatch(frame).
 * The CPU aligned %rsp to 16 before pushing its 5-word frame (SDM vol. 3,
 * 6.14.2), and 2 + 15 more words keep it aligned for the call. */
guest_trap_common:
	pushq	%rax
	pushq	%rbx
	pushq	%rcx
	pushq	%rdx
	pushq	%rsi
	pushq	%rdi
	pushq	%rbp
	pushq	%r8
	pushq	%r9
	pushq	%r10
	pushq	%r11
	pushq	%r12
	pushq	%r13
	pushq	%r14
	pushq	%r15
	movq	%rsp, %rdi
	cld
	call	guest_trap_dispatch
	popq	%r15
	popq	%r14
	popq	%r13
	popq	%r12
	popq	%r11
	popq	%r10
	popq	%r9
	popq	%r8
	popq	%rbp
	popq	%rdi
	popq	%rsi
	popq	%rdx
	popq	%rcx
	popq	%rbx
	popq	%rax
	addq	$16, %rsp
	iretq

/*
 * uint64_t run_user(uint64_t (*fn)(void *), void *arg)
 *
 * Saves the callee-saved registers and %rsp, then iretq's to CPL 3 with IOPL
 * 3 (port I/O allowed there) on the user stack. The CPL-3 side calls fn and
 * comes back with int3, whose DPL-3 gate (guest_breakpoint_entry) lands in
 * guest_user_return on TSS.rsp0; that drops the interrupt frame and resumes
 * here as if fn had been called directly. syscall/sysret are not used: they
 * are broken on our KVM hosts (shared/notes/kvm-host.md).
 */
	.globl run_user
run_user:
	movl	$USER_RFLAGS, %r11d
	jmp	1f

/*
 * uint64_t run_user_irq(uint64_t (*fn)(void *), void *arg)
 *
 * The same with RFLAGS.IF set at CPL 3, so interrupts are taken there (on
 * TSS.rsp0, by the handlers trap_set_handler installed) as under an OS;
 * the way back through the #BP interrupt gate clears IF again, so the
 * caller resumes at CPL 0 with interrupts off.
 */
	.globl run_user_irq
run_user_irq:
	movl	$USER_RFLAGS_IRQ, %r11d
1:	pushq	%rbx
	pushq	%rbp
	pushq	%r12
	pushq	%r13
	pushq	%r14
	pushq	%r15
	movq	%rsp, guest_saved_kernel_rsp(%rip)
	pushq	$USER_DS
	leaq	guest_user_stack_top(%rip), %rax
	pushq	%rax
	pushq	%r11
	pushq	$USER_CS
	leaq	guest_user_trampoline(%rip), %rax
	pushq	%rax
	iretq

/* CPL 3, %rdi = fn, %rsi = arg, %rsp 16-byte aligned. */
guest_user_trampoline:
	movq	%rdi, %rax
	movq	%rsi, %rdi
	call	*%rax
	movq	%rax, %rdi
	int3
guest_user_trampoline_back:
	ud2

/*
 * The #BP gate (DPL 3). On our KVM hosts `int $n` at CPL 3 raises #UD
 * instead of reaching a DPL-3 gate, but int3 (a trap, so the saved RIP is
 * the next instruction) is delivered. So the way back from CPL 3 is the
 * int3 above: recognised by its return address and CPL 3 in the saved CS.
 * Any other #BP goes to the ordinary vector-3 stub, registers untouched.
 */
	.globl guest_breakpoint_entry
guest_breakpoint_entry:
	cmpq	$guest_user_trampoline_back, (%rsp)
	jne	1f
	testb	$3, 8(%rsp)
	jnz	guest_user_return
1:	jmp	guest_trap_stubs + 16 * 3

/* CPL 0 on TSS.rsp0, %rdi = fn's result. */
	.globl guest_user_return
guest_user_return:
	movq	%rdi, %rax
	movq	guest_saved_kernel_rsp(%rip), %rsp
	/* The CPL change loaded a null %ss; give CPL 0 its data segments
	 * back so later code sees the same state as before run_user. */
	movl	$KERNEL_DS, %ecx
	movw	%cx, %ss
	movw	%cx, %ds
	movw	%cx, %es
	popq	%r15
	popq	%r14
	popq	%r13
	popq	%r12
	popq	%rbp
	popq	%rbx
	ret

	.bss
	.balign	8
guest_saved_kernel_rsp:
	.quad	0

	.section .note.GNU-stack, "", @progbits
