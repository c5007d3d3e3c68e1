/*
 * The legacy (ISA) devices every machine has, and where they sit on the
 * port and MMIO buses: COM1, the i8042 (reset), the CMOS RTC, the
 * debug-exit port, the guest status port, pvpanic, the ACPI sleep/reset
 * registers the FADT names, and the boot timer. Their bus ranges are one
 * table (vmm/machine/isa_devices.c); adding a legacy device is its state here, its
 * init and its rows there.
 */
#ifndef VMM_ISA_DEVICES_H
#define VMM_ISA_DEVICES_H

#include "vmm/base/machine_ctl.h"

#include "devices/legacy/acpi_pm.h"
#include "devices/legacy/boot_timer.h"
#include "devices/legacy/debug_exit.h"
#include "devices/legacy/guest_status.h"
#include "devices/legacy/i8042.h"
#include "devices/legacy/pvpanic.h"
#include "devices/legacy/rtc.h"
#include "devices/legacy/uart8250.h"

#include <stdint.h>
#include <stdio.h>

struct bus;
struct console_input;
struct err;
struct irq_router;

struct isa_devices {
	struct uart8250 uart;
	struct i8042 i8042;
	struct rtc rtc;
	struct debug_exit debug_exit;
	struct pvpanic pvpanic;
	struct acpi_pm acpi_pm;
	struct guest_status guest_status;
	struct boot_timer boot_timer;
};

/* What they are built onto. */
struct isa_env {
	struct bus *pio, *mmio;
	struct irq_router *irq;
	struct char_sink console;	     /* COM1's output */
	struct console_input *console_input; /* stdin goes to COM1 (until a device takes it) */
	struct machine_ctl ctl;		     /* reset, panic, debug-exit */
	uint64_t start_ns;		     /* the boot timer's zero */
	FILE *boot_timer_out;		     /* --boot-timer: where markers go, or NULL */
	struct log *log;		     /* the guest status port's reports */
};

/* Initialises every device and puts its ranges on the buses. 0, or -1
 * with an error naming the range. */
int isa_devices_create(struct isa_devices *d, const struct isa_env *env, struct err *e);

#endif
