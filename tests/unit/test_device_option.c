/*
 * The one option table (vmm/options/option_table.h) over device properties
 * like the kinds' own: every property type, the rows' defaults, --help's
 * syntax from the same rows, and one error line for each way a value is
 * wrong; then the row types the machine's options use.
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

static const struct opt_table table =
    OPT_TABLE(DEVICE_PROP_PATH("path", "PATH", struct params, path),
	      DEVICE_PROP_FLAG("ro", struct params, ro),
	      DEVICE_PROP_UINT("queues", "N", 1, 16, 1, struct params, queues),
	      DEVICE_PROP_STRING("file", "FILE", struct params, file),
	      DEVICE_PROP_MAC("mac", struct params, mac, has_mac), DEVICE_PROP_SLOT("slot"));

enum where { WHERE_SERIAL, WHERE_VIRTIO };
static const char *const where_names[] = {[WHERE_SERIAL] = "serial", [WHERE_VIRTIO] = "virtio"};

struct kw {
	const char *name;
	enum where choice;
};

static const struct opt_table kw_table =
    OPT_TABLE(DEVICE_PROP_KEYWORD("tap", "NAME", struct kw, name));
static const struct opt_table choice_table =
    OPT_TABLE(DEVICE_PROP_CHOICE("where", where_names, struct kw, choice));

static struct device_spec spec;
static struct params *p = (struct params *)spec.params;
static struct err e;

/* Parses arg (NULL: no value) as option `what` over t into spec, from
 * the rows' defaults, as options.c does. */
static int parse_as(const struct opt_table *t, const char *what, const char *arg)
{
	static char buf[256];
	memset(&e, 0, sizeof(e));
	memset(&spec, 0, sizeof(spec));
	spec.slot = -1;
	opt_defaults(t->rows, t->n, &spec);
	snprintf(buf, sizeof(buf), "%s", arg ? arg : "");
	return opt_parse_props(t, what, arg ? buf : NULL, &spec, &e);
}

static int parse(const char *arg)
{
	return parse_as(&table, "--x", arg);
}

START_TEST(test_every_type_parses)
{
	ck_assert_int_eq(parse("d.img,ro,queues=4,file=out.txt,mac=02:00:00:00:00:2a,slot=5"), 0);
	ck_assert_str_eq(p->path, "d.img");
	ck_assert(p->ro);
	ck_assert_uint_eq(p->queues, 4);
	ck_assert_str_eq(p->file, "out.txt");
	ck_assert(p->has_mac);
	ck_assert_uint_eq(p->mac[0], 2);
	ck_assert_uint_eq(p->mac[5], 0x2a);
	ck_assert_int_eq(spec.slot, 5);
}
END_TEST

START_TEST(test_defaults_come_from_the_rows)
{
	ck_assert_int_eq(parse("d.img"), 0);
	ck_assert_uint_eq(p->queues, 1);
	ck_assert(!p->ro && !p->has_mac && !p->file);
	ck_assert_int_eq(spec.slot, -1);
}
END_TEST

START_TEST(test_syntax_comes_from_the_table)
{
	char s[160];
	opt_props_syntax(&table, s, sizeof(s));
	ck_assert_str_eq(s, "PATH[,ro][,queues=N][,file=FILE][,mac=XX:XX:XX:XX:XX:XX][,slot=S]");
	opt_props_syntax(&kw_table, s, sizeof(s));
	ck_assert_str_eq(s, "tap[=NAME]");
	opt_props_syntax(&choice_table, s, sizeof(s));
	ck_assert_str_eq(s, "serial|virtio");
}
END_TEST

#define ASSERT_ERROR(arg, want)                                                                    \
	do {                                                                                       \
		ck_assert_int_eq(parse(arg), -1);                                                  \
		ck_assert_int_eq(e.kind, ERR_INPUT);                                               \
		ck_assert_msg(strstr(e.msg, want), "%s: got '%s', want '%s'", arg, e.msg, want);   \
		ck_assert(!strchr(e.msg, '\n'));                                                   \
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
	ASSERT_ERROR("d.img,file=", "--x file: needs a value (FILE)");
	ASSERT_ERROR("d.img,mac=zz:00:00:00:00:01", "--x mac: 'zz:00:00:00:00:01' is not a MAC");
	ASSERT_ERROR("d.img,mac=02:00:00:00:00", "is not a MAC");
	ASSERT_ERROR("d.img,mac=01:00:00:00:00:01", "a multicast MAC cannot be a NIC's");
	ASSERT_ERROR("d.img,slot=0", "--x slot 0: must be between 1 and 31");
	ASSERT_ERROR("d.img,slot=32", "--x slot 32: must be between 1 and 31");
}
END_TEST

START_TEST(test_keyword_and_choice)
{
	const struct kw *k = (const struct kw *)spec.params;
	ck_assert_int_eq(parse_as(&kw_table, "--k", "tap"), 0);
	ck_assert_ptr_null(k->name);
	ck_assert_int_eq(parse_as(&kw_table, "--k", "tap=vm0"), 0);
	ck_assert_str_eq(k->name, "vm0");
	ck_assert_int_eq(parse_as(&kw_table, "--k", "tapx"), -1);
	ck_assert_ptr_nonnull(strstr(e.msg, "--k tapx: only tap[=NAME] is supported"));
	ck_assert_int_eq(parse_as(&kw_table, "--k", "user"), -1);
}
END_TEST

/* A choice is its enum's value, and a wrong one lists every name. */
START_TEST(test_choice_is_typed_and_lists_every_name)
{
	const struct kw *k = (const struct kw *)spec.params;
	ck_assert_int_eq(parse_as(&choice_table, "--c", "virtio"), 0);
	ck_assert_int_eq(k->choice, WHERE_VIRTIO);
	ck_assert_int_eq(parse_as(&choice_table, "--c", "serial"), 0);
	ck_assert_int_eq(k->choice, WHERE_SERIAL);
	ck_assert_int_eq(parse_as(&choice_table, "--c", "vga"), -1);
	ck_assert_str_eq(e.msg, "--c vga: use one of serial, virtio");
	ck_assert_int_eq(parse_as(&choice_table, "--c", ""), -1);
	ck_assert_str_eq(e.msg, "--c: needs a value, one of serial, virtio");
}
END_TEST

static const struct opt_table props = OPT_TABLE(
    DEVICE_PROP_UINT("vectors", "N", 1, 2048, 8, struct params, queues), DEVICE_PROP_SLOT("slot"));

START_TEST(test_no_value_for_a_table_without_a_first_item)
{
	ck_assert_int_eq(parse_as(&props, "--device t", NULL), 0);
	ck_assert_uint_eq(p->queues, 8);
	ck_assert_int_eq(parse_as(&props, "--device t", "vectors=9,slot=3"), 0);
	ck_assert_uint_eq(p->queues, 9);
	ck_assert_int_eq(spec.slot, 3);
	ck_assert_int_eq(parse_as(&props, "--device t", "colour=red"), -1);
	ck_assert_str_eq(e.msg, "--device t: unknown property 'colour=red' (vectors=N, slot=S)");
}
END_TEST

/* ---- the row types the machine's options use ---- */

enum colour { COLOUR_RED, COLOUR_GREEN, COLOUR_BLUE };
static const char *const colour_names[] = {
    [COLOUR_RED] = "red", [COLOUR_GREEN] = "green", [COLOUR_BLUE] = "blue"};

struct machine {
	uint64_t big;
	int threads;
	unsigned char small;
	double seconds;
	bool on;
	enum colour colour;
	int verbosity;
	const char *name;
};

#define M(f) OPT_FIELD(struct machine, f)
static const struct opt_row rows[] = {
    {.key = "big", .type = OPT_UINT, M(big), .min = 2, .max = 1ULL << 40, .dflt = 256},
    {.key = "threads", .type = OPT_UINT, M(threads), .min = 0, .max = 16, .dflt = -1},
    {.key = "small", .type = OPT_UINT, M(small), .min = 1, .max = 200, .dflt = 7},
    {.key = "seconds", .type = OPT_DOUBLE, M(seconds), .dmin = 0, .dmax = 100},
    {.key = "on", .type = OPT_BOOL, M(on), .dflt = true},
    {.key = "colour", .type = OPT_ENUM, M(colour), OPT_NAMES(colour_names), .dflt = COLOUR_BLUE},
    {.key = "verbose", .type = OPT_COUNT, M(verbosity)},
    {.key = "name", .type = OPT_STRING, M(name), .nonempty = true, .metavar = "NAME"},
};

static struct machine m;

static int set(unsigned row, const char *value)
{
	static char buf[64];
	snprintf(buf, sizeof(buf), "%s", value);
	memset(&e, 0, sizeof(e));
	return opt_parse(&rows[row], "--opt", buf, &m, NULL, &e);
}

START_TEST(test_defaults_fill_each_field_at_its_size)
{
	memset(&m, 0xa5, sizeof(m));
	opt_defaults(rows, sizeof(rows) / sizeof(rows[0]), &m);
	ck_assert_uint_eq(m.big, 256);
	ck_assert_int_eq(m.threads, -1);
	ck_assert_uint_eq(m.small, 7);
	ck_assert(m.on);
	ck_assert_int_eq(m.colour, COLOUR_BLUE);
	ck_assert_int_eq(m.verbosity, 0);
}
END_TEST

START_TEST(test_typed_values)
{
	ck_assert_int_eq(set(0, "1099511627776"), 0);
	ck_assert_uint_eq(m.big, 1ULL << 40);
	ck_assert_int_eq(set(1, "16"), 0);
	ck_assert_int_eq(m.threads, 16);
	ck_assert_int_eq(set(2, "200"), 0);
	ck_assert_uint_eq(m.small, 200);
	ck_assert_int_eq(set(3, "2.5"), 0);
	ck_assert(m.seconds == 2.5);
	ck_assert_int_eq(set(4, "off"), 0);
	ck_assert(!m.on);
	ck_assert_int_eq(set(4, "on"), 0);
	ck_assert(m.on);
	ck_assert_int_eq(set(5, "green"), 0);
	ck_assert_int_eq(m.colour, COLOUR_GREEN);
	m.verbosity = 0;
	ck_assert_int_eq(opt_parse(&rows[6], "-v", NULL, &m, NULL, &e), 0);
	ck_assert_int_eq(opt_parse(&rows[6], "-v", NULL, &m, NULL, &e), 0);
	ck_assert_int_eq(m.verbosity, 2);
}
END_TEST

#define ASSERT_SET_ERROR(row, value, want)                                                         \
	do {                                                                                       \
		ck_assert_int_eq(set(row, value), -1);                                             \
		ck_assert_int_eq(e.kind, ERR_INPUT);                                               \
		ck_assert_msg(!strcmp(e.msg, want), "%s: got '%s', want '%s'", value, e.msg,       \
			      want);                                                               \
	} while (0)

/* Every error names the option, and a range error the range. */
START_TEST(test_errors_name_the_range_and_every_choice)
{
	ASSERT_SET_ERROR(0, "1", "--opt 1: must be between 2 and 1099511627776");
	ASSERT_SET_ERROR(1, "17", "--opt 17: must be between 0 and 16");
	ASSERT_SET_ERROR(1, "-1", "--opt: '-1' is not a whole number");
	ASSERT_SET_ERROR(2, "201", "--opt 201: must be between 1 and 200");
	ASSERT_SET_ERROR(3, "0", "--opt 0: must be above 0 and at most 100");
	ASSERT_SET_ERROR(3, "101", "--opt 101: must be above 0 and at most 100");
	ASSERT_SET_ERROR(3, "inf", "--opt: 'inf' is not a number");
	ASSERT_SET_ERROR(3, "5s", "--opt: '5s' is not a number");
	ASSERT_SET_ERROR(4, "maybe", "--opt maybe: use one of on, off");
	ASSERT_SET_ERROR(5, "pink", "--opt pink: use one of red, green, blue");
	ASSERT_SET_ERROR(7, "", "--opt: needs a value (NAME)");
}
END_TEST

START_TEST(test_metavar_of_an_enum_is_its_names)
{
	char buf[64];
	ck_assert_str_eq(opt_metavar(&rows[5], buf, sizeof(buf)), "red|green|blue");
	ck_assert_str_eq(opt_metavar(&rows[4], buf, sizeof(buf)), "on|off");
	ck_assert_ptr_null(opt_metavar(&rows[6], buf, sizeof(buf)));
}
END_TEST

static Suite *devopt_suite(void)
{
	Suite *s = suite_create("device_option");
	TCase *t = tcase_create("device_option");
	tcase_add_test(t, test_every_type_parses);
	tcase_add_test(t, test_defaults_come_from_the_rows);
	tcase_add_test(t, test_syntax_comes_from_the_table);
	tcase_add_test(t, test_each_error_is_one_line_naming_what);
	tcase_add_test(t, test_keyword_and_choice);
	tcase_add_test(t, test_choice_is_typed_and_lists_every_name);
	tcase_add_test(t, test_no_value_for_a_table_without_a_first_item);
	suite_add_tcase(s, t);
	t = tcase_create("option_rows");
	tcase_add_test(t, test_defaults_fill_each_field_at_its_size);
	tcase_add_test(t, test_typed_values);
	tcase_add_test(t, test_errors_name_the_range_and_every_choice);
	tcase_add_test(t, test_metavar_of_an_enum_is_its_names);
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
