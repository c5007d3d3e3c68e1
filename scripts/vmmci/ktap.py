"""KTAP, the kernel's TAP (Documentation/dev-tools/ktap.rst), as KUnit prints
it on the console: a tree of tests with their results, diagnostics and
times, for a cell's JUnit. Written from the format's description; the
structure rules follow what the kernel's own tools/testing/kunit/kunit.py
parse does (tests/ci/test_ktap.py checks the two agree case for case where
the kernel source is at hand):
  - the output starts at a line that is "KTAP version N" or "TAP version N",
    after blanks or printk's caller field ("[    T1] ", CONFIG_PRINTK_CALLER),
    which are cut from every later line too; not mid-line, so text a
    program prints inside a line of its own cannot open it;
  - a test with subtests opens with "KTAP version N" and/or "# Subtest:
    NAME", then a plan "1..N", then its subtests, then its own result line;
  - "ok|not ok N [- ]NAME [# SKIP reason]" is a result; "# ..." lines and
    any other lines are diagnostics of the test they precede;
  - a test whose result line never comes, or a plan that is not filled
    (the kernel crashed, the log was cut), is a crash: its missing
    subtests appear as unnamed crashed tests, as kunit.py reports them.
Times: the dmesg timestamp of a result line less that of the previous
line at or above its level (KUnit prints no durations of its own)."""
import re
from dataclasses import dataclass, field

PASS, FAIL, SKIP, CRASHED, NO_TESTS = "pass", "fail", "skip", "crashed", "no-tests"

DMESG = re.compile(r"^\[\s*(\d+\.\d+)\] ?")
KTAP_START = re.compile(r"K?TAP version (\d+)$")  # matched after PREFIX
PREFIX = re.compile(r"(?:\[\s*[TC]\d+\] ?)?[ \t]*")  # anchored: linear
HEADER = re.compile(r"^\s*# Subtest: (.*)$")
PLAN = re.compile(r"^\s*1\.\.(\d+)")
RESULT = re.compile(r"^\s*(ok|not ok) (\d+) (- )?([^#]*)( # .*)?$")
SKIP_RX = re.compile(r"^\s*(ok|not ok) (\d+) (- )?(.*) # SKIP(.*)$")
# Where the KTAP output is over for certain (kunit.py's markers): plain
# substrings, so a long line costs its length, never its square (issue 26).
KTAP_END = ("List of all partitions:", "Kernel panic - not syncing: VFS:", "reboot: System halted")
# Deeper nesting is cut (a crash): KUnit nests 2-3 levels, and a console
# with thousands of levels must not exhaust the parser's stack (issue 26).
MAX_DEPTH = 32


@dataclass
class Test:
    name: str = ""
    status: str = CRASHED
    subtests: list = field(default_factory=list)
    log: list = field(default_factory=list)  # diagnostic lines before the result
    expected: object = None  # the plan's count, None without a plan
    time: object = None  # seconds, from dmesg timestamps
    errors: list = field(default_factory=list)  # what was wrong with the output

    def leaves(self, path=()):
        """(path of names, Test) for every test without subtests, in order."""
        for t in self.subtests:
            if t.subtests:
                yield from t.leaves(path + (t.name,))
            else:
                yield path + (t.name,), t


def timed(raw_lines):
    """(dmesg seconds or None, text) for raw console lines."""
    for raw in raw_lines:
        line = raw.rstrip("\r\n")
        m = DMESG.match(line)
        yield (float(m.group(1)), line[m.end():]) if m else (None, line)


class Lines:
    """The KTAP lines: (timestamp or None, text without the prefix), from
    (timestamp, text) console lines."""

    def __init__(self, timed_lines):
        self.items, self.i = [], 0
        started, prefix = False, 0
        for ts, line in timed_lines:
            if not started:
                prefix = PREFIX.match(line).end()
                if KTAP_START.match(line, prefix):
                    started = True
                    self.items.append((ts, line[prefix:]))
                continue
            if any(end in line for end in KTAP_END):
                break
            self.items.append((ts, line[prefix:]))

    def __bool__(self):
        return self.i < len(self.items)

    def peek(self):
        return self.items[self.i][1]

    def ts(self):
        return self.items[self.i][0] if self else None

    def pop(self):
        self.i += 1
        return self.items[self.i - 1]


def _is_start(line):
    return bool(KTAP_START.match(line.lstrip(" \t")))


def _diagnostics(lines):
    """Lines up to the next result, header, version or plan line."""
    out = []
    while lines and not (RESULT.match(lines.peek()) or HEADER.match(lines.peek())
                         or _is_start(lines.peek())):
        out.append(lines.pop()[1])
    return out


def _name_matches(lines, test):
    m = RESULT.match(lines.peek()) if lines else None
    return bool(m) and m.group(4).strip() == test.name


def _result(lines, test, expected_num, since):
    if not lines or not RESULT.match(lines.peek()):
        test.errors.append("missing result line")
        test.status = CRASHED
        return
    ts, line = lines.pop()
    skip = SKIP_RX.match(line)
    m = skip or RESULT.match(line)
    if int(m.group(2)) != expected_num:
        test.errors.append(f"expected test number {expected_num}, got {m.group(2)}")
    test.name = m.group(4).strip()  # the result line's name wins, as in kunit.py
    if skip:
        test.status = SKIP
        test.log.append("SKIP" + skip.group(5))
    else:
        test.status = PASS if m.group(1) == "ok" else FAIL
    if ts is not None and since is not None:
        test.time = round(ts - since, 6)


def _last_ts(lines):
    return lines.items[lines.i - 1][0] if lines.i else None


def _parse(lines, expected_num, log, subtest, since=None, depth=0):
    test = Test(log=list(log))
    test.log += _diagnostics(lines)
    start = since if since is not None else lines.ts()
    parent = False
    if lines and _is_start(lines.peek()):
        lines.pop()
        parent = True
    if subtest and lines and HEADER.match(lines.peek()):
        test.name = HEADER.match(lines.pop()[1]).group(1).strip()
        parent = True
    if not subtest:
        test.name, parent = "main", True
    if parent and lines and PLAN.match(lines.peek()):
        test.expected = int(PLAN.match(lines.pop()[1]).group(1))
    num = 1
    while parent and (test.expected is None or num <= test.expected):
        before = _last_ts(lines)  # a subtest's time runs from here to its result
        sub_log = _diagnostics(lines)
        if not lines or (subtest and _name_matches(lines, test)):
            if test.expected and num <= test.expected:
                test.errors.append("missing expected subtest")
                missing = Test(log=sub_log, status=CRASHED)
                test.subtests.append(missing)
                num += 1
                continue
            test.log += sub_log
            break
        if depth >= MAX_DEPTH:
            test.errors.append(f"nested deeper than {MAX_DEPTH} levels: the rest is not parsed")
            test.subtests.append(Test(log=sub_log, status=CRASHED))
            lines.i = len(lines.items)
            break
        sub = _parse(lines, num, sub_log, True, before, depth + 1)
        test.subtests.append(sub)
        num += 1
    if subtest:
        test.log += _diagnostics(lines)
        if test.name and not _name_matches(lines, test):
            test.errors.append("missing result line")
            test.status = CRASHED
        else:
            _result(lines, test, expected_num, start)
    if parent and not test.subtests and test.status in (CRASHED, PASS):
        test.status = NO_TESTS
    if parent and test.subtests:
        _bubble(test)
    return test


def _bubble(test):
    """A parent's status from its subtests where its own line said less:
    a crashed subtest makes the parent crashed, a failed one failed."""
    subs = {t.status for t in test.subtests}
    if CRASHED in subs:
        if test.status in (PASS, SKIP, NO_TESTS):
            test.status = CRASHED
    elif FAIL in subs and test.status == PASS:
        test.status = FAIL


def parse(text_or_lines, timed_lines=None):
    """The main test (name "main") whose subtests are the suites, or None
    when there is no KTAP output at all. From console text or raw lines
    (dmesg timestamps read here), or from (timestamp, text) lines already
    parsed (timed_lines)."""
    if timed_lines is None:
        raw = text_or_lines.splitlines() if isinstance(text_or_lines, str) else text_or_lines
        timed_lines = timed(raw)
    lines = Lines(timed_lines)
    if not lines:
        return None
    main = _parse(lines, 0, [], False)
    if main.subtests and main.status != NO_TESTS:
        statuses = {t.status for t in main.subtests}
        main.status = (CRASHED if CRASHED in statuses else FAIL if FAIL in statuses
                       else PASS if PASS in statuses else SKIP)
    return main


def counts(main):
    """{status: n} over the leaf test cases."""
    out = {}
    for _, t in main.leaves():
        out[t.status] = out.get(t.status, 0) + 1
    return out


def once(console_lines):
    """The console as the kernel printed it once: with console=ttyS0 and
    console=hvc0 both on the VMM's console output, every kernel line comes
    twice, one after the other with the same timestamp (a line the kernel
    printed twice has two timestamps). Lines without a timestamp are kept."""
    prev = None
    for ts, body in console_lines:
        if ts is not None and (ts, body) == prev:
            continue
        prev = (ts, body)
        yield ts, body


def before_user_commands(console_lines):
    """The console up to the first user command (vmm-ci --run): KUnit runs
    while the kernel boots, and nothing a command prints afterwards may add
    or change a case (issue 26)."""
    for ts, body in console_lines:
        if body.startswith("VMMCI: run "):
            return
        yield ts, body


def checks(console_lines, check_type, verdicts):
    """Each KUnit case of a console's KTAP ((dmesg seconds, text) lines) as
    a check of its own, named kunit:SUITE.CASE (subtest levels joined with
    '.'), with its diagnostics and time; verdicts maps our statuses to the
    caller's."""
    main = parse(None, once(before_user_commands(console_lines)))
    if main is None:
        return []
    out = []
    for path, t in main.leaves():
        name = "kunit:" + ".".join(p or "?" for p in path)
        diag = " | ".join(x.strip() for x in t.log if x.strip())
        detail = {CRASHED: "crashed (no result line: the kernel stopped or the log was cut)",
                  NO_TESTS: "no tests ran"}.get(t.status, t.status)
        out.append(check_type(name, verdicts[t.status], detail + (f": {diag}" if diag else ""),
                              "kunit", time=t.time))
    return out
