#include "vmm/options/option_table.h"

#include "vmm/base/err.h"
#include "vmm/options/options.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Slot 0 is the host bridge's (devices/pci/pci.h). */
#define SLOT_MIN 1
#define SLOT_MAX 31

static bool positional(enum devopt_type t)
{
	return t == DEVOPT_PATH || t == DEVOPT_KEYWORD || t == DEVOPT_CHOICE;
}

static void *field(void *params, size_t off)
{
	return (char *)params + off;
}

/* "ro, direct, queues=N": the properties, for an error. */
static void property_list(const struct devopt_table *t, char *out, size_t len)
{
	size_t pos = 0;
	out[0] = 0;
	for (unsigned i = 0; i < t->n && pos < len; i++) {
		const struct devopt *o = &t->opts[i];
		if (positional(o->type))
			continue;
		const char *meta = o->type == DEVOPT_FLAG   ? ""
				   : o->type == DEVOPT_MAC  ? "=XX:XX:XX:XX:XX:XX"
				   : o->type == DEVOPT_SLOT ? "=S"
							    : "=";
		int n = snprintf(out + pos, len - pos, "%s%s%s%s", pos ? ", " : "", o->key, meta,
				 (o->type == DEVOPT_UINT || o->type == DEVOPT_STRING) ? o->metavar
										      : "");
		pos += n > 0 ? (size_t)n : 0;
	}
}

void devopt_syntax(const struct devopt_table *t, char *out, size_t len)
{
	size_t pos = 0;
	out[0] = 0;
	for (unsigned i = 0; i < t->n && pos < len; i++) {
		const struct devopt *o = &t->opts[i];
		int n;
		switch (o->type) {
		case DEVOPT_PATH: n = snprintf(out + pos, len - pos, "%s", o->key); break;
		case DEVOPT_KEYWORD:
			n = snprintf(out + pos, len - pos, "%s[=%s]", o->key, o->metavar);
			break;
		case DEVOPT_CHOICE: n = snprintf(out + pos, len - pos, "%s", o->choices); break;
		case DEVOPT_FLAG: n = snprintf(out + pos, len - pos, "[,%s]", o->key); break;
		case DEVOPT_MAC:
			n = snprintf(out + pos, len - pos, "[,%s=XX:XX:XX:XX:XX:XX]", o->key);
			break;
		case DEVOPT_SLOT: n = snprintf(out + pos, len - pos, "[,%s=S]", o->key); break;
		default: n = snprintf(out + pos, len - pos, "[,%s=%s]", o->key, o->metavar); break;
		}
		pos += n > 0 ? (size_t)n : 0;
	}
}

static int parse_mac(const struct devopt_table *t, const struct devopt *o, const char *v,
		     void *params, struct err *e)
{
	unsigned m[6];
	char extra;
	if (sscanf(v, "%2x:%2x:%2x:%2x:%2x:%2x%c", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5],
		   &extra) != 6)
		return err_set(e, ERR_INPUT, "%s %s: '%s' is not a MAC address (XX:XX:XX:XX:XX:XX)",
			       t->option, o->key, v);
	if (m[0] & 1)
		return err_set(e, ERR_INPUT, "%s %s=%s: a multicast MAC cannot be a NIC's",
			       t->option, o->key, v);
	uint8_t *mac = field(params, o->offset);
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)m[i];
	if (o->has_offset)
		*(bool *)field(params, o->has_offset) = true;
	return 0;
}

/* One "key" or "key=value" item after the first. */
static int parse_property(const struct devopt_table *t, const char *named, struct device_spec *spec,
			  void *params, char *item, struct err *e)
{
	char *eq = strchr(item, '=');
	size_t klen = eq ? (size_t)(eq - item) : strlen(item);
	const char *v = eq ? eq + 1 : NULL;
	for (unsigned i = 0; i < t->n; i++) {
		const struct devopt *o = &t->opts[i];
		if (positional(o->type) || strlen(o->key) != klen || strncmp(o->key, item, klen))
			continue;
		if ((o->type == DEVOPT_FLAG) != !v)
			break; /* a flag with a value, or a property without one */
		char what[128];
		uint64_t n;
		snprintf(what, sizeof(what), "%s %s", t->option, o->key);
		switch (o->type) {
		case DEVOPT_FLAG: *(bool *)field(params, o->offset) = true; return 0;
		case DEVOPT_UINT:
			if (options_parse_u64(what, v, o->min, o->max, &n, e))
				return -1;
			*(unsigned *)field(params, o->offset) = (unsigned)n;
			return 0;
		case DEVOPT_STRING:
			if (!*v)
				return err_set(e, ERR_INPUT, "%s=: needs a value (%s)", what,
					       o->metavar);
			*(const char **)field(params, o->offset) = v;
			return 0;
		case DEVOPT_MAC: return parse_mac(t, o, v, params, e);
		case DEVOPT_SLOT:
			if (options_parse_u64(what, v, SLOT_MIN, SLOT_MAX, &n, e))
				return -1;
			spec->slot = (int)n;
			return 0;
		default: break;
		}
	}
	char list[160];
	property_list(t, list, sizeof(list));
	return err_set(e, ERR_INPUT, "%s: unknown property '%s' (%s)", named, item, list);
}

/* The first item, when the table starts with a positional one. */
static int parse_first(const struct devopt_table *t, const struct devopt *o, void *params,
		       char *item, struct err *e)
{
	switch (o->type) {
	case DEVOPT_PATH:
		if (!item || !*item)
			return err_set(e, ERR_INPUT, "%s needs a %s", t->option, o->metavar);
		*(const char **)field(params, o->offset) = item;
		return 0;
	case DEVOPT_KEYWORD: {
		size_t k = strlen(o->key);
		if (!item || strncmp(item, o->key, k) || (item[k] && item[k] != '='))
			return err_set(e, ERR_INPUT, "%s %s: only %s[=%s] is supported", t->option,
				       item ? item : "", o->key, o->metavar);
		*(const char **)field(params, o->offset) = item[k] == '=' ? item + k + 1 : NULL;
		return 0;
	}
	default: { /* DEVOPT_CHOICE */
		const char *c = o->choices;
		char list[96];
		size_t pos = 0;
		for (unsigned idx = 0; item && *c; idx++) {
			size_t len = strcspn(c, "|");
			if (strlen(item) == len && !strncmp(c, item, len)) {
				*(unsigned *)field(params, o->offset) = idx;
				return 0;
			}
			c += len + (c[len] == '|');
		}
		for (c = o->choices; *c && pos + 3 < sizeof(list); c++)
			pos += (size_t)snprintf(list + pos, sizeof(list) - pos, "%s",
						*c == '|' ? ", " : (char[]){*c, 0});
		return err_set(e, ERR_INPUT, "%s %s: use one of %s", t->option, item ? item : "",
			       list);
	}
	}
}

int devopt_parse(const struct devopt_table *t, struct device_spec *spec, void *params, char *arg,
		 struct err *e)
{
	char *save = NULL;
	bool first = t->n && positional(t->opts[0].type);
	/* strtok_r would skip an empty first item (",ro"): look at it first. */
	if (first && arg && *arg == ',')
		return parse_first(t, &t->opts[0], params, "", e);
	char *item = arg ? strtok_r(arg, ",", &save) : NULL;
	char named[128];
	snprintf(named, sizeof(named), "%s", t->option);
	if (first) {
		if (parse_first(t, &t->opts[0], params, item, e))
			return -1;
		/* The errors after a path name it: "--disk d.img: ...". */
		if (t->opts[0].type == DEVOPT_PATH)
			snprintf(named, sizeof(named), "%s %s", t->option, item);
		item = item ? strtok_r(NULL, ",", &save) : NULL;
	}
	for (; item; item = strtok_r(NULL, ",", &save))
		if (parse_property(t, named, spec, params, item, e))
			return -1;
	return 0;
}
