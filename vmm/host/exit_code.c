#include "vmm/host/exit_code.h"

int exit_code_for_err(const struct err *e)
{
	return e->kind == ERR_INPUT ? EXIT_USAGE : EXIT_HOST; /* ERR_NO_KVM too */
}
