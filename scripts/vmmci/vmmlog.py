"""The VMM's own lines, from its stderr: the --stats counters and the
interrupt path each device took, the -v "cpu:" lines, and why the VM
stopped (with the guest's panic line). Nothing here runs anything; the
checks of consolelog.py read these."""
import re
from dataclasses import dataclass, field, asdict


def clean_line(raw):
    """One captured line (console or stderr) without its CR and other control bytes."""
    return "".join(ch for ch in raw.rstrip("\r\n") if ch >= " " or ch == "\t").rstrip()


# ---- the VMM's --stats lines ----

@dataclass
class Stats:
    devices: dict = field(default_factory=dict)  # virtio-blk0 -> {slot, notifies, interrupts}
    msi: dict = field(default_factory=dict)  # device name -> delivered (sum over vectors)
    pins: dict = field(default_factory=dict)  # IOAPIC pin -> asserted
    rng_bytes: dict = field(default_factory=dict)
    net: dict = field(default_factory=dict)  # virtio-net0 -> {rx, tx, tx-errors, ...}
    blk: dict = field(default_factory=dict)
    irqfd_binds: dict = field(default_factory=dict)  # device -> binds of a backend's call fd
    calls: dict = field(default_factory=dict)  # device -> backend calls the VMM served
    seen: bool = False


STAT_DEV = re.compile(r"vmm: stats: (virtio-\S+) \(slot (\d+)\): notifies (\d+), interrupts (\d+)")
STAT_MSI = re.compile(r"vmm: stats: MSI (\S+) vector (\d+)\s+delivered (\d+)")
STAT_PIN = re.compile(r"vmm: stats: INTx pin (\d+) .*?asserted (\d+)")
STAT_RNG = re.compile(r"vmm: stats: (virtio-rng\d+): bytes (\d+)")
STAT_NET = re.compile(r"vmm: stats: (virtio-net\d+) \S+: (.*)$")
STAT_BLK = re.compile(r"vmm: stats: (virtio-blk\d+) \S+: (.*)$")
KEYVALS = re.compile(r"([a-z][a-z-]*) (\d+)")
# A queue served by another process (vhost-user): the calls the VMM raised
# itself, and how often the backend's call fd became the vector's irqfd.
STAT_CALLS = re.compile(r"vmm: stats: (virtio-\S+) queue \d+ .*, calls (\d+), irqfd binds (\d+)")


def parse_stats(text):
    s = Stats()
    for line in text.splitlines():
        if "vmm: stats:" not in line:
            continue
        s.seen = True
        if m := STAT_DEV.search(line):
            s.devices[m.group(1)] = {"slot": int(m.group(2)), "notifies": int(m.group(3)),
                                     "interrupts": int(m.group(4))}
        elif m := STAT_MSI.search(line):
            s.msi[m.group(1)] = s.msi.get(m.group(1), 0) + int(m.group(3))
        elif m := STAT_PIN.search(line):
            s.pins[int(m.group(1))] = int(m.group(2))
        elif m := STAT_RNG.search(line):
            s.rng_bytes[m.group(1)] = int(m.group(2))
        elif m := STAT_NET.search(line):
            s.net[m.group(1)] = {k: int(v) for k, v in KEYVALS.findall(m.group(2))}
        elif m := STAT_CALLS.search(line):
            name = m.group(1)
            s.calls[name] = s.calls.get(name, 0) + int(m.group(2))
            s.irqfd_binds[name] = s.irqfd_binds.get(name, 0) + int(m.group(3))
        elif m := STAT_BLK.search(line):
            s.blk[m.group(1)] = {k: int(v) for k, v in KEYVALS.findall(m.group(2))}
    return s


# ---- the VMM's -v "cpu:" lines (vmm/cpu/vcpu.c) ----

@dataclass
class HostCpu:
    vendor: str = ""  # "AMD", "Intel" or "other", as the VMM read KVM's leaf 0
    tsc_khz: int = 0  # KVM_GET_TSC_KHZ: the rate the guest's TSC runs at
    hwcr_missing: str = ""  # why HWCR.TscFreqSel could not be set (KVM's limit)
    emulated_host: str = ""  # the VMM's "host:" line when it ran on the emulated KVM host


CPU_LINE = re.compile(r"vmm: info: cpu: (\w+), TSC (\d+) kHz")
EMULATED_HOST = re.compile(r"vmm: info: host: (emulated \(QEMU .*\))$")
HWCR_MISSING = re.compile(r"vmm: info: cpu: (KVM refused MSR HWCR.*|KVM does not list MSR_K7_HWCR.*)$")


def parse_host_cpu(text, e):
    h = HostCpu(tsc_khz=e.host_tsc_khz)
    for line in text.splitlines():
        if m := CPU_LINE.search(line):
            h.vendor, h.tsc_khz = m.group(1), int(m.group(2)) or h.tsc_khz
        elif m := HWCR_MISSING.search(line):
            h.hwcr_missing = m.group(1)
        elif m := EMULATED_HOST.search(line):
            h.emulated_host = m.group(1)
    return h


def intx_pin(slot):
    """The IOAPIC pin of a device's INTA (devices/pci/pci.h: 16 + slot % 8)."""
    return 16 + slot % 8


def irq_paths(stats):
    """Per virtio device: {"path": "msix"|"intx"|"mixed"|"none", "msi": n, "intx": n}.
    A pin's count belongs to a device only if no other device shares it."""
    owners = {}
    for name, d in stats.devices.items():
        owners.setdefault(intx_pin(d["slot"]), []).append(name)
    paths = {}
    for name, d in stats.devices.items():
        pin = intx_pin(d["slot"])
        msi = stats.msi.get(name, 0)
        intx = stats.pins.get(pin, 0) if len(owners[pin]) == 1 else 0
        # A backend's call fd bound as an irqfd sends MSI-X the VMM never sees.
        binds = stats.irqfd_binds.get(name, 0)
        path = "mixed" if (msi or binds) and intx else "msix" if msi or binds else \
            "intx" if intx else "none"
        paths[name] = {"path": path, "msi": msi, "intx": intx, "pin": pin,
                       "interrupts": d["interrupts"], "irqfd_binds": binds}
    return paths



# ---- why the VM stopped (the VMM's stderr and the guest's console) ----

@dataclass
class StopCause:
    kind: str  # one of STOP_KINDS
    detail: str = ""
    clearcpuid: list = field(default_factory=list)  # bits the VMM's crash hint names

    def to_dict(self):
        return asdict(self)


STOP_KINDS = ("reset", "poweroff", "init-syscall-panic", "panic", "emulation-failure", "triple-fault",
              "kvm-error", "timeout", "interrupted", "host", "seccomp", "guest-status",
              "guest-exit", "unknown")
# The VMM's stop line names who ended the VM ("stop: KIND", vmm/machine/stop.c):
# the kind comes from there, never from the exit code, which the guest
# picks when it ends through the status port (12 is not seccomp then).
VMM_STOP_KINDS = {"reset": "reset", "panic": "panic", "debug-exit": "guest-exit",
                  "guest-status": "guest-status", "crash": "kvm-error", "host": "host",
                  "timeout": "timeout", "interrupted": "interrupted"}
SECCOMP_LINE = re.compile(r"^vmm: error: the .* thread made a system call its seccomp filter "
                          r"forbids")
VCPU_ERROR = re.compile(r"vmm: error: (vCPU \d+: (instruction emulation failed|triple fault|"
                        r"KVM internal error|VM entry failed|unexpected KVM exit).*)$")
INSN_BYTES = re.compile(r"vmm: error:\s+instruction bytes: (.*)$")
HINT = re.compile(r"vmm: error:\s+hint: (.*?); the set measured")
HINT_BIT = re.compile(r"clearcpuid=(\d+) ")
STOPPED = re.compile(r"^vmm: \w+: guest stopped: (.*) \(exit code (\d+)"
                     r"(?:, chosen by the guest)?(?:; stop: ([a-z-]+))?\)$")
PANIC = re.compile(r"Kernel panic - not syncing: (.*)$")
# The fault that ends /init on a host that emulates ring 0 with a kernel
# lacking the host workaround: SYSCALL lands on entry_SYSCALL_64 still at
# CPL 3, so the fault address is the instruction pointer and the error code
# (printed in hex) 0x15, present | user | instruction fetch; init dies of
# SIGSEGV and the kernel panics.
INIT_SEGV = re.compile(r"init\[1\]: segfault at ([0-9a-f]+) ip ([0-9a-f]+) .* error 15")


def stop_cause(c, stderr_text, code):
    """What ended the VM, from the VMM's own lines first (they name the
    vCPU and the instruction), then the guest's panic line."""
    lines = [clean_line(x) for x in stderr_text.splitlines()]
    for i, line in enumerate(lines):
        m = VCPU_ERROR.search(line)
        if not m:
            continue
        what = m.group(2)
        kind = {"instruction emulation failed": "emulation-failure",
                "triple fault": "triple-fault"}.get(what, "kvm-error")
        detail = m.group(1)
        bits = []
        for x in lines[i + 1:i + 4]:
            if b := INSN_BYTES.search(x):
                detail += "; bytes " + b.group(1).strip()
            if h := HINT.search(x):
                detail += "; hint: " + h.group(1)
                bits = [int(v) for v in HINT_BIT.findall(h.group(1) + " ")]
        return StopCause(kind, detail, bits)
    panic = next((body for _, body in c.lines if PANIC.search(body)), None)
    stopped = next((m for x in lines if (m := STOPPED.search(x))), None)
    why = stopped.group(1) if stopped else f"exit {code}"
    if panic:
        seg = next((m for _, body in c.lines if (m := INIT_SEGV.search(body))), None)
        if seg and seg.group(1) == seg.group(2) and "Attempted to kill init" in panic:
            return StopCause("init-syscall-panic",
                             f"{panic.strip()} after init's first system call faulted at "
                             f"entry_SYSCALL_64 (ip = address = {seg.group(1)}, error 15)")
        return StopCause("panic", panic.strip())
    if stopped and stopped.group(3):
        kind = VMM_STOP_KINDS.get(stopped.group(3), "unknown")
    elif stopped and "status port" in why:
        kind = "guest-status"  # a line from before the VMM named the kind
    elif any(SECCOMP_LINE.search(x) for x in lines):
        kind = "seccomp"
    else:  # no stop line (an older VMM's, or one that was killed): by the code
        kind = {0: "reset", 6: "timeout", 8: "host", 10: "interrupted"}.get(code, "unknown")
    if kind == "reset" and "ACPI S5" in why:
        kind = "poweroff"  # devices/legacy/acpi_pm.c: the FADT's sleep control register
    return StopCause(kind, why)
