/*
 * The guest status port: how a program in the guest hands an exit status
 * to the host through the VMM, not through a console line anything in
 * the guest could also print (README, "A guest command's exit status").
 * Byte writes at GUEST_STATUS_PORT (from a shell: /dev/port, e.g.
 * `printf '\003' | dd of=/dev/port bs=1 seek=1296 count=1`):
 *   +0 EXIT:   the VM ends and ./vmm exits with the byte as its status
 *              (any byte, the VMM's own codes too: the stop line says
 *              "chosen by the guest; stop: guest-status");
 *   +2 INDEX:  latches a command number (0-255; bit 7 of STATUS's
 *              companion FLAGS below);
 *   +3 STATUS: reports "command INDEX ended with STATUS" on the VMM's
 *              stderr (one `vmm: info: guest status:` line, -v; the first
 *              GUEST_STATUS_LOG_MAX only, then one warning), the VM goes on;
 *   +1 FLAGS:  latched with INDEX: bit 0 = the command was stopped by its
 *              timeout (reported with the status).
 * Reads return 0 (bus_read_zeros). Any other width or offset is ignored.
 */
#ifndef DEVICES_GUEST_STATUS_H
#define DEVICES_GUEST_STATUS_H

#include "vmm/base/machine_ctl.h"

#include <stdint.h>

struct log;

#define GUEST_STATUS_PORT    0x510
#define GUEST_STATUS_LEN     4
#define GUEST_STATUS_EXIT    0
#define GUEST_STATUS_FLAGS   1
#define GUEST_STATUS_INDEX   2
#define GUEST_STATUS_REPORT  3
#define GUEST_STATUS_TIMEOUT 0x01
#define GUEST_STATUS_LOG_MAX 256 /* lines logged (one per command index), then counted */

struct guest_status {
	struct machine_ctl ctl;
	struct log *log;
	uint8_t index, flags;
	unsigned reports;
};

void guest_status_init(struct guest_status *g, struct machine_ctl ctl, struct log *log);
void guest_status_write(void *opaque, uint64_t offset, const void *data, unsigned len);

#endif
