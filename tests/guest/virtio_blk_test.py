#!/usr/bin/env python3
"""virtio-blk around vmm_test.py: prepares a disk image, runs the runner, checks the image.

Usage:
  virtio_blk_test.py [--sectors N] [--ro] [--queues N] -- RUNNER RUNNER-OPTIONS... -- VMM-ARGS...

The image has N 512-byte sectors; byte i is (i * 131 + (i >> 9) * 7 + 3) & 0xFF
(the pattern guests/virtiotest/blk.c checks). "--disk IMAGE[,ro]" is appended to
the VMM arguments and "virtiotest.sectors=N" (plus "virtiotest.ro=1") to their
--cmdline. Afterwards the image must be N sectors long and hold, for a
writable disk, the guest's pattern (the host byte XOR 0xA5) in sectors 16-23 and
the host's pattern everywhere else; a read-only disk must be unchanged.
The runner's exit code is passed on (77: skipped), unless the image check fails.
"""
import argparse
import os
import subprocess
import sys
import tempfile

SECTOR = 512
WRITE_FIRST, WRITE_COUNT = 16, 8
MIN_SECTORS = 56  # guests/virtiotest/blk.c also reads sectors 24-55


def host_pattern(nbytes):
    return bytes((i * 131 + (i >> 9) * 7 + 3) & 0xFF for i in range(nbytes))


def expected_image(sectors, ro):
    data = bytearray(host_pattern(sectors * SECTOR))
    if not ro:
        for i in range(WRITE_FIRST * SECTOR, (WRITE_FIRST + WRITE_COUNT) * SECTOR):
            data[i] ^= 0xA5
    return bytes(data)


def add_disk(vmm_args, path, sectors, ro, queues):
    args = list(vmm_args) + ["--disk", path + (",ro" if ro else "") +
                             (f",queues={queues}" if queues > 1 else "")]
    keys = f"virtiotest.sectors={sectors}" + (" virtiotest.ro=1" if ro else "") + \
        (f" virtiotest.queues={queues}" if queues > 1 else "")
    if "--cmdline" in args:
        i = args.index("--cmdline") + 1
        args[i] = args[i] + " " + keys
    else:
        args += ["--cmdline", keys]
    return args


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sectors", type=int, default=256)
    ap.add_argument("--ro", action="store_true")
    ap.add_argument("--queues", type=int, default=1,
                    help="request queues: ',queues=N' and virtiotest.queues=N")
    ap.add_argument("rest", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    rest = a.rest[1:] if a.rest and a.rest[0] == "--" else a.rest
    if len(rest) < 2 or "--" not in rest[1:]:
        ap.error("expected: -- RUNNER RUNNER-OPTIONS... -- VMM-ARGS...")
    if a.sectors < MIN_SECTORS:
        ap.error(f"--sectors must be at least {MIN_SECTORS}")
    sep = rest.index("--", 1)
    runner, runner_opts, vmm_args = rest[0], rest[1:sep], rest[sep + 1:]

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "virtiotest-disk.img")
        original = host_pattern(a.sectors * SECTOR)
        with open(path, "wb") as f:
            f.write(original)
        if a.ro:
            os.chmod(path, 0o444)
        cmd = [sys.executable, runner] + runner_opts + ["--"] + add_disk(vmm_args, path, a.sectors, a.ro, a.queues)
        print("disk image:", path, f"({a.sectors} sectors{', read-only' if a.ro else ''})", flush=True)
        rc = subprocess.run(cmd).returncode
        if rc == 77:
            return 77
        with open(path, "rb") as f:
            got = f.read()
    want = expected_image(a.sectors, a.ro)
    failures = []
    if len(got) != len(want):
        failures.append(f"image is {len(got)} bytes, expected {len(want)} (a write past the end grew it?)")
    diff = [i for i in range(min(len(got), len(want))) if got[i] != want[i]]
    if diff:
        i = diff[0]
        failures.append(f"{len(diff)} bytes differ from the expected image; the first at byte {i} "
                        f"(sector {i // SECTOR}): 0x{got[i]:02x}, expected 0x{want[i]:02x}"
                        + (" (the disk was read-only)" if a.ro else
                           f" (sectors {WRITE_FIRST}-{WRITE_FIRST + WRITE_COUNT - 1} hold the guest's pattern)"))
    for f in failures:
        print("FAIL (disk image):", f)
    if not failures:
        print("disk image: " + ("unchanged, as a read-only disk must be" if a.ro else
                                f"sectors {WRITE_FIRST}-{WRITE_FIRST + WRITE_COUNT - 1} hold the guest's "
                                "pattern, the rest the host's"))
    return 1 if failures else rc


if __name__ == "__main__":
    sys.exit(main())
