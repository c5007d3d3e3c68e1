#include "file.h"

#include "err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int file_read_all(const char *what, const char *path, size_t max, uint8_t **buf, size_t *len,
		  struct err *e)
{
	struct stat st;
	/* O_NONBLOCK: opening a FIFO or a tty must not wait for a writer (and
	 * a blocked open would not see SIGTERM); the type is checked before
	 * the first read. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return err_set(e, ERR_INPUT, "cannot open %s '%s': %s", what, path,
			       strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return err_set(e, ERR_INPUT, "%s '%s' is not a regular file", what, path);
	}
	if (fcntl(fd, F_SETFL, 0) < 0) {
		close(fd);
		return err_set(e, ERR_HOST, "%s '%s': fcntl: %s", what, path, strerror(errno));
	}
	if (st.st_size == 0 || (uint64_t)st.st_size > max) {
		close(fd);
		return err_set(e, ERR_INPUT, "%s '%s' is %s (%lld bytes)", what, path,
			       st.st_size == 0 ? "empty" : "too large", (long long)st.st_size);
	}
	size_t size = (size_t)st.st_size, done = 0;
	uint8_t *p = malloc(size);
	if (!p) {
		close(fd);
		return err_set(e, ERR_HOST, "out of memory reading %s '%s'", what, path);
	}
	while (done < size) {
		ssize_t n = read(fd, p + done, size - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int err = n < 0 ? errno : EIO;
			free(p);
			close(fd);
			return err_set(e, ERR_INPUT, "cannot read %s '%s': %s", what, path,
				       strerror(err));
		}
		done += (size_t)n;
	}
	close(fd);
	*buf = p;
	*len = size;
	return 0;
}

int file_check_writable(const char *what, const char *path, struct err *e)
{
	struct stat st;
	if (!*path)
		return err_set(e, ERR_INPUT, "%s: empty path", what);
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return err_set(e, ERR_INPUT, "%s %s: is a directory", what, path);
	const char *slash = strrchr(path, '/');
	char dir[4096];
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (access(dir, W_OK | X_OK) < 0)
		return err_set(e, ERR_INPUT, "%s %s: cannot write in %s: %s", what, path, dir,
			       strerror(errno));
	if (access(path, F_OK) == 0 && access(path, W_OK) < 0)
		return err_set(e, ERR_INPUT, "%s %s: %s", what, path, strerror(errno));
	return 0;
}
