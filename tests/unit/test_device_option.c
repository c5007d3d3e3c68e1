/*
 * The device option parser (vmm/options/option_table.h) over a table like the
 * kinds' own: every property type, the defaults left alone, --help's syntax
 * from the same table, and one error line for each way a value is wrong.
 */
#include "vmm/base/err.h"
#include "vmm/options/option_table.h"
#include "vmm/options/options.h"

#include <check.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct params {
	const char *path;
	bool ro;
	unsigned queues;
	const char *file;
	bool has_mac;
	uint8_t mac[6];
};

static const struct devopt_table table =
    DEVOPT_TABLE("--x", DEVOPT_PATH_ROW("PATH", "path", struct params, path),
		 DEVOPT_FLAG_ROW("ro", struct params, ro),
		 DEVOPT_UINT_ROW("queues", "N", 1, 16, struct params, queues),
		 DEVOPT_STRING_ROW("file", "FILE", struct params, file),
		 DEVOPT_MAC_ROW("mac", struct params, mac, has_mac), DEVOPT_SLOT_ROW("slot"));

struct kw {
	const char *name;
	unsigned choice;
};

static const struct devopt_table kw_table =
    DEVOPT_TABLE("--k", DEVOPT_KEYWORD_ROW("tap", "NAME", struct kw, name));
static const struct devopt_table choice_table =
    DEVOPT_TABLE("--c", DEVOPT_CHOICE_ROW("where", "serial|virtio", struct kw, choice));

static struct device_spec spec;
static struct params p;
static struct err e;

static int parse(const struct devopt_table *t, void *params, const char *arg)
{
	static char buf[256];
	memset(&e, 0, sizeof(e));
	spec.slot = -1;
	if (!arg)
		return devopt_parse(t, &spec, params, NULL, &e);
	snprintf(buf, sizeof(buf), "%s", arg);
	return devopt_parse(t, &spec, params, buf, &e);
}

static void setup(void)
{
	memset(&p, 0, sizeof(p));
	p.queues = 1; /* a default the parser leaves alone */
}

START_TEST(test_every_type_parses)
{
	ck_assert_int_eq(
	    parse(&table, &p, "d.img,ro,queues=4,file=out.txt,mac=02:00:00:00:00:2a,slot=5"), 0);
	ck_assert_str_eq(p.path, "d.img");
	ck_assert(p.ro);
	ck_assert_uint_eq(p.queues, 4);
	ck_assert_str_eq(p.file, "out.txt");
	ck_assert(p.has_mac);
	ck_assert_uint_eq(p.mac[0], 2);
	ck_assert_uint_eq(p.mac[5], 0x2a);
	ck_assert_int_eq(spec.slot, 5);
}
END_TEST

START_TEST(test_defaults_stay_when_not_given)
{
	ck_assert_int_eq(parse(&table, &p, "d.img"), 0);
	ck_assert_uint_eq(p.queues, 1);
	ck_assert(!p.ro && !p.has_mac && !p.file);
	ck_assert_int_eq(spec.slot, -1);
}
END_TEST

START_TEST(test_syntax_comes_from_the_table)
{
	char s[160];
	devopt_syntax(&table, s, sizeof(s));
	ck_assert_str_eq(s, "PATH[,ro][,queues=N][,file=FILE][,mac=XX:XX:XX:XX:XX:XX][,slot=S]");
	devopt_syntax(&kw_table, s, sizeof(s));
	ck_assert_str_eq(s, "tap[=NAME]");
	devopt_syntax(&choice_table, s, sizeof(s));
	ck_assert_str_eq(s, "serial|virtio");
}
END_TEST

#define ASSERT_ERROR(arg, want)                                                                    \
	do {                                                                                       \
		ck_assert_int_eq(parse(&table, &p, arg), -1);                                      \
		ck_assert_int_eq(e.kind, ERR_INPUT);                                               \
		ck_assert_msg(strstr(e.msg, want), "%s: got '%s', want '%s'", arg, e.msg, want);   \
	} while (0)

START_TEST(test_each_error_is_one_line_naming_what)
{
	ASSERT_ERROR("", "--x needs a path");
	ASSERT_ERROR(",ro", "--x needs a path");
	ASSERT_ERROR("d.img,rw", "--x d.img: unknown property 'rw' (ro, queues=N, file=FILE, "
				 "mac=XX:XX:XX:XX:XX:XX, slot=S)");
	ASSERT_ERROR("d.img,ro=1", "unknown property 'ro=1'");
	ASSERT_ERROR("d.img,queues", "unknown property 'queues'");
	ASSERT_ERROR("d.img,queues=0", "--x queues 0: must be between 1 and 16");
	ASSERT_ERROR("d.img,queues=17", "--x queues 17: must be between 1 and 16");
	ASSERT_ERROR("d.img,queues=2x", "--x queues: '2x' is not a whole number");
	ASSERT_ERROR("d.img,file=", "--x file=: needs a value (FILE)");
	ASSERT_ERROR("d.img,mac=zz:00:00:00:00:01", "--x mac: 'zz:00:00:00:00:01' is not a MAC");
	ASSERT_ERROR("d.img,mac=02:00:00:00:00", "is not a MAC");
	ASSERT_ERROR("d.img,mac=01:00:00:00:00:01", "a multicast MAC cannot be a NIC's");
	ASSERT_ERROR("d.img,slot=0", "--x slot 0: must be between 1 and 31");
	ASSERT_ERROR("d.img,slot=32", "--x slot 32: must be between 1 and 31");
	ck_assert(!strchr(e.msg, '\n'));
}
END_TEST

START_TEST(test_keyword_and_choice)
{
	struct kw k = {0};
	ck_assert_int_eq(parse(&kw_table, &k, "tap"), 0);
	ck_assert_ptr_null(k.name);
	ck_assert_int_eq(parse(&kw_table, &k, "tap=vm0"), 0);
	ck_assert_str_eq(k.name, "vm0");
	ck_assert_int_eq(parse(&kw_table, &k, "tapx"), -1);
	ck_assert_ptr_nonnull(strstr(e.msg, "--k tapx: only tap[=NAME] is supported"));
	ck_assert_int_eq(parse(&kw_table, &k, "user"), -1);
	ck_assert_int_eq(parse(&choice_table, &k, "virtio"), 0);
	ck_assert_uint_eq(k.choice, 1);
	ck_assert_int_eq(parse(&choice_table, &k, "serial"), 0);
	ck_assert_uint_eq(k.choice, 0);
	ck_assert_int_eq(parse(&choice_table, &k, "vga"), -1);
	ck_assert_str_eq(e.msg, "--c vga: use one of serial, virtio");
}
END_TEST

static const struct devopt_table props =
    DEVOPT_TABLE("--device t", DEVOPT_UINT_ROW("vectors", "N", 1, 2048, struct params, queues),
		 DEVOPT_SLOT_ROW("slot"));

START_TEST(test_no_value_for_a_table_without_a_first_item)
{
	ck_assert_int_eq(parse(&props, &p, NULL), 0);
	ck_assert_uint_eq(p.queues, 1);
	ck_assert_int_eq(parse(&props, &p, "vectors=9,slot=3"), 0);
	ck_assert_uint_eq(p.queues, 9);
	ck_assert_int_eq(spec.slot, 3);
	ck_assert_int_eq(parse(&props, &p, "colour=red"), -1);
	ck_assert_str_eq(e.msg, "--device t: unknown property 'colour=red' (vectors=N, slot=S)");
}
END_TEST

static Suite *devopt_suite(void)
{
	Suite *s = suite_create("device_option");
	TCase *t = tcase_create("device_option");
	tcase_add_checked_fixture(t, setup, NULL);
	tcase_add_test(t, test_every_type_parses);
	tcase_add_test(t, test_defaults_stay_when_not_given);
	tcase_add_test(t, test_syntax_comes_from_the_table);
	tcase_add_test(t, test_each_error_is_one_line_naming_what);
	tcase_add_test(t, test_keyword_and_choice);
	tcase_add_test(t, test_no_value_for_a_table_without_a_first_item);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(devopt_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
