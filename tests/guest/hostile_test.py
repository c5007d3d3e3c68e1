#!/usr/bin/env python3
"""Runs guests/hostile under ./vmm and checks what it and the VMM report.

Usage:
  hostile_test.py --vmm VMM --kernel hostile.bzImage [--mode msix|intx] [--sectors N]

Makes a disk image of N 512-byte sectors (byte i = (i * 131 + (i >> 9) * 7 + 3)
& 0xFF, the pattern the guest reads back), opened with O_DIRECT where the
file system allows it (so a reset really meets reads in flight), and boots the
guest with that disk, virtio-rng, virtio-fs over an empty temporary directory
(--fs DIR,tag=hostile: Debian's virtiofsd serves it) and a testdev, MSI-X or
--irq-mode intx, with --stats. Passes when:
  - the VMM exits 0 (the guest reset the machine after "hostile: all N cases
    passed"), N >= MIN_CASES (every case), one "hostile: ok" line per case and
    no "hostile: FAIL";
  - the VMM's "broken" counters (--stats) of virtio-blk, virtio-rng and
    virtio-fs equal the NEEDS_RESET states the guest saw ("hostile:
    needs-reset seen: blk N, rng M, fs K"), and all rose;
  - when the guest says "hostile: fs backend gone" (a case left the fs device
    without virtiofsd), the VMM said on stderr that its backend exited and
    --stats counts a backend failure; otherwise it counts none;
  - the VMM logged that it refused BARs over RAM, the LAPIC and the IOAPIC;
  - the disk image is as long as before and holds the host's pattern
    everywhere but the scratch sector the guest writes (sectors - 16).
With --flood the guest runs no cases: it floods the rng with 4 GiB chains
listed in every ring entry, re-posted as soon as they are answered; once
it has done 16 rounds the test sends SIGTERM and passes when the VMM ends
with exit code 10 (interrupted) within --term-bound seconds (it prints the time;
the VMM serves at most 256 requests / 4 MiB per pass, then its loop sees
the signal). Before the bound existed the VMM was still running 14 s
after SIGTERM. With --flood blk the disk is fed GET_ID requests (completed
at once, so their slots free at once) without pause, the same way; before
the disk had the pass budget, one notify served the feeder for as long as
it kept up.
Without KVM (this box's or the emulated host's) it prints why and exits 77.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vmm_test import kvm_usable  # noqa: E402

SECTOR = 512
EXIT_INTERRUPTED = 10  # vmm/host/exit_code.h
MIN_CASES = 36  # every case of guests/hostile/hostile.c


def host_pattern(nbytes):
    return bytes((i * 131 + (i >> 9) * 7 + 3) & 0xFF for i in range(nbytes))


def direct_ok(path):
    try:
        fd = os.open(path, os.O_RDWR | os.O_DIRECT)
    except OSError:
        return False
    os.close(fd)
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vmm", required=True)
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--mode", choices=["msix", "intx"], default="msix")
    ap.add_argument("--sectors", type=int, default=4096)
    ap.add_argument("--disk-queues", type=int, default=1,
                    help="request queues of the disk (more than one: served by an I/O thread)")
    ap.add_argument("--wall-timeout", type=float, default=240)
    ap.add_argument("--flood", nargs="?", const="rng", choices=["rng", "blk"],
                    help="flood the rng (or feed the disk requests it completes at once), "
                    "SIGTERM the VMM, measure how long it takes to end")
    ap.add_argument("--term-bound", type=float, default=20,
                    help="seconds the VMM may take to end after SIGTERM under --flood")
    a = ap.parse_args()

    why = kvm_usable()
    if why:
        print(f"SKIP: {why}; this test boots a guest")
        return 77

    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        share = os.path.join(tmp, "share")
        os.mkdir(share)
        path = os.path.join(tmp, "hostile-disk.img")
        original = host_pattern(a.sectors * SECTOR)
        with open(path, "wb") as f:
            f.write(original)
        direct = direct_ok(path)
        keys = f"hostile.sectors={a.sectors}" + (" hostile.expect=intx" if a.mode == "intx" else "")
        cmd = [a.vmm, "--kernel", a.kernel, "--memory", "512",
               "--disk", path + (",direct" if direct else "") +
               (f",queues={a.disk_queues}" if a.disk_queues > 1 else ""), "--rng", "--device",
               "testdev",
               "--fs", share + ",tag=hostile",
               "--stats", "--timeout", "120", "--cmdline", keys]
        if a.mode == "intx":
            cmd += ["--irq-mode", "intx"]
        if a.flood:
            cmd[cmd.index("--cmdline") + 1] += " hostile.flood=" + \
                ("blk" if a.flood == "blk" else "1")
            return flood(cmd, a)
        print("running:", " ".join(cmd), flush=True)
        if not direct:
            print("note: O_DIRECT does not work in", tmp, "- the disk is opened without it")
        try:
            p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True,
                               timeout=a.wall_timeout)
        except subprocess.TimeoutExpired:
            print(f"FAIL: vmm did not finish within {a.wall_timeout} s")
            return 1
        with open(path, "rb") as f:
            image = f.read()

    out = p.stdout.decode(errors="replace")
    err = p.stderr.decode(errors="replace")
    print("--- console ---\n" + out + "--- stderr ---\n" + err + "---", flush=True)

    if p.returncode != 0:
        failures.append(f"exit code {p.returncode}, expected 0 (the guest resets when all passed)")
    m = re.search(r"^hostile: all (\d+) cases passed$", out, re.M)
    ok_lines = len(re.findall(r"^hostile: ok   \S+$", out, re.M))
    if not m:
        failures.append("console lacks 'hostile: all N cases passed'")
    elif int(m.group(1)) < MIN_CASES or ok_lines != int(m.group(1)):
        failures.append(f"{m.group(1)} cases passed, {ok_lines} ok lines; expected >= {MIN_CASES}, equal")
    for line in re.findall(r"^hostile: FAIL .*$", out, re.M):
        failures.append(line)

    seen = re.search(r"^hostile: needs-reset seen: blk (\d+), rng (\d+), fs (\d+)$", out, re.M)
    if not seen:
        failures.append("console lacks 'hostile: needs-reset seen: ...'")
    else:
        for name, want in (("blk", int(seen.group(1))), ("rng", int(seen.group(2))),
                           ("fs", int(seen.group(3)))):
            st = re.search(rf"^vmm: stats: virtio-{name}\d* \(slot \d+\): notifies \d+, "
                           rf"interrupts \d+, broken (\d+)$", err, re.M)
            if not st:
                failures.append(f"stderr lacks the --stats line of virtio-{name}")
            elif int(st.group(1)) != want or want == 0:
                failures.append(f"virtio-{name}: the VMM counted broken {st.group(1)}, the guest "
                                f"saw NEEDS_RESET {want} times (both must agree and be > 0)")
            else:
                print(f"virtio-{name}: broken {want}, as the guest saw")

    failures += check_fs_backend(out, err)

    for rx in (r"BAR0 at 0x[0-9a-f]+ overlaps guest RAM; left unmapped",
               r"BAR0 at 0xfee00000 \(size 0x[0-9a-f]+\) overlaps the LAPIC",
               r"BAR0 at 0xfec00000 \(size 0x[0-9a-f]+\) overlaps the IOAPIC"):
        if not re.search(rx, err):
            failures.append(f"stderr lacks /{rx}/")

    scratch = a.sectors - 16
    want = bytearray(original)
    if len(image) != len(want):
        failures.append(f"the disk image is {len(image)} bytes, was {len(want)}")
    else:
        want[scratch * SECTOR:(scratch + 1) * SECTOR] = image[scratch * SECTOR:(scratch + 1) * SECTOR]
        if image != bytes(want):
            i = next(k for k in range(len(want)) if image[k] != want[k])
            failures.append(f"the disk changed outside the scratch sector {scratch}: first at "
                            f"byte {i} (sector {i // SECTOR})")
        else:
            print(f"disk image: unchanged but for scratch sector {scratch}")

    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("PASS")
    return 1 if failures else 0


def check_fs_backend(out, err):
    """The fs backend's fate as the guest and the VMM tell it: problems found."""
    st = re.search(r"^vmm: stats: virtio-fs\d*: backend starts (\d+) stops (\d+) "
                   r"failures (\d+)$", err, re.M)
    if not st:
        return ["stderr lacks the --stats backend line of virtio-fs"]
    starts, stops, failures = (int(g) for g in st.groups())
    gone = re.search(r"^hostile: fs backend gone$", out, re.M) is not None
    exited = re.search(r"its vhost-user backend \S+ exited", err) is not None
    print(f"virtio-fs backend: starts {starts}, stops {stops}, failures {failures}; "
          f"{'gone (the guest says), ' if gone else ''}"
          f"{'it exited' if exited else 'it never exited'}")
    if gone and (not exited or failures == 0):
        return ["the guest found the fs backend gone, but the VMM did not say it exited "
                "or counted no failure"]
    if not gone and (exited or failures):
        return [f"the fs backend exited or failed ({failures} failures) but the guest "
                "never found it gone"]
    return []


def flood(cmd, a):
    """SIGTERM while the guest floods the rng: the time to the VMM's end."""
    print("running:", " ".join(cmd), flush=True)
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    out = []
    try:
        deadline = time.monotonic() + a.wall_timeout
        # The console line says the guest is 16 rounds into the flood: the
        # VMM is serving it when the signal comes.
        for line in p.stdout:
            out.append(line)
            if line.startswith("hostile: flood round 16") or time.monotonic() > deadline:
                break
        if not out or not out[-1].startswith("hostile: flood round 16"):
            p.kill()
            rest, err = p.communicate()
            print("".join(out) + rest + "--- stderr ---\n" + err)
            print("FAIL: the guest never reached flood round 16")
            return 1
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        try:
            rest, err = p.communicate(timeout=a.term_bound)
        except subprocess.TimeoutExpired:
            p.kill()
            rest, err = p.communicate()
            print("".join(out) + rest + "--- stderr ---\n" + err)
            print(f"FAIL: the VMM was still running {a.term_bound} s after SIGTERM under the flood")
            return 1
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
    print("".join(out) + rest + "--- stderr ---\n" + err + "---")
    print(f"SIGTERM under the flood: the VMM ended in {took * 1000:.0f} ms, exit code {p.returncode}")
    if p.returncode != EXIT_INTERRUPTED:
        print(f"FAIL: exit code {p.returncode}, expected {EXIT_INTERRUPTED} (vmm/host/exit_code.h: "
              "SIGINT/SIGTERM)")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
