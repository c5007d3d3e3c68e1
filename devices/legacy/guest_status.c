#include "devices/legacy/guest_status.h"

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
		/* The guest decides how often it writes: the first
		 * GUEST_STATUS_LOG_MAX reports are logged, then one line says the
		 * rest are only counted (a flood once made 100,003 lines). */
		if (g->log && g->reports <= GUEST_STATUS_LOG_MAX)
			log_info(
			    g->log, "guest status: command %u ended with status %u%s", g->index, v,
			    (g->flags & GUEST_STATUS_TIMEOUT) ? " (stopped by its timeout)" : "");
		else if (g->log && g->reports == GUEST_STATUS_LOG_MAX + 1)
			log_warn(g->log,
				 "guest status: more than %u reports: the rest are counted, not "
				 "logged",
				 GUEST_STATUS_LOG_MAX);
		g->flags = 0;
		return;
	default: return;
	}
}
