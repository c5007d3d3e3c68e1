#!/usr/bin/env python3
"""Unit tests of scripts/vmmbench's parsers and summary on a recorded run.

fixtures/quick/ is one `scripts/vmm-bench --quick --no-build` run (tree
41a96aa, an AMD host with kvm_pvm): its results.json and summary.md as the
tool wrote them, and under raw/ what the parsers read: the interrupt
sample files, vbench's logs (command, stdout, stderr), the footprint
shim's records, blk_vs_fio.sh's --json output, and exit-dispatch-count's
stdout (exit-dispatch-count.out). Parsing the raw pieces must give the
figures results.json holds, and the summary built from results.json must
be summary.md. No KVM, no matplotlib.
"""
import copy
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from vmmbench import (blkfio, dispatch, figures, footprint, fsshare, irq,  # noqa: E402
                      multiqueue, report, vbench, virtio)

RUN = os.path.join(HERE, "fixtures", "quick")


def raw(name):
    return os.path.join(RUN, "raw", name)


def read_log(name):
    """(stdout, stderr) of a log vmm-bench wrote with Bench.write_log."""
    with open(raw(name)) as f:
        text = f.read()
    out = text.split("\n--- stdout\n", 1)[1]
    return tuple(out.split("\n--- stderr\n", 1))


def recorded():
    with open(os.path.join(RUN, "results.json")) as f:
        return json.load(f)


class Parsers(unittest.TestCase):
    """The raw outputs give the recorded figures."""

    def setUp(self):
        self.doc = recorded()
        self.sec = self.doc["sections"]

    def test_irq_samples(self):
        for key, *_ in irq.PATHS:
            for side in ("ours", "floor"):
                with self.subTest(path=key, side=side):
                    comments, values = irq.read_samples(raw(f"irq-{side}-{key}.txt"))
                    want = self.sec["irq_latency"]["paths"][key][side]
                    self.assertEqual(len(values), 50)
                    self.assertEqual(comments, want["comments"])
                    self.assertEqual(figures.stats(values, "ns"), want["stats"])

    def vbench_runs(self, mode):
        return {who: vbench.parse(read_log(f"vbench-{who}-{mode}-1.log")[0])
                for who in ("ours", "qemu")}

    def test_vbench_result_lines(self):
        runs = vbench.parse(read_log("vbench-ours-msix-1.log")[0])
        self.assertEqual([r["test"] for r in runs], ["exit-pio", "exit-mmio", "exit-notify",
                                                     "blk-read-4k", "blk-read-4k", "rng-64b",
                                                     "rng-64b"])
        blk = runs[3]
        self.assertEqual((blk["mode"], blk["qd"], blk["requests"], blk["irqs"]),
                         ("msix", 1, 50, 50))
        self.assertEqual(blk["lat_ns"]["p50"], 152142)

    def test_virtio_figures(self):
        for row in self.sec["virtio"]["results"]:
            runs = self.vbench_runs(row["mode"])
            for who in ("ours", "qemu"):
                with self.subTest(test=row["test"], mode=row["mode"], qd=row["qd"], who=who):
                    self.assertEqual(vbench.combine(runs[who], row["test"], row["qd"]),
                                     row[who])

    def test_virtio_rows_from_runs(self):
        collected = {(who, mode): rs for mode in virtio.MODES
                     for who, rs in self.vbench_runs(mode).items()}
        self.assertEqual(virtio.virtio_results(collected, ["ours", "qemu"]),
                         self.sec["virtio"]["results"])
        self.assertEqual(virtio.exit_results(collected), self.sec["exit_costs"]["results"])

    def test_multiqueue(self):
        mq = self.sec["multiqueue"]
        collected = {}
        for run in mq["runs"]:
            out, err = read_log(f"multiqueue-{run['who']}-{run['config']}-{run['mode']}-1.log")
            if "queue_stats" in run:
                self.assertEqual(vbench.queue_stats(err), run["queue_stats"])
            collected[(run["who"], run["config"], run["mode"])] = vbench.parse(out)
        cfgs = multiqueue.CONFIGS[:2]
        self.assertEqual(multiqueue.results(collected, cfgs, multiqueue.BLK), mq["results"])
        self.assertEqual(multiqueue.results(collected, cfgs, multiqueue.NET),
                         mq["net_results"])

    def test_footprint_records(self):
        for target, _ in footprint.TARGETS:
            with self.subTest(target=target):
                path = raw(f"footprint-{target}.jsonl")
                with open(path) as f:
                    first = f.readline()
                want = self.sec["footprint"]["targets"][target]
                self.assertEqual(footprint.new_record(path, 0), want["runs"][-1])
                self.assertEqual(footprint.new_record(path, len(first)), want["runs"][1])
                self.assertIsNone(footprint.new_record(path, os.path.getsize(path)))
                figs = footprint.target_figures(want["runs"])
                self.assertEqual(figs, {k: want[k] for k in figs})

    def test_exit_dispatch_output(self):
        with open(raw("exit-dispatch-count.out")) as f:
            out = f.read()
        self.assertEqual(dispatch.parse(out), self.sec["exit_dispatch"]["raw"])
        self.assertEqual(dispatch.parse("valgrind says\n" + out + "done\n"),
                         self.sec["exit_dispatch"]["raw"])
        self.assertIsNone(dispatch.parse("SKIP: valgrind is not installed\n"))
        self.assertIsNone(dispatch.parse("{not json}"))

    def test_blk_vs_fio_json(self):
        with open(raw("blk_vs_fio.json")) as f:
            got = blkfio.figures(json.load(f))
        want = {k: v for k, v in self.sec["blk_model_vs_fio"].items()
                if k not in ("command", "target_ratio", "status")}
        self.assertEqual(got, want)


class FsShare(unittest.TestCase):
    """fixtures/fs_share/results.json: the run-N checks of vmm-ci's two cells
    in the fs_share run the README quotes (tree e042325, emulated host)."""

    def test_figures_from_the_cells(self):
        with open(os.path.join(HERE, "fixtures", "fs_share", "results.json")) as f:
            cells = json.load(f)["cells"]
        sec = {"results": [], "cells": []}
        fsshare.collect(sec, cells)
        got = {(r["mode"], r["figure"]): (r["initramfs_ms"], r["virtiofs_ms"], r["ratio"])
               for r in sec["results"]}
        self.assertEqual(len(got), len(fsshare.MODES) * len(fsshare.FIGURES))
        warm = [k for k, _, which, *_ in fsshare.FIGURES if which == "rest"][0]
        self.assertEqual(got[("msix", warm)][:2], (1293, 2944))
        self.assertAlmostEqual(got[("msix", warm)][2], 2944 / 1293, places=2)
        self.assertEqual(got[("intx", warm)][:2], (1902, 4809))
        self.assertEqual(sec["entries"], 2129)
        self.assertEqual([r["mode"] for r in sec["results"]][0], "msix")
        fsshare.set_status(sec, 0, "", "")
        self.assertEqual(sec["status"], "ok")

    def test_missing_figures_are_partial(self):
        sec = {"results": [], "cells": []}
        fsshare.collect(sec, [{"id": "c", "mode": "msix", "checks": [
            {"name": "run-1", "status": "pass",
             "stdout": "/vmmci/include git-status run 1: 10 ms\n/mnt git-status run 1: 30 ms"}]}])
        fsshare.set_status(sec, 1, "", "")
        self.assertEqual(sec["status"], "partial")


class Summary(unittest.TestCase):
    """summary rows and summary.md from a recorded results.json."""

    def setUp(self):
        self.doc = recorded()

    def test_rows_are_the_recorded_ones(self):
        self.assertEqual(report.summary_rows(self.doc), self.doc["summary"])

    def test_summary_md_is_the_recorded_one(self):
        with open(os.path.join(RUN, "summary.md")) as f:
            self.assertEqual(report.summary_md(self.doc), f.read())

    def assertLines(self, md, lines):
        have = md.splitlines()
        for line in lines:
            self.assertTrue(line in have, f"summary.md lacks: {line}")

    def test_expected_rows(self):
        md = report.summary_md(self.doc)
        self.assertLines(md, [
            "| section | figure | ours | reference | ratio ours/ref | target | met |",
            "| irq_latency | interrupt latency p50, MSI-X, KVM_SIGNAL_MSI † | 42.5 µs | "
            "raw-KVM floor: 16.5 µs | 2.58× | ≤ 1.10× floor | **no** |",
            "| virtio | virtio-blk 4 KiB read, QD32, INTx: requests/s † | 6,435 req/s | "
            "QEMU -M pc: 25,648 req/s | 0.25× | ≥ 1.0× QEMU | **no** |",
            "| exit_dispatch | userspace instructions per port-I/O exit dispatch | 449 insns | "
            "target: 500 insns | 0.90× | ≤ 500 | yes |",
            "| MSI-X, irqfd | ours | 50 | 16.7 | 26.4 | 38.2 | 63.1 | 63.1 |"])
        # The recording predates fs_share: a section a run lacks is not shown.
        for key, *_ in report.SECTIONS:
            self.assertEqual(md.count(f"\n### {key}: "), int(key in self.doc["sections"]), key)
        self.assertEqual({r["section"] for r in self.doc["summary"]},
                         {key for key, *_ in report.SECTIONS if key in self.doc["sections"]})

    def test_failed_parts_say_why(self):
        doc = copy.deepcopy(self.doc)
        s = doc["sections"]
        s["irq_latency"]["paths"]["intx-line"].update(
            ours={"status": "error", "note": "exit 2"}, ratio_p50=None, ratio_p99=None)
        s["blk_model_vs_fio"] = {"status": "skipped", "note": "no fio"}
        s["exit_dispatch"] = {"status": "skipped", "note": "no valgrind"}
        s["footprint"]["targets"]["qemu-pc"] = {"label": "QEMU -M pc", "status": "error",
                                                "note": "exit code 1"}
        doc["host"]["kvm_kind"] = "hardware"
        doc["summary"] = report.summary_rows(doc)
        md = report.summary_md(doc)
        self.assertNotIn("†", md)
        self.assertLines(md, [
            "| irq_latency | interrupt latency p50, INTx, KVM_IRQ_LINE | error | "
            "raw-KVM floor: 34.9 µs | — | ≤ 1.10× floor | — |",
            "| INTx, KVM_IRQ_LINE | ours | error |  |  |  |  |  |",
            "| blk_model_vs_fio | virtio-blk device model IOPS vs fio | skipped: no fio | "
            "fio: — | — | ≥ 0.9× fio | — |",
            "| exit_dispatch | userspace instructions per MMIO exit dispatch | skipped | "
            "target: 800 insns | — | ≤ 800 | — |",
            "| QEMU -M pc | error: exit code 1 |  |  |  |",
            "| footprint | RSS without guest memory, p50 (vs QEMU -M pc) | 2.19 MiB | "
            "QEMU -M pc: — | — |  | — |"])

if __name__ == "__main__":
    unittest.main()
