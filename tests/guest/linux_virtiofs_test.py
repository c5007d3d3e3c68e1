#!/usr/bin/env python3
"""A Linux guest mounts a host directory over virtio-fs (issue 27).

Debian's own kernel (the emulated host's package, fetched by name and cached:
FUSE, virtiofs and virtio-pci are built in) boots under ./vmm --fs
DIR,tag=share with a busybox initramfs whose /init is
guests/linux/virtiofs-init.sh: it mounts the share, reads the host's file,
writes one, unmounts and powers off. Checks: exit 0, the console's steps, the
file on the host, and the interrupt path in --stats: with MSI-X the queue's
interrupts went backend -> irqfd -> guest (the VMM raised none itself); with
--irq-mode intx the VMM read the backend's call fd and drove the pin.
  linux_virtiofs_test.py VMM msix|intx
Skips (77) only where Debian's kernel package can be neither fetched nor
found in the cache, or virtiofsd is missing.
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from vmmtools.emuhost import image  # noqa: E402

READ_TEXT = "virtio-fs: the host's file, read by Linux"
WRITE_TEXT = b"written by Linux over virtio-fs\n"
VIRTIOFSD = "/usr/lib/qemu/virtiofsd"
WALL_S = 400  # the boot and the steps took 34 s on the emulated host


def write_initramfs(path):
    mk = image.newc_module()
    mk.ensure_busybox_static()
    busybox = mk.BUSYBOX
    with open(busybox, "rb") as f:
        bb = f.read()
    with open(os.path.join(ROOT, "guests", "linux", "virtiofs-init.sh"), "rb") as f:
        init = f.read()
    with open(path, "wb") as out:
        c = mk.Newc(out)
        for d in ("dev", "proc", "sys", "mnt", "bin"):
            c.dir(d)
        c.chardev("dev/console", 5, 1)
        c.file("bin/busybox", bb)
        for a in mk.applets(busybox):
            c.symlink(f"bin/{a}", "busybox")
        c.file("init", init, 0o755)
        c.trailer()


def kernel():
    cache = image.cache_dir()
    with image.CacheLock(cache):
        kdir = image.ensure_kernel(cache)
    return os.path.join(kdir, "vmlinuz")


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in ("msix", "intx"):
        sys.exit("usage: linux_virtiofs_test.py VMM msix|intx")
    vmm, mode = sys.argv[1], sys.argv[2]
    if not os.access(VIRTIOFSD, os.X_OK):
        print(f"SKIP: no {VIRTIOFSD} (Debian's qemu-system-common)")
        return 77
    try:
        vmlinuz = kernel()
    except (image.ImageError, OSError, subprocess.CalledProcessError) as e:
        print(f"SKIP: no Debian kernel package to boot: {e}")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        share, initrd = os.path.join(tmp, "share"), os.path.join(tmp, "initramfs.cpio")
        os.mkdir(share)
        with open(os.path.join(share, "from-host.txt"), "w") as f:
            f.write(READ_TEXT + "\n")
        write_initramfs(initrd)
        cmd = [vmm, "--kernel", vmlinuz, "--initrd", initrd, "--memory", "512", "--timeout",
               "300", "--stats", "--fs", f"{share},tag=share", "--cmdline", "quiet"] + \
            (["--irq-mode", "intx"] if mode == "intx" else [])
        print("running:", " ".join(cmd), flush=True)
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                               timeout=WALL_S)
        except subprocess.TimeoutExpired:
            print(f"FAIL: ./vmm did not finish within {WALL_S} s")
            return 1
        wrote = os.path.join(share, "from-linux.txt")
        written = open(wrote, "rb").read() if os.path.exists(wrote) else None
    print("--- console ---\n" + p.stdout + "--- stderr ---\n" + p.stderr + "---")
    problems = check(p, mode, written)
    for x in problems:
        print("FAIL:", x)
    return 1 if problems else 0


def check(p, mode, written):
    problems = []
    if p.returncode != 0:
        problems.append(f"exit code {p.returncode}, expected 0 (poweroff)")
    for want in (r"virtiofs-init: mounted: share /mnt virtiofs",
                 r"virtiofs-init: read: " + re.escape(READ_TEXT),
                 r"virtiofs-init: wrote from-linux.txt", r"virtiofs-init: unmounted"):
        if not re.search(want, p.stdout):
            problems.append(f"console lacks /{want}/")
    if written != WRITE_TEXT:
        problems.append(f"the host's from-linux.txt holds {written!r}, expected {WRITE_TEXT!r}")
    # The guest's /proc/interrupts line for the request queue, then the
    # VMM's --stats (a device reset at poweroff leaves the vector "none").
    if mode == "msix":
        want = [r"^\s*\d+:\s+[1-9]\d*\s+PCI-MSIX\S*\s+\S+\s+virtio0-requests",
                r"virtio-fs0 queue 1 \(main\): .*interrupts 0, calls \d+, irqfd binds [1-9]"]
    else:
        want = [r"^\s*\d+:\s+[1-9]\d*\s+IO-APIC\s+\S+\s+virtio0",
                r"INTx pin \d+ \(1 sharer\) asserted [1-9]",
                r"virtio-fs0 queue 1 \(main\): .*interrupts [1-9]\d*, calls [1-9]"]
    for w in want:
        if not re.search(w, p.stdout + p.stderr, re.M):
            problems.append(f"output lacks /{w}/")
    return problems


if __name__ == "__main__":
    sys.exit(main())
