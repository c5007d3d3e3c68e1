#include "vmm/options/option_table.h"

#include "vmm/base/err.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const on_off[] = {"on", "off"};

static void *field(void *base, const struct opt_row *r)
{
	return (char *)base + r->offset;
}

/* An unsigned, int, bool or enum field of r->size bytes. */
static void store_int(void *base, const struct opt_row *r, int64_t v)
{
	void *f = field(base, r);
	switch (r->size) {
	case 1: *(uint8_t *)f = (uint8_t)v; break;
	case 2: *(uint16_t *)f = (uint16_t)v; break;
	case 4: *(uint32_t *)f = (uint32_t)v; break;
	default: *(uint64_t *)f = (uint64_t)v; break;
	}
}

static int64_t load_int(void *base, const struct opt_row *r)
{
	const void *f = field(base, r);
	switch (r->size) {
	case 1: return *(const uint8_t *)f;
	case 2: return *(const uint16_t *)f;
	case 4: return *(const int32_t *)f;
	default: return *(const int64_t *)f;
	}
}

/* The types whose field is a whole number, with the row's default. */
static bool has_default(enum opt_type t)
{
	return t == OPT_FLAG || t == OPT_COUNT || t == OPT_UINT || t == OPT_BOOL || t == OPT_ENUM;
}

void opt_defaults(const struct opt_row *rows, unsigned n, void *base)
{
	for (unsigned i = 0; i < n; i++)
		if (has_default(rows[i].type))
			store_int(base, &rows[i], rows[i].dflt);
}

bool opt_takes_value(const struct opt_row *r)
{
	return r->type != OPT_FLAG && r->type != OPT_COUNT;
}

int opt_parse_u64(const char *what, const char *s, uint64_t min, uint64_t max, uint64_t *out,
		  struct err *e)
{
	char *end;
	errno = 0;
	if (!*s || *s == '-')
		goto bad;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end)
		goto bad;
	if (v < min || v > max)
		return err_set(e, ERR_INPUT, "%s %s: must be between %llu and %llu", what, s,
			       (unsigned long long)min, (unsigned long long)max);
	*out = v;
	return 0;
bad:
	return err_set(e, ERR_INPUT, "%s: '%s' is not a whole number", what, s);
}

void opt_names_list(const char *const *names, unsigned n, char *out, size_t len)
{
	size_t pos = 0;
	out[0] = 0;
	for (unsigned i = 0; i < n && pos < len; i++)
		if (names[i])
			pos += (size_t)snprintf(out + pos, len - pos, "%s%s", pos ? ", " : "",
						names[i]);
}

int opt_not_one_of(const char *what, const char *value, const char *const *names, unsigned n,
		   struct err *e)
{
	char list[256];
	opt_names_list(names, n, list, sizeof(list));
	if (!*value)
		return err_set(e, ERR_INPUT, "%s: needs a value, one of %s", what, list);
	return err_set(e, ERR_INPUT, "%s %s: use one of %s", what, value, list);
}

/* The index of `value` in names, or -1 with the error naming them all. */
static int pick(const char *what, const char *value, const char *const *names, unsigned n,
		struct err *e)
{
	for (unsigned i = 0; i < n; i++)
		if (names[i] && !strcmp(names[i], value))
			return (int)i;
	return opt_not_one_of(what, value, names, n, e);
}

/* ---- one parser per type ---- */

static int parse_flag(const struct opt_row *r, const char *what, char *v, void *base,
		      const void *ctx, struct err *e)
{
	(void)what, (void)v, (void)ctx, (void)e;
	store_int(base, r, 1);
	return 0;
}

static int parse_count(const struct opt_row *r, const char *what, char *v, void *base,
		       const void *ctx, struct err *e)
{
	(void)what, (void)v, (void)ctx, (void)e;
	store_int(base, r, load_int(base, r) + 1);
	return 0;
}

static int parse_uint(const struct opt_row *r, const char *what, char *v, void *base,
		      const void *ctx, struct err *e)
{
	(void)ctx;
	uint64_t n;
	if (opt_parse_u64(what, v, r->min, r->max, &n, e))
		return -1;
	store_int(base, r, (int64_t)n);
	return 0;
}

static int parse_double(const struct opt_row *r, const char *what, char *v, void *base,
			const void *ctx, struct err *e)
{
	(void)ctx;
	char *end;
	errno = 0;
	double d = strtod(v, &end);
	if (errno || *end || !*v || !isfinite(d))
		return err_set(e, ERR_INPUT, "%s: '%s' is not a number", what, v);
	if (d <= r->dmin || d > r->dmax)
		return err_set(e, ERR_INPUT, "%s %s: must be above %.15g and at most %.15g", what,
			       v, r->dmin, r->dmax);
	*(double *)field(base, r) = d;
	return 0;
}

static int parse_string(const struct opt_row *r, const char *what, char *v, void *base,
			const void *ctx, struct err *e)
{
	(void)ctx;
	if (r->type == OPT_PATH && !*v)
		return err_set(e, ERR_INPUT, "%s: empty path", what);
	if (r->nonempty && !*v)
		return err_set(e, ERR_INPUT, "%s: needs a value (%s)", what, r->metavar);
	*(const char **)field(base, r) = v;
	return 0;
}

static int parse_bool(const struct opt_row *r, const char *what, char *v, void *base,
		      const void *ctx, struct err *e)
{
	(void)ctx;
	int i = pick(what, v, on_off, 2, e);
	if (i < 0)
		return -1;
	store_int(base, r, i == 0);
	return 0;
}

static int parse_enum(const struct opt_row *r, const char *what, char *v, void *base,
		      const void *ctx, struct err *e)
{
	(void)ctx;
	int i = pick(what, v, r->names, r->nnames, e);
	if (i < 0)
		return -1;
	store_int(base, r, i);
	return 0;
}

static int parse_mac(const struct opt_row *r, const char *what, char *v, void *base,
		     const void *ctx, struct err *e)
{
	(void)ctx;
	unsigned m[6];
	char extra;
	if (sscanf(v, "%2x:%2x:%2x:%2x:%2x:%2x%c", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5],
		   &extra) != 6)
		return err_set(e, ERR_INPUT, "%s: '%s' is not a MAC address (XX:XX:XX:XX:XX:XX)",
			       what, v);
	if (m[0] & 1) /* the I/G bit (IEEE 802, 8.2): a group address */
		return err_set(e, ERR_INPUT, "%s=%s: a multicast MAC cannot be a NIC's", what, v);
	uint8_t *mac = field(base, r);
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)m[i];
	return 0;
}

/* what is the option alone ("--net"): the keyword is its first item. */
static int parse_keyword(const struct opt_row *r, const char *what, char *v, void *base,
			 const void *ctx, struct err *e)
{
	(void)ctx;
	size_t k = strlen(r->key);
	if (strncmp(v, r->key, k) || (v[k] && v[k] != '='))
		return err_set(e, ERR_INPUT, "%s %s: only %s[=%s] is supported", what, v, r->key,
			       r->metavar);
	*(const char **)field(base, r) = v[k] == '=' ? v + k + 1 : NULL;
	return 0;
}

static int parse_custom(const struct opt_row *r, const char *what, char *v, void *base,
			const void *ctx, struct err *e)
{
	return r->parse(r, what, v, base, ctx, e);
}

static const opt_parse_fn parsers[] = {
    [OPT_FLAG] = parse_flag,	   [OPT_COUNT] = parse_count,	[OPT_UINT] = parse_uint,
    [OPT_DOUBLE] = parse_double,   [OPT_STRING] = parse_string, [OPT_PATH] = parse_string,
    [OPT_BOOL] = parse_bool,	   [OPT_ENUM] = parse_enum,	[OPT_MAC] = parse_mac,
    [OPT_KEYWORD] = parse_keyword, [OPT_CUSTOM] = parse_custom,
};

int opt_parse(const struct opt_row *r, const char *what, char *value, void *base, const void *ctx,
	      struct err *e)
{
	if (parsers[r->type](r, what, value, base, ctx, e))
		return -1;
	if (r->given)
		*(bool *)((char *)base + r->given) = true;
	return 0;
}

/* ---- syntax ---- */

const char *opt_metavar(const struct opt_row *r, char *buf, size_t len)
{
	if (r->type == OPT_BOOL || r->type == OPT_ENUM) {
		const char *const *names = r->type == OPT_BOOL ? on_off : r->names;
		unsigned n = r->type == OPT_BOOL ? 2 : r->nnames;
		size_t pos = 0;
		buf[0] = 0;
		for (unsigned i = 0; i < n && pos < len; i++)
			if (names[i])
				pos += (size_t)snprintf(buf + pos, len - pos, "%s%s",
							pos ? "|" : "", names[i]);
		return buf;
	}
	if (r->type == OPT_KEYWORD) {
		snprintf(buf, len, "%s[=%s]", r->key, r->metavar);
		return buf;
	}
	if (r->type == OPT_MAC)
		return "XX:XX:XX:XX:XX:XX";
	return opt_takes_value(r) ? r->metavar : NULL;
}

/* "queues=N", "ro": a property as written after the first item. */
static void prop_item(const struct opt_row *r, char *out, size_t len)
{
	char meta[96];
	const char *m = opt_metavar(r, meta, sizeof(meta));
	snprintf(out, len, "%s%s%s", r->key, m ? "=" : "", m ? m : "");
}

void opt_props_syntax(const struct opt_table *t, char *out, size_t len)
{
	size_t pos = 0;
	out[0] = 0;
	for (unsigned i = 0; i < t->n && pos < len; i++) {
		const struct opt_row *r = &t->rows[i];
		char item[128], meta[128];
		if (r->first)
			snprintf(item, sizeof(item), "%s", opt_metavar(r, meta, sizeof(meta)));
		else
			prop_item(r, item, sizeof(item));
		pos += (size_t)snprintf(out + pos, len - pos,
					r->first      ? "%s"
					: r->required ? ",%s"
						      : "[,%s]",
					item);
	}
}

/* ---- property lists ---- */

/* "ro, direct, queues=N": the properties, for an error. */
static void property_list(const struct opt_table *t, char *out, size_t len)
{
	size_t pos = 0;
	out[0] = 0;
	for (unsigned i = 0; i < t->n && pos < len; i++) {
		char item[128];
		if (t->rows[i].first)
			continue;
		prop_item(&t->rows[i], item, sizeof(item));
		pos += (size_t)snprintf(out + pos, len - pos, "%s%s", pos ? ", " : "", item);
	}
}

/* One "key" or "key=value" item after the first; `named` says where in
 * the errors about the item itself ("--disk d.img"). */
static int parse_property(const struct opt_table *t, const char *what, const char *named,
			  char *item, void *base, struct err *e)
{
	char *eq = strchr(item, '=');
	size_t klen = eq ? (size_t)(eq - item) : strlen(item);
	for (unsigned i = 0; i < t->n; i++) {
		const struct opt_row *r = &t->rows[i];
		if (r->first || strlen(r->key) != klen || strncmp(r->key, item, klen))
			continue;
		if (opt_takes_value(r) != !!eq)
			break; /* a flag with a value, or a property without one */
		char key_what[128];
		snprintf(key_what, sizeof(key_what), "%s %s", what, r->key);
		return opt_parse(r, key_what, eq ? eq + 1 : NULL, base, NULL, e);
	}
	char list[256];
	property_list(t, list, sizeof(list));
	return err_set(e, ERR_INPUT, "%s: unknown property '%s' (%s)", named, item, list);
}

/* The first item; a missing one is "--disk needs a path". */
static int parse_first(const struct opt_row *r, const char *what, char *item, void *base,
		       struct err *e)
{
	if (r->type == OPT_PATH && (!item || !*item))
		return err_set(e, ERR_INPUT, "%s needs a %s", what, r->key);
	return opt_parse(r, what, item ? item : "", base, NULL, e);
}

/* A required property that was not given (its string still NULL). */
static int check_required(const struct opt_table *t, const char *named, void *base, struct err *e)
{
	for (unsigned i = 0; i < t->n; i++) {
		const struct opt_row *r = &t->rows[i];
		if (r->required && !*(const char **)field(base, r))
			return err_set(e, ERR_INPUT, "%s: needs %s=%s", named, r->key, r->metavar);
	}
	return 0;
}

int opt_parse_props(const struct opt_table *t, const char *what, char *arg, void *base,
		    struct err *e)
{
	char *save = NULL;
	bool first = t->n && t->rows[0].first;
	/* strtok_r would skip an empty first item (",ro"): look at it first. */
	if (first && arg && *arg == ',')
		return parse_first(&t->rows[0], what, "", base, e);
	char *item = arg ? strtok_r(arg, ",", &save) : NULL;
	char named[128];
	snprintf(named, sizeof(named), "%s", what);
	if (first) {
		if (parse_first(&t->rows[0], what, item, base, e))
			return -1;
		/* The errors after a path name it: "--disk d.img: ...". */
		if (t->rows[0].type == OPT_PATH)
			snprintf(named, sizeof(named), "%s %s", what, item);
		item = item ? strtok_r(NULL, ",", &save) : NULL;
	}
	for (; item; item = strtok_r(NULL, ",", &save))
		if (parse_property(t, what, named, item, base, e))
			return -1;
	return check_required(t, named, base, e);
}

/* ---- --help ---- */

void opt_print_help_line(FILE *out, char short_name, const char *key, const char *metavar,
			 const char *help)
{
	enum { COL = 24, WIDTH = 80 };
	const char *sp = metavar ? " " : "", *m = metavar ? metavar : "";
	int used = short_name ? fprintf(out, "  -%c, --%s%s%s", short_name, key, sp, m)
			      : fprintf(out, "      --%s%s%s", key, sp, m);
	const char *p = help ? help : "";
	if (used > COL - 2 || !*p) {
		fputc('\n', out);
		used = 0;
	}
	while (*p) {
		fprintf(out, "%*s", COL - used, "");
		int room = WIDTH - COL, len = (int)strlen(p);
		if (len > room) {
			len = room;
			while (len > 0 && p[len] != ' ')
				len--;
		}
		fprintf(out, "%.*s\n", len, p);
		p += len;
		while (*p == ' ')
			p++;
		used = 0;
	}
}
