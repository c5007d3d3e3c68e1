#!/usr/bin/env python3
"""Runs ./vmm once and checks what it did: exit code, console and stderr.

Used by meson for every guest integration test. Tests that boot a guest
need KVM: this box's /dev/kvm or, without it, the emulated KVM host that
./vmm moves to by itself (scripts/vmm-host). Only where neither exists do
they print why and exit 77 (meson's "skipped").
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "scripts"))
from vmmtools import emuhost  # noqa: E402

# A notice ./vmm prints when it moves to the emulated host (exactly one,
# before anything of the command's own).
EMULATED_NOTICE = re.compile(r"^vmm: .*: running on the emulated KVM host.*\n", re.M)


def kvm_usable():
    """None when a guest can boot from here (this box's KVM or the
    emulated host), else why not."""
    return emuhost.guest_skip_reason()


def skip_unless_guests_boot(what="this test boots a guest"):
    why = kvm_usable()
    if why:
        print(f"SKIP: {why}; {what}")
        sys.exit(77)


def without_notice(stderr):
    """The VMM's stderr without the emulated-host notice."""
    return EMULATED_NOTICE.sub("", stderr, count=1)


def fnv1a32(data):
    h = 0x811C9DC5
    for b in data:
        h ^= b
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def run_until_seen(cmd, patterns, wall_timeout):
    """Runs cmd, reading its console as it comes; once every pattern has
    matched, sends SIGTERM (the VMM exits 10). Returns what subprocess.run
    would, with both streams whole."""
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    out, err = bytearray(), bytearray()
    drain = threading.Thread(target=lambda: err.extend(p.stderr.read()), daemon=True)
    drain.start()
    timer = threading.Timer(wall_timeout, p.kill)
    timer.start()
    try:
        for chunk in iter(lambda: p.stdout.read1(4096), b""):
            out.extend(chunk)
            text = out.decode(errors="replace")
            if p.poll() is None and all(re.search(rx, text, re.M) for rx in patterns):
                p.send_signal(signal.SIGTERM)
        p.wait()
    finally:
        timer.cancel()
    drain.join()
    if p.returncode == -signal.SIGKILL:
        raise subprocess.TimeoutExpired(cmd, wall_timeout)
    return subprocess.CompletedProcess(cmd, p.returncode, bytes(out), bytes(err))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vmm", required=True)
    ap.add_argument("--needs-kvm", action="store_true")
    ap.add_argument("--exit", required=True, help="expected exit code(s), comma-separated")
    ap.add_argument("--stdout", action="append", default=[], help="regex the console must match")
    ap.add_argument("--not-stdout", action="append", default=[], help="regex the console must not match")
    ap.add_argument("--stderr", action="append", default=[], help="regex stderr must match")
    ap.add_argument("--initrd-bytes", type=int, default=0,
                    help="make an initrd of N pseudo-random bytes and pass hello.initrd_* keys")
    ap.add_argument("--corrupt-kernel", type=int, default=-1,
                    help="copy the kernel and invert 64 bytes at this offset from the end")
    ap.add_argument("--wall-timeout", type=float, default=300)
    ap.add_argument("--stdin-text", default=None,
                    help="write TEXT to the VMM's stdin, then close it (default: stdin is /dev/null)")
    ap.add_argument("--stop-when-seen", action="store_true",
                    help="SIGTERM the VMM once the console matches every --stdout regex "
                         "(exit 10 then counts as expected); the VMM's --timeout stays the "
                         "bound, so a slow box gets all of it and a fast one stops early")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    args = a.args[1:] if a.args and a.args[0] == "--" else a.args

    if a.needs_kvm:
        skip_unless_guests_boot()

    with tempfile.TemporaryDirectory() as tmp:
        cmdline_extra = []
        if a.initrd_bytes:
            data = bytes((i * 131 + (i >> 8) * 7 + 3) & 0xFF for i in range(a.initrd_bytes))
            path = os.path.join(tmp, "initrd.img")
            with open(path, "wb") as f:
                f.write(data)
            args += ["--initrd", path]
            cmdline_extra.append(f"hello.initrd_size={len(data)} hello.initrd_fnv=0x{fnv1a32(data):08x}")
        if a.corrupt_kernel >= 0:
            i = args.index("--kernel") + 1
            with open(args[i], "rb") as f:
                img = bytearray(f.read())
            off = len(img) - a.corrupt_kernel
            for j in range(off, min(off + 64, len(img))):
                img[j] ^= 0xFF
            path = os.path.join(tmp, "corrupt.bzImage")
            with open(path, "wb") as f:
                f.write(img)
            args[i] = path
        if cmdline_extra:
            if "--cmdline" in args:
                i = args.index("--cmdline") + 1
                args[i] = args[i] + " " + " ".join(cmdline_extra)
            else:
                args += ["--cmdline", " ".join(cmdline_extra)]
        cmd = [a.vmm] + args
        print("running:", " ".join(cmd), flush=True)
        try:
            if a.stop_when_seen:
                p = run_until_seen(cmd, a.stdout, a.wall_timeout)
            elif a.stdin_text is None:
                p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True,
                                   timeout=a.wall_timeout)
            else:
                p = subprocess.run(cmd, input=a.stdin_text.encode(), capture_output=True,
                                   timeout=a.wall_timeout)
        except subprocess.TimeoutExpired:
            print(f"FAIL: vmm did not finish within {a.wall_timeout} s")
            return 1
    out = p.stdout.decode(errors="replace")
    err = p.stderr.decode(errors="replace")
    print("--- console ---\n" + out + "--- stderr ---\n" + err + "---", flush=True)
    failures = []
    expected = [int(x) for x in a.exit.split(",")]
    if a.stop_when_seen:
        expected.append(10)  # stopped by our SIGTERM once everything was seen
    if p.returncode not in expected:
        failures.append(f"exit code {p.returncode}, expected {a.exit}")
    for rx in a.stdout:
        if not re.search(rx, out, re.M):
            failures.append(f"console lacks /{rx}/")
    for rx in a.not_stdout:
        if re.search(rx, out, re.M):
            failures.append(f"console has /{rx}/")
    for rx in a.stderr:
        if not re.search(rx, err, re.M):
            failures.append(f"stderr lacks /{rx}/")
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
