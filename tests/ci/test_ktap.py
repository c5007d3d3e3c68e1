#!/usr/bin/env python3
"""Unit tests for scripts/vmmci/ktap.py on recorded KTAP (ktap-fixtures/*.log,
written for these tests in the form KUnit prints: nested subtests, a
parameterised test, SKIP, a crash in the middle), and a comparison with the
kernel's own parser: `kunit.py parse --json` on the same logs (ours and the
kernel's tools/testing/kunit/test_data) must give the same test cases with
the same results, case for case. That part needs the kernel source, which
the suite's kernel builds unpack (guests/linux/build-kernel.sh's cache); it
runs last in the suite and says so when the source is not there."""
import glob
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from vmmci import ktap  # noqa: E402

FIXTURES = os.path.join(HERE, "ktap-fixtures")


def read(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


def kunit_py():
    cache = os.environ.get("VMM_KERNEL_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "vmm", "kernels")
    found = sorted(glob.glob(os.path.join(cache, "src", "*", "tools", "testing", "kunit",
                                          "kunit.py")))
    return found[-1] if found else None


class Recorded(unittest.TestCase):
    def test_nested_subtests_skip_and_diagnostics(self):
        main = ktap.parse(read("nested-skip.log"))
        self.assertEqual(main.status, ktap.FAIL)
        leaves = [("/".join(p), t.status) for p, t in main.leaves()]
        self.assertEqual(leaves, [
            ("vmm-example/vmm_example_simple", "pass"),
            ("vmm-example/vmm_example_fails", "fail"),
            ("vmm-example/vmm_example_params/one", "pass"),
            ("vmm-example/vmm_example_params/two", "skip"),
            ("vmm-example/vmm_example_params/three", "pass"),
            ("vmm-skipped/vmm_skipped_case", "skip")])
        suite = main.subtests[0]
        self.assertEqual((suite.name, suite.status, suite.expected), ("vmm-example", "fail", 3))
        fails = suite.subtests[1]
        self.assertIn("# vmm_example_fails: EXPECTATION FAILED at lib/vmm_example.c:42",
                      [x.strip() for x in fails.log])
        self.assertAlmostEqual(suite.subtests[0].time, 0.0499, places=3)
        self.assertEqual(main.subtests[1].status, ktap.SKIP)
        self.assertEqual(ktap.counts(main), {"pass": 3, "fail": 1, "skip": 2})

    def test_crash_in_the_middle(self):
        main = ktap.parse(read("crash-middle.log"))
        self.assertEqual(main.status, ktap.CRASHED)
        suite = main.subtests[0]
        self.assertEqual(suite.name, "vmm-crashy")
        self.assertEqual([t.status for t in suite.subtests], ["pass", "crashed", "crashed"])
        self.assertIn("BUG: kernel NULL pointer dereference, address: 0000000000000008",
                      [x.strip() for x in suite.subtests[1].log])
        self.assertEqual(main.subtests[1].status, ktap.CRASHED)  # the second suite never ran

    def test_cases_become_checks_of_a_cell(self):
        from vmmci import consolelog
        c = consolelog.parse_console(read("nested-skip.log"))
        got = {x.name: x for x in consolelog.kernel_checks(
            c, consolelog.parse_stats(""), consolelog.Expect(), consolelog.parse_host_cpu(
                "", consolelog.Expect())) if x.name.startswith("kunit:")}
        self.assertEqual(sorted(got), [
            "kunit:vmm-example.vmm_example_fails", "kunit:vmm-example.vmm_example_params.one",
            "kunit:vmm-example.vmm_example_params.three",
            "kunit:vmm-example.vmm_example_params.two", "kunit:vmm-example.vmm_example_simple",
            "kunit:vmm-skipped.vmm_skipped_case"])
        fails = got["kunit:vmm-example.vmm_example_fails"]
        self.assertEqual((fails.status, fails.level), ("fail", "kunit"))
        self.assertIn("EXPECTATION FAILED at lib/vmm_example.c:42", fails.detail)
        self.assertEqual(got["kunit:vmm-example.vmm_example_params.two"].status, "skip")
        self.assertAlmostEqual(got["kunit:vmm-example.vmm_example_simple"].time, 0.0499, 3)

    def test_a_recorded_kunit_boot(self):
        # The recipe kernel 6.1:kunit booted by vmm-ci (the console printed
        # once: see ktap.once): three suites, 61 cases, the example's 2 skips.
        main = ktap.parse(read("6.1-kunit-boot.log"))
        self.assertEqual([(t.name, t.expected, t.status) for t in main.subtests],
                         [("example", 4, "pass"), ("list-kunit-test", 39, "pass"),
                          ("hlist", 18, "pass")])
        self.assertEqual(ktap.counts(main), {"pass": 59, "skip": 2})

    def test_no_ktap_at_all(self):
        self.assertIsNone(ktap.parse("[    1.0] Linux version 6.1\n[    2.0] Run /init\n"))


def kunit_leaves(group, path=()):
    for g in group.get("sub_groups", []):
        yield from kunit_leaves(g, path + (g["name"],))
    for t in group.get("test_cases", []):
        yield path + (t["name"],), t["status"]


STATUS = {"pass": "PASS", "skip": "SKIP", "crashed": "ERROR", "fail": "FAIL", "no-tests": "FAIL"}


class AgainstKunitPy(unittest.TestCase):
    def test_same_cases_as_kunit_py(self):
        tool = kunit_py()
        if not tool:
            self.skipTest("no kernel source with tools/testing/kunit/kunit.py in the kernel "
                          "cache (guests/linux/build-kernel.sh unpacks one)")
        logs = sorted(glob.glob(os.path.join(FIXTURES, "*.log")) +
                      glob.glob(os.path.join(os.path.dirname(tool), "test_data", "*.log")))
        compared = 0
        for log in logs:
            with self.subTest(log=os.path.basename(log)), tempfile.TemporaryDirectory() as d:
                out = os.path.join(d, "k.json")
                subprocess.run([sys.executable, tool, "parse", log, f"--json={out}"],
                               capture_output=True, cwd=d, timeout=60)
                with open(log, errors="replace") as f:
                    ours = ktap.parse(f.read())
                if not os.path.exists(out):
                    # kunit.py wrote no JSON: it found no test at all.
                    self.assertTrue(ours is None or not list(ours.leaves()), log)
                    continue
                with open(out) as f:
                    theirs = [(tuple(p), s) for p, s in kunit_leaves(json.load(f))]
                mine = [(p, STATUS[t.status]) for p, t in ours.leaves()] if ours else []
                # kunit.py's JSON lists a group's subgroups before its cases:
                # the same cases, compared as a multiset.
                self.assertEqual(sorted(mine), sorted(theirs))
                compared += 1
        self.assertGreaterEqual(compared, 10)
        print(f"\n{compared} logs: the same test cases and results as {tool}", file=sys.stderr)


if __name__ == "__main__":
    result = unittest.main(exit=False).result
    if not result.wasSuccessful():
        sys.exit(1)
    sys.exit(77 if result.skipped else 0)  # meson: skipped, with the reason above
