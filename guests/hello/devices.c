/*
 * CPU and platform device checks: CPUID, LAPIC, CMOS RTC, 16550 UART, PIT.
 * All run at CPL 3 (port I/O through IOPL 3, MMIO through user pages).
 */
#include "hello.h"

#include "guest/pit.h"

/* ---- CPUID (Linux Documentation/virt/kvm/x86/cpuid.rst) ---- */

void check_cpuid(struct hello *h)
{
	struct cpuid_regs leaf1 = cpuid(1, 0);
	struct cpuid_regs hv = cpuid(0x40000000, 0);
	char sig[13];

	memcpy(sig + 0, &hv.ebx, 4);
	memcpy(sig + 4, &hv.ecx, 4);
	memcpy(sig + 8, &hv.edx, 4);
	sig[12] = '\0';
	/* CPUID.1:ECX bit 31 is reserved for hypervisors to say "present". */
	check(h, leaf1.ecx & (1u << 31), "CPUID.1:ECX.hypervisor is set", "ECX 0x%08x", leaf1.ecx);
	/* The KVM signature is "KVMKVMKVM\0\0\0": compare all 12 bytes. */
	check(h, !memcmp(sig, "KVMKVMKVM\0\0\0", 12), "CPUID 0x40000000 signature is KVMKVMKVM",
	      "\"%s\" (ebx 0x%08x ecx 0x%08x edx 0x%08x)", sig, hv.ebx, hv.ecx, hv.edx);
	check(h, hv.eax >= 0x40000001, "CPUID 0x40000000 max leaf >= 0x40000001", "0x%08x", hv.eax);
	/* CPL 3 runs natively on our KVM hosts and CPL 0 is emulated; say so
	 * if the two see different CPUID data. */
	if (leaf1.ecx != h->cpl0_leaf1_ecx || hv.ebx != h->cpl0_hv_ebx)
		info("CPUID differs between CPL 0 and CPL 3: leaf 1 ECX 0x%08x vs 0x%08x, "
		     "leaf 0x40000000 EBX 0x%08x vs 0x%08x",
		     h->cpl0_leaf1_ecx, leaf1.ecx, h->cpl0_hv_ebx, hv.ebx);
}

/* ---- Local APIC (Intel SDM vol. 3, 11.4.6: ID in bits 31:24, xAPIC) ---- */

void check_lapic(struct hello *h)
{
	uint32_t id = lapic_read(LAPIC_ID);
	uint32_t version = lapic_read(LAPIC_VERSION);

	info("LAPIC ID register 0x%08x, version register 0x%08x", id, version);
	check(h, (id >> 24) == 0, "LAPIC ID of the BSP is 0", "ID register 0x%08x", id);
}

/* ---- CMOS RTC (Motorola MC146818A data sheet) ---- */

#define CMOS_INDEX     0x70
#define CMOS_DATA      0x71
#define RTC_SECONDS    0x00
#define RTC_MINUTES    0x02
#define RTC_HOURS      0x04
#define RTC_DAY	       0x07
#define RTC_MONTH      0x08
#define RTC_YEAR       0x09
#define RTC_REG_A      0x0A
#define RTC_REG_B      0x0B
#define RTC_REG_D      0x0D
#define RTC_A_UIP      0x80 /* update in progress */
#define RTC_B_24H      0x02
#define RTC_B_BINARY   0x04 /* DM: binary, else BCD */
#define RTC_D_VRT      0x80 /* valid RAM and time */
#define CMOS_TEST_BYTE 0x40 /* general-purpose RAM, above the RTC registers */

/* Bit 7 of the index port is the PC's NMI mask; leave NMIs enabled. */
static uint8_t cmos_read(uint8_t index)
{
	outb(CMOS_INDEX, index & 0x7F);
	return inb(CMOS_DATA);
}

static void cmos_write(uint8_t index, uint8_t v)
{
	outb(CMOS_INDEX, index & 0x7F);
	outb(CMOS_DATA, v);
}

static bool bcd_valid(uint8_t v)
{
	return (v & 0x0F) <= 9 && (v >> 4) <= 9;
}

static unsigned bcd_value(uint8_t v)
{
	return (v >> 4) * 10 + (v & 0x0F);
}

void check_rtc(struct hello *h)
{
	/* UIP is set for the 244 us before each update (data sheet,
	 * "Update cycle"), so a real RTC shows it now and then: wait a
	 * bounded time for it to clear, as Linux's mc146818_get_time does.
	 * An RTC that keeps it set hangs those kernels. */
	uint8_t a = 0;
	unsigned polls;
	for (polls = 0; polls < 100000; polls++) {
		a = cmos_read(RTC_REG_A);
		if (!(a & RTC_A_UIP))
			break;
	}
	check(h, !(a & RTC_A_UIP), "RTC register A has UIP clear", "still set after %u reads",
	      polls);
	uint8_t b = cmos_read(RTC_REG_B);
	uint8_t d = cmos_read(RTC_REG_D);
	check(h, b & RTC_B_24H, "RTC register B selects 24-hour mode", "B 0x%02x", b);
	check(h, d & RTC_D_VRT, "RTC register D has valid RAM and time", "D 0x%02x", d);

	uint8_t raw[6] = {cmos_read(RTC_SECONDS), cmos_read(RTC_MINUTES), cmos_read(RTC_HOURS),
			  cmos_read(RTC_DAY),	  cmos_read(RTC_MONTH),	  cmos_read(RTC_YEAR)};
	unsigned v[6];
	bool encoding_ok = true;
	for (int i = 0; i < 6; i++) {
		bool binary = b & RTC_B_BINARY;
		if (!binary && !bcd_valid(raw[i]))
			encoding_ok = false;
		v[i] = binary ? raw[i] : bcd_value(raw[i]);
	}
	info("RTC reads %02u-%02u-%02u %02u:%02u:%02u (%s), A 0x%02x B 0x%02x D 0x%02x", v[5], v[4],
	     v[3], v[2], v[1], v[0], b & RTC_B_BINARY ? "binary" : "BCD", a, b, d);
	check(h, encoding_ok && v[0] <= 59 && v[1] <= 59 && v[2] <= 23,
	      "RTC seconds/minutes/hours are valid and in range", "raw %02x:%02x:%02x (%s)", raw[2],
	      raw[1], raw[0], b & RTC_B_BINARY ? "binary" : "BCD");

	uint8_t saved = cmos_read(CMOS_TEST_BYTE);
	cmos_write(CMOS_TEST_BYTE, 0xA5);
	uint8_t r1 = cmos_read(CMOS_TEST_BYTE);
	cmos_write(CMOS_TEST_BYTE, 0x5A);
	uint8_t r2 = cmos_read(CMOS_TEST_BYTE);
	cmos_write(CMOS_TEST_BYTE, saved);
	check(h, r1 == 0xA5 && r2 == 0x5A, "CMOS RAM byte 0x40 reads back what was written",
	      "wrote 0xa5, 0x5a; read 0x%02x, 0x%02x", r1, r2);
}

/* ---- 16550A UART (PC16550D data sheet) ---- */

#define COM1		   0x3F8
#define UART_IIR	   2
#define UART_FCR	   2
#define UART_LSR	   5
#define UART_SCR	   7
#define UART_LSR_THRE	   0x20
#define UART_LSR_TEMT	   0x40
#define UART_IIR_FIFO_MASK 0xC0 /* 11: FIFOs enabled (16550A) */

void check_uart(struct hello *h)
{
	outb(COM1 + UART_SCR, 0xA5);
	uint8_t s1 = inb(COM1 + UART_SCR);
	outb(COM1 + UART_SCR, 0x5A);
	uint8_t s2 = inb(COM1 + UART_SCR);
	check(h, s1 == 0xA5 && s2 == 0x5A, "UART scratch register reads back",
	      "wrote 0xa5, 0x5a; read 0x%02x, 0x%02x", s1, s2);

	/* Output was just sent; a UART that models transmit time needs a
	 * moment to drain. Bounded, so a stuck LSR fails instead of hanging. */
	uint8_t lsr = 0;
	for (int i = 0; i < 100000; i++) {
		lsr = inb(COM1 + UART_LSR);
		if ((lsr & (UART_LSR_THRE | UART_LSR_TEMT)) == (UART_LSR_THRE | UART_LSR_TEMT))
			break;
	}
	check(h, (lsr & (UART_LSR_THRE | UART_LSR_TEMT)) == (UART_LSR_THRE | UART_LSR_TEMT),
	      "UART LSR has THRE and TEMT", "LSR 0x%02x", lsr);

	/* FCR = 0x07: enable, clear RX and TX FIFOs. The transmitter is empty
	 * (TEMT above), so no output is dropped. */
	outb(COM1 + UART_FCR, 0x07);
	uint8_t iir = inb(COM1 + UART_IIR);
	check(h, (iir & UART_IIR_FIFO_MASK) == UART_IIR_FIFO_MASK,
	      "UART IIR shows FIFOs enabled after FCR=0x07 (16550A)", "IIR 0x%02x", iir);
}

/* ---- PIT channel 2 via port 0x61 (Intel 8254 data sheet; the PC/AT
 * system control port B: bit 0 gate 2, bit 1 speaker data, bit 5 OUT2;
 * guest/pit.h) ---- */

#define PIT_TEST_COUNT 1193   /* about 1 ms */
#define PIT_MAX_POLLS  500000 /* each poll is a VM exit: well over 1 ms */

void check_pit(struct hello *h)
{
	uint8_t saved = inb(PORT_B);

	outb(PORT_B, (uint8_t)((saved & 0x0F & ~PORT_B_SPEAKER) | PORT_B_GATE2));
	/* Control word 0xb0: counter 2, LSB then MSB, mode 0 (interrupt on
	 * terminal count: OUT low now, high once the count runs out), binary. */
	outb(PIT_CMD, 0xB0);
	outb(PIT_CH2, PIT_TEST_COUNT & 0xFF);
	outb(PIT_CH2, PIT_TEST_COUNT >> 8);
	uint64_t t0 = rdtsc();
	bool low_at_start = !(inb(PORT_B) & PORT_B_OUT2);
	unsigned polls;
	bool high = false;
	for (polls = 1; polls <= PIT_MAX_POLLS; polls++) {
		if (inb(PORT_B) & PORT_B_OUT2) {
			high = true;
			break;
		}
	}
	uint64_t cycles = rdtsc() - t0;
	outb(PORT_B, saved & 0x0F);

	/* OUT2 already high at the first read just means the first port
	 * accesses took longer than the count (~1 ms). */
	info("PIT channel 2: OUT2 %s at the first read, high after %u polls, %lu TSC cycles "
	     "after loading a count of %u",
	     low_at_start ? "low" : "already high", polls, cycles, PIT_TEST_COUNT);
	check(h, high, "PIT channel 2 OUT2 (port 0x61 bit 5) goes high in mode 0",
	      "still low after %u polls", PIT_MAX_POLLS);
}
