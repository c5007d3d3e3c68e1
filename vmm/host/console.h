/*
 * The host end of the serial console: guest output to stdout or a log
 * file (watched for "Kernel panic - not syncing"), host stdin to the
 * guest, in raw mode when stdin is a terminal (restored on every exit path
 * that returns through main). On a terminal, Ctrl-A x quits and Ctrl-A
 * Ctrl-A sends a Ctrl-A.
 */
#ifndef VMM_CONSOLE_H
#define VMM_CONSOLE_H

#include "vmm/base/lock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <termios.h>

struct err;

#define CONSOLE_PANIC_TEXT "Kernel panic - not syncing"
#define CONSOLE_INPUT_MAX  1024 /* bytes read from the host per call */

struct console {
	int out_fd;
	bool out_owned;
	int in_fd; /* -1: no input */
	bool in_tty, raw;
	struct termios saved;
	bool escape_pending;
	/* Guest output comes from vCPU threads (UART) and the I/O thread
	 * (virtio-console): one writer at a time, so the panic watch and the
	 * line state see one stream. */
	struct vmm_lock out_lock;
	bool mid_line;	      /* the last byte out was not a newline */
	bool out_shared;      /* guest output and the log go to one place */
	unsigned panic_match; /* bytes of CONSOLE_PANIC_TEXT matched so far */
	atomic_bool panic_seen;
	void (*on_panic)(void *ctx);
	void *on_panic_ctx;
};

/* Guest output to stdout, host input from stdin. */
void console_open(struct console *c);
/* Guest output to a file instead (--console-log), made once the machine
 * is built, so a bad command line leaves no file behind. */
int console_open_log(struct console *c, const char *path, struct err *e);
/* Puts a terminal stdin into raw mode; no-op otherwise. */
void console_enter_raw(struct console *c);
void console_restore(struct console *c);
void console_close(struct console *c);
/* Whether a VMM message about to go to stderr must first end a guest line
 * left open on the same terminal (stdout and stderr one place); the guest's
 * own stream is never changed. The log asks before each message. */
bool console_fresh_line(struct console *c);
/* Where host console input goes (the UART, or a virtio-console): takes
 * what it can, returns how much. */
struct console_input {
	size_t (*receive)(void *ctx, const uint8_t *buf, size_t len);
	void *ctx;
};

/* char_sink callback: guest output. */
void console_output(void *ctx, const uint8_t *buf, size_t len);

enum console_input_result { CONSOLE_INPUT_DATA, CONSOLE_INPUT_EOF, CONSOLE_INPUT_QUIT };
/* Reads host input; *n bytes for the guest are left in buf, which must
 * hold min(cap, CONSOLE_INPUT_MAX) bytes. */
enum console_input_result console_read_input(struct console *c, uint8_t *buf, size_t cap,
					     size_t *n);
/* Filters escape sequences (exposed for tests). */
enum console_input_result console_filter_input(struct console *c, uint8_t *buf, size_t *n);

#endif
