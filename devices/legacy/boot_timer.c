#include "devices/legacy/boot_timer.h"

#include "vmm/base/clock.h"

#include <string.h>

void boot_timer_init(struct boot_timer *t, uint64_t start_ns, FILE *report)
{
	memset(t, 0, sizeof(*t));
	lock_init(&t->lock, "boot timer", LOCK_RANK_DEVICE);
	t->start_ns = start_ns;
	t->report = report;
}

static void boot_timer_mark(struct boot_timer *t, uint8_t code, int mmio)
{
	uint64_t ns = clock_now_ns() - t->start_ns;
	lock_take(&t->lock);
	if (t->nmarks < BOOT_TIMER_MAX_MARKS)
		t->marks[t->nmarks++] = (struct boot_mark){ns, code, (uint8_t)mmio};
	if (t->report) {
		if (mmio)
			fprintf(t->report,
				"vmm: boot-timer: Guest-boot-time = %llu us (%llu ms) since "
				"process start\r\n",
				(unsigned long long)(ns / 1000),
				(unsigned long long)(ns / 1000000));
		else
			fprintf(t->report,
				"vmm: boot-timer: port 0x80 code 0x%02x (%s) at %llu us since "
				"process start\r\n",
				code, code < 0x60 ? "kernel" : "userspace",
				(unsigned long long)(ns / 1000));
		fflush(t->report);
	}
	lock_release(&t->lock);
}

void boot_timer_mmio_read(void *opaque, uint64_t offset, void *data, unsigned len)
{
	(void)opaque;
	(void)offset;
	memset(data, 0, len);
}

void boot_timer_mmio_write(void *opaque, uint64_t offset, const void *data, unsigned len)
{
	(void)len;
	if (offset == 0 && *(const uint8_t *)data == BOOT_TIMER_MAGIC)
		boot_timer_mark(opaque, BOOT_TIMER_MAGIC, 1);
}

void boot_timer_port_read(void *opaque, uint64_t offset, void *data, unsigned len)
{
	(void)opaque;
	(void)offset;
	memset(data, 0xFF, len);
}

void boot_timer_port_write(void *opaque, uint64_t offset, const void *data, unsigned len)
{
	struct boot_timer *t = opaque;
	uint8_t code = *(const uint8_t *)data;
	(void)offset;
	(void)len;
	if (code >= BOOT_TIMER_CODE_FIRST && code <= BOOT_TIMER_CODE_LAST)
		boot_timer_mark(t, code, 0);
	else
		t->io_delay_writes++; /* io_delay: no meaning, and very frequent */
}
