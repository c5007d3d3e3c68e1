"""Section irq_latency: host-side interrupt delivery latency per path,
the VMM's irqbench device and guests/irqbench against kvm_floor (raw KVM,
the same guest handler)."""
import os

from vmmtools.report import table

from . import proc
from .figures import overall_status, ratio, stats, summary_row, us

TITLE = "Interrupt delivery latency (host side), ours vs raw-KVM floor"
PATHS = [  # (key, label, kvm_floor mode, vmm flags, irqbench mode)
    ("msi-signal", "MSI-X, KVM_SIGNAL_MSI", "msi-signal",
     ["--irq-mode", "msix", "--msi-delivery", "signal"], "msix"),
    ("msi-irqfd", "MSI-X, irqfd", "msi-irqfd",
     ["--irq-mode", "msix", "--msi-delivery", "irqfd"], "msix"),
    ("intx-resample", "INTx, irqfd + resamplefd", "intx-resample",
     ["--irq-mode", "intx", "--intx-delivery", "resample"], "intx"),
    ("intx-line", "INTx, KVM_IRQ_LINE", "intx-line",
     ["--irq-mode", "intx", "--intx-delivery", "line"], "intx"),
]
METHOD = ("host side: t0 stamped (CLOCK_MONOTONIC) just before the interrupt is raised, t1 "
          "at the guest handler's ACK port exit on the vCPU thread; guest idle in hlt; "
          "handler = out ACK, LAPIC EOI, iretq (guests/irqbench/irqbench.inc) on both sides")
STAT_KEYS = ("min", "p50", "p90", "p99", "max")


def steps(b):
    return len(PATHS) * 2


def read_samples(path):
    """The irqbench sample format: '#' comment lines, then one value (ns) a line."""
    comments, values = [], []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            if line.startswith("#"):
                comments.append(line[1:].strip())
            else:
                values.append(int(line))
    return comments, values


def samples_result(b, res, f):
    """res with the sample file's figures; (res, the samples)."""
    comments, values = read_samples(f)
    res.update(status="ok", file=os.path.relpath(f, b.out), comments=comments,
               stats=stats(values, "ns"))
    return res, values


def run_ours(b, key, flags, mode):
    f = b.raw_path(f"irq-ours-{key}.txt")
    if os.path.exists(f):
        os.unlink(f)
    cmd = [b.vmm, "--kernel", b.irqbench_guest, "--memory", str(b.mem_mib),
           "--device", f"irqbench,samples={f}"] + flags + [
           "--timeout", str(120 + b.irq_samples // 100),
           "--cmdline", f"irqbench.mode={mode} irqbench.samples={b.irq_samples}"]
    rc, out, err = proc.run(cmd, 180 + b.irq_samples // 50)
    res = {"command": cmd, "exit_code": rc}
    if rc != 1 or not os.path.exists(f):
        res.update(status="error", note=f"VMM exit code {rc} (1 expected: debug-exit 0)",
                   output_tail=proc.tail(out + "\n" + err))
        return res, []
    res, values = samples_result(b, res, f)
    res["guest_output"] = proc.tail(out, 4)
    return res, values


def run_floor(b, key, mode):
    f = b.raw_path(f"irq-floor-{key}.txt")
    cmd = [b.floor, "--mode", mode, "--samples", str(b.irq_samples),
           "--delay-us", str(b.delay_us), "--memory", str(b.mem_mib), "--out", f]
    rc, out, err = proc.run(cmd, 120 + b.irq_samples // 50)
    res = {"command": cmd, "exit_code": rc}
    if rc != 0 or not os.path.exists(f):
        res.update(status="error", note=f"kvm_floor exit code {rc}",
                   output_tail=proc.tail(out + "\n" + err))
        return res, []
    res, values = samples_result(b, res, f)
    res["summary"] = out.strip()
    return res, values


def skipped(b):
    return {"status": "skipped", "note": b.kvm_skip}, []


def measure_path(b, key, label, fmode, flags, gmode):
    """One delivery path, the floor then ours; the samples go to b.samples."""
    p = {"label": label, "vmm_flags": flags}
    b.step(f"irq latency: kvm_floor {key} ({b.irq_samples} samples)")
    p["floor"], fvals = skipped(b) if b.kvm_skip else run_floor(b, key, fmode)
    b.step(f"irq latency: ours {key}")
    p["ours"], ovals = skipped(b) if b.kvm_skip else run_ours(b, key, flags, gmode)
    b.samples[key] = {"ours": ovals, "floor": fvals}
    o, fl = p["ours"].get("stats", {}), p["floor"].get("stats", {})
    p["ratio_p50"] = ratio(o.get("p50"), fl.get("p50"))
    p["ratio_p99"] = ratio(o.get("p99"), fl.get("p99"))
    return p


def run(b):
    sec = {"samples_per_path": b.irq_samples, "delay_us": b.delay_us, "method": METHOD,
           "paths": {}}
    for key, *rest in PATHS:
        sec["paths"][key] = measure_path(b, key, *rest)
    sec["status"] = overall_status(v[s]["status"] for v in sec["paths"].values()
                                   for s in ("ours", "floor"))
    return sec


def rows(sec):
    out = []
    for key, label, *_ in PATHS:
        p = sec["paths"][key]
        o = p["ours"].get("stats", {}).get("p50")
        f = p["floor"].get("stats", {}).get("p50")
        r = p["ratio_p50"]
        out.append(summary_row(
            "irq_latency", f"interrupt latency p50, {label}", o / 1e3 if o else None,
            "raw-KVM floor", f / 1e3 if f else None, r, "≤ 1.10× floor",
            None if r is None else r <= 1.10, True, None if o else p["ours"]["status"], "µs"))
    return out


def details(sec):
    lines = []
    for p in sec["paths"].values():
        for side in ("ours", "floor"):
            st = p[side].get("stats")
            if st and st.get("count"):
                lines.append([p["label"], side, st["count"]] + us(st, STAT_KEYS))
            else:
                lines.append([p["label"], side, p[side]["status"], "", "", "", "", ""])
    return [f"{sec['samples_per_path']} samples per path, delay {sec['delay_us']} µs.", ""] + \
        table(["path", "side", "count", "min", "p50", "p90", "p99", "max (µs)"], "llrrrrrr",
              lines)
