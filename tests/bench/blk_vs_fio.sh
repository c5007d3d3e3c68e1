#!/bin/bash
# 4 KiB random reads at queue depth 32, O_DIRECT, on one 512 MiB file of
# real data: fio (io_uring) against the virtio-blk device model driven by
# blk_bench, alternately, ROUNDS rounds each, then a table of IOPS, the
# ratio model/fio per round and the median ratio. Each round also runs fio
# in batches of 32 (--iodepth_batch_submit=32 --iodepth_batch_complete_min=32),
# the pattern blk_bench's driver falls into: it re-posts every request it
# reaps in one kick, and on a host where a wake-up takes longer than the
# disk's spread of completion times every wake-up reaps all 32. Plain fio
# never sleeps at this rate (it finds a completion at each io_uring_enter)
# and keeps the disk's queue topped up; the batched run shows what the same
# disk gives to a driver that works in batches.
#
#   blk_vs_fio.sh [--bench BLK_BENCH] [--seconds S] [--rounds N] [--size MIB]
#                 [--json OUT.json] [FILE]
#
# FILE: the test file, MIB MiB (default 512). Created (fallocate, filled from
# /dev/urandom, fdatasync) if missing and kept; reused if it is already
# exactly that size. If FILE is a directory the file is
# blk_bench_<MIB>m.img inside it. Without
# FILE it is created in a temporary directory under ${TMPDIR:-/var/tmp}
# (which must not be tmpfs on kernels without O_DIRECT there) and removed at
# exit. S defaults to 5 (or $BENCH_SECONDS), N to 3. BLK_BENCH defaults to
# build/tests/bench/blk_bench next to this source tree. --json also writes
# every round and the medians as JSON (scripts/vmm-bench reads it).
# Exit 0 on success, 1 on any failure, 77 (skip) if fio is not installed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
bench=$here/../../build/tests/bench/blk_bench
secs=${BENCH_SECONDS:-5}
rounds=3
mib=512
json=
file=
while [ $# -gt 0 ]; do
	case $1 in
	--bench) bench=$2; shift 2 ;;
	--seconds) secs=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--size) mib=$2; shift 2 ;;
	--json) json=$2; shift 2 ;;
	-h | --help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "blk_vs_fio: unknown option $1" >&2; exit 1 ;;
	*) file=$1; shift ;;
	esac
done
case $mib in '' | *[!0-9]*) echo "blk_vs_fio: --size $mib is not a number of MiB" >&2; exit 1 ;; esac
size=$((mib * 1024 * 1024))

if ! command -v fio >/dev/null; then
	echo "blk_vs_fio: fio not found (scripts/install-deps.sh installs package fio); skipping" >&2
	exit 77
fi
command -v python3 >/dev/null || { echo "blk_vs_fio: python3 not found" >&2; exit 1; }
[ -x "$bench" ] || { echo "blk_vs_fio: $bench is not an executable (build it: ninja -C build)" >&2; exit 1; }

tmp=
cleanup() { if [ -n "$tmp" ]; then rm -rf "$tmp"; fi; }
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ -z "$file" ]; then
	tmp=$(mktemp -d "${TMPDIR:-/var/tmp}/blk_vs_fio.XXXXXX")
	file=$tmp/blk_bench_${mib}m.img
elif [ -d "$file" ]; then
	file=${file%/}/blk_bench_${mib}m.img
fi

if [ -e "$file" ]; then
	have=$(stat -c %s "$file")
	if [ ! -f "$file" ] || [ "$have" -ne "$size" ]; then
		echo "blk_vs_fio: $file exists but is not a $mib MiB regular file; not touching it" >&2
		exit 1
	fi
	echo "test file: $file (reused)"
else
	echo "test file: $file (creating $mib MiB from /dev/urandom)"
	fallocate -l "$size" "$file" 2>/dev/null || true
	dd if=/dev/urandom of="$file" bs=1M count="$mib" conv=notrunc,fdatasync status=none
fi
alloc=$(( $(stat -c '%b * %B' "$file") ))
if [ "$alloc" -lt "$size" ]; then
	echo "blk_vs_fio: $file is sparse ($alloc of $size bytes allocated)" >&2
	exit 1
fi

out=$(mktemp -d "${TMPDIR:-/tmp}/blk_vs_fio_out.XXXXXX")
trap 'cleanup; rm -rf "$out"' EXIT

# run_fio ROUND TAG WHAT [FIO OPTION...]: one fio run into $out/TAG.ROUND.json.
run_fio() {
	local r=$1 tag=$2 what=$3
	shift 3
	if ! fio --name=randread --filename="$file" --direct=1 --ioengine=io_uring --iodepth=32 \
		"$@" --bs=4k --rw=randread --runtime="$secs" --time_based --readonly \
		--output-format=json >"$out/$tag.$r.json" 2>"$out/$tag.$r.err"; then
		echo "blk_vs_fio: $what failed in round $r:" >&2
		cat "$out/$tag.$r.err" "$out/$tag.$r.json" >&2
		exit 1
	fi
}

for r in $(seq 1 "$rounds"); do
	run_fio "$r" fio "fio"
	run_fio "$r" fiob "fio (batches of 32)" --iodepth_batch_submit=32 --iodepth_batch_complete_min=32
	if ! "$bench" "$file" "$secs" >"$out/model.$r.json" 2>"$out/model.$r.err"; then
		echo "blk_vs_fio: blk_bench failed in round $r:" >&2
		cat "$out/model.$r.err" "$out/model.$r.json" >&2
		exit 1
	fi
	fio_iops() { python3 -c 'import json,sys; t=open(sys.argv[1]).read(); print(round(json.loads(t[t.index("{"):])["jobs"][0]["read"]["iops"]))' "$1"; }
	echo "round $r done: fio $(fio_iops "$out/fio.$r.json") IOPS, fio in batches of 32 $(fio_iops "$out/fiob.$r.json") IOPS, model $(sed -n 's/.*"iops":\([0-9]*\).*/\1/p' "$out/model.$r.json") IOPS"
done

# Host facts come from the one place vmm-bench and vmm-ci read them too.
host_fact() { python3 "$here/../../scripts/vmmtools/host.py" --get "$1"; }
dev=$(df --output=source "$file" | tail -1)
sched=
blkname=$(basename "$(readlink -f "$dev")" 2>/dev/null || true)
if [ -n "$blkname" ] && [ -e "/sys/class/block/$blkname" ]; then
	base=$blkname
	[ -e "/sys/class/block/$blkname/partition" ] && base=$(basename "$(readlink -f "/sys/class/block/$blkname/..")")
	[ -r "/sys/block/$base/queue/scheduler" ] && sched=$(cat "/sys/block/$base/queue/scheduler")
fi

python3 - "$out" "$rounds" "$secs" "$json" "$mib" <<'PY'
import json, statistics, sys
out, rounds, secs, json_out, mib = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
def load(p):
    t = open(p).read()
    return json.loads(t[t.index("{"):])
rows = []
for r in range(1, rounds + 1):
    job = load(f"{out}/fio.{r}.json")["jobs"][0]
    if job.get("error"):
        sys.exit(f"fio round {r} reported error {job['error']}")
    rd = job["read"]
    pct = rd["clat_ns"].get("percentile", {})
    jb = load(f"{out}/fiob.{r}.json")["jobs"][0]
    if jb.get("error"):
        sys.exit(f"fio (batches of 32) round {r} reported error {jb['error']}")
    m = load(f"{out}/model.{r}.json")
    rows.append((r, rd["iops"], m["iops"], pct.get("50.000000", 0) / 1e3,
                 pct.get("99.000000", 0) / 1e3, m["p50_us"], m["p99_us"], jb["read"]["iops"]))
print()
print(f"4 KiB random read, QD32, O_DIRECT, {secs} s per run, rounds alternate fio -> fio in "
      f"batches of 32 -> model")
print(f"{'round':>5} {'fio IOPS':>10} {'fio b32':>10} {'model IOPS':>11} {'model/fio':>10}"
      f" {'model/b32':>10}   {'fio p50/p99 us':>16} {'model p50/p99 us':>18}")
for r, f, m, fp50, fp99, mp50, mp99, fb in rows:
    print(f"{r:>5} {f:>10.0f} {fb:>10.0f} {m:>11.0f} {m / f:>10.3f} {m / fb:>10.3f}"
          f"   {fp50:>7.1f}/{fp99:<8.1f} {mp50:>9.1f}/{mp99:<8.1f}")
ratios = [m / f for _, f, m, *_ in rows]
bratios = [x[2] / x[7] for x in rows]
print(f"median ratio model/fio: {statistics.median(ratios):.3f}"
      f"  (fio median {statistics.median(x[1] for x in rows):.0f} IOPS,"
      f" model median {statistics.median(x[2] for x in rows):.0f} IOPS)")
print(f"median ratio model/fio in batches of 32: {statistics.median(bratios):.3f}"
      f"  (fio median {statistics.median(x[7] for x in rows):.0f} IOPS)")
if json_out:
    with open(json_out, "w") as f:
        json.dump({"seconds_per_run": float(secs), "rounds": rounds, "file_mib": mib,
                   "rows": [{"round": r, "fio_iops": fi, "model_iops": m, "fio_p50_us": fp50,
                             "fio_p99_us": fp99, "model_p50_us": mp50, "model_p99_us": mp99,
                             "fio_batch32_iops": fb}
                            for r, fi, m, fp50, fp99, mp50, mp99, fb in rows],
                   "median_ratio": statistics.median(ratios),
                   "median_ratio_batch32": statistics.median(bratios),
                   "fio_median_iops": statistics.median(x[1] for x in rows),
                   "fio_batch32_median_iops": statistics.median(x[7] for x in rows),
                   "model_median_iops": statistics.median(x[2] for x in rows)}, f, indent=1)
PY

echo
echo "host: kernel $(host_fact kernel), nproc $(host_fact cores), cpu: $(host_fact cpu_model), $(fio --version)"
if [ "$(host_fact kvm_pvm_module)" = yes ]; then
	echo "host: /sys/module/kvm_pvm exists: this machine runs nested KVM (PVM), i.e. it is itself a guest;"
	echo "      its disk is the outer hypervisor's virtual device, so absolute IOPS say little about bare metal"
else
	echo "host: /sys/module/kvm_pvm absent"
fi
echo "file: $file"
df -T "$file" | sed 's/^/  /'
[ -n "$sched" ] && echo "  io scheduler of ${base}: $sched"
exit 0
