/*
 * The one option parser: a row says what an option (--memory) or a device
 * property (queues= of --disk) is: its key, type, range, default and the
 * field it fills; parsing, defaults, the value's syntax, --help's lines and
 * every error come from the rows (Cloud Hypervisor's option_parser,
 * QEMU's QemuOptsList). Adding an option is one row and its field.
 *
 * A row fills a field at `offset` of a base struct (struct vm_options for
 * the machine's options, struct device_spec for a device kind's
 * properties); `size` is the field's, so a row writes an unsigned, an
 * int or an enum alike. Enums are typed end to end: `names` is indexed
 * by the enum's values ([BOOT_ENTRY_PVH] = "pvh"), and the value written
 * is the index of the name given.
 */
#ifndef VMM_OPTION_TABLE_H
#define VMM_OPTION_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct err;

enum opt_type {
	OPT_FLAG,    /* no value: a bool set to true */
	OPT_COUNT,   /* no value: an int counted up (-v -v) */
	OPT_UINT,    /* a whole number in [min, max] */
	OPT_DOUBLE,  /* a finite number, dmin < it <= dmax */
	OPT_STRING,  /* a const char * into the argument; non-empty if `nonempty` */
	OPT_PATH,    /* a non-empty const char * into the argument */
	OPT_BOOL,    /* on or off: a bool */
	OPT_ENUM,    /* one of `names`: its index, the enum's value */
	OPT_MAC,     /* XX:XX:XX:XX:XX:XX, unicast: uint8_t[6] */
	OPT_KEYWORD, /* key itself or key=VALUE ("tap[=NAME]"): VALUE or NULL */
	OPT_CUSTOM,  /* the row's own parse hook (--kvm-pv's list, --device) */
};

struct opt_row;

/* A custom row's parser: `what` names the option in errors, `base` is
 * the struct the rows fill, `ctx` what the caller of opt_parse passed.
 * 0, or -1 with one line of error. */
typedef int (*opt_parse_fn)(const struct opt_row *r, const char *what, char *value, void *base,
			    const void *ctx, struct err *e);

struct opt_row {
	const char *key; /* "memory" (--memory), "queues" (queues=N) */
	char short_name; /* -v; 0: none */
	enum opt_type type;
	size_t offset, size;	  /* the field (OPT_FIELD) */
	int64_t dflt;		  /* FLAG, COUNT, UINT, BOOL, ENUM: the field's default */
	uint64_t min, max;	  /* UINT */
	double dmin, dmax;	  /* DOUBLE */
	const char *const *names; /* ENUM: indexed by the enum's values (NULL: a gap) */
	unsigned nnames;
	bool nonempty;	     /* STRING: "" is an error */
	bool first;	     /* a property list's first item, before any key=value */
	bool required;	     /* STRING property: must be given (no brackets in the syntax) */
	size_t given;	     /* a bool set when the row is given (0: none) */
	const char *env;     /* its default from this variable, when set and not empty */
	const char *metavar; /* "N", "FILE"; ENUM and BOOL write theirs from the names */
	const char *help;    /* NULL: not listed on its own */
	opt_parse_fn parse;  /* OPT_CUSTOM */
};

/* A row's field in struct T. */
#define OPT_FIELD(T, f) .offset = offsetof(T, f), .size = sizeof(((T *)0)->f)
/* An enum's names table (designated: [VALUE] = "name"). */
#define OPT_NAMES(table) .names = (table), .nnames = sizeof(table) / sizeof((table)[0])

/* The rows of a device kind's properties, or of the machine's options. */
struct opt_table {
	const struct opt_row *rows;
	unsigned n;
};

#define OPT_TABLE(...)                                                                             \
	{                                                                                          \
		.rows = (const struct opt_row[]){__VA_ARGS__},                                     \
		.n = sizeof((const struct opt_row[]){__VA_ARGS__}) / sizeof(struct opt_row)        \
	}

/* Writes each row's default into base (those of FLAG, COUNT, UINT, BOOL
 * and ENUM rows; the others are left as they are, NULL after a memset). */
void opt_defaults(const struct opt_row *rows, unsigned n, void *base);
/* Whether the row takes a value (all but FLAG and COUNT). */
bool opt_takes_value(const struct opt_row *r);
/* Parses one value into the row's field; `what` names it in errors
 * ("--memory", "--disk queues"). value NULL for FLAG and COUNT. 0, or -1
 * with one line of error. */
int opt_parse(const struct opt_row *r, const char *what, char *value, void *base, const void *ctx,
	      struct err *e);
/* A property list ("d.img,ro,queues=2") over a table, which it may cut up
 * (values point into it); `what` names the option ("--disk"). arg NULL:
 * no value (--rng, --device testdev alone). 0, or -1 with one line. */
int opt_parse_props(const struct opt_table *t, const char *what, char *arg, void *base,
		    struct err *e);
/* A value's syntax: a row's ("N", "auto|linux|pvh"), or a property
 * table's ("PATH[,ro][,direct][,queues=N]"). */
const char *opt_metavar(const struct opt_row *r, char *buf, size_t len);
void opt_props_syntax(const struct opt_table *t, char *out, size_t len);
/* "a, b, c": an enum's names, for an error. */
void opt_names_list(const char *const *names, unsigned n, char *out, size_t len);
/* The error for a word that is none of `names`: "--boot x: use one of
 * auto, linux, pvh". Returns -1. */
int opt_not_one_of(const char *what, const char *value, const char *const *names, unsigned n,
		   struct err *e);
/* A whole number in [min, max], named `what` in the error. 0 or -1. */
int opt_parse_u64(const char *what, const char *s, uint64_t min, uint64_t max, uint64_t *out,
		  struct err *e);
/* --help's line for an option: "  -v, --key METAVAR" then the help text
 * from column 24, wrapped at 80. */
void opt_print_help_line(FILE *out, char short_name, const char *key, const char *metavar,
			 const char *help);

#endif
