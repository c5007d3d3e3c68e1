#!/usr/bin/env bash
# Builds a tiny, linux-kvm-like Linux 6.1 bzImage from Debian's
# linux-source-6.1 into CACHE_DIR/build-VARIANT (never committed) and prints
# the bzImage's path on its last line.
# Usage: build-kernel.sh CACHE_DIR VARIANT      (VARIANT: msi | nomsi)
#
#   msi    make tinyconfig + linux-kvm-tiny.config                (PCI_MSI=y)
#   nomsi  make tinyconfig + linux-kvm-tiny.config + nomsi.config (PCI_MSI=n)
#
# Installs missing Debian packages by name (linux-source-6.1 bc flex bison
# libelf-dev libssl-dev cpio), unpacks the source once into
# CACHE_DIR/linux-source-6.1, configures, checks that every fragment line
# stuck after `make olddefconfig`, and runs `make -j2 bzImage`. A build whose
# fragments are unchanged (sha256 in CACHE_DIR/build-VARIANT/.fragment.sha256)
# is not configured or built again. Progress goes to stderr, the make output
# also to CACHE_DIR/build-VARIANT/build.log.
set -euo pipefail

usage() { echo "usage: $0 CACHE_DIR msi|nomsi" >&2; exit 2; }
[ $# -eq 2 ] || usage
variant=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
case "$variant" in
  msi)   fragments=("$here/linux-kvm-tiny.config") ;;
  nomsi) fragments=("$here/linux-kvm-tiny.config" "$here/nomsi.config") ;;
  *)     usage ;;
esac
mkdir -p "$1"
cache=$(cd "$1" && pwd)
src="$cache/linux-source-6.1"
out="$cache/build-$variant"
bzimage="$out/arch/x86/boot/bzImage"
jobs=${JOBS:-2}

log() { echo "build-kernel: $*" >&2; }
now() { date +%s; }

# --- 1. Debian packages, by name, only the missing ones. ---
packages=(linux-source-6.1 bc flex bison libelf-dev libssl-dev cpio)
missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  # The package lists may be missing or stale on a fresh machine.
  for p in "${missing[@]}"; do
    cand=$(apt-cache policy "$p" 2>/dev/null | awk '/Candidate:/ {print $2}')
    if [ -z "$cand" ] || [ "$cand" = "(none)" ]; then
      log "no apt candidate for $p: apt-get update"
      $sudo apt-get update -q >&2
      break
    fi
  done
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}" >&2
fi

# --- 2. Unpack the source once. ---
if [ ! -f "$src/.unpacked" ]; then
  tarball=$(find /usr/src -maxdepth 1 -name 'linux-source-6.1.tar.*' | head -n 1)
  [ -n "$tarball" ] || { log "no /usr/src/linux-source-6.1.tar.* (is linux-source-6.1 installed?)"; exit 1; }
  log "unpacking $tarball into $cache"
  t0=$(now)
  tmp=$(mktemp -d "$cache/.unpack.XXXXXX")
  tar -xf "$tarball" -C "$tmp"
  rm -rf "$src"
  mv "$tmp/linux-source-6.1" "$src"
  rmdir "$tmp"
  dpkg-query -W -f='${Package} ${Version}\n' linux-source-6.1 >"$src/.unpacked"
  log "unpacked in $(( $(now) - t0 )) s"
fi

# --- 3. Configure (only when the fragments changed) and build. ---
want=$(cat "${fragments[@]}" | sha256sum | cut -d' ' -f1)
have=$(cat "$out/.fragment.sha256" 2>/dev/null || true)
if [ "$want" = "$have" ] && [ -f "$bzimage" ]; then
  log "$variant: fragments unchanged, keeping the existing build"
  echo "$bzimage"
  exit 0
fi

mkdir -p "$out"
rm -f "$out/.fragment.sha256"
kmake() { make -C "$src" O="$out" "$@"; }

t0=$(now)
log "$variant: make tinyconfig + ${fragments[*]##*/} + olddefconfig"
kmake tinyconfig >"$out/build.log" 2>&1 || { tail -n 30 "$out/build.log" >&2; exit 1; }
# Merge the fragments over tinyconfig (later lines win), then resolve.
(cd "$out" && "$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "${fragments[@]}") \
  >>"$out/build.log" 2>&1 || { tail -n 30 "$out/build.log" >&2; exit 1; }
kmake olddefconfig >>"$out/build.log" 2>&1 || { tail -n 30 "$out/build.log" >&2; exit 1; }

# Every fragment option must have the requested value now; a dependency
# that is not met makes olddefconfig drop it silently.
# shellcheck disable=SC2016
bad=$(awk '
  FNR == NR {                                   # the resolved .config
    if (match($0, /^CONFIG_[A-Za-z0-9_]+=/)) got[substr($0, 1, RLENGTH - 1)] = substr($0, RLENGTH + 1)
    next
  }
  /^CONFIG_[A-Za-z0-9_]+=/ { i = index($0, "="); want[substr($0, 1, i - 1)] = substr($0, i + 1); next }
  /^# CONFIG_[A-Za-z0-9_]+ is not set/ { want[$2] = "n"; next }
  END {
    for (k in want) {
      g = (k in got) ? got[k] : "n"
      if (g != want[k]) printf "  %s: wanted %s, got %s\n", k, want[k], g
    }
  }' "$out/.config" "${fragments[@]}" | sort)
if [ -n "$bad" ]; then
  log "$variant: these fragment options did not stick after olddefconfig:"
  echo "$bad" >&2
  exit 1
fi
nopts=$(cat "${fragments[@]}" | sed -nE 's/^(# )?(CONFIG_[A-Za-z0-9_]+)[= ].*/\2/p' | sort -u | wc -l)
log "$variant: all $nopts fragment options have their values ($(( $(now) - t0 )) s)"

t1=$(now)
log "$variant: make -j$jobs bzImage (log: $out/build.log)"
if ! kmake -j"$jobs" bzImage >>"$out/build.log" 2>&1; then
  tail -n 40 "$out/build.log" >&2
  log "$variant: build failed"
  exit 1
fi
[ -f "$bzimage" ] || { log "no $bzimage after the build"; exit 1; }
echo "$want" >"$out/.fragment.sha256"
log "$variant: built in $(( $(now) - t1 )) s ($(stat -c %s "$bzimage") bytes, $(cat "$out/include/config/kernel.release" 2>/dev/null))"
echo "$bzimage"
