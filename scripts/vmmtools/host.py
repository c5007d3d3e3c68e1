#!/usr/bin/env python3
"""Host facts, in one place for vmm-bench, vmm-ci and the shell scripts.

    host.py               every fact as JSON
    host.py --emulated    yes when this host's KVM emulates guest ring 0
                          (the nested, page-table based kvm_pvm, or no
                          vmx/svm CPU flag), else no
    host.py --get KEY     one fact (booleans as yes/no)

facts() is what scripts/vmm-bench's results.json host block and vmm-ci's
host line are made of; tests/bench/blk_vs_fio.sh and
guests/linux/build-kernel.sh run this file. Standard library only, so it
runs as a plain script too.
"""
import json
import os
import platform
import sys

PVM_MODULE = "/sys/module/kvm_pvm"
VENDORS = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD"}
# kvm_kind -> (a short line, the long description)
KINDS = {
    "nested-pagetable": (
        "nested page-table based KVM (kvm_pvm): guest ring 0 is emulated",
        "nested, page-table based KVM (kvm_pvm module loaded): guest ring 0 is emulated "
        "instruction by instruction (~2 us each), CPL 3 runs natively"),
    "no-vmx-svm": (
        "KVM without vmx/svm: guest ring 0 is emulated",
        "no vmx/svm CPU flag: KVM (if usable) is not hardware-assisted"),
    "hardware": ("hardware-assisted KVM", "hardware-assisted ({flags})"),
}


def parse_cpuinfo(text):
    """(model name, vendor, flags) of the first CPU in /proc/cpuinfo text;
    vendor is "Intel", "AMD" or "other", model "?" when not named."""
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    vendor = fields.get("vendor_id")
    return (fields.get("model name", "?"), VENDORS.get(vendor, "other") if vendor else "?",
            set(fields.get("flags", "").split()))


def kvm_kind(flags, pvm):
    """hardware, nested-pagetable (kvm_pvm loaded) or no-vmx-svm."""
    if pvm:
        return "nested-pagetable"
    return "hardware" if flags & {"vmx", "svm"} else "no-vmx-svm"


def read_cpuinfo():
    try:
        with open("/proc/cpuinfo") as f:
            return f.read()
    except OSError:
        return ""


def facts(cpuinfo=None, pvm=None):
    """Everything known about this host; cpuinfo (the text of
    /proc/cpuinfo) and pvm (kvm_pvm loaded) are read here when None."""
    cpuinfo = read_cpuinfo() if cpuinfo is None else cpuinfo
    pvm = os.path.isdir(PVM_MODULE) if pvm is None else pvm
    model, vendor, flags = parse_cpuinfo(cpuinfo)
    kind = kvm_kind(flags, pvm)
    hw = sorted(flags & {"vmx", "svm"})
    short, long = KINDS[kind]
    return {
        "cpu_model": model, "cpu_vendor": vendor, "kernel": platform.release(),
        "cores": os.cpu_count(), "kvm_kind": kind, "kvm_summary": short,
        "kvm_description": long.format(flags="/".join(hw)), "kvm_pvm_module": pvm,
        "cpu_virt_flags": hw, "emulates_ring0": kind != "hardware",
        "dev_kvm_usable": os.access("/dev/kvm", os.R_OK | os.W_OK),
        "loadavg": os.getloadavg()[0],
    }


def shell_value(v):
    if isinstance(v, bool):
        return "yes" if v else "no"
    return " ".join(map(str, v)) if isinstance(v, list) else str(v)


def main(argv):
    f = facts()
    if not argv:
        print(json.dumps(f, indent=1))
    elif argv == ["--emulated"]:
        print(shell_value(f["emulates_ring0"]))
    elif len(argv) == 2 and argv[0] == "--get" and argv[1] in f:
        print(shell_value(f[argv[1]]))
    else:
        print(__doc__ + "\nkeys: " + ", ".join(f), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
