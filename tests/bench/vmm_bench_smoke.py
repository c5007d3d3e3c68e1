#!/usr/bin/env python3
"""Smoke test of scripts/vmm-bench --quick (meson suite bench-smoke).

    vmm_bench_smoke.py SOURCE_ROOT BUILD_ROOT

Runs the quick benchmark into a temporary directory under BUILD_ROOT and
checks that results.json, summary.md and the three SVG charts exist and
parse, and that every section is there with a known status (fs_share, two
Linux boots, must say it is not in --quick); the parts that need only KVM
and this tree (kvm_floor, vbench under the VMM, the footprint of ours and
the floor, blk_bench) must have worked, and QEMU's runs too where QEMU is
installed. Sections whose VMM-side piece is missing may say
"pending". No figure is compared with anything: timing is never asserted.
Exit 77 (skipped) without any KVM (this box's or the emulated host's) or
without matplotlib. Where it runs on the emulated host, the host block must
name it.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "scripts"))
from vmmtools import emuhost  # noqa: E402

SECTIONS = ["irq_latency", "virtio", "multiqueue", "exit_costs", "exit_dispatch", "footprint",
            "blk_model_vs_fio", "fs_share"]
FS_QUICK_NOTE = "not in --quick"
STATUSES = {"ok", "partial", "pending", "skipped", "error"}
CHARTS = ["irq_latency_cdf.svg", "virtio_rates.svg", "footprint.svg"]
STAT_KEYS = {"count", "min", "p50", "p90", "p99", "max"}

problems = []


def check(ok, what):
    if not ok:
        problems.append(what)
    return ok


def walk_stats(node, where):
    """Every dict that looks like a statistic has all of its fields."""
    if isinstance(node, dict):
        if "count" in node and "unit" in node and node["count"]:
            check(STAT_KEYS <= node.keys(), f"{where}: statistic without {STAT_KEYS - node.keys()}")
        for k, v in node.items():
            walk_stats(v, f"{where}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            walk_stats(v, f"{where}[{i}]")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    root, build = sys.argv[1], sys.argv[2]
    why = emuhost.guest_skip_reason()
    if why:
        print(f"SKIP: {why}; vmm-bench needs KVM")
        return 77
    pythons = [sys.executable, "/usr/bin/python3"]
    if not any(os.access(p, os.X_OK) and subprocess.run(
            [p, "-c", "import matplotlib"], capture_output=True).returncode == 0
            for p in pythons):
        print("SKIP: matplotlib is not installed (Debian package python3-matplotlib; "
              "scripts/install-deps.sh installs it)")
        return 77
    out = tempfile.mkdtemp(prefix="vmm-bench-smoke.", dir=build)
    cmd = [os.path.join(root, "scripts", "vmm-bench"), "--quick", "--no-build",
           "--build-dir", build, "--out", out]
    print("running: " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, timeout=600, stderr=subprocess.PIPE, text=True, errors="replace")
    sys.stderr.write(r.stderr)
    # The lines that say why, where a long progress log would bury them.
    said = [x for x in r.stderr.splitlines() if not re.match(r"\[\d+/\d+\] ", x)][-4:]
    if not check(r.returncode == 0, f"vmm-bench exited {r.returncode}" +
                 "".join(f"\n      {x}" for x in said)):
        return report(out)

    try:
        with open(os.path.join(out, "results.json")) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        check(False, f"results.json: {e}")
        return report(out)
    check(doc.get("quick") is True, "results.json: quick is not true")
    host = doc.get("host", {})
    for k in ("cpu_model", "kernel", "cores", "kvm_kind", "kvm_description"):
        check(k in host, f"results.json: host has no {k}")
    if emuhost.kvm_unusable() and not emuhost.inside():
        check(host.get("kvm_kind") == "emulated" and "QEMU" in host.get("kvm_description", ""),
              f"results.json: measured on the emulated host but its host block says "
              f"{host.get('kvm_kind')!r}, {host.get('kvm_description')!r}")
    sec = doc.get("sections", {})
    for s in SECTIONS:
        if check(s in sec, f"results.json: no section {s}"):
            check(sec[s].get("status") in STATUSES,
                  f"section {s}: status {sec[s].get('status')!r}")
    walk_stats(sec, "sections")
    check(bool(doc.get("summary")), "results.json: no summary rows")
    qemu = shutil.which("qemu-system-x86_64") is not None

    irq = sec.get("irq_latency", {}).get("paths", {})
    check(len(irq) == 4, f"irq_latency: {len(irq)} paths, 4 expected")
    for k, p in irq.items():
        check(p["floor"]["status"] == "ok" and p["floor"]["stats"]["count"] == 50,
              f"irq_latency {k}: kvm_floor {p['floor']['status']} {p['floor'].get('note', '')}")
        check(p["ours"]["status"] in ("ok", "pending"),
              f"irq_latency {k}: ours {p['ours']['status']} {p['ours'].get('note', '')}")
    runs = sec.get("virtio", {}).get("runs", [])
    for who in ["ours"] + (["qemu"] if qemu else []):
        for mode in ("msix", "intx"):
            rr = [x for x in runs if x["who"] == who and x["mode"] == mode]
            check(rr and all(x["ok"] for x in rr), f"virtio: vbench under {who}, {mode}: "
                  + (rr[0].get("output_tail", "") if rr else "not run"))
    res = sec.get("virtio", {}).get("results", [])
    check(len(res) == 8, f"virtio: {len(res)} figures, 8 expected (2 devices x 2 depths x 2 modes)")
    mq = sec.get("multiqueue", {})
    net = os.geteuid() == 0 and os.path.exists("/dev/net/tun") and shutil.which("unshare")
    qemu_net = net and qemu and shutil.which("ip")
    for who in (["ours"] + (["qemu"] if qemu else []) + (["ours-net"] if net else [])
                + (["qemu-net"] if qemu_net else [])):
        rr = [x for x in mq.get("runs", []) if x["who"] == who]
        check(rr and all(x["ok"] for x in rr), f"multiqueue: vbench blkmq under {who}: "
              + (next((x.get("output_tail", "") for x in rr if not x["ok"]), "") if rr
                 else "not run"))
    check(len(mq.get("results", [])) == 4,
          f"multiqueue: {len(mq.get('results', []))} figures, 4 expected (--quick: 1 and 2 "
          "queues x 2 modes)")
    if net:
        check(sum(1 for r in mq.get("net_results", []) if r["ours"]) == 4,
              "multiqueue: virtio-net transmit: not every configuration has a figure")
    if qemu_net:
        check(sum(1 for r in mq.get("net_results", []) if r.get("qemu")) == 4,
              "multiqueue: virtio-net transmit: not every configuration has a QEMU figure")
    for x in mq.get("runs", []):
        if not x["who"].startswith("qemu") and x["ok"] and x["config"] != "q1":
            # blk: both request queues; net: both transmit queues (1 and 3)
            # of the five (two pairs and the control queue).
            qs = x.get("queue_stats", [])
            used = [l for l in qs if x["who"] == "ours" or re.search(r"queue [13] ", l)]
            check(len(qs) == (2 if x["who"] == "ours" else 5) and len(used) == 2 and
                  all(re.search(r"requests [1-9]", l) for l in used),
                  f"multiqueue: {x['who']} {x['config']} {x['mode']}: both queues served: {qs}")
    ex = sec.get("exit_costs", {}).get("results", {})
    for t in ("exit-pio", "exit-mmio", "exit-notify"):
        check(ex.get(t, {}).get("ours"), f"exit_costs: no {t} figure for ours")
    check(sec.get("exit_dispatch", {}).get("status") in ("ok", "pending"),
          f"exit_dispatch: {sec.get('exit_dispatch', {}).get('status')}")
    fp = sec.get("footprint", {}).get("targets", {})
    for t in ["ours", "floor"] + (["qemu-microvm", "qemu-pc"] if qemu else []):
        check(fp.get(t, {}).get("status") == "ok",
              f"footprint {t}: {fp.get(t, {}).get('status')} {fp.get(t, {}).get('note', '')}")
    check(sec.get("blk_model_vs_fio", {}).get("status") in ("ok", "skipped"),
          f"blk_model_vs_fio: {sec.get('blk_model_vs_fio', {}).get('status')}")
    fs = sec.get("fs_share", {})
    check(fs.get("status") == "skipped" and fs.get("note", "").startswith(FS_QUICK_NOTE),
          f"fs_share: {fs.get('status')} {fs.get('note', '')!r}, expected skipped "
          f"({FS_QUICK_NOTE}: it boots Linux twice)")

    try:
        with open(os.path.join(out, "summary.md")) as f:
            md = f.read()
        check("| section | figure |" in md, "summary.md: no summary table")
        for s in SECTIONS:
            check(f"### {s}:" in md and f"| {s} |" in md, f"summary.md: section {s} missing")
    except OSError as e:
        check(False, f"summary.md: {e}")
    for c in CHARTS:
        try:
            tree = ET.parse(os.path.join(out, c))
            check(tree.getroot().tag.endswith("svg"), f"{c}: root element is not <svg>")
        except (OSError, ET.ParseError) as e:
            check(False, f"{c}: {e}")
    return report(out)


def report(out):
    if problems:
        print("FAIL: vmm-bench --quick outputs (kept in %s):" % out)
        for p in problems:
            print("  - " + p)
        return 1
    print("PASS: results.json, summary.md and 3 SVG charts, every section present")
    shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
