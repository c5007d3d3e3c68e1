#include "devices/legacy/debug_exit.h"

#include <string.h>

void debug_exit_init(struct debug_exit *d, struct machine_ctl ctl)
{
	d->ctl = ctl;
	d->last_value = 0;
}

void debug_exit_write(void *opaque, uint64_t offset, const void *data, unsigned len)
{
	struct debug_exit *d = opaque;
	uint32_t value = 0;
	(void)offset;
	memcpy(&value, data, len > 4 ? 4 : len); /* little-endian, zero-extended */
	d->last_value = value;
	machine_request_stop(&d->ctl, MACHINE_STOP_GUEST_EXIT_VALUE, value,
			     "guest wrote to the debug-exit port");
}
