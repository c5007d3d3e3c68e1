#!/usr/bin/env bash
# Writes OUT.img: an ext4 image (label vmmci-tools) holding Debian's fio and
# iperf3 with every shared library they load and the dynamic loader, for the
# full scripts/vmm-ci matrix: ci-init.sh mounts it read-only as /dev/vdb and
# runs both through chroot. Too big for an initramfs on a host that emulates
# guest ring 0 (fio with its libraries is ~80 MB), so it is a second disk.
# Usage: make-ci-tools-disk.sh OUT.img        (prints OUT's path)
# Installs fio, iperf3 and e2fsprogs by name when missing. mke2fs -d fills
# the image from a staging directory: no root, no loop device.
set -euo pipefail
out=${1:?usage: $0 OUT.img}
log() { echo "make-ci-tools-disk: $*" >&2; }

missing=()
for p in fio iperf3 e2fsprogs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root="$stage/root"
mkdir -p "$root"/{usr/bin,dev,proc,tmp,etc}
# Copies a file to the same path under $root, following symlinks.
put() { mkdir -p "$root$(dirname "$1")" && cp -L "$1" "$root$1"; }
for prog in /usr/bin/fio /usr/bin/iperf3; do
  put "$prog"
  # "libX.so => /path (0x...)" and the loader's "/lib64/ld-linux-x86-64.so.2 (0x...)"
  ldd "$prog" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' |
    while read -r lib; do put "$lib"; done
done
echo "root:x:0:0:root:/:/bin/sh" >"$root/etc/passwd"
size_kib=$(du -sk "$root" | cut -f1)
img_mib=$((size_kib * 5 / 4 / 1024 + 16))
rm -f "$out.tmp"
mke2fs -q -t ext4 -L vmmci-tools -d "$root" -E root_owner=0:0 "$out.tmp" "${img_mib}M"
mv "$out.tmp" "$out"
log "$out: ${img_mib} MiB ext4, $((size_kib / 1024)) MiB of fio, iperf3 and libraries"
echo "$out"
