#!/usr/bin/env bash
# Installs, by Debian package name, everything the build, the tests and the
# benchmarks need on a fresh Debian 12 machine. Safe to run again.
set -euo pipefail
packages=(
  gcc meson ninja-build pkg-config clang-format  # build, style check
  liburing-dev libfdt-dev zlib1g-dev liblz4-dev liblzma-dev libzstd-dev libseccomp-dev  # VMM libraries
  check                                      # unit tests (libcheck)
  clang libclang-rt-14-dev                   # libFuzzer targets (tests/fuzz)
  device-tree-compiler                       # dtc, to validate --dump-dtb output
  acpica-tools                               # iasl, to disassemble --dump-acpi output
  qemu-system-x86                            # side-by-side reference
  qemu-system-common                         # /usr/lib/qemu/virtiofsd: --fs, the emulated host
  fio                                        # block benchmark reference
  cpio gzip                                  # initramfs for Linux guests
  iproute2 python3                           # net tests (ip netns), test runners
  strace valgrind                            # tests that watch the VMM; callgrind counts (vmm-bench)
  python3-matplotlib                         # scripts/vmm-bench and scripts/vmm-ci charts (SVG)
  bc flex bison libelf-dev libssl-dev make patch xz-utils  # guests/linux kernel builds
  busybox-static iperf3 e2fsprogs            # scripts/vmm-ci: initramfs, tools disk
  git                                        # vmm-bench fs_share: its tree, git status in the guest
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  echo "install-deps: installing ${missing[*]}" >&2
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
