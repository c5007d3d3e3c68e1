/* An ELF "kernel" that prints one line and exits through the debug-exit
 * port with value 0x21: the VMM must exit with (0x21 << 1) | 1 = 67. */
	.code64
	.globl _start
_start:
	lea msg(%rip), %rsi
	mov $0x3f8, %dx
1:	lodsb
	test %al, %al
	jz 2f
	out %al, %dx
	jmp 1b
2:	mov $0xf4, %dx
	mov $0x21, %eax
	out %eax, %dx
3:	hlt
	jmp 3b
msg:	.asciz "debug-exit guest: leaving with 0x21\n"
