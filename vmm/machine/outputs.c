/*
 * The files the command line asks the machine for: --console-log,
 * --dump-dtb and --dump-acpi DIR. Their paths are checked with the other
 * inputs, before anything is built; the files are made last, once the
 * whole machine is built, so a machine that fails to build leaves none
 * behind.
 */
#include "vmm/machine/vm.h"

#include "vmm/base/err.h"
#include "vmm/base/file.h"
#include "vmm/firmware/acpi.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* --dump-acpi's directory exists and is writable. */
static int vm_check_dump_dir(const char *dir, struct err *e)
{
	struct stat st;
	if (stat(dir, &st) < 0)
		return err_set(e, ERR_INPUT, "--dump-acpi %s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return err_set(e, ERR_INPUT, "--dump-acpi %s: not a directory", dir);
	if (access(dir, W_OK | X_OK) < 0)
		return err_set(e, ERR_INPUT, "--dump-acpi %s: %s", dir, strerror(errno));
	return 0;
}

int vm_check_outputs(const struct vm_options *o, struct err *e)
{
	if (o->console_log && file_check_writable("--console-log", o->console_log, e))
		return -1;
	if (o->dump_dtb && file_check_writable("--dump-dtb", o->dump_dtb, e))
		return -1;
	return o->dump_acpi ? vm_check_dump_dir(o->dump_acpi, e) : 0;
}

/* --dump-acpi DIR: each table as DIR/name.dat, the form iasl -d reads. */
static int vm_dump_acpi(struct vm *vm, struct err *e)
{
	const char *dir = vm->opts->dump_acpi;
	if (!dir || !vm->acpi)
		return 0;
	for (unsigned i = 0; i < vm->acpi->ntables; i++) {
		const struct acpi_table_at *t = &vm->acpi->tables[i];
		char path[4096], name[5];
		for (int k = 0; k < 5; k++)
			name[k] = (char)tolower((unsigned char)t->sig[k]);
		snprintf(path, sizeof(path), "%s/%s.dat", dir, name);
		if (file_write_output("--dump-acpi", path, vm->acpi->buf + t->off, t->len, e))
			return -1;
	}
	return 0;
}

int vm_write_outputs(struct vm *vm, struct err *e)
{
	const struct vm_options *o = vm->opts;
	/* The console log first: the output most likely refused (a FIFO
	 * nobody reads, a link another user owns); made here, it goes again
	 * if a later output fails. */
	bool made_log = o->console_log && access(o->console_log, F_OK) != 0;
	if (o->console_log && console_open_log(&vm->console, o->console_log, e))
		return -1;
	int ret = 0;
	if (vm->dtb) {
		ret = file_write_output("--dump-dtb", o->dump_dtb, vm->dtb, vm->dtb_len, e);
		free(vm->dtb);
		vm->dtb = NULL;
	}
	if (ret || vm_dump_acpi(vm, e) || devices_built(&vm->devices, e)) {
		if (made_log)
			unlink(o->console_log);
		return -1;
	}
	return 0;
}
