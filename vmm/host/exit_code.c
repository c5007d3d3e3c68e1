#include "vmm/host/exit_code.h"

int exit_code_for_err(const struct err *e)
{
	return e->kind == ERR_INPUT ? EXIT_USAGE : EXIT_HOST; /* ERR_NO_KVM too */
}

int exit_code_for_stop(enum machine_stop_reason reason, uint32_t value)
{
	switch (reason) {
	case MACHINE_STOP_GUEST_RESET: return EXIT_GUEST_OFF;
	case MACHINE_STOP_GUEST_PANIC: return EXIT_GUEST_CRASH;
	case MACHINE_STOP_GUEST_EXIT_VALUE: return (int)(((value << 1) | 1) & 0xFF);
	case MACHINE_STOP_GUEST_STATUS: return (int)(value & 0xFF);
	case MACHINE_STOP_GUEST_CRASH: return EXIT_GUEST_CRASH;
	case MACHINE_STOP_HOST_FAILURE: return EXIT_HOST;
	}
	return EXIT_GUEST_CRASH;
}

const char *stop_kind_for(enum machine_stop_reason reason)
{
	switch (reason) {
	case MACHINE_STOP_GUEST_RESET: return STOP_KIND_RESET;
	case MACHINE_STOP_GUEST_PANIC: return STOP_KIND_PANIC;
	case MACHINE_STOP_GUEST_EXIT_VALUE: return STOP_KIND_DEBUG_EXIT;
	case MACHINE_STOP_GUEST_STATUS: return STOP_KIND_GUEST_STATUS;
	case MACHINE_STOP_GUEST_CRASH: return STOP_KIND_CRASH;
	case MACHINE_STOP_HOST_FAILURE: return STOP_KIND_HOST;
	}
	return STOP_KIND_CRASH;
}
