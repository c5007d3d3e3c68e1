/*
 * Kit set-up at CPL 0: GDT with a TSS, IDT, trap dispatch, exit helpers.
 *
 * Every instruction here runs emulated on our KVM hosts (~2 us each), so the
 * set-up touches only what it must: 33 IDT gates, one TSS descriptor.
 */
#include "guest/kit.h"
#include "guest/pvh.h"

/* A 64-bit TSS (Intel SDM vol. 3, 8.7) with a full I/O permission bitmap
 * (SDM vol. 1, 19.5.2): one bit per port, 0 = allowed, followed by an
 * all-ones byte. run_user() asks for IOPL 3, which is enough on hardware,
 * but our KVM hosts run CPL 3 with IOPL 0 whatever the guest sets, and do
 * honour the bitmap; so CPL-3 port I/O works either way. */
struct tss64 {
	uint32_t reserved0;
	uint64_t rsp[3];
	uint64_t reserved1;
	uint64_t ist[7];
	uint64_t reserved2;
	uint16_t reserved3;
	uint16_t iomap_base;
	uint8_t iomap[65536 / 8];
	uint8_t iomap_end;
} __attribute__((packed));
_Static_assert(offsetof(struct tss64, iomap) == 104, "the 64-bit TSS proper is 104 bytes");

/* Gate descriptor (SDM vol. 3, 6.14.1). */
struct idt_gate {
	uint16_t offset_low;
	uint16_t selector;
	uint8_t ist;
	uint8_t type_attr;
	uint16_t offset_mid;
	uint32_t offset_high;
	uint32_t reserved;
} __attribute__((packed));
_Static_assert(sizeof(struct idt_gate) == 16, "64-bit gate is 16 bytes");

struct desc_ptr {
	uint16_t limit;
	uint64_t base;
} __attribute__((packed));

#define GATE_INTERRUPT_DPL0 0x8E /* P, DPL 0, 64-bit interrupt gate */
#define GATE_INTERRUPT_DPL3 0xEE /* P, DPL 3: reachable with int from CPL 3 */
#define TSS_TYPE_AVAILABLE  0x89 /* P, DPL 0, 64-bit available TSS */

/* Flat 64-bit segments; the order is fixed by the selectors in arch.h. */
static uint64_t gdt[7] __attribute__((aligned(16))) = {
    0,
    0x00AF9A000000FFFFull, /* 0x08 kernel code: L, P, DPL 0 */
    0x00CF92000000FFFFull, /* 0x10 kernel data */
    0x00AFFA000000FFFFull, /* 0x18 user code: L, P, DPL 3 */
    0x00CFF2000000FFFFull, /* 0x20 user data, DPL 3 */
    0,
    0, /* 0x28 TSS, 16 bytes, filled in at run time */
};

/* Initialised data rather than .bss, so its 8 KiB need no clearing at the
 * emulated CPL 0. */
static struct tss64 tss = {
    .iomap_base = offsetof(struct tss64, iomap),
    .iomap_end = 0xFF,
};
/* In .data too: the entry code clears .bss at emulated CPL 0, so what
 * needs no clearing (zeros straight from the image) stays out of it. */
static struct idt_gate idt[256] __attribute__((aligned(16), section(".data.kit")));
static trap_handler_fn trap_handlers[256] __attribute__((section(".data.kit")));

extern char guest_trap_stubs[];
extern char guest_breakpoint_entry[];
extern char guest_trap_stack_top[];
extern char guest_ist_stack_top[];

static void idt_set_gate(unsigned vector, void *entry, uint8_t type_attr, uint8_t ist)
{
	uint64_t addr = (uint64_t)entry;
	struct idt_gate *g = &idt[vector];

	g->offset_low = (uint16_t)addr;
	g->selector = KERNEL_CS;
	g->ist = ist;
	g->type_attr = type_attr;
	g->offset_mid = (uint16_t)(addr >> 16);
	g->offset_high = (uint32_t)(addr >> 32);
	g->reserved = 0;
}

static void *trap_stub(unsigned vector)
{
	return guest_trap_stubs + 16 * vector;
}

static void gdt_load(void)
{
	uint64_t base = (uint64_t)&tss;
	uint64_t limit = sizeof(tss) - 1;
	struct desc_ptr ptr = {sizeof(gdt) - 1, (uint64_t)gdt};

	/* System-segment descriptor layout: SDM vol. 3, 8.2.3 figure 8-4. */
	gdt[5] = (limit & 0xFFFF) | ((base & 0xFFFFFF) << 16) |
		 ((uint64_t)TSS_TYPE_AVAILABLE << 40) | (((limit >> 16) & 0xF) << 48) |
		 (((base >> 24) & 0xFF) << 56);
	gdt[6] = base >> 32;

	__asm__ volatile("lgdt %0" : : "m"(ptr) : "memory");
	/* Reload CS with a far return, then the data segments, so nothing
	 * still refers to the loader's GDT (which may be reclaimed RAM). */
	__asm__ volatile("pushq %[cs]\n\t"
			 "leaq 1f(%%rip), %%rax\n\t"
			 "pushq %%rax\n\t"
			 "lretq\n"
			 "1:\n\t"
			 "movw %w[ds], %%ds\n\t"
			 "movw %w[ds], %%es\n\t"
			 "movw %w[ds], %%ss\n\t"
			 "movw %w[ds], %%fs\n\t"
			 "movw %w[ds], %%gs"
			 :
			 : [cs] "i"(KERNEL_CS), [ds] "r"(KERNEL_DS)
			 : "rax", "memory");
	__asm__ volatile("ltr %w0" : : "r"(TSS_SEL));
}

void guest_kit_init(void);
void guest_kit_init(void)
{
	struct desc_ptr ptr = {sizeof(idt) - 1, (uint64_t)idt};

	tss.rsp[0] = (uint64_t)guest_trap_stack_top;
	tss.ist[0] = (uint64_t)guest_ist_stack_top;
	gdt_load();

	/* Mask both 8259s (OCW1). KVM's in-kernel PIC starts unmasked with
	 * vector base 0 and the BSP's LINT0 in ExtINT mode, and on our KVM
	 * hosts RFLAGS.IF may not stay clear at CPL 3, so a stray ISA IRQ
	 * could arrive looking like an exception. A guest that wants the PIC
	 * programs it itself. */
	outb(0x21, 0xFF);
	outb(0xA1, 0xFF);

	/* Exceptions only; other vectors get a gate when a handler is set.
	 * A missing gate raises #GP (error code = vector * 8 + 2), which is
	 * reported like any other unexpected exception. */
	for (unsigned v = 0; v < 32; v++) {
		/* #DF, NMI and #MC switch to the IST stack: they may come
		 * from a broken stack. */
		uint8_t ist = (v == 2 || v == 8 || v == 18) ? 1 : 0;
		idt_set_gate(v, trap_stub(v), GATE_INTERRUPT_DPL0, ist);
	}
	/* #BP doubles as run_user's way back from CPL 3 (trap.S). */
	idt_set_gate(3, guest_breakpoint_entry, GATE_INTERRUPT_DPL3, 0);
	__asm__ volatile("lidt %0" : : "m"(ptr) : "memory");

	serial_init();
}

void trap_set_handler(unsigned vector, trap_handler_fn fn)
{
	if (vector >= 256)
		return;
	trap_handlers[vector] = fn;
	if (vector >= 32) {
		if (fn)
			idt_set_gate(vector, trap_stub(vector), GATE_INTERRUPT_DPL0, 0);
		else
			memset(&idt[vector], 0, sizeof(idt[vector]));
	}
}

void trap_set_raw_gate(unsigned vector, void (*entry)(void))
{
	if (vector < 32 || vector >= 256)
		return;
	trap_handlers[vector] = NULL;
	idt_set_gate(vector, (void *)entry, GATE_INTERRUPT_DPL0, 0);
}

static const char *const exception_names[32] = {
    "#DE", "#DB", "NMI", "#BP", "#OF", "#BR", "#UD", "#NM", "#DF", "CSO", "#TS",
    "#NP", "#SS", "#GP", "#PF", "#15", "#MF", "#AC", "#MC", "#XM", "#VE", "#CP",
    "#22", "#23", "#24", "#25", "#26", "#27", "#HV", "#VC", "#SX", "#31",
};

void guest_trap_dispatch(struct trap_frame *f);
void guest_trap_dispatch(struct trap_frame *f)
{
	trap_handler_fn fn = f->vector < 256 ? trap_handlers[f->vector] : NULL;

	if (fn) {
		fn(f);
		return;
	}
	printf("guest: unexpected exception %lu (%s) at CPL %lu: error 0x%lx rip 0x%lx "
	       "cr2 0x%lx rsp 0x%lx rflags 0x%lx\n",
	       f->vector, f->vector < 32 ? exception_names[f->vector] : "interrupt", f->cs & 3,
	       f->error_code, f->rip, read_cr2(), f->rsp, f->rflags);
	guest_exit(GUEST_EXIT_EXCEPTION);
}

/* Called if the VMM does not stop the guest at the exit port. At CPL 3 hlt
 * would fault (and the fault handler exits again), so spin there. */
__attribute__((noreturn)) static void stop_here(void)
{
	for (;;) {
		if (current_cpl() == 0)
			__asm__ volatile("cli; hlt" ::: "memory");
		else
			cpu_relax();
	}
}

void guest_exit(uint32_t value)
{
	outl(0xF4, value);
	stop_here();
}

void guest_reset(void)
{
	/* i8042 "pulse output port bit 0": the CPU reset line. */
	outb(0x64, 0xFE);
	stop_here();
}

/* PVH entry (lib/entry.S): the hvm_start_info turned into the zero page a
 * 64-bit boot-protocol loader would have given, so guests read one
 * interface. At the emulated CPL 0, so only pointers and the few memory
 * map entries are copied; cmdline_get() checks the NUL at CPL 3. */
unsigned char guest_booted_pvh;
static struct boot_params pvh_boot_params; /* .bss: cleared by the entry code */

struct boot_params *guest_pvh_boot_params(const struct hvm_start_info *si);
struct boot_params *guest_pvh_boot_params(const struct hvm_start_info *si)
{
	struct boot_params *bp = &pvh_boot_params;

	guest_booted_pvh = 1;
	if (si->magic != HVM_START_MAGIC)
		return bp;
	bp->hdr.cmd_line_ptr = (uint32_t)si->cmdline_paddr;
	bp->ext_cmd_line_ptr = (uint32_t)(si->cmdline_paddr >> 32);
	bp->hdr.cmdline_size = si->cmdline_paddr ? 0xFFFF : 0;
	if (si->nr_modules && si->modlist_paddr) {
		const struct hvm_modlist_entry *m = (const void *)si->modlist_paddr;
		bp->hdr.ramdisk_image = (uint32_t)m->paddr;
		bp->ext_ramdisk_image = (uint32_t)(m->paddr >> 32);
		bp->hdr.ramdisk_size = (uint32_t)m->size;
		bp->ext_ramdisk_size = (uint32_t)(m->size >> 32);
	}
	if (si->version >= 1 && si->memmap_paddr) {
		const struct hvm_memmap_table_entry *e = (const void *)si->memmap_paddr;
		unsigned n = si->memmap_entries < E820_MAX_ENTRIES_ZEROPAGE
				 ? si->memmap_entries
				 : E820_MAX_ENTRIES_ZEROPAGE;
		for (unsigned i = 0; i < n; i++) {
			bp->e820_table[i].addr = e[i].addr;
			bp->e820_table[i].size = e[i].size;
			bp->e820_table[i].type = e[i].type;
		}
		bp->e820_entries = (uint8_t)n;
	}
	return bp;
}

void guest_kit_run_main(struct boot_params *bp);
void guest_kit_run_main(struct boot_params *bp)
{
	int rc = guest_main(bp);

	if (rc == 0)
		guest_reset();
	guest_exit(rc > 0 ? (uint32_t)rc : GUEST_EXIT_RETURNED);
}
