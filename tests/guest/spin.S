/* An ELF "kernel" that never ends: the --timeout test. Interrupts stay
 * off, so hlt sleeps in KVM until the VMM stops the VM. */
	.code64
	.globl _start
_start:
	cli
1:	hlt
	jmp 1b
