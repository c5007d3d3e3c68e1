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
GUEST_PORT = 5555


def qemu_binary():
    return os.environ.get("VMM_HOST_QEMU") or shutil.which(QEMU)


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


def command(binary, vmlinuz, initramfs, port, token):
    """argv of one emulated host; its console (ttyS0) is QEMU's stdout."""
    root_model = "passthrough" if os.geteuid() == 0 else "none"
    append = " ".join([
        "console=ttyS0", "quiet", "panic=-1", "oops=panic", "softlockup_panic=1",
        "nowatchdog" if os.environ.get("VMM_HOST_NOWATCHDOG") else "",
        f"emuhost.port={GUEST_PORT}", f"emuhost.token={token}",
    ])
    return [
        binary, "-accel", "tcg,thread=" + os.environ.get("VMM_HOST_TCG_THREAD", "multi"),
        "-cpu", "max", "-smp", "1", "-m", str(memory_mib()),
        "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
        "-serial", "stdio", "-monitor", "none",
        "-kernel", vmlinuz, "-initrd", initramfs, "-append", append,
        "-virtfs", f"local,path=/,mount_tag=host,security_model={root_model},multidevs=remap",
        "-netdev", f"user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:{port}-:{GUEST_PORT}",
        "-device", "virtio-net-pci,netdev=n0",
        "-device", "virtio-rng-pci",
    ]
