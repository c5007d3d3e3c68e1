#!/usr/bin/env python3
"""vmm-ci against text a guest (or a user's command in it) controls (issue
26): recorded cells edited only as a guest could print them, then random
and adversarial console text.

  - forged markers: checks, the verdict and KTAP printed after the first
    user command change nothing of ours; statuses count once, in order,
    only for a command that started;
  - parsing is linear: a line of a million blanks, a 64 MiB line without a
    newline; the runner keeps at most LINE_MAX bytes of a line;
  - deep KTAP nesting is cut, not a RecursionError; an exception in one cell
    is that cell's failure;
  - junit.xml stays parseable with U+FFFE in a line; summary.md shows a
    KUnit case named with '|' and HTML as text;
  - the hvc0 token is typed once, without blocking, however often the
    ready line comes;
  - property: random text after the first user command leaves every check
    that is not a command's own as it was, in time bounded per byte.
Bounds on time are 10-30x what was measured here (see each), so a loaded
box does not fail them; the quadratic parsers took 100 s and more.
"""
import os
import random
import subprocess
import sys
import tempfile
import time
import tracemalloc
import unittest
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
sys.path.insert(0, HERE)
from test_consolelog import load, vmm_ci_module  # noqa: E402
from vmmci import cellrun, consolelog, ktap, report, usercmd  # noqa: E402


def protocol2(console):
    """The recorded protocol-1 cell as today's /init prints it: protocol 2,
    the verdict before the first user command."""
    lines = console.split("\n")
    done = next(x for x in lines if x.startswith("VMMCI: done "))
    lines.remove(done)
    at = lines.index("VMMCI: run 1 start")
    lines.insert(at, done)
    return "\n".join(lines).replace("VMMCI: protocol 1", "VMMCI: protocol 2")


class Cell:
    def __init__(self):
        console, self.stderr, self.case = load("6.1-msi-msix-user-commands")
        self.console = protocol2(console)

    def checks(self, console=None, stderr=None):
        e = consolelog.Expect(**self.case["expect"])
        console = self.console if console is None else console
        _, _, checks = consolelog.evaluate(console, console,
                                           self.stderr if stderr is None else stderr,
                                           self.case["exit"], e)
        return {c.name: c for c in checks}

    def after_run_start(self, text, n=1):
        mark = f"VMMCI: run {n} start\n"
        assert mark in self.console
        return self.console.replace(mark, mark + text, 1)


class Forgery(unittest.TestCase):
    def setUp(self):
        self.cell = Cell()
        self.base = self.cell.checks()

    def test_the_edited_recording_passes_our_checks(self):
        ours = {k: v.status for k, v in self.base.items() if not k.startswith("run-")}
        self.assertTrue(all(s in ("pass", "skip") for s in ours.values()), ours)
        self.assertEqual(self.base["run-2"].status, "fail")

    def test_a_check_printed_after_the_first_command_changes_nothing(self):
        # A failed hwrng check, then the command prints a passing one.
        failed = self.cell.console.replace("VMMCI: check hwrng ok", "VMMCI: check hwrng FAIL")
        failed = failed.replace("VMMCI: done ok 4", "VMMCI: done FAIL 1 of 4")
        forged = failed.replace("VMMCI: run 1 start\n", "VMMCI: run 1 start\n"
                                "VMMCI: check hwrng ok forged\nVMMCI: done ok 4\n"
                                "VMMCI: check extra ok forged\n", 1)
        c = self.cell.checks(console=forged)
        self.assertEqual(c["hwrng"].status, "fail")
        self.assertEqual(c["init-verdict"].status, "fail")
        self.assertNotIn("extra", c)
        self.assertEqual(c["hwrng"].detail, self.cell.checks(console=failed)["hwrng"].detail)

    def test_a_check_said_twice_keeps_the_first(self):
        twice = self.cell.console.replace(
            "VMMCI: check ping ok", "VMMCI: check hwrng ok again\nVMMCI: check ping ok")
        failed = twice.replace("VMMCI: check hwrng ok rng", "VMMCI: check hwrng FAIL rng")
        self.assertEqual(self.cell.checks(console=failed)["hwrng"].status, "fail")

    def test_a_stop_before_the_verdict_of_old_is_no_pass(self):
        # Protocol 2: a last command that stops the VM cannot cut /init
        # short of its verdict: the verdict came before it.
        cut = self.cell.console[:self.cell.console.index("VMMCI: run 4 start")]
        cut += "VMMCI: run 4 start\nVMMCI: done ok 4\n"
        failed = cut.replace("VMMCI: done ok 4\nVMMCI: run 1", "VMMCI: done FAIL 1 of 4\n"
                             "VMMCI: run 1", 1)
        self.assertEqual(self.cell.checks(console=failed)["init-verdict"].status, "fail")

    def test_ktap_inside_a_command_or_after_it_is_not_kunit(self):
        ktap_text = ("KTAP version 1\n1..1\n    KTAP version 1\n    # Subtest: forged\n"
                     "    1..1\n    ok 1 case\nok 1 forged\n")
        inline = "".join(f"VMMCI: run 1 stdout {x}\n" for x in ktap_text.splitlines())
        mid = "noise KTAP version 1\n1..1\nok 1 forged\n"
        for text in (inline, ktap_text, mid):
            with self.subTest(text=text[:30]):
                c = self.cell.checks(console=self.cell.after_run_start(text))
                self.assertFalse([k for k in c if k.startswith("kunit:")], list(c))
        # The same KTAP before /init, at a line start, is KUnit's.
        before = self.cell.console.replace("VMMCI: protocol 2", ktap_text + "VMMCI: protocol 2")
        self.assertIn("kunit:forged.case", self.cell.checks(console=before))

    def test_statuses_in_order_once_and_only_for_a_started_command(self):
        lines = self.cell.stderr.splitlines()
        at = next(i for i, x in enumerate(lines) if "command 1 ended" in x)
        early = ["vmm: info: guest status: command %d ended with status 0" % n for n in (2, 3, 4)]
        forged = "\n".join(lines[:at] + early + lines[at:]) + "\n"
        c = self.cell.checks(stderr=forged)
        self.assertEqual([c[f"run-{n}"].status for n in (1, 2, 3, 4)],
                         ["pass", "fail", "fail", "fail"])
        # A second status for command 2 (0, after the real 3) is not taken.
        again = self.cell.stderr.replace(
            "command 2 ended with status 3",
            "command 2 ended with status 3\nvmm: info: guest status: command 2 ended with "
            "status 0")
        self.assertEqual(self.cell.checks(stderr=again)["run-2"].status, "fail")
        # A command that never started gets no status.
        runs = usercmd.parse_runs([(None, "VMMCI: run 1 start")],
                                  "vmm: info: guest status: command 1 ended with status 0\n"
                                  "vmm: info: guest status: command 2 ended with status 0\n")
        self.assertEqual(runs[1].status, 0)
        self.assertNotIn(2, runs)
        # A run marker inside a command's output line is that output.
        runs = usercmd.parse_runs([(None, "VMMCI: run 1 start"),
                                   (None, "VMMCI: run 1 stdout VMMCI: run 2 start")], "")
        self.assertEqual(runs[1].stdout, ["VMMCI: run 2 start"])
        self.assertNotIn(2, runs)


class Linear(unittest.TestCase):
    def test_a_long_line_of_blanks(self):
        # Measured: 10k / 20k / 40k blanks took 1.6 / 4.9 / 16.7 s before; a
        # million now takes about 0.1 s here (bound 10 s).
        text = "KTAP version 1\n1..1\n" + " " * 1_000_000 + "\nok 1 x\n"
        t0 = time.monotonic()
        main = ktap.parse(text)
        consolelog.parse_console(text)
        took = time.monotonic() - t0
        self.assertLess(took, 10, f"{took:.1f} s")
        self.assertEqual(main.subtests[0].status, "pass")

    def test_a_64_mib_line_is_cut_and_costs_its_length(self):
        # Measured before: 16 / 32 / 64 MiB took 8.7 / 25 / 101 s; now 64
        # MiB takes about 1 s here (bound 30 s), memory under the cap.
        s = cellrun.Session([], None, lambda *a: None)
        s.t0 = time.monotonic()
        chunk = b"x" * 65536
        tracemalloc.start()
        t0 = time.monotonic()
        for _ in range(1024):
            s.feed("console", chunk)
        s.feed("console", b"\nnext\n")
        took = time.monotonic() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        self.assertLess(took, 30, f"{took:.1f} s")
        self.assertLess(peak, 4 << 20, peak)
        texts = [t for _, t in s.streams["console"]]
        self.assertEqual(len(texts), 2)
        self.assertTrue(texts[0].startswith("x" * cellrun.LINE_MAX))
        self.assertIn(f"[... {64 * 1024 * 1024 - cellrun.LINE_MAX} bytes cut]", texts[0])
        self.assertEqual(texts[1], "next")
        self.assertIn("1 line(s) cut", s.limits_note())

    def test_a_stream_keeps_at_most_its_cap(self):
        s = cellrun.Session([], None, lambda *a: None)
        s.t0 = time.monotonic()
        line = b"y" * 1000 + b"\n"
        for _ in range(cellrun.STREAM_MAX // 1000 + 5000):
            s.feed("stderr", line)
        self.assertLessEqual(s.kept["stderr"], cellrun.STREAM_MAX)
        self.assertGreater(s.cut["stderr"][1], 0)

    def test_deep_nesting_is_cut_not_a_crash(self):
        depth = 1200
        text = "KTAP version 1\n1..1\n" + "".join(
            "    " * i + f"# Subtest: s{i}\n" + "    " * i + "1..1\n" for i in range(1, depth))
        main = ktap.parse(text)  # RecursionError before
        self.assertIsNotNone(main)
        self.assertEqual(main.status, "crashed")


class Reports(unittest.TestCase):
    def test_invalid_xml_and_markdown_from_the_guest(self):
        name = "kunit:a | b | <img src=x onerror=alert(1)>"
        checks = [consolelog.Check(name, "fail", "bad \ufffe byte \x01 and </failure>"),
                  consolelog.Check("hwrng", "pass", "ok \ufffe")]
        cell = cellrun.error_result(type("C", (), {
            "id": "c1", "kernel": type("K", (), {"to_dict": lambda s: {"label": "6.1:msi"}, "version": "6.1",
                                                  "variant": "msi"})(),
            "mode": "msix", "cpus": 1, "repeat": 0, "full": False})(), ValueError("boom"))
        cell["checks"] = [x.to_dict() for x in checks]
        with tempfile.TemporaryDirectory() as d:
            report.write_all(d, {"host": "test"}, [cell])
            root = ET.parse(os.path.join(d, "junit.xml")).getroot()  # raised before
            with open(os.path.join(d, "summary.md")) as f:
                md = f.read()
        self.assertEqual(len(list(root.iter("testcase"))), 2)
        self.assertNotIn("<img", md)
        self.assertIn("&lt;img", md)
        self.assertIn("a \\| b \\|", md)

    def test_a_cell_that_raised_is_a_failed_cell(self):
        cell = type("C", (), {"id": "c2", "kernel": type("K", (), {
            "to_dict": lambda s: {"label": "6.1:msi"}, "version": "6.1", "variant": "msi"})(),
            "mode": "msix", "cpus": 1, "repeat": 0, "full": False})()
        r = cellrun.error_result(cell, RecursionError("deep"))
        self.assertEqual(r["result"], "fail")
        self.assertIn("RecursionError: deep", r["checks"][0]["detail"])
        with tempfile.TemporaryDirectory() as d:
            report.write_all(d, {"host": "test"}, [r])
            self.assertTrue(os.path.exists(os.path.join(d, "results.json")))


class Typing(unittest.TestCase):
    def test_the_token_is_typed_once_without_blocking(self):
        # A VMM that never reads its stdin: 4,000 ready lines once blocked
        # the runner 20 s past its limit.
        proc = subprocess.Popen(["sleep", "30"], stdin=subprocess.PIPE)
        try:
            os.set_blocking(proc.stdin.fileno(), False)
            s = cellrun.Session([], None, lambda *a: None)
            s.proc = proc
            t0 = time.monotonic()
            for _ in range(4000):
                s.type_on_hvc0("x" * 100 + "\n")
            self.assertLess(time.monotonic() - t0, 5)
            self.assertTrue(s.typed)
        finally:
            proc.kill()
            proc.wait()
            proc.stdin.close()


class Files(unittest.TestCase):
    """Issue 26: the runner, often root, writes only where others cannot
    lead it elsewhere."""

    def test_out_dir_others_can_write_is_refused(self):
        cli = vmm_ci_module()
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0o755)
            cli.check_out_dir(d)
            os.chmod(d, 0o777)
            with self.assertRaises(ValueError):
                cli.check_out_dir(d)

    def test_the_disk_image_is_never_written_through_a_link(self):
        with tempfile.TemporaryDirectory() as d:
            victim = os.path.join(d, "victim")
            with open(victim, "wb") as f:
                f.write(b"keep")
            img = os.path.join(d, "vda.img")
            os.symlink(victim, img)
            cellrun.make_partitioned_disk(img, mib=16)
            with open(victim, "rb") as f:
                self.assertEqual(f.read(), b"keep")
            self.assertFalse(os.path.islink(img))
            self.assertEqual(os.path.getsize(img), 16 << 20)


class Property(unittest.TestCase):
    """Random and adversarial text after the first user command: no check of
    ours moves, and the time per byte stays bounded."""
    TOKENS = ["VMMCI: ", "check ", "hwrng ", "FAIL ", "ok ", "done ", "run ", "1 ", "2 ",
              "start", "end", "stdout ", "KTAP version 1", "TAP version 14", "1..3", "# Subtest: ",
              "not ok 1 ", "# SKIP", "    ", "\t", "[", "]", "[    1.000000] ", "<6>", "\ufffe",
              "|", "<img>", "Kernel panic - not syncing: ", "\r", "x" * 300, " " * 2000,
              "vmm: info: guest status: command 1 ended with status 0", "\n", "\n", "\n"]

    def test_random_text_after_the_first_command(self):
        cell = Cell()
        base = {k: (v.status, v.detail) for k, v in cell.checks().items()
                if not k.startswith("run-")}
        rng = random.Random(26)
        total, spent = 0, 0.0
        for _ in range(60):
            text = "".join(rng.choice(self.TOKENS) for _ in range(rng.randint(10, 400)))
            total += len(text)
            forged = cell.after_run_start(text + "\n", rng.randint(1, 4))
            t0 = time.monotonic()
            got = cell.checks(console=forged)
            spent += time.monotonic() - t0
            now = {k: (v.status, v.detail) for k, v in got.items() if not k.startswith("run-")}
            self.assertEqual(now, base, text[:200])
        # Measured: about 0.02 ms per byte of the whole cell's console here;
        # the bound is per byte of what was added, 30x that for all of it.
        per_byte = spent / (total + 60 * len(cell.console))
        self.assertLess(per_byte, 1e-5, f"{per_byte * 1e6:.2f} us per byte")


if __name__ == "__main__":
    unittest.main(verbosity=2)
