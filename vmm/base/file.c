#include "vmm/base/file.h"

#include "vmm/base/err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
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

int file_open_output(const char *what, const char *path, struct err *e)
{
	struct stat st;
	int nofollow = O_NOFOLLOW;
	if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
		if (st.st_uid != geteuid())
			return err_set(
			    e, ERR_INPUT,
			    "%s %s: a symbolic link another user owns (uid %u): not followed", what,
			    path, (unsigned)st.st_uid);
		nofollow = 0; /* ours: followed (e.g. /dev/stdout) */
	}
	/* With nofollow, a link put in place since lstat() makes open() fail. */
	int fd =
	    open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | nofollow, 0644);
	if (fd < 0) {
		int err = errno;
		/* ENXIO: a FIFO without a reader, or a unix socket (open(2)). */
		bool sock = err == ENXIO && stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
		return err_set(e, ERR_INPUT, "%s %s: %s", what, path,
			       sock	      ? "a socket, not a file"
			       : err == ENXIO ? "a FIFO nobody reads"
					      : strerror(err));
	}
	if (fstat(fd, &st) < 0 ||
	    !(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode))) {
		close(fd);
		return err_set(e, ERR_INPUT, "%s %s: not a regular file, FIFO or character device",
			       what, path);
	}
	if ((S_ISREG(st.st_mode) && ftruncate(fd, 0) < 0) || fcntl(fd, F_SETFL, 0) < 0) {
		err_set(e, ERR_INPUT, "%s %s: %s", what, path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

int file_write_output(const char *what, const char *path, const void *buf, size_t len,
		      struct err *e)
{
	int fd = file_open_output(what, path, e);
	if (fd < 0)
		return -1;
	const uint8_t *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err_set(e, ERR_INPUT, "%s %s: %s", what, path,
				n < 0 ? strerror(errno) : "short write");
			close(fd);
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	if (close(fd) < 0)
		return err_set(e, ERR_INPUT, "%s %s: %s", what, path, strerror(errno));
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
