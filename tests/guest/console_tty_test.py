#!/usr/bin/env python3
"""On a terminal the VMM puts stdin in raw mode, Ctrl-A x quits (exit 10),
and the terminal's settings are restored afterwards; Ctrl-A Ctrl-A and other
bytes reach the guest's UART (the guest here never reads, so only the exit
path and the restore are observable)."""
import os
import pty
import select
import subprocess
import sys
import termios
import time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vmm_test import skip_unless_guests_boot  # noqa: E402

vmm, guest = sys.argv[1], sys.argv[2]
skip_unless_guests_boot("this test boots a guest")

master, slave = pty.openpty()
before = termios.tcgetattr(slave)
p = subprocess.Popen([vmm, "--kernel", guest, "--timeout", "60"], stdin=slave, stdout=slave,
                     stderr=subprocess.PIPE)
# Wait until the VMM has put the terminal in raw mode (ICANON off), bounded.
deadline = time.monotonic() + 20
raw = False
while time.monotonic() < deadline and p.poll() is None:
    if not termios.tcgetattr(slave)[3] & termios.ICANON:
        raw = True
        break
    select.select([master], [], [], 0.05)
os.write(master, b"hello guest\x01\x01\x01x")
try:
    rc = p.wait(timeout=30)
except subprocess.TimeoutExpired:
    p.kill()
    print("FAIL: Ctrl-A x did not end the VMM")
    sys.exit(1)
after = termios.tcgetattr(slave)
err = p.stderr.read().decode(errors="replace")
print(f"exit {rc}; raw mode seen: {raw}; stderr: {err.strip()}")
fails = []
if not raw:
    fails.append("the terminal never went to raw mode")
if rc != 10:
    fails.append(f"exit code {rc}, expected 10")
if after != before:
    fails.append(f"terminal settings not restored: {before} -> {after}")
for f in fails:
    print("FAIL:", f)
print("PASS" if not fails else "")
sys.exit(1 if fails else 0)
