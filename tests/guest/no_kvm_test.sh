#!/usr/bin/env bash
# Without /dev/kvm the VMM says so in one line and exits 8 (host problem),
# after checking its inputs. /dev/kvm is hidden in a private mount namespace.
set -u
vmm=$1 kernel=$2
if ! command -v unshare >/dev/null || [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: needs root and unshare(1) to hide /dev/kvm in a mount namespace"
  exit 77
fi
out=$(unshare --mount bash -c 'mount -t tmpfs none /dev && exec "$0" --host kvm --kernel "$1"' "$vmm" "$kernel" 2>&1)
rc=$?
echo "exit $rc: $out"
lines=$(printf '%s\n' "$out" | wc -l)
[ $rc -eq 8 ] || { echo "FAIL: exit code $rc, expected 8"; exit 1; }
[ "$lines" -eq 1 ] || { echo "FAIL: $lines lines of output, expected one"; exit 1; }
printf '%s' "$out" | grep -q '/dev/kvm does not exist' || { echo "FAIL: message does not name /dev/kvm"; exit 1; }
# A bad kernel is still exit 2 there: inputs are checked before KVM.
out=$(unshare --mount bash -c 'mount -t tmpfs none /dev && exec "$0" --kernel /no/such/kernel' "$vmm" 2>&1)
rc=$?
[ $rc -eq 2 ] || { echo "FAIL: bad kernel without KVM gave $rc, expected 2 ($out)"; exit 1; }
echo PASS
