#include "devices/legacy/acpi_pm.h"

#include <string.h>

#define SLP_EN	      0x20
#define SLP_TYP_SHIFT 2
#define SLP_TYP_MASK  0x07

void acpi_pm_init(struct acpi_pm *p, struct machine_ctl ctl)
{
	p->ctl = ctl;
}

void acpi_pm_write(void *opaque, uint64_t offset, const void *data, unsigned len)
{
	struct acpi_pm *p = opaque;
	uint8_t v;
	if (len != 1)
		return; /* the FADT says byte access (GAS access size 1) */
	memcpy(&v, data, 1);
	if (offset == ACPI_PM_SLEEP_CONTROL - ACPI_PM_BASE && (v & SLP_EN) &&
	    ((v >> SLP_TYP_SHIFT) & SLP_TYP_MASK) == ACPI_PM_S5_TYPE)
		machine_request_stop(&p->ctl, MACHINE_STOP_GUEST_RESET, 0,
				     "ACPI S5 (the guest powered off)");
	else if (offset == ACPI_PM_RESET - ACPI_PM_BASE && v == ACPI_PM_RESET_VALUE)
		machine_request_stop(&p->ctl, MACHINE_STOP_GUEST_RESET, 0, "ACPI reset register");
}
