#!/usr/bin/env python3
"""The guest status port against a hostile guest (issue 26): status_flood.elf
writes 20,000 reports, then ends the VM with 12, the VMM's code for a
seccomp stop.
  - ./vmm exits 12 (the guest's byte is kept);
  - its stop line says the code was chosen by the guest ("stop:
    guest-status"), and vmm-ci's stop-cause parser reads it as that, never
    as seccomp;
  - at -v at most GUEST_STATUS_LOG_MAX report lines and one line that says
    the rest are only counted (before: one line per report).
  status_port_test.py VMM ELF
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "scripts"))
from vmm_test import skip_unless_guests_boot  # noqa: E402
from vmmci import consolelog  # noqa: E402

LOG_MAX = 256  # devices/legacy/guest_status.h: GUEST_STATUS_LOG_MAX

vmm, elf = sys.argv[1], sys.argv[2]
skip_unless_guests_boot("this test boots a guest")
cmd = [vmm, "--kernel", elf, "-v", "--timeout", "300"]
print("running:", " ".join(cmd), flush=True)
p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
lines = p.stderr.splitlines()
reports = [x for x in lines if x.startswith("vmm: info: guest status: command 1 ended")]
more = [x for x in lines if "the rest are counted, not logged" in x]
stop = [x for x in lines if "guest stopped:" in x]
print(f"exit {p.returncode}; {len(lines)} stderr lines, {len(reports)} report lines; "
      f"stop line: {stop}")
problems = []
if p.returncode != 12:
    problems.append(f"exit {p.returncode}, expected the guest's 12")
if len(reports) != LOG_MAX or len(more) != 1:
    problems.append(f"{len(reports)} report lines and {len(more)} 'counted' lines, expected "
                    f"{LOG_MAX} and 1")
if len(stop) != 1 or "chosen by the guest; stop: guest-status)" not in stop[0]:
    problems.append("the stop line does not say the guest chose the code")
kind = consolelog.stop_cause(consolelog.parse_console(""), p.stderr, p.returncode).kind
if kind != "guest-status":
    problems.append(f"vmm-ci's stop cause is {kind!r}, expected 'guest-status'")
for x in problems:
    print("FAIL:", x)
print("PASS" if not problems else "")
sys.exit(1 if problems else 0)
