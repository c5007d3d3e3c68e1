#!/bin/sh
# An /init for a user's own initramfs that runs one command and hands its
# exit status to ./vmm, which exits with it (README, "A guest command's
# exit status"). The command comes base64-encoded on the kernel command
# line as status.run=... (as virtme-ng carries its command), so any
# characters survive; without it, /init runs `true`.
# The status goes through the VMM's status port (devices/legacy/guest_status.h:
# a byte written at port 0x510 ends the VM with that status), written from
# the shell through /dev/port (CONFIG_DEVPORT, on in most kernels).
PATH=/bin
export PATH
mount -t proc proc /proc
mount -t devtmpfs devtmpfs /dev
cmd=true
read -r cmdline </proc/cmdline
for w in $cmdline; do
	case "$w" in status.run=*) cmd=$(echo "${w#*=}" | base64 -d) ;; esac
done
sh -c "$cmd"
status=$?
printf "\\$(printf %03o "$status")" | dd of=/dev/port bs=1 seek=$((0x510)) count=1 2>/dev/null
# Only if the port is not there (another VMM): say so and stop the kernel.
echo "status-init: exit status $status, but no status port answered" >&2
poweroff -f
