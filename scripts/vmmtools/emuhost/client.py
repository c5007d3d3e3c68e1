"""Runs one command on a host of the pool (scripts/vmm-host exec): starts
the pool daemon when none runs, takes a lease, relays the command and ends
as it ended. Its own failures are one line and exit code 14."""
import json
import os
import socket
import subprocess
import sys
import time

from . import image, pool, qemu, relay

EXIT_EMULATED_HOST = 14
VMM_HOST = os.path.join(image.ROOT, "scripts", "vmm-host")


class HostFailure(Exception):
    """The emulated host, not the command, failed: one line."""


def describe(info):
    """How every report names such a host."""
    return (f"emulated (QEMU {info.get('qemu', '?')} TCG, nested SVM, "
            f"kernel {info.get('kernel', '?')})")


def describe_planned():
    """describe() of the host a command would get, without starting or
    fetching anything: the installed QEMU, the newest cached kernel (or the
    package that would be fetched)."""
    binary = qemu.qemu_binary()
    kernel = image.cached_release() or os.environ.get("VMM_HOST_KERNEL_PACKAGE",
                                                      image.DEFAULT_KERNEL_PACKAGE)
    return describe({"qemu": qemu.qemu_version(binary) if binary else "(not installed)",
                     "kernel": kernel})


def _connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(pool.socket_path())
    except OSError:
        s.close()
        return None
    return s


def pool_request(op, **fields):
    """One request to a running daemon, or None when none runs."""
    s = _connect()
    if s is None:
        return None
    try:
        with s:
            s.sendall((json.dumps(dict(fields, op=op)) + "\n").encode())
            line = pool.read_line(s)
        return json.loads(line) if line else None
    except (OSError, ValueError):
        return None  # the daemon went away mid-answer: as if none ran


def _start_daemon():
    log = open(os.path.join(pool.run_dir(), "pool.log"), "ab")
    subprocess.Popen([sys.executable, VMM_HOST, "serve"], stdin=subprocess.DEVNULL,
                     stdout=log, stderr=log, start_new_session=True, close_fds=True)
    log.close()


def lease():
    """(the lease's socket, the daemon's reply) from the daemon, started if
    need be; after the reply the socket is a stream to the host's agent."""
    if not qemu.qemu_binary():
        raise HostFailure(f"{os.environ.get('VMM_HOST_QEMU') or qemu.QEMU} is not installed "
                          f"(Debian package qemu-system-x86), so there is no emulated KVM "
                          f"host either")
    s = _connect()
    if s is None:
        try:
            image.prepare()  # in the foreground: progress and errors on our stderr
        except image.ImageError as e:
            raise HostFailure(str(e))
        except (OSError, Exception) as e:  # noqa: BLE001 - one line, whatever broke
            raise HostFailure(f"cannot prepare the emulated host: {e}")
        _start_daemon()
        deadline = time.monotonic() + 60
        while s is None and time.monotonic() < deadline:
            time.sleep(0.05)  # the daemon binds its socket at start; polled, bounded
            s = _connect()
        if s is None:
            raise HostFailure(f"the emulated-host pool did not start (see "
                              f"{pool.run_dir()}/pool.log)")
    try:
        s.sendall(b'{"op": "lease"}\n')
        line = pool.read_line(s)
        reply = json.loads(line) if line else None
    except (OSError, ValueError):
        reply = None
    if not isinstance(reply, dict):
        s.close()
        raise HostFailure(f"the emulated-host pool closed the lease (see "
                          f"{pool.run_dir()}/pool.log)")
    if not reply.get("ok"):
        raise HostFailure(reply.get("error", "the emulated host is not available"))
    return s, reply


def run(argv, why=None, env=None):
    """Runs argv on an emulated host; exits this process like it."""
    try:
        s, reply = lease()
    except HostFailure as e:
        print(f"vmm: {why + ', and the' if why else 'the'} emulated KVM host cannot run: {e}",
              file=sys.stderr, flush=True)
        sys.exit(EXIT_EMULATED_HOST)
    info = reply["host"]
    env = dict(os.environ if env is None else env)
    env["VMM_EMULATED_HOST"] = describe(info)
    if why:
        print(f"vmm: {why}: running on the emulated KVM host, {describe(info)}, where "
              f"guests run several times slower than on hardware KVM (--host kvm: never)",
              file=sys.stderr, flush=True)
    try:
        status = relay.run(s, reply["token"], argv, env=env)
    except Exception as e:  # noqa: BLE001 - HostLost, OSError or a bug: never a guest result
        # The daemon kills a dead host before its relays end: it knows why.
        dead = (pool_request("why", host=info.get("n")) or {}).get("why")
        print(f"vmm: the emulated KVM host failed: {dead or e}", file=sys.stderr, flush=True)
        sys.exit(EXIT_EMULATED_HOST)
    relay.exit_like(status)
