#!/usr/bin/env python3
"""One SSE instruction in ring 0 (tests/guest/sse_ring0.S), judged by the
host the VMM says it ran on (its -v "host:" line), not by what the box
that configured the build had:
  - hardware-assisted KVM, or the emulated host (QEMU TCG with nested SVM,
    where ring 0 runs under SVM too): the instruction runs and the guest
    exits through debug-exit with 0x11 (exit code 35);
  - a KVM that emulates guest ring 0 (the nested, page-table based
    kvm_pvm): an emulation failure, reported with RIP, the instruction
    bytes, CR0/CR2, EFER and the host kind (exit code 4).
  sse_ring0_test.py VMM GUEST_ELF
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vmm_test import skip_unless_guests_boot  # noqa: E402

vmm, guest = sys.argv[1], sys.argv[2]
skip_unless_guests_boot()
p = subprocess.run([vmm, "--kernel", guest, "--timeout", "60", "-v"], stdin=subprocess.DEVNULL,
                   capture_output=True, text=True, timeout=300)
print(p.stdout, p.stderr)
host = re.search(r"^vmm: info: host: (.*)$", p.stderr, re.M)
fails = []
if not host:
    fails.append("no 'host:' line at -v")
elif "ring 0 is emulated" in host.group(1):
    want = [r"instruction emulation failed at RIP 0x", r"instruction bytes: 66 0f 6e c1",
            r"CR0 [0-9a-f]+ CR2", r"EFER", r"guest ring 0 is emulated"]
    if p.returncode != 4:
        fails.append(f"exit code {p.returncode}, expected 4 on a host that emulates ring 0")
    fails += [f"stderr lacks /{rx}/" for rx in want if not re.search(rx, p.stderr)]
elif p.returncode != 35:
    fails.append(f"exit code {p.returncode}, expected 35 (the guest's 0x11) on "
                 f"{host.group(1)}")
for f in fails:
    print("FAIL:", f)
print("PASS" if not fails else "")
sys.exit(1 if fails else 0)
