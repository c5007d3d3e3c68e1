/*
 * Debug-exit port compatible with QEMU's isa-debug-exit,iobase=0xf4,iosize=4:
 * a write of `value` ends the VM with that value (the machine turns it into
 * exit code (value << 1) | 1).
 */
#ifndef DEVICES_DEBUG_EXIT_H
#define DEVICES_DEBUG_EXIT_H

#include "vmm/base/machine_ctl.h"

#define DEBUG_EXIT_PORT 0xF4
#define DEBUG_EXIT_SIZE 4

struct debug_exit {
	struct machine_ctl ctl;
	uint32_t last_value;
};

void debug_exit_init(struct debug_exit *d, struct machine_ctl ctl);
void debug_exit_write(void *opaque, uint64_t offset, const void *data, unsigned len);

#endif
