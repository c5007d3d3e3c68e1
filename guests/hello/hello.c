/*
 * hello: boots under the VMM and checks what the loader and the machine
 * promise (boot_params, e820, initrd, command line, MP table, CPUID, LAPIC,
 * RTC, UART, PIT, exceptions, CPL 3). Each check prints one line; the
 * summary is "hello: all N checks passed" followed by a reset (VMM exit 0),
 * or "hello: N of M checks failed" and guest_exit(1) (VMM exit 3).
 *
 * Optional command-line keys make checks exact: hello.mem_mib=N,
 * hello.initrd_size=N with hello.initrd_fnv=0xXXXXXXXX, hello.cpus=N,
 * hello.cmdline_has=WORD. Without them the shape is checked.
 *
 * Only the two checks that need CPL 0 (int3, stac/clac) run there; the rest
 * runs in run_user(), natively on our KVM hosts.
 */
#include "hello.h"

#include "guest/cmdline.h"
#include "guest/ram.h"

#define MIB (1024ull * 1024)
#define GIB (1024 * MIB)

/* The e820 the VMM promises: base memory up to the EBDA, the EBDA/VGA/BIOS
 * hole, RAM from 1 MiB up to 3 GiB, and the rest above 4 GiB. */
#define E820_BASE_END	0x9FC00ull
#define E820_HIGH_START 0x100000ull
#define E820_HOLE_START 0xC0000000ull
#define E820_ABOVE_4G	0x100000000ull

/* Only the first 4 GiB are mapped by the kit. */
#define MAPPED_LIMIT 0x100000000ull

static const char *const known_keys[] = {
    "hello.mem_mib", "hello.initrd_size", "hello.initrd_fnv", "hello.cpus", "hello.cmdline_has",
};

/* ---- reporting ---- */

bool check(struct hello *h, bool ok, const char *what, const char *fmt, ...)
{
	h->checks++;
	if (ok) {
		printf("hello: ok   %s\n", what);
		return true;
	}
	h->failures++;
	char detail[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	printf("hello: FAIL %s: %s\n", what, detail);
	return false;
}

void skip(struct hello *h, const char *what, const char *why)
{
	(void)h;
	printf("hello: skip %s: %s\n", what, why);
}

void info(const char *fmt, ...)
{
	va_list ap;
	printf("hello: info ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

/* ---- command line (words and values through guest/cmdline.h) ---- */

bool cmdline_number(struct hello *h, const char *key, uint64_t *out)
{
	const char *val;
	size_t len;
	if (!cmdline_value(h->cmdline, key, &val, &len))
		return false;
	if (cmdline_parse_u64(val, len, out))
		return true;
	check(h, false, key, "value \"%.*s\" is not a number", (int)len, val);
	return false;
}

/* ---- boot_params (boot.rst) ---- */

static void check_boot_params(struct hello *h)
{
	struct boot_params *bp = h->bp;
	struct setup_header *hdr = &bp->hdr;

	info("boot_params at %p, protocol %x.%02x", (void *)bp, hdr->version >> 8,
	     hdr->version & 0xFF);
	check(h, hdr->boot_flag == BOOT_FLAG_MAGIC, "boot_params hdr.boot_flag is 0xAA55", "0x%04x",
	      hdr->boot_flag);
	check(h, hdr->header == SETUP_HDRS_MAGIC, "boot_params hdr.header is \"HdrS\"", "0x%08x",
	      hdr->header);
	check(h, hdr->version >= 0x020C, "boot_params hdr.version >= 2.12", "0x%04x", hdr->version);
	/* boot.rst type_of_loader: 0xFF is "undefined", for loaders with no
	 * assigned id. */
	check(h, hdr->type_of_loader == LOADER_TYPE_UNDEFINED, "boot_params type_of_loader is 0xff",
	      "0x%02x", hdr->type_of_loader);
	check(h, hdr->loadflags & LOADFLAG_LOADED_HIGH, "boot_params loadflags has LOADED_HIGH",
	      "loadflags 0x%02x", hdr->loadflags);

	uint64_t ptr = hdr->cmd_line_ptr | (uint64_t)bp->ext_cmd_line_ptr << 32;
	uint32_t max = hdr->cmdline_size;
	if (!check(h, ptr != 0, "boot_params cmd_line_ptr is set", "cmd_line_ptr is 0"))
		return;
	if (!check(h, ptr + max < MAPPED_LIMIT, "command line lies below 4 GiB",
		   "at 0x%lx, which this guest does not map", ptr))
		return;
	/* boot.rst cmdline_size: "the maximum size of the command line
	 * without the terminating zero". */
	size_t len = strnlen((const char *)ptr, (size_t)max + 1);
	if (!check(h, len <= max, "command line is NUL-terminated within cmdline_size",
		   "no NUL in the first %u bytes at 0x%lx", max + 1, ptr))
		return;
	h->cmdline = (const char *)ptr;
	info("command line (%zu bytes at 0x%lx): \"%s\"", len, ptr, h->cmdline);
}

/* ---- e820 (boot.rst zero page, offsets 0x1e8 and 0x2d0) ---- */

static bool e820_is(const struct boot_e820_entry *e, uint64_t addr, uint64_t size, uint32_t type)
{
	return e->addr == addr && e->size == size && e->type == type;
}

static void check_e820(struct hello *h)
{
	const struct boot_params *bp = h->bp;
	unsigned n = bp->e820_entries;
	const struct boot_e820_entry *e = bp->e820_table;

	if (!check(h, n >= 3 && n <= E820_MAX_ENTRIES_ZEROPAGE, "e820 has at least 3 entries",
		   "e820_entries is %u", n))
		return;
	uint64_t usable = 0;
	bool ordered = true;
	for (unsigned i = 0; i < n; i++) {
		info("e820 %u: [0x%lx, 0x%lx) type %u", i, e[i].addr, e[i].addr + e[i].size,
		     e[i].type);
		if (e[i].type == E820_TYPE_RAM)
			usable += e[i].size;
		if (i > 0 && e[i].addr < e[i - 1].addr + e[i - 1].size)
			ordered = false;
	}
	check(h, ordered, "e820 entries are sorted and do not overlap", "see the table above");
	check(h, e820_is(&e[0], 0, E820_BASE_END, E820_TYPE_RAM),
	      "e820 entry 0 is usable [0, 0x9fc00)", "[0x%lx, +0x%lx) type %u", e[0].addr,
	      e[0].size, e[0].type);
	check(h, e820_is(&e[1], E820_BASE_END, E820_HIGH_START - E820_BASE_END, E820_TYPE_RESERVED),
	      "e820 entry 1 is reserved [0x9fc00, 0x100000)", "[0x%lx, +0x%lx) type %u", e[1].addr,
	      e[1].size, e[1].type);
	uint64_t end2 = e[2].addr + e[2].size;
	check(h,
	      e[2].addr == E820_HIGH_START && e[2].type == E820_TYPE_RAM &&
		  end2 > E820_HIGH_START && end2 <= E820_HOLE_START,
	      "e820 entry 2 is usable from 0x100000 up to at most 3 GiB", "[0x%lx, 0x%lx) type %u",
	      e[2].addr, end2, e[2].type);
	if (n == 4) {
		check(h,
		      end2 == E820_HOLE_START && e[3].addr == E820_ABOVE_4G && e[3].size > 0 &&
			  e[3].type == E820_TYPE_RAM,
		      "e820 entries 2 and 3 split RAM around the 3..4 GiB hole",
		      "entry 2 ends at 0x%lx, entry 3 is [0x%lx, +0x%lx) type %u", end2, e[3].addr,
		      e[3].size, e[3].type);
	} else {
		check(h, n == 3, "e820 has no entries beyond the promised ones", "%u entries", n);
	}

	uint64_t mem_mib;
	if (cmdline_number(h, "hello.mem_mib", &mem_mib)) {
		uint64_t ram = mem_mib * MIB;
		uint64_t expect = ram - (E820_HIGH_START - E820_BASE_END);
		uint64_t low_end = ram < E820_HOLE_START ? ram : E820_HOLE_START;
		check(h, usable == expect, "e820 usable total matches hello.mem_mib",
		      "usable 0x%lx, expected 0x%lx for %lu MiB", usable, expect, mem_mib);
		check(h, end2 == low_end && (ram > E820_HOLE_START) == (n == 4),
		      "e820 low RAM ends at min(RAM, 3 GiB)",
		      "entry 2 ends at 0x%lx, expected 0x%lx (%u entries)", end2, low_end, n);
	} else {
		info("e820 usable total 0x%lx (no hello.mem_mib to compare with)", usable);
	}
}

/* ---- initrd (boot.rst ramdisk_image/ramdisk_size, zero page 0x0c0/0x0c4) ---- */

/* FNV-1a, 32-bit (the offset basis and prime from the FNV reference). */
static uint32_t fnv1a32(const uint8_t *p, uint64_t n)
{
	uint32_t hash = 0x811C9DC5u;
	for (uint64_t i = 0; i < n; i++) {
		hash ^= p[i];
		hash *= 0x01000193u;
	}
	return hash;
}

static void check_initrd(struct hello *h)
{
	const struct boot_params *bp = h->bp;
	uint64_t image = bp->hdr.ramdisk_image | (uint64_t)bp->ext_ramdisk_image << 32;
	uint64_t size = bp->hdr.ramdisk_size | (uint64_t)bp->ext_ramdisk_size << 32;
	uint64_t want_size, want_fnv;
	bool have_size = cmdline_number(h, "hello.initrd_size", &want_size);
	bool have_fnv = cmdline_number(h, "hello.initrd_fnv", &want_fnv);

	info("initrd: image 0x%lx size 0x%lx", image, size);
	if (!have_size && !have_fnv) {
		check(h, size == 0, "no initrd without hello.initrd_size", "ramdisk_size is 0x%lx",
		      size);
		return;
	}
	if (!check(h, have_size && have_fnv, "hello.initrd_size and hello.initrd_fnv come together",
		   "only one of them is on the command line"))
		return;
	check(h, size == want_size, "initrd size matches hello.initrd_size",
	      "ramdisk_size %lu, expected %lu", size, want_size);
	check(h, image % 4096 == 0, "initrd is page aligned", "at 0x%lx", image);
	check(h, size > 0 && ram_e820_covers(bp, image, size), "initrd lies in usable e820 RAM",
	      "[0x%lx, 0x%lx)", image, image + size);
	/* boot.rst initrd_addr_max: "the highest address that may be occupied
	 * by the initial ramdisk/ramfs contents", hence the + 1. */
	uint64_t limit = (uint64_t)bp->hdr.initrd_addr_max + 1;
	check(h, image + size <= limit, "initrd ends at or below initrd_addr_max + 1",
	      "ends at 0x%lx, limit 0x%lx", image + size, limit);
	if (!check(h, image + size <= MAPPED_LIMIT, "initrd lies below 4 GiB",
		   "ends at 0x%lx, which this guest does not map", image + size))
		return;
	uint32_t fnv = fnv1a32((const uint8_t *)image, size);
	check(h, fnv == want_fnv, "initrd FNV-1a matches hello.initrd_fnv",
	      "computed 0x%08x, expected 0x%08lx", fnv, want_fnv);
}

/* ---- command line words ---- */

static void check_cmdline_words(struct hello *h)
{
	/* The first unknown key is shown up to 60 characters. */
	char first[61];
	unsigned unknown =
	    cmdline_unknown_keys(h->cmdline, "hello.", known_keys,
				 sizeof(known_keys) / sizeof(known_keys[0]), first, sizeof(first));
	check(h, unknown == 0, "command line has no unknown hello.* keys",
	      "%u unknown, first \"%s\"", unknown, first);

	const char *val;
	size_t len;
	if (!cmdline_value(h->cmdline, "hello.cmdline_has", &val, &len))
		return;
	/* The key's own word cannot match: it contains '='-prefixed text. */
	check(h, len > 0 && cmdline_has_word(h->cmdline, val, len),
	      "command line has the word from hello.cmdline_has", "\"%.*s\" is not a separate word",
	      (int)len, val);
}

/* ---- exceptions (results gathered at CPL 0 before run_user) ---- */

static struct hello *bp_owner;

static void on_breakpoint(struct trap_frame *f)
{
	bp_owner->bp_hits++;
	bp_owner->bp_rip = f->rip;
	bp_owner->bp_cpl = (unsigned)(f->cs & 3);
}

/* CPL 0. On our KVM hosts int3 and stac/clac are the instructions the
 * ring-0 emulator does not know; the VMM injects #BP and emulates
 * stac/clac (shared/notes/kvm-host.md). On real hardware they are native. */
static void cpl0_probes(struct hello *h)
{
	bp_owner = h;
	trap_set_handler(3, on_breakpoint);
	__asm__ volatile("leaq 1f(%%rip), %0\n\t"
			 "int3\n"
			 "1:"
			 : "=r"(h->bp_expected_rip)
			 :
			 : "memory");
	h->bp_resumed = true;
	trap_set_handler(3, NULL);

	h->cr4 = read_cr4();
	h->cpl0_leaf1_ecx = cpuid(1, 0).ecx;
	h->cpl0_hv_ebx = cpuid(0x40000000, 0).ebx;
	if (cpuid(0, 0).eax >= 7 && (cpuid(7, 0).ebx & (1u << 20))) {
		h->smap_advertised = true;
		__asm__ volatile("stac" ::: "memory");
		h->ac_after_stac = read_rflags() & RFLAGS_AC;
		__asm__ volatile("clac" ::: "memory");
		h->ac_after_clac = read_rflags() & RFLAGS_AC;
	}
}

static void report_cpl0_probes(struct hello *h)
{
	check(h, h->bp_hits == 1 && h->bp_cpl == 0, "int3 at CPL 0 reaches the #BP handler",
	      "handler ran %lu times, from CPL %u", h->bp_hits, h->bp_cpl);
	check(h, h->bp_resumed && h->bp_rip == h->bp_expected_rip,
	      "execution resumes after the int3", "handler saw rip 0x%lx, expected 0x%lx",
	      h->bp_rip, h->bp_expected_rip);
	info("CR4 at CPL 0 0x%lx, SMAP %sadvertised", h->cr4, h->smap_advertised ? "" : "not ");
	if (!h->smap_advertised) {
		skip(h, "stac/clac at CPL 0", "CPUID.7.0:EBX.SMAP is not set");
		return;
	}
	check(h, h->ac_after_stac, "stac sets RFLAGS.AC", "AC clear after stac");
	check(h, !h->ac_after_clac, "clac clears RFLAGS.AC", "AC set after clac");
}

/* ---- CPL 3 ---- */

#define USER_COOKIE ((uint64_t)0x5eed0f0ca11ab1e)

static uint64_t user_probe(void *arg)
{
	struct hello *h = arg;
	uint16_t cs;
	__asm__ volatile("mov %%cs, %0" : "=r"(cs));
	h->user_cs = cs;
	h->user_rflags = read_rflags();
	return h->user_cookie ^ USER_COOKIE;
}

static void check_user_mode(struct hello *h)
{
	check(h, (h->user_cs & 3) == 3, "run_user runs fn at CPL 3", "CS 0x%x", h->user_cs);
	/* Not a check: hardware keeps the IOPL 3 and IF 0 that run_user
	 * asks for; pushf at CPL 3 on our KVM hosts reads IOPL 0 and IF 1
	 * (port I/O works there through the TSS I/O bitmap instead). */
	info("RFLAGS at CPL 3: 0x%lx (IOPL %lu, IF %lu)", h->user_rflags,
	     (h->user_rflags & RFLAGS_IOPL_MASK) >> 12, (h->user_rflags & RFLAGS_IF) >> 9);
	check(h, h->user_probe_result == (h->user_cookie ^ USER_COOKIE),
	      "run_user returns fn's return value", "got 0x%lx, expected 0x%lx",
	      h->user_probe_result, h->user_cookie ^ USER_COOKIE);

	/* Informational timing: native at CPL 3 on our hosts, about 2 us per
	 * instruction at CPL 0 (shared/notes/kvm-host.md). */
	uint64_t n = 10000000;
	uint64_t t0 = rdtsc();
	__asm__ volatile("1: decq %0\n\tjnz 1b" : "+r"(n) : : "cc");
	uint64_t t1 = rdtsc();
	check(h, n == 0 && t1 > t0, "a 10^7-iteration loop runs at CPL 3",
	      "counter %lu, tsc %lu -> %lu", n, t0, t1);
	info("10^7 dec/jnz iterations at CPL 3 took %lu TSC cycles", t1 - t0);

	/* A device register round trip from CPL 3 (IOPL 3 on hardware, the
	 * TSS I/O bitmap on our KVM hosts). */
	outb(0x3FF, 0xC3);
	uint8_t got = inb(0x3FF);
	check(h, current_cpl() == 3 && got == 0xC3, "port I/O works at CPL 3",
	      "CPL %u, UART scratch read back 0x%02x", current_cpl(), got);
	t0 = rdtsc();
	for (int i = 0; i < 100; i++)
		(void)inb(0x3FF);
	info("one port read at CPL 3 costs about %lu TSC cycles", (rdtsc() - t0) / 100);
}

static uint64_t user_main(void *arg)
{
	struct hello *h = arg;

	printf("hello: guest kit loader checker\n");
	check_boot_params(h);
	check_e820(h);
	check_initrd(h);
	check_cmdline_words(h);
	check_mptable(h);
	check_cpuid(h);
	check_lapic(h);
	check_rtc(h);
	check_uart(h);
	check_pit(h);
	report_cpl0_probes(h);
	check_user_mode(h);

	/* Boot-time markers (Firecracker's MMIO byte, Cloud Hypervisor's
	 * port 0x80 code), printed by the VMM with --boot-timer. */
	mmio_write8(0xC0000000, 123);
	outb(0x80, 0x41);

	if (h->failures)
		printf("hello: %u of %u checks failed\n", h->failures, h->checks);
	else
		printf("hello: all %u checks passed\n", h->checks);
	return h->failures;
}

int guest_main(struct boot_params *bp)
{
	static struct hello h;

	h.bp = bp;
	cpl0_probes(&h);
	/* A first round trip with a value that changes per boot, so a
	 * run_user that loses the return value cannot pass by accident. */
	h.user_cookie = rdtsc();
	h.user_probe_result = run_user(user_probe, &h);
	uint64_t failures = run_user(user_main, &h);
	return failures ? 1 : 0;
}
