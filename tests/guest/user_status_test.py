#!/usr/bin/env python3
"""A plain ./vmm run of a user's initramfs whose /init runs one command
(guests/linux/status-init.sh) exits with that command's status, handed
over through the VMM's status port, and -v says so. Boots the recipe 6.1
msi kernel (guests/linux/build-kernel.sh; cached after the first build)
with `exit 7` base64-encoded on the command line.
  user_status_test.py VMM
"""
import base64
import os
import subprocess
import sys
import tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vmm_test import skip_unless_guests_boot  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
vmm = sys.argv[1]
skip_unless_guests_boot("this test boots Linux")
kernel = subprocess.run([os.path.join(ROOT, "guests", "linux", "build-kernel.sh"), "msi"],
                        stdout=subprocess.PIPE, text=True, check=True).stdout.split()[-1]
with tempfile.TemporaryDirectory() as tmp:
    initrd = os.path.join(tmp, "status.cpio")
    subprocess.run([os.path.join(ROOT, "guests", "linux", "make-ci-initramfs.py"), initrd,
                    "--init", os.path.join(ROOT, "guests", "linux", "status-init.sh")],
                   check=True, stdout=subprocess.DEVNULL)
    run = base64.b64encode(b"echo running the user command; exit 7").decode()
    # The CPUID bits this host's emulated ring 0 needs hidden, as vmm-ci gives
    # them (scripts/vmmci/cellrun.py). A boot reaches /init in ~60 s on our hosts (ring 0 is emulated); the
    # VMM's own --timeout is ten times that.
    cmd = [vmm, "--kernel", kernel, "--initrd", initrd, "--memory", "256", "-v",
           "--timeout", "900", "--cmdline",
           f"clearcpuid=popcnt,smap,smep,xsave,cx16,avx,avx2,avx512f status.run={run}"]
    print("running:", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=1000)
print(p.stdout[-3000:], p.stderr[-3000:])
problems = []
if p.returncode != 7:
    problems.append(f"./vmm exited {p.returncode}, expected the command's 7")
if "running the user command" not in p.stdout:
    problems.append("the command's output is not on the console")
if "the guest wrote its exit status to the status port (exit code 7, chosen by the guest; stop: guest-status)" not in p.stderr:
    problems.append("-v does not say the status came through the status port")
for x in problems:
    print("FAIL:", x)
print("PASS" if not problems else "")
sys.exit(1 if problems else 0)
