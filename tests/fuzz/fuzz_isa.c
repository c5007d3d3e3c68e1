/*
 * libFuzzer target: the guest-facing arithmetic of the emulation paths
 * with no device model around them. Input: a mode byte, then
 *  mode even: the RTC/CMOS (devices/legacy/rtc.c), as pairs (index, value) on
 *    ports 0x70/0x71 (value bit 0 of the index byte's top: read instead);
 *    the year arithmetic once overflowed after repeated writes;
 *  mode odd: the page walk (vmm/cpu/page_walk.c): 40 bytes of CR0, CR3, CR4,
 *    EFER, RFLAGS, then 8-byte linear addresses, walked with each access
 *    kind and CPL 0 and 3 over 1 MiB of RAM the rest of the input fills
 *    (page tables included). Every translation must land inside RAM.
 * UBSan turns an overflow into a crash.
 */
#include "fuzz_common.h"

#include "devices/legacy/rtc.h"
#include "vmm/cpu/page_walk.h"

#include <linux/kvm.h>

#define WALK_RAM (1ULL << 20)

static time_t fixed_now(void *ctx)
{
	return *(const time_t *)ctx;
}

static void fuzz_rtc(const uint8_t *p, size_t n)
{
	static struct rtc rtc;
	time_t now = 1615734566;
	if (n >= 8) {
		memcpy(&now, p, 8);
		p += 8;
		n -= 8;
	}
	rtc_init(&rtc, fixed_now, &now);
	for (size_t i = 0; i + 1 < n; i += 2) {
		uint8_t idx = p[i], v = p[i + 1];
		rtc_write(&rtc, 0, &idx, 1);
		if (idx & 0x80)
			rtc_read(&rtc, 1, &v, 1);
		else
			rtc_write(&rtc, 1, &v, 1);
	}
}

static uint64_t take64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static void fuzz_walk(const uint8_t *p, size_t n)
{
	static struct fuzz_ram ram;
	if (!ram.buf)
		fuzz_ram_init(&ram, WALK_RAM);
	if (n < 40)
		return;
	struct kvm_sregs s;
	memset(&s, 0, sizeof(s));
	s.cr0 = take64(p);
	s.cr3 = take64(p + 8) % WALK_RAM;
	s.cr4 = take64(p + 16);
	s.efer = take64(p + 24);
	uint64_t rflags = take64(p + 32);
	p += 40;
	n -= 40;
	size_t naddr = n / 8 < 16 ? n / 8 : 16;
	fuzz_ram_reset(&ram);
	memcpy(ram.buf, p + naddr * 8, n - naddr * 8 < WALK_RAM ? n - naddr * 8 : WALK_RAM);
	for (size_t i = 0; i < naddr; i++) {
		uint64_t lin = take64(p + 8 * i);
		for (unsigned a = PAGE_WALK_PEEK; a <= PAGE_WALK_FETCH; a++)
			for (unsigned cpl = 0; cpl <= 3; cpl += 3) {
				uint64_t pa;
				uint32_t err;
				enum page_walk_result r = page_walk(&ram.m, &s, cpl, rflags, lin,
								    (enum page_access)a, &pa, &err);
				/* Anything may translate anywhere (guest_mem checks the
				 * access after), but a refusal says why consistently. */
				if (r == PAGE_WALK_PF && (err & ~0x1Fu))
					abort();
				if (r != PAGE_WALK_PF && err)
					abort();
			}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] & 1)
		fuzz_walk(data + 1, size - 1);
	else
		fuzz_rtc(data + 1, size - 1);
	return 0;
}
