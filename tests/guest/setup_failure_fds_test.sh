#!/usr/bin/env bash
# A machine that fails half-way through set-up (here: a missing disk, after
# KVM and before the vCPUs) exits 2 with one line, and its teardown closes
# only descriptors it opened: never stdin, stdout or stderr. On a box
# without a usable /dev/kvm, the machine that stops at KVM (--host kvm,
# exit 8: the teardown that --host auto runs before it moves to the
# emulated host with its stdin) is checked here, then the whole test runs
# again on the emulated host, where KVM opens.
set -u
vmm=$1 kernel=$2
command -v strace >/dev/null || { echo "SKIP: strace is not installed (scripts/install-deps.sh)"; exit 77; }
# LeakSanitizer cannot run under ptrace (an ASan build of the VMM).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
trace=$(mktemp)
trap 'rm -f "$trace"' EXIT
# (-c first: <> on a missing path would create it)
if ! [ -c /dev/kvm ] || ! { exec 3<>/dev/kvm; } 2>/dev/null; then
  out=$(strace -f -qq -e trace=close -o "$trace" "$vmm" --host kvm --kernel "$kernel" 2>&1)
  rc=$?
  echo "without KVM: exit $rc: $out"
  [ $rc -eq 8 ] || { echo "FAIL: exit code $rc without KVM, expected 8"; exit 1; }
  stray=$(grep -E 'close\((0|1|2)\)' "$trace")
  [ -z "$stray" ] || { echo "FAIL: teardown without KVM closed a standard descriptor:"; echo "$stray"; exit 1; }
  [ -z "${VMM_EMULATED_HOST:-}" ] || { echo "FAIL: no /dev/kvm on the emulated host"; exit 1; }
  exec "$(dirname "$0")/../../scripts/vmm-host" exec -- bash "$0" "$@"
fi
exec 3>&-
out=$(strace -f -qq -e trace=close -o "$trace" "$vmm" --kernel "$kernel" --disk /no/such/disk 2>&1)
rc=$?
echo "exit $rc: $out"
[ $rc -eq 2 ] || { echo "FAIL: exit code $rc, expected 2"; exit 1; }
printf '%s' "$out" | grep -q -- '--disk /no/such/disk: No such file' || { echo "FAIL: message does not name the disk"; exit 1; }
stray=$(grep -E 'close\((0|1|2)\)' "$trace")
[ -z "$stray" ] || { echo "FAIL: teardown closed a standard descriptor:"; echo "$stray"; exit 1; }
echo "PASS: $(grep -c 'close(' "$trace") close calls, none on fd 0-2"
