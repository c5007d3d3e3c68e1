/*
 * The hardware-reduced ACPI registers the FADT names (ACPI 6.5, 4.8.3.7
 * sleep control and status, 4.8.3.6 reset register), at I/O ports:
 *   ACPI_PM_SLEEP_CONTROL: a write with SLP_EN (bit 5) and SLP_TYPx (bits
 *     4:2) = ACPI_PM_S5_TYPE powers the machine off (the VMM exits 0, as
 *     for a reset); other sleep types are ignored (no S1-S4 here);
 *   ACPI_PM_SLEEP_STATUS: reads 0 (WAK_STS never set: nothing wakes);
 *   ACPI_PM_RESET: writing ACPI_PM_RESET_VALUE resets the machine.
 */
#ifndef DEVICES_ACPI_PM_H
#define DEVICES_ACPI_PM_H

#include "vmm/base/machine_ctl.h"

#include <stdint.h>

#define ACPI_PM_BASE	      0x600
#define ACPI_PM_SLEEP_CONTROL (ACPI_PM_BASE + 0)
#define ACPI_PM_SLEEP_STATUS  (ACPI_PM_BASE + 1)
#define ACPI_PM_RESET	      (ACPI_PM_BASE + 2)
#define ACPI_PM_LEN	      3
#define ACPI_PM_S5_TYPE	      5 /* the \_S5 package's SLP_TYPa */
#define ACPI_PM_RESET_VALUE   0x01

struct acpi_pm {
	struct machine_ctl ctl;
};

void acpi_pm_init(struct acpi_pm *p, struct machine_ctl ctl);
/* The write handler over [ACPI_PM_BASE, ACPI_PM_BASE + ACPI_PM_LEN); reads
 * are zeros (bus_read_zeros). */
void acpi_pm_write(void *opaque, uint64_t offset, const void *data, unsigned len);

#endif
