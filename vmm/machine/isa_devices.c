#include "vmm/machine/isa_devices.h"

#include "vmm/base/bus.h"
#include "vmm/base/err.h"
#include "vmm/host/console.h"

#include "irq/irq.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* Every range of every legacy device: which bus, where, and the device's
 * state as an offset in struct isa_devices. */
static const struct isa_range {
	const char *name;
	bool mmio;
	uint64_t base, len;
	bus_read_fn read;
	bus_write_fn write;
	size_t state;
} isa_ranges[] = {
    {"uart8250 COM1", false, UART_COM1_BASE, UART_NREGS, uart8250_read, uart8250_write,
     offsetof(struct isa_devices, uart)},
    {"i8042 data", false, I8042_DATA_PORT, 1, i8042_data_read, i8042_data_write,
     offsetof(struct isa_devices, i8042)},
    {"i8042 status", false, I8042_STATUS_PORT, 1, i8042_status_read, i8042_command_write,
     offsetof(struct isa_devices, i8042)},
    {"rtc", false, RTC_INDEX_PORT, 2, rtc_read, rtc_write, offsetof(struct isa_devices, rtc)},
    {"debug-exit", false, DEBUG_EXIT_PORT, DEBUG_EXIT_SIZE, bus_read_zeros, debug_exit_write,
     offsetof(struct isa_devices, debug_exit)},
    {"pvpanic", false, PVPANIC_PORT, 1, pvpanic_read, pvpanic_write,
     offsetof(struct isa_devices, pvpanic)},
    {"guest status port", false, GUEST_STATUS_PORT, GUEST_STATUS_LEN, bus_read_zeros,
     guest_status_write, offsetof(struct isa_devices, guest_status)},
    {"ACPI sleep and reset registers", false, ACPI_PM_BASE, ACPI_PM_LEN, bus_read_zeros,
     acpi_pm_write, offsetof(struct isa_devices, acpi_pm)},
    {"boot-timer port", false, BOOT_TIMER_PORT, 1, boot_timer_port_read, boot_timer_port_write,
     offsetof(struct isa_devices, boot_timer)},
    {"boot-timer", true, BOOT_TIMER_MMIO_BASE, BOOT_TIMER_MMIO_SIZE, boot_timer_mmio_read,
     boot_timer_mmio_write, offsetof(struct isa_devices, boot_timer)},
};

static size_t uart_receive(void *ctx, const uint8_t *buf, size_t len)
{
	return uart8250_receive(ctx, buf, len);
}

int isa_devices_create(struct isa_devices *d, const struct isa_env *env, struct err *e)
{
	struct irq_line *com1 = irq_line_claim(env->irq, UART_COM1_IRQ, "uart8250 COM1");
	uart8250_init(&d->uart, com1, env->console);
	*env->console_input = (struct console_input){uart_receive, &d->uart};
	i8042_init(&d->i8042, env->ctl);
	rtc_init(&d->rtc, NULL, NULL);
	debug_exit_init(&d->debug_exit, env->ctl);
	pvpanic_init(&d->pvpanic, env->ctl);
	acpi_pm_init(&d->acpi_pm, env->ctl);
	guest_status_init(&d->guest_status, env->ctl, env->log);
	boot_timer_init(&d->boot_timer, env->start_ns, env->boot_timer_out);
	for (size_t i = 0; i < sizeof(isa_ranges) / sizeof(isa_ranges[0]); i++) {
		const struct isa_range *r = &isa_ranges[i];
		struct bus *b = r->mmio ? env->mmio : env->pio;
		int ret = bus_register(b, r->base, r->len, r->read, r->write, (char *)d + r->state);
		if (ret)
			return err_set(e, ERR_HOST, "cannot register %s at %s 0x%llx: %s", r->name,
				       b->name, (unsigned long long)r->base, strerror(-ret));
	}
	return 0;
}
