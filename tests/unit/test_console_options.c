/*
 * The host console (Ctrl-A escapes on a terminal, panic detection in guest
 * output) and the ./vmm command line (options.h: the typed fields, the
 * errors, --help from the rows).
 */
#include "helpers.h"

#include "vmm/base/err.h"
#include "vmm/host/console.h"
#include "vmm/kinds/registry.h"
#include "vmm/options/options.h"

#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- input escapes ---- */

static struct console con;

static void con_setup(void)
{
	memset(&con, 0, sizeof(con));
	lock_init(&con.out_lock, "console output", LOCK_RANK_CONSOLE_OUT);
	con.out_fd = -1;
	con.in_fd = -1;
	con.in_tty = true;
}

/* Filters `in` (len bytes) in a buffer with room for expansion. */
static enum console_input_result filter(const char *in, size_t len, uint8_t *buf, size_t *n)
{
	memset(buf, 0, 64);
	memcpy(buf, in, len);
	*n = len;
	return console_filter_input(&con, buf, n);
}

START_TEST(test_ctrl_a_x_quits)
{
	uint8_t buf[64];
	size_t n;
	ck_assert_int_eq(filter("ab\x01x", 4, buf, &n), CONSOLE_INPUT_QUIT);
	ck_assert_uint_le(n, 2);
	ck_assert_int_eq(filter("\x01X", 2, buf, &n), CONSOLE_INPUT_QUIT);
}
END_TEST

START_TEST(test_ctrl_a_ctrl_a_sends_one_ctrl_a)
{
	uint8_t buf[64];
	size_t n;
	ck_assert_int_eq(filter("a\x01\x01z", 4, buf, &n), CONSOLE_INPUT_DATA);
	ck_assert_uint_eq(n, 3);
	ck_assert_mem_eq(buf, "a\x01z", 3);
}
END_TEST

START_TEST(test_ctrl_a_then_other_byte_passes_both)
{
	uint8_t buf[64];
	size_t n;
	ck_assert_int_eq(filter("\x01q!", 3, buf, &n), CONSOLE_INPUT_DATA);
	ck_assert_uint_eq(n, 3);
	ck_assert_mem_eq(buf, "\x01q!", 3);
}
END_TEST

START_TEST(test_escape_split_across_reads_quits)
{
	uint8_t buf[64];
	size_t n;
	ck_assert_int_eq(filter("ls\x01", 3, buf, &n), CONSOLE_INPUT_DATA);
	ck_assert_uint_eq(n, 2);
	ck_assert_mem_eq(buf, "ls", 2);
	ck_assert_int_eq(filter("x", 1, buf, &n), CONSOLE_INPUT_QUIT);
}
END_TEST

START_TEST(test_escape_split_across_reads_ctrl_a_ctrl_a)
{
	uint8_t buf[64];
	size_t n;
	ck_assert_int_eq(filter("\x01", 1, buf, &n), CONSOLE_INPUT_DATA);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(filter("\x01y", 2, buf, &n), CONSOLE_INPUT_DATA);
	ck_assert_uint_eq(n, 2);
	ck_assert_mem_eq(buf, "\x01y", 2);
}
END_TEST

START_TEST(test_escape_split_across_reads_other_byte)
{
	uint8_t buf[64];
	size_t n;
	ck_assert_int_eq(filter("\x01", 1, buf, &n), CONSOLE_INPUT_DATA);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(filter("ok", 2, buf, &n), CONSOLE_INPUT_DATA);
	ck_assert_uint_eq(n, 3);
	ck_assert_mem_eq(buf, "\x01ok", 3);
}
END_TEST

START_TEST(test_not_a_tty_bytes_pass_unchanged)
{
	uint8_t buf[64];
	size_t n;
	con.in_tty = false;
	ck_assert_int_eq(filter("\x01x\x01\x01q", 5, buf, &n), CONSOLE_INPUT_DATA);
	ck_assert_uint_eq(n, 5);
	ck_assert_mem_eq(buf, "\x01x\x01\x01q", 5);
}
END_TEST

/* ---- panic detection ---- */

static int panics;

static void on_panic(void *ctx)
{
	(void)ctx;
	panics++;
}

static int pipe_rd = -1;

static void panic_setup(void)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	memset(&con, 0, sizeof(con));
	lock_init(&con.out_lock, "console output", LOCK_RANK_CONSOLE_OUT);
	con.out_fd = p[1];
	con.in_fd = -1;
	con.on_panic = on_panic;
	pipe_rd = p[0];
	panics = 0;
}

static void out(const char *s)
{
	console_output(&con, (const uint8_t *)s, strlen(s));
}

START_TEST(test_panic_text_calls_on_panic_once)
{
	out("[    1.234] Kernel panic - not syncing: VFS: Unable to mount root fs\n");
	ck_assert_int_eq(panics, 1);
	out("[    1.235] Kernel panic - not syncing: again\n");
	ck_assert_int_eq(panics, 1);
}
END_TEST

START_TEST(test_panic_text_split_across_writes_detected)
{
	out("boot ok\nKernel pa");
	ck_assert_int_eq(panics, 0);
	out("nic - not ");
	ck_assert_int_eq(panics, 0);
	out("syncing: x\n");
	ck_assert_int_eq(panics, 1);
}
END_TEST

START_TEST(test_panic_text_byte_by_byte_detected)
{
	const char *s = "..Kernel panic - not syncing: x";
	for (size_t i = 0; s[i]; i++)
		console_output(&con, (const uint8_t *)s + i, 1);
	ck_assert_int_eq(panics, 1);
}
END_TEST

/* The VMM's own lines start on a fresh line: with the guest's line left
 * open on a terminal both share, the log is told to break it, once; the
 * guest's own stream is not changed; a closed line or a console of its
 * own needs no break. */
START_TEST(test_fresh_line_when_a_guest_line_is_open_on_a_shared_terminal)
{
	char got[64] = "";
	con.out_shared = true;
	out("[  0.1] Kernel pan");
	ck_assert(console_fresh_line(&con));
	ck_assert(!console_fresh_line(&con));
	out("done\n");
	ck_assert(!console_fresh_line(&con));
	out("open");
	con.out_shared = false;
	ck_assert(!console_fresh_line(&con));
	close(con.out_fd);
	ssize_t n = read(pipe_rd, got, sizeof(got) - 1);
	ck_assert_int_gt(n, 0);
	got[n] = 0;
	ck_assert_str_eq(got, "[  0.1] Kernel pandone\nopen");
}
END_TEST

START_TEST(test_panic_text_after_near_miss_detected)
{
	out("Kernel panKernel panic - not syncing");
	ck_assert_int_eq(panics, 1);
}
END_TEST

START_TEST(test_near_miss_alone_is_not_panic)
{
	out("Kernel panic - not syncinG\nKernel pani\nkernel panic - not syncing\n");
	ck_assert_int_eq(panics, 0);
}
END_TEST

START_TEST(test_console_output_forwards_bytes_unchanged)
{
	const char *s = "hello\r\n\x01\x7f world";
	out(s);
	char got[64] = {0};
	ssize_t n = read(pipe_rd, got, sizeof(got));
	ck_assert_int_eq(n, (ssize_t)strlen(s));
	ck_assert_mem_eq(got, s, strlen(s));
}
END_TEST

START_TEST(test_console_output_to_dev_null_still_detects_panic)
{
	close(con.out_fd);
	con.out_fd = open("/dev/null", O_WRONLY);
	ck_assert_int_ge(con.out_fd, 0);
	out("Kernel panic - not syncing: Attempted to kill init!");
	ck_assert_int_eq(panics, 1);
}
END_TEST

/* ---- options ---- */

static struct vm_options opts;
static struct err err;

/* Parses a NULL-terminated argument list (argv[0] supplied), copied: the
 * parser cuts device options up in place, as it may argv's. */
static int parse_v(const char *const *args)
{
	static char *argv[32];
	static char copies[31][64];
	int argc = 0;
	argv[argc++] = (char *)"vmm";
	for (; *args && argc < 31; args++, argc++) {
		snprintf(copies[argc], sizeof(copies[argc]), "%s", *args);
		argv[argc] = copies[argc];
	}
	argv[argc] = NULL;
	memset(&err, 0, sizeof(err));
	return options_parse(&opts, argc, argv, device_kinds, &err);
}
#define PARSE(...) parse_v((const char *const[]){__VA_ARGS__, NULL})

#define ck_assert_usage_error(ret)                                                                 \
	do {                                                                                       \
		ck_assert_int_eq((ret), -1);                                                       \
		ck_assert_int_eq(err.kind, ERR_INPUT);                                             \
		ck_assert_msg(err.msg[0] != 0, "error without a message");                         \
	} while (0)

START_TEST(test_options_defaults_256_mib_one_cpu)
{
	ck_assert_int_eq(PARSE("--kernel", "bzImage"), 0);
	ck_assert_str_eq(opts.kernel, "bzImage");
	ck_assert_uint_eq(opts.memory_mib, 256);
	ck_assert_uint_eq(opts.cpus, 1);
	ck_assert(opts.timeout_s == 0);
	ck_assert(!opts.no_default_cmdline);
	ck_assert(!opts.guest_decompress);
	ck_assert_ptr_null(opts.initrd);
	ck_assert_ptr_null(opts.cmdline_extra);
}
END_TEST

START_TEST(test_options_values_parsed)
{
	ck_assert_int_eq(PARSE("--kernel", "k", "--memory", "2048", "--cpus", "4", "--timeout",
			       "2.5", "--initrd", "i", "--guest-decompress", "-v", "-v"),
			 0);
	ck_assert_uint_eq(opts.memory_mib, 2048);
	ck_assert_uint_eq(opts.cpus, 4);
	ck_assert(opts.timeout_s == 2.5);
	ck_assert_str_eq(opts.initrd, "i");
	ck_assert(opts.guest_decompress);
	ck_assert_int_eq(opts.verbosity, 2);
}
END_TEST

START_TEST(test_options_missing_kernel_is_usage_error)
{
	ck_assert_usage_error(PARSE("--memory", "512"));
}
END_TEST

START_TEST(test_options_bad_memory_rejected)
{
	static const char *const bad[] = {"lots", "12x", "", "0", "-5", "-0", "0x100", "1e3"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int ret = PARSE("--kernel", "k", "--memory", bad[i]);
		ck_assert_msg(ret == -1 && err.kind == ERR_INPUT && err.msg[0],
			      "--memory '%s' was accepted", bad[i]);
	}
}
END_TEST

START_TEST(test_options_bad_cpus_rejected)
{
	static const char *const bad[] = {"two", "0", "-1", "", "1.5", "4k"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int ret = PARSE("--kernel", "k", "--cpus", bad[i]);
		ck_assert_msg(ret == -1 && err.kind == ERR_INPUT && err.msg[0],
			      "--cpus '%s' was accepted", bad[i]);
	}
}
END_TEST

START_TEST(test_options_bad_timeout_rejected)
{
	static const char *const bad[] = {"soon", "0", "-1", "", "nan", "inf", "5s"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int ret = PARSE("--kernel", "k", "--timeout", bad[i]);
		ck_assert_msg(ret == -1 && err.kind == ERR_INPUT && err.msg[0],
			      "--timeout '%s' was accepted", bad[i]);
	}
}
END_TEST

START_TEST(test_options_option_missing_its_value_rejected)
{
	ck_assert_usage_error(PARSE("--kernel", "k", "--memory"));
}
END_TEST

START_TEST(test_options_unknown_option_rejected)
{
	ck_assert_usage_error(PARSE("--kernel", "k", "--frobnicate"));
	ck_assert_ptr_nonnull(strstr(err.msg, "frobnicate"));
}
END_TEST

START_TEST(test_options_stray_argument_rejected)
{
	ck_assert_usage_error(PARSE("--kernel", "k", "stray"));
	ck_assert_ptr_nonnull(strstr(err.msg, "stray"));
}
END_TEST

START_TEST(test_options_help_without_kernel_ok)
{
	ck_assert_int_eq(PARSE("--help"), 0);
	ck_assert(opts.help);
	ck_assert_int_eq(PARSE("-h"), 0);
	ck_assert(opts.help);
}
END_TEST

START_TEST(test_kernel_cmdline_joins_default_and_extra)
{
	ck_assert_int_eq(PARSE("--kernel", "k", "--cmdline", "root=/dev/vda quiet"), 0);
	char *s = options_kernel_cmdline(&opts);
	ck_assert_str_eq(s, VMM_DEFAULT_CMDLINE " root=/dev/vda quiet");
	free(s);
}
END_TEST

START_TEST(test_kernel_cmdline_default_alone)
{
	ck_assert_int_eq(PARSE("--kernel", "k"), 0);
	char *s = options_kernel_cmdline(&opts);
	ck_assert_str_eq(s, VMM_DEFAULT_CMDLINE);
	ck_assert_ptr_nonnull(strstr(s, "console=ttyS0"));
	free(s);
}
END_TEST

START_TEST(test_kernel_cmdline_no_default_uses_only_extra)
{
	ck_assert_int_eq(PARSE("--kernel", "k", "--no-default-cmdline", "--cmdline", "init=/x"), 0);
	char *s = options_kernel_cmdline(&opts);
	ck_assert_str_eq(s, "init=/x");
	free(s);
	ck_assert_int_eq(PARSE("--kernel", "k", "--no-default-cmdline"), 0);
	s = options_kernel_cmdline(&opts);
	ck_assert_str_eq(s, "");
	free(s);
}
END_TEST

#define ck_assert_error_is(ret, want)                                                              \
	do {                                                                                       \
		ck_assert_usage_error(ret);                                                        \
		ck_assert_str_eq(err.msg, want);                                                   \
	} while (0)

START_TEST(test_options_typed_defaults)
{
	ck_assert_int_eq(PARSE("--kernel", "k"), 0);
	ck_assert_int_eq(opts.irq_mode, IRQ_MODE_MSIX);
	ck_assert_int_eq(opts.msi_delivery, IRQ_MSI_IRQFD);
	ck_assert_int_eq(opts.intx_delivery, IRQ_INTX_LINE);
	ck_assert_int_eq(opts.boot_entry, BOOT_ENTRY_AUTO);
	ck_assert_int_eq(opts.kvm_pv, CPU_PV_AUTO);
	ck_assert_int_eq(opts.host, HOST_AUTO);
	ck_assert_int_eq(opts.io_threads, -1);
	ck_assert(opts.seccomp);
	ck_assert(opts.acpi);
	ck_assert_uint_eq(opts.ndevices, 0);
}
END_TEST

START_TEST(test_options_typed_values)
{
	ck_assert_int_eq(PARSE("--kernel", "k", "--irq-mode", "intx", "--msi-delivery", "signal",
			       "--intx-delivery", "resample", "--boot", "pvh", "--kvm-pv", "none",
			       "--host", "emulated", "--io-threads", "0", "--seccomp", "off",
			       "--acpi", "off"),
			 0);
	ck_assert_int_eq(opts.irq_mode, IRQ_MODE_INTX);
	ck_assert_int_eq(opts.msi_delivery, IRQ_MSI_SIGNAL);
	ck_assert_int_eq(opts.intx_delivery, IRQ_INTX_RESAMPLE);
	ck_assert_int_eq(opts.boot_entry, BOOT_ENTRY_PVH);
	ck_assert_int_eq(opts.kvm_pv, CPU_PV_NONE);
	ck_assert_int_eq(opts.host, HOST_EMULATED);
	ck_assert_int_eq(opts.io_threads, 0);
	ck_assert(!opts.seccomp);
	ck_assert(!opts.acpi);
	ck_assert_int_eq(PARSE("--kernel", "k", "--boot", "linux", "--intx-delivery", "line"), 0);
	ck_assert_int_eq(opts.boot_entry, BOOT_ENTRY_LINUX);
	ck_assert_int_eq(opts.intx_delivery, IRQ_INTX_LINE);
}
END_TEST

/* One bad option and its one-line error: a wrong word lists every choice
 * (machine options and device choices alike), a bad number names the range. */
static const struct {
	const char *opt, *value, *want;
} bad_values[] = {
    {"--boot", "pvhx", "--boot pvhx: use one of auto, linux, pvh"},
    {"--irq-mode", "msi", "--irq-mode msi: use one of msix, intx"},
    {"--host", "cloud", "--host cloud: use one of auto, kvm, emulated"},
    {"--acpi", "maybe", "--acpi maybe: use one of on, off"},
    {"--console", "vga", "--console vga: use one of serial, virtio"},
    {"--device", "frob", "--device frob: use one of testdev, irqbench"},
    {"--device", "", "--device: needs a value, one of testdev, irqbench"},
    {"--cpus", "255", "--cpus 255: must be between 1 and 254"},
    {"--io-threads", "17", "--io-threads 17: must be between 0 and 16"},
    {"--memory", "1", "--memory 1: must be between 2 and 1048576"},
    {"--timeout", "0", "--timeout 0: must be above 0 and at most 10000000"},
    {"--disk", "d.img,queues=17", "--disk queues 17: must be between 1 and 16"},
    {"--device", "testdev,vectors=0", "--device testdev vectors 0: must be between 1 and 2048"},
    {"--fs", "/", "--fs /: needs tag=NAME"}, /* a required property */
    {"--fs", "/,tag=", "--fs tag: needs a value (NAME)"},
};

START_TEST(test_options_bad_value_error)
{
	ck_assert_error_is(PARSE("--kernel", "k", bad_values[_i].opt, bad_values[_i].value),
			   bad_values[_i].want);
}
END_TEST

/* $VMM_HOST is --host's default, checked as --host is; --host wins. */
START_TEST(test_options_vmm_host_environment)
{
	setenv("VMM_HOST", "kvm", 1);
	ck_assert_int_eq(PARSE("--kernel", "k"), 0);
	ck_assert_int_eq(opts.host, HOST_KVM);
	ck_assert_int_eq(PARSE("--kernel", "k", "--host", "emulated"), 0);
	ck_assert_int_eq(opts.host, HOST_EMULATED);
	setenv("VMM_HOST", "cloud", 1);
	ck_assert_error_is(PARSE("--kernel", "k"),
			   "VMM_HOST cloud: use one of auto, kvm, emulated");
	setenv("VMM_HOST", "", 1);
	ck_assert_int_eq(PARSE("--kernel", "k"), 0);
	ck_assert_int_eq(opts.host, HOST_AUTO);
	unsetenv("VMM_HOST");
}
END_TEST

START_TEST(test_options_devices_from_their_rows)
{
	ck_assert_int_eq(PARSE("--kernel", "k", "--disk", "d.img,ro", "--device", "testdev,slot=4",
			       "--console", "virtio", "--rng"),
			 0);
	ck_assert_uint_eq(opts.ndevices, 4);
	ck_assert_str_eq(opts.devices[0].kind->name, "virtio-blk");
	ck_assert_int_eq(opts.devices[0].slot, -1);
	ck_assert_str_eq(opts.devices[1].kind->name, "testdev");
	ck_assert_int_eq(opts.devices[1].slot, 4);
	ck_assert_str_eq(opts.guest_console, "hvc0");
	ck_assert_int_eq(PARSE("--kernel", "k", "--console", "virtio", "--console", "serial"), 0);
	ck_assert_uint_eq(opts.ndevices, 0);
}
END_TEST

/* --help is written from the rows: each machine option, each device
 * kind, and the exit codes. */
START_TEST(test_options_help_lists_every_row)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	ck_assert_ptr_nonnull(f);
	options_print_help(f, "vmm", device_kinds);
	fclose(f);
	const struct opt_table *t = options_machine_rows();
	for (unsigned i = 0; i < t->n; i++) {
		char want[64];
		snprintf(want, sizeof(want), "--%s", t->rows[i].key);
		ck_assert_msg(strstr(text, want), "--help lacks %s", want);
	}
	for (const struct device_cli *const *k = device_kinds; *k; k++) {
		char want[64];
		if ((*k)->option)
			snprintf(want, sizeof(want), "--%s", (*k)->option);
		else
			snprintf(want, sizeof(want), "--device %s", (*k)->name);
		ck_assert_msg(strstr(text, want), "--help lacks %s", want);
	}
	ck_assert_ptr_nonnull(strstr(text, "-v, --verbose"));
	ck_assert_ptr_nonnull(strstr(text, "--boot auto|linux|pvh"));
	ck_assert_ptr_nonnull(strstr(text, "--disk PATH[,ro][,direct][,queues=N]"));
	ck_assert_ptr_nonnull(strstr(text, "Exit codes:"));
	free(text);
}
END_TEST

static Suite *console_options_suite(void)
{
	Suite *s = suite_create("console_options");
	TCase *t = tcase_create("console_input");
	tcase_add_checked_fixture(t, con_setup, NULL);
	tcase_add_test(t, test_ctrl_a_x_quits);
	tcase_add_test(t, test_ctrl_a_ctrl_a_sends_one_ctrl_a);
	tcase_add_test(t, test_ctrl_a_then_other_byte_passes_both);
	tcase_add_test(t, test_escape_split_across_reads_quits);
	tcase_add_test(t, test_escape_split_across_reads_ctrl_a_ctrl_a);
	tcase_add_test(t, test_escape_split_across_reads_other_byte);
	tcase_add_test(t, test_not_a_tty_bytes_pass_unchanged);
	suite_add_tcase(s, t);

	t = tcase_create("console_panic");
	tcase_add_checked_fixture(t, panic_setup, NULL);
	tcase_add_test(t, test_panic_text_calls_on_panic_once);
	tcase_add_test(t, test_panic_text_split_across_writes_detected);
	tcase_add_test(t, test_panic_text_byte_by_byte_detected);
	tcase_add_test(t, test_fresh_line_when_a_guest_line_is_open_on_a_shared_terminal);
	tcase_add_test(t, test_panic_text_after_near_miss_detected);
	tcase_add_test(t, test_near_miss_alone_is_not_panic);
	tcase_add_test(t, test_console_output_forwards_bytes_unchanged);
	tcase_add_test(t, test_console_output_to_dev_null_still_detects_panic);
	suite_add_tcase(s, t);

	t = tcase_create("options");
	tcase_add_test(t, test_options_defaults_256_mib_one_cpu);
	tcase_add_test(t, test_options_values_parsed);
	tcase_add_test(t, test_options_missing_kernel_is_usage_error);
	tcase_add_test(t, test_options_bad_memory_rejected);
	tcase_add_test(t, test_options_bad_cpus_rejected);
	tcase_add_test(t, test_options_bad_timeout_rejected);
	tcase_add_test(t, test_options_option_missing_its_value_rejected);
	tcase_add_test(t, test_options_unknown_option_rejected);
	tcase_add_test(t, test_options_stray_argument_rejected);
	tcase_add_test(t, test_options_help_without_kernel_ok);
	tcase_add_test(t, test_kernel_cmdline_joins_default_and_extra);
	tcase_add_test(t, test_kernel_cmdline_default_alone);
	tcase_add_test(t, test_kernel_cmdline_no_default_uses_only_extra);
	tcase_add_test(t, test_options_typed_defaults);
	tcase_add_test(t, test_options_typed_values);
	tcase_add_loop_test(t, test_options_bad_value_error, 0,
			    sizeof(bad_values) / sizeof(bad_values[0]));
	tcase_add_test(t, test_options_vmm_host_environment);
	tcase_add_test(t, test_options_devices_from_their_rows);
	tcase_add_test(t, test_options_help_lists_every_row);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(console_options_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
