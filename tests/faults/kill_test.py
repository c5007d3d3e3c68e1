#!/usr/bin/env python3
"""No lost writes: kill the VMM at random points while guests/flushtest writes
and flushes numbered blocks, then check that every block the guest saw
acknowledged is on disk with its content.

Usage:
  kill_test.py --vmm VMM --kernel flushtest.bzImage [--cycles N] [--direct]
               [--no-flush] [--signal KILL|TERM] [--max-delay S] [--seed N]

Each cycle boots flushtest (flushtest.mode=write, flushtest.cycle=C, a random
flushtest.batch of 1-16 writes in flight) on one disk image kept across the
cycles, waits for its first "flushtest: acked N" line, lets it run a random
0..max-delay seconds more, and sends the signal. Afterwards every block below
the last acknowledged N must hold cycle C's pattern (tests/faults/ftlib.py):
the previous cycle's content, zeros or a torn block there is a lost write.
  - With FLUSH negotiated (the default) "acked N" is printed after a FLUSH
    that followed the writes completed (virtio 1.2, 5.2.6.2); with --no-flush
    the guest does not negotiate VIRTIO_BLK_F_FLUSH and prints it once the
    writes completed, which the device must then have made durable (it
    writes with RWF_DSYNC).
  - --direct gives the disk as PATH,direct (O_DIRECT, no host page cache).
  - --signal TERM: the VMM must exit with 10 (SIGTERM, README) after
    finishing what was in flight; KILL (the default) must leave nothing
    acknowledged unwritten either.
A SIGKILL is not a power cut: what the host kernel had in its page cache
survives it. So this checks the VMM's side of the contract (no used entry,
hence no acknowledgement, before the host operation completed; FLUSH and
RWF_DSYNC issued and awaited); the host's own cache is the host's.

Prints one line per cycle and a summary ("writes lost: 0"); exits 0 when no
write was lost and every cycle behaved, 1 otherwise, 77 without /dev/kvm.
"""
import argparse
import os
import random
import re
import signal
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftlib  # noqa: E402

FIRST_ACK_WALL_S = 60  # measured 0.2 s from exec to the first ack here
EXIT_WALL_S = 60


def run_cycle(a, img, cycle, rng):
    batch = rng.randint(1, 16)
    delay = rng.uniform(0, a.max_delay)
    keys = f"flushtest.mode=write flushtest.cycle={cycle} flushtest.batch={batch}"
    if a.no_flush:
        keys += " flushtest.flush=0"
    cmd = [a.vmm, "--kernel", a.kernel, "--disk", img + (",direct" if a.direct else ""),
           "--timeout", "300", "--cmdline", keys]
    vm = ftlib.Vmm(cmd)
    first = vm.wait_for(r"^flushtest: (acked \d+|FAIL)", FIRST_ACK_WALL_S)
    if first is None or "FAIL" in first:
        vm.signal(signal.SIGKILL)
        vm.finish(EXIT_WALL_S)
        print(f"cycle {cycle}: FAIL: no 'flushtest: acked' line within {FIRST_ACK_WALL_S} s")
        vm.dump()
        return None
    # The random kill point: not synchronisation, the point is to land anywhere.
    time.sleep(delay)
    sig = signal.SIGKILL if a.signal == "KILL" else signal.SIGTERM
    vm.signal(sig)
    rc = vm.finish(EXIT_WALL_S)
    text = vm.console()
    acked = [int(x) for x in re.findall(r"^flushtest: acked (\d+)$", text, re.M)]
    n = max(acked) if acked else 0
    done = "flushtest: done" in text
    problems = []
    if vm.hung:
        problems.append(f"did not exit within {EXIT_WALL_S} s of SIG{a.signal}")
    elif done:
        if rc not in (1, -sig, 10):
            problems.append(f"finished, exit {ftlib.signame(rc)}")
    elif a.signal == "KILL" and rc != -signal.SIGKILL:
        problems.append(f"exit {ftlib.signame(rc)}, expected SIGKILL")
    elif a.signal == "TERM" and rc != 10:
        problems.append(f"exit {ftlib.signame(rc)}, expected 10 (stopped by SIGTERM)")
    if "flushtest: FAIL" in text:
        problems.append("the guest reported a failure")
    bad = ftlib.check_blocks(img, cycle, n)
    for seq, off in bad[:5]:
        problems.append(f"block {seq} (acknowledged) differs at byte {off}")
    print(f"cycle {cycle}: batch {batch}, SIG{a.signal} {delay * 1000:.0f} ms after the first "
          f"ack{' (the guest had finished)' if done else ''}: acked {n}, "
          f"checked {n} blocks, lost {len(bad)}, exit {ftlib.signame(rc)}"
          + ("" if not problems else " -- FAIL: " + "; ".join(problems)), flush=True)
    if problems:
        vm.dump()
    return n, len(bad), done, not problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vmm", required=True)
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--direct", action="store_true")
    ap.add_argument("--no-flush", action="store_true")
    ap.add_argument("--signal", choices=["KILL", "TERM"], default="KILL")
    ap.add_argument("--max-delay", type=float, default=0.4,
                    help="kill at most this many seconds after the first ack")
    ap.add_argument("--disk-mib", type=int, default=64)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--dir", default=None, help="where the disk image goes (default: a temp dir)")
    a = ap.parse_args()
    # The signal must reach the VMM itself, not a relay to it: without a
    # usable /dev/kvm here, the whole test runs on the emulated host.
    ftlib.emuhost.run_inside_if_needed()
    why = ftlib.kvm_problem()
    if why:
        return ftlib.skip(why)
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 32)
    rng = random.Random(seed)
    mode = (f"FLUSH {'not negotiated' if a.no_flush else 'negotiated'}, "
            f"{'O_DIRECT' if a.direct else 'buffered'}, SIG{a.signal}")
    print(f"kill-test: {mode}, {a.cycles} cycles, seed {seed}", flush=True)
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        img = os.path.join(tmp, "flushtest.img")
        with open(img, "wb") as f:
            f.truncate(a.disk_mib << 20)
        results = []
        for cycle in range(1, a.cycles + 1):
            r = run_cycle(a, img, cycle, rng)
            if r is None:
                return 1
            results.append(r)
    acked = [r[0] for r in results]
    lost = sum(r[1] for r in results)
    finished = sum(1 for r in results if r[2])
    ok = all(r[3] for r in results)
    print(f"kill-test: {mode}: {len(results)} cycles, {len(results) - finished} signalled "
          f"mid-run, {finished} after the guest had finished; acknowledged blocks checked "
          f"{sum(acked)} (per cycle min {min(acked)}, median {statistics.median(acked):.0f}, "
          f"max {max(acked)}); writes lost: {lost}", flush=True)
    return 0 if ok and lost == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
