#include "log.h"

#include <stdarg.h>

void log_init(struct log *l, enum log_level level, FILE *out)
{
	l->level = level;
	l->out = out;
	l->crlf = 0;
	pthread_mutex_init(&l->lock, NULL);
}

void log_msg(struct log *l, enum log_level level, const char *fmt, ...)
{
	static const char *const names[] = {"error", "warning", "info", "debug"};
	va_list ap;
	if (!l || level > l->level || !l->out)
		return;
	pthread_mutex_lock(&l->lock);
	fprintf(l->out, "vmm: %s: ", names[level]);
	va_start(ap, fmt);
	vfprintf(l->out, fmt, ap);
	va_end(ap);
	fputs(l->crlf ? "\r\n" : "\n", l->out);
	fflush(l->out);
	pthread_mutex_unlock(&l->lock);
}
