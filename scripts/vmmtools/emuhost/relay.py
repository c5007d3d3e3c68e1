"""The box's side of one command on the emulated host: the agent's frames
(guests/emuhost/agent.c says the protocol) to and from this process's
stdin, stdout, stderr, signals and terminal."""
import errno
import os
import select
import signal
import struct
import sys
import termios
import tty

FLAG_TTY_IN, FLAG_TTY_OUT, FLAG_TTY_ERR = 1, 2, 4
FORWARDED = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
             signal.SIGUSR2]


class HostLost(Exception):
    """The connection ended before the command's exit status came."""


def frame(kind, payload=b""):
    return kind + struct.pack(">I", len(payload)) + payload


def hello(token, argv, cwd, env, flags, rows=0, cols=0):
    fields = [token, str(os.getuid()), str(os.getgid())]
    groups = [g for g in os.getgroups() if g != os.getgid()][:64]
    fields += [str(len(groups))] + [str(g) for g in groups]
    fields += [str(flags), str(rows), str(cols), cwd, str(len(argv))] + list(argv)
    envl = [f"{k}={v}" for k, v in env.items()]
    fields += [str(len(envl))] + envl
    return frame(b"H", b"".join(f.encode("utf-8", "surrogateescape") + b"\0" for f in fields))


class Frames:
    """Frames out of a byte stream."""

    def __init__(self):
        self.buf = bytearray()

    def feed(self, data):
        self.buf += data
        out = []
        while len(self.buf) >= 5:
            n, = struct.unpack_from(">I", self.buf, 1)
            if len(self.buf) < 5 + n:
                break
            out.append((bytes(self.buf[:1]), bytes(self.buf[5:5 + n])))
            del self.buf[:5 + n]
        return out


def _write_all(fd, data):
    while data:
        try:
            n = os.write(fd, data)
        except InterruptedError:
            continue
        except OSError as e:
            if e.errno == errno.EPIPE:
                return False
            raise
        data = data[n:]
    return True


def run(sock, token, argv, cwd=None, env=None):
    """Runs argv through sock, a stream to a host's agent (closed here);
    returns its wait status (os.waitstatus_to_exitcode's input), or raises
    HostLost / OSError."""
    cwd = cwd or os.getcwd()
    env = dict(os.environ if env is None else env)
    flags = (FLAG_TTY_IN if os.isatty(0) else 0) | (FLAG_TTY_OUT if os.isatty(1) else 0) | \
        (FLAG_TTY_ERR if os.isatty(2) else 0)
    rows, cols = 0, 0
    if flags:
        try:
            cols, rows = os.get_terminal_size(0 if flags & FLAG_TTY_IN else 1)
        except OSError:
            pass
    sock.sendall(hello(token, argv, cwd, env, flags, rows, cols))
    # Signals arrive through a pipe, so the loop below sees each once.
    rsig, wsig = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wsig)
    for s in FORWARDED + [signal.SIGWINCH]:
        signal.signal(s, lambda *_: None)
    saved = None
    if flags & FLAG_TTY_IN:
        saved = termios.tcgetattr(0)
        tty.setraw(0)  # keys reach the host's pty as they are typed
    frames = Frames()
    stdin_open = True
    try:
        while True:
            rl = [sock, rsig] + ([0] if stdin_open else [])
            try:
                ready, _, _ = select.select(rl, [], [])
            except InterruptedError:
                continue
            if rsig in ready:
                for s in os.read(rsig, 64):
                    if s == signal.SIGWINCH and flags:
                        try:
                            c, r = os.get_terminal_size(0 if flags & FLAG_TTY_IN else 1)
                            sock.sendall(frame(b"W", struct.pack(">HH", r, c)))
                        except OSError:
                            pass
                    elif s != signal.SIGWINCH:
                        sock.sendall(frame(b"S", struct.pack(">I", s)))
            if 0 in ready:
                try:
                    data = os.read(0, 65536)
                except OSError:
                    data = b""
                sock.sendall(frame(b"I", data))
                stdin_open = bool(data)
            if sock in ready:
                data = sock.recv(1 << 16)
                if not data:
                    raise HostLost("the emulated host closed the connection")
                for kind, payload in frames.feed(data):
                    if kind == b"O":
                        _write_all(1, payload)
                    elif kind == b"E":
                        _write_all(2, payload)
                    elif kind == b"X":
                        return struct.unpack(">I", payload)[0]
                    elif kind == b"F":
                        raise HostLost(payload.decode(errors="replace"))
    finally:
        if saved is not None:
            termios.tcsetattr(0, termios.TCSADRAIN, saved)
        signal.set_wakeup_fd(-1)
        os.close(rsig)
        os.close(wsig)
        sock.close()


def exit_like(status):
    """Ends this process as the command ended: its exit code, or its
    signal (re-raised on ourselves, so the caller sees the same)."""
    sys.stdout.flush()
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status))
