"""The emulated KVM host's kernel and initramfs, built once into a cache.

The kernel is Debian's own (`linux-image-6.12-amd64` by default, the
package named by VMM_HOST_KERNEL_PACKAGE otherwise), fetched by name with
`apt-get download` and unpacked with `dpkg-deb -x`: nothing is installed.
Each version is kept under CACHE/kernels/VERSION and reused without the
network; when apt cannot be reached, the newest cached version is used.

The initramfs holds Debian's busybox-static, guests/emuhost/init.sh as
/init, the agent (guests/emuhost/agent.c, compiled static here) and the
modules the host needs with their dependencies, decompressed, in load
order (/modules.order). Its name carries a hash of everything in it.

Every step runs under CACHE/.lock, so concurrent users share one cache.
"""
import fcntl
import glob
import hashlib
import importlib.util
import io
import lzma
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
GUEST_DIR = os.path.join(ROOT, "guests", "emuhost")
DEFAULT_KERNEL_PACKAGE = "linux-image-6.12-amd64"
BUSYBOX = "/bin/busybox"
# What the host needs: KVM (AMD: TCG emulates SVM only), the box's root
# over 9p, the user-network NIC, and what the guests' tests use (tap and
# veth, loop devices, FUSE).
MODULES = ["kvm-amd", "9p", "9pnet_virtio", "virtio_pci", "virtio_net", "tun", "veth",
           "loop", "fuse", "virtio_rng"]


class ImageError(Exception):
    """The host cannot be made: one line that says why."""


def log(msg):
    print(f"vmm-host: {msg}", file=sys.stderr, flush=True)


def cache_dir():
    base = os.environ.get("VMM_HOST_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "vmm", "emuhost")
    os.makedirs(base, exist_ok=True)
    return base


class CacheLock:
    """flock on CACHE/.lock for the duration of a with-block."""

    def __init__(self, cache):
        self.path = os.path.join(cache, ".lock")

    def __enter__(self):
        self.f = open(self.path, "a+")
        try:
            fcntl.flock(self.f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log("waiting for another user of the cache")
            fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        self.f.close()


def newc_module():
    """guests/linux/make-ci-initramfs.py as a module (its newc writer, busybox)."""
    path = os.path.join(ROOT, "guests", "linux", "make-ci-initramfs.py")
    spec = importlib.util.spec_from_file_location("make_ci_initramfs", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _apt(args, **kw):
    return subprocess.run(["apt-get", "-q", "-o", "APT::Sandbox::User=root"] + args,
                          capture_output=True, text=True, **kw)


def _resolve_package(meta):
    """(versioned package, version) that the meta package depends on now,
    or None when apt does not know it."""
    out = subprocess.run(["apt-cache", "depends", meta], capture_output=True,
                         text=True).stdout
    m = re.search(r"Depends: (linux-image-[0-9][^\s]*)", out)
    pkg = m.group(1) if m else meta
    pol = subprocess.run(["apt-cache", "policy", pkg], capture_output=True, text=True).stdout
    v = re.search(r"Candidate: (\S+)", pol)
    if not v or v.group(1) == "(none)":
        return None
    return pkg, v.group(1)


def _cached_kernels(cache):
    return sorted(glob.glob(os.path.join(cache, "kernels", "*", "vmlinuz")),
                  key=os.path.getmtime)


def ensure_kernel(cache):
    """The directory of an unpacked kernel package: CACHE/kernels/PKG_VER."""
    meta = os.environ.get("VMM_HOST_KERNEL_PACKAGE", DEFAULT_KERNEL_PACKAGE)
    found = _resolve_package(meta)
    if found is None and shutil.which("apt-get") and os.environ.get("VMM_HOST_OFFLINE") != "1":
        # A fresh box may have no package lists yet.
        sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
        subprocess.run(sudo + ["apt-get", "update", "-q"], capture_output=True)
        found = _resolve_package(meta)
    if found is None:
        cached = _cached_kernels(cache)
        if cached:
            return os.path.dirname(cached[-1])
        raise ImageError(f"no kernel package {meta} known to apt and none cached in "
                         f"{cache}/kernels (is apt-get update possible here?)")
    pkg, ver = found
    kdir = os.path.join(cache, "kernels", f"{pkg}_{ver}")
    if os.path.exists(os.path.join(kdir, "vmlinuz")):
        return kdir
    log(f"fetching {pkg} {ver} (Debian's kernel for the emulated host, once)")
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        r = _apt(["download", f"{pkg}={ver}"], cwd=tmp)
        debs = glob.glob(os.path.join(tmp, "*.deb"))
        if r.returncode or not debs:
            cached = _cached_kernels(cache)
            if cached:
                log(f"apt-get download failed; using the cached "
                    f"{os.path.basename(os.path.dirname(cached[-1]))}")
                return os.path.dirname(cached[-1])
            last = (r.stderr.strip().splitlines() or ["no output"])[-1]
            raise ImageError(f"cannot fetch {pkg} {ver} with apt-get download: {last}")
        unpack = os.path.join(tmp, "x")
        subprocess.run(["dpkg-deb", "-x", debs[0], unpack], check=True)
        vmlinuz = glob.glob(os.path.join(unpack, "boot", "vmlinuz-*"))
        moddirs = glob.glob(os.path.join(unpack, "lib", "modules", "*")) + glob.glob(
            os.path.join(unpack, "usr", "lib", "modules", "*"))
        if not vmlinuz or not moddirs:
            raise ImageError(f"{pkg} {ver} has no vmlinuz or no modules")
        stage = os.path.join(tmp, "k")
        os.makedirs(stage)
        shutil.move(vmlinuz[0], os.path.join(stage, "vmlinuz"))
        shutil.move(moddirs[0], os.path.join(stage, "modules"))
        with open(os.path.join(stage, "release"), "w") as f:
            f.write(os.path.basename(moddirs[0]) + "\n")
        os.makedirs(os.path.dirname(kdir), exist_ok=True)
        os.rename(stage, kdir)
    return kdir


def cached_release():
    """The release of the newest cached kernel, or None."""
    cached = _cached_kernels(cache_dir())
    return kernel_release(os.path.dirname(cached[-1])) if cached else None


def kernel_release(kdir):
    with open(os.path.join(kdir, "release")) as f:
        return f.read().strip()


def _read_module(path):
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".xz"):
        data = lzma.decompress(data)
    elif path.endswith(".zst"):
        data = subprocess.run(["zstd", "-dc", path], capture_output=True, check=True).stdout
    return data


def _modinfo_depends(elf):
    """The depends= field of an ELF module's .modinfo section."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        return []
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)

    def sec(i):
        name, _, _, _, off, size = struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize)
        return name, off, size
    _, stroff, _ = sec(shstrndx)
    for i in range(shnum):
        name, off, size = sec(i)
        end = elf.index(b"\0", stroff + name)
        if elf[stroff + name:end] == b".modinfo":
            for field in elf[off:off + size].split(b"\0"):
                if field.startswith(b"depends="):
                    return [d for d in field[8:].decode().split(",") if d]
    return []


def module_closure(moddir, wanted):
    """[(name, decompressed bytes)] of the wanted modules and their
    dependencies, each after what it needs; built-in ones are left out."""
    files = {}
    for path in glob.glob(os.path.join(moddir, "kernel", "**", "*.ko*"), recursive=True):
        name = os.path.basename(path).split(".ko")[0]
        files[name.replace("-", "_")] = path
    order, seen = [], set()

    def visit(name):
        key = name.replace("-", "_")
        if key in seen:
            return
        seen.add(key)
        if key not in files:
            return  # built in (or absent: init.sh finds out)
        data = _read_module(files[key])
        for dep in _modinfo_depends(data):
            visit(dep)
        order.append((key, data))
    for m in wanted:
        visit(m)
    return order


def build_agent(cache):
    """The agent, compiled static, keyed by its source."""
    src = os.path.join(GUEST_DIR, "agent.c")
    with open(src, "rb") as f:
        key = hashlib.sha256(f.read()).hexdigest()[:16]
    out = os.path.join(cache, f"agent-{key}")
    if not os.path.exists(out):
        cc = os.environ.get("CC", "cc")
        tmp = out + ".tmp"
        r = subprocess.run([cc, "-static", "-O2", "-Wall", "-o", tmp, src],
                           capture_output=True, text=True)
        if r.returncode:
            raise ImageError(f"cannot compile {src}: {r.stderr.strip()[-300:]}")
        os.rename(tmp, out)
    return out


def ensure_initramfs(cache, kdir):
    """CACHE/initramfs-HASH.cpio for the kernel in kdir."""
    if not os.path.exists(BUSYBOX):
        raise ImageError(f"{BUSYBOX} is missing (Debian package busybox-static)")
    agent = build_agent(cache)
    h = hashlib.sha256()
    for part in [kdir.encode(), b"\0".join(m.encode() for m in MODULES)]:
        h.update(part)
    for path in [os.path.join(GUEST_DIR, "init.sh"), agent, BUSYBOX]:
        with open(path, "rb") as f:
            h.update(f.read())
    out = os.path.join(cache, f"initramfs-{h.hexdigest()[:16]}.cpio")
    if os.path.exists(out):
        return out
    mods = module_closure(os.path.join(kdir, "modules"), MODULES)
    newc = newc_module()
    buf = io.BytesIO()
    c = newc.Newc(buf)
    for d in ["dev", "proc", "sys", "bin", "modules", "host"]:
        c.dir(d)
    c.chardev("dev/console", 5, 1)
    with open(BUSYBOX, "rb") as f:
        c.file("bin/busybox", f.read())
    for a in newc.applets(BUSYBOX):
        c.symlink("bin/" + a, "busybox")
    with open(os.path.join(GUEST_DIR, "init.sh"), "rb") as f:
        c.file("init", f.read())
    with open(agent, "rb") as f:
        c.file("agent", f.read())
    for name, data in mods:
        c.file(f"modules/{name}.ko", data, 0o644)
    c.file("modules.order", "".join(f"{n}\n" for n, _ in mods).encode(), 0o644)
    c.trailer()
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(buf.getvalue())
    os.rename(tmp, out)
    return out


def prepare():
    """(vmlinuz, initramfs, kernel release): fetched and built when missing."""
    cache = cache_dir()
    with CacheLock(cache):
        kdir = ensure_kernel(cache)
        initramfs = ensure_initramfs(cache, kdir)
    return os.path.join(kdir, "vmlinuz"), initramfs, kernel_release(kdir)
