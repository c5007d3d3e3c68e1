#!/bin/sh
# /init of the emulated KVM host (scripts/vmmtools/emuhost.py builds the
# initramfs: Debian's busybox-static, this file, the agent, the modules).
# Loads the modules listed in /modules.order (dependencies first), mounts
# the box's root over 9p at /host with the host's own /proc, /sys and /dev
# inside it, brings up the user-network NIC and runs the agent, which
# chroots to /host and serves commands. Says what it does on the console;
# the box's side reads "emuhost: ..." lines.
PATH=/bin
export PATH
say() { echo "emuhost: $*"; }
fail() {
	say "FAILED: $*"
	poweroff -f
}
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
port=5555 token= cache=none fs=9p
read -r cmdline </proc/cmdline
for w in $cmdline; do
	case "$w" in
	emuhost.port=*) port=${w#*=} ;;
	emuhost.token=*) token=${w#*=} ;;
	emuhost.cache=*) cache=${w#*=} ;;
	emuhost.fs=*) fs=${w#*=} ;;
	esac
done
while read -r m args; do
	insmod "/modules/$m.ko" $args 2>/dev/null || fail "insmod $m"
done </modules.order
[ -c /dev/kvm ] || fail "no /dev/kvm after loading kvm-amd"
chmod 666 /dev/kvm
mkdir -p /host
if [ "$fs" = virtiofs ]; then
	mount -t virtiofs host /host
else
	mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=$cache host /host
fi || fail "mount the box's root ($fs)"
mount -t proc proc /host/proc &&
	mount -t sysfs sysfs /host/sys &&
	mount -t devtmpfs devtmpfs /host/dev &&
	mkdir -p /host/dev/pts /host/dev/shm &&
	mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /host/dev/pts &&
	mount -t tmpfs tmpfs /host/dev/shm || fail "mount /proc, /sys, /dev in the box's root"
[ -d /sys/kernel/debug ] && mount -t debugfs debugfs /host/sys/kernel/debug 2>/dev/null
ip link set lo up
ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 && ip route add default via 10.0.2.2 ||
	fail "network"
say "ready $(cat /proc/sys/kernel/osrelease) cpus $(grep -c ^processor /proc/cpuinfo)"
exec /agent /host "$port" "$token"
