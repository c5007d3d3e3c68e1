#!/usr/bin/env python3
"""Multiqueue with a real Linux guest (issue 10): a cached host-workaround
6.1 kernel (userspace works on our hosts) with 2 vCPUs, a
virtio-blk of 2 request queues and a virtio-net of 2 queue pairs, and
guests/linux/mqinit.c as /init, which reads the disk and sends frames from
each CPU in turn, then reboots (VMM exit 0).

  linux_mq_test.py --vmm VMM --variant msi|nomsi [--irq-mode msix|intx]
                   [--series 6.1|5.10|6.12] [--kernels DIR]

Checks, from the console and --stats:
  - the kernel made 2 blk-mq hardware queues ("2/0/0 default/read/poll
    queues") and the control queue accepted VQ_PAIRS_SET 2;
  - every CPU's reads and frames went through (mqinit's lines);
  - each request queue and each transmit queue served requests (blk-mq maps
    CPU i to queue i; virtio-net's XPS maps CPU i to transmitq i);
  - MSI-X (msi kernel, --irq-mode msix): every queue that interrupted did so
    on a vector of its own, the two request queues on two different
    vectors, the two transmit queues on two others; INTx (the nomsi kernel,
    or --irq-mode intx): every queue's interrupts came by INTx on the
    device's one pin, and the pin asserted.
Skips (77) with the reason only without root or any KVM (this box's or the
emulated host's, which ./vmm moves to by itself). The kernel comes
from guests/linux/build-kernel.sh (the cache the CI-boot matrix shares,
under its lock): on a fresh box this test builds it (minutes), and a build
that fails fails the test.
The bound: a boot here reached init after ~25 s and finished after ~35 s
(2 vCPUs, emulated ring 0); the guest gets --timeout 400.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vmm_test import kvm_usable  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CMDLINE = "clearcpuid=151,308,295,154,141,156,293,304"


def skip(why):
    print(f"SKIP: {why}")
    return 77


def recipe_kernel(series, variant):
    """The recipe kernel's bzImage, built now if the cache lacks it."""
    script = os.path.join(ROOT, "guests", "linux", "build-kernel.sh")
    print(f"kernel: build-kernel.sh --series {series} {variant}", flush=True)
    r = subprocess.run([script, "--series", series, variant], stdout=subprocess.PIPE, text=True)
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines or not os.path.isfile(lines[-1]):
        return None
    return lines[-1]


def make_initramfs(tmp):
    init = os.path.join(tmp, "root", "init")
    os.makedirs(os.path.join(tmp, "root", "dev"))
    cc = shutil.which("cc") or shutil.which("gcc")
    r = subprocess.run([cc, "-static", "-O2", "-o", init,
                        os.path.join(ROOT, "guests", "linux", "mqinit.c")],
                       capture_output=True, text=True) if cc else None
    if not r or r.returncode != 0:
        return None, "cannot build a static mqinit (no cc or no static libc): " + (
            r.stderr.strip()[-200:] if r else "no cc")
    os.mknod(os.path.join(tmp, "root", "dev", "console"), 0o20600, os.makedev(5, 1))
    out = os.path.join(tmp, "initramfs.cpio")
    with open(out, "wb") as f:
        p = subprocess.run(["cpio", "-o", "-H", "newc", "-R", "0:0", "--quiet"],
                           cwd=os.path.join(tmp, "root"), input=b"\n".join(
                               [b".", b"dev", b"dev/console", b"init"]) + b"\n", stdout=f)
    if p.returncode != 0:
        return None, "cpio failed"
    return out, None


def queue_lines(err, dev):
    """{queue: (loop, vector, requests, interrupts)} from --stats."""
    q = {}
    for m in re.finditer(rf"^vmm: stats: {dev} queue (\d+) \((\w+)\): vector ([^,]+), "
                         r"notifies \d+, requests (\d+), interrupts (\d+)$", err, re.M):
        q[int(m.group(1))] = (m.group(2), m.group(3), int(m.group(4)), int(m.group(5)))
    return q


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vmm", required=True)
    ap.add_argument("--variant", choices=["msi", "nomsi"], required=True)
    ap.add_argument("--irq-mode", choices=["msix", "intx"], default="msix")
    ap.add_argument("--series", default="6.1", help="recipe kernel series (6.1)")
    a = ap.parse_args()
    why = kvm_usable()
    if why:
        return skip(why)
    if os.geteuid() != 0:
        return skip("needs root: a tap in a network namespace of its own, and mknod")
    kernel = recipe_kernel(a.series, a.variant)
    if not kernel:
        print(f"FAIL: build-kernel.sh --series {a.series} {a.variant} failed (its log is above)")
        return 1
    msix = a.variant == "msi" and a.irq_mode == "msix"
    with tempfile.TemporaryDirectory() as tmp:
        initrd, why = make_initramfs(tmp)
        if not initrd:
            print(f"FAIL: {why}")
            return 1
        disk = os.path.join(tmp, "disk.img")
        with open(disk, "wb") as f:
            f.truncate(16 << 20)
        cmd = ["unshare", "--net", os.path.abspath(a.vmm), "--kernel", kernel, "--initrd", initrd,
               "--cpus", "2", "--memory", "256", "--timeout", "400", "--stats",
               "--irq-mode", a.irq_mode, "--disk", f"{disk},queues=2",
               "--net", "tap=mqt0,queues=2", "--cmdline", CMDLINE]
        print("running:", " ".join(cmd), flush=True)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=500)
    out, err = p.stdout, p.stderr
    for line in out.splitlines():
        if re.search(r"virtio|mqinit|Run /init|Kernel panic|MSI|blk", line):
            print("console:", line)
    for line in err.splitlines():
        if re.match(r"vmm: (stats: (virtio|INTx|MSI)|warning|error)", line):
            print(line)
    problems = []

    def check(ok, what):
        if not ok:
            problems.append(what)
        return ok

    check(p.returncode == 0, f"VMM exit {p.returncode}, expected 0 (mqinit reboots)")
    # 5.18 and later say how many queues they made; 5.10 does not.
    if a.series != "5.10":
        check(re.search(r"virtio_blk virtio\d+: 2/0/0 default/read/poll queues", out),
              "the kernel did not make 2 blk-mq hardware queues")
    for cpu in (0, 1):
        check(re.search(rf"^mqinit: cpu {cpu}: reads 32 of 32 ok, frames 32 of 32 sent", out,
                        re.M), f"mqinit's CPU {cpu} line is missing or short")
    check("mqinit: done" in out, "mqinit did not finish")
    check(re.search(r"virtio-net0 queue pairs: 2 offered, \d in use at exit, last "
                    r"VQ_PAIRS_SET 2", err), "the driver did not set 2 queue pairs")
    blk, net = queue_lines(err, "virtio-blk0"), queue_lines(err, "virtio-net0")
    check(len(blk) == 2 and len(net) == 5, f"--stats has {len(blk)} blk and {len(net)} net "
          "queue lines, 2 and 5 expected")
    served = {"blk request queue 0": blk.get(0), "blk request queue 1": blk.get(1),
              "net transmitq1": net.get(1), "net transmitq2": net.get(3)}
    for name, q in served.items():
        if check(q is not None, f"{name}: no --stats line"):
            check(q[2] >= 32, f"{name}: {q[2]} requests, at least 32 expected (one CPU's)")
            check(q[3] >= 1, f"{name}: no interrupt")
    pin = re.search(r"^vmm: stats: INTx pin \d+ \(\d sharers?\) asserted (\d+)", err, re.M)
    if msix:
        for name, q in served.items():
            if q:
                check(q[1].startswith("MSI-X "), f"{name}: interrupts by {q[1]}, not MSI-X")
        for a_, b_ in (("blk request queue 0", "blk request queue 1"),
                       ("net transmitq1", "net transmitq2")):
            if served[a_] and served[b_]:
                check(served[a_][1] != served[b_][1],
                      f"{a_} and {b_} share {served[a_][1]} (a vector per queue expected)")
        for dev, qs in (("virtio-blk0", blk), ("virtio-net0", net)):
            for i, q in qs.items():
                check(q[1] != "INTx", f"{dev} queue {i}: INTx under MSI-X")
    else:
        for dev, qs in (("virtio-blk0", blk), ("virtio-net0", net)):
            for i, q in qs.items():
                check(q[1] in ("INTx", "none"), f"{dev} queue {i}: vector {q[1]} without MSI-X")
        check(pin and int(pin.group(1)) > 0, "no INTx pin asserted")
        check("MSI virtio" not in err, "an MSI vector delivered without MSI-X")
    if problems:
        for x in problems:
            print("FAIL:", x)
        return 1
    print(f"ok: {os.path.basename(os.path.dirname(kernel))}, --irq-mode {a.irq_mode}: 2 blk-mq "
          f"queues and "
          f"2 queue pairs, every queue served, interrupts "
          f"{'on a vector per queue' if msix else 'on one INTx pin'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
