#!/usr/bin/env python3
"""vmm-ci --share and --root-share (issue 27): real cells (the 6.1 msi recipe
kernel, MSI-X and INTx) whose commands run in the box's own root, read-only
over virtio-fs under a tmpfs overlay, with a host directory shared
read-write at /mnt. The directory belongs to uid 1000, so user ci gets
that uid. Passes when:
  - vmm-ci exits 1 (one command fails on purpose) and every check of ours
    passes, share and root-share included;
  - run-1, `make -C /mnt check` with the box's make, passes, and the file
    it wrote in the guest is on the host, owned by uid 1000;
  - run-2 (`exit 3`) fails with status 3: the status comes back;
  - run-3 (`id -u`) prints 1000;
  - run-4 writes under /var/tmp and /etc is not writable to ci: neither
    write reaches the host (the box's root is read-only below the overlay);
  - the fs device's interrupts took the cell's path: MSI-X by irqfd (the VMM
    raised none itself), INTx through the VMM's pin.
  share_test.py VMM OUT
Exits 77 only where no guest can boot (no KVM and no emulated host)."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from real_cells import VMM_CI, args_or_skip, finish  # noqa: E402

vmm, out = args_or_skip()

problems = []
with tempfile.TemporaryDirectory(prefix="vmmci-share-") as share:
    os.chmod(share, 0o755)
    with open(os.path.join(share, "input.txt"), "w") as f:
        f.write("from the host\n")
    with open(os.path.join(share, "Makefile"), "w") as f:
        f.write("check:\n\ttest \"$$(cat input.txt)\" = \"from the host\"\n"
                "\techo \"made in $$(uname -r) by $$(id -u)\" > made-in-guest.txt\n")
    for root, dirs, files in os.walk(share):
        for n in [root] + [os.path.join(root, x) for x in files]:
            os.chown(n, 1000, 1000)
    probe = f"/var/tmp/vmmci-share-probe-{os.getpid()}"
    cmd = [VMM_CI, "--kernels", "6.1:msi",
           "--modes", "msix,intx", "--jobs", "2", "--vmm", vmm, "--out", out, "--share", share,
           "--root-share", "--run-timeout", "300",
           "--run", "make -C /mnt check", "--run", "exit 3", "--run", "id -u",
           "--run", f"echo x > {probe} && cat {probe} && ! touch /etc/vmmci-probe"]
    print("running:", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, timeout=3300)
    if p.returncode != 1:
        problems.append(f"vmm-ci exited {p.returncode}, expected 1 (run-2 fails on purpose)")
    made = os.path.join(share, "made-in-guest.txt")
    if not os.path.exists(made):
        problems.append("made-in-guest.txt is not on the host: make's write did not reach it")
    else:
        st = os.stat(made)
        with open(made) as f:
            text = f.read().strip()
        print(f"host: {made}: {text!r}, uid {st.st_uid}")
        if st.st_uid != 1000 or not text.endswith("by 1000"):
            problems.append(f"made-in-guest.txt: {text!r}, owner uid {st.st_uid}: expected "
                            "uid 1000 both in the guest and on the host")
    for leak in (probe, "/etc/vmmci-probe"):
        if os.path.exists(leak):
            problems.append(f"{leak} exists on the host: a write went through the overlay")
            os.unlink(leak)

with open(os.path.join(out, "results.json")) as f:
    cells = json.load(f)["cells"]
if len(cells) != 2:
    problems.append(f"{len(cells)} cells, expected 2")
for cell in cells:
    checks = {c["name"]: c for c in cell["checks"]}
    mode = cell.get("mode", "?")
    for name, c in sorted(checks.items()):
        print(f"{mode} {c['status']:4} {name}: {c['detail'][:140]}")
        if not name.startswith("run-") and c["status"] == "fail":
            problems.append(f"{mode}: our check {name} failed: {c['detail'][:200]}")
    for name in ("share", "root-share"):
        if checks.get(name, {}).get("status") != "pass":
            problems.append(f"{mode}: no passing {name} check")
    want = {"run-1": "pass", "run-2": "fail", "run-3": "pass", "run-4": "pass"}
    for name, status in want.items():
        if checks.get(name, {}).get("status") != status:
            problems.append(f"{mode}: {name}: {checks.get(name, {}).get('status')}, "
                            f"expected {status}")
    if "status 3" not in checks.get("run-2", {}).get("detail", ""):
        problems.append(f"{mode}: run-2: {checks.get('run-2', {}).get('detail')!r} does not "
                        "say status 3")
    if checks.get("run-3", {}).get("stdout", "").strip() != "1000":
        problems.append(f"{mode}: run-3 (id -u) did not print 1000")
    fs = {n: p for n, p in cell.get("irq", {}).items() if n.startswith("virtio-fs")}
    if len(fs) != 2:
        problems.append(f"{mode}: {len(fs)} virtio-fs devices in --stats, expected 2 (the "
                        "share, the box's root)")
    for n, path in fs.items():
        print(f"{mode} {n}: {path}")
        if path["path"] != mode:
            problems.append(f"{mode}: {n} took the {path['path']} path")
        if mode == "msix" and (path["msi"] or not path.get("irqfd_binds")):
            problems.append(f"{mode}: {n}: the VMM raised {path['msi']} MSIs itself and bound "
                            f"{path.get('irqfd_binds')} call fds: expected 0 and some")

finish(problems)
