#!/bin/sh
# Functional check of blk_bench (suite 'unit'): a small file of real data,
# one second of 4 KiB random reads at QD32 through the virtio-blk device
# model with every block compared against pread(); must exit 0 with iops > 0.
#   blk_smoke.sh BLK_BENCH DIR
set -eu
bench=$1
dir=$2
mkdir -p "$dir"
# In the build directory, not $TMPDIR: O_DIRECT needs a real filesystem.
work=$(mktemp -d "$dir/blk_smoke.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
img=$work/smoke.img
dd if=/dev/urandom of="$img" bs=1M count=8 conv=fdatasync status=none
out=$("$bench" --verify "$img" 1)
echo "$out"
iops=$(printf '%s\n' "$out" | sed -n 's/.*"iops":\([0-9.]*\).*/\1/p')
case $iops in
'' | 0 | 0.*) echo "blk_smoke: no iops in: $out" >&2; exit 1 ;;
esac
echo "blk_smoke: ok ($iops iops)"
