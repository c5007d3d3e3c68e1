/* Reading the user's input files, with errors that name the file. */
#ifndef VMM_FILE_H
#define VMM_FILE_H

#include <stddef.h>
#include <stdint.h>

struct err;

/* Reads all of `path` (what names the option, e.g. "kernel") into a
 * malloc()ed buffer; refuses empty files and files above `max` bytes. */
int file_read_all(const char *what, const char *path, size_t max, uint8_t **buf, size_t *len,
		  struct err *e);

/* Whether `path` can be created or replaced later: not a directory, in a
 * directory that exists and may be written. Checked before anything is
 * made, so a bad command line leaves nothing on disk. */
int file_check_writable(const char *what, const char *path, struct err *e);

/* Opens an output the command line names (--console-log, --dump-dtb, a
 * dump's files, a device's samples) for writing, created 0644 and
 * truncated: never blocking (a FIFO without a reader is an error, not a
 * wait SIGTERM cannot end), only a regular file, a FIFO or a character
 * device, and never through a symbolic link another user owns (a root VMM
 * writing in /tmp must not be led onto another file). The fd blocks again
 * once open. -1 with e set. */
int file_open_output(const char *what, const char *path, struct err *e);
/* file_open_output(), then all of buf written and the file closed. */
int file_write_output(const char *what, const char *path, const void *buf, size_t len,
		      struct err *e);

#endif
