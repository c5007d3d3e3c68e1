#!/usr/bin/env bash
# Runs the project's tests again in a sanitizer build of the same sources.
#   run_suite.sh SRCDIR OUTDIR asan|tsan
# asan: AddressSanitizer + UndefinedBehaviorSanitizer (meson's own
#   -Db_sanitize=address,undefined, nothing recovers): every unit and guest
#   test, the real ./vmm under KVM included (leaks: in the unit tests).
# tsan: ThreadSanitizer: the threaded paths, the stress test of vCPU threads
#   and per-queue I/O threads (tests/unit/test_threads_stress.c), the
#   multiqueue unit tests, and guests that drive MSI-X, INTx and virtio
#   (multiqueue too) through the real ./vmm's threads.
# The build is kept in OUTDIR/MODE and only rebuilt when sources change.
set -euo pipefail
src=$(cd "$1" && pwd) out=$2 mode=$3
mkdir -p "$out"
build="$(cd "$out" && pwd)/$mode"
case $mode in
asan)
	opts=(-Db_sanitize=address,undefined -Dc_args=-fno-sanitize-recover=all)
	tests=(--suite unit --suite guest)
	# LeakSanitizer stops the world with ptrace at exit, which the VMM's
	# own seccomp filters forbid: leaks are checked in the unit tests (no
	# filters there), the guest tests run the filtered ./vmm without.
	export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1}
	export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
	;;
tsan)
	# The ring accessors' fences order guest-shared memory, which TSan
	# does not model (-Wtsan); the guest is no thread of the VMM.
	opts=(-Db_sanitize=thread -Dc_args=-Wno-tsan)
	tests=(threads_stress virtio_pci virtio_mq msix irq_routes pcitest-msix-irqfd pcitest-msix-signal
		pcitest-intx-resample pcitest-shared-pin virtiotest-blk-rng-msix
		virtiotest-blk-rng-intx virtiotest-console-msix virtiotest-blk-mq-msix virtiotest-net-mq-msix
		hostile-msix-mq virtio_external vhost_user virtiotest-fs-msix)
	export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1}
	;;
*) echo "usage: $0 SRCDIR OUTDIR asan|tsan" >&2; exit 2 ;;
esac
# Sanitized code runs several times slower, and CI may share the box:
# Check's per-test timeouts (4 s unless a test sets its own) get 10 times
# as long (a unit test that timed out under TSan on a busy box took 1.2 s
# unsanitized).
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-10}
if [ ! -f "$build/build.ninja" ]; then
	rm -rf "$build"
	echo "sanitize: configuring $build (${opts[*]})"
	meson setup "$build" "$src" -Db_lundef=false "${opts[@]}" >"$out/$mode-setup.log" 2>&1 ||
		{ tail -n 30 "$out/$mode-setup.log"; exit 1; }
fi
echo "sanitize: building $build"
ninja -C "$build" >"$out/$mode-build.log" 2>&1 || { tail -n 40 "$out/$mode-build.log"; exit 1; }
if [ "$mode" = asan ]; then
	echo "sanitize: meson test --suite unit (with LeakSanitizer)"
	ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=1" meson test -C "$build" --print-errorlogs \
		--num-processes 2 --suite unit
	echo "sanitize: meson test --suite guest"
	exec env ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" meson test -C "$build" \
		--print-errorlogs --num-processes 2 --suite guest
fi
echo "sanitize: meson test ${tests[*]}"
exec meson test -C "$build" --print-errorlogs --num-processes 2 "${tests[@]}"
