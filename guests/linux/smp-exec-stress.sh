#!/usr/bin/env bash
# Reproduces the userspace crash our ring-0-emulating hosts show with 2
# vCPUs (guests/linux/README.md, "2 vCPUs: userspace crashes on this host"):
# boots a recipe kernel whose /init (busybox-static) execs `od` N times and
# counts the runs that did not end with status 0.
#
# Usage: smp-exec-stress.sh [--vmm build/vmm] [--cpus 2] [--runs 300] [--series 6.1]
#                           [-- EXTRA KERNEL WORDS...]
# Prints one line: "runs N, failed F (statuses ...), S s"; exit 0 when F is 0.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
vmm=$here/../../build/vmm cpus=2 runs=300 series=6.1
while [ $# -gt 0 ]; do
  case "$1" in
    --vmm) vmm=$2; shift 2 ;;
    --cpus) cpus=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --series) series=$2; shift 2 ;;
    --) shift; break ;;
    *) sed -n '2,10p' "$0" >&2; exit 2 ;;
  esac
done
kernel=$("$here/build-kernel.sh" --series "$series" msi | tail -n 1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/root/bin" "$tmp/root/dev" "$tmp/root/proc"
cp /bin/busybox "$tmp/root/bin/busybox"
cat >"$tmp/root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
n=0 bad=0 codes=
while [ $n -lt "$STRESS_RUNS" ]; do
  /bin/busybox timeout 20 /bin/busybox od -An -tx1 -N4 /dev/urandom >/dev/null 2>&1
  rc=$?
  [ $rc -ne 0 ] && { bad=$((bad + 1)); codes="$codes $rc"; }
  n=$((n + 1))
done
echo "STRESS: runs $n, failed $bad (statuses${codes:- none})"
/bin/busybox reboot -f
INIT
chmod +x "$tmp/root/init"
(cd "$tmp/root" && printf '%s\n' . init bin bin/busybox dev proc |
  cpio -o -H newc -R 0:0 --quiet >"$tmp/initramfs.cpio")
t0=$(date +%s)
out=$("$vmm" --kernel "$kernel" --initrd "$tmp/initramfs.cpio" --cpus "$cpus" --memory 256 \
  --timeout $((runs * 10 + 300)) --no-default-cmdline --cmdline \
  "console=ttyS0 reboot=k panic=-1 quiet clearcpuid=151,308,295,154,141,156,293,304 STRESS_RUNS=$runs $*" \
  2>&1 | grep -a '^STRESS:' || true)
echo "${out#STRESS: }, $(($(date +%s) - t0)) s"
case "$out" in *"failed 0 "*) exit 0 ;; *) exit 1 ;; esac
