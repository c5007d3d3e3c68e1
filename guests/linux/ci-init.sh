#!/bin/sh
# /init of the CI initramfs (make-ci-initramfs.py puts it there next to Debian's
# static busybox). It runs the userspace checks of one scripts/vmm-ci cell and
# reports them on /dev/console (ttyS0) with this protocol, one line each:
#   VMMCI: protocol 2
#   VMMCI: virtio NAME DEVICE-ID          (from /sys/bus/virtio/devices)
#   VMMCI: interrupts LINE                (each virtio line of /proc/interrupts)
#   VMMCI: check NAME ok|FAIL|skip DETAIL
#   VMMCI: data NAME VALUE                (fio/iperf3 figures, rng bytes)
#   VMMCI: hvc0 ready                     (the runner may now type on hvc0)
#   VMMCI: done ok N | VMMCI: done FAIL N (N = checks run / failed)
#   VMMCI: run N start | VMMCI: run N stdout|stderr LINE | VMMCI: run N end
#                                         (the user's commands, after the verdict,
#                                         as user ci unless /vmmci/run-as says
#                                         root: their exit status goes through the
#                                         VMM's status port, never through a
#                                         console line; protocol 2: nothing but
#                                         run lines counts once one has started)
# then `reboot -f` when every check passed (VMM exit 0), or exits, which makes
# the kernel panic ("Attempted to kill init", VMM exit 4). The runner judges
# the interrupt lines; everything else is judged here.
# Command-line keys: vmmci.token=WORD (echoed through hvc0 and written to the
# disk), vmmci.host=IP (the tap's host side), vmmci.full=1 (also fio and
# iperf3 from the ext4 tools disk /dev/vdb, in a chroot), vmmci.off=poweroff
# (end with `poweroff -f` instead of `reboot -f`: an ACPI kernel powers the
# machine off through the FADT's sleep control register, VMM exit 0).
#
# On our host a system call costs ~450 us and fork+exec ~1.7 s (emulated
# ring 0): builtins (read, echo, printf, case, test) wherever possible.
PATH=/bin
export PATH
checks=0
failed=0
say() { echo "VMMCI: $*"; }
check() { # NAME ok|FAIL|skip DETAIL...
	checks=$((checks + 1))
	[ "$2" = ok ] || [ "$2" = skip ] || failed=$((failed + 1))
	say "check $*"
}
up() { read -r UP _ </proc/uptime; } # no $(...): a subshell is a fork
# FLAT = $1 on one line, words separated by single spaces (no fork).
flat() {
	set -f
	# shellcheck disable=SC2086 # splitting is the point
	set -- $1
	FLAT="$*"
	set +f
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# Protocol 2: the checks and their verdict ("done") come before the first
# user command; anything after "run 1 start" other than the run lines is
# not ours and vmm-ci ignores it (scripts/vmmci/consolelog.py).
say "protocol 2"
up
say "init start uptime $UP"

token=none host=10.0.2.2 full=0 off=reboot
read -r cmdline </proc/cmdline
for w in $cmdline; do
	case "$w" in
	vmmci.token=*) token=${w#*=} ;;
	vmmci.host=*) host=${w#*=} ;;
	vmmci.full=*) full=${w#*=} ;;
	vmmci.off=*) off=${w#*=} ;;
	esac
done

for d in /sys/bus/virtio/devices/*; do
	[ -e "$d/device" ] || continue
	read -r id <"$d/device"
	say "virtio ${d##*/} $id"
done

# --- disk: a 64 KiB pattern to vda1, flushed, read back past the page cache.
disk_check() {
	[ -b /dev/vda1 ] || { check disk-pattern FAIL "no /dev/vda1"; return; }
	s="VMMCI-PATTERN $token "
	while [ ${#s} -lt 65536 ]; do s="$s$s"; done
	printf '%s' "$s" >/tmp/pattern
	if ! dd if=/tmp/pattern of=/dev/vda1 bs=65536 count=1 iflag=fullblock oflag=direct conv=fsync 2>/tmp/dd.err; then
		check disk-pattern FAIL "write: $(cat /tmp/dd.err)"
		return
	fi
	sync
	if ! dd if=/dev/vda1 of=/tmp/back bs=65536 count=1 iflag=direct 2>/tmp/dd.err; then
		check disk-pattern FAIL "read back: $(cat /tmp/dd.err)"
		return
	fi
	if cmp -s -n 65536 /tmp/pattern /tmp/back; then
		check disk-pattern ok "64 KiB written with O_DIRECT+fsync to vda1 and read back with O_DIRECT"
	else
		check disk-pattern FAIL "vda1 read back differs from what was written"
	fi
}

# --- rng: 32 bytes from /dev/hwrng (a lost request would block: bounded).
rng_check() {
	cur=none
	[ -r /sys/class/misc/hw_random/rng_current ] && read -r cur </sys/class/misc/hw_random/rng_current
	hex=$(timeout 60 od -An -tx1 -N32 /dev/hwrng 2>&1)
	flat "$hex"
	hex=$FLAT
	case "$hex" in
	*[!0-9a-f\ ]* | "") check hwrng FAIL "rng_current $cur: no bytes from /dev/hwrng within 60 s: $hex" ;;
	"00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00")
		check hwrng FAIL "rng_current $cur: 32 zero bytes" ;;
	*) check hwrng ok "rng_current $cur: $hex" ;;
	esac
}

# --- hvc0: the runner types the token once it sees "hvc0 ready"; echo it back.
hvc_check() {
	[ -c /dev/hvc0 ] || { check hvc0-echo FAIL "no /dev/hvc0"; return; }
	# Open and without echo before the runner may type: typed bytes that
	# reach a tty nobody holds open yet, or one that echoes, were seen in
	# the middle of the echo line ("vhvc0-echo: TOKEN", 2 vCPUs).
	exec 3<>/dev/hvc0
	stty -echo <&3 2>/dev/null
	say "hvc0 ready"
	line=
	# shellcheck disable=SC3045 # busybox ash has read -t
	if read -r -t 120 line <&3 && [ "$line" = "$token" ]; then
		echo "hvc0-echo: $line" >/dev/hvc0
		check hvc0-echo ok "read the runner's token on hvc0 and wrote it back"
	else
		check hvc0-echo FAIL "expected the token on hvc0 within 120 s, read '$line'"
	fi
	exec 3>&-
}

# --- net: ping the host side of the tap.
ping_check() {
	[ -e /sys/class/net/eth0 ] || { check ping skip "no eth0 (the VMM has no --net)"; return; }
	out=$(ping -c 3 -W 10 "$host" 2>&1)
	rc=$?
	summary=
	while read -r l; do
		case "$l" in *transmitted* | *round-trip*) summary="$summary $l" ;; esac
	done <<EOF
$out
EOF
	flat "$summary"
	summary=$FLAT
	if [ $rc -eq 0 ]; then check ping ok "$host: $summary"; else check ping FAIL "$host: $summary"; fi
}

# --- full matrix only: fio and iperf3 from the ext4 tools disk, in a chroot.
tools_checks() {
	t=/mnt/tools
	if ! mount -t ext4 -o ro /dev/vdb $t 2>/tmp/mount.err; then
		check tools-disk FAIL "mount /dev/vdb: $(cat /tmp/mount.err)"
		return
	fi
	mount -t devtmpfs devtmpfs $t/dev && mount -t proc proc $t/proc && mount -t tmpfs tmpfs $t/tmp
	check tools-disk ok "ext4 /dev/vdb mounted read-only"
	up
	say "fio start uptime $UP"
	out=$(chroot $t /usr/bin/fio --name=vmmci --filename=/dev/vda2 --rw=rw --ioengine=libaio \
		--numjobs=2 --group_reporting --direct=1 --bs=4k --iodepth=4 --size=16M \
		--runtime=20 --time_based --output-format=terse 2>&1)
	rc=$?
	case "$out" in
	3\;*) if [ $rc -eq 0 ]; then check fio ok "terse v3"; else check fio FAIL "exit $rc"; fi ;;
	*)
		flat "$out"
		check fio FAIL "exit $rc: $FLAT"
		;;
	esac
	while read -r l; do case "$l" in 3\;*) say "data fio-terse $l" ;; esac; done <<EOF
$out
EOF
	[ -e /sys/class/net/eth0 ] || { check iperf3 skip "no eth0 (the VMM has no --net)"; return; }
	up
	say "iperf3 start uptime $UP"
	out=$(chroot $t /usr/bin/iperf3 -c "$host" -t 10 -f m 2>&1)
	rc=$?
	while read -r l; do case "$l" in *sender* | *receiver*) say "data iperf3 $l" ;; esac; done <<EOF
$out
EOF
	flat "$out"
	if [ $rc -eq 0 ]; then check iperf3 ok "to $host, 10 s"; else check iperf3 FAIL "exit $rc: $FLAT"; fi
}

# --- vmm-ci --share and --root-share (virtio-fs through ./vmm --fs): the
# share (tag vmmci-share) at /mnt; the box's root (tag vmmci-root) read-only
# under a tmpfs overlay at /vmmci/root, with proc, sys, dev, a /tmp, the
# share and --include's copy in it, where the commands then run. Each is a
# check: a share that does not mount fails it, and the commands then fail
# too (their directory is not there).
root=
fs_mount() { # NAME TAG DIR [OPTIONS]: mounts or fails check NAME
	if mount -t virtiofs ${4:+-o "$4"} "$2" "$3" 2>/tmp/mount.err; then return 0; fi
	read -r why </tmp/mount.err
	check "$1" FAIL "mount -t virtiofs $2 $3: $why"
	return 1
}
share_checks() {
	if [ -f /vmmci/share ]; then
		fs_mount share vmmci-share /mnt && check share ok "vmmci-share at /mnt"
	fi
	[ -f /vmmci/root-share ] || return 0
	r=/vmmci/root
	fs_mount root-share vmmci-root /vmmci/lower ro || return 0
	mount -t tmpfs -o mode=755 rw /vmmci/rw && mkdir /vmmci/rw/upper /vmmci/rw/work
	if ! mount -t overlay -o lowerdir=/vmmci/lower,upperdir=/vmmci/rw/upper,workdir=/vmmci/rw/work \
		overlay $r 2>/tmp/mount.err; then
		read -r why </tmp/mount.err
		check root-share FAIL "mount -t overlay: $why"
		return 0
	fi
	mount -t proc proc $r/proc && mount -t sysfs sysfs $r/sys &&
		mount -t devtmpfs devtmpfs $r/dev && mount -t tmpfs -o mode=1777 tmp $r/tmp
	if [ -f /vmmci/share ] && [ -d $r/mnt ]; then mount -o bind /mnt $r/mnt; fi
	# --include's copy at the same path (a directory made in the overlay).
	if [ -d /vmmci/include ] && mkdir -p $r/vmmci/include; then
		mount -o bind /vmmci/include $r/vmmci/include
	fi
	root=$r
	check root-share ok "the box's root (vmmci-root, read-only) under a tmpfs overlay"
}

# --- the user's commands (vmm-ci --run, in /vmmci/commands, one per line;
# --include's files in /vmmci/include, the working directory): each with
# its own timeout (/vmmci/timeout seconds), its output on the console, its
# exit status reported through the VMM's status port (devices/
# guest_status.h: FLAGS, INDEX, STATUS at ports 0x511-0x513, from
# /dev/port) so that nothing the command prints can fake it.
byte() { printf "\\$(printf %03o "$1")"; }
report_status() { # INDEX TIMEDOUT STATUS
	{ byte "$2"; byte "$1"; byte "$3"; } | dd of=/dev/port bs=1 seek=$((0x511)) count=3 2>/dev/null
}
user_commands() {
	[ -f /vmmci/commands ] || return 0
	limit=60
	[ -f /vmmci/timeout ] && read -r limit </vmmci/timeout
	dir=/
	[ -d /vmmci/include ] && dir=/vmmci/include
	[ -f /vmmci/root-share ] && read -r dir </vmmci/root-share
	[ -f /vmmci/share ] && dir=/mnt
	cuid=1000 cgid=1000
	[ -f /vmmci/share ] && read -r cuid cgid </vmmci/share
	# /init's own files where user ci cannot plant a link (it may write /tmp).
	W=/.vmmci-run
	mkdir -m 700 $W 2>/dev/null
	# Not root unless asked (vmm-ci --run-as root): user ci cannot open
	# /dev/port or the consoles (0600 root), so it cannot forge a status
	# or a line of ours; it owns --include's copy (never the share: that is
	# the host's, and ci has its owner's ids).
	runas=user
	[ -f /vmmci/run-as ] && read -r runas </vmmci/run-as
	[ "$runas" = root ] || [ ! -d /vmmci/include ] || chown -R ci:ci /vmmci/include
	n=0
	while IFS= read -r cmd; do
		n=$((n + 1))
		say "run $n start"
		# In the box's root: its own setpriv (util-linux) drops to ci's ids.
		# shellcheck disable=SC2016 # $1 and $2 are the inner shell's
		if [ -n "$root" ] && [ "$runas" = root ]; then
			chroot $root /bin/sh -c 'cd "$1" && eval "$2"' sh "$dir" "$cmd" \
				</dev/null >$W/run.out 2>$W/run.err &
		elif [ -n "$root" ]; then
			chroot $root /usr/bin/setpriv --reuid="$cuid" --regid="$cgid" --clear-groups \
				/usr/bin/env -i HOME="$dir" USER=ci LOGNAME=ci \
				PATH=/usr/local/bin:/usr/bin:/bin \
				/bin/sh -c 'cd "$1" && eval "$2"' sh "$dir" "$cmd" \
				</dev/null >$W/run.out 2>$W/run.err &
		elif [ "$runas" = root ]; then
			(cd "$dir" && exec sh -c "$cmd") </dev/null >$W/run.out 2>$W/run.err &
		else
			(cd "$dir" && HOME=$dir exec su -s /bin/sh ci -c "$cmd") </dev/null \
				>$W/run.out 2>$W/run.err &
		fi
		pid=$!
		rm -f $W/run.timedout
		(sleep "$limit" && kill -9 $pid 2>/dev/null && : >$W/run.timedout) &
		watch=$!
		wait $pid
		st=$?
		kill $watch 2>/dev/null
		while IFS= read -r l; do say "run $n stdout $l"; done <$W/run.out
		while IFS= read -r l; do say "run $n stderr $l"; done <$W/run.err
		late=0
		[ -e $W/run.timedout ] && late=1
		report_status $n $late $st
		say "run $n end"
	done </vmmci/commands
}

disk_check
rng_check
hvc_check
ping_check
[ "$full" = 1 ] && tools_checks
share_checks

first=1
while read -r line; do
	[ $first = 1 ] && say "interrupts header $line"
	first=0
	case "$line" in *virtio*) say "interrupts $line" ;; esac
done </proc/interrupts

# The verdict on our checks, before any user command can print.
if [ $failed -eq 0 ]; then say "done ok $checks"; else say "done FAIL $failed of $checks"; fi

user_commands

up
say "init end uptime $UP"
sync
# The share's last writes reach the host before the VM stops.
[ -n "$root" ] && umount $root/mnt 2>/dev/null
[ -f /vmmci/share ] && umount /mnt 2>/dev/null
if [ $failed -eq 0 ]; then
	if [ "$off" = poweroff ]; then poweroff -f; else reboot -f; fi
fi
exit 1
