/*
 * hello: the loader checker. Shared between its files.
 */
#ifndef HELLO_H
#define HELLO_H

#include "guest/kit.h"

struct hello {
	struct boot_params *bp;
	const char *cmdline; /* NULL when cmd_line_ptr is unusable */
	unsigned checks;
	unsigned failures;

	/* Results of the CPL-0 phase, reported later from CPL 3. */
	uint64_t bp_hits;	  /* #BP handler runs */
	uint64_t bp_rip;	  /* RIP the handler saw */
	unsigned bp_cpl;	  /* CPL the #BP came from */
	uint64_t bp_expected_rip; /* address after the int3 */
	bool bp_resumed;	  /* execution reached the instruction after it */
	bool smap_advertised;
	bool ac_after_stac;
	bool ac_after_clac;
	uint64_t cr4;
	uint32_t cpl0_leaf1_ecx; /* CPUID as CPL 0 sees it, to compare */
	uint32_t cpl0_hv_ebx;

	/* What run_user's CPL-3 side saw in a first, separate round trip. */
	uint16_t user_cs;
	uint64_t user_rflags;
	uint64_t user_cookie;
	uint64_t user_probe_result;
};

/* Records one check: prints "hello: ok   WHAT" or "hello: FAIL WHAT: DETAIL"
 * (DETAIL from fmt). Returns ok. */
__attribute__((format(printf, 4, 5))) bool check(struct hello *h, bool ok, const char *what,
						 const char *fmt, ...);
void skip(struct hello *h, const char *what, const char *why);
__attribute__((format(printf, 1, 2))) void info(const char *fmt, ...);

/* hello.KEY=N (guest/cmdline.h: decimal or 0x-prefixed hex); returns
 * false if absent, FAILs a check if malformed. */
bool cmdline_number(struct hello *h, const char *key, uint64_t *out);

/* mptable.c */
void check_mptable(struct hello *h);

/* devices.c */
void check_cpuid(struct hello *h);
void check_lapic(struct hello *h);
void check_rtc(struct hello *h);
void check_uart(struct hello *h);
void check_pit(struct hello *h);

#endif
