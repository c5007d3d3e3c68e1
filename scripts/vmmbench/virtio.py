"""Sections virtio and exit_costs, from the same guests/vbench runs under
the VMM and under QEMU -M pc: virtio-rng and virtio-blk request rates and
latencies at QD1 and QDn, MSI-X and INTx; and port-I/O, MMIO and
ioeventfd-notify exit round trips (TSC, CPL 3)."""
from . import proc, vbench
from .figures import mode_name, ratio, summary_row

TITLE = "virtio-rng / virtio-blk as the guest sees it, ours vs QEMU"
EXITS_TITLE = "Exit costs from the guest (CPL 3, TSC), ours vs QEMU"
TESTS = [("rng-64b", "virtio-rng 64 B"), ("blk-read-4k", "virtio-blk 4 KiB read")]
EXIT_TESTS = [("exit-pio", "port-I/O exit (COM1 scratch read)"),
              ("exit-mmio", "MMIO exit (virtio common-config read)"),
              ("exit-notify", "virtio notify write (ioeventfd)")]
MODES = ("msix", "intx")
NOTE = ("rng's high depth is 8 on both sides: QEMU's virtio-rng queue has 8 entries. Each "
        "statistic is the median over rounds; rounds alternate ours and QEMU.")
EXITS_METHOD = ("TSC around one instruction at CPL 3 in guests/vbench (rdtsc; instruction; "
                "rdtsc), MSI-X runs; notify = a 16-bit write of the queue index to "
                "virtio-blk's notify address with nothing new in the ring")


def steps(b):
    return b.rounds * 2 * 2


def cmdline(b, mode):
    return (f"vbench.mode={mode} vbench.qd1={b.qd1} vbench.qdn={b.qdn} "
            f"vbench.exits={b.exits} vbench.blk_depth=32 vbench.rng_depth=8")


def ours_cmd(b, mode, disk):
    cmd = [b.vmm, "--kernel", b.vbench_guest, "--memory", str(b.mem_mib),
           "--rng", "--disk", f"{disk},direct", "--timeout", "600",
           "--cmdline", cmdline(b, mode)]
    if mode == "intx":
        cmd[3:3] = ["--irq-mode", "intx"]
    return cmd


def qemu_cmd(b, mode, disk):
    v = ",vectors=0" if mode == "intx" else ""
    return vbench.qemu_cmd(b, ["-device", f"virtio-rng-pci,disable-legacy=on{v}"] +
                           vbench.qemu_drive(b, disk) +
                           ["-device", f"virtio-blk-pci,drive=d0,disable-legacy=on{v}"],
                           cmdline(b, mode))


def run_one(b, who, mode, disk, rnd):
    """One vbench run; (its record for results.json, its result lines)."""
    build = ours_cmd if who == "ours" else qemu_cmd
    cmd, rc, out, err, ok = vbench.run_logged(b, lambda: build(b, mode, disk),
                                              f"vbench-{who}-{mode}-{rnd}.log", who == "qemu")
    rec = {"who": who, "mode": mode, "round": rnd, "command": cmd, "exit_code": rc, "ok": ok}
    if not ok:
        rec["output_tail"] = proc.tail(out + "\n" + err)
    return rec, vbench.parse(out)


def run_rounds(b, disk, sec):
    """Every round, ours and QEMU alternating; (result lines by (who,
    mode), the runs that failed)."""
    collected = {(w, m): [] for w in ("ours", "qemu") for m in MODES}
    failed = []
    for rnd in range(1, b.rounds + 1):
        for mode in MODES:
            for who in ("ours", "qemu"):
                b.step(f"virtio: {who} {mode} round {rnd}/{b.rounds}")
                if b.kvm_skip or (who == "qemu" and not b.qemu):
                    continue
                rec, results = run_one(b, who, mode, disk, rnd)
                sec["runs"].append(rec)
                if rec["ok"]:
                    collected[(who, mode)].extend(results)
                else:
                    failed.append(f"{who} {mode} round {rnd}")
    return collected, failed


def virtio_results(collected, whos):
    out = []
    for mode in MODES:
        for test, label in TESTS:
            qds = sorted({r["qd"] for w in whos for r in collected[(w, mode)]
                          if r["test"] == test})
            for qd in qds:
                row = {"test": test, "label": label, "mode": mode, "qd": qd}
                for who in ("ours", "qemu"):
                    row[who] = vbench.combine(collected[(who, mode)], test, qd)
                o, q = row["ours"], row["qemu"]
                row["ratio_rps"] = ratio(o and o["rps_median"], q and q["rps_median"])
                row["ratio_p50"] = ratio(o and o["latency"]["p50"], q and q["latency"]["p50"])
                out.append(row)
    return out


def exit_results(collected):
    out = {}
    for test, label in EXIT_TESTS:
        row = {"label": label}
        for who in ("ours", "qemu"):
            row[who] = vbench.combine(collected[(who, "msix")], test, None)
        o, q = row["ours"], row["qemu"]
        row["ratio_p50"] = ratio(o and o["latency"]["p50"], q and q["latency"]["p50"])
        out[test] = row
    return out


def set_status(b, sec, exits, failed):
    if b.kvm_skip:
        sec["status"] = exits["status"] = "skipped"
        sec["note"] = exits["note"] = b.kvm_skip
        return
    st = "ok" if not failed else "partial" if sec["results"] else "error"
    sec["status"] = exits["status"] = st
    if failed:
        sec["failed_runs"] = exits["failed_runs"] = failed
    if not b.qemu:
        sec["status"] = exits["status"] = "partial"
        sec["qemu_note"] = exits["qemu_note"] = "qemu-system-x86_64 not installed"


def run(b, disk):
    """(the virtio section, the exit_costs section)."""
    sec = {"status": None, "rounds": b.rounds, "qd1_requests": b.qd1,
           "qdn_requests": b.qdn, "blk_depth": 32, "rng_depth": 8,
           "guest": "guests/vbench (the same ELF under both: 64-bit entry / PVH note)",
           "memory_mib": b.mem_mib, "disk_mib": b.disk_mib, "note": NOTE, "runs": [],
           "results": []}
    exits = {"status": None, "samples": b.exits, "results": {}}
    collected, failed = run_rounds(b, disk, sec)
    sec["results"] = virtio_results(collected, ["ours"] + (["qemu"] if b.qemu else []))
    exits["results"] = exit_results(collected)
    set_status(b, sec, exits, failed)
    sec["qemu_aio"] = b.qemu_aio
    exits["method"] = EXITS_METHOD
    return sec, exits


def rows(sec):
    out = []
    for row in sec["results"]:
        o, q = row["ours"], row["qemu"]
        name = f"{row['label']}, QD{row['qd']}, {mode_name(row['mode'])}"
        r = row["ratio_rps"]
        out.append(summary_row(
            "virtio", f"{name}: requests/s", o and o["rps_median"], "QEMU -M pc",
            q and q["rps_median"], r, "≥ 1.0× QEMU", None if r is None else r >= 1.0, True,
            None if o else sec["status"], "req/s"))
        out.append(summary_row(
            "virtio", f"{name}: latency p50", o and o["latency"]["p50"] / 1e3, "QEMU -M pc",
            q and q["latency"]["p50"] / 1e3, row["ratio_p50"], "", None, True, None, "µs"))
    return out


def exit_rows(sec):
    out = []
    for test, label in EXIT_TESTS:
        row = sec["results"].get(test, {})
        o, q = row.get("ours"), row.get("qemu")
        out.append(summary_row(
            "exit_costs", f"{label}, p50", o and o["latency"]["p50"] / 1e3, "QEMU -M pc",
            q and q["latency"]["p50"] / 1e3, row.get("ratio_p50"), "", None, True,
            None if o else sec["status"], "µs"))
    return out


def details(sec):
    return vbench.latency_table((f"{r['label']}, QD{r['qd']}, {r['mode']}", r)
                                for r in sec["results"]) + vbench.failed_line(sec)


def exit_details(sec):
    return vbench.latency_table((r["label"], r) for r in sec["results"].values()) + \
        vbench.failed_line(sec)
