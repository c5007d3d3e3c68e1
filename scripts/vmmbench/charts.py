"""vmm-bench's SVG charts: interrupt latency CDFs (ours beside the floor),
virtio request rates (ours beside QEMU) and the footprint."""
import os

from vmmtools import charts

from .figures import mode_name
from .footprint import TARGETS as FOOTPRINT_TARGETS
from .irq import PATHS
from .report import left_out
from .virtio import TESTS as VIRTIO_TESTS

SIDES = {"ours": "ours", "floor": "raw-KVM floor"}
# The same results give the same files: ids from a fixed salt, text as text.
REPRODUCIBLE = {"svg.hashsalt": "vmm-bench", "svg.fonttype": "none"}


def draw(doc, samples, outdir):
    """irq_latency_cdf.svg, virtio_rates.svg and footprint.svg in outdir;
    samples: the irq section's values by path and side."""
    plt = charts.pyplot("Agg", REPRODUCIBLE)
    note = (" (host emulates guest ring 0: includes that emulation)"
            if doc["host"]["kvm_kind"] == "nested-pagetable" else "")
    h = doc["host"]
    host = f"{h['cpu_model']}; KVM: {h.get('kvm_summary') or h['kvm_kind']}"
    sec = doc["sections"]
    # A section --only left out has no chart (an earlier one is removed).
    for key, name, draw_one in (
            ("irq_latency", "irq_latency_cdf.svg",
             lambda p: irq_cdf(plt, sec["irq_latency"], samples, note, p, host)),
            ("virtio", "virtio_rates.svg",
             lambda p: virtio_rates(plt, sec["virtio"]["results"], note, p, host)),
            ("footprint", "footprint.svg", lambda p: footprint_bars(plt, sec["footprint"], p,
                                                                     host))):
        path = os.path.join(outdir, name)
        if left_out(sec[key]):
            if os.path.exists(path):
                os.unlink(path)
        else:
            draw_one(path)


def cdf_axis(ax, label, values, status):
    """One delivery path: a CDF per side, log scale around the samples."""
    import matplotlib.ticker
    for side in ("floor", "ours"):
        vals = sorted(values.get(side, []))
        if not vals:
            continue
        xs = [x / 1e3 for x in vals]
        ys = [(i + 1) / len(xs) for i in range(len(xs))]
        ax.step(xs, ys, "-", where="post",
                label=f"{SIDES[side]} (n={len(xs)}, p50 {xs[(len(xs) - 1) // 2]:.1f} µs)")
    if status != "ok":
        ax.text(0.98, 0.05, f"ours: {status}", transform=ax.transAxes,
                ha="right", va="bottom", fontsize=9, color="0.35")
    have = [v for v in values.values() if v]
    if have:
        ax.set_xscale("log")
        ax.set_xlim(min(map(min, have)) / 1e3 * 0.9, max(map(max, have)) / 1e3 * 1.1)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.legend(loc="lower right" if status == "ok" else "center right", fontsize=8)
    ax.set_title(label, fontsize=10)
    ax.set_xlabel("inject → handler ACK (µs, log scale)")
    ax.set_ylabel("fraction of samples")
    ax.grid(alpha=0.3)


def irq_cdf(plt, irq, samples, note, path, host):
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    for ax, (key, label, *_) in zip(axes.flat, PATHS):
        cdf_axis(ax, label, samples.get(key, {}), irq["paths"][key]["ours"]["status"])
    fig.suptitle("Interrupt delivery latency, CDF per path" + note, fontsize=11)
    charts.save(plt, fig, path, host)


def rates_axis(ax, results, test, label):
    qds = sorted({r["qd"] for r in results if r["test"] == test})
    groups = [(qd, mode) for qd in qds for mode in ("msix", "intx")]
    width = 0.38
    for i, who in enumerate(("ours", "qemu")):
        ys = []
        for qd, mode in groups:
            r = next((r for r in results if r["test"] == test and r["qd"] == qd
                      and r["mode"] == mode), None)
            ys.append((r[who]["rps_median"] if r and r[who] else 0))
        xs = [j + charts.bar_offset(i, 2, width) for j in range(len(groups))]
        bars = ax.bar(xs, ys, width, label="ours" if who == "ours" else "QEMU -M pc")
        charts.label_bars(ax, bars, [f"{y:,.0f}" if y else "" for y in ys], 7)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"QD{qd}\n{mode_name(m)}" for qd, m in groups])
    ax.set_title(label, fontsize=10)
    ax.set_ylabel("requests/s (guest-measured)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    if not groups:
        ax.text(0.5, 0.5, "no results", transform=ax.transAxes, ha="center")


def virtio_rates(plt, results, note, path, host):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    for ax, (test, label) in zip(axes, VIRTIO_TESTS):
        rates_axis(ax, results, test, label)
    fig.suptitle("MSI-X vs INTx request rates, ours vs QEMU" + note, fontsize=11)
    charts.save(plt, fig, path, host)


def footprint_axis(ax, targets, figure, scale, ylabel):
    """p50 per target with min-max whiskers."""
    names = [k for k, _ in FOOTPRINT_TARGETS]
    p50, lo, hi = [], [], []
    for n in names:
        st = targets[n].get(figure)
        have = st and st.get("count")
        p50.append(st["p50"] / scale if have else 0)
        lo.append((st["p50"] - st["min"]) / scale if have else 0)
        hi.append((st["max"] - st["p50"]) / scale if have else 0)
    bars = ax.bar(range(len(names)), p50, yerr=[lo, hi], capsize=4,
                  color=["C0", "C2", "C1", "C3"])
    charts.label_bars(ax, bars, [f"{y:.2f}" if y else "n/a" for y in p50], 8)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([targets[k]["label"] for k in names], fontsize=8)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)


def footprint_bars(plt, fp, path, host):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    footprint_axis(axes[0], fp["targets"], "exec_to_first_run_us", 1e3,
                   "exec → first KVM_RUN (ms)")
    footprint_axis(axes[1], fp["targets"], "rss_kib", 1024, "RSS without guest memory (MiB)")
    fig.suptitle(f"Footprint, {fp['memory_mib']} MiB guests (p50, whiskers min–max)",
                 fontsize=11)
    charts.save(plt, fig, path, host)
