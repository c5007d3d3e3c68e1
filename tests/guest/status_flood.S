/* An ELF "kernel" that floods the guest status port (issue 26): 20,000
 * REPORT writes for command 1, then ends the VM through EXIT with 12, the
 * VMM's own code for a seccomp stop. The VMM logs the first reports and
 * then one line, and its stop line says the 12 was the guest's. */
	.code64
	.globl _start
_start:
	mov $0x512, %dx		/* INDEX */
	mov $1, %al
	out %al, %dx
	mov $20000, %ecx
	mov $0x513, %dx		/* REPORT */
1:	mov $7, %al
	out %al, %dx
	dec %ecx
	jnz 1b
	mov $0x510, %dx		/* EXIT */
	mov $12, %al
	out %al, %dx
2:	hlt
	jmp 2b
