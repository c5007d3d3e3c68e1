"""The pool of emulated KVM hosts: a daemon that boots one-CPU hosts on
demand (at most one per box CPU), lends them to commands and watches them.

It listens on CACHE/run/pool.sock (one JSON line per request):
  {"op": "lease"}   -> {"ok": true, "token": T, "host": {...}} once a host is
                       up; from then on the connection is a stream to that
                       host's agent (the daemon relays it to the TCP port QEMU
                       forwards on this box's loopback, so a command in a
                       network namespace of its own reaches it too), and the
                       lease lasts as long as the connection.
  {"op": "why", "host": N} -> {"why": WHY}: why host N died (None if it lives)
  {"op": "status"}  -> {"hosts": [...], "idle_s": N}
  {"op": "stop"}    -> the hosts are stopped and the daemon exits.
It exits by itself when no lease was held for VMM_HOST_IDLE seconds
(default 60), and only one runs per cache (CACHE/run/pool.lock).

The watchdog: a host's agent prints "emuhost: alive N" every 2 s on the
host's console. A host that says nothing for VMM_HOST_WATCHDOG seconds
(default 60, 30x the beat: a frozen host's own timers stop, so nothing
inside it can tell), does not come up
within 180 s, or whose QEMU exits, is killed and named dead; so is one
whose kernel panics or oopses. A soft-lockup, RCU-stall or hung-task line
alone is not fatal (TCG on a busy box starves the host's CPU for a while):
it is logged and named if the host later dies.
"""
import collections
import fcntl
import json
import os
import secrets
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

from . import image, qemu

BEAT = "emuhost: alive"
# A host that prints one of these is done for (its kernel is broken).
FATAL_LINES = ("Kernel panic", "Oops:", "BUG: unable to handle", "BUG: kernel NULL pointer",
               "general protection fault")
# These say only that the host's CPU was starved for a while, which a busy
# box does to TCG; they are kept (and named if the host later dies), and a
# host that is really stuck stops its heartbeat and is caught by that.
SLOW_LINES = ("soft lockup", "hung_task", "blocked for more than", "rcu: INFO",
              "self-detected stall")
STARTUP_S = 180


def run_dir():
    """Where the pool's socket, lock and logs are: VMM_HOST_RUN, else
    CACHE/run (a private pool: its own VMM_HOST_RUN, the same cache)."""
    d = os.environ.get("VMM_HOST_RUN") or os.path.join(image.cache_dir(), "run")
    os.makedirs(d, exist_ok=True)
    return d


def socket_path():
    return os.path.join(run_dir(), "pool.sock")


def _env_float(name, default):
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return float(default)


def pool_size():
    return max(1, int(_env_float("VMM_HOST_POOL", os.cpu_count() or 1)))


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Host:
    """One QEMU: its console reader and state."""

    def __init__(self, pool, n, binary, vmlinuz, initramfs, release):
        self.pool, self.n = pool, n
        self.port, self.token = _free_port(), secrets.token_hex(16)
        self.state, self.why = "starting", None
        self.leases = []  # the lease connections
        self.started = self.last_beat = time.monotonic()
        self.tail = collections.deque(maxlen=40)
        self.slow_line = None  # the last SLOW_LINES line its kernel printed
        self.info = {"kind": "emulated", "qemu": qemu.qemu_version(binary), "kernel": release,
                     "cpus": 1, "tcg_thread": os.environ.get("VMM_HOST_TCG_THREAD", "multi"),
                     "memory_mib": qemu.memory_mib(), "n": n}
        self.errlog = os.path.join(run_dir(), f"host{n}.stderr")
        self.vfsd = None
        vfs_socket = None
        if qemu.share_kind() == "virtiofs":
            vfs_socket = os.path.join(run_dir(), f"host{n}.vfs")
            try:
                os.unlink(vfs_socket)
            except FileNotFoundError:
                pass
            with open(os.path.join(run_dir(), f"host{n}.virtiofsd"), "wb") as err:
                self.vfsd = subprocess.Popen(qemu.virtiofsd_command(vfs_socket),
                                             stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                             start_new_session=True)
            # virtiofsd makes its socket before it waits for QEMU: bounded poll.
            deadline = time.monotonic() + 30
            while not os.path.exists(vfs_socket) and self.vfsd.poll() is None and \
                    time.monotonic() < deadline:
                time.sleep(0.01)
        self.info["share"] = "virtiofs" if vfs_socket else "9p"
        argv = qemu.command(binary, vmlinuz, initramfs, self.port, self.token, vfs_socket)
        with open(self.errlog, "wb") as err:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=err, start_new_session=True)
        # For the next daemon, should this one die without stopping its hosts.
        with open(os.path.join(run_dir(), f"host{n}.pids"), "w") as f:
            f.write(" ".join(str(p.pid) for p in (self.proc, self.vfsd) if p) + "\n")
        threading.Thread(target=self._read_console, daemon=True).start()

    def _read_console(self):
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip()
            self.tail.append(line)
            with self.pool.cv:
                if line.startswith(BEAT):
                    self.last_beat = time.monotonic()
                elif "emuhost: agent ready" in line and self.state == "starting":
                    self.state = "ready"
                    self.last_beat = time.monotonic()
                    self.pool.cv.notify_all()
                elif "emuhost: FAILED" in line:
                    self.pool.kill(self, line.split("emuhost: ", 1)[1])
                elif any(b in line for b in FATAL_LINES):
                    self.pool.kill(self, f"its kernel said: {line.strip()}")
                elif any(b in line for b in SLOW_LINES):
                    self.slow_line = line.strip()
                    print(f"vmm-host: host {self.n} (kept): {self.slow_line}", file=sys.stderr,
                          flush=True)
        self.proc.wait()
        with self.pool.cv:
            if self.state != "dead":
                try:
                    with open(self.errlog, errors="replace") as f:
                        err = f.read().strip().splitlines()
                except OSError:
                    err = []
                self.pool.kill(self, f"QEMU exited with status {self.proc.returncode}" +
                               (f": {err[-1]}" if err else ""))


class Pool:
    def __init__(self):
        self.cv = threading.Condition()
        self.hosts = []
        self.dead = {}  # host number -> why it died
        self.count = 0
        self.idle_since = time.monotonic()
        self.stopping = False
        self.binary = qemu.qemu_binary()
        self.image = image.prepare()

    def kill(self, host, why):
        """Under cv: the host is dead, and why is kept for the "why" op (its
        leases' streams end with QEMU; their clients ask)."""
        if host.state == "dead":
            return
        if host.slow_line and host.slow_line not in why:
            why += f" (earlier its kernel said: {host.slow_line})"
        host.state, host.why = "dead", why
        self.dead[host.n] = why
        # A death counts as activity: the daemon stays a full idle period,
        # so the commands that were on the host can still ask why, however
        # slowly a loaded box runs them.
        self.idle_since = time.monotonic()
        print(f"vmm-host: host {host.n} dead: {why}", file=sys.stderr, flush=True)
        for p in [host.proc, host.vfsd]:
            try:
                if p:
                    os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        # Its agent connections drop with QEMU: the relays end, and each
        # command's client asks "why".
        if host in self.hosts:
            self.hosts.remove(host)
        self.cv.notify_all()

    def kill_by_number(self, n, why):
        with self.cv:
            for h in self.hosts:
                if h.n == n:
                    self.kill(h, why)

    def _pick(self):
        """Under cv: the host a new lease goes to (started if need be)."""
        live = [h for h in self.hosts if h.state != "dead"]
        best = min(live, key=lambda h: (len(h.leases), h.state != "ready"), default=None)
        if best is None or (best.leases and len(live) < pool_size()):
            self.count += 1
            best = Host(self, self.count, self.binary, *self.image)
            self.hosts.append(best)
        return best

    def lease(self, conn):
        with self.cv:
            host = self._pick()
            host.leases.append(conn)
            while host.state == "starting":
                if time.monotonic() - host.started > STARTUP_S:
                    self.kill(host, f"not up after {STARTUP_S} s")
                self.cv.wait(1)
            if host.state == "dead":
                if conn in host.leases:
                    host.leases.remove(conn)
                return {"ok": False, "error": f"the emulated host did not start: {host.why}"}
            return {"ok": True, "port": host.port, "token": host.token, "host": host.info}

    def why(self, n, wait=5.0):
        """Why host n died. Asked when a command's stream broke, which can be
        a moment before the console reader sees QEMU gone: a live host gets
        a few seconds to be found dead before the answer is None."""
        deadline = time.monotonic() + wait
        with self.cv:
            while n not in self.dead and time.monotonic() < deadline:
                self.cv.wait(0.1)
            return self.dead.get(n)

    def release(self, conn):
        with self.cv:
            for h in self.hosts:
                if conn in h.leases:
                    h.leases.remove(conn)
            if not any(h.leases for h in self.hosts):
                self.idle_since = time.monotonic()

    def watch(self):
        limit = _env_float("VMM_HOST_WATCHDOG", 60)
        idle = _env_float("VMM_HOST_IDLE", 60)
        while True:
            with self.cv:
                now = time.monotonic()
                for h in list(self.hosts):
                    if h.state == "ready" and now - h.last_beat > limit:
                        tail = " | ".join(list(h.tail)[-3:])
                        self.kill(h, f"no heartbeat for {limit:.0f} s: the emulated host "
                                  f"is frozen (last console lines: {tail})")
                busy = any(h.leases for h in self.hosts)
                if self.stopping or (not busy and now - self.idle_since > idle):
                    for h in list(self.hosts):
                        self.kill(h, "the pool stopped")
                    return
                self.cv.wait(1)

    def status(self):
        with self.cv:
            return {"hosts": [dict(h.info, state=h.state, leases=len(h.leases),
                                   port=h.port, qemu_pid=h.proc.pid) for h in self.hosts],
                    "pool_size": pool_size(),
                    "idle_s": round(time.monotonic() - self.idle_since, 1)}


def read_line(sock, limit=65536):
    """One line, read a byte at a time: nothing after it is consumed (the
    stream that may follow is not this reader's)."""
    line = bytearray()
    while len(line) < limit:
        b = sock.recv(1)
        if not b:
            break
        line += b
        if b == b"\n":
            break
    return bytes(line)


def _pump(src, dst):
    """Bytes from src to dst until either end closes; then both directions
    of both end (each direction has its own thread: neither waits on the
    other)."""
    try:
        while True:
            data = src.recv(1 << 16)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def relay(conn, port):
    """The lease's stream: conn to the agent at 127.0.0.1:port and back.
    Returns why the agent could not be reached, or None."""
    try:
        tcp = socket.create_connection(("127.0.0.1", port), timeout=30)
    except OSError as e:
        return f"the pool cannot reach the host's agent on 127.0.0.1:{port}: {e.strerror or e}"
    tcp.settimeout(None)
    tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with tcp:
        back = threading.Thread(target=_pump, args=(tcp, conn), daemon=True)
        back.start()
        _pump(conn, tcp)
        back.join()
    return None


def _serve_conn(pool, conn):
    with conn:
        try:
            req = json.loads(read_line(conn) or b"{}")
        except (ValueError, OSError):
            req = {}
        op = req.get("op")
        if op == "lease":
            reply = pool.lease(conn)
            try:
                conn.sendall((json.dumps(reply) + "\n").encode())
                if reply["ok"]:
                    unreachable = relay(conn, reply["port"])  # held until either end closes
                    if unreachable:
                        pool.kill_by_number(reply["host"]["n"], unreachable)
            except OSError:
                pass
            pool.release(conn)
        elif op == "why":
            conn.sendall((json.dumps({"why": pool.why(req.get("host"))}) + "\n").encode())
        elif op == "status":
            conn.sendall((json.dumps(pool.status()) + "\n").encode())
        elif op == "stop":
            pool_stop(pool)
            conn.sendall(b'{"ok": true}\n')


def serve():
    """The daemon's main: returns when the pool has stopped."""
    rd = run_dir()
    lockf = open(os.path.join(rd, "pool.lock"), "a+")
    try:
        fcntl.flock(lockf, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # another daemon serves this cache
    reap_orphans(rd)
    loopback_up()
    path = socket_path()
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    pool = Pool()
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(path)
    os.chmod(path, 0o600)
    ls.listen(64)
    signal.signal(signal.SIGTERM, lambda *_: pool_stop(pool))
    threading.Thread(target=_accept, args=(pool, ls), daemon=True).start()
    pool.watch()
    ls.close()
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    return 0


def loopback_up():
    """The hosts' agents are reached on this namespace's 127.0.0.1 (QEMU's
    port forward). A daemon started by a command in a network namespace of
    its own (unshare --net: loopback down) lives on in it and serves every
    later command from there, so its loopback must be up (netdevice(7):
    SIOCGIFFLAGS, SIOCSIFFLAGS). Best effort: without the right to, the
    relay says why it cannot connect."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            req = struct.pack("16sh14x", b"lo", 0)
            flags = struct.unpack("16sh14x", fcntl.ioctl(s, siocgifflags, req))[1]
            if not flags & iff_up:
                fcntl.ioctl(s, siocsifflags, struct.pack("16sh14x", b"lo", flags | iff_up))
                print("vmm-host: brought up loopback in this network namespace",
                      file=sys.stderr, flush=True)
    except OSError as e:
        print(f"vmm-host: cannot bring up loopback: {e}", file=sys.stderr, flush=True)


def reap_orphans(rd):
    """The hosts of a daemon that died without stopping them (their pids in
    RUN/host*.pids, still QEMU or virtiofsd): killed, since no one can lease
    them any more."""
    for name in os.listdir(rd):
        if not (name.startswith("host") and name.endswith(".pids")):
            continue
        with open(os.path.join(rd, name)) as f:
            pids = [int(x) for x in f.read().split() if x.isdigit()]
        for pid in pids:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().split(b"\0")[0]
            except OSError:
                continue
            if os.path.basename(cmd) in (os.path.basename(qemu.QEMU).encode(), b"virtiofsd"):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
        os.unlink(os.path.join(rd, name))


def pool_stop(pool):
    with pool.cv:
        pool.stopping = True
        pool.cv.notify_all()


def _accept(pool, ls):
    while True:
        try:
            conn, _ = ls.accept()
        except OSError:
            return  # closed: the pool stopped
        threading.Thread(target=_serve_conn, args=(pool, conn), daemon=True).start()
