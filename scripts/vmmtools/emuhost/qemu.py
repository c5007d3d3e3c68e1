"""The emulated KVM host's QEMU command line, in one place.

One host is one CPU (`-smp 1`): measured on our boxes, hosts with two
emulated CPUs hang nested guests (a vCPU spinning with IF=0 on a lock no
one holds) in 4 to 10 of 10 boots, with either TCG threading mode, while
one-CPU hosts ran 100 of 100; a pool of one-CPU hosts, one per core, gives
the box's parallelism back (scripts/vmmtools/emuhost/pool.py).
"""
import os
import re
import shutil
import subprocess

QEMU = "qemu-system-x86_64"
VIRTIOFSD = "/usr/lib/qemu/virtiofsd"  # Debian's qemu-system-common
GUEST_PORT = 5555


def qemu_binary():
    """QEMU's path (VMM_HOST_QEMU, else qemu-system-x86_64 on PATH), or None
    when it is not an executable file."""
    path = os.environ.get("VMM_HOST_QEMU") or shutil.which(QEMU)
    return path if path and os.access(path, os.X_OK) and os.path.isfile(path) else None


def qemu_version(binary):
    out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"version (\S+)", out)
    return m.group(1) if m else "?"


def memory_mib():
    """Per host: VMM_HOST_MEMORY (MiB), else 8 GiB or a third of the box's
    RAM, whichever is less (TCG allocates it as the guest touches it)."""
    env = os.environ.get("VMM_HOST_MEMORY")
    if env:
        return int(env)
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >> 20
    return max(1024, min(8192, total // 3))


def share_kind():
    """How the box's root reaches the host: virtio-fs (Debian's virtiofsd,
    which needs root to chroot) or 9p (QEMU's own server); VMM_HOST_FS
    chooses. Both run commands alike (measured on our box, one warm host:
    /usr/bin/python3 -c pass 1.0-2.0 s over virtio-fs, 1.4-2.5 s over 9p;
    hello 0.9 s on both), but FIFOs and unix sockets can be made on the
    box's paths over virtio-fs only (9p: "No such device or address")."""
    want = os.environ.get("VMM_HOST_FS", "auto")
    if want in ("9p", "virtiofs"):
        return want
    return "virtiofs" if os.geteuid() == 0 and os.access(VIRTIOFSD, os.X_OK) else "9p"


def virtiofsd_command(sock):
    """Debian's virtiofsd serving the box's root on sock (one connection:
    it exits when its QEMU does). cache=auto: the host sees a file the box
    changed at its next open (close-to-open), metadata within 1 s."""
    return [VIRTIOFSD, f"--socket-path={sock}", "-o", "source=/", "-o", "cache=auto",
            "-o", "sandbox=chroot"]


def command(binary, vmlinuz, initramfs, port, token, vfs_socket=None):
    """argv of one emulated host; its console (ttyS0) is QEMU's stdout.
    With vfs_socket, the box's root comes from the virtiofsd there."""
    mib = memory_mib()
    if vfs_socket:
        share = ["-chardev", f"socket,id=vfs,path={vfs_socket}",
                 "-device", "vhost-user-fs-pci,queue-size=1024,chardev=vfs,tag=host",
                 "-object", f"memory-backend-memfd,id=mem,size={mib}M,share=on",
                 "-numa", "node,memdev=mem"]
    else:
        model = "passthrough" if os.geteuid() == 0 else "none"
        share = ["-virtfs", f"local,path=/,mount_tag=host,security_model={model},"
                 "multidevs=remap"]
    append = " ".join([
        "console=ttyS0", "quiet", "panic=-1",
        f"emuhost.port={GUEST_PORT}", f"emuhost.token={token}",
        f"emuhost.fs={'virtiofs' if vfs_socket else '9p'}",
    ])
    return [
        binary, "-accel", "tcg,thread=" + os.environ.get("VMM_HOST_TCG_THREAD", "multi"),
        "-cpu", "max", "-smp", "1", "-m", str(mib),
        "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
        "-serial", "stdio", "-monitor", "none",
        "-kernel", vmlinuz, "-initrd", initramfs, "-append", append,
    ] + share + [
        "-netdev", f"user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:{port}-:{GUEST_PORT}",
        "-device", "virtio-net-pci,netdev=n0",
        "-device", "virtio-rng-pci",
    ]
