"""Shared by the fault tests (tests/faults/): the flushtest block pattern,
the skip rules, and a VMM run whose console is read as it comes.

The pattern is guests/flushtest/blk.c's: block `seq` of cycle `cycle` is 4 KiB
at sector 8 * seq; each of its 512-byte sectors j holds "FTB1", cycle (u32),
seq (u64), j (u32), then byte k = (k + seq * 7 + cycle * 13 + j * 3) & 0xff.
"""
import argparse
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "scripts"))
from vmmtools import emuhost  # noqa: E402

BLOCK = 4096
SECTOR = 512
SKIP = 77
_RAMP = bytes(range(256)) * 4


def sector_pattern(cycle, seq, j):
    base = (seq * 7 + cycle * 13 + j * 3) & 0xFF
    start = (20 + base) & 0xFF
    return b"FTB1" + struct.pack("<IQI", cycle & 0xFFFFFFFF, seq, j) + _RAMP[start:start + SECTOR - 20]


def block_pattern(cycle, seq):
    return b"".join(sector_pattern(cycle, seq, j) for j in range(BLOCK // SECTOR))


def check_blocks(path, cycle, count):
    """Blocks 0..count-1 of the image against the pattern; returns the list
    of (seq, first differing offset) for those that differ."""
    bad = []
    with open(path, "rb") as f:
        for seq in range(count):
            got = f.read(BLOCK)
            want = block_pattern(cycle, seq)
            if got != want:
                off = next((i for i in range(min(len(got), BLOCK)) if got[i] != want[i]), len(got))
                bad.append((seq, off))
    return bad


def skip(why):
    print(f"SKIP: {why}", flush=True)
    return SKIP


_UNSHARE = {"mount": ["--mount", "--propagation", "private"], "net": ["--net"]}
_NO_TOOL = {"unshare": "no unshare(1) (util-linux)", "ip": "no ip(8) (iproute2)"}


def namespaced_main(ap, inner, namespace, root_for, files=(), tools=("unshare",),
                    more=None):
    """The fault tests' main. Adds --vmm, --kernel and --inner to `ap`.
    With --inner (the re-run below) it is inside the namespace: runs
    inner(args). Where this box's /dev/kvm is unusable it runs whole on the
    emulated KVM host (scripts/vmm-host). Otherwise it skips (exit 77) without
    a usable /dev/kvm,
    root (needed `root_for`), the device `files`, the `tools`, or what
    more(args) names, and runs this script again with the same arguments
    and --inner under unshare(1) in a `namespace` of its own ("mount",
    with private propagation, or "net")."""
    ap.add_argument("--vmm", required=True)
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.inner:
        return inner(a)
    # The namespace, its mounts and FUSE belong to the kernel the VMM runs
    # on: without a usable /dev/kvm here, all of it runs on the emulated host.
    emuhost.run_inside_if_needed()
    why = kvm_problem()
    if not why and os.geteuid() != 0:
        why = f"needs root {root_for}"
    why = why or next((f"no {f}" for f in files if not os.path.exists(f)), None)
    why = why or next((_NO_TOOL[t] for t in tools if not shutil.which(t)), None)
    why = why or (more(a) if more else None)
    if why:
        return skip(why)
    # The later --vmm/--kernel win: the paths, made absolute.
    cmd = (["unshare"] + _UNSHARE[namespace] +
           [sys.executable, os.path.abspath(sys.argv[0])] + sys.argv[1:] +
           ["--vmm", os.path.abspath(a.vmm), "--kernel", os.path.abspath(a.kernel), "--inner"])
    return subprocess.run(cmd).returncode


def kvm_problem():
    """Why /dev/kvm cannot be used here, or None (on the emulated host, where
    these tests run whole on a box without one, it must be usable)."""
    why = emuhost.kvm_unusable()
    return f"{why}; this test boots a guest" if why else None


class Vmm:
    """A VMM process whose console (stdout) a thread collects line by line;
    wait_for() blocks until a line matches (or the process ends, or a wall
    bound passes) by waiting on that thread, never by sleeping."""

    def __init__(self, cmd, env=None):
        self.cmd = cmd
        self.lines = []
        self.err_lines = []
        self._cv = threading.Condition()
        self._eof = {"out": False, "err": False}
        self.p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=env)
        self._out = threading.Thread(target=self._read, args=(self.p.stdout, self.lines, "out"),
                                     daemon=True)
        self._err = threading.Thread(target=self._read,
                                     args=(self.p.stderr, self.err_lines, "err"), daemon=True)
        self._out.start()
        self._err.start()

    def _read(self, stream, lines, name):
        for raw in stream:
            with self._cv:
                lines.append(raw.decode(errors="replace").rstrip("\n"))
                self._cv.notify_all()
        with self._cv:
            self._eof[name] = True
            self._cv.notify_all()

    @property
    def stderr(self):
        with self._cv:
            return ("\n".join(self.err_lines) + "\n").encode()

    def wait_for(self, rx, wall_s, stream="out"):
        """The first line of the console (or stderr, stream="err") matching
        rx, or None at the end of that output or after wall_s seconds."""
        lines = self.lines if stream == "out" else self.err_lines
        pat = re.compile(rx)
        deadline = time.monotonic() + wall_s
        i = 0
        with self._cv:
            while True:
                while i < len(lines):
                    if pat.search(lines[i]):
                        return lines[i]
                    i += 1
                left = deadline - time.monotonic()
                if self._eof[stream] or left <= 0:
                    return None
                self._cv.wait(left)

    def finish(self, wall_s):
        """Waits for the process to end (SIGKILL after wall_s: a hang) and
        for its output; returns the exit status (negative: a signal)."""
        try:
            self.p.wait(wall_s)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            self.hung = True
        self._out.join()
        self._err.join()
        return self.p.returncode

    hung = False

    def signal(self, sig):
        if self.p.poll() is None:
            self.p.send_signal(sig)

    def console(self):
        with self._cv:
            return "\n".join(self.lines)

    def dump(self, tail=40):
        print("---- console (last lines) ----")
        for line in self.lines[-tail:]:
            print(line)
        print("---- stderr ----")
        print(self.stderr.decode(errors="replace").rstrip())
        print("----", flush=True)


def signame(rc):
    if rc is not None and rc < 0:
        return signal.Signals(-rc).name
    return str(rc)
