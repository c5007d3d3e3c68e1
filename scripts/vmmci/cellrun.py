"""Runs one cell: one kernel, one interrupt mode, one vCPU count, one repeat.

The VMM gets a partitioned scratch disk, the CI initramfs, virtio-rng, a
virtio-console (hvc0: input from the VMM's stdin, output where the serial
console goes), a tap in a network namespace of the cell's own (root only)
and --stats; for the full matrix also the ext4 tools disk. The serial console goes to a FIFO this process reads, so every
line gets a host timestamp and the hvc0 token is typed when /init asks for
it (no sleeps: everything waits on file descriptors).
"""
import dataclasses
import os
import re
import selectors
import signal
import struct
import subprocess
import time

from . import consolelog

GUEST_IP, HOST_IP, NETMASK = "10.0.2.15", "10.0.2.2", "255.255.255.0"
DISK_MIB = 64
P1_START, P1_SECTORS = 2048, 8192  # vda1: 4 MiB, the pattern
PATTERN_BYTES = 65536
# Bit numbers for popcnt, smap, smep, xsave, cx16, avx, avx2, avx512f:
# kernels before 5.19 take only numbers, 5.19 and later take the names.
CLEARCPUID_BITS = "151,308,295,154,141,156,293,304"
CLEARCPUID_NAMES = "popcnt,smap,smep,xsave,cx16,avx,avx2,avx512f"


def clearcpuid_for(version):
    """The clearcpuid= value a kernel of this version understands."""
    try:
        major, minor = (int(x) for x in version.split(".")[:2])
    except (AttributeError, ValueError):
        return CLEARCPUID_BITS  # unknown: numbers (5.19+ take them too)
    return CLEARCPUID_NAMES if (major, minor) >= (5, 19) else CLEARCPUID_BITS


def make_partitioned_disk(path, mib=DISK_MIB):
    """A sparse raw disk with an MBR: vda1 (4 MiB, the pattern), vda2 (the
    rest, fio's target)."""
    total = mib * 2048
    p2_start = P1_START + P1_SECTORS

    def entry(start, count):
        return struct.pack("<B3sB3sII", 0, b"\xff\xff\xff", 0x83, b"\xff\xff\xff", start, count)

    mbr = bytearray(512)
    mbr[440:444] = struct.pack("<I", 0x564D4D43)  # disk signature "VMMC"
    mbr[446:462] = entry(P1_START, P1_SECTORS)
    mbr[462:478] = entry(p2_start, total - p2_start)
    mbr[510:512] = b"\x55\xaa"
    # A new file, never through a link someone left at the path (issue 26:
    # the runner writes here as root).
    if os.path.lexists(path):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(mbr)
        f.truncate(total * 512)


def expected_pattern(token):
    """What ci-init.sh writes to vda1 (its doubling loop, cut to 64 KiB)."""
    s = f"VMMCI-PATTERN {token} "
    while len(s) < PATTERN_BYTES:
        s += s
    return s[:PATTERN_BYTES].encode()


def disk_pattern_check(path, token, userspace):
    if not userspace:
        return consolelog.Check("disk-host", consolelog.SKIP, "no userspace on this host", "host")
    with open(path, "rb") as f:
        f.seek(P1_START * 512)
        got = f.read(PATTERN_BYTES)
    ok = got == expected_pattern(token)
    return consolelog.Check("disk-host", consolelog.PASS if ok else consolelog.FAIL,
                            "the image's vda1 holds the guest's pattern" if ok else
                            "the image's vda1 does not hold the guest's pattern", "host")


class NetNs:
    """A network namespace with a tap whose host side is HOST_IP/24, up."""

    def __init__(self, name, tap="vmmci0"):
        self.name, self.tap = name, tap

    def ip(self, *args):
        subprocess.run(["ip", *args], check=True, capture_output=True, text=True)

    def __enter__(self):
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)
        self.ip("netns", "add", self.name)
        try:
            self.ip("-n", self.name, "link", "set", "lo", "up")
            self.ip("-n", self.name, "tuntap", "add", "dev", self.tap, "mode", "tap")
            self.ip("-n", self.name, "addr", "add", f"{HOST_IP}/24", "dev", self.tap)
            self.ip("-n", self.name, "link", "set", self.tap, "up")
        except subprocess.CalledProcessError:
            self.__exit__()
            raise
        return self

    def prefix(self):
        return ["ip", "netns", "exec", self.name]

    def __exit__(self, *exc):
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)


def net_unavailable_reason():
    """Why no tap can be made here, or "" when one can."""
    if os.geteuid() != 0:
        return "not root: a tap needs CAP_NET_ADMIN (run as root for the net checks)"
    if subprocess.run(["ip", "-V"], capture_output=True).returncode != 0:
        return "no ip(8) (install iproute2)"
    return ""


LIVE = set()  # running Sessions, so an interrupted runner can stop their VMMs


def stop_all():
    for session in list(LIVE):
        session.kill()


# What the runner keeps of the guest's text (issue 26): a line is cut at
# LINE_MAX bytes, a stream at STREAM_MAX bytes; the rest is counted (and
# reported), never stored, so a guest's output costs time linear in its size
# and bounded memory. A kernel line is at most 1 KiB (printk).
LINE_MAX = 4096
STREAM_MAX = 16 << 20


class Session:
    """The VMM process and its three streams, with host timestamps."""

    def __init__(self, argv, fifo, on_console_line):
        self.argv, self.fifo, self.on_console_line = argv, fifo, on_console_line
        self.streams = {"console": [], "hvc0": [], "stderr": []}
        self.partial = {"console": bytearray(), "hvc0": bytearray(), "stderr": bytearray()}
        self.long = {"console": 0, "hvc0": 0, "stderr": 0}  # bytes cut from the partial line
        self.kept = {"console": 0, "hvc0": 0, "stderr": 0}
        self.cut = {"console": [0, 0], "hvc0": [0, 0], "stderr": [0, 0]}  # lines cut, bytes cut
        self.typed = False
        self.times = {}  # first host time of interesting console lines
        self.t0 = None

    def run(self, wall_limit):
        # O_RDWR: opening the FIFO never blocks and never sees EOF early; the
        # end is the process's exit.
        fifo_fd = os.open(self.fifo, os.O_RDWR | os.O_NONBLOCK)
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True)
        os.set_blocking(self.proc.stdin.fileno(), False)  # typing never blocks the loop
        LIVE.add(self)
        try:
            return self.loop(fifo_fd, wall_limit)
        finally:
            LIVE.discard(self)
            os.close(fifo_fd)

    def loop(self, fifo_fd, wall_limit):
        sel = selectors.DefaultSelector()
        for fd, name in ((fifo_fd, "console"), (self.proc.stdout.fileno(), "hvc0"),
                         (self.proc.stderr.fileno(), "stderr")):
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ, name)
        killed = None
        open_pipes = 2
        while open_pipes:
            left = wall_limit - (time.monotonic() - self.t0)
            if left <= 0 and killed is None:
                killed = "wall-clock limit"
                self.kill()
            for key, _ in sel.select(timeout=max(0.1, min(left, 5.0))):
                if not self.read(key.fd, key.data):
                    sel.unregister(key.fd)
                    open_pipes -= 1
        code = self.proc.wait()
        while self.read(fifo_fd, "console", final=True):
            pass
        self.flush()
        self.wall = time.monotonic() - self.t0
        return code, killed

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)

    def read(self, fd, name, final=False):
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return not final
        if not data:
            return False
        self.feed(name, data)
        return True

    def feed(self, name, data):
        """Splits data into lines; each byte is looked at once."""
        part, start = self.partial[name], 0
        while True:
            nl = data.find(b"\n", start)
            piece = data[start:] if nl < 0 else data[start:nl]
            room = LINE_MAX - len(part)
            if len(piece) > room:
                self.long[name] += len(piece) - max(room, 0)
                piece = piece[:max(room, 0)]
            part += piece
            if nl < 0:
                return
            self.end_line(name)
            part = self.partial[name]
            start = nl + 1

    def end_line(self, name):
        raw, cut = bytes(self.partial[name]), self.long[name]
        self.partial[name], self.long[name] = bytearray(), 0
        text = raw.decode("utf-8", "replace")
        if cut:
            self.cut[name][0] += 1
            self.cut[name][1] += cut
            text += f" [... {cut} bytes cut]"
        self.line(name, text)

    def flush(self):
        for name in self.partial:
            if self.partial[name] or self.long[name]:
                self.end_line(name)

    def line(self, name, text):
        now = time.monotonic() - self.t0
        if self.kept[name] + len(text) > STREAM_MAX:
            self.cut[name][1] += len(text)  # over the stream's cap: counted only
        else:
            self.kept[name] += len(text) + 1
            self.streams[name].append((now, text))
        if name == "console":
            self.on_console_line(self, now, consolelog.clean_line(text))

    def type_on_hvc0(self, text):
        """The token, typed once per cell (the ready line may come again,
        from anything that prints it), without blocking: a VMM that does
        not read its stdin cannot stall the runner."""
        if self.typed:
            return
        self.typed = True
        try:
            os.write(self.proc.stdin.fileno(), text.encode())
        except OSError:
            pass

    def limits_note(self):
        """What was cut, or "" (results.json and a check say it)."""
        parts = [f"{name}: {lines} line(s) cut at {LINE_MAX} bytes, {nbytes} bytes not kept"
                 for name, (lines, nbytes) in self.cut.items() if lines or nbytes]
        return "; ".join(parts)

    def text(self, name):
        return "\n".join(t for _, t in self.streams[name]) + "\n"


WALL_MARKS = {"run_init": "as init process", "init_start": "VMMCI: init start",
              "hvc0_ready": "VMMCI: hvc0 ready", "done": "VMMCI: done"}


def start_iperf3_server(prefix):
    """iperf3 -s on the tap's host side, returned once it says it listens."""
    p = subprocess.Popen(prefix + ["iperf3", "-s", "-B", HOST_IP, "--forceflush"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    seen = b""
    while b"Server listening" not in seen and p.poll() is None:
        if not sel.select(timeout=30):
            break
        seen += os.read(p.stdout.fileno(), 4096)
    if b"Server listening" not in seen:
        p.kill()
        p.wait()
        raise RuntimeError(f"iperf3 -s did not start: {seen.decode(errors='replace')}")
    return p


def cell_expectations(cell, emulated, net_reason, token):
    k = cell.kernel
    userspace, why = True, ""
    if emulated and not k.patched:
        userspace = False
        why = ("not possible on this host, needs hardware-assisted KVM (guest ring 0 is "
               "emulated here and this kernel has no host workaround: "
               + ("a user's kernel is never patched)" if k.source == "user" else "built without it)"))
    msi = None
    if k.variant:
        msi = k.msi and cell.mode == "msix"
    elif cell.mode == "intx":
        msi = False  # the VMM offers no MSI-X at all: every kernel must use INTx
    return consolelog.Expect(msi=msi, cpus=cell.cpus, net=not net_reason, net_skip=net_reason,
                             userspace=userspace, userspace_skip=why, full=cell.full,
                             token=token, acpi=k.acpi_only, boot=cell.boot)


def cmdline_for(cell, net, token, append=""):
    k = cell.kernel
    clear = clearcpuid_for(k.version) + "".join(f",{b}" for b in cell.extra_clearcpuid)
    words = ["console=hvc0", "console=ttyS0", "reboot=k", "panic=-1", "printk.time=1",
             "console_msg_format=syslog",  # each line's log level, for kernel-log-level
             "clearcpuid=" + clear, f"vmmci.token={token}", f"vmmci.host={HOST_IP}"]
    if net:
        words.append(f"ip={GUEST_IP}::{HOST_IP}:{NETMASK}:vm:eth0:off")
    if cell.full:
        words.append("vmmci.full=1")
    if k.acpi_only:
        words.append("vmmci.off=poweroff")  # ends through ACPI S5, not the i8042
    if append:
        words.append(append)
    return " ".join(words)


# The virtio-fs tags of vmm-ci --share and --root-share (ci-init.sh mounts them).
SHARE_TAG = "vmmci-share"
ROOT_TAG = "vmmci-root"


def vmm_argv(cell, vmm, initrd, disk, tools, fifo, cmdline, tap, timeout, extra=(), fs=()):
    argv = [vmm, "--kernel", cell.kernel_path, "--boot", "pvh" if cell.boot == "pvh" else "linux",
            "--initrd", initrd, "--memory", "256",
            "--cpus", str(cell.cpus), "--irq-mode", cell.mode, "--disk", disk, "--rng",
            "--console", "virtio", "--console-log", fifo, "--stats", "-v",
            "--timeout", str(timeout), "--no-default-cmdline", "--cmdline", cmdline]
    if tools:
        argv += ["--disk", tools + ",ro"]
    if tap:
        argv += ["--net", "tap=" + tap]
    for f in fs:
        argv += ["--fs", f]
    return argv + list(extra)


def run_cell(cell, index, ctx):
    """Runs one cell; returns its result dict (results.json's "cells" entry).
    ctx: vmm, initrd, tools, out (dir), timeout, emulated, net_reason, remote
    (the cell runs whole on the emulated KVM host: vmmci/remote.py)."""
    if getattr(ctx, "remote", False):
        from vmmci import remote
        return remote.run_cell_there(cell, index, ctx)
    load = round(os.getloadavg()[0], 2)
    cdir = os.path.join(ctx.out, "cells", cell.id)
    os.makedirs(cdir, exist_ok=True)
    token = f"vmmci{os.getpid() % 100000}x{index}"
    e = cell_expectations(cell, ctx.emulated, ctx.net_reason, token)
    e.levels = True  # cmdline_for asks for console_msg_format=syslog
    e.commands = getattr(ctx, "commands", ())
    e.command_timeout = getattr(ctx, "run_timeout", 0)
    fs = getattr(ctx, "fs", ())  # (/init's check, ./vmm --fs value)
    e.shares = tuple(check for check, _ in fs)
    # The user's commands may each take their whole timeout, on top.
    limit = ctx.timeout + len(e.commands) * e.command_timeout
    disk = os.path.join(cdir, "vda.img")
    make_partitioned_disk(disk)
    fifo = os.path.join(cdir, "console.fifo")
    if os.path.exists(fifo):
        os.unlink(fifo)
    os.mkfifo(fifo)
    cmdline = cmdline_for(cell, not ctx.net_reason, token, ctx.append)
    marks = {}

    def on_line(session, now, text):
        for name, needle in WALL_MARKS.items():
            if name not in marks and needle in text:
                marks[name] = round(now, 3)
        if "VMMCI: hvc0 ready" in text:
            session.type_on_hvc0(token + "\n")

    netns = NetNs(f"vmmci-{os.getpid()}-{index}") if not ctx.net_reason else None
    iperf = None
    try:
        prefix = []
        if netns:
            netns.__enter__()
            prefix = netns.prefix()
            if cell.full:
                iperf = start_iperf3_server(prefix)
        argv = prefix + vmm_argv(cell, ctx.vmm, ctx.initrd, disk, ctx.tools if cell.full else None,
                                 fifo, cmdline, netns.tap if netns else None, limit,
                                 ctx.vmm_args, [value for _, value in fs])
        session = Session(argv, fifo, on_line)
        code, killed = session.run(limit + 60)
    finally:
        if iperf:
            iperf.terminate()
            iperf.wait()
        if netns:
            netns.__exit__()
        os.unlink(fifo)
    for name, fname in (("console", "console.log"), ("hvc0", "hvc0.log"), ("stderr", "vmm.stderr")):
        with open(os.path.join(cdir, fname), "w") as f:
            f.write(session.text(name))
    c, stats, checks = consolelog.evaluate(session.text("console"),
                                           session.text("console") + session.text("hvc0"),
                                           session.text("stderr"), code, e)
    checks.append(disk_pattern_check(disk, token, e.userspace))
    if killed:
        checks.append(consolelog.Check("runner", consolelog.FAIL,
                                       f"killed at the {killed} ({limit + 60} s)", "host"))
    cut = session.limits_note()
    if cut:  # the guest's right to print, said, not failed on
        checks.append(consolelog.Check("output-limits", consolelog.PASS,
                                       f"kept within the runner's limits: {cut}", "host"))
    os.unlink(disk)
    result = cell_result(cell, e, c, stats, checks, code, session, marks, cmdline, argv)
    result["stop"] = consolelog.stop_cause(c, session.text("stderr"), code).to_dict()
    result["host_loadavg_at_start"] = load
    return result


def run_cell_auto_clearcpuid(cell, index, ctx, log, tries=8):
    """--auto-clearcpuid: a user's kernel that stops at an instruction this
    host's ring 0 does not know is run again with the clearcpuid= bits the
    VMM's crash hint names, until it gets past them (at most `tries` runs).
    Never for the project's own kernels: their command line is the one under
    test. The report says which bits were added and why."""
    added, why = [], []
    while True:
        result = run_cell(cell, index, ctx)
        stop = result.get("stop") or {}
        new = [b for b in stop.get("clearcpuid", []) if b not in added]
        if (cell.kernel.source != "user" or stop.get("kind") != "emulation-failure" or not new
                or len(added) >= tries):
            break
        added += new
        why.append(f"{','.join(map(str, new))} after: {stop.get('detail', '')}")
        log(f"{cell.id}: --auto-clearcpuid: again with clearcpuid bits "
            f"{','.join(map(str, added))} added")
        cell = dataclasses.replace(cell, extra_clearcpuid=tuple(added))
    if added:
        result["auto_clearcpuid"] = {"added": added, "why": why}
        result["checks"].append(consolelog.Check(
            "auto-clearcpuid", consolelog.PASS, f"added clearcpuid bits {added}",
            "host", info="--auto-clearcpuid: " + " | ".join(why)).to_dict())
    return result


# A userspace process killed by SIGSEGV in a 2-vCPU guest on a host that
# emulates ring 0: measured (guests/linux/README.md, "2 vCPUs: userspace
# crashes on this host") with and without nopv and every KVM PV feature,
# never with 1 vCPU: the host's, not the VMM's. Such a cell runs once more.
HOST_SEGV = re.compile(r"^\S+\[\d+\]: segfault at [0-9a-f]+ ip [0-9a-f]+ sp [0-9a-f]+ error \d+ in ")


def host_userspace_crash(result, console_text, ctx):
    """The first line of that known crash in a failed cell, or ""."""
    if result["result"] == "pass" or not ctx.emulated or result["cpus"] < 2:
        return ""
    for raw in console_text.splitlines():
        line = consolelog.clean_line(raw)
        body = consolelog.DMESG_TS.sub(r"\2", line)
        if HOST_SEGV.search(body) and not body.startswith("init[1]:"):
            return body
    return ""


def run_cell_once_more_on_host_crash(run, cell, index, ctx, log):
    """run(cell, index, ctx), and once more when the first run failed by the
    known host crash; the second run's verdict stands, the first is said."""
    result = run(cell, index, ctx)
    with open(os.path.join(ctx.out, "cells", cell.id, "console.log"), errors="replace") as f:
        crash = host_userspace_crash(result, f.read(), ctx)
    if not crash:
        return result
    log(f"{cell.id}: a userspace process crashed ({crash}), a known condition of this host "
        "with 2 vCPUs: running the cell once more")
    failed = [x["name"] for x in result["checks"] if x["status"] == "fail"]
    result = run(cell, index, ctx)
    result["host_rerun"] = {"first_failed": failed, "crash": crash}
    result["checks"].append(consolelog.Check(
        "host-rerun", consolelog.PASS, "the cell ran twice", "host",
        info=f"host-inherited: first run failed {', '.join(failed)} after a userspace crash "
        f"({crash}; 2 vCPUs on a host that emulates ring 0, guests/linux/README.md); "
        "this is the second run").to_dict())
    return result


def proc_interrupts_by_device(c):
    """The guest's /proc/interrupts virtio lines, under blk/net/console/rng."""
    out = {}
    for line in c.interrupts:
        words = line.split()
        name = words[-1].split("-")[0].rstrip(",") if words else ""
        out.setdefault(c.virtio.get(name, name or "?"), []).append(" ".join(words))
    return out


def error_result(cell, exc):
    """The result of a cell whose run or parse raised: that cell fails,
    with what was raised; the other cells and the reports go on."""
    what = f"{type(exc).__name__}: {exc}"[:2000]
    return {
        **cell_identity(cell), "result": "fail", "userspace": "not run",
        "boot": {"run_init_dmesg_s": None, "wall_s": {}, "vmm_wall_s": 0, "vmm_exit": None},
        "irq": {}, "proc_interrupts": {},
        "checks": [consolelog.Check("runner", consolelog.FAIL,
                                    f"the runner failed on this cell: {what}", "host").to_dict()],
        "fio": None, "iperf3": None, "cmdline": "", "argv": [],
        "stop": {"kind": "unknown", "detail": what, "clearcpuid": []},
    }


def cell_identity(cell):
    """The fields that name a cell in results.json, whatever its result."""
    return {"id": cell.id, "kernel": cell.kernel.to_dict(), "version": cell.kernel.version,
            "variant": cell.kernel.variant or None, "mode": cell.mode, "cpus": cell.cpus,
            "repeat": cell.repeat, "full": cell.full}


def cell_result(cell, e, c, stats, checks, code, session, marks, cmdline, argv):
    failed = [x for x in checks if x.status == consolelog.FAIL]
    return {
        **cell_identity(cell),
        "result": "fail" if failed else "pass",
        "userspace": "ran" if e.userspace else e.userspace_skip,
        "boot": {"run_init_dmesg_s": c.run_init, "wall_s": marks,
                 "vmm_wall_s": round(session.wall, 3), "vmm_exit": code},
        "irq": consolelog.irq_paths(stats),
        "proc_interrupts": proc_interrupts_by_device(c),
        "checks": [x.to_dict() for x in checks],
        "fio": consolelog.fio_figures(c), "iperf3": consolelog.iperf_figures(c),
        "cmdline": cmdline, "argv": argv,
    }
