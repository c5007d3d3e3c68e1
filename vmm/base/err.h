/* Errors that carry their context up to main(), which prints one line. */
#ifndef VMM_ERR_H
#define VMM_ERR_H

#include <stdarg.h>

/* Process exit codes: the one table (README "Exit codes", --help). */
enum vmm_exit_code {
	EXIT_GUEST_OFF = 0,    /* guest reset or shut down */
	EXIT_USAGE = 2,	       /* bad input or usage */
	EXIT_GUEST_CRASH = 4,  /* triple fault, emulation failure, panic */
	EXIT_TIMEOUT = 6,      /* --timeout expired */
	EXIT_HOST = 8,	       /* host problem: /dev/kvm, capability, host I/O */
	EXIT_INTERRUPTED = 10, /* SIGINT/SIGTERM or Ctrl-A x */
};

struct err {
	int code;      /* an enum vmm_exit_code */
	char msg[512]; /* one line, no trailing newline */
};

/* Records the first error only (later ones are consequences); returns -1. */
int err_set(struct err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int err_vset(struct err *e, int code, const char *fmt, va_list ap);
/* Prefixes the recorded message with more context ("loading X: ..."). */
int err_prefix(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
