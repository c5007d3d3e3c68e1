"""What the tests that run scripts/vmm-ci on real cells share: their
arguments (VMM OUT), the skip where no guest can boot at all, and the end
(each problem on a FAIL line, exit 1 if any)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
VMM_CI = os.path.join(ROOT, "scripts", "vmm-ci")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from vmmtools import emuhost  # noqa: E402


def args_or_skip():
    """(VMM, OUT) from argv; exits 77 where no guest can boot (no KVM and
    no emulated host), saying why."""
    vmm, out = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    why = emuhost.guest_skip_reason()
    if why:
        print(f"SKIP: {why}; this test boots a Linux guest")
        sys.exit(77)
    return vmm, out


def finish(problems):
    for x in problems:
        print("FAIL:", x)
    print("PASS" if not problems else f"{len(problems)} problem(s)")
    sys.exit(1 if problems else 0)
