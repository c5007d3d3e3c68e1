"""results.json, junit.xml, summary.md and the SVG charts, from cell results."""
import json
import os
import re
import statistics
import xml.etree.ElementTree as ET

from vmmtools import charts as mpl
from vmmtools.report import md_text, table, write_json, xml_text

IO_NOTE = ("On a host that emulates guest ring 0 these figures measure the emulated "
           "guest kernel (every system call, page fault and interrupt handler runs "
           "instruction by instruction) far more than the interrupt path.")
EMULATED_HOST_NOTE = ("Measured on the emulated KVM host (QEMU's TCG emulates the CPU and its "
                      "SVM): compare these figures with each other, never with hardware "
                      "KVM's.")


def ring0_emulated(host):
    """Whether meta's host line is a KVM that emulates guest ring 0."""
    return "ring 0 is emulated" in host


def host_note(host):
    if ring0_emulated(host):
        return IO_NOTE
    return EMULATED_HOST_NOTE if host.startswith("emulated (QEMU") else ""


def write_all(out, meta, cells):
    os.makedirs(out, exist_ok=True)
    cells = sorted(cells, key=lambda c: natural(c["id"]))
    write_json(os.path.join(out, "results.json"), {"meta": meta, "cells": cells},
               sort_keys=True)
    write_junit(os.path.join(out, "junit.xml"), cells, meta.get("host", "?"))
    charts = write_charts(out, cells, meta.get("host", "?"))
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(summary_md(meta, cells, charts))


def load(dirs):
    """Cells and metas of earlier runs (--merge), later duplicates win."""
    metas, by_id = [], {}
    for d in dirs:
        with open(os.path.join(d, "results.json")) as f:
            doc = json.load(f)
        metas.append(doc.get("meta", {}))
        for c in doc.get("cells", []):
            by_id[c["id"]] = c
    return metas, list(by_id.values())


# ---- junit.xml ----

def write_junit(path, cells, host):
    suites = ET.Element("testsuites", name="vmm-ci")
    for c in cells:
        checks = c["checks"]
        s = ET.SubElement(suites, "testsuite", name=c["id"], tests=str(len(checks)),
                          failures=str(sum(x["status"] == "fail" for x in checks)),
                          skipped=str(sum(x["status"] == "skip" for x in checks)),
                          time=str(c["boot"]["vmm_wall_s"]))
        # Where the cell ran (hardware KVM, kvm_pvm, the emulated host).
        props = ET.SubElement(s, "properties")
        ET.SubElement(props, "property", name="host", value=host)
        for x in checks:
            tc = ET.SubElement(s, "testcase", classname=c["id"], name=x["name"])
            if x.get("time") is not None:
                tc.set("time", f"{x['time']:.6f}")
            if x["status"] == "fail":
                ET.SubElement(tc, "failure", message=x["detail"][:500]).text = x["detail"]
            elif x["status"] == "skip":
                ET.SubElement(tc, "skipped", message=x["detail"][:500])
            else:
                ET.SubElement(tc, "system-out").text = x["detail"]
            if x.get("stdout"):
                out = tc.find("system-out")
                if out is None:
                    out = ET.SubElement(tc, "system-out")
                out.text = (out.text + "\n" if out.text else "") + x["stdout"]
            if x.get("stderr"):
                ET.SubElement(tc, "system-err").text = x["stderr"]
            if x.get("info"):
                # A condition inherited from the host: said, never failed on.
                out = tc.find("system-out")
                if out is None:
                    out = ET.SubElement(tc, "system-out")
                out.text = (out.text + "\n" if out.text else "") + "info: " + x["info"]
    for el in suites.iter():  # guest text: only characters XML allows
        if el.text:
            el.text = xml_text(el.text)
        for k, v in el.attrib.items():
            el.set(k, xml_text(v))
    ET.indent(suites)
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)


# ---- summary.md ----

def failures(cells):
    """One line per failed check."""
    return [f"{c['id']}: {x['name']}: {x['detail']}"
            for c in cells for x in c["checks"] if x["status"] == "fail"]


def failures_md(cells):
    """failures() for summary.md: the guest's text made inert."""
    return [f"{md_text(c['id'])}: {md_text(x['name'])}: {md_text(x['detail'])}"
            for c in cells for x in c["checks"] if x["status"] == "fail"]


def host_inherited(cells):
    """One line per condition cells inherit from the host (check info): the
    cells that share one condition word for word on one line, first seen
    first ("CELL: CHECK: INFO", or "N cells (FIRST ... LAST): CHECK: INFO")."""
    by = {}
    for c in cells:
        for x in c["checks"]:
            if x.get("info"):
                by.setdefault((x["name"], x["info"]), []).append(c["id"])
    return [f"{ids[0] if len(ids) == 1 else f'{len(ids)} cells ({ids[0]} ... {ids[-1]})'}: "
            f"{md_text(name)}: {md_text(info)}" for (name, info), ids in by.items()]


def natural(text):
    """"6.12:msi" after "6.1:nomsi": numbers compare as numbers."""
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", str(text))]


def group_key(c):
    """(kernel, mode, vCPUs); a PVH cell's kernel is "LABEL pvh": its boot
    times are not pooled with the same kernel's bzImage boots."""
    label = c["kernel"]["label"] + (" pvh" if c.get("boot") == "pvh" else "")
    return (label, c["mode"], c["cpus"])


def group_order(key):
    return (natural(key[0]), key[1], key[2])


def boot_groups(cells):
    """(label, mode, cpus) -> {"dmesg": [...], "wall": [...], "version": ...}"""
    groups = {}
    for c in cells:
        g = groups.setdefault(group_key(c), {"dmesg": [], "wall": [], "load": [],
                                             "version": c["version"]})
        if c.get("host_loadavg_at_start") is not None:
            g["load"].append(c["host_loadavg_at_start"])
        if c["boot"]["run_init_dmesg_s"] is not None:
            g["dmesg"].append(c["boot"]["run_init_dmesg_s"])
        if "run_init" in c["boot"]["wall_s"]:
            g["wall"].append(c["boot"]["wall_s"]["run_init"])
    return groups


def spread(values):
    if not values:
        return "-"
    mean = statistics.mean(values)
    if len(values) == 1:
        return f"{mean:.1f}"
    return f"{mean:.1f} ({min(values):.1f}-{max(values):.1f}, sd {statistics.stdev(values):.1f})"


def paths_text(c):
    paths = sorted({p["path"] for p in c["irq"].values()})
    return "/".join(paths) if paths else "-"


def fails_text(c):
    names = [md_text(x["name"]) for x in c["checks"] if x["status"] == "fail"]
    return ", ".join(names) if names else ""


def summary_md(meta, cells, charts):
    npass = sum(c["result"] == "pass" for c in cells)
    out = ["# vmm-ci summary", "",
           f"**{npass} of {len(cells)} cells passed.** Host: {meta.get('host', '?')}; "
           f"{meta.get('date', '')}; `{meta.get('command', '')}`"
           + (f"; load average at the end {meta['loadavg_at_end'][0]} on {meta.get('cpu_count')} "
              "cores" if meta.get("loadavg_at_end") else "") + ".", ""]
    out += table(["cell", "kernel", "mode", "vCPUs", "result", "Run /init (dmesg s)",
                  "Run /init (wall s)", "irq path", "userspace", "failed checks"],
                 "l" * 10, [cell_cells(c) for c in cells])
    out += ["", "## Boot time to \"Run /init\"", "",
            "mean (min-max, sd) over the repeats, seconds; dmesg is the guest's own clock, "
            "wall is the host's from the VMM's start.", ""]
    groups = boot_groups(cells)
    out += table(["kernel", "mode", "vCPUs", "n", "dmesg", "wall",
                  "host load (1-min avg at cell start)"], "l" * 7,
                 [group_cells(key, groups[key]) for key in sorted(groups, key=group_order)])
    io = [c for c in cells if c.get("fio") or c.get("iperf3")]
    if io:
        note = host_note(meta.get("host", ""))
        out += ["", "## fio and iperf3", "", note, ""]
        out += table(["cell", "irq path", "fio read IOPS", "fio write IOPS", "fio read KiB/s",
                      "fio write KiB/s", "iperf3 sender Mbit/s", "iperf3 receiver Mbit/s",
                      "host load"], "l" * 9, [io_cells(c) for c in io])
    fl = failures_md(cells)
    if fl:
        out += ["", "## Failures", ""] + [f"- {x}" for x in fl]
    hi = host_inherited(cells)
    if hi:
        out += ["", "## Host-inherited conditions", "",
                "Reported, not failed on: each is the host's, not the VMM's doing.", ""]
        out += [f"- {x}" for x in hi]
    if charts:
        out += ["", "## Charts", ""] + [f"![{os.path.splitext(x)[0]}]({x})" for x in charts]
    elif meta.get("charts_missing"):
        out += ["", f"No charts: {meta['charts_missing']}"]
    return "\n".join(out) + "\n"


def cell_cells(c):
    """A cell's row of the first table."""
    b = c["boot"]
    dm = "-" if b["run_init_dmesg_s"] is None else f"{b['run_init_dmesg_s']:.1f}"
    wall = b["wall_s"].get("run_init")
    return [c["id"], f"{c['version']} {c['variant'] or 'user'}", c["mode"], c["cpus"],
            "PASS" if c["result"] == "pass" else "**FAIL**", dm,
            "-" if wall is None else f"{wall:.1f}", paths_text(c),
            "ran" if c["userspace"] == "ran" else "not possible here", fails_text(c)]


def group_cells(key, g):
    """A (kernel, mode, vCPUs) group's row of the boot-time table."""
    label, mode, cpus = key
    load = f"{statistics.mean(g['load']):.1f}" if g["load"] else "-"
    return [f"{label} ({g['version']})", mode, cpus, len(g["dmesg"]), spread(g["dmesg"]),
            spread(g["wall"]), load]


def io_cells(c):
    f, i = c.get("fio") or {}, c.get("iperf3") or {}
    return [c["id"], paths_text(c), num(f.get("read_iops")), num(f.get("write_iops")),
            num(f.get("read_kib_s")), num(f.get("write_kib_s")), num(i.get("sender_mbit_s")),
            num(i.get("receiver_mbit_s")), num(c.get("host_loadavg_at_start"))]


def num(v):
    return "-" if v is None else f"{v:.1f}"


# ---- charts ----

def write_charts(out, cells, host):
    if mpl.missing():
        return []
    plt = mpl.pyplot("svg")
    charts = []
    if boot_chart(plt, os.path.join(out, "boot_time.svg"), cells, host):
        charts.append("boot_time.svg")
    if io_chart(plt, os.path.join(out, "io.svg"), cells, host):
        charts.append("io.svg")
    return charts


def boot_chart(plt, path, cells, host):
    groups = boot_groups(cells)
    labels = sorted({k[0] for k in groups}, key=natural)
    series = sorted({(k[1], k[2]) for k in groups})
    if not labels:
        return False
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(labels)), 4))
    width = 0.8 / len(series)
    for si, (mode, cpus) in enumerate(series):
        xs, means, lo, hi, dots = [], [], [], [], []
        for li, label in enumerate(labels):
            vals = groups.get((label, mode, cpus), {}).get("dmesg", [])
            if not vals:
                continue
            m = statistics.mean(vals)
            xs.append(li + mpl.bar_offset(si, len(series), width))
            means.append(m)
            lo.append(m - min(vals))
            hi.append(max(vals) - m)
            dots += [(xs[-1], v) for v in vals]
        if xs:
            ax.bar(xs, means, width, yerr=[lo, hi], capsize=3,
                   label=f"--irq-mode {mode}, {cpus} vCPU{'s' if cpus > 1 else ''}")
            ax.scatter([d[0] for d in dots], [d[1] for d in dots], s=9, zorder=3,
                       color="black", alpha=0.6)
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlabel("kernel (a nomsi kernel uses INTx under either --irq-mode; dots: single runs)",
                  fontsize="small")
    ax.set_ylabel("dmesg seconds at \"Run /init\"")
    ax.set_title("Boot time to \"Run /init\" (mean, min-max over repeats)", fontsize="medium")
    ax.legend(fontsize="small")
    mpl.save(plt, fig, path, host)
    return True


def io_chart(plt, path, cells, host):
    rows = [c for c in cells if c.get("fio") or c.get("iperf3")]
    if not rows:
        return False
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(max(8, 1.2 * len(rows)), 4))
    names = [c["id"] for c in rows]
    xs = range(len(rows))
    r = [(c.get("fio") or {}).get("read_iops", 0) for c in rows]
    w = [(c.get("fio") or {}).get("write_iops", 0) for c in rows]
    a1.bar([x + mpl.bar_offset(0, 2, 0.4) for x in xs], r, 0.4, label="read")
    a1.bar([x + mpl.bar_offset(1, 2, 0.4) for x in xs], w, 0.4, label="write")
    a1.set_title("fio rw, libaio, 2 jobs: IOPS")
    a1.set_xticks(list(xs), names, rotation=60, ha="right", fontsize="x-small")
    a1.legend(fontsize="small")
    a2.bar(list(xs), [(c.get("iperf3") or {}).get("receiver_mbit_s", 0) for c in rows])
    a2.set_title("iperf3 guest -> host: Mbit/s")
    a2.set_xticks(list(xs), names, rotation=60, ha="right", fontsize="x-small")
    if ring0_emulated(host):
        fig.suptitle("Host emulates guest ring 0: these figures measure the guest kernel "
                     "more than the interrupt path", fontsize="small")
    mpl.save(plt, fig, path, host)
    return True
