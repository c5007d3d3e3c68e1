/*
 * i8042 keyboard controller, reduced to what a VMM with no PS/2 devices
 * needs: Linux's probe gives up at once and its reboot path (reboot=k)
 * reaches the reset pulse at once. Writing 0xFE to port 0x64 resets the
 * machine (the VM ends with exit code 0).
 *
 * Why this status value: Linux's i8042_flush() reads data while OBF is set
 * and reports "No controller found" after 16 bytes, with no 500 ms command
 * time-outs; its kb_wait() before the reset pulse waits only for IBF to be
 * clear. So status = OBF set, IBF clear.
 */
#ifndef DEVICES_I8042_H
#define DEVICES_I8042_H

#include "vmm/base/machine_ctl.h"

#define I8042_DATA_PORT	  0x60
#define I8042_STATUS_PORT 0x64

struct i8042 {
	struct machine_ctl ctl;
};

void i8042_init(struct i8042 *k, struct machine_ctl ctl);
/* Registered as two one-byte ranges; offset 0 = the port itself. */
void i8042_data_read(void *opaque, uint64_t offset, void *data, unsigned len);
void i8042_data_write(void *opaque, uint64_t offset, const void *data, unsigned len);
void i8042_status_read(void *opaque, uint64_t offset, void *data, unsigned len);
void i8042_command_write(void *opaque, uint64_t offset, const void *data, unsigned len);

#endif
