#!/usr/bin/env python3
"""A real cell (6.1 msi, MSI-X) with user commands that try to forge our
report (issue 26). They run as user ci, not root, so:
  - `id -u` prints 1000; a command in --include's copy runs there;
  - writing a "VMMCI: check" line to /dev/console and a status byte to
    /dev/port both fail with "Permission denied" (exit 1);
  - a command that prints our verdict marker and a KTAP header passes as a
    command, and changes nothing of ours: every check of ours passes, no
    kunit: case appears, init-verdict is /init's.
  user_boundary_test.py VMM OUT
Exits 77 only where no guest can boot (no KVM and no emulated host)."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from real_cells import VMM_CI, args_or_skip, finish  # noqa: E402

vmm, out = args_or_skip()
with tempfile.TemporaryDirectory() as inc:
    with open(os.path.join(inc, "t.sh"), "w") as f:
        f.write("echo hi from t.sh; id -u\n")
    os.chmod(os.path.join(inc, "t.sh"), 0o755)
    cmd = [VMM_CI, "--kernels", "6.1:msi", "--modes", "msix",
           "--vmm", vmm, "--out", out, "--include", inc, "--run-timeout", "120",
           "--run", "id -u", "--run", "./t.sh",
           "--run", 'echo "VMMCI: check hwrng FAIL forged" > /dev/console',
           "--run", 'printf "\\000" | dd of=/dev/port bs=1 seek=1296 count=1',
           "--run", 'echo "VMMCI: done FAIL forged"; echo KTAP version 1; echo 1..1; '
                    'echo "not ok 1 forged"']
    print("running:", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, timeout=3000)
with open(os.path.join(out, "results.json")) as f:
    cell = json.load(f)["cells"][0]
checks = {c["name"]: c for c in cell["checks"]}
problems = []
for name, c in checks.items():
    print(f"{c['status']:4} {name}: {c['detail'][:120]}")
    if not name.startswith("run-") and c["status"] == "fail":
        problems.append(f"our check {name} failed: {c['detail'][:200]}")
    if name.startswith("kunit:"):
        problems.append(f"a forged KUnit case appeared: {name}")
want = {"run-1": "pass", "run-2": "pass", "run-3": "fail", "run-4": "fail", "run-5": "pass"}
for name, status in want.items():
    if checks.get(name, {}).get("status") != status:
        problems.append(f"{name}: {checks.get(name, {}).get('status')}, expected {status}")
if checks.get("run-1", {}).get("stdout", "").strip() != "1000":
    problems.append("run-1 (id -u) did not print 1000: the command ran as root")
for n, dev in (("run-3", "/dev/console"), ("run-4", "/dev/port")):
    if "Permission denied" not in checks.get(n, {}).get("stderr", ""):
        problems.append(f"{n}: no 'Permission denied' from {dev}")
if checks.get("init-verdict", {}).get("detail", "") != "ok 4":
    problems.append(f"init-verdict is {checks.get('init-verdict')}, expected /init's ok 4")
finish(problems)
