#include "devices/legacy/pvpanic.h"

#include <string.h>

void pvpanic_init(struct pvpanic *p, struct machine_ctl ctl)
{
	p->ctl = ctl;
	p->crash_loaded_events = 0;
}

void pvpanic_read(void *opaque, uint64_t offset, void *data, unsigned len)
{
	(void)opaque;
	(void)offset;
	memset(data, 0, len);
	/* The features this device supports (pvpanic.rst, "I/O interface"). */
	*(uint8_t *)data = PVPANIC_PANICKED | PVPANIC_CRASH_LOADED;
}

void pvpanic_write(void *opaque, uint64_t offset, const void *data, unsigned len)
{
	struct pvpanic *p = opaque;
	uint8_t v = *(const uint8_t *)data;
	(void)offset;
	(void)len;
	if (v & PVPANIC_PANICKED)
		machine_request_stop(&p->ctl, MACHINE_STOP_GUEST_PANIC, 0,
				     "guest kernel panic (pvpanic)");
	else if (v & PVPANIC_CRASH_LOADED)
		p->crash_loaded_events++;
}
