#!/usr/bin/env python3
"""--dump-dtb writes a device tree that dtc accepts without a warning and that
describes the machine the VMM built (two test devices sharing IOAPIC pin 17).
"""
import os
import re
import subprocess
import sys
import tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vmm_test import skip_unless_guests_boot  # noqa: E402

vmm, guest = sys.argv[1], sys.argv[2]
skip_unless_guests_boot("this test builds a VM")
with tempfile.TemporaryDirectory() as tmp:
    dtb = os.path.join(tmp, "machine.dtb")
    p = subprocess.run([vmm, "--kernel", guest, "--cpus", "2", "--memory", "512",
                        "--device", "testdev,vectors=16", "--device", "testdev,slot=9",
                        "--dump-dtb", dtb, "--dtb"], capture_output=True, timeout=120)
    print(p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"))
    if p.returncode != 67:
        print(f"FAIL: vmm exited {p.returncode}, expected the guest's 67")
        sys.exit(1)
    d = subprocess.run(["dtc", "-I", "dtb", "-O", "dts", dtb], capture_output=True, text=True)
print(d.stdout)
print(d.stderr)
checks = [
    (d.returncode == 0, "dtc accepts the blob"),
    ("Warning" not in d.stderr and "ERROR" not in d.stderr, "dtc prints no warning"),
    (re.search(r"memory@0 \{\s*device_type = \"memory\";\s*reg = <0x00 0x00 0x00 0x20000000>;", d.stdout), "memory node covers 512 MiB"),
    (re.search(r"cpu@1 \{", d.stdout), "two CPUs"),
    (re.search(r"testdev0@1 \{[^}]*msix-vectors = <0x10>;[^}]*ioapic-pin = <0x11>;", d.stdout, re.S), "testdev0: 16 vectors, pin 17"),
    (re.search(r"testdev1@9 \{[^}]*ioapic-pin = <0x11>;", d.stdout, re.S), "testdev1 in slot 9 shares pin 17"),
    (re.search(r"interrupt-map = <0x800 0x00 0x00 0x01 0x01 0x11 0x01 0x4800 0x00 0x00 0x01 0x01 0x11 0x01>", d.stdout), "interrupt-map routes both INTA# to pin 17"),
]
bad = [what for ok, what in checks if not ok]
for what in bad:
    print("FAIL:", what)
print("PASS" if not bad else "")
sys.exit(1 if bad else 0)
