"""A one-file FUSE file system whose I/O can be made to fail: the disk the
unreadable-disk test gives the VMM.

It speaks the FUSE protocol on /dev/fuse itself (include/uapi/linux/fuse.h,
protocol 7.x), so it needs no libfuse: the root directory holds one regular
file, disk.img, backed by a real file; READ and WRITE go to the backing file
with pread/pwrite, or fail with EIO while `failing` is set; while
`hold_writes` is set, WRITE requests are kept unanswered (the writer stays
blocked in the kernel) until release_writes(). The file is opened
with FOPEN_DIRECT_IO, so no page cache stands between the VMM and the server:
every guest read reaches it. One thread serves requests in order.

Needs root (mount(2) of a fuse file system); mount it in a mount namespace of
the caller's own so nothing is left behind if the caller dies.
"""
import ctypes
import errno
import os
import stat
import struct
import threading

FUSE_KERNEL_VERSION = 7
FUSE_MINOR = 31
ROOT_ID = 1
FILE_ID = 2
FILE_NAME = b"disk.img"
FOPEN_DIRECT_IO = 1
MAX_WRITE = 128 << 10

# opcodes (fuse_opcode)
LOOKUP, FORGET, GETATTR, SETATTR = 1, 2, 3, 4
OPEN, READ, WRITE, STATFS, RELEASE, FSYNC = 14, 15, 16, 17, 18, 20
FLUSH, INIT, OPENDIR, READDIR, RELEASEDIR = 25, 26, 27, 28, 29
INTERRUPT, DESTROY, BATCH_FORGET = 36, 38, 42
NO_REPLY = (FORGET, BATCH_FORGET, INTERRUPT)

IN_HEADER = struct.Struct("<IIQQIIIHH")  # len opcode unique nodeid uid gid pid extlen pad
OUT_HEADER = struct.Struct("<IiQ")  # len error unique
ATTR = struct.Struct("<QQQQQQIIIIIIIIII")  # fuse_attr, 88 bytes
READ_IN = struct.Struct("<QQIIQII")  # fh offset size read_flags lock_owner flags pad
WRITE_IN = struct.Struct("<QQIIQII")


class FuseDisk:
    def __init__(self, backing, mountpoint):
        self.backing = os.open(backing, os.O_RDWR)
        self.size = os.fstat(self.backing).st_size
        self.mountpoint = mountpoint
        self.failing = False
        self.hold_writes = False
        self.held = []  # (unique, offset, data) of WRITE requests not answered yet
        self.held_event = threading.Event()
        self._lock = threading.Lock()  # replies come from two threads with held writes
        self.counts = {"read": 0, "write": 0, "read_eio": 0, "write_eio": 0}
        self.fd = os.open("/dev/fuse", os.O_RDWR)
        libc = ctypes.CDLL(None, use_errno=True)
        opts = f"fd={self.fd},rootmode=40000,user_id=0,group_id=0".encode()
        if libc.mount(b"fusedisk", mountpoint.encode(), b"fuse.fusedisk", 0, opts) != 0:
            e = ctypes.get_errno()
            os.close(self.fd)
            raise OSError(e, f"mount fuse on {mountpoint}: {os.strerror(e)}")
        self._libc = libc
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def path(self):
        return os.path.join(self.mountpoint, FILE_NAME.decode())

    def _attr(self, nodeid):
        if nodeid == ROOT_ID:
            return ATTR.pack(ROOT_ID, 0, 0, 0, 0, 0, 0, 0, 0, stat.S_IFDIR | 0o755, 2, 0, 0, 0,
                             4096, 0)
        return ATTR.pack(FILE_ID, self.size, (self.size + 511) // 512, 0, 0, 0, 0, 0, 0,
                         stat.S_IFREG | 0o644, 1, 0, 0, 0, 4096, 0)

    def _handle(self, op, nodeid, body):
        """(error, reply payload) for one request."""
        if op == INIT:
            major, minor = struct.unpack_from("<II", body)
            out = struct.pack("<IIIIHHIIHHII", FUSE_KERNEL_VERSION, min(minor, FUSE_MINOR),
                              0, 0, 16, 12, MAX_WRITE, 1, MAX_WRITE // 4096, 0, 0, 0)
            return 0, out + bytes(64 - len(out))
        if op == LOOKUP:
            name = body.split(b"\0", 1)[0]
            if nodeid != ROOT_ID or name != FILE_NAME:
                return -errno.ENOENT, b""
            return 0, struct.pack("<QQQQII", FILE_ID, 0, 3600, 3600, 0, 0) + self._attr(FILE_ID)
        if op == GETATTR:
            return 0, struct.pack("<QII", 3600, 0, 0) + self._attr(nodeid)
        if op == OPEN:
            return 0, struct.pack("<QIi", 1, FOPEN_DIRECT_IO, 0)
        if op == READ:
            _, off, size, *_ = READ_IN.unpack_from(body)
            self.counts["read"] += 1
            if self.failing:
                self.counts["read_eio"] += 1
                return -errno.EIO, b""
            return 0, os.pread(self.backing, size, off)
        if op == WRITE:
            _, off, size, *_ = WRITE_IN.unpack_from(body)
            self.counts["write"] += 1
            if self.failing:
                self.counts["write_eio"] += 1
                return -errno.EIO, b""
            data = body[WRITE_IN.size:WRITE_IN.size + size]
            if self.hold_writes:
                return None, (off, data)
            n = os.pwrite(self.backing, data, off)
            return 0, struct.pack("<II", n, 0)
        if op == FSYNC:
            if self.failing:
                return -errno.EIO, b""
            os.fdatasync(self.backing)
            return 0, b""
        if op in (FLUSH, RELEASE, RELEASEDIR, DESTROY):
            return 0, b""
        if op == OPENDIR:
            return 0, struct.pack("<QIi", 1, 0, 0)
        return -errno.ENOSYS, b""

    def _serve(self):
        while True:
            try:
                req = os.read(self.fd, MAX_WRITE + 4096)
            except OSError as e:
                if e.errno in (errno.EINTR, errno.EAGAIN, errno.ENOENT):
                    continue  # ENOENT: an interrupted request went away
                return  # ENODEV: unmounted
            if len(req) < IN_HEADER.size:
                return
            _, op, unique, nodeid, *_ = IN_HEADER.unpack_from(req)
            if op in NO_REPLY:
                continue
            err, payload = self._handle(op, nodeid, req[IN_HEADER.size:])
            if err is None:
                with self._lock:
                    self.held.append((unique,) + payload)
                self.held_event.set()
                continue
            self._reply(unique, err, payload)

    def _reply(self, unique, err, payload):
        with self._lock:
            try:
                os.write(self.fd, OUT_HEADER.pack(OUT_HEADER.size + len(payload), err, unique)
                         + payload)
            except OSError:
                pass  # the request was interrupted meanwhile

    def release_writes(self):
        """Performs and answers the held writes; no more are held."""
        self.hold_writes = False
        with self._lock:
            held, self.held = self.held, []
        for unique, off, data in held:
            n = os.pwrite(self.backing, data, off)
            self._reply(unique, 0, struct.pack("<II", n, 0))
        return [(off, len(data)) for _, off, data in held]

    def close(self):
        self._libc.umount2(self.mountpoint.encode(), 2)  # MNT_DETACH
        os.close(self.fd)
        self.thread.join(5)
        os.close(self.backing)
