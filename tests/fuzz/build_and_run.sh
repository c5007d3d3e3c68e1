#!/bin/sh
# Builds the libFuzzer targets with clang (ASan + UBSan) in a second build
# of the project and, unless --build-only, runs one for a bounded time.
#   build_and_run.sh SRCDIR OUTDIR [--build-only | TARGET SECONDS [libFuzzer args...]]
# Exits 77 (meson: skipped) when clang or the fuzzer runtime is missing.
set -eu
src=$(cd "$1" && pwd)
out=$2
shift 2
mkdir -p "$out"
out=$(cd "$out" && pwd)
CC=${FUZZ_CC:-}
if [ -z "$CC" ]; then
	for c in clang clang-14 clang-15 clang-16 clang-17 clang-18; do
		if command -v "$c" >/dev/null 2>&1; then CC=$c; break; fi
	done
fi
if [ -z "$CC" ]; then
	echo "SKIP: clang not found (set FUZZ_CC); libFuzzer targets need clang" >&2
	exit 77
fi
if ! echo 'int LLVMFuzzerTestOneInput(const char *d, long n){(void)d;(void)n;return 0;}' |
	"$CC" -x c -fsanitize=fuzzer,address,undefined -o "$out/.probe" - 2>/dev/null; then
	echo "SKIP: $CC cannot link -fsanitize=fuzzer,address,undefined (libclang-rt-dev missing?)" >&2
	exit 77
fi
rm -f "$out/.probe"

# The fuzz build: this project configured again with clang and
# -Dfuzzing=true, so the targets link the same libraries as ./vmm.
fbuild="$out/clang-build"
if [ ! -f "$fbuild/build.ninja" ]; then
	rm -rf "$fbuild"
	CC=$CC meson setup "$fbuild" "$src" -Dfuzzing=true -Dbuildtype=debugoptimized \
		-Db_sanitize=address,undefined -Db_lundef=false -Dwerror=false \
		-Dc_args="-fno-omit-frame-pointer -fno-sanitize-recover=undefined" >"$out/clang-setup.log" 2>&1 ||
		{ tail -n 20 "$out/clang-setup.log" >&2; exit 1; }
fi
ninja -C "$fbuild" >"$out/clang-build.log" 2>&1 || { tail -n 30 "$out/clang-build.log" >&2; exit 1; }
for t in fuzz_blk fuzz_boot fuzz_boot_bzhdr fuzz_virtq fuzz_pci fuzz_virtio fuzz_isa; do
	ln -sf "$fbuild/tests/fuzz/$t" "$out/$t"
done

seeds() { # the seed corpora, made once
	[ -f "$out/seeds.stamp" ] && [ -d "$out/seeds/blk" ] && return 0
	for d in blk boot virtq pci virtio isa; do mkdir -p "$out/seeds/$d"; done
	for img in hello.bzImage hello-gz.bzImage gzstub.bzImage; do
		for g in "$src/build/guests/$img" "$out/../../guests/$img"; do
			[ -f "$g" ] && cp "$g" "$out/seeds/boot/$img" && break
		done
	done
	python3 "$src/tests/fuzz/make_seeds.py" "$out/seeds"
	touch "$out/seeds.stamp"
}

seeds

[ "${1:-}" = "--build-only" ] && exit 0
target=$1 secs=$2
shift 2
case $target in
fuzz_blk) corpus=blk ;;
fuzz_boot | fuzz_boot_bzhdr) corpus=boot ;;
fuzz_virtq) corpus=virtq ;;
fuzz_pci) corpus=pci ;;
fuzz_virtio) corpus=virtio ;;
fuzz_isa) corpus=isa ;;
*) echo "unknown target $target" >&2; exit 2 ;;
esac
# A scratch copy of the corpus: the run may add to it; the seeds stay.
work="$out/corpus/$target"
mkdir -p "$work" "$out/artifacts"
cp -n "$out/seeds/$corpus/"* "$work/" 2>/dev/null || true
if [ "$target" = fuzz_boot_bzhdr ]; then
	# This variant takes an option byte first.
	for f in "$out/seeds/boot/"*; do
		[ -f "$work/opt-$(basename "$f")" ] || { printf '\000'; cat "$f"; } >"$work/opt-$(basename "$f")"
	done
fi
exec "$out/$target" -max_total_time="$secs" -timeout=5 -rss_limit_mb=2048 \
	-max_len=131072 -print_final_stats=1 -artifact_prefix="$out/artifacts/$target-" \
	"$@" "$work"
