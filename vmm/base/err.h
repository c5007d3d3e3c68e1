/* Errors that carry their context up to main(), which prints one line. */
#ifndef VMM_BASE_ERR_H
#define VMM_BASE_ERR_H

#include <stdarg.h>

/* What kind of failure: the machine maps it to the process exit code
 * (vmm/host/exit_code.h), so nothing below it decides one. */
enum err_kind {
	ERR_NONE = 0,
	ERR_INPUT,  /* bad input or usage: a file, an option, a kernel image */
	ERR_HOST,   /* the host: /dev/kvm, a KVM capability, memory, host I/O */
	ERR_NO_KVM, /* no usable KVM here: --host auto runs on the emulated host */
};

struct err {
	enum err_kind kind;
	char msg[512]; /* one line, no trailing newline */
};

/* Records the first error only (later ones are consequences); returns -1. */
int err_set(struct err *e, enum err_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int err_vset(struct err *e, enum err_kind kind, const char *fmt, va_list ap);
/* Prefixes the recorded message with more context ("loading X: ..."). */
int err_prefix(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
