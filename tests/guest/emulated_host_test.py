#!/usr/bin/env python3
"""The emulated KVM host itself (scripts/vmm-host), through `./vmm --host
emulated`, so it is tested on every box, with or without a /dev/kvm of its
own. Each case says what it checks:
  exit-0        hello: the VMM's 0 and the guest's console come back; one
                notice line on stderr names the host (QEMU, its kernel)
  exit-67       debug-exit 0x21: the VMM's (0x21 << 1) | 1
  exit-4        a panic line on the console: 4
  status-stdin  a line typed on stdin reaches the guest's UART, the guest
                echoes it and ends through the status port with 3: 3
  sigterm-10    SIGTERM once the guest runs: the VMM's own stop, 10
  sigterm-boot  SIGTERM while a new pool's host is still booting: ends
                within 30 s (the box is not left waiting on the host)
  host-killed   the host's QEMU dies under a running command: exit 14 and
                one line that says so (never a guest result)
  netns         ./vmm in a network namespace of its own (unshare --net, as
                root) reaches the host all the same: 67
  netns-daemon  a pool's daemon started from such a namespace serves that
                command and the box's next one: 67 and 67
  disk          a sector the guest writes (virtiotest, blk) is in the box's
                image file afterwards, the rest unchanged
  no-qemu       VMM_HOST_QEMU names no program: one line, exit 14
  no-kernel     no kernel package reachable and none cached (an empty
                cache, apt told to stay offline): one line, exit 14
  emulated_host_test.py VMM BUILD_DIR
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vmm_test import EMULATED_NOTICE, skip_unless_guests_boot  # noqa: E402

vmm, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
skip_unless_guests_boot("this test starts the emulated host")
ELF = os.path.join(build, "tests", "guest")
HELLO = os.path.join(build, "guests", "hello.bzImage")
VIRTIOTEST = os.path.join(build, "guests", "virtiotest.bzImage")
VMM_HOST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                        "vmm-host")
fails = []


def run(args, env=None, **kw):
    p = subprocess.run([vmm, "--host", "emulated"] + args, capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, **(env or {})), **kw)
    print(f"$ vmm --host emulated {' '.join(args)}\n  exit {p.returncode}\n"
          f"  stdout: {p.stdout[-400:]!r}\n  stderr: {p.stderr[-600:]!r}", flush=True)
    return p


def check(case, ok, what):
    print(f"{'ok  ' if ok else 'FAIL'} {case}: {what}", flush=True)
    if not ok:
        fails.append(f"{case}: {what}")


p = run(["--kernel", HELLO])
notices = EMULATED_NOTICE.findall(p.stderr)
check("exit-0", p.returncode == 0, f"exit {p.returncode}, expected 0")
check("exit-0", re.search(r"hello: all \d+ checks passed", p.stdout), "hello's checks on stdout")
check("exit-0", len(notices) == 1 and re.search(
    r"^vmm: --host emulated: running on the emulated KVM host, emulated \(QEMU \S+ TCG, "
    r"nested SVM, kernel \S+\)", notices[0] if notices else ""), "one notice naming the host")

p = run(["--kernel", os.path.join(ELF, "debug_exit.elf")])
check("exit-67", p.returncode == 67, f"exit {p.returncode}, expected 67")
p = run(["--kernel", os.path.join(ELF, "panic_console.elf")])
check("exit-4", p.returncode == 4, f"exit {p.returncode}, expected 4")

p = run(["--kernel", os.path.join(ELF, "echo_status.elf"), "--timeout", "120"],
        input="typed on the box\n")
check("status-stdin", p.returncode == 3, f"exit {p.returncode}, expected 3 (status port)")
check("status-stdin", "echo guest: got typed on the box" in p.stdout, "the line came back")

# SIGTERM once the guest is running: the VMM's own stop.
proc = subprocess.Popen([vmm, "--host", "emulated", "--kernel",
                         os.path.join(ELF, "echo_status.elf"), "--timeout", "120"],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
first = proc.stdout.readline().decode(errors="replace")  # blocks until the guest runs
proc.send_signal(signal.SIGTERM)
out, err = proc.communicate(timeout=120)
print(f"sigterm-10: first line {first!r}, exit {proc.returncode}, stderr {err[-300:]!r}")
check("sigterm-10", first.startswith("echo guest: ready"), "the guest was running")
check("sigterm-10", proc.returncode == 10, f"exit {proc.returncode}, expected 10")

# SIGTERM while a pool of its own is still booting its host.
with tempfile.TemporaryDirectory() as run_dir:
    env = dict(os.environ, VMM_HOST_RUN=run_dir, VMM_HOST_IDLE="5")
    t0 = time.monotonic()
    proc = subprocess.Popen([vmm, "--host", "emulated", "--kernel", HELLO], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # The pool's socket appears as its daemon starts, before its host is up.
    while not os.path.exists(os.path.join(run_dir, "pool.sock")) and proc.poll() is None and \
            time.monotonic() - t0 < 60:
        time.sleep(0.05)  # polled, bounded: nothing to wait on across processes
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
        ended = True
    except subprocess.TimeoutExpired:
        proc.kill()
        ended = False
    print(f"sigterm-boot: exit {proc.returncode} after {time.monotonic() - t0:.1f} s")
    check("sigterm-boot", ended, "ended within 30 s of SIGTERM")
    subprocess.run([VMM_HOST, "stop"], env=env, capture_output=True)

# The host dies under a running command (a pool of its own; stopped at the
# end, so a long idle period costs nothing and a loaded box's slow client
# still finds the daemon to ask why).
with tempfile.TemporaryDirectory() as run_dir:
    env = dict(os.environ, VMM_HOST_RUN=run_dir, VMM_HOST_IDLE="60")
    proc = subprocess.Popen([vmm, "--host", "emulated", "--kernel",
                             os.path.join(ELF, "echo_status.elf"), "--timeout", "120"], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline().decode(errors="replace")  # the guest runs
    st = json.loads(subprocess.run([VMM_HOST, "status"], env=env, capture_output=True,
                                   text=True).stdout or "{}")
    for h in st.get("hosts", []):
        os.kill(h["qemu_pid"], signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    print(f"host-killed: first line {first!r}, exit {proc.returncode}, stderr {err[-300:]!r}")
    lines = [x for x in err.decode(errors="replace").splitlines() if "emulated KVM host failed" in x]
    check("host-killed", first.startswith("echo guest: ready") and st.get("hosts"),
          "a host ran the guest")
    check("host-killed", proc.returncode == 14, f"exit {proc.returncode}, expected 14")
    check("host-killed", len(lines) == 1 and "QEMU exited" in lines[0], "one line: QEMU exited")
    subprocess.run([VMM_HOST, "stop"], env=env, capture_output=True)

if os.geteuid() == 0 and shutil.which("unshare"):
    p = subprocess.run(["unshare", "--net", vmm, "--host", "emulated", "--kernel",
                        os.path.join(ELF, "debug_exit.elf")], capture_output=True, text=True,
                       timeout=300)
    check("netns", p.returncode == 67, f"exit {p.returncode}, expected 67: {p.stderr[-200:]}")
    # A pool whose daemon a command in a namespace of its own started (its
    # loopback down) serves that command and the box's next ones.
    with tempfile.TemporaryDirectory() as run_dir:
        env = dict(os.environ, VMM_HOST_RUN=run_dir, VMM_HOST_IDLE="5")
        for where, pre in (("in the namespace", ["unshare", "--net"]), ("on the box", [])):
            p = subprocess.run(pre + [vmm, "--host", "emulated", "--kernel",
                                      os.path.join(ELF, "debug_exit.elf")],
                               capture_output=True, text=True, timeout=300, env=env)
            check("netns-daemon", p.returncode == 67,
                  f"{where}: exit {p.returncode}, expected 67: {p.stderr[-200:]}")
        subprocess.run([VMM_HOST, "stop"], env=env, capture_output=True)
else:
    print("(netns: not root or no unshare(1): not run)")

# The disk: virtiotest writes its pattern over sectors 16-23.
with tempfile.TemporaryDirectory() as tmp:
    img = os.path.join(tmp, "disk.img")
    base = bytes((i * 131 + (i >> 9) * 7 + 3) & 0xFF for i in range(256 * 512))
    with open(img, "wb") as f:
        f.write(base)
    p = run(["--kernel", VIRTIOTEST, "--disk", img, "--timeout", "120", "--cmdline",
             "virtiotest.devices=blk"])
    with open(img, "rb") as f:
        after = f.read()
    want = bytearray(base)
    for i in range(16 * 512, 24 * 512):
        want[i] ^= 0xA5
    check("disk", p.returncode == 0, f"exit {p.returncode}, expected 0")
    check("disk", after == bytes(want), "sectors 16-23 hold the guest's pattern, the rest the "
          "box's")

p = run(["--kernel", HELLO], env={"VMM_HOST_QEMU": "/no/such/qemu"})
lines = p.stderr.splitlines()
check("no-qemu", p.returncode == 14, f"exit {p.returncode}, expected 14")
check("no-qemu", len(lines) == 1 and "/no/such/qemu is not installed" in lines[0],
      "one line naming QEMU")

with tempfile.TemporaryDirectory() as cache:
    p = run(["--kernel", HELLO], env={"VMM_HOST_CACHE": cache, "VMM_HOST_OFFLINE": "1",
                                      "VMM_HOST_KERNEL_PACKAGE": "linux-image-no-such-kernel"})
    lines = p.stderr.splitlines()
    check("no-kernel", p.returncode == 14, f"exit {p.returncode}, expected 14")
    check("no-kernel", len(lines) == 1 and "linux-image-no-such-kernel" in lines[0],
          "one line naming the kernel package")

for f in fails:
    print("FAIL:", f)
print("PASS" if not fails else "")
sys.exit(1 if fails else 0)
