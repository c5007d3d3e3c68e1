#include "devices/legacy/i8042.h"

#include <string.h>

#define I8042_STR_OBF	0x01
#define I8042_STR_SYS	0x04
#define I8042_CMD_RESET 0xFE /* pulse output line 0: CPU reset */

void i8042_init(struct i8042 *k, struct machine_ctl ctl)
{
	k->ctl = ctl;
}

void i8042_data_read(void *opaque, uint64_t offset, void *data, unsigned len)
{
	(void)opaque;
	(void)offset;
	memset(data, 0, len);
}

void i8042_data_write(void *opaque, uint64_t offset, const void *data, unsigned len)
{
	(void)opaque;
	(void)offset;
	(void)data;
	(void)len;
}

void i8042_status_read(void *opaque, uint64_t offset, void *data, unsigned len)
{
	(void)opaque;
	(void)offset;
	memset(data, 0, len);
	*(uint8_t *)data = I8042_STR_OBF | I8042_STR_SYS;
}

void i8042_command_write(void *opaque, uint64_t offset, const void *data, unsigned len)
{
	struct i8042 *k = opaque;
	(void)offset;
	(void)len;
	if (*(const uint8_t *)data == I8042_CMD_RESET)
		machine_request_stop(&k->ctl, MACHINE_STOP_GUEST_RESET, 0,
				     "guest reset (i8042 0xFE)");
}
