#!/usr/bin/env python3
"""DESIGN.md's lock order is the rank table's (vmm/base/lock.h, the names
in vmm/base/lock.c): the numbered list between the "lock order" markers
must name every rank, in enum order. Exit 0 when they agree."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def ranks():
    with open(os.path.join(ROOT, "vmm", "base", "lock.h")) as f:
        body = re.search(r"enum lock_rank \{(.*?)\};", f.read(), re.S).group(1)
    enum = [m for m in re.findall(r"^\s*(LOCK_RANK_\w+)", body, re.M) if m != "LOCK_RANK_COUNT"]
    with open(os.path.join(ROOT, "vmm", "base", "lock.c")) as f:
        names = dict(re.findall(r"\[(LOCK_RANK_\w+)\] = \"([^\"]+)\"", f.read()))
    missing = [e for e in enum if e not in names]
    if missing:
        sys.exit(f"FAIL: no name in vmm/base/lock.c for {', '.join(missing)}")
    return [names[e] for e in enum]


def design_order():
    with open(os.path.join(ROOT, "DESIGN.md")) as f:
        text = f.read()
    m = re.search(r"<!-- lock order: begin -->(.*?)<!-- lock order: end -->", text, re.S)
    if not m:
        sys.exit("FAIL: DESIGN.md has no <!-- lock order --> list")
    return re.findall(r"^\d+\. (.+?)\s*$", m.group(1), re.M)


def main():
    want, got = ranks(), design_order()
    if want != got:
        print("FAIL: DESIGN.md's lock order differs from enum lock_rank")
        print("  vmm/base/lock.h:", " < ".join(want))
        print("  DESIGN.md:      ", " < ".join(got))
        return 1
    print(f"PASS: {len(want)} ranks, DESIGN.md in the same order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
