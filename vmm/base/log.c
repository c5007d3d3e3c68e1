#include "vmm/base/log.h"

#include <stdarg.h>

void log_init(struct log *l, enum log_level level, FILE *out)
{
	l->level = level;
	l->out = out;
	l->crlf = 0;
	l->needs_break = NULL;
	lock_init(&l->lock, "log", LOCK_RANK_LOG);
}

static void log_vmsg(struct log *l, enum log_level level, const char *fmt, va_list ap);

void log_guest_warn(struct log *l, unsigned *count, const char *fmt, ...)
{
	va_list ap;
	unsigned n = __atomic_fetch_add(count, 1, __ATOMIC_RELAXED);
	if (n < LOG_GUEST_LIMIT) {
		va_start(ap, fmt);
		log_vmsg(l, LOG_WARN, fmt, ap);
		va_end(ap);
	} else if (n == LOG_GUEST_LIMIT) {
		log_msg(l, LOG_WARN,
			"(further warnings of this kind from the guest are not shown)");
	}
}

void log_msg(struct log *l, enum log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vmsg(l, level, fmt, ap);
	va_end(ap);
}

static void log_vmsg(struct log *l, enum log_level level, const char *fmt, va_list ap)
{
	static const char *const names[] = {"error", "warning", "info", "debug"};
	if (!l || level > l->level || !l->out)
		return;
	bool brk = l->needs_break && l->needs_break(l->needs_break_ctx);
	lock_take(&l->lock);
	if (brk)
		fputs(l->crlf ? "\r\n" : "\n", l->out);
	fprintf(l->out, "vmm: %s: ", names[level]);
	vfprintf(l->out, fmt, ap);
	fputs(l->crlf ? "\r\n" : "\n", l->out);
	fflush(l->out);
	lock_release(&l->lock);
}
