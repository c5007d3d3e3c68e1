/*
 * What a device may ask of the machine, without knowing `struct vm`:
 * stop with an exit code, write to the console. Tests pass recorders.
 */
#ifndef VMM_MACHINE_CTL_H
#define VMM_MACHINE_CTL_H

#include <stddef.h>
#include <stdint.h>

struct machine_ctl {
	/* First caller wins; `why` is a short human phrase ("i8042 reset"). */
	void (*request_stop)(void *ctx, int exit_code, const char *why);
	void *ctx;
};

static inline void machine_request_stop(const struct machine_ctl *c, int code, const char *why)
{
	if (c && c->request_stop)
		c->request_stop(c->ctx, code, why);
}

/* A byte stream out of the guest (console). */
struct char_sink {
	void (*write)(void *ctx, const uint8_t *buf, size_t len);
	void *ctx;
};

static inline void char_sink_write(const struct char_sink *s, const uint8_t *buf, size_t len)
{
	if (s && s->write)
		s->write(s->ctx, buf, len);
}

#endif
