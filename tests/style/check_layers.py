#!/usr/bin/env python3
"""The include rule of DESIGN.md: the C sources are ranked folders, and a
file includes only headers of its own folder and of lower ranks. Folders
of the same rank are siblings and do not include each other. Only the vCPU
layer, the machine and the KVM sink behind the interrupt door include
<linux/kvm.h>. Prints every include that breaks the rule; exit 1 if any.

--self-test copies the tree, plants one upward include (a device that
includes the machine) and checks that the rule then fails on exactly it."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Ranks, lowest first. Each folder is a prefix of paths from the root.
RANKS = [
    ["vmm/base"],                                      # errors, logs, locks, clock, guest memory, buses
    ["irq", "vmm/host"],                               # interrupt routing; the process's threads and sandbox
    ["devices/legacy", "devices/pci", "devices/backends"],  # ISA devices; PCI + MSI-X; host I/O
    ["devices/virtio"],                                # virtio transport and device models
    ["vmm/boot", "vmm/firmware"],                      # kernel loading; ACPI, MP table, device tree
    ["vmm/cpu"],                                       # KVM, the vCPU, CPUID
    ["vmm/options"],                                   # the option table and the machine's options
    ["vmm/kinds"],                                     # device kinds: options to devices on the machine
    ["vmm/machine"],                                   # assembly, main loop, stop
]
# seccomp.c names the KVM ioctls a vCPU thread may make; it calls none.
KVM_ALLOWED = ("vmm/cpu/", "vmm/machine/", "irq/kvm_sink.c", "vmm/host/seccomp.c")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
SOURCES = ["vmm/*.[ch]", "irq/*.[ch]", "devices/*.[ch]"]


def folder_of(path):
    """(rank, folder) of a source path, or None."""
    best = None
    for rank, folders in enumerate(RANKS):
        for folder in folders:
            if path.startswith(folder + "/") and (best is None or len(folder) > len(best[1])):
                best = (rank, folder)
    return best


def resolve(src, name):
    """A quoted include as a path from the root: "a/b.h" from the root,
    "b.h" next to the including file."""
    if "/" in name:
        return os.path.normpath(name)
    return os.path.normpath(os.path.join(os.path.dirname(src), name))


def order():
    return " < ".join("{" + ", ".join(f) + "}" if len(f) > 1 else f[0] for f in RANKS)


def check(files):
    bad = []
    for src in files:
        own = folder_of(src)
        if own is None:
            bad.append(f"{src}: in no ranked folder (add its folder to RANKS and DESIGN.md)")
            continue
        with open(src, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                kind, name = m.groups()
                where = f"{src}:{lineno}: #include {kind}{name}{'>' if kind == '<' else kind}"
                if kind == "<":
                    if name == "linux/kvm.h" and not src.startswith(KVM_ALLOWED):
                        bad.append(f"{where}: only {', '.join(KVM_ALLOWED)} may call KVM")
                    continue
                target = resolve(src, name)
                if not os.path.exists(target):
                    bad.append(f"{where}: no such project file {target}")
                    continue
                dep = folder_of(target)
                if dep is None or dep[1] == own[1] or dep[0] < own[0]:
                    continue
                how = "a sibling" if dep[0] == own[0] else "a higher layer"
                bad.append(f"{where}: {own[1]}/ may not include {dep[1]}/ ({how}; "
                           f"layers, lowest first: {order()})")
    return bad


def listed(root):
    return subprocess.run(["git", "-C", root, "ls-files"] + SOURCES, check=True,
                          capture_output=True, text=True).stdout.split()


def main(root):
    os.chdir(root)
    files = listed(".")
    if not files:
        print("FAIL: no sources found (not a git checkout?)")
        return 1
    bad = check(files)
    for b in bad:
        print(b)
    if bad:
        print(f"FAIL: {len(bad)} include(s) break the layering rule (DESIGN.md)")
        return 1
    print(f"PASS: {len(files)} files keep to the layers {order()}")
    return 0


def self_test(root):
    """Plant `#include "vmm/machine/vm.h"` in the PCI layer of a copy."""
    files = listed(root)
    victim = "devices/pci/pci.c"
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            os.makedirs(os.path.join(tmp, os.path.dirname(f)), exist_ok=True)
            shutil.copy(os.path.join(root, f), os.path.join(tmp, f))
        with open(os.path.join(tmp, victim), "a", encoding="utf-8") as f:
            f.write('#include "vmm/machine/vm.h"\n')
        os.chdir(tmp)
        clean = [f for f in files if f != victim]
        bad = check(files)
        rest = check(clean)
    want = [b for b in bad if b.startswith(victim) and "vmm/machine/" in b]
    if rest or len(bad) != 1 or len(want) != 1:
        print(f"FAIL: planting an upward include gave {bad!r} (tree alone: {rest!r})")
        return 1
    print(f"PASS: the planted include is caught: {want[0]}")
    return 0


if __name__ == "__main__":
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    args = sys.argv[1:]
    if args[:1] == ["--self-test"]:
        sys.exit(self_test(os.path.abspath(args[1] if len(args) > 1 else here)))
    sys.exit(main(args[0] if args else here))
