#include "vmm/host/console.h"

#include "vmm/base/err.h"
#include "vmm/base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CTRL_A 0x01

void console_open(struct console *c)
{
	memset(c, 0, sizeof(*c));
	lock_init(&c->out_lock, "console output", LOCK_RANK_CONSOLE_OUT);
	c->out_fd = STDOUT_FILENO;
	c->in_fd = STDIN_FILENO;
	if (fcntl(c->in_fd, F_GETFD) < 0)
		c->in_fd = -1; /* no stdin at all (closed) */
	c->in_tty = c->in_fd >= 0 && isatty(c->in_fd);
	/* stdout and stderr on one terminal or file: the VMM's lines and the
	 * guest's share it. */
	struct stat o, e;
	c->out_shared = fstat(STDOUT_FILENO, &o) == 0 && fstat(STDERR_FILENO, &e) == 0 &&
			o.st_dev == e.st_dev && o.st_ino == e.st_ino;
}

int console_open_log(struct console *c, const char *path, struct err *e)
{
	int fd = file_open_output("--console-log", path, e);
	if (fd < 0)
		return -1;
	c->out_fd = fd;
	c->out_owned = true;
	c->out_shared = false;
	return 0;
}

void console_enter_raw(struct console *c)
{
	struct termios t;
	if (!c->in_tty || c->raw || tcgetattr(c->in_fd, &c->saved) < 0)
		return;
	t = c->saved;
	cfmakeraw(&t);
	t.c_oflag |= OPOST | ONLCR; /* keep our own diagnostics readable */
	if (tcsetattr(c->in_fd, TCSANOW, &t) == 0)
		c->raw = true;
}

void console_restore(struct console *c)
{
	if (c->raw) {
		tcsetattr(c->in_fd, TCSANOW, &c->saved);
		c->raw = false;
	}
}

void console_close(struct console *c)
{
	console_restore(c);
	if (c->out_owned && c->out_fd >= 0)
		close(c->out_fd);
	c->out_fd = -1;
}

/* True the first time the whole panic text has gone by. out_lock held. */
static bool console_watch_locked(struct console *c, uint8_t ch)
{
	lock_assert_held(&c->out_lock);
	static const char text[] = CONSOLE_PANIC_TEXT;
	/* The text's first letter occurs nowhere else in it, so on a mismatch
	 * the only possible restart is at that letter. */
	if ((uint8_t)text[c->panic_match] == ch)
		c->panic_match++;
	else
		c->panic_match = (ch == (uint8_t)text[0]) ? 1 : 0;
	if (c->panic_match < sizeof(text) - 1)
		return false;
	c->panic_match = 0;
	return !atomic_exchange(&c->panic_seen, true);
}

static void console_write_locked(struct console *c, const uint8_t *buf, size_t len)
{
	lock_assert_held(&c->out_lock);
	if (len)
		c->mid_line = buf[len - 1] != '\n';
	while (len > 0 && c->out_fd >= 0) {
		ssize_t n = write(c->out_fd, buf, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return; /* console gone (closed pipe): the guest keeps running */
		}
		buf += n;
		len -= (size_t)n;
	}
}

void console_output(void *ctx, const uint8_t *buf, size_t len)
{
	struct console *c = ctx;
	bool panic = false;
	lock_take(&c->out_lock);
	for (size_t i = 0; i < len; i++)
		panic |= console_watch_locked(c, buf[i]);
	console_write_locked(c, buf, len);
	lock_release(&c->out_lock);
	/* Outside the lock: the panic handler logs, and a log line asks for
	 * console_fresh_line(). */
	if (panic && c->on_panic)
		c->on_panic(c->on_panic_ctx);
}

bool console_fresh_line(struct console *c)
{
	lock_take(&c->out_lock);
	bool open_line = c->mid_line && c->out_shared;
	c->mid_line = c->mid_line && !open_line;
	lock_release(&c->out_lock);
	return open_line;
}

enum console_input_result console_filter_input(struct console *c, uint8_t *buf, size_t *n)
{
	uint8_t in[CONSOLE_INPUT_MAX];
	size_t out = 0, len = *n < sizeof(in) ? *n : sizeof(in);
	if (!c->in_tty)
		return CONSOLE_INPUT_DATA;
	/* Filter from a copy: an escape pending from the previous read expands
	 * to two bytes and would overrun the bytes still to be read. */
	memcpy(in, buf, len);
	for (size_t i = 0; i < len; i++) {
		uint8_t ch = in[i];
		if (c->escape_pending) {
			c->escape_pending = false;
			if (ch == 'x' || ch == 'X') {
				*n = out;
				return CONSOLE_INPUT_QUIT;
			}
			if (ch == CTRL_A) {
				buf[out++] = CTRL_A;
				continue;
			}
			/* Unknown escape: pass both through. */
			buf[out++] = CTRL_A;
			buf[out++] = ch;
			continue;
		}
		if (ch == CTRL_A) {
			c->escape_pending = true;
			continue;
		}
		buf[out++] = ch;
	}
	*n = out;
	return CONSOLE_INPUT_DATA;
}

enum console_input_result console_read_input(struct console *c, uint8_t *buf, size_t cap, size_t *n)
{
	ssize_t r;
	*n = 0;
	if (c->in_fd < 0)
		return CONSOLE_INPUT_EOF;
	/* Leave room for an escaped pair that expands to two bytes. */
	if (cap > CONSOLE_INPUT_MAX)
		cap = CONSOLE_INPUT_MAX;
	r = read(c->in_fd, buf, cap > 1 ? cap - 1 : cap);
	if (r < 0)
		return (errno == EINTR || errno == EAGAIN) ? CONSOLE_INPUT_DATA : CONSOLE_INPUT_EOF;
	if (r == 0)
		return CONSOLE_INPUT_EOF;
	*n = (size_t)r;
	return console_filter_input(c, buf, n);
}
