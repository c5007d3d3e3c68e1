#!/usr/bin/env bash
# Downloads Debian 12's linux-image-cloud-amd64 kernel package (never
# committed) and unpacks its bzImage into DIR; prints the bzImage's path.
# Usage: fetch-debian-cloud-kernel.sh DIR
set -euo pipefail
dir=${1:?usage: $0 DIR}
mkdir -p "$dir"
cd "$dir"
existing=$(ls boot/vmlinuz-* 2>/dev/null | head -n 1 || true)
if [ -n "$existing" ]; then
  echo "$dir/$existing"
  exit 0
fi
pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}')
if [ -z "$pkg" ]; then
  # The package lists may be missing on a fresh machine.
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -q >&2
  pkg=$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-/ {print $2; exit}')
fi
[ -n "$pkg" ] || { echo "fetch-debian-cloud-kernel: no linux-image-cloud-amd64 in the apt lists" >&2; exit 1; }
echo "fetch-debian-cloud-kernel: downloading $pkg" >&2
apt-get download -q "$pkg" >&2
dpkg-deb -x "$pkg"_*.deb .
rm -f "$pkg"_*.deb
ls "$dir"/boot/vmlinuz-* | head -n 1
