#!/usr/bin/env python3
"""SIGTERM or SIGINT with a write in flight: the VMM finishes that write, then
exits with 10 (README, "Exit codes").

Usage:
  signal_inflight_test.py --vmm VMM --kernel flushtest.bzImage [--signal TERM|INT]

In a mount namespace of its own, the disk is a file on a small FUSE file
system (tests/faults/fusedisk.py, direct I/O, so every guest write reaches it)
that can hold WRITE requests unanswered. guests/flushtest writes and flushes
blocks two at a time (flushtest.mode=write, batch 2). Then, each step waiting
for the event before it:
  - after "flushtest: acked 8" the file system starts holding writes: the
    guest's next batch, blocks 8 and 9, is posted and notified at once and
    the VMM submits both; one reaches the file system and is held, the other
    waits behind it in io_uring's worker queue (writes to one regular file
    are serialised there). Both are in flight in the VMM's io_uring;
  - the VMM gets the signal and says "guest stopped: SIG... (exit code 10; stop: interrupted)":
    its vCPUs are stopped;
  - it must still be running one second later (a write is in flight; an exit
    now could lose it), and must exit with 10 once the held write is
    answered;
  - afterwards every block the guest saw acknowledged, and both blocks that
    were in flight, are on disk with their content.
A VMM that exits without waiting for its io_uring fails the last check: the
kernel cancels, at exit, the write still queued behind the held one (seen
with the wait in virtio_blk_destroy removed: block 9 was lost).

Needs root (mount, unshare), /dev/fuse and /dev/kvm; otherwise exits 77 and
says why.
"""
import argparse
import re
import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftlib  # noqa: E402

CYCLE = 7
BATCH = 2
STEP_WALL_S = 60  # each step takes milliseconds here
EXIT_WALL_S = 60
# How long the VMM must stay after saying it stopped while a write is held:
# an exit within it is a failure; a slow box can only make this pass, not fail.
STAY_S = 1.0


def inner(a):
    import fusedisk

    sig = signal.SIGTERM if a.signal == "TERM" else signal.SIGINT
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        backing = os.path.join(tmp, "backing.img")
        with open(backing, "wb") as f:
            f.truncate(16 << 20)
        mnt = os.path.join(tmp, "mnt")
        os.mkdir(mnt)
        fs = fusedisk.FuseDisk(backing, mnt)
        try:
            disk = fs.path + (f",queues={a.queues}" if a.queues > 1 else "")
            cmd = [a.vmm, "--kernel", a.kernel, "--disk", disk, "--timeout", "120",
                   "--cmdline", f"flushtest.mode=write flushtest.cycle={CYCLE} flushtest.batch={BATCH}"]
            print("running:", " ".join(cmd), flush=True)
            vm = ftlib.Vmm(cmd)
            held = []
            if vm.wait_for(r"^flushtest: (acked 8$|FAIL)", STEP_WALL_S) != "flushtest: acked 8":
                problems.append("the guest did not get 8 blocks acknowledged")
            else:
                fs.hold_writes = True
                if not fs.held_event.wait(STEP_WALL_S):
                    problems.append("no write reached the file system after holding began")
                else:
                    vm.signal(sig)
                    stopped = vm.wait_for(rf"guest stopped: SIG{a.signal} \(exit code 10; stop: interrupted\)",
                                          STEP_WALL_S, stream="err")
                    if stopped is None:
                        problems.append(f"no 'guest stopped: SIG{a.signal}' on stderr")
                    else:
                        try:
                            vm.p.wait(STAY_S)
                            problems.append("the VMM exited with a write still in flight")
                        except subprocess.TimeoutExpired:
                            print(f"the VMM stopped its guest and waits for the write in flight "
                                  f"({len(fs.held)} held)", flush=True)
                held = fs.release_writes()
            rc = vm.finish(EXIT_WALL_S)
            vm.dump(tail=6)
        finally:
            fs.release_writes()
            fs.close()
        text = vm.console()


        acked = [int(x) for x in re.findall(r"^flushtest: acked (\d+)$", text, re.M)]
        n = max(acked) if acked else 0
        if vm.hung:
            problems.append(f"the VMM did not exit within {EXIT_WALL_S} s")
        elif rc != 10:
            problems.append(f"exit {ftlib.signame(rc)}, expected 10")
        bad = ftlib.check_blocks(backing, CYCLE, n)
        problems += [f"acknowledged block {s} differs at byte {o}" for s, o in bad[:5]]
        # The batch of the held write was posted and notified at once, so
        # the VMM submitted all of it: every block of it was in flight.
        inflight = []
        if held:
            first = held[0][0] // ftlib.BLOCK // BATCH * BATCH
            inflight = list(range(first, first + BATCH))
        for seq in inflight:
            with open(backing, "rb") as f:
                f.seek(seq * ftlib.BLOCK)
                if f.read(ftlib.BLOCK) != ftlib.block_pattern(CYCLE, seq):
                    problems.append(f"block {seq}, in flight at the signal, is not on disk")
    if problems:
        print("FAIL: " + "; ".join(problems))
        return 1
    print(f"ok: SIG{a.signal} with block(s) {inflight} in flight: the VMM waited for them, "
          f"exited 10; {n} acknowledged blocks and the in-flight one(s) are on disk")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--signal", choices=["TERM", "INT"], default="TERM")
    ap.add_argument("--queues", type=int, default=1,
                    help="request queues of the disk: more than one puts it on an I/O thread")
    return ftlib.namespaced_main(ap, inner, "mount",
                                 "to mount a FUSE file system in a mount namespace",
                                 files=("/dev/fuse",))

if __name__ == "__main__":
    sys.exit(main())
