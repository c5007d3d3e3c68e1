#!/usr/bin/env python3
"""virtio-fs around vmm_test.py: prepares a shared directory, runs the runner, checks it.

Usage:
  virtio_fs_test.py [--backend PATH] [--no-guest-write] [--ro] -- RUNNER RUNNER-OPTIONS... -- VMM-ARGS...
  virtio_fs_test.py --kill-backend VMM VMM-ARGS...

The directory holds from-host.txt with the text guests/virtiotest/fs.c reads;
"--fs DIR,tag=virtiotest" is appended to the VMM arguments. Afterwards the guest
must have created from-guest.txt holding the text fs.c writes, and nothing else
in the directory may have changed. The runner's exit code is passed on (77:
skipped), unless the directory check fails.
--backend PATH runs the VMM with $VMM_VIRTIOFSD=PATH (a backend that is
missing or fails); --no-guest-write: the guest must not have written;
--ro: the share is --fs ...,ro (the guest must not have written: with
virtiotest.ro=1 it checks its write was refused with EROFS).

--kill-backend runs VMM VMM-ARGS --fs ... with virtiotest.fskill=1 itself:
when the guest says "stop the backend now" (requests keep flowing), the
backend (Debian's virtiofsd, started through a wrapper that records its
pid) gets SIGKILL. The VMM must go on and exit 0 with every guest check
passed (the guest saw NEEDS_RESET and a configuration interrupt, then
reset the device), say on stderr that the backend exited, and count the
failure in --stats. On a box without a usable /dev/kvm this runs whole on
the emulated host, where the VMM and its backend run.
"""
import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "scripts"))
from vmmtools import emuhost  # noqa: E402

READ_NAME, READ_TEXT = "from-host.txt", b"virtio-fs: the host's file, read by the guest\n"
WRITE_NAME, WRITE_TEXT = "from-guest.txt", b"virtio-fs: written by virtiotest over FUSE\n"
TAG = "virtiotest"


def check_share(share, guest_writes):
    """The problems found in the shared directory after the run."""
    problems = []
    names = sorted(os.listdir(share))
    want = sorted([READ_NAME, WRITE_NAME] if guest_writes else [READ_NAME])
    if names != want:
        problems.append(f"the share holds {names}, expected {want}")
    with open(os.path.join(share, READ_NAME), "rb") as f:
        if f.read() != READ_TEXT:
            problems.append(f"{READ_NAME} changed")
    path = os.path.join(share, WRITE_NAME)
    if os.path.exists(path):
        with open(path, "rb") as f:
            got = f.read()
        if got != WRITE_TEXT:
            problems.append(f"{WRITE_NAME} holds {got!r}, expected {WRITE_TEXT!r}")
    return problems


VIRTIOFSD = "/usr/lib/qemu/virtiofsd"
KILL_MARK = "virtiotest: fs: stop the backend now"


def kill_backend(vmm, vmm_args):
    """--kill-backend: problems found (empty: passed)."""
    emuhost.run_inside_if_needed()
    with tempfile.TemporaryDirectory() as tmp:
        share, pidfile = os.path.join(tmp, "share"), os.path.join(tmp, "backend.pid")
        os.mkdir(share)
        wrapper = os.path.join(tmp, "virtiofsd")
        with open(wrapper, "w") as f:
            f.write(f"#!/bin/sh\necho $$ > {pidfile}\nexec {VIRTIOFSD} \"$@\"\n")
        os.chmod(wrapper, 0o755)
        env = dict(os.environ, VMM_VIRTIOFSD=wrapper)
        intx = "intx" in vmm_args[vmm_args.index("--irq-mode") + 1:][:1] \
            if "--irq-mode" in vmm_args else False
        keys = ("virtiotest.expect=intx " if intx else "") + "virtiotest.devices=fs virtiotest.fskill=1"
        cmd = [vmm] + vmm_args + ["--stats", "--fs", f"{share},tag={TAG}", "--cmdline", keys]
        print("running:", " ".join(cmd), flush=True)
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, errors="replace")
        out, killed = [], False
        for line in p.stdout:
            out.append(line)
            if line.startswith(KILL_MARK) and not killed:
                with open(pidfile) as f:
                    os.kill(int(f.read()), signal.SIGKILL)
                killed = True
        err = p.stderr.read()
        rc = p.wait()
    print("--- console ---\n" + "".join(out) + "--- stderr ---\n" + err + "---")
    problems = []
    if not killed:
        problems.append("the guest never asked for the backend to stop")
    if rc != 0:
        problems.append(f"exit code {rc}, expected 0 (the VMM goes on without its backend)")
    if not any(l.startswith("virtiotest: all ") for l in out) or \
            any("virtiotest: FAIL" in l for l in out):
        problems.append("not every guest check passed")
    if "its vhost-user backend" not in err or "exited" not in err:
        problems.append("stderr does not say the backend exited")
    if "failures 0" in err or "backend starts 1 stops 1 failures" not in err:
        problems.append("--stats does not count the backend's failure")
    return problems


def main():
    rest = sys.argv[1:]
    if rest[:1] == ["--kill-backend"]:
        if len(rest) < 3:
            sys.exit("usage: virtio_fs_test.py --kill-backend VMM VMM-ARGS...")
        if not os.access(VIRTIOFSD, os.X_OK):
            print(f"SKIP: no {VIRTIOFSD} (Debian's qemu-system-common)")
            return 77
        problems = kill_backend(rest[1], rest[2:])
        for p in problems:
            print("FAIL:", p)
        return 1 if problems else 0
    env = dict(os.environ)
    guest_writes, ro = True, ""
    while rest and rest[0] != "--":
        if rest[0] == "--backend" and len(rest) > 1:
            env["VMM_VIRTIOFSD"] = rest[1]
            rest = rest[2:]
        elif rest[0] in ("--no-guest-write", "--ro"):
            guest_writes = False
            ro = ",ro" if rest[0] == "--ro" else ro
            rest = rest[1:]
        else:
            sys.exit(f"virtio_fs_test.py: unknown option {rest[0]}")
    rest = rest[1:] if rest and rest[0] == "--" else rest
    if len(rest) < 2 or "--" not in rest[1:]:
        sys.exit("usage: virtio_fs_test.py -- RUNNER RUNNER-OPTIONS... -- VMM-ARGS...")
    sep = rest.index("--", 1)
    runner, runner_opts, vmm_args = rest[0], rest[1:sep], rest[sep + 1:]
    with tempfile.TemporaryDirectory() as tmp:
        share = os.path.join(tmp, "share")
        os.mkdir(share)
        with open(os.path.join(share, READ_NAME), "wb") as f:
            f.write(READ_TEXT)
        cmd = [sys.executable, runner] + runner_opts + ["--"] + vmm_args + \
            ["--fs", f"{share},tag={TAG}{ro}"]
        print("shared directory:", share, flush=True)
        rc = subprocess.run(cmd, env=env).returncode
        if rc == 77:
            return 77
        problems = check_share(share, guest_writes)
    for p in problems:
        print("FAIL (share):", p)
    return 1 if problems else rc


if __name__ == "__main__":
    sys.exit(main())
