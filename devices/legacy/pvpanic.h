/* pvpanic at I/O port 0x505 (QEMU docs/specs/pvpanic.rst): bit 0 = panicked. */
#ifndef DEVICES_PVPANIC_H
#define DEVICES_PVPANIC_H

#include "vmm/base/machine_ctl.h"

#define PVPANIC_PORT	     0x505
#define PVPANIC_PANICKED     0x01
#define PVPANIC_CRASH_LOADED 0x02

struct pvpanic {
	struct machine_ctl ctl;
	unsigned crash_loaded_events;
};

void pvpanic_init(struct pvpanic *p, struct machine_ctl ctl);
void pvpanic_read(void *opaque, uint64_t offset, void *data, unsigned len);
void pvpanic_write(void *opaque, uint64_t offset, const void *data, unsigned len);

#endif
