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

#endif
