"""Kernels, cells, the quick matrix and shards."""
import hashlib
import os
import re
import struct
import subprocess
from dataclasses import dataclass, field

from vmmtools import host

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECIPE = re.compile(r"^(5\.10|6\.1|6\.12):(msi|nomsi|acpi-msi|acpi-nomsi|kunit)$")
SERIES = ("5.10", "6.1", "6.12")
VARIANTS = ("msi", "nomsi", "acpi-msi", "acpi-nomsi", "kunit")
BOOTS = ("bzimage", "pvh")
# (kernel, mode, cpus): the ACPI nomsi cell is INTx from the DSDT's _PRT
# with the MP table unread (X86_MPPARSE off), in the VMM's default mode.
QUICK = [("6.1:msi", "msix", 1), ("6.1:msi", "intx", 1), ("6.1:nomsi", "msix", 1),
         ("6.1:msi", "msix", 2), ("6.1:acpi-nomsi", "msix", 1)]


def host_emulates_ring0():
    """The nested, page-table based KVM (kvm_pvm), or no vmx/svm at all."""
    return host.facts()["emulates_ring0"]


def host_kind():
    """One line: which KVM this is, and whether it emulates guest ring 0."""
    return host.facts()["kvm_summary"]


@dataclass
class Kernel:
    label: str  # "6.1:msi", or the path as given
    path: str
    version: str = ""  # x.y.z when known
    variant: str = ""  # msi, nomsi, or "" (a user's kernel: not known)
    source: str = "recipe"  # recipe or user
    patched: bool = False  # carries the host workaround
    info: dict = field(default_factory=dict)

    @property
    def msi(self):
        """True/False: built with/without CONFIG_PCI_MSI; None: not known."""
        return None if not self.variant else self.variant in ("msi", "acpi-msi", "kunit")

    @property
    def acpi_only(self):
        """A recipe kernel that finds the machine through ACPI alone."""
        return self.variant.startswith("acpi-")

    @property
    def vmlinux(self):
        """The ELF kernel for a PVH cell: a recipe image's vmlinux, or the
        user's kernel itself (which must then be an ELF with the note)."""
        if self.source == "recipe":
            return os.path.join(os.path.dirname(self.path), "vmlinux")
        return self.path

    @property
    def slug(self):
        if self.source == "recipe":
            return self.label.replace(":", "-")
        digest = hashlib.sha256(self.path.encode()).hexdigest()[:6]
        name = re.sub(r"[^A-Za-z0-9.]+", "_", os.path.basename(self.path))[:32]
        return f"user-{name}-{digest}" + (f"-{self.variant}" if self.variant else "")

    @property
    def series(self):
        m = re.match(r"(\d+\.\d+)", self.version)
        return m.group(1) if m else ""

    def to_dict(self):
        return {"label": self.label, "path": self.path, "version": self.version,
                "variant": self.variant or None, "source": self.source,
                "host_workaround": self.patched, "build": self.info}


@dataclass
class Cell:
    kernel: Kernel
    mode: str  # msix or intx (the VMM's --irq-mode)
    cpus: int
    repeat: int
    full: bool = False
    boot: str = "bzimage"  # bzimage (the 64-bit boot protocol) or pvh (vmlinux, PVH entry)
    # clearcpuid= bits added by --auto-clearcpuid (user kernels only)
    extra_clearcpuid: tuple = ()

    @property
    def id(self):
        pvh = ".pvh" if self.boot == "pvh" else ""
        return f"{self.kernel.slug}{pvh}.{self.mode}.c{self.cpus}.r{self.repeat}"

    @property
    def kernel_path(self):
        return self.kernel.vmlinux if self.boot == "pvh" else self.kernel.path


def parse_list(text, allowed=None, conv=str):
    items = [conv(x.strip()) for x in text.split(",") if x.strip()]
    if allowed is not None:
        bad = [x for x in items if x not in allowed]
        if bad:
            raise ValueError(f"{bad[0]!r} is not one of {', '.join(map(str, allowed))}")
    return items


def parse_kernel_spec(spec):
    """"6.1:msi", "6.1:acpi-nomsi" -> recipe kernel; "PATH[:msi|:nomsi]" -> a user's kernel."""
    if RECIPE.match(spec):
        return Kernel(label=spec, path="", variant=spec.split(":")[1])
    path, variant = spec, ""
    m = re.match(r"^(.*):(msi|nomsi)$", spec)
    if m and os.path.exists(m.group(1)):
        path, variant = m.group(1), m.group(2)
    if not os.path.isfile(path):
        raise ValueError(f"{spec!r} is neither a recipe kernel (5.10|6.1|6.12:"
                         f"{'|'.join(VARIANTS)}) nor a kernel file")
    return Kernel(label=spec, path=os.path.abspath(path), variant=variant, source="user",
                  version=kernel_file_version(path))


def kernel_file_version(path):
    """x.y.z from a bzImage's setup header (kernel_version) or a vmlinux's banner."""
    with open(path, "rb") as f:
        head = f.read(0x1000)
        if len(head) > 0x210 and head[0x202:0x206] == b"HdrS":
            off = struct.unpack_from("<H", head, 0x20E)[0] + 0x200
            f.seek(off)
            m = re.match(rb"(\d+\.\d+(\.\d+)?)", f.read(64))
            return m.group(1).decode() if m else ""
        f.seek(0)
        m = re.search(rb"Linux version (\d+\.\d+(\.\d+)?)", f.read())
    return m.group(1).decode() if m else ""


def build_recipe_kernel(kernel, log):
    """Runs guests/linux/build-kernel.sh (cached builds return at once)."""
    series, variant = kernel.label.split(":")
    script = os.path.join(ROOT, "guests", "linux", "build-kernel.sh")
    log(f"kernel {kernel.label}: build-kernel.sh --series {series} {variant}")
    r = subprocess.run([script, "--series", series, variant], stdout=subprocess.PIPE,
                       text=True)
    if r.returncode != 0:
        raise RuntimeError(f"build-kernel.sh --series {series} {variant} failed "
                           f"(exit {r.returncode}; its messages are above)")
    kernel.path = r.stdout.strip().splitlines()[-1]
    kernel.info = read_build_info(os.path.join(os.path.dirname(kernel.path), "build-info"))
    kernel.version = kernel.info.get("release", series).split("-")[0]
    kernel.patched = kernel.info.get("host_workaround", "no") != "no"


def read_build_info(path):
    info = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("=")
            info[k] = v
    return info


def make_cells(kernels, modes, cpus, repeat, full, boots=("bzimage",)):
    cells = []
    for r in range(1, repeat + 1):
        for k in kernels:
            for b in boots:
                for m in modes:
                    for c in cpus:
                        cells.append(Cell(k, m, c, r, full, boot=b))
    return cells


def quick_cells(kernels_by_label, repeat, full):
    return [Cell(kernels_by_label[k], m, c, r, full)
            for r in range(1, repeat + 1) for k, m, c in QUICK]


def shard(cells, k, n):
    """Shard k of n (1-based): every n-th cell in the order of a hash of the
    cell ids, so the shards differ by at most one cell and none gets all of
    one mode or kernel (plain every-n-th would, as modes alternate). The
    order depends only on the ids: every machine computes the same split."""
    order = sorted(cells, key=lambda c: hashlib.sha256(c.id.encode()).hexdigest())
    mine = {c.id for i, c in enumerate(order) if i % n == k - 1}
    return [c for c in cells if c.id in mine]


def parse_shard(text):
    m = re.match(r"^(\d+)/(\d+)$", text)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise ValueError(f"--shard {text!r}: want K/N with 1 <= K <= N")
    return int(m.group(1)), int(m.group(2))
