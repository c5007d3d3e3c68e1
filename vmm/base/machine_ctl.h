/*
 * What a device may ask of the machine, without knowing `struct vm`: stop
 * for a reason (the machine picks the exit code, vmm/machine/stop.c), write to
 * the console. Tests pass recorders.
 */
#ifndef VMM_BASE_MACHINE_CTL_H
#define VMM_BASE_MACHINE_CTL_H

#include <stddef.h>
#include <stdint.h>

enum machine_stop_reason {
	MACHINE_STOP_GUEST_RESET,      /* the guest reset or shut the machine down */
	MACHINE_STOP_GUEST_PANIC,      /* the guest said its kernel panicked */
	MACHINE_STOP_GUEST_EXIT_VALUE, /* the guest ended with a value (debug-exit) */
	MACHINE_STOP_GUEST_STATUS,     /* the guest ended with an exit status (status port) */
	MACHINE_STOP_GUEST_CRASH,      /* triple fault, emulation failure, KVM error */
	MACHINE_STOP_HOST_FAILURE,     /* the host failed the VMM: a thread, a filter, KVM_RUN */
};

struct machine_ctl {
	/* First caller wins; `why` is a short human phrase ("i8042 reset");
	 * `value` goes with MACHINE_STOP_GUEST_EXIT_VALUE. */
	void (*request_stop)(void *ctx, enum machine_stop_reason reason, uint32_t value,
			     const char *why);
	void *ctx;
};

static inline void machine_request_stop(const struct machine_ctl *c,
					enum machine_stop_reason reason, uint32_t value,
					const char *why)
{
	if (c && c->request_stop)
		c->request_stop(c->ctx, reason, value, why);
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
