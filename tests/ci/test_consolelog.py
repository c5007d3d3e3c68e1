#!/usr/bin/env python3
"""Unit tests for scripts/vmmci/consolelog.py on recorded cell outputs.

Each directory under fixtures/ is one cell recorded by scripts/vmm-ci
(console.log = the VMM's console output, vmm.stderr = its stderr with
--stats) plus case.json: the cell's expectations, the VMM's exit code and
which checks must fail (every other check must pass or be skipped as
listed). Further tests edit a passing recording to break one rule at a time.
"""
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from vmmci import cellrun, consolelog, matrix, report  # noqa: E402

FIXTURES = os.path.join(HERE, "fixtures")


def load(name):
    d = os.path.join(FIXTURES, name)
    with open(os.path.join(d, "console.log"), errors="replace") as f:
        console = f.read()
    with open(os.path.join(d, "vmm.stderr"), errors="replace") as f:
        stderr = f.read()
    with open(os.path.join(d, "case.json")) as f:
        case = json.load(f)
    return console, stderr, case


def expect_of(case, **changes):
    e = dict(case["expect"])
    e.update(changes)
    return consolelog.Expect(**e)


def evaluate(console, stderr, case, **changes):
    e = expect_of(case, **changes)
    return consolelog.evaluate(console, console, stderr, case["exit"], e)


def statuses(checks):
    return {c.name: c.status for c in checks}


class RecordedCells(unittest.TestCase):
    """Every recorded cell gives exactly the verdicts its case.json lists."""

    def test_fixtures(self):
        names = sorted(os.listdir(FIXTURES))
        self.assertTrue(names)
        for name in names:
            with self.subTest(fixture=name):
                console, stderr, case = load(name)
                _, _, checks = evaluate(console, stderr, case)
                got = statuses(checks)
                for check, want in case["verdicts"].items():
                    self.assertEqual(got.get(check), want, f"{check}: {got.get(check)}, "
                                     f"wanted {want}; {[c for c in checks if c.name == check]}")
                unlisted = {k: v for k, v in got.items() if k not in case["verdicts"]}
                self.assertEqual({k: v for k, v in unlisted.items() if v != "pass"}, {},
                                 "checks not listed in case.json must pass")


class AcpiCell(unittest.TestCase):
    """The recorded ACPI nomsi cell, edited to break one rule at a time."""

    def setUp(self):
        self.console, self.stderr, self.case = load("6.1-acpi-nomsi-msix-pass")

    def check(self, name, console=None, **changes):
        _, _, checks = evaluate(self.console if console is None else console, self.stderr,
                                self.case, **changes)
        return {c.name: c for c in checks}[name]

    def test_levels_are_read_and_the_orderly_end_is_allowed(self):
        c = self.check("kernel-log-level")
        self.assertEqual(c.status, "pass")
        self.assertIn("reboot: Power down", c.detail)
        bad = self.console + "<2>[   99.000000] mce: [Hardware Error]: CPU 0: Machine Check\n"
        c = self.check("kernel-log-level", console=bad)
        self.assertEqual(c.status, "fail")
        self.assertIn("<2> mce: [Hardware Error]", c.detail)

    def test_a_console_without_levels_cannot_be_judged(self):
        import re
        plain = re.sub(r"(?m)^<\d+>", "", self.console)
        self.assertEqual(self.check("kernel-log-level", console=plain).status, "fail")

    def test_the_acpi_lines_are_needed(self):
        bad = "\n".join(x for x in self.console.splitlines() if "ACPI: Using IOAPIC" not in x)
        c = self.check("acpi", console=bad)
        self.assertEqual(c.status, "fail")
        self.assertIn("Using IOAPIC for interrupt routing", c.detail)

    def test_a_wrong_prt_entry_shows_in_irq_proc(self):
        # What a VMM with a planted _PRT entry (slot 3 -> 20 instead of 19)
        # recorded: the console sharing the net device's input, and both
        # still working (hvc polls), so only the wiring shows it.
        bad = self.console.replace(
            "28:         54   IO-APIC  19-fasteoi   virtio2\n"
            "VMMCI: interrupts 29:         28   IO-APIC  20-fasteoi   virtio3",
            "28:         28   IO-APIC  20-fasteoi   virtio2, virtio3")
        self.assertNotEqual(bad, self.console)
        c = self.check("irq-proc", console=bad)
        self.assertEqual(c.status, "fail")
        self.assertIn("the guest hears virtio2 (console) on IOAPIC input 20, the VMM wires it "
                      "to 19", c.detail)


class KunitCell(unittest.TestCase):
    def test_every_kunit_case_is_a_junit_case(self):
        import tempfile
        import xml.etree.ElementTree as ET
        console, stderr, case = load("6.1-kunit-msix-pass")
        _, _, checks = evaluate(console, stderr, case)
        kunit = [c for c in checks if c.name.startswith("kunit:")]
        self.assertEqual(len(kunit), 61)
        cell = {"id": "cell", "checks": [c.to_dict() for c in checks], "boot": {"vmm_wall_s": 1}}
        with tempfile.TemporaryDirectory() as d:
            report.write_junit(os.path.join(d, "j.xml"), [cell], "hardware-assisted KVM")
            cases = [t for t in ET.parse(os.path.join(d, "j.xml")).getroot().iter("testcase")
                     if t.get("name").startswith("kunit:")]
        self.assertEqual(len(cases), 61)
        self.assertTrue(all(t.get("time") for t in cases))
        skipped = sorted(t.get("name") for t in cases if t.find("skipped") is not None)
        self.assertEqual(skipped, ["kunit:example.example_mark_skipped_test",
                                   "kunit:example.example_skip_test"])


class HostNamed(unittest.TestCase):
    """Every report names where the cells ran: a JUnit property per suite,
    and the summary's note for the emulated host (never the ring-0 one)."""
    HOST = "emulated (QEMU 7.2.22 TCG, nested SVM, kernel 6.12.118+deb12-amd64)"

    def test_junit_property_and_summary_note(self):
        import tempfile
        import xml.etree.ElementTree as ET
        cell = {"id": "cell", "checks": [], "boot": {"vmm_wall_s": 1.0}}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "junit.xml")
            report.write_junit(path, [cell], self.HOST)
            props = [(p.get("name"), p.get("value"))
                     for p in ET.parse(path).getroot().iter("property")]
        self.assertEqual(props, [("host", self.HOST)])
        self.assertEqual(report.host_note(self.HOST), report.EMULATED_HOST_NOTE)
        self.assertEqual(report.host_note(
            "nested page-table based KVM (kvm_pvm): guest ring 0 is emulated"), report.IO_NOTE)
        self.assertEqual(report.host_note("hardware-assisted KVM"), "")

    def test_one_inherited_condition_of_many_cells_is_one_line(self):
        cells = [{"id": f"k.c2.r{i}", "checks": [{"name": "tsc", "info": "host-inherited: x"}]}
                 for i in (1, 2, 3)] + [{"id": "k.c1.r1", "checks": [{"name": "tsc"}]}]
        self.assertEqual(report.host_inherited(cells),
                         ["3 cells (k.c2.r1 ... k.c2.r3): tsc: host-inherited: x"])


class UserCommands(unittest.TestCase):
    """The user's commands: status from the VMM's status-port lines only."""

    def setUp(self):
        self.console, self.stderr, self.case = load("6.1-msi-msix-user-commands")

    def checks(self, console=None, stderr=None, **changes):
        _, _, checks = evaluate(self.console if console is None else console,
                                self.stderr if stderr is None else stderr, self.case, **changes)
        return {c.name: c for c in checks}

    def test_statuses_timeout_and_output(self):
        c = self.checks()
        self.assertEqual(c["run-1"].detail, "`true`: exit status 0")
        self.assertEqual(c["run-2"].detail, "`exit 3`: exit status 3")
        self.assertIn("timed out after 20 s", c["run-3"].detail)
        self.assertEqual(c["run-4"].stdout, "hi from ./t.sh")

    def test_a_printed_status_line_is_not_a_status(self):
        # The command prints what the VMM would say: the console is not read for it.
        forged = self.console.replace(
            "VMMCI: run 2 start",
            "VMMCI: run 2 start\nvmm: info: guest status: command 2 ended with status 0")
        self.assertNotEqual(forged, self.console)
        self.assertEqual(self.checks(console=forged)["run-2"].status, "fail")
        lost = "\n".join(x for x in self.stderr.splitlines() if "command 1 ended" not in x)
        c = self.checks(stderr=lost)["run-1"]
        self.assertEqual(c.status, "fail")
        self.assertIn("no status came back through the status port", c.detail)

    def test_skipped_where_userspace_cannot_run(self):
        c = self.checks(userspace=False, userspace_skip="guest ring 0 is emulated")
        self.assertEqual(c["run-1"].status, "skip")
        self.assertIn("needs hardware-assisted KVM", c["run-1"].detail)

    def test_junit_carries_output(self):
        import tempfile
        import xml.etree.ElementTree as ET
        checks = [x.to_dict() for x in self.checks().values()]
        cell = {"id": "cell", "checks": checks, "boot": {"vmm_wall_s": 1.0}}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "junit.xml")
            report.write_junit(path, [cell], "hardware-assisted KVM")
            root = ET.parse(path).getroot()
        tc = {t.get("name"): t for t in root.iter("testcase")}
        self.assertIsNotNone(tc["run-2"].find("failure"))
        self.assertIn("hi from ./t.sh", tc["run-4"].find("system-out").text)


class StopCauses(unittest.TestCase):
    """Why each recorded cell's VM stopped, as its case.json says (issue 20):
    an exit code alone does not tell a reset, the expected init panic, an
    emulation failure, a triple fault or another panic apart."""

    def test_every_fixture_names_its_stop(self):
        seen = set()
        for name in sorted(os.listdir(FIXTURES)):
            with self.subTest(fixture=name):
                console, stderr, case = load(name)
                c = consolelog.parse_console(console)
                cause = consolelog.stop_cause(c, stderr, case["exit"])
                self.assertEqual(cause.kind, case["stop"], cause)
                self.assertEqual(cause.clearcpuid, case.get("stop_clearcpuid", []))
                seen.add(cause.kind)
        self.assertTrue({"reset", "init-syscall-panic", "panic", "emulation-failure",
                         "triple-fault"} <= seen, seen)

    def test_emulation_failure_is_named_in_vmm_exit(self):
        console, stderr, case = load("emulation-failure-xrstor")
        _, _, checks = evaluate(console, stderr, case)
        got = {c.name: c for c in checks}["vmm-exit"]
        self.assertEqual(got.status, "fail")
        self.assertIn("emulation-failure", got.detail)
        self.assertIn("48 0f ae 2f", got.detail)
        self.assertIn("clearcpuid=154", got.detail)
        # Even where the expected end is exit 4 (a user's kernel that
        # cannot run /init here), an emulation failure is not that end.
        _, _, checks = evaluate(console, stderr, case, userspace=False)
        self.assertEqual({c.name: c for c in checks}["vmm-exit"].status, "fail")

    def test_the_kind_comes_from_the_vmm_not_the_code(self):
        """Issue 26: a guest that writes 12 to the status port ended the VM
        itself: the VMM's stop line says so, and it is never 'seccomp'."""
        c = consolelog.parse_console("")
        line = ("vmm: warning: guest stopped: the guest wrote its exit status to the status "
                "port (exit code {0}, chosen by the guest; stop: guest-status)\n")
        for code in (2, 4, 6, 8, 10, 12, 14, 0, 3):
            with self.subTest(code=code):
                cause = consolelog.stop_cause(c, line.format(code), code)
                self.assertEqual(cause.kind, "guest-status", cause)
        # A line of an older VMM without the kind: the status port still tells.
        old = ("vmm: warning: guest stopped: the guest wrote its exit status to the status "
               "port (exit code 12)\n")
        self.assertEqual(consolelog.stop_cause(c, old, 12).kind, "guest-status")
        seccomp = ("\nvmm: error: the vCPU thread made a system call its seccomp filter "
                   "forbids: openat (257); a VMM bug, or an attack: the VM stops (exit code 12)\n")
        self.assertEqual(consolelog.stop_cause(c, seccomp, 12).kind, "seccomp")
        self.assertEqual(consolelog.stop_cause(c, "", 12).kind, "unknown")
        for kind, want in (("timeout", "timeout"), ("interrupted", "interrupted"),
                           ("debug-exit", "guest-exit"), ("host", "host")):
            stop = f"vmm: warning: guest stopped: x (exit code 6; stop: {kind})\n"
            self.assertEqual(consolelog.stop_cause(c, stop, 6).kind, want)

    def test_expected_init_panic_passes(self):
        console, stderr, case = load("user-6.1-unpatched-intx")
        _, _, checks = evaluate(console, stderr, case)
        got = {c.name: c for c in checks}["vmm-exit"]
        self.assertEqual(got.status, "pass", got)
        self.assertIn("init-syscall-panic", got.detail)


class AutoClearcpuid(unittest.TestCase):
    """--auto-clearcpuid re-runs a user's kernel with the hint's bits, and
    only a user's kernel (run_cell stubbed: no VM here)."""

    def runs(self, source, stops):
        calls = []

        def fake_run_cell(cell, index, ctx):
            calls.append(cell.extra_clearcpuid)
            stop = stops[min(len(calls), len(stops)) - 1]
            return {"id": cell.id, "stop": stop, "checks": []}

        saved = cellrun.run_cell
        cellrun.run_cell = fake_run_cell
        try:
            k = matrix.Kernel("k", "/k/bzImage", "6.1.0", "", source)
            r = cellrun.run_cell_auto_clearcpuid(matrix.Cell(k, "msix", 1, 1), 0, None,
                                                 lambda m: None)
        finally:
            cellrun.run_cell = saved
        return calls, r

    def test_bits_added_until_the_kernel_gets_past(self):
        emul = lambda bits: {"kind": "emulation-failure", "detail": "d", "clearcpuid": bits}
        calls, r = self.runs("user", [emul([137]), emul([129]), {"kind": "reset"}])
        self.assertEqual(calls, [(), (137,), (137, 129)])
        self.assertEqual(r["auto_clearcpuid"]["added"], [137, 129])
        info = [c for c in r["checks"] if c["name"] == "auto-clearcpuid"][0]["info"]
        self.assertIn("--auto-clearcpuid: 137 after: d", info)

    def test_no_new_bit_or_recipe_kernel_runs_once(self):
        emul = {"kind": "emulation-failure", "detail": "d", "clearcpuid": [137]}
        self.assertEqual(self.runs("recipe", [emul])[0], [()])
        self.assertEqual(self.runs("user", [{"kind": "emulation-failure", "clearcpuid": []}])[0],
                         [()])
        # The same bit again (it did not help): no loop.
        calls, _ = self.runs("user", [emul, emul])
        self.assertEqual(calls, [(), (137,)])

    def test_extra_bits_reach_the_command_line(self):
        k = matrix.Kernel("k", "/k/bzImage", "5.10.0", "", "user")
        cell = matrix.Cell(k, "msix", 1, 1, extra_clearcpuid=(137, 129))
        words = cellrun.cmdline_for(cell, False, "tok").split()
        clear = [w for w in words if w.startswith("clearcpuid=")][0]
        self.assertTrue(clear.endswith(",137,129"), clear)
        self.assertTrue(clear[len("clearcpuid="):].replace(",", "").isdigit(), clear)


class HostRerun(unittest.TestCase):
    """A 2-vCPU cell that failed by the host's userspace crash runs once
    more (the recorded AMD cell); nothing else does."""

    class Ctx:
        emulated = True

    def setUp(self):
        self.console, _, _ = load("amd-6.1-msi-msix-2cpu-userspace-segv")

    def test_the_recorded_crash_is_recognised(self):
        failed = {"result": "fail", "cpus": 2}
        crash = cellrun.host_userspace_crash(failed, self.console, self.Ctx())
        self.assertTrue(crash.startswith("exe[41]: segfault at 0 ip 00000000004a4d02"), crash)
        # Not on 1 vCPU, not on a hardware-assisted host, not for a pass.
        self.assertEqual(cellrun.host_userspace_crash({"result": "fail", "cpus": 1},
                                                      self.console, self.Ctx()), "")
        hw = self.Ctx()
        hw.emulated = False
        self.assertEqual(cellrun.host_userspace_crash(failed, self.console, hw), "")
        self.assertEqual(cellrun.host_userspace_crash({"result": "pass", "cpus": 2},
                                                      self.console, self.Ctx()), "")
        # init's own fault at entry_SYSCALL_64 is another matter (the panic kind).
        console, _, _ = load("user-6.1-unpatched-intx")
        self.assertEqual(cellrun.host_userspace_crash(failed, console, self.Ctx()), "")

    def test_second_run_stands_and_the_first_is_said(self):
        import tempfile
        runs = []

        def run(cell, index, ctx):
            runs.append(1)
            ok = len(runs) > 1
            return {"result": "pass" if ok else "fail", "cpus": 2,
                    "checks": [{"name": "hwrng", "status": "pass" if ok else "fail"}]}

        with tempfile.TemporaryDirectory() as tmp:
            ctx = self.Ctx()
            ctx.out = tmp
            cell = matrix.Cell(matrix.Kernel("6.1:msi", "/k"), "msix", 2, 1)
            os.makedirs(os.path.join(tmp, "cells", cell.id))
            with open(os.path.join(tmp, "cells", cell.id, "console.log"), "w") as f:
                f.write(self.console)
            r = cellrun.run_cell_once_more_on_host_crash(run, cell, 0, ctx, lambda m: None)
        self.assertEqual(len(runs), 2)
        self.assertEqual(r["result"], "pass")
        self.assertEqual(r["host_rerun"]["first_failed"], ["hwrng"])
        info = [c for c in r["checks"] if c["name"] == "host-rerun"][0]["info"]
        self.assertIn("host-inherited: first run failed hwrng", info)


class BrokenOnPurpose(unittest.TestCase):
    """A passing recording, edited to break one rule at a time."""

    def setUp(self):
        self.console, self.stderr, self.case = load("6.1-msi-msix-pass")

    def verdict(self, name, console=None, stderr=None, exit_code=None, **changes):
        case = dict(self.case)
        if exit_code is not None:
            case["exit"] = exit_code
        _, _, checks = evaluate(self.console if console is None else console,
                                self.stderr if stderr is None else stderr, case, **changes)
        return {c.name: c for c in checks}[name]

    def test_passing_recording_passes(self):
        for name in ("boot", "virtio-blk", "irq-path", "kernel-log-clean", "init-verdict"):
            self.assertEqual(self.verdict(name).status, "pass", name)

    def test_warning_line_fails(self):
        bad = self.console.replace("IPI shorthand broadcast: enabled",
                                   "WARNING: CPU: 0 PID: 1 at kernel/foo.c:1 bar+0x1/0x2", 1)
        self.assertTrue(bad != self.console, "the recording has no IPI shorthand line")
        c = self.verdict("kernel-log-clean", console=bad)
        self.assertEqual(c.status, "fail")
        self.assertIn("kernel/foo.c", c.detail)

    def test_other_bad_lines_fail(self):
        for line in ("BUG: kernel NULL pointer dereference, address: 0000000000000000",
                     "irq 17: nobody cared (try booting with the \"irqpoll\" option)",
                     "watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [swapper/0:1]",
                     "INFO: task kworker/0:1:12 blocked for more than 120 seconds."):
            with self.subTest(line=line):
                bad = self.console + f"[   99.000000] {line}\n"
                self.assertEqual(self.verdict("kernel-log-clean", console=bad).status, "fail")

    def test_no_crng_init_fails_rng(self):
        bad = "\n".join(x for x in self.console.splitlines() if "crng init done" not in x)
        self.assertEqual(self.verdict("virtio-rng", console=bad).status, "fail")

    def test_rng_device_that_delivered_nothing_fails(self):
        bad = self.stderr.replace("virtio-rng0: bytes ", "virtio-rng0: bytes 0 was ")
        c = self.verdict("virtio-rng", stderr=bad)
        self.assertEqual(c.status, "fail", c.detail)

    def test_no_partition_scan_fails_blk(self):
        bad = "\n".join(x for x in self.console.splitlines() if "vda: vda1 vda2" not in x)
        c = self.verdict("virtio-blk", console=bad)
        self.assertEqual(c.status, "fail")
        self.assertIn("partition scan", c.detail)

    def test_intx_expected_but_msix_used(self):
        c = self.verdict("irq-path", msi=False)
        self.assertEqual(c.status, "fail")
        self.assertIn("expected intx", c.detail)
        self.assertEqual(self.verdict("irq-proc", msi=False).status, "fail")

    def test_guest_listening_on_an_input_no_device_is_wired_to_fails(self):
        # What a wrong _PRT (or MP table) entry looks like: the guest's
        # virtio line on IOAPIC input 22 while the VMM wires slot 1 to 17.
        console, stderr, case = load("6.1-msi-intx-pass")
        good = consolelog.evaluate(console, console, stderr, case["exit"], expect_of(case))[2]
        self.assertEqual(statuses(good)["irq-proc"], "pass")
        bad = console.replace("17:          7   IO-APIC  17-fasteoi   virtio0",
                              "22:          7   IO-APIC  22-fasteoi   virtio0")
        self.assertNotEqual(bad, console)
        c = {x.name: x for x in consolelog.evaluate(bad, bad, stderr, case["exit"],
                                                    expect_of(case))[2]}["irq-proc"]
        self.assertEqual(c.status, "fail")
        self.assertIn("the guest hears virtio0 (blk) on IOAPIC input 22, the VMM wires it to 17",
                      c.detail)

    def test_acpi_errors_fail_any_kernel(self):
        for line in ("ACPI BIOS Error (bug): A valid RSDP was not found (20220331/tbxfroot-210)",
                     "ACPI Error: AE_NOT_FOUND, While resolving a named reference package",
                     "ACPI Warning: FADT (revision 6) is longer than ACPI 5.0 version"):
            with self.subTest(line=line):
                bad = self.console + f"[   9.000000] {line}\n"
                self.assertEqual(self.verdict("kernel-log-clean", console=bad).status, "fail")

    def test_acpi_cell_needs_the_tables_and_ends_by_poweroff(self):
        c = self.verdict("acpi", acpi=True)
        self.assertEqual(c.status, "fail")  # an MP-table kernel's log has no RSDP line
        self.assertIn("ACPI: RSDP", c.detail)
        c = self.verdict("vmm-exit", acpi=True)
        self.assertEqual(c.status, "fail")
        self.assertIn("expected exit 0 (poweroff)", c.detail)
        s5 = self.stderr + ("vmm: info: guest stopped: ACPI S5 (the guest powered off) "
                            "(exit code 0)\n")
        self.assertEqual(self.verdict("vmm-exit", stderr=s5, acpi=True).status, "pass")

    def test_unknown_kernel_msi_is_reported_not_judged(self):
        self.assertEqual(self.verdict("irq-path", msi=None).status, "pass")

    def test_missing_stats_fails(self):
        self.assertEqual(self.verdict("irq-path", stderr="").status, "fail")

    def test_init_that_never_finished(self):
        cut = self.console[:self.console.index("VMMCI: check hwrng")]
        self.assertEqual(self.verdict("init-verdict", console=cut).status, "fail")
        self.assertEqual(self.verdict("ping", console=cut).status, "fail")
        self.assertEqual(self.verdict("ping", console=cut).detail, "not reported by /init")

    def test_share_checks_are_judged_only_when_asked(self):
        """vmm-ci --share/--root-share: /init's share checks count; a share
        /init never reported fails; without the options they are not asked."""
        names = {c.name for c in evaluate(self.console, self.stderr, self.case)[2]}
        self.assertFalse({"share", "root-share"} & names)
        self.assertEqual(self.verdict("share", shares=("share",)).detail, "not reported by /init")
        at = self.console.index("VMMCI: check hwrng")
        with_share = (self.console[:at] + "VMMCI: check share FAIL mount -t virtiofs "
                      "vmmci-share /mnt: No such device\nVMMCI: check root-share ok overlay\n"
                      + self.console[at:])
        c = self.verdict("share", console=with_share, shares=("share", "root-share"))
        self.assertEqual((c.status, c.detail),
                         ("fail", "mount -t virtiofs vmmci-share /mnt: No such device"))
        self.assertEqual(self.verdict("root-share", console=with_share,
                                      shares=("share", "root-share")).status, "pass")

    def test_wrong_exit_code(self):
        self.assertEqual(self.verdict("vmm-exit", exit_code=6).status, "fail")

    def test_userspace_not_possible_is_skipped(self):
        c = self.verdict("hwrng", userspace=False, userspace_skip="not possible on this host")
        self.assertEqual((c.status, c.detail), ("skip", "not possible on this host"))
        # ... and then the expected end is the panic after init's first system
        # call (user-6.1-unpatched-intx), not any exit 4: this recording has none.
        got = self.verdict("vmm-exit", userspace=False, exit_code=4)
        self.assertEqual(got.status, "fail")
        self.assertIn("expected exit 4 (init-syscall-panic)", got.detail)

    def test_net_skipped_when_no_tap(self):
        c = self.verdict("virtio-net", net=False, net_skip="not root")
        self.assertEqual((c.status, c.detail), ("skip", "not root"))
        self.assertEqual(self.verdict("ping", net=False, net_skip="not root").status, "skip")

    def test_init_may_skip_a_check(self):
        text = self.console.replace("VMMCI: check ping ok", "VMMCI: check ping skip", 1)
        self.assertEqual(self.verdict("ping", console=text).status, "skip")
        self.assertEqual(self.verdict("init-verdict", console=text).status, "pass")

    def test_two_cpus_expected_but_one_came_up(self):
        self.assertEqual(self.verdict("smp", cpus=2).status, "fail")

    def test_tsc_and_firmware_bug_lines_fail(self):
        bad = self.console + ("[    1.0] [Firmware Bug]: CPU   1: APIC ID mismatch. CPUID: 0x0000 "
                              "APIC: 0x0001\n[    2.0] tsc: Marking TSC unstable due to could not "
                              "calculate TSC khz\n")
        self.assertEqual(self.verdict("no-firmware-bug", console=bad).status, "fail")
        self.assertEqual(self.verdict("tsc", console=bad).status, "fail")

    def test_tsc_warp_is_inherited_on_the_emulated_host_only(self):
        warp = self.console + "[    2.0] tsc: Marking TSC unstable due to TSCs unsynchronized\n"
        self.assertEqual(self.verdict("tsc", console=warp).status, "fail")
        emulated = self.stderr + ("vmm: info: host: emulated (QEMU 7.2.22 TCG, nested SVM, kernel "
                                  "6.12.118+deb12-amd64)\n")
        got = self.verdict("tsc", console=warp, stderr=emulated)
        self.assertEqual(got.status, "pass", got)
        self.assertIn("host-inherited: tsc: Marking TSC unstable due to TSCs unsynchronized",
                      got.info)
        # Any other reason to give up on the TSC still fails there.
        other = self.console + "[    2.0] tsc: Marking TSC unstable due to clocksource watchdog\n"
        self.assertEqual(self.verdict("tsc", console=other, stderr=emulated).status, "fail")

    def test_tsc_judged_by_its_rate_not_its_source(self):
        # A PIT calibration that came out right passes, and says how it was got.
        pit = self.console + ("[    0.0] tsc: Fast TSC calibration using PIT\n"
                              "[    0.0] tsc: Detected 2600.026 MHz processor\n")
        got = self.verdict("tsc", console=pit)
        self.assertEqual(got.status, "pass", got)
        self.assertIn("calibrated against the PIT", got.info)
        # 1.5 % off fails, whatever the source.
        far = self.console.replace("tsc: Detected 2600.000 MHz", "tsc: Detected 2561.000 MHz")
        self.assertNotEqual(far, self.console)
        got = self.verdict("tsc", console=far)
        self.assertEqual(got.status, "fail", got)
        self.assertIn("1.500% from the host's 2600.000 MHz", got.detail)
        # The rate the VMM's -v line gives wins over the case's.
        other = self.stderr + "vmm: info: cpu: Intel, TSC 2500000 kHz; KVM PV features shown: x\n"
        self.assertEqual(self.verdict("tsc", stderr=other).status, "fail")
        # Nothing to compare with: not judged as passing.
        got = self.verdict("tsc", host_tsc_khz=0)
        self.assertEqual(got.status, "fail")
        self.assertIn("cannot be judged", got.detail)
        # A later refinement is the rate Linux keeps.
        refined = far + "[    9.0] tsc: Refined TSC clocksource calibration: 2600.010 MHz\n"
        self.assertEqual(self.verdict("tsc", console=refined).status, "pass")

    def test_smp_names_why_a_cpu_did_not_come_up(self):
        text = self.console + "[    3.0] smpboot: do_boot_cpu failed(-1) to wakeup CPU#1\n"
        got = self.verdict("smp", console=text, cpus=2)
        self.assertEqual(got.status, "fail")
        self.assertIn("do_boot_cpu failed", got.detail)


class HostInherited(unittest.TestCase):
    """The AMD recording whose guest printed the firmware-bug line: the
    VMM's fault unless the VMM said KVM would not take HWCR.TscFreqSel."""

    def setUp(self):
        self.console, self.stderr, self.case = load("amd-6.1-msi-msix-no-hwcr")

    def check(self, name, stderr):
        _, _, checks = evaluate(self.console, stderr, self.case)
        return {c.name: c for c in checks}[name]

    def test_vmm_that_did_not_try_fails(self):
        got = self.check("no-firmware-bug", self.stderr)
        self.assertEqual(got.status, "fail")
        self.assertIn("did not set HWCR.TscFreqSel", got.detail)
        self.assertEqual(got.info, "")

    def test_kvm_that_refused_is_the_hosts(self):
        for line in ("vmm: info: cpu: KVM refused MSR HWCR (TscFreqSel) (0xc0010015) = 0x1000000",
                     "vmm: info: cpu: KVM does not list MSR_K7_HWCR: HWCR.TscFreqSel stays clear"):
            got = self.check("no-firmware-bug", self.stderr + line + "\n")
            self.assertEqual(got.status, "pass", got)
            self.assertIn("host-inherited: [Firmware Bug]: TSC doesn't count", got.info)
            self.assertIn(line.split("cpu: ")[1], got.info)

    def test_other_firmware_bugs_stay_the_vmms(self):
        console = self.console + "[    1.0] [Firmware Bug]: CPU   1: APIC ID mismatch.\n"
        _, _, checks = evaluate(console, self.stderr + "vmm: info: cpu: KVM refused MSR HWCR "
                                "(TscFreqSel) (0xc0010015) = 0x1000000\n", self.case)
        got = {c.name: c for c in checks}["no-firmware-bug"]
        self.assertEqual(got.status, "fail")
        self.assertIn("APIC ID mismatch", got.detail)

    def test_info_reaches_junit_and_summary(self):
        import tempfile
        import xml.etree.ElementTree as ET
        line = "vmm: info: cpu: KVM refused MSR HWCR (TscFreqSel) (0xc0010015) = 0x1000000\n"
        _, _, checks = evaluate(self.console, self.stderr + line, self.case)
        cell = {"id": "amd.c1", "checks": [c.to_dict() for c in checks],
                "boot": {"vmm_wall_s": 1.0}}
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "junit.xml")
            report.write_junit(path, [cell], "hardware-assisted KVM")
            outs = [tc.findtext("system-out") or "" for tc in ET.parse(path).iter("testcase")
                    if tc.get("name") == "no-firmware-bug"]
        self.assertTrue(outs and "info: host-inherited:" in outs[0], outs)
        self.assertEqual(report.host_inherited([cell])[0].split(": ")[:2],
                         ["amd.c1", "no-firmware-bug"])


class Parsing(unittest.TestCase):
    def test_dmesg_timestamp_of_run_init(self):
        c = consolelog.parse_console("[    1.000000] a\r\n[   28.357034] Run /init as init process\r\n")
        self.assertAlmostEqual(c.run_init, 28.357034)
        self.assertEqual(c.init_path, "/init")

    def test_markers(self):
        c = consolelog.parse_console(
            "VMMCI: protocol 1\nVMMCI: check ping FAIL 10.0.2.2: 3 packets transmitted, 0 received\n"
            "VMMCI: virtio virtio0 0x0002\nVMMCI: data fio-terse 3;fio-3.33\nVMMCI: done FAIL 1 of 4\n")
        self.assertEqual(c.protocol, "1")
        self.assertEqual(c.checks["ping"], (False, "10.0.2.2: 3 packets transmitted, 0 received"))
        self.assertEqual(c.virtio, {"virtio0": "blk"})
        self.assertEqual(c.done, ("FAIL", "1 of 4"))

    def test_stats_paths(self):
        s = consolelog.parse_stats(
            "vmm: stats: INTx pin 17 (1 sharer) asserted 12 deasserted 12 resamples 0 refires 0 errors 0\n"
            "vmm: stats: INTx pin 18 (1 sharer) asserted 0 deasserted 0 resamples 0 refires 0 errors 0\n"
            "vmm: stats: MSI virtio-rng0 vector 1     delivered 4 pended 0 coalesced 0 errors 0\n"
            "vmm: stats: virtio-blk0 (slot 1): notifies 1, interrupts 12, broken 0\n"
            "vmm: stats: virtio-rng0 (slot 2): notifies 4, interrupts 4, broken 0\n")
        p = consolelog.irq_paths(s)
        self.assertEqual(p["virtio-blk0"]["path"], "intx")
        self.assertEqual(p["virtio-rng0"]["path"], "msix")

    def test_stats_paths_of_a_backend_served_device(self):
        """virtio-fs: its interrupts go backend -> irqfd -> guest under MSI-X
        (the VMM raised none, its binds count), through the VMM's pin under INTx."""
        msix = consolelog.parse_stats(
            "vmm: stats: virtio-fs0 (slot 3): notifies 0, interrupts 0, broken 0\n"
            "vmm: stats: virtio-fs0 queue 0 (fs): vector MSI-X 0, notifies 0, requests 0, "
            "interrupts 0, calls 0, irqfd binds 1 (on vector 0)\n"
            "vmm: stats: virtio-fs0 queue 1 (fs): vector MSI-X 1, notifies 0, requests 0, "
            "interrupts 0, calls 0, irqfd binds 2 (on vector 1)\n")
        p = consolelog.irq_paths(msix)
        self.assertEqual((p["virtio-fs0"]["path"], p["virtio-fs0"]["irqfd_binds"]), ("msix", 3))
        intx = consolelog.parse_stats(
            "vmm: stats: INTx pin 19 (1 sharer) asserted 40 deasserted 40 resamples 0\n"
            "vmm: stats: virtio-fs0 (slot 3): notifies 0, interrupts 40, broken 0\n"
            "vmm: stats: virtio-fs0 queue 1 (fs): vector INTx, notifies 0, requests 0, "
            "interrupts 40, calls 40, irqfd binds 0\n")
        self.assertEqual(consolelog.irq_paths(intx)["virtio-fs0"]["path"], "intx")
        self.assertEqual(intx.calls["virtio-fs0"], 40)

    def test_fio_terse_and_iperf(self):
        fields = ["0"] * 60
        fields[0], fields[6], fields[7], fields[47], fields[48] = "3", "68", "17", "60", "15"
        c = consolelog.parse_console(
            "VMMCI: data fio-terse " + ";".join(fields) + "\n"
            "VMMCI: data iperf3 [  5]   0.00-10.00  sec  12.5 MBytes  10.5 Mbits/sec    0   sender\n"
            "VMMCI: data iperf3 [  5]   0.00-10.05  sec  12.4 MBytes  800 Kbits/sec         receiver\n")
        self.assertEqual(consolelog.fio_figures(c), {"read_iops": 17.0, "read_kib_s": 68.0,
                                                     "write_iops": 15.0, "write_kib_s": 60.0})
        self.assertEqual(consolelog.iperf_figures(c), {"sender_mbit_s": 10.5,
                                                       "receiver_mbit_s": 0.8})


class RecordedFigures(unittest.TestCase):
    def test_full_cell_figures(self):
        console, _, _ = load("6.12-msi-intx-full-pass")
        c = consolelog.parse_console(console)
        fio = consolelog.fio_figures(c)
        self.assertEqual(set(fio), {"read_iops", "read_kib_s", "write_iops", "write_kib_s"})
        self.assertTrue(all(v > 0 for v in fio.values()), fio)
        iperf = consolelog.iperf_figures(c)
        self.assertEqual(set(iperf), {"sender_mbit_s", "receiver_mbit_s"})
        self.assertIsNone(consolelog.fio_figures(consolelog.parse_console(load(
            "6.1-msi-msix-pass")[0])))


class Runner(unittest.TestCase):
    def test_clearcpuid_numbers_before_5_19(self):
        self.assertEqual(cellrun.clearcpuid_for("5.10.223"), "151,308,295,154,141,156,293,304")
        self.assertEqual(cellrun.clearcpuid_for("5.18"), cellrun.CLEARCPUID_BITS)
        self.assertEqual(cellrun.clearcpuid_for("5.19.1"), cellrun.CLEARCPUID_NAMES)
        self.assertEqual(cellrun.clearcpuid_for("6.12.117"), cellrun.CLEARCPUID_NAMES)
        self.assertEqual(cellrun.clearcpuid_for(""), cellrun.CLEARCPUID_BITS)

    def test_shards_partition_the_matrix(self):
        k = [matrix.Kernel(label=f"{s}:{v}", path="", variant=v)
             for s in matrix.SERIES for v in ("msi", "nomsi")]
        cells = matrix.make_cells(k, ["msix", "intx"], [1, 2], 3, False)
        ids = [c.id for c in cells]
        self.assertEqual(len(set(ids)), len(ids))
        for n in (1, 2, 5):
            parts = [[c.id for c in matrix.shard(cells, i, n)] for i in range(1, n + 1)]
            self.assertEqual(sorted(sum(parts, [])), sorted(ids))
            self.assertLessEqual(max(map(len, parts)) - min(map(len, parts)), 1)
            again = [[c.id for c in matrix.shard(cells, i, n)] for i in range(1, n + 1)]
            self.assertEqual(parts, again)
        halves = [matrix.shard(cells, i, 2) for i in (1, 2)]
        for half in halves:  # both modes in each shard
            self.assertEqual({c.mode for c in half}, {"msix", "intx"})
        with self.assertRaises(ValueError):
            matrix.parse_shard("3/2")

    def test_quick_matrix(self):
        kernels = {s: matrix.Kernel(label=s, path="", variant=s.split(":")[1])
                   for s in ("6.1:msi", "6.1:nomsi", "6.1:acpi-nomsi")}
        cells = matrix.quick_cells(kernels, 1, False)
        self.assertEqual([c.id for c in cells], ["6.1-msi.msix.c1.r1", "6.1-msi.intx.c1.r1",
                                                 "6.1-nomsi.msix.c1.r1", "6.1-msi.msix.c2.r1",
                                                 "6.1-acpi-nomsi.msix.c1.r1"])

    def test_acpi_variants_and_pvh_cells(self):
        k = matrix.parse_kernel_spec("6.1:acpi-nomsi")
        self.assertEqual((k.variant, k.msi, k.acpi_only), ("acpi-nomsi", False, True))
        self.assertTrue(matrix.parse_kernel_spec("5.10:acpi-msi").msi)
        k.path = "/cache/images/6.1-acpi-nomsi-hostwa-KEY/bzImage"
        cells = matrix.make_cells([k], ["msix"], [1], 1, False, boots=matrix.BOOTS)
        self.assertEqual([c.id for c in cells], ["6.1-acpi-nomsi.msix.c1.r1",
                                                 "6.1-acpi-nomsi.pvh.msix.c1.r1"])
        self.assertEqual(cells[1].kernel_path, "/cache/images/6.1-acpi-nomsi-hostwa-KEY/vmlinux")
        argv = cellrun.vmm_argv(cells[1], "vmm", "i", "d", None, "f", "c", None, 9)
        self.assertEqual(argv[1:5], ["--kernel", cells[1].kernel_path, "--boot", "pvh"])
        e = cellrun.cell_expectations(cells[0], False, "", "t")
        self.assertEqual((e.acpi, e.msi), (True, False))
        self.assertIn("vmmci.off=poweroff", cellrun.cmdline_for(cells[0], False, "t"))
        with self.assertRaises(ValueError):
            matrix.parse_kernel_spec("6.1:acpi")

    def test_kernel_version_from_bzimage_header_and_vmlinux_banner(self):
        import struct
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            bz = bytearray(0x3000)
            bz[0x202:0x206] = b"HdrS"
            struct.pack_into("<H", bz, 0x20E, 0x1000)  # kernel_version - 0x200
            bz[0x1200:0x1220] = b"5.10.223 (root@vm) #1 SMP\0"
            v = os.path.join(d, "vmlinux")
            with open(v, "wb") as f:
                f.write(b"\x7fELF" + b"\0" * 5000 + b"Linux version 6.12.117 (root@vm)")
            b = os.path.join(d, "bzImage")
            with open(b, "wb") as f:
                f.write(bz)
            self.assertEqual(matrix.kernel_file_version(b), "5.10.223")
            self.assertEqual(matrix.kernel_file_version(v), "6.12.117")
            k = matrix.parse_kernel_spec(b + ":nomsi")
            self.assertEqual((k.source, k.variant, k.patched), ("user", "nomsi", False))
            self.assertTrue(k.slug.startswith("user-bzImage-"))
            with self.assertRaises(ValueError):
                matrix.parse_kernel_spec("7.0:msi")

    def test_expected_pattern_matches_init_script(self):
        p = cellrun.expected_pattern("tok")
        self.assertEqual(len(p), 65536)
        self.assertTrue(p.startswith(b"VMMCI-PATTERN tok VMMCI-PATTERN tok "))

    def test_partitioned_disk(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "disk.img")
            cellrun.make_partitioned_disk(path, 8)
            with open(path, "rb") as f:
                mbr = f.read(512)
            self.assertEqual(mbr[510:], b"\x55\xaa")
            self.assertEqual(os.path.getsize(path), 8 << 20)
            self.assertEqual(mbr[446 + 4], 0x83)


def vmm_ci_module():
    import importlib.machinery
    import importlib.util
    path = os.path.join(HERE, "..", "..", "scripts", "vmm-ci")
    loader = importlib.machinery.SourceFileLoader("vmm_ci_script", path)
    spec = importlib.util.spec_from_loader("vmm_ci_script", loader)
    m = importlib.util.module_from_spec(spec)
    loader.exec_module(m)
    return m


class ConfigFile(unittest.TestCase):
    """vmm-ci --config ci.toml: the options as a file; the command line wins."""

    def setUp(self):
        import tempfile
        self.cli = vmm_ci_module()
        self.tmp = tempfile.TemporaryDirectory()
        os.mkdir(os.path.join(self.tmp.name, "tests"))

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, text):
        path = os.path.join(self.tmp.name, "ci.toml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_keys_become_options_and_the_command_line_wins(self):
        path = self.write('kernels = ["6.1:msi", "6.1:acpi-nomsi"]\nmodes = ["msix", "intx"]\n'
                          'cpus = [1, 2]\nrepeat = 2\nrun = ["true", "./check.sh"]\n'
                          'include = "tests"\nrun-timeout = 30\nboot = ["bzimage", "pvh"]\n')
        a = self.cli.parse_args(["--config", path, "--repeat", "3", "--run", "exit 3"])
        self.assertEqual((a.kernels, a.mode_list, a.cpu_list, a.repeat, a.run_timeout),
                         ("6.1:msi,6.1:acpi-nomsi", ["msix", "intx"], [1, 2], 3, 30))
        self.assertEqual(a.commands, ["true", "./check.sh", "exit 3"])
        self.assertEqual(a.include, os.path.join(self.tmp.name, "tests"))  # beside the file
        self.assertEqual(a.boot_list, ["bzimage", "pvh"])

    def test_bad_files_are_one_line_and_exit_2(self):
        import contextlib
        import io
        for text, want in (('colour = "red"\n', "unknown key 'colour'"),
                           ('repeat = "two"\n', "repeat must be int"),
                           ('kernels = [\n', "not TOML")):
            with self.subTest(text=text):
                err = io.StringIO()
                with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as ex:
                    self.cli.parse_args(["--config", self.write(text)])
                self.assertEqual(ex.exception.code, 2)
                self.assertIn(want, err.getvalue())
                self.assertEqual(len(err.getvalue().strip().splitlines()), 1)


class Reports(unittest.TestCase):
    def test_reports_and_merge(self):
        import tempfile
        import xml.etree.ElementTree as ET
        console, stderr, case = load("6.1-msi-msix-pass")
        c, stats, checks = evaluate(console, stderr, case)
        cell = {"id": "6.1-msi.msix.c1.r1", "kernel": {"label": "6.1:msi"}, "version": "6.1.192",
                "variant": "msi", "mode": "msix", "cpus": 1, "repeat": 1, "full": False,
                "result": "pass", "userspace": "ran",
                "boot": {"run_init_dmesg_s": c.run_init, "wall_s": {"run_init": 40.0},
                         "vmm_wall_s": 60.0, "vmm_exit": 0},
                "irq": consolelog.irq_paths(stats), "checks": [x.to_dict() for x in checks],
                "fio": None, "iperf3": None}
        failing = dict(cell, id="6.1-msi.msix.c1.r2", result="fail",
                       checks=cell["checks"] + [{"name": "x", "status": "fail", "detail": "why",
                                                 "level": "host"}])
        with tempfile.TemporaryDirectory() as d:
            a, b, m = (os.path.join(d, x) for x in "abm")
            report.write_all(a, {"host": "h"}, [cell])
            report.write_all(b, {"host": "h"}, [failing])
            metas, cells = report.load([a, b])
            self.assertEqual(sorted(x["id"] for x in cells),
                             ["6.1-msi.msix.c1.r1", "6.1-msi.msix.c1.r2"])
            report.write_all(m, {"host": "h"}, cells)
            with open(os.path.join(m, "summary.md")) as f:
                md = f.read()
            self.assertIn("**1 of 2 cells passed.**", md)
            self.assertIn("6.1-msi.msix.c1.r2: x: why", md)
            suites = ET.parse(os.path.join(m, "junit.xml")).getroot()
            self.assertEqual(len(suites), 2)
            self.assertEqual(sum(int(s.get("failures")) for s in suites), 1)


if __name__ == "__main__":
    unittest.main()
