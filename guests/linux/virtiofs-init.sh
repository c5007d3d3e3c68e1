#!/bin/busybox sh
# /init of tests/guest/linux_virtiofs_test.py: mounts the host's share over
# virtio-fs (tag "share"), reads the host's file, writes one, lists the
# share, unmounts and powers off (ACPI S5: ./vmm exits 0). Each step says
# "virtiofs-init: ..." on the console; a failed step says why and stops.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
say() { echo "virtiofs-init: $*"; }
step() {
	if "$@"; then return 0; fi
	say "FAIL: $*"
	poweroff -f
}
step mount -t virtiofs share /mnt
say "mounted: $(grep ' /mnt ' /proc/mounts)"
say "read: $(cat /mnt/from-host.txt)"
step sh -c 'echo "written by Linux over virtio-fs" > /mnt/from-linux.txt'
step sync
say "wrote from-linux.txt"
ls -la /mnt
grep -E 'virtio' /proc/interrupts
step umount /mnt
say "unmounted"
poweroff -f
