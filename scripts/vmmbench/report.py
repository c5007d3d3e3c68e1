"""summary.md, and the summary rows of results.json: the table to read
first (every figure against its reference and target), then one part per
section with its distributions."""
from vmmtools.report import table

from . import blkfio, dispatch, footprint, fsshare, irq, multiqueue, virtio
from .context import NOT_RUN
from .figures import fmt, summary_row

EMU_MARK = "†"
CHART_OF = {"irq_latency_cdf.svg": "irq_latency", "virtio_rates.svg": "virtio",
            "footprint.svg": "footprint"}  # each chart and the section it draws
CHARTS = list(CHART_OF)
SECTIONS = [  # (key, title, its summary rows, its lines of summary.md)
    ("irq_latency", irq.TITLE, irq.rows, irq.details),
    ("virtio", virtio.TITLE, virtio.rows, virtio.details),
    ("multiqueue", multiqueue.TITLE, multiqueue.rows, multiqueue.details),
    ("exit_costs", virtio.EXITS_TITLE, virtio.exit_rows, virtio.exit_details),
    ("exit_dispatch", dispatch.TITLE, dispatch.rows, dispatch.details),
    ("footprint", footprint.TITLE, footprint.rows, footprint.details),
    ("blk_model_vs_fio", blkfio.TITLE, blkfio.rows, blkfio.details),
    ("fs_share", fsshare.TITLE, fsshare.rows, fsshare.details),
]
KEYS = [key for key, *_ in SECTIONS]


def left_out(sec):
    """Whether --only left the section out (its parts are then absent)."""
    return sec["status"] == "skipped" and sec.get("note") == NOT_RUN


def section_rows(key, title, rows, sec):
    if left_out(sec):
        return [summary_row(key, title, None, "", None, None, "", None, False,
                            "skipped: " + NOT_RUN)]
    return rows(sec)


def summary_rows(doc):
    """One row per figure, section by section: what, ours, the reference
    and its value, the ratio, the target and whether it is met."""
    return [r for key, title, rows, _ in SECTIONS if key in doc["sections"]
            for r in section_rows(key, title, rows, doc["sections"][key])]


def emulated(doc):
    """Whether the host emulates guest ring 0 (figures marked †)."""
    return doc["host"]["kvm_kind"] == "nested-pagetable"


def head(doc):
    h = doc["host"]
    lines = [f"# vmm-bench {'(--quick) ' if doc['quick'] else ''}— {doc['started']}", "",
             f"Host: {h['cpu_model']}, {h['cores']} cores, kernel {h['kernel']}; "
             f"KVM: {h['kvm_description']}. Load average {h['loadavg_start']:.2f} at start, "
             f"{h['loadavg_end']:.2f} at the end. Tree {doc['tree']['commit']}"
             f"{' (dirty)' if doc['tree']['dirty'] else ''}; {h.get('qemu') or 'no QEMU'}. "
             f"Run took {doc['duration_s']} s.", ""]
    if h["kvm_kind"] == "emulated":
        lines += ["Measured on the emulated KVM host (QEMU's TCG emulates the CPU and its SVM, "
                  "and this box's /dev/kvm is unusable): every figure and ratio here is that "
                  "host's; compare them with each other, never with hardware KVM's.", ""]
    if emulated(doc):
        lines += [f"{EMU_MARK} On this host guest ring 0 is emulated, about 2 µs per "
                  f"instruction: figures marked {EMU_MARK} include that emulation (interrupt "
                  "entry, the handler, iretq) on both sides of each ratio, so they are not "
                  "bare-metal figures and the ratios are diluted by it.", ""]
    return lines


def summary_cells(r, emu):
    mark = f" {EMU_MARK}" if r["emulated"] and emu else ""
    ours = fmt(r["ours"], r["unit"]) if r["ours"] is not None else (r["status"] or "—")
    ref = f"{r['reference']}: {fmt(r['reference_value'], r['unit'])}" if r["reference"] else "—"
    rat = f"{r['ratio']:.2f}×" if r["ratio"] is not None else "—"
    met = "—" if r["met"] is None else ("yes" if r["met"] else "**no**")
    return [r["section"], r["figure"] + mark, ours, ref, rat, r["target"] or "", met]


def summary_table(doc):
    emu = emulated(doc)
    return table(["section", "figure", "ours", "reference", "ratio ours/ref", "target", "met"],
                 "llrrrll", [summary_cells(r, emu) for r in doc["summary"]])


def section_part(key, title, sec, details):
    lines = [f"### {key}: {title}", "",
             f"Status: **{sec['status']}**" + (f" — {sec['note']}" if sec.get("note") else "")]
    if sec.get("method"):
        lines += ["", "Method: " + sec["method"].rstrip(".") + "."]
    return lines + [""] + ([] if left_out(sec) else details(sec)) + [""]


def charts(doc):
    """The charts this run draws (not those of sections --only left out)."""
    return [c for c in CHARTS if CHART_OF[c] in doc["sections"]
            and not left_out(doc["sections"][CHART_OF[c]])]


def summary_md(doc):
    drawn = ", ".join(f"`{c}`" for c in charts(doc)) or "none"
    lines = head(doc) + summary_table(doc) + [
        "", f"Charts: {drawn}. Every figure with its sample "
        "count and min/p50/p90/p99/max: `results.json`; raw samples and logs: `raw/`.", "",
        "## Sections", ""]
    # A run from before a section existed (an older results.json) has no
    # entry for it: nothing to say.
    for key, title, _, details in SECTIONS:
        if key in doc["sections"]:
            lines += section_part(key, title, doc["sections"][key], details)
    return "\n".join(lines)


def write_summary(doc, path):
    with open(path, "w") as f:
        f.write(summary_md(doc))
