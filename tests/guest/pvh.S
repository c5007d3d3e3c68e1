/* An ELF "kernel" with a PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY), for
 * the PVH start-info ABI (xen/include/public/arch-x86/hvm/start_info.h):
 * entered at pvh_entry in 32-bit protected mode, paging off, EBX = the
 * hvm_start_info, it checks what the VMM promised and leaves through the
 * debug-exit port: 0x10 (exit code 33) when all holds, a step number
 * 1-7 (exit codes 3-15) for the first that does not. Entered at its ELF
 * entry instead (the 64-bit protocol, --boot linux), it leaves with 0x20
 * (exit code 65). Offsets: magic 0, version 4, flags 8, nr_modules 12,
 * modlist_paddr 16, cmdline_paddr 24, rsdp_paddr 32, memmap_paddr 40,
 * memmap_entries 48; a module is paddr, size, ... Keep it short: ring 0 is emulated on our hosts. */
#define FAIL(n) mov $n, %eax; jmp out

	.section .note.Xen, "a", @note
	.balign 4
	.long 4			/* namesz */
	.long 8			/* descsz: Linux writes a quad */
	.long 18		/* XEN_ELFNOTE_PHYS32_ENTRY */
	.asciz "Xen"
	.balign 4
	.quad pvh_entry
	.balign 4

	.text
	.code64
	.globl _start
_start:				/* the 64-bit entry: not PVH */
	mov $0xf4, %dx
	mov $0x20, %eax
	out %eax, %dx
1:	hlt
	jmp 1b

	.code32
pvh_entry:
	mov %cr0, %eax		/* 1: protected mode, paging off */
	test $0x80000000, %eax
	jnz f1
	test $1, %eax
	jz f1
	cmpl $0x336ec578, (%ebx)	/* 2: the start info's magic, version >= 1 */
	jne f2
	cmpl $1, 4(%ebx)
	jb f2
	mov 24(%ebx), %ecx	/* 3: a command line: "console=" at its start */
	test %ecx, %ecx
	jz f3
	cmpl $0x736e6f63, (%ecx)	/* "cons" */
	jne f3
	mov 32(%ebx), %ecx	/* 4: rsdp_paddr points at "RSD PTR " */
	test %ecx, %ecx
	jz f4
	cmpl $0x20445352, (%ecx)
	jne f4
	cmpl $0x20525450, 4(%ecx)
	jne f4
	mov 40(%ebx), %ecx	/* 5: a memory map: entry 0 is RAM at 0 */
	cmpl $3, 48(%ebx)
	jb f5
	cmpl $0, (%ecx)
	jne f5
	cmpl $1, 16(%ecx)
	jne f5
	mov 12(%ebx), %eax	/* 6: one module (the initrd), its size */
	cmp $1, %eax
	jne f6
	mov 16(%ebx), %ecx
	cmpl $0, 8(%ecx)
	je f6
	mov %cs, %eax		/* 7: a code segment the GDT has */
	test %eax, %eax
	jz f7
	mov $0x10, %eax
	jmp out
f1:	FAIL(1)
f2:	FAIL(2)
f3:	FAIL(3)
f4:	FAIL(4)
f5:	FAIL(5)
f6:	FAIL(6)
f7:	FAIL(7)
out:	mov $0xf4, %dx
	out %eax, %dx
2:	hlt
	jmp 2b
