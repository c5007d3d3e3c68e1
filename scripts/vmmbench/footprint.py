"""Section footprint: exec to first KVM_RUN and RSS without guest memory
for ours, kvm_floor (with and without a PIT), QEMU -M microvm and QEMU -M
pc, all with 256 MiB and measured alike (tests/bench/kvmrun_shim.so under
tests/bench/exec_stamp)."""
import json
import os

from vmmtools.report import table

from . import proc, vbench
from .figures import overall_status, ratio, stats, summary_row

TITLE = "Footprint: exec to first KVM_RUN, RSS without guest memory"
TARGETS = [("ours", "ours"), ("floor", "kvm_floor"), ("floor-pit", "kvm_floor + PIT"),
           ("qemu-microvm", "QEMU -M microvm"), ("qemu-pc", "QEMU -M pc")]
LABELS = dict(TARGETS)
METHOD = ("exec_stamp stamps CLOCK_MONOTONIC and exec()s the VMM with "
          "tests/bench/kvmrun_shim.so preloaded; at the process's first ioctl(KVM_RUN) the "
          "shim takes the time since that stamp and the RSS from /proc/self/smaps minus every "
          "mapping behind a KVM_SET_USER_MEMORY_REGION slot (guest RAM, and QEMU's firmware "
          "ROMs). The same guest ELF (vbench, told to exit at once) for ours and QEMU; "
          "kvm_floor runs its own 10-sample guest.")
FIGURES = (("exec_to_first_run_us", "us"), ("rss_kib", "KiB"), ("guest_kib", "KiB"))


def steps(b):
    return len(TARGETS) * b.fp_runs


def command(b, target):
    """(command line, the exit code it ends with)."""
    m = str(b.mem_mib)
    if target == "ours":
        return [b.vmm, "--kernel", b.vbench_guest, "--memory", m,
                "--cmdline", "vbench.tests=none"], 1
    if target in ("floor", "floor-pit"):
        pit = ["--pit"] if target == "floor-pit" else []
        return [b.floor, "--mode", "msi-irqfd", "--samples", "10", "--memory", m] + pit, 0
    machine = "microvm" if target == "qemu-microvm" else "pc"
    return vbench.qemu_cmd(b, [], "vbench.tests=none", machine), 1


def new_record(path, before):
    """The shim's last JSON line written to path after offset before, or None."""
    if not os.path.exists(path) or os.path.getsize(path) <= before:
        return None
    with open(path) as f:
        f.seek(before)
        lines = [x for x in f.read().splitlines() if x.strip()]
    return json.loads(lines[-1]) if lines else None


def target_figures(runs):
    """Each figure's statistics over the shim's records."""
    return {k: stats([r[k] for r in runs], unit) for k, unit in FIGURES}


def measure_once(b, target, cmd, want):
    """One run under the shim; (its record or None, why not)."""
    jf = b.raw_path(f"footprint-{target}.jsonl")
    before = os.path.getsize(jf) if os.path.exists(jf) else 0
    rc, out, err = proc.run([b.stamp, b.shim, jf] + cmd, 300)
    rec = new_record(jf, before)
    if rc != want or rec is None:
        return None, {"status": "error", "note": f"exit code {rc} (expected {want}), shim "
                      f"record {'present' if rec else 'missing'}",
                      "output_tail": proc.tail(out + "\n" + err)}
    return rec, None


def measure_target(b, target, label):
    t = {"label": label, "runs": []}
    cmd, want = command(b, target)
    t["command"] = cmd
    if b.kvm_skip:
        t.update(status="skipped", note=b.kvm_skip)
    elif target.startswith("qemu") and not b.qemu:
        t.update(status="skipped", note="qemu-system-x86_64 not installed")
    for i in range(b.fp_runs):
        b.step(f"footprint: {label} run {i + 1}/{b.fp_runs}")
        if "status" in t:
            continue
        rec, failure = measure_once(b, target, cmd, want)
        if failure:
            t.update(failure)
        else:
            t["runs"].append(rec)
    if "status" not in t:
        t["status"] = "ok"
        t.update(target_figures(t["runs"]))
    return t


def run(b):
    sec = {"memory_mib": b.mem_mib, "runs_per_target": b.fp_runs, "method": METHOD,
           "targets": {}}
    for target, label in TARGETS:
        sec["targets"][target] = measure_target(b, target, label)
    sec["status"] = overall_status(t["status"] for t in sec["targets"].values())
    return sec


def p50(sec, target, figure):
    x = sec["targets"].get(target, {}).get(figure)
    return x.get("p50") if x else None


def rows(sec):
    out = []
    ours_t = p50(sec, "ours", "exec_to_first_run_us")
    # The floor with a PIT makes the KVM objects a Linux-capable VMM needs
    # (KVM_CREATE_PIT2 starts a kernel thread): the like-for-like floor.
    for ref in ("floor", "floor-pit", "qemu-microvm", "qemu-pc"):
        rt = p50(sec, ref, "exec_to_first_run_us")
        floor = ref in ("floor", "floor-pit")
        met = None if not floor or ours_t is None or rt is None else ours_t <= rt + 1000
        out.append(summary_row(
            "footprint", f"exec to first KVM_RUN, p50 (vs {LABELS[ref]})",
            ours_t / 1e3 if ours_t else None, LABELS[ref], rt / 1e3 if rt else None,
            ratio(ours_t, rt), "≤ floor + 1 ms" if floor else "", met, False, None, "ms"))
    ours_r = p50(sec, "ours", "rss_kib")
    for ref in ("floor", "qemu-microvm", "qemu-pc"):
        rr = p50(sec, ref, "rss_kib")
        floor = ref == "floor"
        met = None if not floor or ours_r is None else ours_r < 3 * 1024
        out.append(summary_row(
            "footprint", f"RSS without guest memory, p50 (vs {LABELS[ref]})",
            ours_r / 1024 if ours_r else None, LABELS[ref], rr / 1024 if rr else None,
            ratio(ours_r, rr), "< 3 MiB" if floor else "", met, False, None, "MiB"))
    return out


def spread(st, scale):
    """p50 (min–max), scaled."""
    return f"{st['p50'] / scale:.2f} ({st['min'] / scale:.2f}–{st['max'] / scale:.2f})"


def details(sec):
    lines = []
    for t in sec["targets"].values():
        if t["status"] != "ok":
            lines.append([t["label"], f"{t['status']}: {t.get('note', '')}", "", "", ""])
            continue
        e, r, g = t["exec_to_first_run_us"], t["rss_kib"], t["guest_kib"]
        lines.append([t["label"], e["count"], spread(e, 1e3), spread(r, 1024),
                      f"{g['p50'] / 1024:.2f}"])
    return table(["target", "runs", "exec→first KVM_RUN p50 (min–max) ms",
                  "RSS w/o guest p50 (min–max) MiB", "guest memory resident p50 MiB"],
                 "lrrrr", lines)
