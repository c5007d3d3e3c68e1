#!/usr/bin/env python3
"""virtio-fs around vmm_test.py: prepares a shared directory, runs the runner, checks it.

Usage:
  virtio_fs_test.py [--backend PATH] [--no-guest-write] -- RUNNER RUNNER-OPTIONS... -- VMM-ARGS...

The directory holds from-host.txt with the text guests/virtiotest/fs.c reads;
"--fs DIR,tag=virtiotest" is appended to the VMM arguments. Afterwards the guest
must have created from-guest.txt holding the text fs.c writes, and nothing else
in the directory may have changed. The runner's exit code is passed on (77:
skipped), unless the directory check fails.
--backend PATH runs the VMM with $VMM_VIRTIOFSD=PATH (a backend that is
missing or fails); --no-guest-write: the guest must not have written.
"""
import os
import subprocess
import sys
import tempfile

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


def main():
    rest = sys.argv[1:]
    env = dict(os.environ)
    guest_writes = True
    while rest and rest[0] != "--":
        if rest[0] == "--backend" and len(rest) > 1:
            env["VMM_VIRTIOFSD"] = rest[1]
            rest = rest[2:]
        elif rest[0] == "--no-guest-write":
            guest_writes = False
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
            ["--fs", f"{share},tag={TAG}"]
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
