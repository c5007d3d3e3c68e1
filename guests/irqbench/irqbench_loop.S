/*
 * irqbench's ring-0 part: the measuring loop and the interrupt handler
 * from irqbench.inc (shared with the raw-KVM floor's guest,
 * tests/bench/kvm_floor_guest.S).
 */
#include "irqbench.inc"

	.text
/* uint32_t irqbench_loop(uint32_t base_port, uint32_t arm_value, uint64_t samples) */
	.globl irqbench_loop
irqbench_loop:
	IRQBENCH_LOOP

/* The gate of the benchmark vector points here (trap_set_raw_gate). */
	.balign	16
	.globl irqbench_isr
irqbench_isr:
	IRQBENCH_ISR irqbench_ack_port

/* The rescue tick's gate (IRQBENCH_TICK_VECTOR). */
	.balign	16
	.globl irqbench_tick_isr
irqbench_tick_isr:
	IRQBENCH_TICK_ISR

	.data
	.balign	2
	.globl irqbench_ack_port
irqbench_ack_port:
	.word	0

	.section .note.GNU-stack, "", @progbits
