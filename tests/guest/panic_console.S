/* An ELF "kernel" that prints Linux's panic line, then resets through the
 * i8042 as panic=-1 reboot=k would: the VMM must report a crash (4). */
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
2:	mov $0x64, %dx
	mov $0xfe, %al
	out %al, %dx
3:	hlt
	jmp 3b
msg:	.asciz "Kernel panic - not syncing: test guest gives up\n"
