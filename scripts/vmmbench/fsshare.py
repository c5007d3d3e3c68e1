"""Section fs_share: a virtio-fs share against the initramfs copy of the
same tree (issue 27). One scripts/vmm-ci run boots the 6.1:msi recipe
kernel under MSI-X and under INTx with the box's root over virtio-fs
(--root-share, for git, find, cat and date), a fresh clone of this
project over virtio-fs at /mnt (--share) and the same clone copied into
the initramfs at /vmmci/include (--include); its commands time, in each
place, `git status --porcelain` (a cold first run, then warm ones), a read
of a 32 MiB file and a `find` walk."""
import json
import os
import re
import shutil
import subprocess
import tempfile

from vmmtools.report import table

from . import proc
from .context import ROOT
from .figures import fmt, median, mode_name, ratio, stats, summary_row

TITLE = "virtio-fs share vs initramfs copy (Linux guest, 6.1:msi)"
KERNEL = "6.1:msi"
MODES = ("msix", "intx")
VIRTIOFSD = "/usr/lib/qemu/virtiofsd"
BIG_MIB = 32
OWNER = (1000, 1000)  # vmm-ci's user ci gets the share's owner's ids
QUICK_SKIP = "not in --quick: two Linux boots, about 4 minutes"
PLACES = {"/vmmci/include": "initramfs", "/mnt": "virtiofs"}
PLACE_NAMES = {"initramfs": "initramfs copy", "virtiofs": "virtio-fs"}
GIT_RUNS, READ_RUNS, FIND_RUNS = 4, 3, 3


def numbers(n):
    """"1 2 ... n", a shell loop's list."""
    return " ".join(str(i) for i in range(1, n + 1))


# One command a line (vmm-ci --run-file), each run as user ci with the
# box's root under it; a failing git or cat ends the command with status 1,
# which vmm-ci reports as that command's check failing.
COMMANDS = [
    f"for d in /vmmci/include /mnt; do cd $d || exit 1; for i in {numbers(GIT_RUNS)}; do "
    "s=$(date +%s%N); o=$(git status --porcelain) || exit 1; e=$(date +%s%N); "
    "echo \"$d git-status run $i ($(echo \"$o\" | grep -c .) changes): "
    "$(( (e-s)/1000000 )) ms\"; done; done",
    f"for d in /vmmci/include /mnt; do for i in {numbers(READ_RUNS)}; do s=$(date +%s%N); "
    "cat $d/big.bin >/dev/null || exit 1; e=$(date +%s%N); "
    "echo \"$d read-32MiB run $i: $(( (e-s)/1000000 )) ms\"; done; done",
    f"for d in /vmmci/include /mnt; do cd $d || exit 1; for i in {numbers(FIND_RUNS)}; do "
    "s=$(date +%s%N); n=$(find . | wc -l); e=$(date +%s%N); "
    "echo \"$d find run $i ($n entries): $(( (e-s)/1000000 )) ms\"; done; done",
]
# "/mnt git-status run 2 (0 changes): 7281 ms"
LINE = re.compile(r"^(?P<dir>/\S+) (?P<test>git-status|read-32MiB|find) run (?P<run>\d+)"
                  r"(?: \((?P<n>\d+) (?:changes|entries)\))?: (?P<ms>\d+) ms$")
FIGURES = [  # (key, the test's lines, which runs, label, the summary's label)
    ("git_status_cold", "git-status", "first",
     "`git status --porcelain`, cold (run 1, the first walk after boot)",
     "git status, cold (run 1)"),
    ("git_status_warm", "git-status", "rest", "`git status --porcelain`, warm (median of runs 2+)",
     "git status, warm (median of runs 2+)"),
    ("read_32mib", "read-32MiB", "all", f"read of a {BIG_MIB} MiB file (`cat`, median of runs)",
     f"{BIG_MIB} MiB file read (median)"),
    ("find", "find", "all", "`find .` walk of the tree (median of runs)",
     "find walk of the tree (median)"),
]
METHOD = (f"scripts/vmm-ci --kernels {KERNEL} --modes msix,intx --root-share --share TREE "
          "--include TREE: TREE is a fresh `git clone` of this project's checkout plus a "
          f"{BIG_MIB} MiB random big.bin (in .git/info/exclude), owned by 1000:1000; in each "
          "cell (one vCPU) the commands run as user ci in the box's root (read-only over "
          "virtio-fs, under a tmpfs overlay) and time, with the guest's `date +%s%N`, "
          f"`git status --porcelain` {GIT_RUNS} times, `cat big.bin` {READ_RUNS} times and "
          f"`find . | wc -l` {FIND_RUNS} times, first in the initramfs copy (/vmmci/include, "
          "in guest memory) and then over virtio-fs (/mnt, ./vmm --fs with virtiofsd). "
          "git status's first run in each place walks a tree the guest has not seen since "
          "boot (and git re-reads the files whose stat data differ from the index, which "
          "the copy's and the share's do, and writes the index back); the warm figure is "
          "the median of the runs after it. Ratio: virtio-fs / initramfs copy (above 1: "
          "virtio-fs is slower)")


def skip_reason(b):
    """Why the section does not run here, or None."""
    if b.quick:
        return QUICK_SKIP
    if getattr(b, "fs_kernel_error", None):
        return b.fs_kernel_error
    return unavailable()


def unavailable():
    """What vmm-ci's --share and --root-share need and this box lacks, or None."""
    if os.geteuid() != 0:
        return "needs root (vmm-ci's --share and --root-share run virtiofsd)"
    if not os.access(VIRTIOFSD, os.X_OK):
        return f"no {VIRTIOFSD} (Debian package qemu-system-common)"
    return None


def prebuild_kernel(log):
    """Builds the recipe kernel on this box (cached builds return at once),
    before vmm-bench moves onto the emulated host, where build-kernel.sh
    cannot run (no /dev/fd there); (its bzImage, None) or (None, why not)."""
    from vmmci import matrix
    k = matrix.parse_kernel_spec(KERNEL)
    try:
        matrix.build_recipe_kernel(k, log)
    except (RuntimeError, OSError, ValueError) as e:
        return None, f"kernel {KERNEL} not built: {e}"
    return k.path, None


def kernels_arg(b):
    """vmm-ci's --kernels: the bzImage built on this box, given as a file
    (vmm-ci would run build-kernel.sh for the recipe's name), else the name."""
    path = getattr(b, "fs_kernel", None)
    return f"{path}:msi" if path and os.path.isfile(path) else KERNEL


def steps(b):
    return 1 if skip_reason(b) else 2


def make_tree(tmp):
    """The fresh clone with big.bin, owned by OWNER; (its path, its commit)."""
    tree = os.path.join(tmp, "tree")
    subprocess.run(["git", "clone", "-q", ROOT, tree], check=True, capture_output=True,
                   text=True)
    commit = subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()
    with open(os.path.join(tree, "big.bin"), "wb") as f, open("/dev/urandom", "rb") as r:
        for _ in range(BIG_MIB):
            f.write(r.read(1 << 20))
    with open(os.path.join(tree, ".git", "info", "exclude"), "a") as f:
        f.write("big.bin\n")
    for root, dirs, files in os.walk(tree):
        for n in [root] + [os.path.join(root, x) for x in dirs + files]:
            os.lchown(n, *OWNER)
    return tree, commit


def parse(stdout):
    """{(place, test): {run: ms}, ...} and {place: entries or changes seen}
    from the commands' output."""
    runs, counts = {}, {}
    for line in (stdout or "").splitlines():
        m = LINE.match(line.strip())
        if not m or m["dir"] not in PLACES:
            continue
        place = PLACES[m["dir"]]
        runs.setdefault((place, m["test"]), {})[int(m["run"])] = int(m["ms"])
        if m["n"] is not None:
            counts.setdefault(place, {}).setdefault(m["test"], set()).add(int(m["n"]))
    return runs, counts


def pick(values, which):
    """The runs a figure takes: the first, the ones after it, or all."""
    order = [values[k] for k in sorted(values)]
    return order[:1] if which == "first" else order[1:] if which == "rest" else order


def cell_figures(runs):
    """The section's rows for one cell's parsed runs."""
    out = []
    for key, test, which, label, short in FIGURES:
        row = {"figure": key, "label": label, "short": short}
        for place in PLACES.values():
            vals = pick(runs.get((place, test), {}), which)
            row[place] = stats(vals, "ms") if vals else None
            row[place + "_runs"] = vals
            row[place + "_ms"] = median(vals) if vals else None
        row["ratio"] = ratio(row["virtiofs_ms"], row["initramfs_ms"])
        out.append(row)
    return out


def read_cells(out_dir):
    """vmm-ci's cells from its results.json ([] when it wrote none)."""
    try:
        with open(os.path.join(out_dir, "results.json")) as f:
            return json.load(f).get("cells", [])
    except (OSError, ValueError):
        return []


def cell_stdout(cell):
    """The run-N checks' standard output, in order."""
    return "\n".join(c.get("stdout") or "" for c in cell.get("checks", [])
                     if re.fullmatch(r"run-\d+", c.get("name", "")))


def collect(sec, cells):
    """The figures per mode from vmm-ci's cells into sec."""
    for cell in cells:
        k = cell.get("kernel") or {}
        sec["kernel_release"] = sec.get("kernel_release") or cell.get("version")
        sec["kernel_path"] = sec.get("kernel_path") or k.get("path")
        runs, counts = parse(cell_stdout(cell))
        failed = [c["name"] for c in cell.get("checks", [])
                  if c.get("status") not in ("pass", "skip", None)]
        sec["cells"].append({"id": cell.get("id"), "mode": cell.get("mode"),
                             "result": cell.get("result"), "failed_checks": failed,
                             "counts": {p: {t: sorted(v) for t, v in c.items()}
                                        for p, c in counts.items()},
                             "runs": {f"{p} {t}": [v[i] for i in sorted(v)]
                                      for (p, t), v in sorted(runs.items())}})
        if runs:
            for row in cell_figures(runs):
                sec["results"].append(dict(row, mode=cell.get("mode")))
        entries = counts.get("virtiofs", {}).get("find") or counts.get("initramfs", {}).get("find")
        if entries and not sec.get("entries"):
            sec["entries"] = max(entries)
    order = {m: i for i, m in enumerate(MODES)}
    sec["results"].sort(key=lambda r: order.get(r["mode"], len(order)))


def set_status(sec, rc, out, err):
    complete = [r for r in sec["results"] if r["ratio"] is not None]
    want = len(MODES) * len(FIGURES)
    if rc == 77:
        sec.update(status="skipped", note=proc.tail(err, 2) or "vmm-ci skipped every cell")
    elif len(complete) == want and rc == 0:
        sec["status"] = "ok"
    elif complete:
        sec.update(status="partial", note=f"{len(complete)} of {want} figures; vmm-ci exit "
                   f"code {rc}", output_tail=proc.tail(out + err))
    else:
        sec.update(status="error", note=f"no figures; vmm-ci exit code {rc}",
                   output_tail=proc.tail(out + err))


def run(b):
    sec = {"status": None, "kernel": KERNEL, "modes": list(MODES), "commands": COMMANDS,
           "method": METHOD, "cells": [], "results": []}
    why = skip_reason(b)
    if why:
        b.step(f"fs share: skipped ({why})")
        sec.update(status="skipped", note=why)
        return sec
    b.step(f"fs share: a clone of the tree and a {BIG_MIB} MiB file")
    tmp = tempfile.mkdtemp(prefix="vmm-bench-fs.", dir=b.disk_dir)
    try:
        try:
            tree, sec["tree_commit"] = make_tree(tmp)
        except (subprocess.CalledProcessError, OSError) as e:
            detail = getattr(e, "stderr", "") or ""
            sec.update(status="error", note=f"the tree could not be made: {e} {detail}".strip())
            return sec
        cmds = os.path.join(tmp, "commands.txt")
        with open(cmds, "w") as f:
            f.write("".join(c + "\n" for c in COMMANDS))
        out_dir = b.raw_path("fs_share")
        sec["kernel_path"] = getattr(b, "fs_kernel", None)
        cmd = [os.path.join(ROOT, "scripts/vmm-ci"), "--kernels", kernels_arg(b), "--modes",
               ",".join(MODES), "--vmm", b.vmm, "--out", out_dir, "--root-share", "--share",
               tree, "--include", tree, "--run-file", cmds, "--run-timeout", "600"]
        sec["command"] = cmd
        b.step(f"fs share: vmm-ci, {KERNEL}, {' and '.join(MODES)} (two Linux boots)")
        rc, out, err = proc.run(cmd, 2400)
        b.write_log("fs_share.log", cmd, out, err)
        collect(sec, read_cells(out_dir))
        set_status(sec, rc, out, err)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return sec


def kernel_name(sec):
    return sec["kernel"] + (f" ({sec['kernel_release']})" if sec.get("kernel_release") else "")


def rows(sec):
    if not sec["results"]:
        return [summary_row("fs_share", "virtio-fs vs initramfs copy", None, "initramfs copy",
                            None, None, "", None, True,
                            sec["status"] + (": " + sec["note"] if sec.get("note") else ""),
                            "ms")]
    return [summary_row("fs_share", f"{r['short']}, {mode_name(r['mode'])}, Linux "
                        f"{sec.get('kernel_release') or sec['kernel']}: virtio-fs",
                        r["virtiofs_ms"], "initramfs copy", r["initramfs_ms"], r["ratio"], "",
                        None, True, None if r["virtiofs_ms"] is not None else "missing", "ms")
            for r in sec["results"]]


def details(sec):
    if not sec["results"]:
        return []
    lines = [[mode_name(r["mode"]), r["label"], fmt(r["initramfs_ms"], "ms"),
              fmt(r["virtiofs_ms"], "ms"),
              f"{r['ratio']:.2f}×" if r["ratio"] is not None else "—",
              ", ".join(map(str, r["initramfs_runs"])) or "—",
              ", ".join(map(str, r["virtiofs_runs"])) or "—"] for r in sec["results"]]
    return [f"Kernel {kernel_name(sec)}, one vCPU; tree {sec.get('tree_commit', '?')} "
            f"({sec.get('entries', '?')} entries under `find .`) plus a {BIG_MIB} MiB file. "
            "Each cell's vmm-ci output: `raw/fs_share/`.", ""] + table(
        ["mode", "figure", "initramfs copy", "virtio-fs", "virtio-fs/copy",
         "copy runs (ms)", "virtio-fs runs (ms)"], "llrrrrr", lines)
