#!/usr/bin/env python3
"""--dump-acpi writes ACPI tables that Debian's iasl disassembles without an
error or warning (the RSDP is checked by tests/unit/test_acpi.c: iasl -d
takes only the tables with a standard header), and that describe the machine the VMM built: the MADT's
CPUs and IOAPIC, the FADT's hardware-reduced flags and registers, and a
DSDT whose _PRT routes each device's INTA# to the IOAPIC input the MP table
gives it (an rng on slot 1 and a test device on slot 9 share input 17; a
test device on slot 3 gets 19). The same tables with --cpus 1 and no devices: an empty _PRT.

  acpi_tables_test.py VMM GUEST_ELF (a guest that exits with 67)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vmm_test import skip_unless_guests_boot  # noqa: E402

vmm, guest = sys.argv[1], sys.argv[2]
skip_unless_guests_boot("the tables are built with the VM")
if not shutil.which("iasl"):
    print("FAIL: iasl not found (Debian package acpica-tools, scripts/install-deps.sh)")
    sys.exit(1)

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def dump(tmp, args):
    out = os.path.join(tmp, "acpi")
    os.mkdir(out)
    p = subprocess.run([vmm, "--kernel", guest, "--memory", "512", "--dump-acpi", out] + args,
                       capture_output=True, text=True, timeout=120)
    print(p.stdout, p.stderr)
    check(p.returncode == 67, f"vmm {' '.join(args)}: exit {p.returncode}, the guest's 67")
    dsl = {}
    for name in ("rsdp", "xsdt", "facp", "apic", "dsdt"):
        path = os.path.join(out, name + ".dat")
        check(os.path.exists(path), f"{name}.dat written")
        if not os.path.exists(path) or name == "rsdp":
            continue  # iasl -d takes system description tables, not the RSDP
        d = subprocess.run(["iasl", "-d", path], capture_output=True, text=True, cwd=out)
        text = d.stdout + d.stderr
        problems = [ln for ln in text.splitlines()
                    if re.search(r"\b(Error|Warning|Remark)\b", ln) and "0 Errors" not in ln]
        check(d.returncode == 0 and not problems,
              f"iasl -d {name}.dat: exit {d.returncode}, {problems[:3] or 'clean'}")
        with open(os.path.join(out, name + ".dsl")) as f:
            dsl[name] = f.read()
        check(not re.search(r"(?i)incorrect checksum|invalid|bad", dsl[name]),
              f"{name}.dsl has no complaint in it")
    return dsl


with tempfile.TemporaryDirectory() as tmp:
    dsl = dump(tmp, ["--cpus", "2", "--rng", "--device", "testdev,slot=3",
                     "--device", "testdev,slot=9"])
apic, dsdt, facp = dsl.get("apic", ""), dsl.get("dsdt", ""), dsl.get("facp", "")
print(dsdt)
check(len(re.findall(r"Subtable Type : 00 \[Processor Local APIC\]", apic)) == 2,
      "MADT: two local APICs")
check(re.search(r"I/O Apic ID : 02", apic) is not None, "MADT: the IOAPIC's ID is 2 (after 2 CPUs)")
check(re.search(r"Hardware Reduced \(V5\) : 1", facp) is not None, "FADT: hardware-reduced")
check(re.search(r"Sleep Control Register[\s\S]*?Address : 0000000000000600", facp) is not None,
      "FADT: sleep control register at port 0x600")
prt = re.findall(r"Package \(0x04\)\s*\{\s*(0x[0-9A-F]+),\s*(\w+),\s*(\w+),\s*(0x[0-9A-F]+|\w+)\s*\}",
                 dsdt)
entries = {(int(a, 16) >> 16, b, int(d, 16) if d.startswith("0x") else d) for a, b, c, d in prt}
print("_PRT entries (slot, pin, GSI):", sorted(entries, key=str))
# The MP table's wiring (devices/pci/pci.h pci_intx_ioapic_pin): 16 + (slot +
# pin - 1) % 8, so slots 1 and 9 share input 17.
check(entries == {(1, "Zero", 17), (3, "Zero", 19), (9, "Zero", 17)},
      "_PRT: slot 1 and 9 INTA# -> 17, slot 3 INTA# -> 19 (the MP table's inputs)")
check(len(re.findall(r'Name \(_HID, "ACPI0007"', dsdt)) == 2, "DSDT: two processor devices")
check(re.search(r'EisaId \("PNP0501"\)', dsdt) is not None, "DSDT: COM1")
check(re.search(r"Name \(\\_S5, Package \(0x04\)[^{]*\{\s*0x05", dsdt) is not None, "DSDT: \\_S5")

with tempfile.TemporaryDirectory() as tmp:
    dsl = dump(tmp, [])
check(re.search(r"Name \(_PRT, Package \(0x00\)", dsl.get("dsdt", "")) is not None,
      "no devices: an empty _PRT")

for f in failures:
    print("FAIL:", f)
print("PASS" if not failures else f"{len(failures)} failures")
sys.exit(1 if failures else 0)
