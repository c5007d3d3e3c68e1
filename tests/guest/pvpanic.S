/* An ELF "kernel" that reports a panic through pvpanic (port 0x505, bit 0):
 * the VMM must exit with code 4. */
	.code64
	.globl _start
_start:
	mov $0x505, %dx
	in %dx, %al          /* features: bit 0 (PANICKED) must be offered */
	test $1, %al
	jz 1f
	mov $1, %al
	out %al, %dx
1:	mov $0xf4, %dx       /* pvpanic missing or ignored: debug exit 1 (code 3) */
	mov $1, %eax
	out %eax, %dx
2:	hlt
	jmp 2b
