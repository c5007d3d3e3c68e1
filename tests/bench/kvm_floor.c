/*
 * kvm_floor: the raw-KVM floor of interrupt delivery, with nothing but
 * <linux/kvm.h>. One VM with the in-kernel irqchip (LAPIC, IOAPIC, PIC),
 * one vCPU entered directly in long mode (the VMM's own entry state,
 * vmm/cpu/long_mode.c, itself only <linux/kvm.h>), and a tiny guest
 * (kvm_floor_guest.S) that runs the irqbench guest's measuring loop and
 * interrupt handler (guests/irqbench/irqbench.inc): `out ARM`, `sti; hlt`,
 * and a handler that is `out ACK`, the LAPIC EOI and iretq.
 *
 * Per sample: the vCPU thread sees the ARM port exit and wakes the main
 * thread, which waits the delay, stamps t0 (CLOCK_MONOTONIC, as the VMM's
 * irq_now_ns) and injects; the vCPU thread stamps t1 at the ACK port exit
 * and records t1 - t0. Delivery paths (--mode):
 *   msi-signal     KVM_SIGNAL_MSI
 *   msi-irqfd      an MSI route in KVM_SET_GSI_ROUTING + KVM_IRQFD, eventfd write
 *   intx-line      KVM_IRQ_LINE level 1 on IOAPIC pin 16, level 0 at the ACK
 *   intx-resample  KVM_IRQFD with KVM_IRQFD_FLAG_RESAMPLE on GSI 16: the
 *                  eventfd write asserts, KVM lowers the line at the EOI and
 *                  signals the resamplefd; the main thread re-asserts if the
 *                  guest has not acknowledged yet (what a device model does)
 *
 * Guest RAM is --memory MiB (default 256, like the VMM's default), so the
 * same program serves the footprint comparison (exec to first KVM_RUN, RSS
 * without guest RAM; tests/bench/kvmrun_shim.c measures it from outside).
 *
 * Output: --out FILE gets the samples in the format the VMM's irqbench
 * device writes (comment lines starting with '#', then one sample per line
 * in nanoseconds); stdout gets one summary line.
 *
 * Exit codes: 0 done, 2 usage, 8 host problem (no /dev/kvm, a missing
 * capability, an ioctl failed), 4 the guest did something unexpected.
 */
#include "vmm/cpu/long_mode.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/kvm.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define EXIT_USAGE 2
#define EXIT_GUEST 4
#define EXIT_HOST  8

/* Guest-physical layout (identity-mapped). */
#define GDT_GPA	  0x1000ull
#define IDT_GPA	  0x2000ull
#define PML4_GPA  0x3000ull
#define PDPT_GPA  0x4000ull
#define PD_GPA	  0x5000ull /* four pages: 0..4 GiB in 2 MiB pages */
#define CODE_GPA  0x10000ull
#define STACK_TOP 0x80000ull

#define BASE_PORT   0x6000u /* ACK +0, ARM +4, SAMPLES +0xC (irqbench.inc) */
#define DONE_PORT   0xF4u
#define VECTOR	    0x50u
#define TICK_VECTOR 0x51u /* irqbench.inc: IRQBENCH_TICK_VECTOR, the rescue tick */
#define INTX_GSI    16u
#define MSI_GSI	    24u
#define ARM_INTX    0xFFFFFFFFu
#define MSI_ADDRESS 0xFEE00000u /* destination APIC ID 0, physical, fixed */

enum mode { MSI_SIGNAL, MSI_IRQFD, INTX_LINE, INTX_RESAMPLE };
static const char *const mode_names[] = {"msi-signal", "msi-irqfd", "intx-line", "intx-resample"};

extern const uint8_t kvm_floor_guest_start[], kvm_floor_guest_end[];
extern const uint8_t kvm_floor_guest_base_port[], kvm_floor_guest_arm_value[],
    kvm_floor_guest_count[], kvm_floor_guest_entry[], kvm_floor_guest_isr[],
    kvm_floor_guest_tick_isr[];

static struct {
	enum mode mode;
	uint64_t samples_wanted;
	unsigned delay_us;
	uint64_t mem_mib;
	const char *out;
	int pit; /* --pit: KVM_CREATE_PIT2 too */

	int kvm, vm, vcpu;
	struct kvm_run *run;
	uint8_t *ram;
	int arm_efd, irq_efd, resample_efd;

	_Atomic uint64_t t0;	   /* stamp of the outstanding fire, 0 if none */
	_Atomic int intx_pending;  /* resample mode: fired, not yet acknowledged */
	_Atomic uint32_t nsamples; /* the SAMPLES register */
	uint64_t *samples;
	uint64_t acks, stale_acks, reasserts;
	_Atomic int done;
	int vcpu_rc;
} f;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((noreturn, format(printf, 2, 3))) static void die(int code, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "kvm_floor: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

static void xioctl(int fd, unsigned long req, void *arg, const char *what)
{
	if (ioctl(fd, req, arg) < 0)
		die(EXIT_HOST, "%s: %s", what, strerror(errno));
}

/* ---- the machine ---- */

static void setup_memory(void)
{
	size_t len = (size_t)f.mem_mib << 20;

	f.ram = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		     -1, 0);
	if (f.ram == MAP_FAILED)
		die(EXIT_HOST, "mmap of %llu MiB guest RAM: %s", (unsigned long long)f.mem_mib,
		    strerror(errno));
	struct kvm_userspace_memory_region r = {
	    .slot = 0, .guest_phys_addr = 0, .memory_size = len, .userspace_addr = (uint64_t)f.ram};
	xioctl(f.vm, KVM_SET_USER_MEMORY_REGION, &r, "KVM_SET_USER_MEMORY_REGION");
}

static void put64(uint64_t gpa, uint64_t v)
{
	memcpy(f.ram + gpa, &v, 8);
}

/* Page tables (0..4 GiB identity, 2 MiB pages; the top GiB uncached for the
 * LAPIC), a GDT with a 64-bit code and a data segment, an IDT with one gate,
 * and the guest code. Intel SDM vol. 3, 4.5, 3.4.5, 6.14.1. */
/* IDT entry `vector`: a 64-bit interrupt gate, DPL 0, to the guest code
 * at `handler` (an address in the copied code). */
static void set_gate(uint8_t *ram, unsigned vector, const uint8_t *handler)
{
	uint64_t isr = CODE_GPA + (uint64_t)(handler - kvm_floor_guest_start);
	uint8_t *gate = ram + IDT_GPA + 16 * vector;
	uint16_t lo = (uint16_t)isr, mid = (uint16_t)(isr >> 16), sel = 0x08;
	uint32_t hi = (uint32_t)(isr >> 32);
	memcpy(gate + 0, &lo, 2);
	memcpy(gate + 2, &sel, 2);
	gate[4] = 0;
	gate[5] = 0x8E; /* present, DPL 0, 64-bit interrupt gate */
	memcpy(gate + 6, &mid, 2);
	memcpy(gate + 8, &hi, 4);
}

static void setup_guest(void)
{
	size_t code_len = (size_t)(kvm_floor_guest_end - kvm_floor_guest_start);

	put64(PML4_GPA, PDPT_GPA | 0x3);
	for (uint64_t g = 0; g < 4; g++) {
		put64(PDPT_GPA + 8 * g, (PD_GPA + 0x1000 * g) | 0x3);
		for (uint64_t i = 0; i < 512; i++) {
			uint64_t pde = ((g * 512 + i) << 21) | 0x83; /* P, RW, PS */
			if (g == 3)
				pde |= 0x18; /* PCD | PWT */
			put64(PD_GPA + 0x1000 * g + 8 * i, pde);
		}
	}
	put64(GDT_GPA + 0, 0);
	put64(GDT_GPA + 8, 0x00AF9A000000FFFFull);  /* 0x08: 64-bit code */
	put64(GDT_GPA + 16, 0x00CF92000000FFFFull); /* 0x10: data */

	memcpy(f.ram + CODE_GPA, kvm_floor_guest_start, code_len);
	set_gate(f.ram, VECTOR, kvm_floor_guest_isr);
	set_gate(f.ram, TICK_VECTOR, kvm_floor_guest_tick_isr);

	uint32_t base = BASE_PORT, arm = f.mode <= MSI_IRQFD ? 0 : ARM_INTX;
	uint64_t count = f.samples_wanted;
	memcpy(f.ram + CODE_GPA + (kvm_floor_guest_base_port - kvm_floor_guest_start), &base, 4);
	memcpy(f.ram + CODE_GPA + (kvm_floor_guest_arm_value - kvm_floor_guest_start), &arm, 4);
	memcpy(f.ram + CODE_GPA + (kvm_floor_guest_count - kvm_floor_guest_start), &count, 8);
}

static void setup_vcpu(void)
{
	const struct long_mode_entry lm = {
	    .rip = CODE_GPA + (uint64_t)(kvm_floor_guest_entry - kvm_floor_guest_start),
	    .rsp = STACK_TOP,
	    .cr3 = PML4_GPA,
	    .gdt = GDT_GPA,
	    .gdt_limit = 23,
	    .idt = IDT_GPA,
	    .idt_limit = 4095,
	    .code_sel = 0x08,
	    .data_sel = 0x10,
	};
	struct kvm_sregs s;
	struct kvm_regs r;
	int size = ioctl(f.kvm, KVM_GET_VCPU_MMAP_SIZE, 0);

	f.vcpu = ioctl(f.vm, KVM_CREATE_VCPU, 0);
	if (f.vcpu < 0 || size <= 0)
		die(EXIT_HOST, "KVM_CREATE_VCPU: %s", strerror(errno));
	f.run = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, f.vcpu, 0);
	if (f.run == MAP_FAILED)
		die(EXIT_HOST, "mmap of kvm_run: %s", strerror(errno));

	struct {
		struct kvm_cpuid2 c;
		struct kvm_cpuid_entry2 e[100];
	} cpuid = {.c.nent = 100};
	xioctl(f.kvm, KVM_GET_SUPPORTED_CPUID, &cpuid, "KVM_GET_SUPPORTED_CPUID");
	xioctl(f.vcpu, KVM_SET_CPUID2, &cpuid, "KVM_SET_CPUID2");

	/* The VMM's long-mode entry over this program's GDT, IDT and page
	 * tables; TR stays as KVM reset it (the guest never changes ring). */
	xioctl(f.vcpu, KVM_GET_SREGS, &s, "KVM_GET_SREGS");
	long_mode_sregs(&s, &lm);
	xioctl(f.vcpu, KVM_SET_SREGS, &s, "KVM_SET_SREGS");
	long_mode_regs(&r, &lm);
	xioctl(f.vcpu, KVM_SET_REGS, &r, "KVM_SET_REGS");
}

/* KVM_SET_GSI_ROUTING replaces the whole table, KVM's defaults included
 * (shared/notes/guest-kernels.md), so the defaults go along: GSI 0-15 to
 * the PICs and the IOAPIC, 16-23 to the IOAPIC; plus the MSI route. */
static void set_routes(void)
{
	struct {
		struct kvm_irq_routing r;
		struct kvm_irq_routing_entry e[64];
	} t;
	unsigned n = 0;

	memset(&t, 0, sizeof(t));
	for (unsigned gsi = 0; gsi < 24; gsi++) {
		if (gsi < 16 && gsi != 2) {
			t.e[n].gsi = gsi;
			t.e[n].type = KVM_IRQ_ROUTING_IRQCHIP;
			t.e[n].u.irqchip.irqchip =
			    gsi < 8 ? KVM_IRQCHIP_PIC_MASTER : KVM_IRQCHIP_PIC_SLAVE;
			t.e[n].u.irqchip.pin = gsi % 8;
			n++;
		}
		t.e[n].gsi = gsi;
		t.e[n].type = KVM_IRQ_ROUTING_IRQCHIP;
		t.e[n].u.irqchip.irqchip = KVM_IRQCHIP_IOAPIC;
		t.e[n].u.irqchip.pin = gsi == 0 ? 2 : gsi;
		n++;
	}
	t.e[n].gsi = MSI_GSI;
	t.e[n].type = KVM_IRQ_ROUTING_MSI;
	t.e[n].u.msi.address_lo = MSI_ADDRESS;
	t.e[n].u.msi.data = VECTOR;
	n++;
	t.r.nr = n;
	xioctl(f.vm, KVM_SET_GSI_ROUTING, &t, "KVM_SET_GSI_ROUTING");
}

/* IOAPIC pin 16 -> VECTOR, fixed, physical destination 0, level-triggered,
 * active low (what the irqbench guest programs from the MP table's "PCI
 * conforms" flags; KVM's IOAPIC ignores the polarity), unmasked. */
static void route_intx_pin(void)
{
	struct kvm_irqchip chip = {.chip_id = KVM_IRQCHIP_IOAPIC};

	xioctl(f.vm, KVM_GET_IRQCHIP, &chip, "KVM_GET_IRQCHIP");
	chip.chip.ioapic.redirtbl[INTX_GSI].bits = 0;
	chip.chip.ioapic.redirtbl[INTX_GSI].fields.vector = VECTOR;
	chip.chip.ioapic.redirtbl[INTX_GSI].fields.trig_mode = 1;
	chip.chip.ioapic.redirtbl[INTX_GSI].fields.polarity = 1;
	chip.chip.ioapic.redirtbl[INTX_GSI].fields.dest_id = 0;
	xioctl(f.vm, KVM_SET_IRQCHIP, &chip, "KVM_SET_IRQCHIP");
}

static void setup_delivery(void)
{
	f.arm_efd = eventfd(0, EFD_CLOEXEC);
	f.irq_efd = f.resample_efd = -1;
	if (f.arm_efd < 0)
		die(EXIT_HOST, "eventfd: %s", strerror(errno));
	if (f.mode >= INTX_LINE)
		route_intx_pin();
	if (f.mode == MSI_IRQFD || f.mode == INTX_RESAMPLE) {
		set_routes();
		f.irq_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		struct kvm_irqfd irqfd = {.fd = (uint32_t)f.irq_efd,
					  .gsi = f.mode == MSI_IRQFD ? MSI_GSI : INTX_GSI};
		if (f.mode == INTX_RESAMPLE) {
			if (ioctl(f.kvm, KVM_CHECK_EXTENSION, KVM_CAP_IRQFD_RESAMPLE) <= 0)
				die(EXIT_HOST, "KVM_CAP_IRQFD_RESAMPLE is missing");
			f.resample_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
			irqfd.flags = KVM_IRQFD_FLAG_RESAMPLE;
			irqfd.resamplefd = (uint32_t)f.resample_efd;
		}
		xioctl(f.vm, KVM_IRQFD, &irqfd, "KVM_IRQFD");
	}
}

static void irq_line(int level)
{
	struct kvm_irq_level l = {.irq = INTX_GSI, .level = (uint32_t)level};
	xioctl(f.vm, KVM_IRQ_LINE, &l, "KVM_IRQ_LINE");
}

static void efd_write(int fd)
{
	uint64_t one = 1;
	if (write(fd, &one, 8) != 8)
		die(EXIT_HOST, "eventfd write: %s", strerror(errno));
}

/* The main thread's injection, after the delay. */
static void fire(void)
{
	uint64_t t0 = now_ns();

	if (f.mode == INTX_RESAMPLE)
		atomic_store(&f.intx_pending, 1);
	atomic_store(&f.t0, t0);
	switch (f.mode) {
	case MSI_SIGNAL: {
		struct kvm_msi msi = {.address_lo = MSI_ADDRESS, .data = VECTOR};
		if (ioctl(f.vm, KVM_SIGNAL_MSI, &msi) < 0)
			die(EXIT_HOST, "KVM_SIGNAL_MSI: %s", strerror(errno));
		break;
	}
	case MSI_IRQFD:
	case INTX_RESAMPLE: efd_write(f.irq_efd); break;
	case INTX_LINE: irq_line(1); break;
	}
}

/* ---- the vCPU thread ---- */

static void on_ack(void)
{
	uint64_t t1 = now_ns();
	uint64_t t0 = atomic_exchange(&f.t0, 0);

	f.acks++;
	if (f.mode == INTX_LINE)
		irq_line(0);
	if (f.mode == INTX_RESAMPLE)
		atomic_store(&f.intx_pending, 0);
	if (!t0) {
		f.stale_acks++;
		return;
	}
	uint32_t n = atomic_load(&f.nsamples);
	if (n < f.samples_wanted)
		f.samples[n] = t1 - t0;
	atomic_store(&f.nsamples, n + 1);
}

static void *vcpu_thread(void *arg)
{
	(void)arg;
	for (;;) {
		if (ioctl(f.vcpu, KVM_RUN, 0) < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "kvm_floor: KVM_RUN: %s\n", strerror(errno));
			f.vcpu_rc = EXIT_HOST;
			break;
		}
		struct kvm_run *r = f.run;
		if (r->exit_reason != KVM_EXIT_IO) {
			fprintf(stderr, "kvm_floor: unexpected exit reason %u\n", r->exit_reason);
			f.vcpu_rc = EXIT_GUEST;
			break;
		}
		uint8_t *data = (uint8_t *)r + r->io.data_offset;
		uint16_t port = r->io.port;
		if (r->io.direction == KVM_EXIT_IO_OUT && port == BASE_PORT + 0x0) {
			on_ack();
		} else if (r->io.direction == KVM_EXIT_IO_OUT && port == BASE_PORT + 0x4) {
			efd_write(f.arm_efd);
		} else if (r->io.direction == KVM_EXIT_IO_IN && port == BASE_PORT + 0xC) {
			uint32_t n = atomic_load(&f.nsamples);
			memcpy(data, &n, r->io.size < 4 ? r->io.size : 4);
		} else if (r->io.direction == KVM_EXIT_IO_OUT && port == DONE_PORT) {
			break;
		} else {
			fprintf(stderr, "kvm_floor: unexpected port %s 0x%x\n",
				r->io.direction == KVM_EXIT_IO_OUT ? "write" : "read", port);
			f.vcpu_rc = EXIT_GUEST;
			break;
		}
	}
	atomic_store(&f.done, 1);
	efd_write(f.arm_efd); /* wake the main thread */
	return NULL;
}

/* ---- main ---- */

static void usage(FILE *to)
{
	fprintf(
	    to,
	    "usage: kvm_floor --mode msi-signal|msi-irqfd|intx-line|intx-resample\n"
	    "                 [--samples N] [--delay-us US] [--memory MIB] [--out FILE]\n"
	    "                 [--pit]   (also KVM_CREATE_PIT2, as a Linux-capable VMM makes)\n");
}

static void parse(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"mode", required_argument, NULL, 'm'},	{"samples", required_argument, NULL, 'n'},
	    {"delay-us", required_argument, NULL, 'd'}, {"memory", required_argument, NULL, 'M'},
	    {"out", required_argument, NULL, 'o'},	{"pit", no_argument, NULL, 'p'},
	    {"help", no_argument, NULL, 'h'},		{NULL, 0, NULL, 0}};
	int c, have_mode = 0;
	char *end;

	f.samples_wanted = 2000;
	f.delay_us = 200;
	f.mem_mib = 256;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'm':
			have_mode = 0;
			for (unsigned i = 0; i < 4; i++)
				if (!strcmp(optarg, mode_names[i])) {
					f.mode = (enum mode)i;
					have_mode = 1;
				}
			if (!have_mode)
				die(EXIT_USAGE, "--mode: unknown mode '%s'", optarg);
			break;
		case 'n':
			f.samples_wanted = strtoull(optarg, &end, 10);
			if (*end || f.samples_wanted > 10000000)
				die(EXIT_USAGE, "--samples: '%s' is not a count up to 10^7",
				    optarg);
			break;
		case 'd':
			f.delay_us = (unsigned)strtoul(optarg, &end, 10);
			if (*end || f.delay_us > 1000000)
				die(EXIT_USAGE, "--delay-us: '%s' is not 0..1000000", optarg);
			break;
		case 'M':
			f.mem_mib = strtoull(optarg, &end, 10);
			if (*end || f.mem_mib < 2 || f.mem_mib > 3072)
				die(EXIT_USAGE, "--memory: '%s' is not 2..3072 MiB", optarg);
			break;
		case 'o': f.out = optarg; break;
		case 'p': f.pit = 1; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(EXIT_USAGE);
		}
	}
	if (!have_mode || optind != argc) {
		usage(stderr);
		exit(EXIT_USAGE);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void write_samples(uint64_t n)
{
	FILE *o = fopen(f.out, "w");
	if (!o)
		die(EXIT_HOST, "cannot write %s: %s", f.out, strerror(errno));
	fprintf(o, "# kvm_floor mode=%s delay_us=%u memory_mib=%llu\n", mode_names[f.mode],
		f.delay_us, (unsigned long long)f.mem_mib);
	fprintf(o, "# samples=%llu acks=%llu stale_acks=%llu reasserts=%llu\n",
		(unsigned long long)n, (unsigned long long)f.acks, (unsigned long long)f.stale_acks,
		(unsigned long long)f.reasserts);
	fprintf(o, "# t0: main thread, CLOCK_MONOTONIC, before the injection; t1: vCPU thread, "
		   "at the ACK port exit; ns\n");
	for (uint64_t i = 0; i < n; i++)
		fprintf(o, "%llu\n", (unsigned long long)f.samples[i]);
	if (fclose(o))
		die(EXIT_HOST, "writing %s: %s", f.out, strerror(errno));
}

int main(int argc, char **argv)
{
	pthread_t th;

	parse(argc, argv);
	f.samples = calloc(f.samples_wanted ? f.samples_wanted : 1, sizeof(uint64_t));
	if (!f.samples)
		die(EXIT_HOST, "out of memory");
	f.kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (f.kvm < 0)
		die(EXIT_HOST, "/dev/kvm: %s", strerror(errno));
	if (ioctl(f.kvm, KVM_GET_API_VERSION, 0) != KVM_API_VERSION)
		die(EXIT_HOST, "KVM API version is not %d", KVM_API_VERSION);
	f.vm = ioctl(f.kvm, KVM_CREATE_VM, 0);
	if (f.vm < 0)
		die(EXIT_HOST, "KVM_CREATE_VM: %s", strerror(errno));
	if (ioctl(f.kvm, KVM_CHECK_EXTENSION, KVM_CAP_IRQCHIP) <= 0 ||
	    ioctl(f.kvm, KVM_CHECK_EXTENSION, KVM_CAP_IRQFD) <= 0 ||
	    ioctl(f.kvm, KVM_CHECK_EXTENSION, KVM_CAP_SIGNAL_MSI) <= 0)
		die(EXIT_HOST, "KVM lacks IRQCHIP, IRQFD or SIGNAL_MSI");
	if (ioctl(f.vm, KVM_SET_TSS_ADDR, 0xFFFBD000ul) < 0)
		die(EXIT_HOST, "KVM_SET_TSS_ADDR: %s", strerror(errno));
	xioctl(f.vm, KVM_CREATE_IRQCHIP, NULL, "KVM_CREATE_IRQCHIP");
	if (f.pit) {
		struct kvm_pit_config pit = {.flags = KVM_PIT_SPEAKER_DUMMY};
		xioctl(f.vm, KVM_CREATE_PIT2, &pit, "KVM_CREATE_PIT2");
	}
	setup_memory();
	setup_guest();
	setup_vcpu();
	setup_delivery();

	if (pthread_create(&th, NULL, vcpu_thread, NULL))
		die(EXIT_HOST, "pthread_create failed");
	struct pollfd p[2] = {{.fd = f.arm_efd, .events = POLLIN},
			      {.fd = f.resample_efd, .events = POLLIN}};
	while (!atomic_load(&f.done)) {
		if (poll(p, f.resample_efd >= 0 ? 2 : 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			die(EXIT_HOST, "poll: %s", strerror(errno));
		}
		uint64_t v;
		if (f.resample_efd >= 0 && (p[1].revents & POLLIN) &&
		    read(f.resample_efd, &v, 8) == 8 && atomic_load(&f.intx_pending)) {
			/* The EOI lowered the line with the device still
			 * wanting service: assert it again. */
			f.reasserts++;
			efd_write(f.irq_efd);
		}
		if (!(p[0].revents & POLLIN) || read(f.arm_efd, &v, 8) != 8 || atomic_load(&f.done))
			continue;
		struct timespec d = {.tv_sec = f.delay_us / 1000000,
				     .tv_nsec = (long)(f.delay_us % 1000000) * 1000};
		while (clock_nanosleep(CLOCK_MONOTONIC, 0, &d, &d) == EINTR)
			;
		fire();
	}
	pthread_join(th, NULL);
	if (f.vcpu_rc)
		return f.vcpu_rc;

	uint64_t n = atomic_load(&f.nsamples);
	if (n > f.samples_wanted)
		n = f.samples_wanted;
	if (f.out)
		write_samples(n);
	qsort(f.samples, n, sizeof(uint64_t), cmp_u64);
	printf("kvm_floor: mode %s, %llu samples", mode_names[f.mode], (unsigned long long)n);
	if (n)
		printf(", min %.1f us, p50 %.1f us, p99 %.1f us, max %.1f us", f.samples[0] / 1e3,
		       f.samples[(n - 1) / 2] / 1e3, f.samples[(n * 99 + 99) / 100 - 1] / 1e3,
		       f.samples[n - 1] / 1e3);
	printf(" (%llu acks, %llu stale, %llu re-asserts)\n", (unsigned long long)f.acks,
	       (unsigned long long)f.stale_acks, (unsigned long long)f.reasserts);
	return n == f.samples_wanted ? 0 : EXIT_GUEST;
}
