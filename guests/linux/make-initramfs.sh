#!/usr/bin/env bash
# Writes a minimal gzip-compressed newc initramfs to OUT.cpio.gz:
#   /dev/console (char 5:1, the kernel's initial console)
#   /init        (an empty file, mode 0755)
# On our nested KVM host guest userspace cannot make system calls
# (shared/notes/kvm-host.md), so a real init would be pointless: the kernel
# reaches "Run /init as init process", fails to execute the empty file
# (error -8, ENOEXEC), tries the default inits and panics with "No working
# init found"; with panic=-1 it reboots, which ends the VM.
# Usage: make-initramfs.sh OUT.cpio.gz      (prints OUT's path)
# As root it uses `cpio -o -H newc`. A device node can be archived by cpio
# only if it exists, and only root can create one; as non-root, set
# GEN_INIT_CPIO to the kernel's usr/gen_init_cpio (built by build-kernel.sh
# in CACHE_DIR/build-VARIANT/usr/), which writes the node from a text list.
set -euo pipefail
out=${1:?usage: $0 OUT.cpio.gz}

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/root/dev"
: >"$stage/root/init"
chmod 0755 "$stage/root/init"

if [ "$(id -u)" -eq 0 ]; then
  command -v cpio >/dev/null || { echo "make-initramfs: cpio is missing (apt-get install cpio)" >&2; exit 1; }
  mknod -m 0600 "$stage/root/dev/console" c 5 1
  (cd "$stage/root" && printf '%s\n' . dev dev/console init |
     cpio -o -H newc -R 0:0 --quiet) >"$stage/initramfs.cpio"
elif [ -n "${GEN_INIT_CPIO:-}" ]; then
  printf '%s\n' 'dir /dev 0755 0 0' 'nod /dev/console 0600 0 0 c 5 1' \
    "file /init $stage/root/init 0755 0 0" >"$stage/list"
  "$GEN_INIT_CPIO" "$stage/list" >"$stage/initramfs.cpio"
else
  echo "make-initramfs: not root: set GEN_INIT_CPIO=CACHE_DIR/build-msi/usr/gen_init_cpio" >&2
  exit 1
fi
gzip -9 -n -c "$stage/initramfs.cpio" >"$out.tmp"
mv "$out.tmp" "$out"
echo "make-initramfs: $out: $(stat -c %s "$out") bytes" >&2
echo "$out"
