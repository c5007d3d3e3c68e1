"""One run of vmm-bench: the programs it measures, the counts (full or
--quick), where raw outputs go, the progress line, and what every section
must skip."""
import os
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MEMORY_MIB = 256


class Bench:
    """What the sections run with. Sections also leave here what later
    ones need: qemu_aio (io_uring until QEMU refuses it) and the interrupt
    samples the charts draw."""

    def __init__(self, args, progress=None):
        b = args.build_dir
        self.vmm = os.path.join(b, "vmm")
        self.floor = os.path.join(b, "tests/bench/kvm_floor")
        self.shim = os.path.join(b, "tests/bench/kvmrun_shim.so")
        self.stamp = os.path.join(b, "tests/bench/exec_stamp")
        self.blk_bench = os.path.join(b, "tests/bench/blk_bench")
        self.dispatch = os.path.join(b, "tests/bench/exit-dispatch-count")
        self.irqbench_guest = os.path.join(b, "guests/irqbench.bzImage")
        self.vbench_guest = os.path.join(b, "guests/vbench.elf")
        self.qemu = shutil.which("qemu-system-x86_64")
        self.out = args.out
        self.raw = os.path.join(self.out, "raw")
        self.disk_dir = args.disk_dir
        self.counts(args.quick, args.rounds)
        self.mem_mib = MEMORY_MIB
        self.qemu_aio = "io_uring"
        self.kvm_skip = None
        self.samples = {}
        self.progress = progress
        self.only = getattr(args, "only", None)  # the sections of --only, or None: all
        self.fs_kernel = getattr(args, "fs_kernel", None)  # fs_share's bzImage, built here
        self.fs_kernel_error = getattr(args, "fs_kernel_error", None)

    def counts(self, quick, rounds):
        self.quick = quick
        self.irq_samples = 50 if quick else 5000
        self.delay_us = 200
        self.qd1 = 50 if quick else 5000
        self.qdn = 200 if quick else 50000
        self.exits = 50 if quick else 5000
        self.rounds = rounds or (1 if quick else 3)
        self.fp_runs = 2 if quick else 10
        self.disk_mib = 32 if quick else 512
        self.fio_secs = 1 if quick else 5
        self.fio_rounds = 1 if quick else 3

    def programs(self):
        """What must be built before anything runs."""
        return [self.floor, self.shim, self.stamp, self.blk_bench, self.dispatch,
                self.irqbench_guest, self.vbench_guest, self.vmm]

    def wanted(self, section):
        """Whether the section runs (--only)."""
        return self.only is None or section in self.only

    def needs_disk(self):
        """Whether a section that reads the test file runs."""
        return self.wanted("virtio") or self.wanted("multiqueue")

    def step(self, what):
        if self.progress:
            self.progress(what)

    def raw_path(self, name):
        return os.path.join(self.raw, name)

    def write_log(self, name, cmd, out, err):
        """A run's command line and both streams, in raw/."""
        with open(self.raw_path(name), "w") as f:
            f.write(" ".join(cmd) + "\n--- stdout\n" + out + "\n--- stderr\n" + err)

    def results_counts(self):
        return {"irq_samples_per_path": self.irq_samples, "virtio_qd1": self.qd1,
                "virtio_qdn": self.qdn, "exit_samples": self.exits,
                "virtio_rounds": self.rounds, "footprint_runs": self.fp_runs}


NOT_RUN = "not in --only"


def not_run():
    """A section --only left out."""
    return {"status": "skipped", "note": NOT_RUN}


def make_disk(b, disk_dir):
    """The test file of random data the virtio and multiqueue runs read."""
    b.step(f"test file: {b.disk_mib} MiB from /dev/urandom")
    path = os.path.join(disk_dir, f"blk_bench_{b.disk_mib}m.img")
    size = b.disk_mib << 20
    with open(path, "wb") as f:
        try:
            os.posix_fallocate(f.fileno(), 0, size)
        except OSError:
            pass
        with open("/dev/urandom", "rb") as r:
            left = size
            while left:
                chunk = r.read(min(left, 1 << 20))
                f.write(chunk)
                left -= len(chunk)
        f.flush()
        os.fdatasync(f.fileno())
    return path
