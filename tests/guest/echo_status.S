/* An ELF "kernel" that says it is ready, reads one line from COM1 (polling
 * LSR.DR, 16550A), prints it back as "echo guest: got LINE", then ends the
 * VM through the guest status port (0x510, +0: the byte is ./vmm's exit
 * code) with 3. For the emulated host's stdin, console and exit-code tests. */
	.code64
	.globl _start
_start:
	lea ready(%rip), %rsi
	call puts
	lea got(%rip), %rsi
	call puts
	mov $0x3f8, %dx
1:	add $5, %dx		/* LSR */
2:	in %dx, %al
	test $1, %al		/* data ready */
	jz 2b
	sub $5, %dx
	in %dx, %al		/* RBR */
	cmp $'\r', %al
	je 1b
	out %al, %dx		/* echo it */
	cmp $'\n', %al
	jne 1b
	mov $0x510, %dx
	mov $3, %al
	out %al, %dx
3:	hlt
	jmp 3b

/* puts: the NUL-terminated string at %rsi to COM1. */
puts:
	mov $0x3f8, %dx
4:	lodsb
	test %al, %al
	jz 5f
	out %al, %dx
	jmp 4b
5:	ret

ready:	.asciz "echo guest: ready\n"
got:	.asciz "echo guest: got "
