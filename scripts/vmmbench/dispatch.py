"""Section exit_dispatch: the VMM's userspace instructions per port-I/O
and MMIO exit dispatch, counted by callgrind
(build/tests/bench/exit-dispatch-count)."""
import json
import os
import re

from . import proc
from .context import ROOT
from .figures import ratio, summary_row

TITLE = "Userspace instructions per exit dispatch (callgrind)"
TARGETS = {"pio_insns_per_exit": 500, "mmio_insns_per_exit": 800}
LABELS = {"pio_insns_per_exit": "userspace instructions per port-I/O exit dispatch",
          "mmio_insns_per_exit": "userspace instructions per MMIO exit dispatch"}
SKIP = 77  # exit-dispatch-count without valgrind


def steps(b):
    return 1


def parse(out):
    """The JSON object the harness prints (other output may surround it),
    or None."""
    m = re.search(r"\{.*\}", out or "", re.S)
    try:
        return json.loads(m.group(0)) if m else None
    except ValueError:
        return None


def run(b):
    b.step("exit dispatch: callgrind harness")
    sec = {"harness": os.path.relpath(b.dispatch, ROOT), "targets": dict(TARGETS)}
    rc, out, err = proc.run([b.dispatch], 900)
    d = parse(out)
    if rc == SKIP:
        sec.update(status="skipped", note=proc.tail(out + "\n" + err, 2) or "no valgrind")
    elif rc != 0 or not d:
        sec.update(status="error", note=f"exit code {rc}, no JSON on stdout",
                   output_tail=proc.tail(out + "\n" + err))
    else:
        sec.update(status="ok", pio_insns_per_exit=d.get("pio_insns_per_exit"),
                   mmio_insns_per_exit=d.get("mmio_insns_per_exit"), raw=d)
    return sec


def rows(sec):
    out = []
    for k, target in TARGETS.items():
        val = sec.get(k)
        out.append(summary_row(
            "exit_dispatch", LABELS[k], val, "target", target, ratio(val, target),
            f"≤ {target}", None if val is None else val <= target, False,
            None if val is not None else sec["status"], "insns"))
    return out


def details(sec):
    if sec["status"] != "ok":
        return []
    return [f"port-I/O: {sec['pio_insns_per_exit']} instructions per exit (target ≤ 500); "
            f"MMIO: {sec['mmio_insns_per_exit']} (target ≤ 800)."]
