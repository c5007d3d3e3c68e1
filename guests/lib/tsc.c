/*
 * TSC calibration against PIT channel 2 (see guest/tsc.h).
 */
#include "guest/tsc.h"
#include "guest/io.h"
#include "guest/pit.h"

/* About 50 ms: long against the ~60 us a port read costs from CPL 3 on the
 * kit's hosts, which bounds the error of the end-of-count poll. */
#define PIT_COUNT   59659u
#define GIVE_UP_TSC (1ull << 34)

static uint64_t tsc_hz_one_round(void)
{
	uint8_t saved = inb(PORT_B);

	/* Gate high and speaker off first: in mode 0 with the gate high the
	 * count starts on the clock after its last byte is written, on
	 * hardware and in KVM's PIT (which ignores the gate in mode 0), so the
	 * TSC is read right after that write. */
	outb(PORT_B, (uint8_t)((saved & 0x0C) | PORT_B_GATE2));
	/* Control word 0xb0: counter 2, LSB then MSB, mode 0, binary. */
	outb(PIT_CMD, 0xB0);
	outb(PIT_CH2, PIT_COUNT & 0xFF);
	outb(PIT_CH2, PIT_COUNT >> 8);
	uint64_t t0 = rdtsc(), t1;
	bool high = false;
	do {
		t1 = rdtsc();
		if (inb(PORT_B) & PORT_B_OUT2) {
			high = true;
			break;
		}
	} while (t1 - t0 < GIVE_UP_TSC);
	outb(PORT_B, (uint8_t)(saved & 0x0F));
	if (!high)
		return 0;
	return (t1 - t0) * PIT_HZ / PIT_COUNT;
}

/* The median of five rounds: a round whose vCPU the host descheduled while
 * the count ran out (a loaded host, seen: 4x too fast) is an outlier, and
 * one lost in the other direction too. */
uint64_t tsc_hz_from_pit(void)
{
	enum { ROUNDS = 5 };
	uint64_t hz[ROUNDS];
	for (int i = 0; i < ROUNDS; i++) {
		hz[i] = tsc_hz_one_round();
		for (int j = i; j > 0 && hz[j - 1] > hz[j]; j--) {
			uint64_t t = hz[j];
			hz[j] = hz[j - 1];
			hz[j - 1] = t;
		}
	}
	return hz[ROUNDS / 2];
}
