#!/usr/bin/env python3
"""Every option of ./vmm with wrong values (missing, empty, out of range,
unknown, conflicting): each is one clear line on stderr naming what is
wrong, exit code 2, nothing on stdout, and nothing created on disk (the
command lines name output files: the console log, the device tree dump,
the irqbench samples; none may appear). Runs without /dev/kvm: input is
checked first; the few cases found only while the machine is built run on
the emulated host where /dev/kvm is unusable (its notice line aside, the
same one line), and skip only where no guest can boot.
  bad_options_test.py VMM KERNEL
"""
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vmm_test import kvm_usable, without_notice  # noqa: E402

OUT = ["--console-log", "console.log", "--dump-dtb", "machine.dtb"]

# (name, arguments after --kernel KERNEL or in full when the first is "!"
#  ("@env:NAME=VALUE" sets the environment instead), regex the one stderr
#  line must match, needs /dev/kvm)
CASES = [
    ("no arguments", ["!"], r"no kernel given", False),
    ("kernel missing value", ["!", "--kernel"], r"option --kernel needs a value", False),
    ("kernel empty", ["!", "--kernel", ""], r"--kernel: empty path", False),
    ("kernel does not exist", ["!", "--kernel", "/no/such/kernel"], r"cannot open kernel '/no/such/kernel'", False),
    ("kernel is a directory", ["!", "--kernel", "/"], r"kernel '/'", False),
    ("kernel is not a kernel", ["!", "--kernel", "@notakernel"], r"not a Linux kernel", False),
    # A FIFO nobody writes: a blocking open would wait for ever, deaf to
    # SIGTERM; the type is checked on a non-blocking descriptor first.
    ("kernel is a FIFO", ["!", "--kernel", "@fifo"], r"kernel '.*/fifo' is not a regular file", False),
    ("initrd missing value", ["--initrd"], r"option --initrd needs a value", False),
    ("initrd is a FIFO", ["--initrd", "@fifo"], r"initrd '.*/fifo' is not a regular file", False),
    ("initrd does not exist", ["--initrd", "/no/such/initrd"], r"initrd '/no/such/initrd'", False),
    ("cmdline missing value", ["--cmdline"], r"option --cmdline needs a value", False),
    ("memory not a number", ["--memory", "lots"], r"--memory: 'lots' is not a whole number", False),
    ("memory empty", ["--memory", ""], r"--memory: '' is not a whole number", False),
    ("memory negative", ["--memory", "-5"], r"--memory: '-5' is not a whole number", False),
    ("memory too small", ["--memory", "1"], r"--memory 1: must be between 2 and", False),
    ("memory too large", ["--memory", "99999999"], r"--memory 99999999: must be between", False),
    ("cpus zero", ["--cpus", "0"], r"--cpus 0: must be between 1 and 254", False),
    ("cpus too many", ["--cpus", "255"], r"--cpus 255: must be between 1 and 254", False),
    ("cpus not a number", ["--cpus", "two"], r"--cpus: 'two' is not a whole number", False),
    ("kvm-pv unknown feature", ["--kvm-pv", "kvmclock"], r"--kvm-pv: unknown feature 'kvmclock'",
     False),
    ("kvm-pv empty item", ["--kvm-pv", "steal-time,,"], r"--kvm-pv: unknown feature ''", False),
    ("timeout zero", ["--timeout", "0"], r"--timeout 0: must be above 0 and at most 10000000", False),
    ("timeout negative", ["--timeout", "-1"], r"--timeout -1: must be above 0 and at most 10000000", False),
    ("timeout nan", ["--timeout", "nan"], r"--timeout: 'nan' is not a number", False),
    ("timeout with unit", ["--timeout", "5s"], r"--timeout: '5s' is not a number", False),
    ("console-log missing value", ["--console-log"], r"option --console-log needs a value", False),
    ("console-log empty", ["--console-log", ""], r"--console-log: empty path", False),
    ("console-log in a missing directory", ["--console-log", "no/dir/c.log"], r"--console-log no/dir/c.log: cannot write in no/dir", False),
    ("console-log is a directory", ["--console-log", "."], r"--console-log \.: is a directory", False),
    ("dump-dtb in a missing directory", ["--dump-dtb", "no/dir/m.dtb"], r"--dump-dtb no/dir/m.dtb: cannot write in no/dir", False),
    ("device missing value", ["--device"], r"option --device needs a value", False),
    ("device empty", ["--device", ""], r"--device: needs a value, one of testdev, irqbench$", False),
    ("device unknown", ["--device", "frob"], r"--device frob: use one of testdev, irqbench$", False),
    ("testdev zero vectors", ["--device", "testdev,vectors=0"], r"--device testdev vectors 0: must be between 1 and 2048", False),
    ("testdev too many vectors", ["--device", "testdev,vectors=2049"], r"--device testdev vectors 2049: must be between 1 and 2048", False),
    ("testdev vectors not a number", ["--device", "testdev,vectors=x"], r"--device testdev vectors: 'x' is not a whole number", False),
    ("testdev slot 0", ["--device", "testdev,slot=0"], r"--device testdev slot 0: must be between 1 and 31", False),
    ("testdev slot 32", ["--device", "testdev,slot=32"], r"--device testdev slot 32: must be between 1 and 31", False),
    ("testdev unknown property", ["--device", "testdev,colour=red"], r"--device testdev: unknown property 'colour=red' \(vectors=N, slot=S\)", False),
    ("testdev flag given a value", ["--device", "testdev,vectors"], r"--device testdev: unknown property 'vectors' \(vectors=N, slot=S\)", False),
    ("disk flag given a value", ["--disk", "d.img,ro=1"], r"--disk d.img: unknown property 'ro=1'", False),
    ("net tap and a word", ["--net", "tapx"], r"--net tapx: only tap\[=NAME\] is supported", False),
    ("irqbench empty samples", ["--device", "irqbench,samples="], r"--device irqbench samples: needs a value \(FILE\)", False),
    ("irqbench samples in a missing directory", ["--device", "irqbench,samples=no/dir/s.txt"], r"samples= no/dir/s.txt: cannot write in no/dir", True),
    ("two devices in one slot", ["--device", "testdev,slot=3", "--device", "irqbench,slot=3"], r"testdev and irqbench: both asked for PCI slot 3", False),
    ("too many devices", ["--rng"] * 17, r"--rng: at most 16 devices", False),
    ("disk missing value", ["--disk"], r"option --disk needs a value", False),
    ("fs without a tag", ["--fs", "/"], r"--fs /: needs tag=NAME", False),
    ("fs on a missing directory", ["--fs", "/no/such/dir,tag=x"], r"--fs /no/such/dir: No such file or directory", False),
    ("fs on a file", ["--fs", "/proc/version,tag=x"], r"--fs /proc/version: not a directory", False),
    ("fs tag too long", ["--fs", "/,tag=" + "t" * 37], r"--fs / tag t{37}: at most 36 bytes", False),
    ("fs ro with a backend of the user's", ["--fs", "/,tag=x,ro,socket=/tmp/no.sock"], r"--fs /: ro is for the backend the VMM starts \(a socket=PATH backend decides for itself\)", False),
    ("fs unknown property", ["--fs", "/,tag=x,rw"], r"--fs /: unknown property 'rw' \(tag=NAME, ro, socket=PATH\)", False),
    ("disk empty", ["--disk", ""], r"--disk needs a path", False),
    ("disk only flags", ["--disk", ",ro"], r"--disk needs a path", False),
    ("disk unknown flag", ["--disk", "d.img,rw"], r"--disk d.img: unknown property 'rw' \(ro, direct, queues=N\)", False),
    ("disk zero queues", ["--disk", "d.img,queues=0"], r"--disk queues 0: must be between 1 and 16", False),
    ("disk too many queues", ["--disk", "d.img,queues=17"], r"--disk queues 17: must be between 1 and 16", False),
    ("disk queues not a number", ["--disk", "d.img,queues=two"], r"--disk queues: 'two' is not a whole number", False),
    ("disk queues empty", ["--disk", "d.img,ro,queues="], r"--disk queues: '' is not a whole number", False),
    ("disk does not exist", ["--disk", "/no/such/disk"], r"--disk /no/such/disk: No such file or directory", True),
    ("disk is a directory", ["--disk", "/"], r"--disk /: ", True),
    ("disk is a FIFO", ["--disk", "@fifo"], r"--disk .*/fifo: not a regular file or block device", True),
    ("read-only disk is a FIFO", ["--disk", "@fifo,ro"], r"--disk .*/fifo: not a regular file or block device", True),
    ("net not a tap", ["--net", "user"], r"--net user: only tap\[=NAME\] is supported", False),
    ("net bad mac", ["--net", "tap,mac=zz:00:00:00:00:01"], r"--net mac: 'zz:00:00:00:00:01' is not a MAC address \(XX:XX:XX:XX:XX:XX\)", False),
    ("net multicast mac", ["--net", "tap,mac=01:00:00:00:00:01"], r"--net mac=01:00:00:00:00:01: a multicast MAC cannot be a NIC's", False),
    ("net unknown property", ["--net", "tap,colour=red"], r"--net: unknown property 'colour=red' \(mac=XX:XX:XX:XX:XX:XX, queues=N\)", False),
    ("net queues not a number", ["--net", "tap,queues=2x"], r"--net queues: '2x' is not a whole number", False),
    ("net zero queues", ["--net", "tap=t0,queues=0"], r"--net queues 0: must be between 1 and 8", False),
    ("net too many queues", ["--net", "tap,mac=02:00:00:00:00:01,queues=9"], r"--net queues 9: must be between 1 and 8", False),
    ("io-threads missing value", ["--io-threads"], r"option --io-threads needs a value", False),
    ("io-threads negative", ["--io-threads", "-1"], r"--io-threads: '-1' is not a whole number", False),
    ("io-threads too many", ["--io-threads", "17"], r"--io-threads 17: must be between 0 and 16", False),
    ("io-threads not a number", ["--io-threads", "all"], r"--io-threads: 'all' is not a whole number", False),
    ("console unknown", ["--console", "vga"], r"--console vga: use one of serial, virtio$", False),
    ("irq-mode unknown", ["--irq-mode", "msi"], r"--irq-mode msi: use one of msix, intx$", False),
    ("msi-delivery unknown", ["--msi-delivery", "poll"], r"--msi-delivery poll: use one of irqfd, signal$", False),
    ("intx-delivery unknown", ["--intx-delivery", "edge"], r"--intx-delivery edge: use one of resample, line$", False),
    ("acpi neither on nor off", ["--acpi", "maybe"], r"--acpi maybe: use one of on, off$", False),
    ("boot entry unknown", ["--boot", "efi"], r"--boot efi: use one of auto, linux, pvh$", False),
    ("host unknown", ["--host", "cloud"], r"--host cloud: use one of auto, kvm, emulated$", False),
    ("VMM_HOST unknown", ["@env:VMM_HOST=cloud"], r"VMM_HOST cloud: use one of auto, kvm, emulated$", False),
    ("seccomp neither on nor off", ["--seccomp", "no"], r"--seccomp no: use one of on, off$", False),
    ("dump-acpi empty", ["--dump-acpi", ""], r"--dump-acpi: empty path", False),
    ("dump-acpi missing directory", ["--dump-acpi", "/no/such/dir"], r"--dump-acpi /no/such/dir: No such file or directory", False),
    ("dump-acpi is a file", ["--dump-acpi", "@notakernel"], r"--dump-acpi .*/notakernel: not a directory", False),
    # Outputs are opened without blocking and type-checked (issue 26): a
    # FIFO nobody reads was a blocking open that ignored SIGTERM.
    ("console-log is a FIFO nobody reads", ["--console-log", "@fifo"], r"--console-log .*/fifo: a FIFO nobody reads", True),
    ("dump-dtb is a FIFO nobody reads", ["!", "--kernel", "@kernel", "--dump-dtb", "@fifo"], r"--dump-dtb .*/fifo: a FIFO nobody reads", True),
    ("console-log is a socket", ["--console-log", "@sock"], r"--console-log .*/sock: ", True),
    # A link another user planted where root writes: not followed.
    ("console-log through another user's link", ["--console-log", "@link"], r"--console-log .*/link: a symbolic link another user owns \(uid 65534\): not followed", True),
    # PVH start-info ABI: a 32-bit entry; a note above 4 GiB (issue 26)
    # pointed into a segment loaded there and was entered truncated.
    ("PVH entry above 4 GiB", ["!", "--kernel", "@pvh4g", "--memory", "5120"], r"the PVH entry note's 0x100000010 is at or above 4 GiB", False),
    ("unknown option", ["--frobnicate"], r"unknown option '--frobnicate' \(see --help\)", False),
    ("unknown short option", ["-x"], r"unknown option '-x' \(see --help\)", False),
    ("stray argument", ["stray"], r"unexpected argument 'stray' \(see --help\)", False),
]


def elf_with_pvh_note(load, entry):
    """An ELF64 vmlinux of one 4 KiB segment at physical `load` and a Xen
    PHYS32_ENTRY note (descsz 8, as Linux writes it) saying `entry`."""
    note = struct.pack("<III4sQ", 4, 8, 18, b"Xen\0", entry)
    ehdr = struct.pack("<4sBBBBB7sHHIQQQIHHHHHH", b"\x7fELF", 2, 1, 1, 0, 0, b"", 2, 62, 1,
                       load, 64, 0, 0, 64, 56, 2, 64, 0, 0)
    load_ph = struct.pack("<IIQQQQQQ", 1, 5, 0x1000, load, load, 0x1000, 0x1000, 0x1000)
    note_ph = struct.pack("<IIQQQQQQ", 4, 4, 0x200, 0, 0, len(note), len(note), 4)
    img = bytearray(0x2000)
    img[0:64], img[64:120], img[120:176] = ehdr, load_ph, note_ph
    img[0x200:0x200 + len(note)] = note
    img[0x1000:0x1002] = b"\xeb\xfe"
    return bytes(img)


def main():
    vmm, kernel = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    why = kvm_usable()
    failures, ran, skipped = [], 0, 0
    for name, args, rx, needs_kvm in CASES:
        if needs_kvm and why:
            print(f"skip  {name}: found while the machine is built, and {why}")
            skipped += 1
            continue
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "notakernel"), "w") as f:
                f.write("not a kernel\n")
            os.mkfifo(os.path.join(tmp, "fifo"))
            with open(os.path.join(tmp, "pvh4g"), "wb") as f:
                f.write(elf_with_pvh_note(0x100000000, 0x100000010))
            sock = socket.socket(socket.AF_UNIX)
            sock.bind(os.path.join(tmp, "sock"))
            os.symlink(os.path.join(tmp, "target"), os.path.join(tmp, "link"))
            if os.geteuid() == 0:
                os.lchown(os.path.join(tmp, "link"), 65534, 65534)

            def place(a):
                for name in ("notakernel", "fifo", "sock", "link", "pvh4g"):
                    a = a.replace("@" + name, os.path.join(tmp, name))
                return a.replace("@kernel", kernel)
            # "@env:NAME=VALUE": the environment, not an argument.
            env = dict(os.environ)
            env.update(a[5:].split("=", 1) for a in args if a.startswith("@env:"))
            args = [a for a in args if not a.startswith("@env:")]
            if args and args[0] == "!":
                cmd = [vmm] + [place(a) for a in args[1:]]
            else:
                cmd = [vmm, "--kernel", kernel] + OUT + [place(a) for a in args]
            before = set(os.listdir(tmp))
            try:
                # A generous bound: input is checked in milliseconds; a hang
                # (the FIFO cases before the fix) is a failure, not a crash.
                p = subprocess.run(cmd, cwd=tmp, stdin=subprocess.DEVNULL, env=env,
                                   capture_output=True, text=True, timeout=60)
            except subprocess.TimeoutExpired as t:
                p = subprocess.CompletedProcess(cmd, "hung", t.stdout or "",
                                                "(still running after 60 s)")
                p.stdout = p.stdout if isinstance(p.stdout, str) else p.stdout.decode()
            made = set(os.listdir(tmp)) - before
            sock.close()
        ran += 1
        # Found while the machine is built: on the emulated host where
        # /dev/kvm is unusable, after the one line that says so.
        lines = without_notice(p.stderr).splitlines()
        problems = []
        if p.returncode == "hung":
            problems.append("still running after 60 s: killed")
        elif p.returncode != 2:
            problems.append(f"exit code {p.returncode}, expected 2")
        if len(lines) != 1:
            problems.append(f"{len(lines)} lines on stderr, expected one")
        elif not lines[0].startswith("vmm: ") or not re.search(rx, lines[0]):
            problems.append(f"stderr {lines[0]!r} does not match /{rx}/")
        if p.stdout:
            problems.append(f"stdout not empty: {p.stdout[:200]!r}")
        if made:
            problems.append(f"created {sorted(made)}")
        status = "FAIL" if problems else "ok  "
        print(f"{status}  {name}: {' '.join(cmd[1:])[:110]}\n      -> {lines[0] if lines else '(nothing)'}")
        failures += [f"{name}: {x}" for x in problems]
    for f in failures:
        print("FAIL:", f)
    print(f"{ran} bad command lines run, {skipped} skipped, {len(failures)} problems")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
