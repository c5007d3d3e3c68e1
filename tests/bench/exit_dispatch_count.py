#!/usr/bin/env python3
"""Userspace instructions per exit dispatch, counted by callgrind (so the
same on a busy or an idle machine): runs exit_dispatch_loop (next to this
script in the build tree) under `valgrind --tool=callgrind`, counting only
inside vcpu_dispatch() and what it calls, for N and 2N exits of each kind,
and prints the per-exit difference as JSON:
  {"pio_insns_per_exit": X, "mmio_insns_per_exit": Y, ...}
Exit 77 when valgrind is not installed."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

N = 2000


def instructions(loop, kind, n, tmp, kernel):
    out = os.path.join(tmp, f"callgrind.{kind}.{n}")
    cmd = ["valgrind", "--tool=callgrind", "--toggle-collect=vcpu_dispatch",
           f"--callgrind-out-file={out}", loop, kind, str(n), kernel]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit(f"exit-dispatch-count: {' '.join(cmd)} failed ({p.returncode}):\n"
                 f"{p.stdout}{p.stderr}")
    with open(out) as f:
        for line in f:
            m = re.match(r"(?:summary|totals):\s+(\d+)", line)
            if m:
                return int(m.group(1))
    sys.exit(f"exit-dispatch-count: no instruction total in {out}")


def main():
    if not shutil.which("valgrind"):
        print("SKIP: valgrind is not installed (scripts/install-deps.sh installs it)")
        return 77
    here = os.path.dirname(os.path.abspath(__file__))
    loop = os.path.join(here, "exit_dispatch_loop")
    # Any kernel the builder loads: the machine around the dispatcher is ./vmm's.
    kernel = os.path.join(here, "..", "..", "guests", "hello.bzImage")
    result = {"method": "callgrind --toggle-collect=vcpu_dispatch, (count(2N) - count(N)) / N",
              "n": N}
    with tempfile.TemporaryDirectory() as tmp:
        for kind, key in (("pio", "pio_insns_per_exit"), ("mmio", "mmio_insns_per_exit")):
            one = instructions(loop, kind, N, tmp, kernel)
            two = instructions(loop, kind, 2 * N, tmp, kernel)
            result[key] = round((two - one) / N, 1)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
