"""Section multiqueue: what queues buy, MSI-X against INTx. virtio-blk
QD32 4 KiB reads with 1 and 2 request queues (ours: 1 queue; 2 on the
default one I/O thread; 2 on 2 I/O threads) beside QEMU num-queues=1/2;
and virtio-net transmit, 1514-byte frames, 32 in flight, over 1 and 2
queue pairs, each side on a tap in a network namespace of its own."""
import os
import shlex
import shutil

from vmmtools.report import table

from . import proc, vbench
from .figures import fmt, mode_name, ratio, summary_row, us

TITLE = "virtio-blk with 1 and 2 request queues, MSI-X vs INTx, ours vs QEMU"
CONFIGS = [  # (key, label, queues, extra VMM flags, QEMU runs it too)
    ("q1", "1 queue", 1, [], True),
    ("q2", "2 queues, 1 I/O thread (default)", 2, [], True),
    ("q2-io2", "2 queues, 2 I/O threads", 2, ["--io-threads", "2"], False),
]
MODES = ("msix", "intx")
WHOS = ("ours", "qemu", "ours-net", "qemu-net")
METHOD = ("guests/vbench vbench.tests=blkmq: QD32 4 KiB random reads, O_DIRECT disk; with 2 "
          "queues slot i goes on queue i % 2, each queue on its own MSI-X entry (INTx: one "
          "pin), one notify per queue per batch; the guest has one vCPU. QEMU 7.2 serves every "
          "queue from its main loop (no iothread)")
NET_METHOD = ("guests/vbench vbench.tests=nettx: 1514-byte broadcast frames (header + frame in "
              "one descriptor), 32 in flight spread over the transmit queues, each on its own "
              "MSI-X entry (INTx: one pin), no receive buffers; ours: --net tap=vbench0,queues=N "
              "made by the VMM in a network namespace of its own (unshare --net); QEMU: -netdev "
              "tap,queues=N,vhost=off and virtio-net-pci mq=on on a tap made (multi_queue) and "
              "brought up by ip(8) in a namespace of its own")
# The two halves: where their rows go, their test, how a queue is named,
# the summary's figures and units.
BLK = {"key": "results", "suffix": "", "test": "blk-read-4k-mq", "queue": "queue",
       "vs_key": "vs_one_queue", "unit": "req/s", "rate": "requests/s", "per": "request",
       "figure": "virtio-blk 4 KiB read QD32, {label}, {mode}: requests/s",
       "vs": "virtio-blk QD32 {mode}: {label} vs 1 queue (ours)"}
NET = {"key": "net_results", "suffix": "-net", "test": "net-tx-1514", "queue": "queue pair",
       "vs_key": "vs_one_pair", "unit": "frames/s", "rate": "frames/s", "per": "frame",
       "figure": "virtio-net transmit 1514 B, 32 in flight, {label}, {mode}: frames/s",
       "vs": "virtio-net transmit {mode}: {label} vs 1 queue pair (ours)"}


def configs(b):
    """--quick: 1 and 2 queues on the default threads only (a smoke run)."""
    return CONFIGS[:2] if b.quick else CONFIGS


def steps(b):
    cfgs = configs(b)
    return b.rounds * 2 * (2 * len(cfgs) + 2 * sum(1 for c in cfgs if c[4]))


def blk_cmdline(b, mode, queues):
    return (f"vbench.mode={mode} vbench.tests=blkmq vbench.blk_queues={queues} "
            f"vbench.qdn={b.qdn} vbench.blk_depth=32")


def net_cmdline(b, mode, queues):
    return (f"vbench.mode={mode} vbench.tests=nettx vbench.net_queues={queues} "
            f"vbench.qdn={b.qdn} vbench.blk_depth=32")


def ours_flags(mode, cfg):
    return cfg[3] + (["--irq-mode", "intx"] if mode == "intx" else [])


def ours_blk_cmd(b, mode, disk, cfg):
    queues = cfg[2]
    return [b.vmm, "--kernel", b.vbench_guest, "--memory", str(b.mem_mib),
            "--disk", f"{disk},direct,queues={queues}", "--timeout", "600", "--stats"] + \
        ours_flags(mode, cfg) + ["--cmdline", blk_cmdline(b, mode, queues)]


def qemu_blk_cmd(b, mode, disk, cfg):
    queues = cfg[2]
    v = ",vectors=0" if mode == "intx" else ""
    return vbench.qemu_cmd(b, vbench.qemu_drive(b, disk) + [
        "-device", f"virtio-blk-pci,drive=d0,disable-legacy=on,num-queues={queues}{v}"],
        blk_cmdline(b, mode, queues))


def ours_net_cmd(b, mode, cfg):
    queues = cfg[2]
    return ["unshare", "--net", b.vmm, "--kernel", b.vbench_guest, "--memory",
            str(b.mem_mib), "--net", f"tap=vbench0,queues={queues}", "--timeout", "600",
            "--stats"] + ours_flags(mode, cfg) + ["--cmdline", net_cmdline(b, mode, queues)]


def qemu_net_cmd(b, mode, cfg):
    # QEMU opens a tap it is given; it neither makes a multiqueue one nor
    # brings it up, so ip(8) does both inside the same kind of namespace.
    # Without vhost (the VMM has none): QEMU's own tap backend, one
    # queue pair per tap queue; vectors as Linux wants them for mq:
    # 2 per pair + control queue + configuration.
    queues = cfg[2]
    dev = "virtio-net-pci,netdev=n0,disable-legacy=on"
    if queues > 1:
        dev += ",mq=on"
    dev += ",vectors=0" if mode == "intx" else f",vectors={2 * queues + 2}"
    qemu = vbench.qemu_cmd(b, [
        "-netdev", f"tap,id=n0,ifname=vbench0,script=no,downscript=no,queues={queues},"
        "vhost=off", "-device", dev], net_cmdline(b, mode, queues))
    mq = " multi_queue" if queues > 1 else ""
    script = (f"ip tuntap add dev vbench0 mode tap{mq} && ip link set vbench0 up && "
              f"exec {' '.join(shlex.quote(a) for a in qemu)}")
    return ["unshare", "--net", "sh", "-c", script]


def net_unavailable():
    """Why no tap can be made here (needs root), or None."""
    if os.geteuid() != 0:
        return "needs root (a tap in a network namespace of its own)"
    if not os.path.exists("/dev/net/tun"):
        return "no /dev/net/tun"
    if not shutil.which("unshare"):
        return "no unshare(1) (util-linux)"
    return None


def qemu_net_unavailable(b):
    if not b.qemu:
        return "qemu-system-x86_64 not installed"
    if not shutil.which("ip"):
        return "no ip(8) (iproute2) to make QEMU's tap"
    return None


def command(b, who, mode, disk, cfg):
    if who == "ours-net":
        return ours_net_cmd(b, mode, cfg)
    if who == "qemu-net":
        return qemu_net_cmd(b, mode, cfg)
    return (ours_blk_cmd if who == "ours" else qemu_blk_cmd)(b, mode, disk, cfg)


def run_one(b, who, cfg, mode, rnd, disk):
    """One run; (its record for results.json, its result lines or None)."""
    cmd, rc, out, err, ok = vbench.run_logged(
        b, lambda: command(b, who, mode, disk, cfg),
        f"multiqueue-{who}-{cfg[0]}-{mode}-{rnd}.log")
    rec = {"who": who, "config": cfg[0], "mode": mode, "round": rnd, "command": cmd,
           "exit_code": rc, "ok": ok}
    if not who.startswith("qemu"):
        rec["queue_stats"] = vbench.queue_stats(err)
    if not ok:
        rec["output_tail"] = proc.tail(out + "\n" + err)
    return rec, vbench.parse(out) if ok else None


def run_rounds(b, disk, sec, skips):
    """Every round and configuration, each side; (result lines by (who,
    config, mode), the runs that failed)."""
    collected, failed = {}, []
    for rnd in range(1, b.rounds + 1):
        for mode in MODES:
            for cfg in configs(b):
                for who in WHOS:
                    if who.startswith("qemu") and not cfg[4]:
                        continue
                    b.step(f"multiqueue: {who} {cfg[0]} {mode} round {rnd}/{b.rounds}")
                    if b.kvm_skip or skips[who]:
                        continue
                    rec, results = run_one(b, who, cfg, mode, rnd, disk)
                    if results is None:
                        failed.append(f"{who} {cfg[0]} {mode} round {rnd}")
                    else:
                        collected.setdefault((who, cfg[0], mode), []).extend(results)
                    sec["runs"].append(rec)
    return collected, failed


def results(collected, cfgs, half):
    """One half's rows: per mode and configuration ours and QEMU (with
    the same queue count), the ratio, and ours against ours with one queue."""
    out = []
    for mode in MODES:
        for key, label, queues, _, _ in cfgs:
            row = {"config": key, "label": label.replace("queue", half["queue"]),
                   "queues": queues, "mode": mode}
            for who in ("ours", "qemu"):
                qkey = key if who == "ours" else ("q1" if queues == 1 else "q2")
                x = vbench.combine(collected.get((who + half["suffix"], qkey, mode), []),
                                   half["test"], None)
                if x:
                    x["irqs_per_request"] = round(x["irqs"] / max(1, x["latency"]["count"]), 4)
                row[who] = x
            o, q = row["ours"], row["qemu"]
            row["ratio_rps"] = ratio(o and o["rps_median"], q and q["rps_median"])
            out.append(row)
    base = {r["mode"]: r["ours"] for r in out if r["config"] == "q1"}
    for r in out:
        one = base.get(r["mode"])
        r[half["vs_key"]] = ratio(r["ours"] and r["ours"]["rps_median"],
                                  one and one["rps_median"])
    return out


def set_status(b, sec, collected, failed):
    if b.kvm_skip:
        sec["status"], sec["note"] = "skipped", b.kvm_skip
        return
    sec["status"] = "ok" if not failed else "partial" if collected else "error"
    if failed:
        sec["failed_runs"] = failed
    if not b.qemu and sec["status"] == "ok":
        sec["status"], sec["qemu_note"] = "partial", "qemu-system-x86_64 not installed"


def run(b, disk):
    cfgs = configs(b)
    sec = {"status": None, "rounds": b.rounds, "requests": b.qdn, "depth": 32,
           "configs": {k: {"label": lb, "queues": q, "vmm_flags": x, "qemu": qm}
                       for k, lb, q, x, qm in cfgs},
           "method": METHOD, "runs": [], "results": [], "net_method": NET_METHOD}
    net_skip = net_unavailable()
    qemu_net_skip = net_skip or qemu_net_unavailable(b)
    if net_skip:
        sec["net_note"] = "skipped: " + net_skip
    elif qemu_net_skip:
        sec["net_note"] = "QEMU skipped: " + qemu_net_skip
    skips = {"ours": None, "qemu": None if b.qemu else "no QEMU", "ours-net": net_skip,
             "qemu-net": qemu_net_skip}
    collected, failed = run_rounds(b, disk, sec, skips)
    sec["results"] = results(collected, cfgs, BLK)
    sec["net_results"] = results(collected, cfgs, NET)
    set_status(b, sec, collected, failed)
    return sec


def half_rows(sec, half, status):
    out = []
    all_rows = sec.get(half["key"], [])
    for row in all_rows:
        o, q = row["ours"], row["qemu"]
        mode = mode_name(row["mode"])
        qname = f"QEMU -M pc, {row['queues']} {half['queue']}{'s' if row['queues'] > 1 else ''}"
        out.append(summary_row(
            "multiqueue", half["figure"].format(label=row["label"], mode=mode),
            o and o["rps_median"], qname, q and q["rps_median"], row["ratio_rps"], "", None,
            True, None if o else status, half["unit"]))
        if row["config"] == "q1":
            continue
        one = next((r["ours"] for r in all_rows if r["config"] == "q1" and
                    r["mode"] == row["mode"]), None)
        out.append(summary_row(
            "multiqueue", half["vs"].format(label=row["label"], mode=mode),
            o and o["rps_median"], f"ours, 1 {half['queue']}", one and one["rps_median"],
            row[half["vs_key"]], "", None, True, None if o else status, half["unit"]))
    return out


def rows(sec):
    return half_rows(sec, BLK, sec["status"]) + \
        half_rows(sec, NET, sec.get("net_note", sec["status"]))


def half_table(sec, half):
    lines = []
    for row in sec.get(half["key"], []):
        for side in ("ours", "qemu"):
            x = row.get(side)
            if x:
                lines.append([row["label"], row["mode"], side, fmt(x["rps_median"]),
                              f"{x['irqs_per_request']:.3f}", x["latency"]["count"]] +
                             us(x["latency"], ("p50", "p90", "p99")))
    return table(["configuration", "mode", "side", half["rate"], f"interrupts/{half['per']}",
                  "count", "p50", "p90", "p99 (µs)"], "lllrrrrrr", lines)


def details(sec):
    note = f" {sec['net_note']}." if sec.get("net_note") else ""
    return half_table(sec, BLK) + ["", "virtio-net transmit: " + sec["net_method"] + "." + note,
                                   ""] + half_table(sec, NET) + vbench.failed_line(sec)
