#!/usr/bin/env python3
"""A disk whose writes fail: the guest gets VIRTIO_BLK_S_IOERR, nothing hangs.

Usage:
  full_disk_test.py --vmm VMM --kernel flushtest.bzImage [--direct]

In a mount namespace of its own (unshare -m, private propagation: nothing is
seen outside), mounts a 1 MiB tmpfs and gives the VMM a 16 MiB sparse file on
it as its disk (PATH or PATH,direct). guests/flushtest in mode ioerr writes
4 KiB blocks one at a time until one fails: once the tmpfs is full the host
write fails with ENOSPC, which the guest must see as IOERR (not a hang, not a
dead VMM); the same write then fails again, a FLUSH completes, the last good
block reads back and the device is not in NEEDS_RESET. The VMM must exit 1
(the guest's debug-exit 0) with "flushtest: pass" on the console and a
non-zero ioerr count in its --stats.

Needs root (mount, unshare) and /dev/kvm; otherwise exits 77 and says why.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftlib  # noqa: E402

TMPFS_SIZE = "1m"
DISK_BYTES = 16 << 20
WALL_S = 120  # measured: about 0.5 s here


def inner(a):
    with tempfile.TemporaryDirectory() as mnt:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "fulldisk", mnt],
                       check=True)
        try:
            disk = os.path.join(mnt, "disk.img")
            with open(disk, "wb") as f:
                f.truncate(DISK_BYTES)
            cmd = [a.vmm, "--kernel", a.kernel, "--disk", disk + (",direct" if a.direct else ""),
                   "--stats", "--timeout", "60", "--cmdline", "flushtest.mode=ioerr"]
            print("running:", " ".join(cmd), flush=True)
            vm = ftlib.Vmm(cmd)
            rc = vm.finish(WALL_S)
            vm.dump(tail=20)
            text, err = vm.console(), vm.stderr.decode(errors="replace")
            problems = []
            if vm.hung:
                problems.append(f"the VMM did not exit within {WALL_S} s")
            if rc != 1:
                problems.append(f"exit {ftlib.signame(rc)}, expected 1 (the guest passed)")
            m = re.search(r"^flushtest: write of block (\d+): IOERR", text, re.M)
            if not m:
                problems.append("no write failed with IOERR")
            if not re.search(r"^flushtest: pass$", text, re.M):
                problems.append("no 'flushtest: pass'")
            s = re.search(r"virtio-blk0 .*: reads \d+ writes (\d+) .* ioerr (\d+)", err)
            if not s or int(s.group(2)) < 2:
                problems.append("--stats shows fewer than 2 ioerr (the failed write, twice)")
            if problems:
                print("FAIL: " + "; ".join(problems))
                return 1
            print(f"ok: the disk filled after {m.group(1)} blocks; the guest got IOERR, the "
                  f"device went on, the VMM exited 1 ({s.group(2)} ioerr in --stats)")
            return 0
        finally:
            subprocess.run(["umount", mnt], check=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--direct", action="store_true")
    return ftlib.namespaced_main(ap, inner, "mount",
                                 "to mount a tmpfs in a mount namespace of its own")

if __name__ == "__main__":
    sys.exit(main())
