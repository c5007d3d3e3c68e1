"""From a cell's recorded output to checks.

Inputs, all text: the guest's serial console (ttyS0: kernel log and the
/init's "VMMCI:" protocol lines, see guests/linux/ci-init.sh), the hvc0
stream (the VMM's stdout with --console virtio), the VMM's stderr (with
--stats) and its exit code. Nothing here runs anything, so every rule is
unit-tested on recorded logs (tests/ci/). What the VMM's stderr says (its
counters, its cpu: lines, why the VM stopped) is read by vmmlog.py; its
names used here are importable from here too.
"""
import re
from dataclasses import dataclass, field, asdict

from . import ktap, usercmd
from .vmmlog import clean_line, intx_pin, irq_paths, parse_host_cpu, parse_stats, stop_cause

PASS, FAIL, SKIP = "pass", "fail", "skip"

DMESG_TS = re.compile(r"^\[\s*(\d+\.\d+)\]\s?(.*)$")
# console_msg_format=syslog (vmm-ci passes it): "<N>" before each kernel
# line, N = facility * 8 + level (0 emerg, 1 alert, 2 crit, ... 7 debug).
SYSLOG_LEVEL = re.compile(r"^<(\d{1,3})>")
RUN_INIT = re.compile(r"Run (\S+) as init process")
MARKER = "VMMCI: "  # at the start of a line's text, never inside it
USER_START = re.compile(r"run \d+ start$")  # a marker's text: the first user command

# Lines that must never appear (the list, plus oopses).
BAD_LINES = [
    ("WARNING:", re.compile(r"\bWARNING:")),
    ("BUG:", re.compile(r"\bBUG:")),
    ("nobody cared", re.compile(r"nobody cared")),
    ("soft lockup", re.compile(r"soft lockup")),
    ("hung task", re.compile(r"blocked for more than \d+ seconds|hung_task")),
    ("Oops", re.compile(r"\bOops\b")),
    ("general protection fault", re.compile(r"general protection fault")),
    # ACPICA's own complaints about the tables (the VMM's to fix), any kernel.
    ("ACPI Error/Warning", re.compile(r"ACPI (?:BIOS )?(?:Error|Warning)|ACPI Exception")),
]

VIRTIO_TYPES = {1: "net", 2: "blk", 3: "console", 4: "rng", 26: "fs"}


@dataclass
class Check:
    name: str
    status: str  # PASS, FAIL or SKIP
    detail: str = ""
    level: str = "kernel"  # kernel, userspace or host
    # A condition this cell inherits from the host, not the VMM's doing
    # (reported, never failed on): the report's "host-inherited" lines and
    # JUnit's system-out.
    info: str = ""
    stdout: str = ""  # a user's command: what it printed (JUnit system-out/err)
    stderr: str = ""
    time: object = None  # seconds (a KUnit case), for JUnit

    def to_dict(self):
        return asdict(self)


@dataclass
class Expect:
    """What a cell should show, from how it was run."""
    msi: object = None  # True: MSI-X expected; False: INTx; None: not known (user kernel)
    cpus: int = 1
    devices: tuple = ("blk", "console", "net", "rng")
    net: bool = True  # a tap was attached (net_skip says why not)
    net_skip: str = ""
    userspace: bool = True  # /init can make system calls (userspace_skip says why not)
    userspace_skip: str = ""
    full: bool = False  # fio and iperf3 too
    token: str = ""
    # The host's TSC rate when the VMM's stderr does not say it (cells
    # recorded before the VMM printed its "cpu:" line at -v).
    host_tsc_khz: int = 0
    acpi: bool = False  # a kernel that finds the machine through ACPI only
    commands: tuple = ()  # the user's commands (vmm-ci --run), in order
    command_timeout: int = 0
    levels: bool = False  # the console carries log levels (console_msg_format=syslog)
    boot: str = "bzimage"  # or pvh
    shares: tuple = ()  # /init's share checks (vmm-ci --share: "share", --root-share: "root-share")


@dataclass
class Console:
    # (dmesg seconds or None, text): what our checks read. From protocol 2
    # on, only the lines before the first user command; the rest are in
    # `after` (the commands' own lines, and whatever else came then).
    lines: list = field(default_factory=list)
    after: list = field(default_factory=list)
    run_init: object = None  # dmesg seconds at "Run /init as init process"
    init_path: str = ""
    markers: list = field(default_factory=list)  # text after "VMMCI: "
    checks: dict = field(default_factory=dict)  # name -> (ok: bool, detail)
    data: list = field(default_factory=list)  # (name, value)
    interrupts: list = field(default_factory=list)
    levels: list = field(default_factory=list)  # per line: its log level, or None
    virtio: dict = field(default_factory=dict)  # virtioN -> type name
    done: object = None  # ("ok", n) or ("FAIL", detail)
    protocol: object = None
    user_started: bool = False  # a "run N start" was seen: the user's commands run

    def commands_fenced(self):
        """From protocol 2 on, /init says all of ours before the first user
        command, so nothing after it is ours to judge (issue 26)."""
        return self.user_started and (self.protocol or "1") != "1"


def parse_console(text):
    c = Console()
    for raw in text.splitlines():
        line = clean_line(raw)
        lv = SYSLOG_LEVEL.match(line)
        c.levels.append(int(lv.group(1)) & 7 if lv else None)
        if lv:
            line = line[lv.end():]
        m = DMESG_TS.match(line)
        ts, body = (float(m.group(1)), m.group(2)) if m else (None, line)
        if body.startswith(MARKER):
            parse_marker(c, body[len(MARKER):])  # the first "run N start" fences
        if c.commands_fenced():
            c.levels.pop()
            c.after.append((ts, body))
            continue
        c.lines.append((ts, body))
        m = RUN_INIT.search(body)
        if m and c.run_init is None:
            c.run_init, c.init_path = ts, m.group(1)
    return c


def parse_marker(c, text):
    """One "VMMCI:" line of /init's. From protocol 2 on, /init says all of
    ours (checks, data, the verdict) before the first user command: once
    one runs, only its own "run N ..." lines are taken, whatever else is
    printed (issue 26: a command once turned a failed check into a pass).
    A check, the verdict or the protocol said twice keeps its first word."""
    word, _, rest = text.partition(" ")
    if word == "run":
        c.user_started = c.user_started or bool(USER_START.match(text))
    elif c.commands_fenced():
        return
    if (word == "protocol" and c.protocol is not None) or (word == "done" and c.done) or (
            word == "check" and rest.partition(" ")[0] in c.checks):
        return
    c.markers.append(text)
    if word == "protocol":
        c.protocol = rest
    elif word == "check":
        name, _, tail = rest.partition(" ")
        verdict, _, detail = tail.partition(" ")
        c.checks[name] = ({"ok": True, "skip": None}.get(verdict, False), detail)
    elif word == "data":
        name, _, value = rest.partition(" ")
        c.data.append((name, value))
    elif word == "interrupts" and not rest.startswith("header "):
        c.interrupts.append(rest)
    elif word == "virtio":
        name, _, devid = rest.partition(" ")
        try:
            c.virtio[name] = VIRTIO_TYPES.get(int(devid, 16), devid)
        except ValueError:
            c.virtio[name] = devid
    elif word == "done":
        verdict, _, detail = rest.partition(" ")
        c.done = (verdict, detail)


def first_line(c, pattern):
    """The first (dmesg seconds, text) whose text matches pattern, or None."""
    rx = re.compile(pattern)
    for ts, body in c.lines:
        if rx.search(body):
            return ts, body
    return None


# ---- the checks ----

def kernel_checks(c, stats, e, host):
    out = []
    if c.run_init is not None or first_line(c, RUN_INIT.pattern):
        out.append(Check("boot", PASS, f"Run {c.init_path} as init process at "
                         f"{fmt_ts(c.run_init)} (dmesg)"))
    else:
        out.append(Check("boot", FAIL, "no \"Run /init as init process\" on the console"))
    out += device_checks(c, stats, e)
    out.append(irq_path_check(stats, e))
    out.append(bad_lines_check(c))
    if e.cpus > 1:
        out.append(smp_check(c, e.cpus))
    out.append(firmware_bug_check(c, host))
    out.append(tsc_check(c, host))
    if e.acpi:
        out.append(acpi_check(c, e))
    if e.levels:
        out.append(log_level_check(c))
    out += ktap.checks(c.lines, Check, {"pass": PASS, "skip": SKIP, "fail": FAIL,
                                        "crashed": FAIL, "no-tests": FAIL})
    return out


# Lines at crit, alert or emerg that are not trouble: (regex, why). The
# kernel announces an orderly end at KERN_EMERG (kernel/reboot.c), which
# every cell's /init asks for; the host itself has caused none so far on
# our AMD and Intel boxes (its conditions are warnings or info lines:
# no-firmware-bug, tsc).
LOG_LEVEL_ALLOWED = [
    (r"^reboot: (Restarting system|Power down)$",
     "the kernel's own announcement of the reboot -f / poweroff -f /init asked for"),
]


def log_level_check(c):
    """KernelCI's baseline rule: any crit (2), alert (1) or emerg (0) kernel
    line fails the cell, unless the allow-list says the host causes it."""
    if not any(lv is not None for lv in c.levels):
        return Check("kernel-log-level", FAIL, "no log levels on the console (the kernel did "
                     "not take console_msg_format=syslog), so they cannot be judged")
    hits, allowed = [], []
    for (_, body), lv in zip(c.lines, c.levels):
        if lv is None or lv > 2:
            continue
        why = next((w for rx, w in LOG_LEVEL_ALLOWED if re.search(rx, body.strip())), None)
        (allowed if why else hits).append(f"<{lv}> {body.strip()}")
    if hits:
        return Check("kernel-log-level", FAIL, " | ".join(hits[:5]) +
                     (f" (+{len(hits) - 5} more)" if len(hits) > 5 else ""))
    return Check("kernel-log-level", PASS, "no crit, alert or emerg line" +
                 (f" but the allowed {'; '.join(dict.fromkeys(allowed))}" if allowed else ""))




def acpi_check(c, e):
    """A kernel without MP-table parsing found the machine in the ACPI
    tables: the RSDP where the VMM put it, the MADT's IOAPIC and CPUs, and
    IOAPIC routing for PCI (from the DSDT's _PRT); PVH cells took the RSDP
    from the start info."""
    wanted = [("\"ACPI: RSDP 0x00000000000E0000\"", r"ACPI: RSDP 0x0+E0000"),
              ("the MADT (\"ACPI: APIC\")", r"ACPI: APIC 0x"),
              ("\"IOAPIC[0]: apic_id\"", r"IOAPIC\[0\]: apic_id \d+"),
              ("\"ACPI: Using IOAPIC for interrupt routing\"",
               r"ACPI: Using IOAPIC for interrupt routing"),
              ("the root bridge \"PCI Root Bridge [PCI0]\"", r"PCI Root Bridge \[PCI0\]")]
    if e.cpus > 1:
        wanted.append((f"\"ACPI: LAPIC_NMI\" and {e.cpus} CPUs from the MADT",
                       rf"smp: Brought up \d+ nodes?, {e.cpus} CPUs"))
    return lines_check("acpi", c, wanted)


def fmt_ts(ts):
    return "?" if ts is None else f"{ts:.3f} s"


def lines_check(name, c, wanted):
    """PASS when every (label, regex) of wanted matches some console line."""
    found = [(label, first_line(c, rx)) for label, rx in wanted]
    missing = [label for label, hit in found if not hit]
    if missing:
        return Check(name, FAIL, "missing: " + ", ".join(missing))
    return Check(name, PASS, "; ".join(dict.fromkeys(hit[1].strip() for _, hit in found)))


def rng_check(c, stats):
    """crng init completed and the virtio-rng device really delivered bytes."""
    crng = first_line(c, r"crng init done")
    nbytes = sum(stats.rng_bytes.values()) if stats.rng_bytes else None
    ok = crng and (nbytes is None or nbytes > 0)
    detail = f"crng init done at {fmt_ts(crng[0])}" if crng else "no \"crng init done\""
    if nbytes is not None:
        detail += f"; virtio-rng delivered {nbytes} bytes"
    return Check("virtio-rng", PASS if ok else FAIL, detail)


def device_checks(c, stats, e):
    out = []
    if "blk" in e.devices:
        out.append(lines_check("virtio-blk", c, [
            ("\"virtio_blk ...: [vda]\" probe", r"virtio_blk virtio\d+: \[vda\]"),
            ("partition scan \"vda: vda1 vda2\"", r"^\s*vda: vda1 vda2")]))
    if "console" in e.devices:
        out.append(lines_check("virtio-console", c, [
            ("\"console [hvc0] enabled\"", r"console \[hvc0\] enabled")]))
    if "net" in e.devices:
        out.append(Check("virtio-net", SKIP, e.net_skip) if not e.net else
                   lines_check("virtio-net", c, [
                       ("\"IP-Config: Complete:\"", r"IP-Config: Complete:"),
                       ("\"device=eth0\" (ip= on the tap)", r"device=eth0")]))
    if "rng" in e.devices:
        out.append(rng_check(c, stats))
    return out


def irq_path_check(stats, e):
    if not stats.seen:
        return Check("irq-path", FAIL, "no --stats lines from the VMM")
    paths = irq_paths(stats)
    desc = ", ".join(f"{n} {p['path']} (msi {p['msi']}, "
                     + (f"irqfd binds {p['irqfd_binds']}, " if p.get("irqfd_binds") else "")
                     + f"pin {p['pin']} {p['intx']})"
                     for n, p in sorted(paths.items()))
    bad = [n for n, p in paths.items() if p["path"] in ("none", "mixed")]
    if e.msi is not None:
        want = "msix" if e.msi else "intx"
        bad += [n for n, p in paths.items() if p["path"] not in (want, "none", "mixed")]
        desc = f"expected {want} only: " + desc
    if not paths:
        return Check("irq-path", FAIL, "no virtio devices in --stats")
    return Check("irq-path", FAIL if bad else PASS,
                 (f"wrong path for {', '.join(sorted(set(bad)))}; " if bad else "") + desc)


def bad_lines_check(c):
    hits = [body for _, body in c.lines for _, rx in BAD_LINES if rx.search(body)]
    if hits:
        return Check("kernel-log-clean", FAIL, " | ".join(hits[:5]) +
                     (f" (+{len(hits) - 5} more)" if len(hits) > 5 else ""))
    return Check("kernel-log-clean", PASS,
                 "no " + ", ".join(n for n, _ in BAD_LINES) + " line")


SMP_TROUBLE = re.compile(r"failed to boot|do_boot_cpu failed|APIC ID mismatch|CPU\d+ didn't come online|"
                         r"smpboot: .*(?:not responding|stuck)")


def smp_check(c, cpus):
    up = first_line(c, r"smp: Brought up \d+ nodes?, (\d+) CPUs?")
    n = int(re.search(r"(\d+) CPUs?", up[1]).group(1)) if up else 0
    detail = up[1] if up else f"no \"smp: Brought up ... {cpus} CPUs\""
    why = list(dict.fromkeys(body for _, body in c.lines if SMP_TROUBLE.search(body)))
    if why:
        detail += " | " + " | ".join(why[:3])
    return Check("smp", PASS if n == cpus and not why else FAIL, detail)


TSC_P0 = "TSC doesn't count with P0 frequency"


def firmware_bug_check(c, host):
    """[Firmware Bug] lines are the VMM's to fix (the AMD TSC line: HWCR.
    TscFreqSel, which KVM lets the VMM set), unless the VMM said KVM would
    not take it: then the line is the host's, as on the host's own kernel."""
    hits = list(dict.fromkeys(body for _, body in c.lines if "[Firmware Bug]" in body))
    if not hits:
        return Check("no-firmware-bug", PASS, "no [Firmware Bug] line")
    inherited = [h for h in hits if TSC_P0 in h and host.hwcr_missing]
    own = [h for h in hits if h not in inherited]
    if own:
        hint = ("; the VMM did not set HWCR.TscFreqSel (MSR 0xc0010015 bit 24) and did "
                "not say KVM refused it") if any(TSC_P0 in h for h in own) else ""
        return Check("no-firmware-bug", FAIL, " | ".join(own[:3]) + hint)
    return Check("no-firmware-bug", PASS, "no [Firmware Bug] line of the VMM's making",
                 info=f"host-inherited: {inherited[0].strip()} ({host.hwcr_missing})")


TSC_UNSYNCED = "Marking TSC unstable due to TSCs unsynchronized"
TSC_BROKEN = re.compile(r"Marking TSC unstable|tsc: Unable to calibrate")
TSC_PIT = re.compile(r"tsc: Using PIT calibration value|Fast TSC calibration using PIT")
TSC_RATE = re.compile(r"tsc: (?:Detected|Refined TSC clocksource calibration:) ([\d.]+) MHz")
TSC_TOLERANCE = 0.01  # what Linux's own refinement accepts (tsc_refine_calibration_work)


def tsc_check(c, host):
    """The guest's idea of the TSC rate against the host's (the VMM's -v
    "cpu:" line): a rate more than 1 % off, or a TSC Linux gave up on,
    fails whatever the source (but for the cross-CPU warp Linux finds on
    the emulated KVM host, which is that host's: said, not failed on); a
    rate calibrated against the PIT that came out right passes, and says so (on AMD without kvmclock Linux has no
    other source: it takes the rate from CPUID only on Intel)."""
    broken = list(dict.fromkeys(body for _, body in c.lines if TSC_BROKEN.search(body)))
    rates = [(ts, body) for ts, body in c.lines if TSC_RATE.search(body)]
    inherited = [b for b in broken if TSC_UNSYNCED in b and host.emulated_host]
    if [b for b in broken if b not in inherited]:
        return Check("tsc", FAIL, " | ".join(broken[:3]))
    if not rates:
        return Check("tsc", FAIL, "no \"tsc: Detected ... MHz\" line")
    line = rates[-1][1].strip()
    mhz = float(TSC_RATE.search(line).group(1))
    if not host.tsc_khz:
        return Check("tsc", FAIL, f"{line}; the host's TSC rate is unknown (no \"cpu: ..., "
                     "TSC N kHz\" line from the VMM's -v), so it cannot be judged")
    off = abs(mhz * 1000 - host.tsc_khz) / host.tsc_khz
    detail = f"{line}: {off:.3%} from the host's {host.tsc_khz / 1000:.3f} MHz"
    if off > TSC_TOLERANCE:
        return Check("tsc", FAIL, detail + f" (more than {TSC_TOLERANCE:.0%}: every time the "
                     "guest measures is off by as much)")
    pit = first_line(c, TSC_PIT.pattern)
    info = (f"calibrated against the PIT ({pit[1].strip()}): no kvmclock and no CPUID rate "
            f"the guest reads on {host.vendor or 'this CPU'}") if pit else ""
    if inherited:
        info = (f"host-inherited: {inherited[0].strip()} (the emulated KVM host, "
                f"{host.emulated_host}: its TCG CPU has no invariant TSC; seen with 2 vCPUs "
                "of the 6.1 recipe kernels, never with 1)")
    return Check("tsc", PASS, detail, info=info)


IOAPIC_GSI = re.compile(r"IO-APIC\s+(\d+)-fasteoi")


def wrong_inputs(c, stats, lines):
    """Each virtio device the guest hears on an IOAPIC input other than the
    one the VMM wires it to (a wrong MP-table or _PRT entry), by its type
    ("VMMCI: virtio virtioN TYPE") and the --stats slots of that type."""
    out = []
    for line in lines:
        m = IOAPIC_GSI.search(line)
        if not m:
            continue
        gsi = int(m.group(1))
        for name in re.findall(r"\b(virtio\d+)\b", line[m.end():]):
            kind = c.virtio.get(name)
            pins = {intx_pin(d["slot"]) for dev, d in stats.devices.items()
                    if kind and re.match(rf"virtio-{kind}\d*$", dev)}
            if not pins:
                pins = {intx_pin(d["slot"]) for d in stats.devices.values()}
            if gsi not in pins:
                out.append(f"the guest hears {name} ({kind or '?'}) on IOAPIC input {gsi}, "
                           f"the VMM wires it to {', '.join(map(str, sorted(pins)))}")
    return out


def proc_interrupts_check(c, e, stats=None):
    """The virtio lines of the guest's /proc/interrupts: PCI-MSI or IO-APIC;
    on IO-APIC, the input the guest listens on must be one the VMM wires a
    virtio device to (the MP table's or the _PRT's word against the
    device's: a wrong table entry shows here first)."""
    if not c.interrupts:
        return Check("irq-proc", FAIL, "no virtio line from /proc/interrupts", "userspace")
    kinds = {}
    for line in c.interrupts:
        kind = "msix" if "PCI-MSI" in line else "intx" if "IO-APIC" in line else "other"
        kinds.setdefault(kind, []).append(line)
    desc = "; ".join(f"{k}: {len(v)} line(s)" for k, v in sorted(kinds.items()))
    if e.msi is None:
        ok = "other" not in kinds
    else:
        ok = set(kinds) == {"msix" if e.msi else "intx"}
    if stats is not None and stats.devices and "intx" in kinds:
        wrong = wrong_inputs(c, stats, kinds["intx"])
        if wrong:
            ok = False
            desc += "; " + "; ".join(wrong)
    return Check("irq-proc", PASS if ok else FAIL,
                 desc + " | " + " | ".join(re.sub(r"\s+", " ", x) for x in c.interrupts),
                 "userspace")


USERSPACE_CHECKS = ("disk-pattern", "hwrng", "hvc0-echo", "ping")
FULL_CHECKS = ("tools-disk", "fio", "iperf3")


def userspace_checks(c, hvc_text, e, stats=None):
    names = list(USERSPACE_CHECKS) + (list(FULL_CHECKS) if e.full else []) + list(e.shares)
    names += ["irq-proc", "hvc0-host", "init-verdict"]
    if not e.userspace:
        return [Check(n, SKIP, e.userspace_skip, "userspace") for n in names]
    out = []
    for name in names[:-3]:
        if name in ("ping", "iperf3") and not e.net:
            out.append(Check(name, SKIP, e.net_skip, "userspace"))
        elif name in c.checks:
            ok, detail = c.checks[name]
            out.append(Check(name, SKIP if ok is None else PASS if ok else FAIL, detail,
                             "userspace"))
        else:
            out.append(Check(name, FAIL, "not reported by /init", "userspace"))
    out.append(proc_interrupts_check(c, e, stats))
    # The VMM writes hvc0's output where the serial console goes (stdout, or
    # the --console-log file), so it is looked for in both streams.
    echo = f"hvc0-echo: {e.token}"
    seen = any(clean_line(x) == echo for x in hvc_text.splitlines())
    out.append(Check("hvc0-host", PASS if seen else FAIL,
                     f"the VMM's console output {'has' if seen else 'lacks'} \"{echo}\", "
                     "which /init wrote to /dev/hvc0 only", "userspace"))
    if c.done is None:
        detail = ("no \"VMMCI: done\" line" +
                  ("" if c.protocol else " (and no \"VMMCI: protocol\": /init never ran)"))
        out.append(Check("init-verdict", FAIL, detail, "userspace"))
    else:
        out.append(Check("init-verdict", PASS if c.done[0] == "ok" else FAIL,
                         " ".join(c.done), "userspace"))
    return out


def exit_check(code, e, stderr_text, c=None):
    """0 when /init rebooted; on a host where userspace cannot run, the
    expected end is the panic after init's first system call (exit 4, and
    that panic, not any other way to exit 4)."""
    cause = stop_cause(c or Console(), stderr_text, code)
    # /init ends ACPI cells with poweroff -f: through the FADT's S5.
    end = "poweroff" if e.acpi else "reset"
    want, want_kind = (0, end) if e.userspace else (4, "init-syscall-panic")
    ok = code == want and cause.kind == want_kind
    detail = f"exit {code} ({cause.kind}: {cause.detail})"
    if not ok:
        detail += f"; expected exit {want} ({want_kind})"
    return Check("vmm-exit", PASS if ok else FAIL, detail, "host")


def evaluate(console_text, hvc_text, stderr_text, exit_code, e):
    """Every check of one cell, in report order."""
    c = parse_console(console_text)
    stats = parse_stats(stderr_text)
    checks = kernel_checks(c, stats, e, parse_host_cpu(stderr_text, e))
    checks += userspace_checks(c, hvc_text, e, stats)
    if e.commands:
        runs = usercmd.parse_runs(c.lines + c.after, stderr_text)
        checks += usercmd.command_checks(e.commands, runs, e, e.command_timeout, Check, FAIL,
                                         PASS, SKIP)
    checks.append(exit_check(exit_code, e, stderr_text, c))
    return c, stats, checks


# ---- figures ----

def fio_figures(c):
    """Read/write IOPS and KiB/s from fio's terse v3 line (group_reporting)."""
    for name, value in c.data:
        if name != "fio-terse":
            continue
        f = value.split(";")
        try:
            return {"read_iops": float(f[7]), "read_kib_s": float(f[6]),
                    "write_iops": float(f[48]), "write_kib_s": float(f[47])}
        except (IndexError, ValueError):
            return None
    return None


IPERF = re.compile(r"([\d.]+) ([KMG])bits/sec.*\b(sender|receiver)\b")


def iperf_figures(c):
    """iperf3's summary, in Mbit/s, as the client (guest) printed it."""
    out = {}
    scale = {"K": 1e-3, "M": 1.0, "G": 1e3}
    for name, value in c.data:
        m = IPERF.search(value) if name == "iperf3" else None
        if m:
            out[m.group(3) + "_mbit_s"] = float(m.group(1)) * scale[m.group(2)]
    return out or None
