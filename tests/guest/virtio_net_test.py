#!/usr/bin/env python3
"""virtio-net around vmm_test.py, in a network namespace of its own.

Usage:
  virtio_net_test.py [--tap vt0] [--queues N] -- RUNNER RUNNER-OPTIONS... -- VMM-ARGS...

Creates a namespace (ip netns add), runs the runner inside it (ip netns exec)
with "--net tap=TAP" added to the VMM arguments, and, also inside it, a peer
(this script with --peer) that waits for the tap, brings it up and talks to
the guest (guests/virtiotest/net.c) over an AF_PACKET socket, EtherType 0x88b5:
  - it waits for the guest's broadcast frame, payload "virtiotest: frame from guest";
  - then injects, every 200 ms until stopped, a frame to the guest's MAC with the
    payload "virtiotest: frame from host NONCE" (NONCE random per run), which the
    runner must find on the console as
    virtiotest: net received host frame: "virtiotest: frame from host NONCE".
The namespace is deleted on every way out (normal end, failure, SIGINT/SIGTERM).
Needs root, ip(8) and /dev/net/tun; without them it exits 77 (skipped) and says why.
Where this box's /dev/kvm is unusable, it runs whole on the emulated KVM host
(scripts/vmm-host), whose kernel then holds the namespace and the tap.
"""
import argparse
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "scripts"))
from vmmtools import emuhost  # noqa: E402

ETHERTYPE = 0x88B5
GUEST_PAYLOAD = b"virtiotest: frame from guest"
HOST_PREFIX = "virtiotest: frame from host"
PACKET_OUTGOING = 4
HOST_MAC = bytes.fromhex("020000000001")


def mac_str(b):
    return ":".join(f"{x:02x}" for x in b)


# ---- the peer, inside the namespace ----

def peer(tap, nonce, timeout):
    # SIGTERM (the driver is done) only ends the loops: the summary and the
    # exit status below must not be cut short by it.
    stop = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.append(signum))
    deadline = time.monotonic() + timeout
    while not stop and not os.path.exists(f"/sys/class/net/{tap}"):
        if time.monotonic() > deadline:
            print(f"peer: FAIL: {tap} never appeared", flush=True)
            return 1
        time.sleep(0.05)
    if stop:
        print(f"peer: stopped before {tap} appeared", flush=True)
        return 1
    v6 = f"/proc/sys/net/ipv6/conf/{tap}/disable_ipv6"
    if os.path.exists(v6):
        with open(v6, "w") as f:  # keep the host stack's IPv6 chatter off the tap
            f.write("1")
    subprocess.run(["ip", "link", "set", tap, "up"], check=True)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETHERTYPE))
    s.bind((tap, ETHERTYPE))
    s.settimeout(0.2)
    print(f"peer: {tap} up, listening for EtherType 0x{ETHERTYPE:04x}", flush=True)
    got_guest, sent = None, 0
    while not stop and time.monotonic() < deadline:
        if got_guest is None:
            try:
                data, addr = s.recvfrom(65536)
            except socket.timeout:
                continue
            if addr[2] == PACKET_OUTGOING or len(data) < 14:
                continue
            dst, src, etype = data[0:6], data[6:12], int.from_bytes(data[12:14], "big")
            payload = data[14:14 + len(GUEST_PAYLOAD)]
            ok = dst == b"\xff" * 6 and etype == ETHERTYPE and payload == GUEST_PAYLOAD
            print(f"peer: frame from {mac_str(src)} to {mac_str(dst)}, type 0x{etype:04x}, "
                  f"{len(data)} bytes, payload {data[14:60].rstrip(bytes(1))!r}: "
                  f"{'the guest frame' if ok else 'not the guest frame'}", flush=True)
            if ok:
                got_guest = src
            continue
        frame = got_guest + HOST_MAC + ETHERTYPE.to_bytes(2, "big") + \
            f"{HOST_PREFIX} {nonce}".encode()
        frame += bytes(max(0, 60 - len(frame)))
        try:
            s.send(frame)
            sent += 1
        except OSError as e:  # the VMM exited and took the tap with it
            print(f"peer: send: {e}", flush=True)
            break
        time.sleep(0.2)
    print(f"peer: guest frame {'seen from ' + mac_str(got_guest) if got_guest else 'NOT seen'}, "
          f"{sent} host frames injected", flush=True)
    return 0 if got_guest and sent else 1


# ---- the driver, outside ----

def skip(why):
    print(f"SKIP: {why}")
    return 77


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tap", default="vt0")
    ap.add_argument("--queues", type=int, default=1,
                    help="queue pairs: ',queues=N' on --net (the guest's key is the caller's)")
    ap.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--nonce", default="", help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=float, default=90)
    ap.add_argument("rest", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    if a.peer:
        rc = peer(a.tap, a.nonce, a.timeout)
        # No interpreter shutdown, during which a late SIGTERM from the
        # driver would kill the peer with the default action.
        sys.stdout.flush()
        os._exit(rc)

    rest = a.rest[1:] if a.rest and a.rest[0] == "--" else a.rest
    if len(rest) < 2 or "--" not in rest[1:]:
        ap.error("expected: -- RUNNER RUNNER-OPTIONS... -- VMM-ARGS...")
    sep = rest.index("--", 1)
    runner, runner_opts, vmm_args = rest[0], rest[1:sep], rest[sep + 1:]
    # The tap and the namespace belong to the kernel the VMM runs on: on a
    # box without a usable /dev/kvm, all of this runs on the emulated host.
    emuhost.run_inside_if_needed()

    if os.geteuid() != 0:
        return skip("needs root: ip netns add and a tap device need CAP_NET_ADMIN")
    if not shutil.which("ip"):
        return skip("no ip(8) (iproute2) on PATH")
    if not os.path.exists("/dev/net/tun"):
        return skip("no /dev/net/tun (tun module not loaded?)")

    nonce = secrets.token_hex(4)
    ns = f"virtiotest-{os.getpid()}"
    procs = []

    def on_signal(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    r = subprocess.run(["ip", "netns", "add", ns], capture_output=True, text=True)
    if r.returncode != 0:
        return skip(f"ip netns add {ns} failed: {r.stderr.strip()}")
    try:
        in_ns = ["ip", "netns", "exec", ns]
        peer_p = subprocess.Popen(in_ns + [sys.executable, os.path.abspath(__file__), "--peer",
                                           "--tap", a.tap, "--nonce", nonce,
                                           "--timeout", str(a.timeout)])
        procs.append(peer_p)
        want = (f'^virtiotest: net received host frame: "{HOST_PREFIX} {nonce}"')
        cmd = in_ns + [sys.executable, runner] + runner_opts + [
            "--stdout=" + want, "--"] + vmm_args + [
                "--net", f"tap={a.tap}" + (f",queues={a.queues}" if a.queues > 1 else "")]
        print(f"namespace {ns}, nonce {nonce}", flush=True)
        runner_p = subprocess.Popen(cmd)
        procs.append(runner_p)
        try:
            rc = runner_p.wait(timeout=a.timeout + 30)
        except subprocess.TimeoutExpired:
            print("FAIL: the runner did not finish")
            rc = 1
        # The peer ends by itself once the VMM's exit took the tap away;
        # SIGTERM only if it is still waiting for a guest frame.
        try:
            peer_rc = peer_p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            peer_p.send_signal(signal.SIGTERM)
            try:
                peer_rc = peer_p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                peer_rc = 1
        if rc == 77:
            return 77
        if peer_rc != 0:
            print(f"FAIL: the peer did not see the guest's frame or could not inject its own "
                  f"(peer exit status {peer_rc})")
            return 1
        return rc
    finally:
        # Whatever still runs in the namespace was started by this script.
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
        for pid in pids.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ValueError, OSError):
                pass
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        r = subprocess.run(["ip", "netns", "del", ns], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"warning: ip netns del {ns}: {r.stderr.strip()}")
        elif re.search(rf"^{re.escape(ns)}\b", subprocess.run(["ip", "netns", "list"],
                       capture_output=True, text=True).stdout, re.M):
            print(f"warning: namespace {ns} still listed")


if __name__ == "__main__":
    sys.exit(main())
