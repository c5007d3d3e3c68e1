"""The user's own commands in a cell (vmm-ci --run / --run-file / --include):
their output from the console markers /init writes (guests/linux/ci-init.sh:
"VMMCI: run N start|stdout LINE|stderr LINE|end"), their exit status from the
VMM's stderr, where the guest status port (devices/legacy/guest_status.h) reports
it: "vmm: info: guest status: command N ended with status S[ (stopped by its
timeout)]". A command's own output cannot fake its status: the console is
not read for it."""
import re
from dataclasses import dataclass, field

STATUS = re.compile(r"vmm: info: guest status: command (\d+) ended with status (\d+)"
                    r"( \(stopped by its timeout\))?")
RUN = re.compile(r"VMMCI: run (\d+) (start|end|stdout|stderr)(?: (.*))?$")


@dataclass
class Run:
    started: bool = False
    ended: bool = False
    stdout: list = field(default_factory=list)
    stderr: list = field(default_factory=list)
    status: object = None  # int, from the status port
    timed_out: bool = False


def parse_runs(console_lines, stderr_text):
    """{N: Run} from the console's (ts, text) lines and the VMM's stderr."""
    runs = {}
    for _, body in console_lines:
        m = RUN.match(body)  # at the line's start: not inside a command's output line
        if not m:
            continue
        r = runs.setdefault(int(m.group(1)), Run())
        what = m.group(2)
        if what == "start":
            r.started = True
        elif what == "end":
            r.ended = True
        else:
            getattr(r, what).append(m.group(3) or "")
    # /init runs the commands one after the other and reports each once:
    # a status counts only for the next command in order, one that started
    # (issue 26: command 1 once reported statuses for 2-4, which then passed
    # without running). Anything else is ignored.
    want = 1
    for line in stderr_text.splitlines():
        if not (m := STATUS.match(line)):
            continue
        n = int(m.group(1))
        r = runs.get(n)
        if n != want or r is None or not r.started or r.status is not None:
            continue
        r.status, r.timed_out = int(m.group(2)), bool(m.group(3))
        want += 1
    return runs


def command_checks(commands, runs, e, timeout, check_type, fail, passed, skip):
    """One check per command, named run-N: passed (status 0), failed (status
    S, or its timeout), or skipped where userspace cannot run here."""
    out = []
    for i, cmd in enumerate(commands, 1):
        name = f"run-{i}"
        if not e.userspace:
            out.append(check_type(name, skip, f"`{cmd}`: skipped: needs hardware-assisted KVM "
                                  f"({e.userspace_skip})", "user"))
            continue
        r = runs.get(i, Run())
        text = dict(stdout="\n".join(r.stdout), stderr="\n".join(r.stderr))
        if r.status is None:
            why = ("it started but no status came back through the status port"
                   if r.started else "/init never ran it")
            out.append(check_type(name, fail, f"`{cmd}`: {why}", "user", **text))
        elif r.timed_out:
            out.append(check_type(name, fail, f"`{cmd}`: timed out after {timeout} s "
                                  f"(killed, status {r.status})", "user", **text))
        else:
            out.append(check_type(name, passed if r.status == 0 else fail,
                                  f"`{cmd}`: exit status {r.status}", "user", **text))
    return out
