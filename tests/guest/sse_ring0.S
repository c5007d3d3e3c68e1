/* An ELF "kernel" that runs one SSE instruction in ring 0. On hardware KVM
 * it simply runs (then debug exit 0x11, code 35); a host that emulates ring
 * 0 (kvm_pvm) does not know it: the VMM must stop with code 4 and show
 * RIP and the instruction bytes 66 0f 6e c1. */
	.code64
	.globl _start
_start:
	mov %cr4, %rax
	or $0x600, %rax      /* OSFXSR | OSXMMEXCPT: SSE allowed */
	mov %rax, %cr4
	mov %cr0, %rax
	and $~0x4, %rax      /* EM off */
	mov %rax, %cr0
	mov $7, %ecx
	movd %ecx, %xmm0
	mov $0xf4, %dx
	mov $0x11, %eax
	out %eax, %dx
1:	hlt
	jmp 1b
