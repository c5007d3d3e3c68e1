/*
 * The emulated host's command server (README "Without /dev/kvm").
 *
 * It runs inside the emulated KVM host (QEMU TCG with nested SVM), started
 * by its /init (guests/emuhost/init.sh) once the box's root is mounted at
 * ROOT over 9p. It chroots there and serves one command per TCP connection
 * (QEMU's user network forwards a loopback port of the box to it): the
 * command runs with the caller's argv, working directory, environment,
 * uid/gid and terminal, its stdin/stdout/stderr and signals relayed over
 * the connection, and its wait status sent back.
 *
 * Frames both ways: type (1 byte), length (4 bytes, big-endian), payload.
 *   box -> host: 'H' hello (token, uid, gid, groups, flags, rows, cols,
 *                 cwd, argv, env: see parse_hello), once, first;
 *                'I' stdin bytes (empty: end of input); 'S' a signal (4 bytes);
 *                'W' the terminal's size (rows, cols: 2 x 2 bytes).
 *   host -> box: 'O' stdout bytes, 'E' stderr bytes, 'X' wait status
 *                (4 bytes), 'F' why the command could not start (text).
 * A connection that closes before 'X' is a box that went away: the
 * command's process group gets SIGTERM, then SIGKILL 10 s later.
 *
 * Every 2 s the agent writes "emuhost: alive N" on the host's console: the
 * box's watchdog takes a host that stops saying so as frozen.
 *
 * Static (no NSS, no dynamic loader): it runs before and after the chroot.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define MAX_FRAME    (1u << 20)
#define MAX_ARGS     4096
#define MAX_GROUPS   64
#define FLAG_TTY_IN  1u
#define FLAG_TTY_OUT 2u
#define FLAG_TTY_ERR 4u

extern char **environ;
static const char *token;

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "emuhost agent: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int read_all(int fd, void *buf, size_t len)
{
	char *p = buf;
	while (len) {
		ssize_t n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int send_frame(int fd, char type, const void *data, uint32_t len)
{
	unsigned char hdr[5] = {(unsigned char)type, (unsigned char)(len >> 24),
				(unsigned char)(len >> 16), (unsigned char)(len >> 8),
				(unsigned char)len};
	if (write_all(fd, hdr, sizeof(hdr)))
		return -1;
	return len ? write_all(fd, data, len) : 0;
}

static int send_u32(int fd, char type, uint32_t v)
{
	unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
			      (unsigned char)(v >> 8), (unsigned char)v};
	return send_frame(fd, type, b, 4);
}

static uint32_t get_u32(const unsigned char *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* One frame into buf (at most MAX_FRAME bytes); -1 on a short read or an
 * oversized frame. */
static int recv_frame(int fd, char *type, char *buf, uint32_t *len)
{
	unsigned char hdr[5];
	if (read_all(fd, hdr, sizeof(hdr)))
		return -1;
	*type = (char)hdr[0];
	*len = get_u32(hdr + 1);
	if (*len > MAX_FRAME)
		return -1;
	return *len ? read_all(fd, buf, *len) : 0;
}

struct hello {
	uid_t uid;
	gid_t gid;
	gid_t groups[MAX_GROUPS];
	int ngroups;
	unsigned flags;
	unsigned short rows, cols;
	const char *cwd;
	char *argv[MAX_ARGS + 1];
	char *envp[MAX_ARGS + 1];
};

/* The field at *p, moving *p past its NUL; NULL at the end. */
static char *next_field(char **p, char *end)
{
	char *f = *p;
	if (f >= end)
		return NULL;
	*p += strlen(f) + 1; /* the payload ends with a NUL: within end */
	return f;
}

/* The hello payload: NUL-terminated fields, in order: token, uid, gid,
 * group count, each group, flags, rows, cols, cwd, argc, each argument,
 * envc, each NAME=VALUE. The payload must end with a NUL. */
static int parse_hello(char *p, uint32_t len, struct hello *h, const char **why)
{
	char *end = p + len;
	char *f[4 + MAX_GROUPS];
	if (!len || end[-1] != '\0') {
		*why = "malformed hello";
		return -1;
	}
#define NEXT() next_field(&p, end)
	char *tok = NEXT();
	if (!tok || strcmp(tok, token)) {
		*why = "wrong token";
		return -1;
	}
	for (int i = 0; i < 3; i++)
		if (!(f[i] = NEXT()))
			goto bad;
	h->uid = (uid_t)strtoul(f[0], NULL, 10);
	h->gid = (gid_t)strtoul(f[1], NULL, 10);
	h->ngroups = atoi(f[2]);
	if (h->ngroups < 0 || h->ngroups > MAX_GROUPS)
		goto bad;
	for (int i = 0; i < h->ngroups; i++) {
		char *g = NEXT();
		if (!g)
			goto bad;
		h->groups[i] = (gid_t)strtoul(g, NULL, 10);
	}
	for (int i = 0; i < 3; i++)
		if (!(f[i] = NEXT()))
			goto bad;
	h->flags = (unsigned)strtoul(f[0], NULL, 10);
	h->rows = (unsigned short)strtoul(f[1], NULL, 10);
	h->cols = (unsigned short)strtoul(f[2], NULL, 10);
	if (!(h->cwd = NEXT()))
		goto bad;
	char **lists[2] = {h->argv, h->envp};
	for (int l = 0; l < 2; l++) {
		char *n = NEXT();
		if (!n)
			goto bad;
		long cnt = strtol(n, NULL, 10);
		if (cnt < 0 || cnt > MAX_ARGS || (l == 0 && cnt == 0))
			goto bad;
		for (long i = 0; i < cnt; i++)
			if (!(lists[l][i] = NEXT()))
				goto bad;
		lists[l][cnt] = NULL;
	}
#undef NEXT
	return 0;
bad:
	*why = "malformed hello";
	return -1;
}

static volatile sig_atomic_t child_exited;

static void on_sigchld(int sig)
{
	(void)sig;
	child_exited = 1;
}

/* The child side: credentials, directory, descriptors, exec. */
static void exec_command(const struct hello *h, int in, int out, int errfd, int tty, int report)
{
	setsid();
	if (tty >= 0)
		ioctl(tty, TIOCSCTTY, 0);
	dup2(in, 0);
	dup2(out, 1);
	dup2(errfd, 2);
	const char *why = NULL;
	if (setgroups((size_t)h->ngroups, h->groups) < 0 || setgid(h->gid) < 0 ||
	    setuid(h->uid) < 0)
		why = "cannot take the caller's uid/gid";
	else if (chdir(h->cwd) < 0)
		why = "cannot enter the working directory";
	if (!why) {
		signal(SIGPIPE, SIG_DFL);
		signal(SIGCHLD, SIG_DFL);
		environ = (char **)h->envp; /* execvp searches the caller's PATH */
		execvp(h->argv[0], h->argv);
		why = "cannot execute";
	}
	char msg[512];
	int n = snprintf(msg, sizeof(msg), "%s %s: %s", why,
			 strcmp(why, "cannot enter the working directory") ? h->argv[0] : h->cwd,
			 strerror(errno));
	if (write(report, msg, (size_t)n) < 0)
		_exit(127);
	_exit(127);
}

/* One connection, in a process of its own. */
static void serve(int sock)
{
	static char buf[MAX_FRAME];
	struct hello h;
	char type;
	uint32_t len;
	const char *why = NULL;

	memset(&h, 0, sizeof(h));
	if (recv_frame(sock, &type, buf, &len) || type != 'H')
		_exit(1);
	if (parse_hello(buf, len, &h, &why)) {
		send_frame(sock, 'F', why, (uint32_t)strlen(why));
		_exit(1);
	}
	/* Each of the caller's descriptors that is a terminal is the slave of
	 * one pty here; the others are pipes. */
	int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, rep[2];
	int ptm = -1, pts = -1;
	if (h.flags & (FLAG_TTY_IN | FLAG_TTY_OUT | FLAG_TTY_ERR)) {
		struct winsize ws = {.ws_row = h.rows, .ws_col = h.cols};
		if (openpty(&ptm, &pts, NULL, NULL, &ws) < 0) {
			why = "cannot open a pty";
			send_frame(sock, 'F', why, (uint32_t)strlen(why));
			_exit(1);
		}
		/* The command gets the slave as its 0, 1 or 2 only. */
		fcntl(ptm, F_SETFD, FD_CLOEXEC);
		fcntl(pts, F_SETFD, FD_CLOEXEC);
	}
	if ((!(h.flags & FLAG_TTY_IN) && pipe2(in, O_CLOEXEC)) ||
	    (!(h.flags & FLAG_TTY_OUT) && pipe2(out, O_CLOEXEC)) ||
	    (!(h.flags & FLAG_TTY_ERR) && pipe2(err, O_CLOEXEC)) || pipe2(rep, O_CLOEXEC))
		_exit(1);
	struct sigaction sa = {.sa_handler = on_sigchld};
	sigaction(SIGCHLD, &sa, NULL);
	pid_t pid = fork();
	if (pid < 0)
		_exit(1);
	if (pid == 0) {
		close(sock);
		exec_command(&h, h.flags & FLAG_TTY_IN ? pts : in[0],
			     h.flags & FLAG_TTY_OUT ? pts : out[1],
			     h.flags & FLAG_TTY_ERR ? pts : err[1], pts, rep[1]);
	}
	close(rep[1]);
	if (pts >= 0)
		close(pts);
	if (in[0] >= 0)
		close(in[0]);
	if (out[1] >= 0)
		close(out[1]);
	if (err[1] >= 0)
		close(err[1]);
	/* Did it start? The report pipe closes on exec. */
	char msg[512];
	ssize_t mn;
	do
		mn = read(rep[0], msg, sizeof(msg));
	while (mn < 0 && errno == EINTR);
	close(rep[0]);
	if (mn > 0) {
		send_frame(sock, 'F', msg, (uint32_t)mn);
		waitpid(pid, NULL, 0);
		_exit(1);
	}
	/* stdin goes to the pty master when stdin is the terminal. */
	int in_fd = h.flags & FLAG_TTY_IN ? ptm : in[1];
	/* Output sources: the pty (as stdout, or stderr when only that is a
	 * terminal), the pipes. */
	struct {
		int fd;
		char type;
	} src[3];
	int nsrc = 0;
	if (ptm >= 0)
		src[nsrc++] = (typeof(src[0])){ptm, h.flags & FLAG_TTY_OUT   ? 'O'
						    : h.flags & FLAG_TTY_ERR ? 'E'
									     : 'O'};
	if (out[0] >= 0)
		src[nsrc++] = (typeof(src[0])){out[0], 'O'};
	if (err[0] >= 0)
		src[nsrc++] = (typeof(src[0])){err[0], 'E'};
	int status = -1;
	int sock_open = 1;
	struct timespec kill_at = {0}, drain_until = {0};
	for (;;) {
		if (child_exited && status < 0) {
			child_exited = 0;
			if (waitpid(pid, &status, WNOHANG) != pid)
				status = -1;
			else {
				clock_gettime(CLOCK_MONOTONIC, &drain_until);
				drain_until.tv_sec += 2; /* output of what it left behind */
			}
		}
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		int open_src = 0;
		for (int i = 0; i < nsrc; i++)
			open_src += src[i].fd >= 0;
		if (status >= 0 &&
		    (!open_src || now.tv_sec > drain_until.tv_sec ||
		     (now.tv_sec == drain_until.tv_sec && now.tv_nsec >= drain_until.tv_nsec)))
			break;
		if (kill_at.tv_sec && now.tv_sec >= kill_at.tv_sec && status < 0) {
			kill(-pid, SIGKILL);
			kill_at.tv_sec = 0;
		}
		struct pollfd pfd[4];
		int n = 0;
		for (int i = 0; i < nsrc; i++)
			pfd[n++] = (struct pollfd){.fd = src[i].fd, .events = POLLIN};
		pfd[n++] = (struct pollfd){.fd = sock_open ? sock : -1, .events = POLLIN};
		int r = poll(pfd, (nfds_t)n, 200);
		if (r < 0 && errno != EINTR)
			break;
		if (r <= 0)
			continue;
		for (int i = 0; i < nsrc; i++) {
			if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t got = read(src[i].fd, buf, 65536);
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0) { /* EOF (a pty's last writer gone reads EIO) */
				if (src[i].fd == ptm)
					in_fd = in_fd == ptm ? -1 : in_fd;
				close(src[i].fd);
				src[i].fd = -1;
				continue;
			}
			if (sock_open && send_frame(sock, src[i].type, buf, (uint32_t)got))
				sock_open = 0;
		}
		if (sock_open && (pfd[n - 1].revents & (POLLIN | POLLHUP | POLLERR))) {
			if (recv_frame(sock, &type, buf, &len)) {
				/* The box went away: end the command. */
				sock_open = 0;
				if (status < 0) {
					kill(-pid, SIGTERM);
					kill(pid, SIGCONT);
					clock_gettime(CLOCK_MONOTONIC, &kill_at);
					kill_at.tv_sec += 10;
				}
				continue;
			}
			if (type == 'I' && in_fd >= 0) {
				if (!len) {
					if (in_fd == ptm) {
						char eof = 4; /* ^D: end of input on a terminal */
						write_all(ptm, &eof, 1);
					} else {
						close(in_fd);
						in_fd = -1;
					}
				} else if (write_all(in_fd, buf, len) && in_fd != ptm) {
					close(in_fd);
					in_fd = -1;
				}
			} else if (type == 'S' && len == 4 && status < 0) {
				int sig = (int)get_u32((unsigned char *)buf);
				if (sig > 0 && sig < 65)
					kill(pid, sig);
			} else if (type == 'W' && len == 4 && ptm >= 0) {
				unsigned char *b = (unsigned char *)buf;
				struct winsize ws = {.ws_row = (unsigned short)(b[0] << 8 | b[1]),
						     .ws_col = (unsigned short)(b[2] << 8 | b[3])};
				ioctl(ptm, TIOCSWINSZ, &ws);
			}
		}
	}
	if (status < 0) {
		/* Only when the box went away without an exit (kill_at path). */
		waitpid(pid, &status, 0);
	}
	if (sock_open)
		send_u32(sock, 'X', (uint32_t)status);
	_exit(0);
}

static void heartbeat(void)
{
	int fd = open("/dev/console", O_WRONLY | O_NOCTTY | O_CLOEXEC);
	unsigned long n = 0;
	if (fd < 0)
		_exit(1);
	for (;;) {
		char line[64];
		int len = snprintf(line, sizeof(line), "emuhost: alive %lu\n", n++);
		if (write(fd, line, (size_t)len) < 0)
			_exit(1);
		sleep(2);
	}
}

int main(int argc, char **argv)
{
	if (argc != 4)
		die("usage: agent ROOT PORT TOKEN");
	const char *root = argv[1];
	int port = atoi(argv[2]);
	token = argv[3];
	if (fork() == 0)
		heartbeat();
	if (chroot(root) < 0 || chdir("/") < 0)
		die("chroot %s: %s", root, strerror(errno));
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 64) < 0)
		die("listen on port %d: %s", port, strerror(errno));
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = {.sa_handler = SIG_DFL, .sa_flags = SA_NOCLDWAIT};
	sigaction(SIGCHLD, &sa, NULL);
	printf("emuhost: agent ready on port %d\n", port);
	fflush(stdout);
	for (;;) {
		int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		pid_t pid = fork();
		if (pid == 0) {
			close(ls);
			serve(c);
		}
		close(c);
	}
}
