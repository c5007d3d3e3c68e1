"""guests/vbench runs, which the virtio, exit_costs, multiqueue and
footprint sections share: QEMU's command line, a run with its log in raw/,
reading vbench's result lines and the VMM's per-queue --stats lines, the
figure of several rounds, and the latency table of summary.md."""
import re

from vmmtools.report import table

from . import proc
from .figures import fmt, median, stats, us

RESULT = re.compile(r"vbench: result (.*)$")
QUEUE_STATS = re.compile(r"vmm: stats: virtio-(blk|net)0 queue \d")
LAT_KEYS = ("min", "p50", "p90", "p99", "max", "mean")


def qemu_cmd(b, devices, cmdline, machine="pc"):
    """QEMU with one vCPU, the same memory as ours, nothing by default,
    the console on stdout and the debug-exit port vbench ends with;
    `devices` (more options) and vbench with `cmdline`."""
    return [b.qemu, "-accel", "kvm", "-M", machine, "-m", str(b.mem_mib), "-smp", "1",
            "-nodefaults", "-no-user-config", "-display", "none", "-serial", "stdio",
            "-no-reboot", "-device", "isa-debug-exit,iobase=0xf4,iosize=4"] + devices + [
            "-kernel", b.vbench_guest, "-append", cmdline]


def qemu_drive(b, disk):
    return ["-drive", f"file={disk},if=none,id=d0,format=raw,cache=none,aio={b.qemu_aio}"]


def run_logged(b, build, log_name, qemu=False):
    """Runs vbench (under either VMM) with the command build() makes;
    (command, exit code, stdout, stderr, ok), the log in raw/. ok:
    debug-exit 0 and vbench's "done" line. A QEMU without io_uring gets
    the run again with aio=native (and so does every later QEMU run)."""
    cmd = build()
    rc, out, err = proc.run(cmd, 900)
    if qemu and rc != 1 and "io_uring" in err and b.qemu_aio == "io_uring":
        b.qemu_aio = "native"
        cmd = build()
        rc, out, err = proc.run(cmd, 900)
    b.write_log(log_name, cmd, out, err)
    return cmd, rc, out, err, rc == 1 and "vbench: done" in out


def parse(out):
    """vbench's "vbench: result k=v ..." lines: one dict each, numbers as
    int, lat_ns as {min, p50, p90, p99, max, mean}."""
    res = []
    for line in out.splitlines():
        m = RESULT.match(line.strip())
        if not m:
            continue
        kv = dict(x.split("=", 1) for x in m.group(1).split())
        lat = [int(x) for x in kv.pop("lat_ns").split(",")]
        r = {k: (v if k in ("test", "mode") else int(v)) for k, v in kv.items()}
        r["lat_ns"] = dict(zip(LAT_KEYS, lat))
        res.append(r)
    return res


def queue_stats(err):
    """The VMM's --stats lines of each virtio-blk0 / virtio-net0 queue."""
    return [line for line in err.splitlines() if QUEUE_STATS.match(line)]


def combine(runs, test, qd_key):
    """The same figure from several rounds: each statistic's median over
    rounds; count = requests (or samples) summed."""
    rows = [r for r in runs if r["test"] == test and (qd_key is None or r["qd"] == qd_key)]
    if not rows:
        return None
    n = sum(r.get("requests", r.get("samples", 0)) for r in rows)
    lat = {k: median([r["lat_ns"][k] for r in rows]) for k in rows[0]["lat_ns"]}
    lat.update(unit="ns", count=n, rounds=len(rows))
    out = {"latency": lat}
    if "elapsed_ns" in rows[0]:
        rps = [r["requests"] / (r["elapsed_ns"] / 1e9) for r in rows if r["elapsed_ns"]]
        out["rps"] = stats(rps, "requests/s")
        out["rps_median"] = median(rps)
        out["qd"] = rows[0]["qd"]
        out["irqs"] = sum(r["irqs"] for r in rows)
        out["spurious"] = sum(r["spurious"] for r in rows)
        out["errors"] = sum(r["errors"] for r in rows)
    return out


def latency_table(figures):
    """summary.md's table of (name, row) figures, ours and QEMU each."""
    rows = []
    for name, row in figures:
        for side in ("ours", "qemu"):
            x = row.get(side)
            if not x:
                rows.append([name, side, "—", "", "", "", "", "", ""])
                continue
            lat = x["latency"]
            rps = fmt(x["rps_median"]) if "rps_median" in x else ""
            rows.append([name, side, rps, lat["count"]] +
                        us(lat, ("min", "p50", "p90", "p99", "max")))
    return table(["figure", "side", "requests/s", "count", "min", "p50", "p90", "p99",
                  "max (µs)"], "llrrrrrrr", rows)


def failed_line(sec):
    """The "Failed runs" paragraph, when there were any."""
    if not sec.get("failed_runs"):
        return []
    return ["", "Failed runs: " + ", ".join(sec["failed_runs"]) + " (logs in raw/)."]
