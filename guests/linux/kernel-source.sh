#!/usr/bin/env bash
# Finds (and fetches when missing) Debian's source tarball for one kernel
# series and prints "PACKAGE VERSION TARBALL" on its last line.
# Usage: kernel-source.sh SERIES CACHE_DIR        (SERIES: 5.10 | 6.1 | 6.12)
#
#   6.1, 6.12  bookworm's linux-source-SERIES, installed by name with apt-get
#              when missing (apt-get update first only if it has no
#              candidate); the tarball is /usr/src/linux-source-SERIES.tar.xz.
#   5.10       bullseye's linux-source-5.10, which bookworm's sources do not
#              carry: fetched with `apt-get download` through a private apt
#              configuration in CACHE_DIR/apt-bullseye (its own source list,
#              package lists and caches; the system's apt sources are never
#              touched), from the Debian mirror the system already uses. The
#              .deb stays in CACHE_DIR/debs and only its tarball is unpacked
#              (into CACHE_DIR/debs/linux-source-5.10_VERSION/); nothing is
#              installed. A later run reuses the .deb without the network.
set -euo pipefail

usage() { echo "usage: $0 5.10|6.1|6.12 CACHE_DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
series=$1
mkdir -p "$2"
cache=$(cd "$2" && pwd)
pkg="linux-source-$series"
log() { echo "kernel-source: $*" >&2; }
sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo

# The first Debian archive URI in the system's apt sources (deb822 or
# one-line format); deb.debian.org when there is none.
system_mirror() {
  local uri
  uri=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
    awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i ~ /\/debian\/?$/) { print $i; exit } }')
  if [ -z "$uri" ]; then
    uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
      awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\/.*\/debian\/?$/) { print $i; exit } }')
  fi
  echo "${uri:-http://deb.debian.org/debian}"
}

from_bookworm() {
  local status cand
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [ "$status" != "install ok installed" ]; then
    cand=$(apt-cache policy "$pkg" 2>/dev/null | awk '/Candidate:/ {print $2}')
    if [ -z "$cand" ] || [ "$cand" = "(none)" ]; then
      log "no apt candidate for $pkg: apt-get update"
      $sudo apt-get update -q >&2
    fi
    log "installing $pkg"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "$pkg" >&2
  fi
  local version tarball
  version=$(dpkg-query -W -f='${Version}' "$pkg")
  tarball=$(find /usr/src -maxdepth 1 -name "$pkg.tar.*" | head -n 1)
  [ -n "$tarball" ] || { log "no /usr/src/$pkg.tar.* although $pkg is installed"; exit 1; }
  echo "$pkg $version $tarball"
}

from_bullseye() {
  local apt="$cache/apt-bullseye" debs="$cache/debs" deb
  mkdir -p "$debs"
  deb=$(find "$debs" -maxdepth 1 -name "${pkg}_*_all.deb" | sort -V | tail -n 1)
  if [ -z "$deb" ]; then
    mkdir -p "$apt/lists/partial" "$apt/archives/partial"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(system_mirror) bullseye main" \
      >"$apt/sources.list"
    local opts=(-o "Dir::Etc::sourcelist=$apt/sources.list" -o "Dir::Etc::sourceparts=-"
      -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt" -o "Dir::Cache::archives=$apt/archives"
      -o "Dir::Cache::pkgcache=$apt/pkgcache.bin" -o "Dir::Cache::srcpkgcache=$apt/srcpkgcache.bin"
      -o "APT::Get::List-Cleanup=0")
    # As root, apt would drop to _apt, which cannot write into this cache.
    [ "$(id -u)" -ne 0 ] || opts+=(-o "APT::Sandbox::User=root")
    log "fetching $pkg from bullseye ($(head -c 200 "$apt/sources.list" | cut -d' ' -f3)) with a private apt configuration"
    apt-get -q "${opts[@]}" update >&2
    (cd "$debs" && apt-get -q "${opts[@]}" download "$pkg" >&2)
    deb=$(find "$debs" -maxdepth 1 -name "${pkg}_*_all.deb" | sort -V | tail -n 1)
    [ -n "$deb" ] || { log "apt-get download $pkg left no .deb in $debs"; exit 1; }
  fi
  local version dir tarball
  version=$(dpkg-deb -f "$deb" Version)
  dir="$debs/${pkg}_$version"
  tarball="$dir/usr/src/$pkg.tar.xz"
  if [ ! -f "$tarball" ]; then
    log "extracting $pkg.tar.xz from $(basename "$deb")"
    rm -rf "$dir.tmp"
    mkdir -p "$dir.tmp"
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dir.tmp" "./usr/src/$pkg.tar.xz"
    rm -rf "$dir"
    mv "$dir.tmp" "$dir"
  fi
  echo "$pkg $version $tarball"
}

case "$series" in
  6.1 | 6.12) from_bookworm ;;
  5.10) from_bullseye ;;
  *) usage ;;
esac
