/*
 * A device option's value ("--disk PATH,ro,queues=2", "--device
 * testdev,vectors=4,slot=3") parsed over a table of its properties: key,
 * type, range and the field it fills in the kind's parameter struct (Cloud
 * Hypervisor's option_parser). The same table writes the value's syntax for
 * --help and every error, so adding a property is one row.
 */
#ifndef VMM_DEVICE_OPTION_H
#define VMM_DEVICE_OPTION_H

#include <stddef.h>
#include <stdint.h>

struct err;
struct device_spec;

enum devopt_type {
	DEVOPT_FLAG,   /* "ro": a bool set to true */
	DEVOPT_UINT,   /* "queues=N": an unsigned in [min, max] */
	DEVOPT_STRING, /* "samples=FILE": a non-empty const char * into the argument */
	DEVOPT_MAC,    /* "mac=XX:XX:XX:XX:XX:XX": uint8_t[6], unicast; sets has_offset */
	DEVOPT_SLOT,   /* "slot=S": the PCI slot (spec->slot, not the params) */
	/* The first item, before any property (key = its metavar in --help): */
	DEVOPT_PATH,	/* a non-empty const char * ("PATH") */
	DEVOPT_KEYWORD, /* key itself or key=VALUE ("tap[=NAME]"): VALUE or NULL */
	DEVOPT_CHOICE,	/* one of `choices` ("serial|virtio"): its index, unsigned */
};

struct devopt {
	const char *key;
	enum devopt_type type;
	size_t offset;	     /* of the field in the kind's params */
	uint64_t min, max;   /* DEVOPT_UINT; the default is the kind's to set */
	const char *metavar; /* "N", "FILE" (DEVOPT_UINT/STRING) */
	const char *choices; /* DEVOPT_CHOICE: "serial|virtio" */
	size_t has_offset;   /* DEVOPT_MAC: a bool set when given (0: none) */
};

/* A kind's properties: the table, and what to call the option in errors
 * ("--disk", "--device testdev"). */
struct devopt_table {
	const struct devopt *opts;
	unsigned n;
	const char *option;
};

/* One row per property (designated, so the table reads as what it says). */
#define DEVOPT_PATH_ROW(key_, what, T, f)                                                          \
	{                                                                                          \
		.key = (key_), .type = DEVOPT_PATH, .offset = offsetof(T, f), .metavar = (what)    \
	}
#define DEVOPT_KEYWORD_ROW(key_, meta, T, f)                                                       \
	{                                                                                          \
		.key = (key_), .type = DEVOPT_KEYWORD, .offset = offsetof(T, f), .metavar = (meta) \
	}
#define DEVOPT_CHOICE_ROW(key_, list, T, f)                                                        \
	{                                                                                          \
		.key = (key_), .type = DEVOPT_CHOICE, .offset = offsetof(T, f), .choices = (list)  \
	}
#define DEVOPT_FLAG_ROW(key_, T, f)                                                                \
	{                                                                                          \
		.key = (key_), .type = DEVOPT_FLAG, .offset = offsetof(T, f)                       \
	}
#define DEVOPT_UINT_ROW(key_, meta, lo, hi, T, f)                                                  \
	{                                                                                          \
		.key = (key_), .type = DEVOPT_UINT, .offset = offsetof(T, f), .min = (lo),         \
		.max = (hi), .metavar = (meta)                                                     \
	}
#define DEVOPT_STRING_ROW(key_, meta, T, f)                                                        \
	{                                                                                          \
		.key = (key_), .type = DEVOPT_STRING, .offset = offsetof(T, f), .metavar = (meta)  \
	}
#define DEVOPT_MAC_ROW(key_, T, f, given)                                                          \
	{                                                                                          \
		.key = (key_), .type = DEVOPT_MAC, .offset = offsetof(T, f),                       \
		.has_offset = offsetof(T, given)                                                   \
	}
#define DEVOPT_SLOT_ROW(key_)                                                                      \
	{                                                                                          \
		.key = (key_), .type = DEVOPT_SLOT                                                 \
	}

#define DEVOPT_TABLE(option_, ...)                                                                 \
	{                                                                                          \
		.opts = (const struct devopt[]){__VA_ARGS__},                                      \
		.n = sizeof((const struct devopt[]){__VA_ARGS__}) / sizeof(struct devopt),         \
		.option = option_                                                                  \
	}

/* Fills params (and spec->slot) from arg, which it may cut up (values
 * point into it). arg NULL: no value (--rng, --device testdev). 0, or -1
 * with one line that names the option and the property. */
int devopt_parse(const struct devopt_table *t, struct device_spec *spec, void *params, char *arg,
		 struct err *e);
/* The value's syntax from the table: "PATH[,ro][,direct][,queues=N]". */
void devopt_syntax(const struct devopt_table *t, char *out, size_t len);

#endif
