/* Diagnostics to stderr, levelled; one instance per machine (no globals). */
#ifndef VMM_LOG_H
#define VMM_LOG_H

#include "vmm/base/lock.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

struct log {
	enum log_level level;
	FILE *out;
	int crlf; /* set while the terminal is raw: end lines with \r\n */
	struct vmm_lock lock;
	/* Asked before each message: true when it must start with a line
	 * break (the guest's console left a line open on the same terminal).
	 * May be NULL. */
	bool (*needs_break)(void *ctx);
	void *needs_break_ctx;
};

void log_init(struct log *l, enum log_level level, FILE *out);
void log_msg(struct log *l, enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* For messages a guest can trigger at will: the first LOG_GUEST_LIMIT
 * through `count` are printed, then one line saying the rest are not. */
#define LOG_GUEST_LIMIT 10
void log_guest_warn(struct log *l, unsigned *count, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_error(l, ...) log_msg((l), LOG_ERROR, __VA_ARGS__)
#define log_warn(l, ...)  log_msg((l), LOG_WARN, __VA_ARGS__)
#define log_info(l, ...)  log_msg((l), LOG_INFO, __VA_ARGS__)
#define log_debug(l, ...) log_msg((l), LOG_DEBUG, __VA_ARGS__)

#endif
