#!/usr/bin/env bash
# Builds a tiny, linux-kvm-like Linux bzImage from Debian's linux-source-SERIES
# (never committed) and prints its path on the last line of stdout.
#
# Usage: build-kernel.sh [options] VARIANT
#        build-kernel.sh CACHE_DIR VARIANT         (the first form's 6.1 with --cache CACHE_DIR)
#   VARIANT            msi | nomsi | acpi-msi | acpi-nomsi | kunit
#   --series S         5.10 | 6.1 | 6.12 (default 6.1)
#   --cache DIR        default ${VMM_KERNEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vmm/kernels}
#   --host-workaround auto|yes|no
#                      apply patches/host-workaround-syscall-pf-SERIES.patch
#                      (default auto: only on a host whose KVM emulates guest
#                      ring 0, i.e. /sys/module/kvm_pvm exists or /proc/cpuinfo
#                      has no vmx/svm flag)
#   --print-key        print the cache key and exit without building
#   --config-only      configure and check the fragments, do not build
#
# Configuration, for every series and variant:
#   make tinyconfig, then merge (kernel's merge_config.sh -m, later lines win)
#     linux-kvm-tiny.config                      always
#     linux-kvm-tiny-SERIES.config               if it exists (per-version changes)
#     nomsi.config                               for nomsi, acpi-nomsi (PCI_MSI off)
#     acpi.config                                for acpi-* (ACPI on, MP table off)
#     kunit.config                               for kunit (msi + KUnit suites at boot)
#   make olddefconfig, then check that EVERY option of those fragments has the
#   value asked for (a dependency that is not met drops one silently).
#
# Cache (outside the clone, shared by every checkout and CI run on the
# machine):
#   CACHE/src/linux-source-S_PKGVERSION[+hostwa-PATCHHASH]/  unpacked (patched) source
#   CACHE/build/S-{plain,hostwa}/                            out-of-tree build, shared by the
#                                                            variants (incremental)
#   CACHE/images/S-VARIANT-{plain,hostwa}-KEY/               the finished kernel:
#       bzImage, vmlinux (for the PVH entry), config, System.map, build-info
#       (key=value lines)
# KEY = sha256 over the source package and version, the fragments' contents
# (in merge order) and the patch's contents (or "unpatched"). An image whose
# KEY exists is reused at once; otherwise the build tree is reconfigured and
# make runs incrementally. Progress goes to stderr, make's output to
# CACHE/build/.../build.log. JOBS=N sets make -jN (default 2).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage() {
  sed -n '5,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
log() { echo "build-kernel: $*" >&2; }
now() { date +%s; }

series=6.1
cache=${VMM_KERNEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vmm/kernels}
workaround=auto
print_key=0
config_only=0
positional=()
while [ $# -gt 0 ]; do
  case "$1" in
    --series) series=${2:?}; shift 2 ;;
    --cache) cache=${2:?}; shift 2 ;;
    --host-workaround) workaround=${2:?}; shift 2 ;;
    --print-key) print_key=1; shift ;;
    --config-only) config_only=1; shift ;;
    -h | --help) usage ;;
    -*) log "unknown option $1"; usage ;;
    *) positional+=("$1"); shift ;;
  esac
done
case ${#positional[@]} in
  1) variant=${positional[0]} ;;
  2) cache=${positional[0]}; variant=${positional[1]} ;;  # the original interface
  *) usage ;;
esac
case "$series" in 5.10 | 6.1 | 6.12) ;; *) log "unknown series $series"; usage ;; esac
fragments=("$here/linux-kvm-tiny.config")
[ -f "$here/linux-kvm-tiny-$series.config" ] && fragments+=("$here/linux-kvm-tiny-$series.config")
case "$variant" in
  msi) ;;
  nomsi) fragments+=("$here/nomsi.config") ;;
  acpi-msi) fragments+=("$here/acpi.config") ;;
  acpi-nomsi) fragments+=("$here/nomsi.config" "$here/acpi.config") ;;
  kunit) fragments+=("$here/kunit.config") ;;
  *) usage ;;
esac

# A host whose KVM emulates ring 0 (the nested, page-table based kvm_pvm, or
# no vmx/svm flag), as scripts/vmmtools/host.py says for vmm-ci and
# vmm-bench too; the same test in plain shell only where python3 is missing.
host_emulates_ring0() {
  if command -v python3 >/dev/null; then
    [ "$(python3 "$here/../../scripts/vmmtools/host.py" --emulated)" = yes ]
    return
  fi
  [ -e /sys/module/kvm_pvm ] && return 0
  ! grep -qwE 'vmx|svm' /proc/cpuinfo
}
case "$workaround" in
  yes) patched=1 ;;
  no) patched=0 ;;
  auto) if host_emulates_ring0; then patched=1; else patched=0; fi ;;
  *) usage ;;
esac
patch_file="$here/patches/host-workaround-syscall-pf-$series.patch"
flavour=plain
if [ "$patched" = 1 ]; then
  [ -f "$patch_file" ] || { log "no $patch_file"; exit 1; }
  flavour=hostwa
fi

mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
jobs=${JOBS:-2}

# --- 1. Build tools, by Debian package name, only the missing ones. ---
packages=(bc flex bison libelf-dev libssl-dev cpio make gcc patch xz-utils)
missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  for p in "${missing[@]}"; do
    cand=$(apt-cache policy "$p" 2>/dev/null | awk '/Candidate:/ {print $2}')
    if [ -z "$cand" ] || [ "$cand" = "(none)" ]; then
      log "no apt candidate for $p: apt-get update"
      $sudo apt-get update -q >&2
      break
    fi
  done
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi

# --- 2. The source package, and the cache key. ---
read -r pkg pkgver tarball < <("$here/kernel-source.sh" "$series" "$cache" | tail -n 1)
patch_hash=unpatched
[ "$patched" = 0 ] || patch_hash=$(sha256sum <"$patch_file" | cut -c1-16)
key=$( {
  echo "$pkg $pkgver $variant"
  for f in "${fragments[@]}"; do echo "== ${f##*/}"; cat "$f"; done
  echo "== patch $patch_hash"
} | sha256sum | cut -c1-16)
if [ "$print_key" = 1 ]; then
  echo "$key"
  exit 0
fi
name="$series-$variant-$flavour"
image="$cache/images/$name-$key"
if [ -f "$image/bzImage" ] && [ "$config_only" = 0 ]; then
  log "$name: cached ($pkg $pkgver, key $key)"
  echo "$image/bzImage"
  exit 0
fi

# One build at a time per cache (two CI jobs or shards on one machine share
# it); whoever waited may find the image already built.
exec 9>"$cache/.build.lock"
if ! flock -n 9; then
  log "waiting for another build in $cache"
  flock 9
fi
if [ -f "$image/bzImage" ] && [ "$config_only" = 0 ]; then
  log "$name: built meanwhile by another run (key $key)"
  echo "$image/bzImage"
  exit 0
fi

# --- 3. Unpack (and patch) the source once per version and patch. ---
srcname="${pkg}_$pkgver"
[ "$patched" = 0 ] || srcname="$srcname+hostwa-$patch_hash"
src="$cache/src/$srcname"
if [ ! -f "$src/.unpacked" ]; then
  log "unpacking $tarball into $src"
  t0=$(now)
  mkdir -p "$cache/src"
  tmp=$(mktemp -d "$cache/src/.unpack.XXXXXX")
  tar -xf "$tarball" -C "$tmp"
  if [ "$patched" = 1 ]; then
    log "applying the host workaround ${patch_file##*/}"
    patch -d "$tmp/$pkg" -p1 --forward --no-backup-if-mismatch <"$patch_file" >&2
  fi
  rm -rf "$src"
  mv "$tmp/$pkg" "$src"
  rmdir "$tmp"
  echo "$pkg $pkgver $patch_hash" >"$src/.unpacked"
  log "unpacked in $(($(now) - t0)) s"
fi

# --- 4. Configure and build out of tree (incrementally when possible). ---
# One tree per series and flavour, shared by its variants: kbuild records
# which CONFIG_ options each object reads (fixdep), so a variant after
# another recompiles only what their options change. PCI_MSI alone reaches
# struct device and so most objects: measured on 2 cores (6.1), nomsi
# after msi recompiled 764 objects in 367 s, against 611-628 s for either
# in a tree of its own on a busier box. (A compiler cache shared by
# per-variant trees was tried first: 22% hits.)
out="$cache/build/$series-$flavour"
if [ "$(cat "$out/.source" 2>/dev/null || true)" != "$src" ]; then
  rm -rf "$out" # a tree built from another source (version or patch)
fi
mkdir -p "$out"
echo "$src" >"$out/.source"
kmake() { make -C "$src" O="$out" "$@"; }
fail() { tail -n 40 "$out/build.log" >&2; log "$name: $1 failed (log: $out/build.log)"; exit 1; }

t0=$(now)
log "$name: make tinyconfig + ${fragments[*]##*/} + olddefconfig ($pkg $pkgver)"
kmake tinyconfig >"$out/build.log" 2>&1 || fail "make tinyconfig"
(cd "$out" && "$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "${fragments[@]}") \
  >>"$out/build.log" 2>&1 || fail "merge_config.sh"
kmake olddefconfig >>"$out/build.log" 2>&1 || fail "make olddefconfig"

# Every fragment option must have the requested value now (the last
# fragment that names an option wins, as in merge_config.sh).
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
  log "$name: these fragment options did not stick after olddefconfig:"
  echo "$bad" >&2
  exit 1
fi
nopts=$(cat "${fragments[@]}" | sed -nE 's/^(# )?(CONFIG_[A-Za-z0-9_]+)[= ].*/\2/p' | sort -u | wc -l)
log "$name: all $nopts fragment options have their values ($(($(now) - t0)) s)"
[ "$config_only" = 0 ] || exit 0

t1=$(now)
log "$name: make -j$jobs bzImage (log: $out/build.log)"
kmake -j"$jobs" bzImage >>"$out/build.log" 2>&1 || fail "make bzImage"
[ -f "$out/arch/x86/boot/bzImage" ] || fail "finding arch/x86/boot/bzImage"
release=$(cat "$out/include/config/kernel.release")

# --- 5. Publish the image under its key (atomically: rename). ---
mkdir -p "$cache/images"
tmp=$(mktemp -d "$cache/images/.$name.XXXXXX")
cp "$out/arch/x86/boot/bzImage" "$tmp/bzImage"
cp "$out/vmlinux" "$tmp/vmlinux"
cp "$out/.config" "$tmp/config"
cp "$out/System.map" "$tmp/System.map"
{
  echo "series=$series"
  echo "variant=$variant"
  echo "package=$pkg"
  echo "package_version=$pkgver"
  echo "release=$release"
  echo "host_workaround=$([ "$patched" = 1 ] && echo "${patch_file##*/}" || echo no)"
  echo "fragments=${fragments[*]##*/}"
  echo "key=$key"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "build_seconds=$(($(now) - t1))"
} >"$tmp/build-info"
chmod 0755 "$tmp"
rm -rf "$image"
mv "$tmp" "$image"
log "$name: built in $(($(now) - t1)) s ($(stat -c %s "$image/bzImage") bytes, $release, key $key)"
echo "$image/bzImage"
