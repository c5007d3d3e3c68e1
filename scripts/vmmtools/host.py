#!/usr/bin/env python3
"""Host facts, in one place for vmm-bench, vmm-ci and the shell scripts.

    host.py               every fact as JSON
    host.py --emulated    yes when the KVM guests run on here emulates guest
                          ring 0 (the nested, page-table based kvm_pvm, or
                          no vmx/svm CPU flag), else no

Where /dev/kvm is unusable, guests run on the emulated KVM host (QEMU TCG
with nested SVM, scripts/vmm-host): kvm_kind "emulated", which runs guest
ring 0 under SVM (no ring-0 emulation), and every summary names QEMU's
version and that host's kernel, so no figure from there passes for a
hardware one. Inside that host (VMM_EMULATED_HOST set) the same.
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
    "emulated": ("{emulated}",
                 "{emulated}: KVM inside QEMU's TCG, which emulates the CPU and its SVM; "
                 "timings are that host's, not hardware's"),
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


def dev_kvm_usable():
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR))
    except OSError:
        return False
    return True


def emulated_host():
    """How the emulated KVM host is named when guests run there (inside it,
    or on a box without a usable /dev/kvm), else None."""
    inside = os.environ.get("VMM_EMULATED_HOST")
    if inside:
        return inside
    if dev_kvm_usable():
        return None
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from vmmtools.emuhost import client
    return client.describe_planned()


def facts(cpuinfo=None, pvm=None, emulated=False):
    """Everything known about this host; cpuinfo (the text of
    /proc/cpuinfo), pvm (kvm_pvm loaded) and emulated (the emulated host's
    name, or None) are read here when left out."""
    cpuinfo = read_cpuinfo() if cpuinfo is None else cpuinfo
    pvm = os.path.isdir(PVM_MODULE) if pvm is None else pvm
    emulated = emulated_host() if emulated is False else emulated
    model, vendor, flags = parse_cpuinfo(cpuinfo)
    kind = "emulated" if emulated else kvm_kind(flags, pvm)
    hw = sorted(flags & {"vmx", "svm"})
    short, long = (t.format(emulated=emulated, flags="/".join(hw)) for t in KINDS[kind])
    return {
        "cpu_model": model, "cpu_vendor": vendor, "kernel": platform.release(),
        "cores": os.cpu_count(), "kvm_kind": kind, "kvm_summary": short,
        "kvm_description": long, "kvm_pvm_module": pvm,
        "cpu_virt_flags": hw, "emulates_ring0": kind not in ("hardware", "emulated"),
        "dev_kvm_usable": dev_kvm_usable(), "emulated_host": emulated,
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
