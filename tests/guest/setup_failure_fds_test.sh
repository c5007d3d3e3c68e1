#!/usr/bin/env bash
# A machine that fails half-way through set-up (here: a missing disk, after
# KVM and before the vCPUs) exits 2 with one line, and its teardown closes
# only descriptors it opened: never stdin, stdout or stderr.
set -u
vmm=$1 kernel=$2
if [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
  echo "SKIP: /dev/kvm is not usable here: the failure must come after KVM is opened"
  exit 77
fi
command -v strace >/dev/null || { echo "SKIP: strace is not installed (scripts/install-deps.sh)"; exit 77; }
# LeakSanitizer cannot run under ptrace (an ASan build of the VMM).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
trace=$(mktemp)
trap 'rm -f "$trace"' EXIT
out=$(strace -f -qq -e trace=close -o "$trace" "$vmm" --kernel "$kernel" --disk /no/such/disk 2>&1)
rc=$?
echo "exit $rc: $out"
[ $rc -eq 2 ] || { echo "FAIL: exit code $rc, expected 2"; exit 1; }
printf '%s' "$out" | grep -q -- '--disk /no/such/disk: No such file' || { echo "FAIL: message does not name the disk"; exit 1; }
stray=$(grep -E 'close\((0|1|2)\)' "$trace")
[ -z "$stray" ] || { echo "FAIL: teardown closed a standard descriptor:"; echo "$stray"; exit 1; }
echo "PASS: $(grep -c 'close(' "$trace") close calls, none on fd 0-2"
