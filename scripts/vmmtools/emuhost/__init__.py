"""The emulated KVM host (scripts/vmm-host): what tests and runners ask.

Where /dev/kvm is missing or unusable, ./vmm moves itself onto the
emulated host (--host auto), so a test that only runs ./vmm needs nothing
from here but guest_skip_reason(). A test that also needs the kernel the
VMM runs on (its taps and network namespaces, mounts, FUSE, loop
devices) runs whole on the emulated host: run_inside_if_needed().
"""
import os
import sys


def kvm_unusable():
    """Why this box's /dev/kvm cannot be used, or None."""
    try:
        fd = os.open("/dev/kvm", os.O_RDWR)
    except OSError as e:
        return f"/dev/kvm: {e.strerror}"
    os.close(fd)
    return None


def inside():
    """True in a command that scripts/vmm-host runs on the emulated host."""
    return bool(os.environ.get("VMM_EMULATED_HOST"))


def guest_skip_reason():
    """Why no guest can boot from here (neither this box's KVM nor the
    emulated host), or None."""
    why = kvm_unusable()
    if not why:
        return None
    if inside():
        return f"{why}, on the emulated host itself"
    from . import qemu
    if not qemu.qemu_binary():
        return (f"{why}, and {qemu.QEMU} (Debian package qemu-system-x86) is missing, so "
                f"there is no emulated KVM host either")
    return None


def host_kind():
    """How reports name the KVM a guest runs on here (see vmmtools.host)."""
    if inside():
        return os.environ["VMM_EMULATED_HOST"]
    return None


def run_inside_if_needed(argv=None):
    """On a box without a usable /dev/kvm, runs this script again (the
    same interpreter, argv, working directory and environment) on the
    emulated host and exits as it exits; returns at once elsewhere (and
    on the emulated host itself)."""
    if not kvm_unusable() or inside():
        return
    from . import client
    python = os.path.realpath(sys.executable)
    argv = argv or [python] + sys.argv
    env = dict(os.environ)
    # The real interpreter's directory first: a version manager's shim for
    # python3 (pyenv) costs seconds per start on the emulated host.
    env["PATH"] = os.path.dirname(python) + os.pathsep + env.get("PATH", "")
    sys.stdout.flush()
    client.run(argv, env=env)
