"""Section blk_model_vs_fio: the virtio-blk device model (driven by
tests/bench/blk_bench, no VM) against fio on the same file, plain and in
batches of 32 (tests/bench/blk_vs_fio.sh)."""
import json
import os

from vmmtools.report import table

from . import proc
from .context import ROOT
from .figures import stats, summary_row

TITLE = "virtio-blk device model vs fio (host side, no VM)"
SKIP = 77  # blk_vs_fio.sh without fio
TARGET = 0.9
ABOUT = ("QD32 4 KiB random reads, O_DIRECT. \"fio b32\": fio with --iodepth_batch_submit=32 "
         "--iodepth_batch_complete_min=32, the pattern the model's driver "
         "(tests/bench/blk_bench.c) falls into when a wake-up takes longer than the disk's "
         "spread of completion times (see tests/bench/blk_vs_fio.sh).")


def steps(b):
    return 1


def figures(d):
    """The section's figures from blk_vs_fio.sh's --json document."""
    out = dict(d)
    out["fio_iops"] = stats([r["fio_iops"] for r in d["rows"]], "IOPS")
    out["model_iops"] = stats([r["model_iops"] for r in d["rows"]], "IOPS")
    return out


def run(b, disk_dir):
    b.step(f"blk model vs fio: {b.fio_rounds} round(s) of {b.fio_secs} s each")
    jf = b.raw_path("blk_vs_fio.json")
    cmd = [os.path.join(ROOT, "tests/bench/blk_vs_fio.sh"), "--bench", b.blk_bench,
           "--seconds", str(b.fio_secs), "--rounds", str(b.fio_rounds),
           "--size", str(b.disk_mib), "--json", jf, disk_dir]
    rc, out, err = proc.run(cmd, 120 + 6 * b.fio_secs * b.fio_rounds)
    with open(b.raw_path("blk_vs_fio.log"), "w") as f:
        f.write(out + "\n--- stderr\n" + err)
    sec = {"command": cmd, "target_ratio": TARGET}
    if rc == SKIP:
        sec.update(status="skipped", note=proc.tail(err, 2) or "fio not installed")
    elif rc != 0 or not os.path.exists(jf):
        sec.update(status="error", note=f"exit code {rc}", output_tail=proc.tail(out + err))
    else:
        with open(jf) as f:
            sec.update(status="ok", **figures(json.load(f)))
    return sec


def rows(sec):
    if sec["status"] != "ok":
        return [summary_row("blk_model_vs_fio", "virtio-blk device model IOPS vs fio", None,
                            "fio", None, None, "≥ 0.9× fio", None, False,
                            sec["status"] + ": " + sec.get("note", ""), "IOPS")]
    return [
        summary_row("blk_model_vs_fio", "virtio-blk device model IOPS, 4 KiB random read QD32 "
                    "(median of rounds)", sec["model_median_iops"], "fio (io_uring)",
                    sec["fio_median_iops"], sec["median_ratio"], "≥ 0.9× fio",
                    sec["median_ratio"] >= TARGET, False, None, "IOPS"),
        summary_row("blk_model_vs_fio", "virtio-blk device model IOPS vs fio in batches of 32, "
                    "the pattern of the model's driver (median of rounds)",
                    sec["model_median_iops"], "fio (io_uring), batches of 32",
                    sec["fio_batch32_median_iops"], sec["median_ratio_batch32"], "", None,
                    False, None, "IOPS")]


def details(sec):
    if sec["status"] != "ok":
        return []
    lines = [[r["round"], f"{r['fio_iops']:.0f}", f"{r['fio_batch32_iops']:.0f}",
              f"{r['model_iops']:.0f}", f"{r['model_iops'] / r['fio_iops']:.3f}",
              f"{r['model_iops'] / r['fio_batch32_iops']:.3f}",
              f"{r['fio_p50_us']:.0f}/{r['fio_p99_us']:.0f}",
              f"{r['model_p50_us']:.0f}/{r['model_p99_us']:.0f}"] for r in sec["rows"]]
    return [f"{sec['rounds']} round(s) of {sec['seconds_per_run']:g} s, {sec['file_mib']} MiB "
            "file, " + ABOUT, ""] + table(
        ["round", "fio IOPS", "fio b32 IOPS", "model IOPS", "model/fio", "model/fio b32",
         "fio p50/p99 µs", "model p50/p99 µs"], "rrrrrrrr", lines)
