#!/usr/bin/env python3
"""A disk that becomes unreadable mid-run: IOERR in the guest, no hang, no crash,
and reads work again once the disk does.

Usage:
  unreadable_disk_test.py --vmm VMM --kernel flushtest.bzImage [--loop]

In a mount namespace of its own, serves the disk image through a small FUSE
file system (tests/faults/fusedisk.py, direct I/O: every read reaches it) and
runs guests/flushtest in mode readfail on it. The image holds the flushtest
pattern of cycle 0, so every successful read is checked. The exchange, each
step waiting for the guest's console line:
  - "flushtest: reads ok": the guest read and checked 16 blocks; the file
    system now answers every READ and WRITE with EIO;
  - "flushtest: read IOERR": the guest got IOERR for a read and four more
    (none hung, the device is not in NEEDS_RESET); the disk is made readable;
  - "flushtest: reads ok again", "flushtest: pass": reads succeed again
    without a reset, and the VMM exits 1 (the guest's debug-exit 0).
With --loop the VMM's disk is a block device: a loop device over the FUSE
file, opened with ,direct (no block-device page cache), whose reads then
fail in the loop driver. The loop device is detached (losetup -d) as soon as
the VMM has it open: Linux defers that until the last close, so it goes away
with the VMM, whatever happens to this script.
(No device-mapper on our hosts, so no dm "error" target; a loop device cannot
be detached while the VMM holds it open, so FUSE is the way to fail reads of
a disk that is in use.)

Needs root (mount, unshare), /dev/fuse, /dev/kvm (and losetup(8) with
--loop); otherwise exits 77 and
says why.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftlib  # noqa: E402

BLOCKS = 256
STEP_WALL_S = 60  # each step takes milliseconds here
EXIT_WALL_S = 120


def inner(a):
    import fusedisk

    with tempfile.TemporaryDirectory() as tmp:
        backing = os.path.join(tmp, "backing.img")
        with open(backing, "wb") as f:
            for seq in range(BLOCKS):
                f.write(ftlib.block_pattern(0, seq))
        mnt = os.path.join(tmp, "mnt")
        os.mkdir(mnt)
        fs = fusedisk.FuseDisk(backing, mnt)
        loop = None
        try:
            disk = fs.path
            if a.loop:
                loop = subprocess.run(["losetup", "--find", "--show", fs.path], check=True,
                                      capture_output=True, text=True).stdout.strip()
                disk = loop + ",direct"
            cmd = [a.vmm, "--kernel", a.kernel, "--disk", disk, "--stats", "--timeout", "120",
                   "--cmdline", "flushtest.mode=readfail"]
            print("running:", " ".join(cmd), flush=True)
            vm = ftlib.Vmm(cmd)
            problems = []
            if loop:
                # The VMM opened its disk before the guest ran: detaching now
                # is deferred to its last close.
                vm.wait_for(r"^flushtest: mode", STEP_WALL_S)
                subprocess.run(["losetup", "--detach", loop], check=False)
                loop = None
            if vm.wait_for(r"^flushtest: (reads ok|FAIL)", STEP_WALL_S) is None or \
                    "flushtest: FAIL" in vm.console():
                problems.append("the guest did not read the disk before the fault")
            else:
                fs.failing = True
                print(f"disk made unreadable ({fs.counts['read']} reads served)", flush=True)
                if vm.wait_for(r"^flushtest: (read IOERR|FAIL)", STEP_WALL_S) is None or \
                        "flushtest: FAIL" in vm.console():
                    problems.append("the guest did not see IOERR")
                print(f"disk readable again ({fs.counts['read_eio']} reads failed)", flush=True)
                fs.failing = False
            rc = vm.finish(EXIT_WALL_S)
            vm.dump(tail=20)
        finally:
            if loop:
                subprocess.run(["losetup", "--detach", loop], check=False)
            fs.close()
    text, err = vm.console(), vm.stderr.decode(errors="replace")
    if vm.hung:
        problems.append(f"the VMM did not exit within {EXIT_WALL_S} s")
    if rc != 1:
        problems.append(f"exit {ftlib.signame(rc)}, expected 1 (the guest passed)")
    for rx in (r"^flushtest: IOERR after \d+ more reads", r"^flushtest: reads ok again",
               r"^flushtest: pass$"):
        if not re.search(rx, text, re.M):
            problems.append(f"no console line /{rx}/")
    s = re.search(r"virtio-blk0 .*: reads (\d+) .* ioerr (\d+)", err)
    if not s or int(s.group(2)) < 5:
        problems.append("--stats shows fewer than 5 ioerr")
    if fs.counts["read_eio"] < 5:
        problems.append(f"the file system failed only {fs.counts['read_eio']} reads")
    if problems:
        print("FAIL: " + "; ".join(problems))
        return 1
    print(f"ok: {fs.counts['read_eio']} reads failed on the host and came to the guest as "
          f"IOERR ({s.group(2)} in --stats); reads worked again afterwards; the VMM exited 1")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loop", action="store_true", help="through a loop device")

    def no_loop(a):
        if a.loop and not (shutil.which("losetup") and os.path.exists("/dev/loop-control")):
            return "no losetup(8) or /dev/loop-control"
        return None
    return ftlib.namespaced_main(ap, inner, "mount",
                                 "to mount a FUSE file system in a mount namespace",
                                 files=("/dev/fuse",), more=no_loop)

if __name__ == "__main__":
    sys.exit(main())
