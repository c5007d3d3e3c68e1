#!/usr/bin/env python3
"""vmm-ci's, vmm-bench's and vmm-host's usage errors: one line on stderr (the program,
what is wrong and where), exit status 2, nothing run."""
import os
import subprocess
import sys
import unittest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def run(prog, *args):
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", prog)] + list(args),
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, VMM_BENCH_REEXEC="1"))
    return p.returncode, p.stdout, p.stderr


class UsageErrors(unittest.TestCase):
    CASES = [
        ("vmm-ci", ["--share", "/nonexistent/dir", "--run", "true"],
         "vmm-ci: --share /nonexistent/dir: not a directory (--help for usage)"),
        ("vmm-ci", ["--root-share"],
         "vmm-ci: --share and --root-share are for --run commands: give one (--help for usage)"),
        ("vmm-ci", ["--cpus", "3"], "vmm-ci: --cpus: 1 or 2 (KVM here allows 2 vCPUs) "
         "(--help for usage)"),
        ("vmm-ci", ["--bogus"], "vmm-ci: unrecognized arguments: --bogus (--help for usage)"),
        ("vmm-bench", ["--rounds", "x"],
         "vmm-bench: argument --rounds: invalid int value: 'x' (--help for usage)"),
        ("vmm-host", ["bogus"], "vmm-host: unknown command 'bogus' (exec, prepare, status, "
         "stop, info, serve) (vmm-host --help for usage)"),
        ("vmm-host", ["exec", "--", ], "vmm-host: exec: no command after -- "
         "(vmm-host --help for usage)"),
    ]

    def test_one_line_and_exit_2(self):
        for prog, args, line in self.CASES:
            with self.subTest(prog=prog, args=args):
                rc, out, err = run(prog, *args)
                self.assertEqual((rc, out, err), (2, "", line + "\n"))


if __name__ == "__main__":
    unittest.main()
