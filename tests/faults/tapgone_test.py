#!/usr/bin/env python3
"""A tap that disappears stops its virtio-net device, not the VMM.

Usage:
  tapgone_test.py --vmm VMM --kernel flushtest.bzImage [--wait-s N]

In a network namespace of its own (unshare -n: nothing outside sees the tap,
and it all goes away with the namespace), runs guests/flushtest in mode
tapgone with --net tap=ftap0 and a disk. When the guest prints "flushtest:
tap in use" (it has sent frames through the tap) the tap is deleted
(ip link del; the tap was made persistent and up beforehand, so the frames
before really went out through it). The guest must then see the net device set
DEVICE_NEEDS_RESET (it keeps sending meanwhile), reset and re-initialise it
(NEEDS_RESET again: the tap is still gone), and still write, flush and read
its disk. The VMM must keep running to the guest's end and exit 1 (the
guest's debug-exit 0), and say on stderr that the tap is gone.

Needs root, /dev/net/tun, ip(8) and /dev/kvm; otherwise exits 77 and says why.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftlib  # noqa: E402

TAP = "ftap0"
STEP_WALL_S = 60  # the guest reaches "tap in use" in well under a second here
EXIT_WALL_S = 120


def inner(a):
    with tempfile.TemporaryDirectory() as tmp:
        disk = os.path.join(tmp, "disk.img")
        with open(disk, "wb") as f:
            f.truncate(1 << 20)
        # A persistent tap, up, that the VMM attaches to: frames sent before
        # the deletion really leave through it (a tap that is down fails
        # writes with EIO).
        for c in (["ip", "tuntap", "add", "dev", TAP, "mode", "tap", "vnet_hdr"],
                  ["ip", "link", "set", TAP, "up"]):
            subprocess.run(c, check=True)
        cmd = [a.vmm, "--kernel", a.kernel, "--net", f"tap={TAP}", "--disk", disk, "--stats",
               "--timeout", "120", "--cmdline",
               f"flushtest.mode=tapgone flushtest.wait_s={a.wait_s}"]
        print("running:", " ".join(cmd), flush=True)
        vm = ftlib.Vmm(cmd)
        problems = []
        if vm.wait_for(r"^flushtest: (tap in use|FAIL)", STEP_WALL_S) is None or \
                "flushtest: FAIL" in vm.console():
            problems.append("the guest did not send frames through the tap")
        else:
            r = subprocess.run(["ip", "link", "del", TAP], capture_output=True, text=True)
            print(f"ip link del {TAP}: exit {r.returncode} {r.stderr.strip()}", flush=True)
            if r.returncode:
                problems.append(f"could not delete {TAP}")
        rc = vm.finish(EXIT_WALL_S)
        vm.dump(tail=20)
    text, err = vm.console(), vm.stderr.decode(errors="replace")
    if vm.hung:
        problems.append(f"the VMM did not exit within {EXIT_WALL_S} s")
    if rc != 1:
        problems.append(f"exit {ftlib.signame(rc)}, expected 1 (the guest passed)")
    for rx in (r"^flushtest: net NEEDS_RESET after the tap went",
               r"^flushtest: net reset and re-initialised: NEEDS_RESET again",
               r"^flushtest: blk writes, flushes and reads after the tap went", r"^flushtest: pass$"):
        if not re.search(rx, text, re.M):
            problems.append(f"no console line /{rx}/")
    if not re.search(rf"virtio-net0: device needs reset: tap {TAP} is gone", err):
        problems.append(f"stderr does not say that tap {TAP} is gone")
    s = re.search(rf"virtio-net0 {TAP}: rx \d+ tx (\d+)", err)
    if not s or int(s.group(1)) < 8:
        problems.append("--stats: fewer than 8 frames went out through the tap before it went")
    if problems:
        print("FAIL: " + "; ".join(problems))
        return 1
    print("ok: the net device went to NEEDS_RESET when its tap was deleted; the VMM and the "
          "disk went on; exit 1")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wait-s", type=int, default=30,
                    help="flushtest.wait_s: how long the guest waits for NEEDS_RESET")
    return ftlib.namespaced_main(ap, inner, "net",
                                 "for a tap in a network namespace of its own",
                                 files=("/dev/net/tun",), tools=("ip", "unshare"))

if __name__ == "__main__":
    sys.exit(main())
