/* An ELF "kernel" that triple-faults: an empty IDT, then a #UD. */
	.code64
	.globl _start
_start:
	lidt idt_empty(%rip)
	ud2
	.balign 8
idt_empty:
	.word 0
	.quad 0
