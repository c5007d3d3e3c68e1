"""Cells on the emulated KVM host (boxes without a usable /dev/kvm).

A cell's network namespace and tap, its console FIFO and the VMM must all
belong to one kernel, so where ./vmm would move to the emulated host, the
whole cell runs there: the runner (here) writes the cell, its index and
the context to CELLDIR/job.pickle and runs this file on a host of the pool
(scripts/vmm-host exec), which runs cellrun.run_cell and writes
CELLDIR/result.json. Kernels, initramfs and disks are made here, natively,
before; only the boot and its checks run there. Cells run in parallel go to
different hosts of the pool (one per box CPU).

    remote.py JOB RESULT     (what runs on the emulated host)
"""
import json
import os
import pickle
import subprocess
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from vmmci import cellrun, consolelog  # noqa: E402

VMM_HOST = os.path.join(os.path.dirname(HERE), "vmm-host")


class _NoSession:
    wall = 0.0


def failed_result(cell, ctx, why):
    """A cell result whose one check says why the cell did not run."""
    e = cellrun.cell_expectations(cell, ctx.emulated, ctx.net_reason, "none")
    c, stats, _ = consolelog.evaluate("", "", "", None, e)
    checks = [consolelog.Check("runner", consolelog.FAIL, why, "host")]
    result = cellrun.cell_result(cell, e, c, stats, checks, None, _NoSession(), {}, "", [])
    result["stop"] = consolelog.stop_cause(c, "", None).to_dict()
    return result


def run_cell_there(cell, index, ctx):
    """cellrun.run_cell(cell, index, ctx), on a host of the pool."""
    cdir = os.path.join(ctx.out, "cells", cell.id)
    os.makedirs(cdir, exist_ok=True)
    job, res = os.path.join(cdir, "job.pickle"), os.path.join(cdir, "result.json")
    if os.path.exists(res):
        os.unlink(res)
    there = dict(vars(ctx), remote=False)  # plain data: vmm-ci's Context is its __main__'s
    with open(job, "wb") as f:
        pickle.dump((cell, index, there), f)
    python = os.path.realpath(sys.executable)
    env = dict(os.environ, PATH=os.path.dirname(python) + os.pathsep + os.environ["PATH"])
    p = subprocess.run([VMM_HOST, "exec", "--", python, os.path.abspath(__file__), job, res],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env)
    os.unlink(job)
    if p.returncode == 0 and os.path.exists(res):
        with open(res) as f:
            return json.load(f)
    tail = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
    # The cell's files, as a cell that ran leaves them: what was said, no console.
    for name, text in (("console.log", p.stdout), ("hvc0.log", ""), ("vmm.stderr", p.stderr)):
        with open(os.path.join(cdir, name), "w") as f:
            f.write(text)
    return failed_result(cell, ctx, f"the cell did not run on the emulated host: {tail}")


def main(job, res):
    with open(job, "rb") as f:
        cell, index, fields = pickle.load(f)
    ctx = types.SimpleNamespace(**fields)
    ctx.net_reason = cellrun.net_unavailable_reason()  # this host's tun and ip
    result = cellrun.run_cell(cell, index, ctx)
    tmp = res + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.rename(tmp, res)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
