#!/usr/bin/env python3
"""The include rule of DESIGN.md: each layer includes only itself and the
layers below it (base, then irq, then devices, then the machine in vmm/),
and only the machine and the KVM sink behind the interrupt door include
<linux/kvm.h>. Prints every include that breaks the rule; exit 1 if any."""
import os
import re
import subprocess
import sys

# Layer of a source path, lowest first; None = not a layered source.
LAYERS = ["vmm/base", "irq", "devices", "vmm"]
KVM_ALLOWED = ("vmm/", "irq/kvm_sink.c")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def layer_of(path):
    for i, prefix in enumerate(LAYERS):
        if path.startswith(prefix + "/"):
            return i
    return None


def resolve(src, name):
    """A quoted include as a path from the root: "a/b.h" from the root,
    "b.h" next to the including file."""
    if "/" in name:
        return os.path.normpath(name)
    return os.path.normpath(os.path.join(os.path.dirname(src), name))


def main(root):
    os.chdir(root)
    files = subprocess.run(
        ["git", "ls-files", "vmm/*.[ch]", "irq/*.[ch]", "devices/*.[ch]"],
        check=True, capture_output=True, text=True).stdout.split()
    if not files:
        print("FAIL: no sources found (not a git checkout?)")
        return 1
    bad = []
    for src in files:
        own = layer_of(src)
        with open(src, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                kind, name = m.groups()
                where = f"{src}:{lineno}: #include {kind}{name}{'>' if kind == '<' else kind}"
                if kind == "<":
                    if name == "linux/kvm.h" and not src.startswith(KVM_ALLOWED):
                        bad.append(f"{where}: only vmm/ and irq/kvm_sink.c may call KVM")
                    continue
                target = resolve(src, name)
                if not os.path.exists(target):
                    bad.append(f"{where}: no such project file {target}")
                    continue
                dep = layer_of(target)
                if dep is not None and dep > own:
                    bad.append(f"{where}: {LAYERS[own]}/ may not include {LAYERS[dep]}/ "
                               f"(layers, lowest first: {', '.join(LAYERS)})")
    for b in bad:
        print(b)
    if bad:
        print(f"FAIL: {len(bad)} include(s) break the layering rule (DESIGN.md)")
        return 1
    print(f"PASS: {len(files)} files keep to the layers {' < '.join(LAYERS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else
                  os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")))
