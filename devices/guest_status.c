#include "guest_status.h"

#include "vmm/base/log.h"

#include <string.h>

void guest_status_init(struct guest_status *g, struct machine_ctl ctl, struct log *log)
{
	memset(g, 0, sizeof(*g));
	g->ctl = ctl;
	g->log = log;
}

void guest_status_write(void *opaque, uint64_t offset, const void *data, unsigned len)
{
	struct guest_status *g = opaque;
	uint8_t v;
	if (len != 1)
		return;
	memcpy(&v, data, 1);
	switch (offset) {
	case GUEST_STATUS_EXIT:
		machine_request_stop(&g->ctl, MACHINE_STOP_GUEST_STATUS, v,
				     "the guest wrote its exit status to the status port");
		return;
	case GUEST_STATUS_FLAGS: g->flags = v; return;
	case GUEST_STATUS_INDEX: g->index = v; return;
	case GUEST_STATUS_REPORT:
		g->reports++;
		if (g->log)
			log_info(
			    g->log, "guest status: command %u ended with status %u%s", g->index, v,
			    (g->flags & GUEST_STATUS_TIMEOUT) ? " (stopped by its timeout)" : "");
		g->flags = 0;
		return;
	default: return;
	}
}
