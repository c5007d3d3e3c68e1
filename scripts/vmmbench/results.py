"""results.json of vmm-bench: the host (vmmtools.host's facts), the tree,
the counts, every section and the summary rows."""
import os

from vmmtools import host as hostfacts

from . import proc, report
from .context import ROOT

SCHEMA = 1
HOST_KEYS = ("cpu_model", "kernel", "cores", "kvm_kind", "kvm_summary", "kvm_description",
             "emulated_host", "kvm_pvm_module",
             "cpu_virt_flags", "dev_kvm_usable")


def host_at_start():
    """The host block as a run starts (finish_host adds the rest)."""
    f = hostfacts.facts()
    block = {k: f[k] for k in HOST_KEYS}
    block["loadavg_start"] = f["loadavg"]
    return block


def tool_version(cmd):
    rc, out, err = proc.run(cmd, 20)
    return (out or err).strip().splitlines()[0] if rc == 0 and (out or err).strip() else None


def finish_host(host, qemu):
    host["loadavg_end"] = os.getloadavg()[0]
    host["qemu"] = tool_version([qemu, "--version"]) if qemu else None
    host["fio"] = tool_version(["fio", "--version"])


def tree():
    rc, out, _ = proc.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], 10)
    rc2, st, _ = proc.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"], 10)
    return {"commit": out.strip() if rc == 0 else None,
            "dirty": bool(st.strip()) if rc2 == 0 else None}


def document(b, host, tree_, started, duration_s, sections):
    doc = {"schema": SCHEMA, "tool": "scripts/vmm-bench", "quick": b.quick,
           "started": started.isoformat(timespec="seconds"), "duration_s": duration_s,
           "host": host, "tree": tree_, "counts": b.results_counts(), "sections": sections}
    doc["summary"] = report.summary_rows(doc)
    return doc
