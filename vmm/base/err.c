#include "vmm/base/err.h"

#include <stdio.h>
#include <string.h>

int err_vset(struct err *e, enum err_kind kind, const char *fmt, va_list ap)
{
	if (!e || e->msg[0])
		return -1;
	e->kind = kind;
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	return -1;
}

int err_set(struct err *e, enum err_kind kind, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	err_vset(e, kind, fmt, ap);
	va_end(ap);
	return -1;
}

int err_prefix(struct err *e, const char *fmt, ...)
{
	char buf[sizeof(e->msg)];
	va_list ap;
	if (!e)
		return -1;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n + 2 >= sizeof(buf))
		return -1;
	/* "prefix: old message", cut at the buffer's end. */
	buf[n++] = ':';
	buf[n++] = ' ';
	size_t room = sizeof(buf) - (size_t)n - 1, old = strlen(e->msg);
	memcpy(buf + n, e->msg, old < room ? old : room);
	buf[n + (old < room ? old : room)] = 0;
	memcpy(e->msg, buf, sizeof(buf));
	return -1;
}
