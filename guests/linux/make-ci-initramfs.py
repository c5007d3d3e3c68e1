#!/usr/bin/env python3
"""Writes the CI initramfs: an uncompressed newc cpio with Debian's static
busybox and ci-init.sh as /init. Prints OUT's path on stdout.

Usage: make-ci-initramfs.py OUT.cpio [--busybox PATH] [--commands FILE]
                              [--command-timeout S] [--include DIR]
                              [--share UID:GID] [--root-share DIR]

Contents: /dev/console (char 5:1, the kernel's first console), /dev /proc
/sys /tmp /mnt/tools (with dev, proc, tmp under it) as directories,
/bin/busybox (from the busybox-static package, installed by name with
apt-get when missing), /bin/APPLET -> busybox for each of its applets (its
"standalone shell" finds applets through /proc/self/exe, which is not there
before /init mounts /proc), /init (ci-init.sh); with --commands, the user's
commands as /vmmci/commands (one per line) and /vmmci/timeout; with
--include DIR, DIR's files and directories under /vmmci/include with their
modes (symbolic links kept as links). The archive
is written here, in Python, so neither root (for the device node) nor the
kernel's gen_init_cpio is needed, and it is byte-for-byte reproducible
(mtimes 0, uid/gid 0).

Uncompressed on purpose: on a host that emulates guest ring 0 a 1.7 MB gzip
initramfs took ~147 s to unpack in the guest, the same as a cpio ~36 s.
"""
import argparse
import os
import shutil
import stat
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BUSYBOX = "/bin/busybox"


def ensure_busybox_static():
    """Installs busybox-static by name if its busybox is not there."""
    ok = subprocess.run(["dpkg-query", "-W", "-f=${Status}", "busybox-static"],
                        capture_output=True, text=True).stdout
    if ok.strip() == "install ok installed":
        return
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    print("make-ci-initramfs: installing busybox-static", file=sys.stderr)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(sudo + ["apt-get", "install", "-y", "-q", "--no-install-recommends",
                           "busybox-static"], check=True, env=env, stdout=sys.stderr)


def is_static(path):
    out = subprocess.run(["file", "-L", path], capture_output=True, text=True).stdout \
        if shutil.which("file") else ""
    if out:
        return "statically linked" in out
    # Without file(1): a static ELF has no PT_INTERP, so no ld.so path in it.
    with open(path, "rb") as f:
        return b"/lib64/ld-linux" not in f.read()


class Newc:
    """The 'newc' (070701) cpio format, as the kernel's initramfs reads it."""

    def __init__(self, out):
        self.out = out
        self.ino = 1000

    def _entry(self, name, mode, data=b"", rdev=(0, 0), nlink=1):
        self.ino += 1
        namez = name.encode() + b"\0"
        fields = [self.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rdev[0], rdev[1],
                  len(namez), 0]
        hdr = b"070701" + b"".join(b"%08X" % v for v in fields)
        self.out.write(hdr + namez)
        self.out.write(b"\0" * (-(len(hdr) + len(namez)) % 4))
        self.out.write(data)
        self.out.write(b"\0" * (-len(data) % 4))

    def dir(self, name, mode=0o755):
        self._entry(name, stat.S_IFDIR | mode, nlink=2)

    def file(self, name, data, mode=0o755):
        self._entry(name, stat.S_IFREG | mode, data)

    def symlink(self, name, target):
        self._entry(name, stat.S_IFLNK | 0o777, target.encode())

    def chardev(self, name, major, minor, mode=0o600):
        self._entry(name, stat.S_IFCHR | mode, rdev=(major, minor))

    def trailer(self):
        self._entry("TRAILER!!!", 0, nlink=1)
        self.out.write(b"\0" * (-self.out.tell() % 512))


def applets(busybox):
    out = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True).stdout
    return sorted(a for a in out.split() if a and "/" not in a and a != "busybox")


def add_tree(c, src, dst):
    """DIR's contents under dst, modes kept (what --include documents)."""
    for root, dirs, files in os.walk(src):
        rel = os.path.relpath(root, src)
        base = dst if rel == "." else f"{dst}/{rel}"
        for d in sorted(dirs):
            full = os.path.join(root, d)
            if os.path.islink(full):
                c.symlink(f"{base}/{d}", os.readlink(full))
            else:
                c.dir(f"{base}/{d}", stat.S_IMODE(os.stat(full).st_mode))
        for f in sorted(files):
            full = os.path.join(root, f)
            if os.path.islink(full):
                c.symlink(f"{base}/{f}", os.readlink(full))
            else:
                with open(full, "rb") as fh:
                    c.file(f"{base}/{f}", fh.read(), stat.S_IMODE(os.stat(full).st_mode))
        dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(root, d)))


# The user the commands run as unless --run-as root (issue 26): not root,
# so they cannot reach the status port (/dev/port, ioperm: CAP_SYS_RAWIO) or
# the consoles (devtmpfs makes them 0600 root) and forge /init's lines.
# With --share, ci has the shared directory's owner's ids, so the commands
# write the host's files as their owner would (1000 if the owner is root).
CI_USER = "ci:x:%d:%d:vmm-ci commands:/vmmci/include:/bin/sh\n"


def write_initramfs(path, busybox, init_script, commands=None, timeout=60, include=None,
                    run_as="user", share=None, root_share=None):
    with open(busybox, "rb") as f:
        bb = f.read()
    with open(init_script, "rb") as f:
        init = f.read()
    tmp = path + ".tmp"
    with open(tmp, "wb") as out:
        c = Newc(out)
        for d in ["dev", "proc", "sys", "bin", "mnt", "mnt/tools",
                  "mnt/tools/dev", "mnt/tools/proc", "mnt/tools/tmp"]:
            c.dir(d)
        c.dir("tmp", 0o1777)  # the commands' too (they run as user ci)
        c.chardev("dev/console", 5, 1)
        c.file("bin/busybox", bb)
        for a in applets(busybox):
            c.symlink("bin/" + a, "busybox")
        c.file("init", init)
        c.dir("etc")
        uid, gid = share or (1000, 1000)
        c.file("etc/passwd", ("root:x:0:0:root:/:/bin/sh\n" + CI_USER % (uid, gid)).encode(),
               0o644)
        c.file("etc/group", b"root:x:0:\nci:x:%d:\n" % gid, 0o644)
        c.file("etc/shells", b"/bin/sh\n", 0o644)
        if commands is not None or include or share or root_share:
            c.dir("vmmci")
        if share:  # ci-init.sh mounts the share at /mnt
            c.file("vmmci/share", b"%d %d\n" % share, 0o644)
        if root_share:  # the commands' working directory in the box's root
            c.file("vmmci/root-share", root_share.encode() + b"\n", 0o644)
            for d in ("vmmci/lower", "vmmci/rw", "vmmci/root"):
                c.dir(d)
        if commands is not None:
            c.file("vmmci/commands", "".join(x + "\n" for x in commands).encode(), 0o644)
            c.file("vmmci/timeout", f"{timeout}\n".encode(), 0o644)
            c.file("vmmci/run-as", f"{run_as}\n".encode(), 0o644)
        if include:
            c.dir("vmmci/include", stat.S_IMODE(os.stat(include).st_mode))
            add_tree(c, include, "vmmci/include")
        c.trailer()
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--busybox", help="a static busybox (default: busybox-static's)")
    ap.add_argument("--commands", help="a file of commands, one per line, run after the checks")
    ap.add_argument("--command-timeout", type=int, default=60, help="seconds per command")
    ap.add_argument("--include", help="a directory copied to /vmmci/include")
    ap.add_argument("--run-as", choices=["user", "root"], default="user",
                    help="the commands run as user ci (uid 1000, default) or as root")
    ap.add_argument("--share", metavar="UID:GID",
                    help="/init mounts the virtio-fs tag vmmci-share at /mnt, the commands' "
                    "working directory; user ci gets these ids")
    ap.add_argument("--root-share", metavar="DIR",
                    help="/init runs the commands in the box's root (virtio-fs tag "
                    "vmmci-root, read-only, under a tmpfs overlay), in DIR unless --share")
    ap.add_argument("--init", help="another /init (default: ci-init.sh), e.g. status-init.sh")
    args = ap.parse_args()
    commands = None
    if args.commands:
        with open(args.commands) as f:
            commands = [x.rstrip("\n") for x in f if x.strip()]
    if args.include and not os.path.isdir(args.include):
        sys.exit(f"make-ci-initramfs: --include {args.include}: not a directory")
    share = None
    if args.share:
        try:
            share = tuple(int(x) for x in args.share.split(":"))
            if len(share) != 2 or min(share) < 0:
                raise ValueError
        except ValueError:
            sys.exit(f"make-ci-initramfs: --share {args.share}: not UID:GID")
    if args.root_share and "\n" in args.root_share:
        sys.exit("make-ci-initramfs: --root-share: a directory name with a newline")
    busybox = args.busybox
    if not busybox:
        ensure_busybox_static()
        busybox = BUSYBOX
    if not is_static(busybox):
        sys.exit(f"make-ci-initramfs: {busybox} is not statically linked "
                 "(install busybox-static, not busybox)")
    write_initramfs(args.out, busybox, args.init or os.path.join(HERE, "ci-init.sh"), commands,
                    args.command_timeout, args.include, args.run_as, share, args.root_share)
    print(f"make-ci-initramfs: {args.out}: {os.path.getsize(args.out)} bytes", file=sys.stderr)
    print(args.out)


if __name__ == "__main__":
    main()
