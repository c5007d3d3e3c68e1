#!/usr/bin/env python3
"""Writes small seed inputs for the fuzz targets into DIR/{blk,boot,virtq,pci,virtio,isa}.

boot: bzImages (boot protocol 2.15, 64-bit) whose payload is a tiny ELF64
vmlinux raw, gzip, LZ4-legacy, xz and zstd compressed (the non-gzip ones
with the kernel's LE32 size trailer), and the bare ELF itself.
blk/virtq/pci/virtio/isa: a few structured inputs in the targets' formats."""
import gzip, lzma, os, struct, subprocess, sys

out = sys.argv[1]


def w(sub, name, data):
    os.makedirs(os.path.join(out, sub), exist_ok=True)
    with open(os.path.join(out, sub, name), "wb") as f:
        f.write(data)


def elf(entry=0x1000000, paddr=0x1000000, code=b"\xf4" * 64, memsz=0x2000):
    ehdr = struct.pack("<4sBBBBB7sHHIQQQIHHHHHH", b"\x7fELF", 2, 1, 1, 0, 0, b"\0" * 7,
                       2, 62, 1, entry, 64, 0, 0, 64, 56, 1, 64, 0, 0)
    off = 0x100
    phdr = struct.pack("<IIQQQQQQ", 1, 7, off, 0xFFFFFFFF80000000 + paddr, paddr,
                       len(code), memsz, 0x1000)
    img = ehdr + phdr
    return img + b"\0" * (off - len(img)) + code


def bz(payload, version=0x020F, stub=0x400):
    sects = 4
    setup = bytearray(b"\x90" * ((sects + 1) * 512))
    setup[0x1F1:0x26C] = b"\0" * (0x26C - 0x1F1)
    pm = b"\xf4" * stub + payload
    setup[0x1F1] = sects
    struct.pack_into("<I", setup, 0x1F4, (len(pm) + 15) // 16)
    struct.pack_into("<H", setup, 0x1FE, 0xAA55)
    setup[0x200] = 0xEB
    setup[0x201] = 0x26C - 0x202
    setup[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", setup, 0x206, version)
    setup[0x211] = 1
    struct.pack_into("<I", setup, 0x22C, 0x7FFFFFFF)
    struct.pack_into("<I", setup, 0x230, 0x200000)
    struct.pack_into("<H", setup, 0x236, 1)
    struct.pack_into("<I", setup, 0x238, 2047)
    struct.pack_into("<I", setup, 0x248, stub if payload else 0)
    struct.pack_into("<I", setup, 0x24C, len(payload))
    struct.pack_into("<Q", setup, 0x258, 0x1000000)
    struct.pack_into("<I", setup, 0x260, 0x400000)
    return bytes(setup) + pm


def tool(args, data):
    try:
        return subprocess.run(args, input=data, stdout=subprocess.PIPE, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None


v = elf()
trailer = struct.pack("<I", len(v))
w("boot", "elf64", v)
w("boot", "bz-nopayload", bz(b""))
w("boot", "bz-elf", bz(v))
w("boot", "bz-gzip", bz(gzip.compress(v, 9)))
w("boot", "bz-xz", bz(lzma.compress(v, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC32) + trailer))
lz = tool(["lz4", "-l", "-9", "-c"], v)
if lz:
    w("boot", "bz-lz4", bz(lz + trailer))
zs = tool(["zstd", "-19", "-c", "-q"], v)
if zs:
    w("boot", "bz-zstd", bz(zs + trailer))
w("boot", "bz-2.12", bz(gzip.compress(v), version=0x020C))

# virtq: [log2 size][flags] desc table, avail ring, (avail_event), scratch.
SCR = 0x40000


def vq(log2, flags, descs, avail, extra=b""):
    size = 1 << log2
    t = bytearray(16 * size)
    for i, (a, l, f, n) in enumerate(descs):
        struct.pack_into("<QIHH", t, 16 * i, a, l, f, n)
    ev = flags & 1
    ring = struct.pack("<HH", 0, len(avail)) + b"".join(struct.pack("<H", h) for h in avail)
    ring += b"\0" * (4 + 2 * size + 2 * ev - len(ring))
    return bytes([log2, flags]) + bytes(t) + ring + (b"\0\0" if ev else b"") + extra


NEXT, WRITE, INDIRECT = 1, 2, 4
w("virtq", "chain", vq(3, 0, [(SCR, 64, NEXT, 1), (SCR + 64, 128, WRITE, 0)], [0]))
w("virtq", "two", vq(2, 1, [(SCR, 16, 0, 0), (SCR + 16, 16, WRITE, 0)], [0, 1]))
ind = b"".join(struct.pack("<QIHH", SCR + 0x100 + 32 * i, 32, NEXT | (WRITE if i else 0), i + 1)
               for i in range(3)) + struct.pack("<QIHH", SCR + 0x200, 8, WRITE, 0)
w("virtq", "indirect", vq(4, 0, [(SCR, len(ind), INDIRECT, 0)], [0], ind))
w("virtq", "end-of-ram", vq(10, 3, [(SCR, 4096, WRITE, 0)], [0, 0, 0]))

# pci: [mode][nvec1-1] then ops (see fuzz_pci.c).
def cfgaddr(slot, reg):
    return bytes([0x08, slot, reg])

ops = bytearray([0, 7])
ops += cfgaddr(3, 0x00) + bytes([0x22])                  # read vendor/device
ops += cfgaddr(3, 0x04) + bytes([0x21]) + struct.pack("<I", 0x0006)  # memory+master
ops += cfgaddr(3, 0x40) + bytes([0x22])                  # MSI-X capability
ops += cfgaddr(3, 0x40) + bytes([0x11 | 0x80]) + struct.pack("<H", 0x8000)  # enable
ops += bytes([0x24 | 0x40]) + struct.pack("<H", 0) + struct.pack("<I", 0xFEE00000)
ops += bytes([0x24 | 0x40]) + struct.pack("<H", 8) + struct.pack("<I", 0x41)
ops += bytes([0x24 | 0x40]) + struct.pack("<H", 12) + struct.pack("<I", 0)
ops += bytes([0x06, 0])                                   # ring vector 0
ops += bytes([0x25]) + struct.pack("<H", 0x14)             # read DOORBELLS
ops += bytes([0x0E, 1, 0x07, 0x08 | 0x20]) + bytes([0x0C, 4, 0x10]) + bytes([0x21]) + b"\xff" * 4
ops += bytes([0x22])                                       # BAR sizing
w("pci", "msix", bytes(ops))
w("pci", "intx", bytes([1, 0]) + bytes([0x0E, 0, 0x0F, 0x16, 0x07]))
w("pci", "bar-move", bytes([0, 3]) + bytes([0x0C, 4, 0x10, 0x21]) + struct.pack("<I", 0xE0000000)
  + bytes([0x0C, 4, 0x04, 0x21]) + struct.pack("<I", 6) + bytes([0x35, 0, 0]))

# virtio: [mode] then ops (see fuzz_virtio.c); dev 0 = rng, 1 = console.
L = {1: 0, 2: 1, 4: 2, 8: 3}


def bw(dev, off, val, n):  # BAR0 write in the common config (region 0)
    return bytes([0 | dev << 3 | L[n] << 4, off]) + val.to_bytes(n, "little")


def ramw(addr, data):
    out = b""
    for i in range(0, len(data), 64):
        chunk = data[i:i + 64]
        out += bytes([3]) + (addr + i).to_bytes(3, "little") + bytes([len(chunk) - 1]) + chunk
    return out


def init(dev, queues, feat_hi=1, feat_lo=0):
    """reset, ACK, DRIVER, features, FEATURES_OK, queues [(q, size, base)], DRIVER_OK."""
    o = bw(dev, 0x14, 0, 1) + bw(dev, 0x14, 1, 1) + bw(dev, 0x14, 3, 1)
    o += bw(dev, 0x00, 1, 4) + bytes([1 | dev << 3 | 2 << 4, 0x04])  # read DF hi
    o += bw(dev, 0x08, 0, 4) + bw(dev, 0x0C, feat_lo, 4)
    o += bw(dev, 0x08, 1, 4) + bw(dev, 0x0C, feat_hi, 4)
    o += bw(dev, 0x14, 0xB, 1) + bytes([1 | dev << 3, 0x14])  # status back
    for q, size, base in queues:
        o += bw(dev, 0x16, q, 2) + bw(dev, 0x18, size, 2)
        o += bw(dev, 0x20, base, 8) + bw(dev, 0x28, base + 16 * size, 8)
        o += bw(dev, 0x30, base + 0x1000, 8) + bw(dev, 0x1C, 1, 2)
    return o + bw(dev, 0x14, 0xF, 1)


def post(base, size, descs, heads, idx=None):
    t = b"".join(struct.pack("<QIHH", *d) for d in descs)
    ring = struct.pack("<HH", 0, len(heads) if idx is None else idx)
    ring += b"".join(struct.pack("<H", h) for h in heads)
    return ramw(base, t) + ramw(base + 16 * size, ring)


def notify(dev, q):
    return bytes([7 | dev << 3 | q << 4 | 0x80])


Q0, Q1, BUF = 0x10000, 0x20000, 0x40000
rng = init(0, [(0, 16, Q0)]) + post(Q0, 16, [(BUF, 64, WRITE, 0)], [0]) + notify(0, 0)
rng += bytes([1 | 1 << 6, 0])  # ISR read
w("virtio", "rng", bytes([0]) + rng)
w("virtio", "rng-chain", bytes([0]) + init(0, [(0, 8, Q0)]) + post(
    Q0, 8, [(BUF, 16, WRITE | NEXT, 1), (BUF + 16, 4096, WRITE, 0)], [0]) + notify(0, 0)
  + bytes([4]))
ind = b"".join(struct.pack("<QIHH", BUF + 0x100 * i, 32, WRITE | (NEXT if i < 2 else 0), i + 1)
               for i in range(3))
w("virtio", "rng-indirect", bytes([0]) + init(0, [(0, 8, Q0)], 1 | 0, 1 << 28) + ramw(BUF + 0x8000, ind)
  + post(Q0, 8, [(BUF + 0x8000, len(ind), INDIRECT, 0)], [0]) + notify(0, 0))
con = init(1, [(0, 16, Q0), (1, 16, Q1)])
con += bytes([1 | 1 << 3 | 2 << 4 | 2 << 6, 0])  # device config: cols/rows
con += ramw(BUF, b"hello\n") + post(Q1, 16, [(BUF, 6, 0, 0)], [0]) + notify(1, 1)
con += post(Q0, 16, [(BUF + 0x100, 32, WRITE, 0)], [0]) + notify(1, 0)
con += bytes([5 | 7 << 3]) + b"typed-in"
w("virtio", "console", bytes([0]) + con)
# MSI-X: enable (cap 5, message control), table entry 0 via BAR2, vectors.
msix = bytes([2 | 1 << 4, 0x04]) + struct.pack("<H", 0x0006)  # memory + bus master
msix += bytes([2 | 1 << 4 | 0x40, 5 << 5 | 2]) + struct.pack("<H", 0x8000)
msix += bytes([6, 2 << 1 | 2 << 3]) + struct.pack("<H", 0) + struct.pack("<I", 0xFEE00000)
msix += bytes([6, 2 << 1 | 2 << 3]) + struct.pack("<H", 8) + struct.pack("<I", 0x41)
msix += bytes([6, 2 << 1 | 2 << 3]) + struct.pack("<H", 12) + struct.pack("<I", 0)
msix += bw(0, 0x10, 1, 2)
m = init(0, [(0, 16, Q0)])
m = m[:-3] + bw(0, 0x16, 0, 2) + bw(0, 0x1A, 0, 2) + m[-3:]
w("virtio", "rng-msix", bytes([0]) + msix + m + post(Q0, 16, [(BUF, 64, WRITE, 0)], [0])
  + notify(0, 0) + bytes([2 | 1 << 4 | 0x80 | 0x40, 5 << 5 | 2]))
# Status via the PCI-configuration-access window (cap 4): bar, offset, length, data.
def cfgw(dev, reg, val, n):
    return bytes([2 | dev << 3 | L[n] << 4 | 0x40, 4 << 5 | reg]) + val.to_bytes(n, "little")


win = cfgw(0, 4, 0, 1) + cfgw(0, 8, 0x14, 4) + cfgw(0, 12, 1, 4) + cfgw(0, 16, 1, 4)
win += cfgw(0, 16, 3, 4) + bytes([2 | 2 << 4 | 0x40 | 0x80, 4 << 5 | 16])
win += cfgw(0, 8, 0x3000, 4) + cfgw(0, 12, 2, 4) + cfgw(0, 16, 0, 4) + bytes([4])
w("virtio", "pci-cfg-window", bytes([1]) + win + rng)

# blk (fuzz_blk.c): [mode, queue size] then ops on queue q = (op >> 3) & 3.
T_IN, T_OUT, T_FLUSH, T_GET_ID = 0, 1, 2, 3  # the target's type codes (b & 3)
WR = 0x8000  # a device-writable buffer (bit 15 of the length)


def breq(q, head, typ, sector, bufs, long=False):
    o = bytes([0 | q << 3 | (0x80 if long else 0), head, typ])
    o += sector.to_bytes(8 if long else 1, "little") + bytes([len(bufs)])
    return o + b"".join(a.to_bytes(3, "little") + struct.pack("<H", n) for a, n in bufs)


def bnotify(q):
    return bytes([1 | q << 3])


def bdone(q, release=None):  # complete q, releasing held completions first
    return bytes([3 | q << 3]) if release is None else bytes([2 | q << 3, release])


def bram(addr, data):
    return bytes([5]) + addr.to_bytes(3, "little") + bytes([len(data) - 1]) + data


B = 0x40000
w("blk", "read", bytes([0, 4]) + breq(0, 0, T_IN, 3, [(B, 1024 | WR)]) + bnotify(0) + bdone(0))
w("blk", "write-flush-read", bytes([4, 4]) + bram(B, b"\x5a" * 64)
  + breq(0, 0, T_OUT, 5, [(B, 512)]) + breq(0, 4, T_FLUSH, 0, [])
  + breq(0, 8, T_IN, 5, [(B + 0x1000, 256 | WR), (B + 0x2000, 256 | WR)]) + bnotify(0) + bdone(0))
w("blk", "get-id-unsupported", bytes([0, 3]) + breq(0, 0, T_GET_ID, 0, [(B, 20 | WR)])
  + breq(0, 4, 0x8B, 0, [(B + 0x100, 16)]) + bnotify(0) + bdone(0))
w("blk", "direct-bounce-held", bytes([2 | 16, 5]) + breq(0, 0, T_IN, 1, [(B + 1, 4096 | WR)])
  + breq(0, 3, T_OUT, 9, [(B + 0x3003, 1024)]) + bnotify(0) + bdone(0, 1) + bdone(0, 1))
w("blk", "mq-failures", bytes([0x20, 4]) + bytes([4]) + breq(1, 0, T_IN, 0, [(B, 512 | WR)])
  + bytes([4 | 0x80, 1]) + breq(1, 4, T_IN, 0, [(B, 512 | WR)]) + bytes([4 | 0x40])
  + breq(1, 8, T_FLUSH, 0, []) + bnotify(1) + bdone(1)
  + breq(0, 0, T_IN, 0, [(B, 512 | WR)]) + bnotify(0) + bdone(0))
w("blk", "ro-write", bytes([1, 4]) + breq(0, 0, T_OUT, 0, [(B, 512)]) + bnotify(0) + bdone(0))
w("blk", "past-the-end", bytes([0, 4]) + breq(0, 0, T_IN, 2**64 - 1, [(B, 512 | WR)], True)
  + breq(0, 4, T_IN, 512, [(B, 1024 | WR)], True) + bnotify(0) + bdone(0))
w("blk", "reset-in-flight", bytes([16, 4]) + breq(0, 0, T_IN, 0, [(B, 512 | WR)]) + bnotify(0)
  + bytes([7]) + breq(0, 0, T_IN, 1, [(B, 512 | WR)]) + bnotify(0) + bdone(0, 4))
w("blk", "head-in-flight-again", bytes([16, 4]) + breq(0, 0, T_IN, 0, [(B, 512 | WR)])
  + bnotify(0) + bytes([6, 0, 0]) + bnotify(0) + bdone(0, 1))

# isa (fuzz_isa.c): mode 0 = RTC (host time, then index/value pairs; index
# bit 7 reads), mode 1 = page walk (CR0, CR3, CR4, EFER, RFLAGS, addresses,
# then RAM with the page tables).
rtc = struct.pack("<q", 1615734566)
rtc += bytes([0x0B, 0x82, 0x09, 0xFF, 0x32, 0xFF, 0x09, 0x99, 0x0B, 0x02, 0x89, 0, 0xB2, 0])
w("isa", "rtc-year-overflow", bytes([0]) + rtc + bytes([0x09, 0xFF]) * 64)
PG, PAE, LME_LMA, NXE = 1 << 31 | 1 << 16 | 1, 1 << 5, 1 << 8 | 1 << 10, 1 << 11
regs = struct.pack("<QQQQQ", PG, 0x1000, PAE | 1 << 20 | 1 << 21, LME_LMA | NXE, 0)
addrs = struct.pack("<QQQ", 0x400123, 0x800000, 0xFFFF800000000000)
ram = bytearray(0x5000)
struct.pack_into("<Q", ram, 0x1000, 0x2000 | 7)           # PML4[0] -> PDPT
struct.pack_into("<Q", ram, 0x2000, 0x3000 | 7)           # PDPT[0] -> PD
struct.pack_into("<Q", ram, 0x3000 + 2 * 8, 0x4000 | 7)   # PD[2] -> PT
struct.pack_into("<Q", ram, 0x4000, 0x200000 | 7 | 1 << 63)  # PT[0]: user, NX
struct.pack_into("<Q", ram, 0x3000 + 4 * 8, 0x600000 | 0x81)  # PD[4]: 2 MiB, ring 0 read-only
w("isa", "walk-4-level", bytes([1]) + regs + addrs + bytes(ram))
regs57 = struct.pack("<QQQQQ", PG, 0x1000, PAE | 1 << 12, LME_LMA, 1 << 18)
w("isa", "walk-5-level", bytes([1]) + regs57 + addrs + bytes(ram))
# Found by this target: a host clock before year 0 made a negative BCD digit.
import base64  # noqa: E402
w("isa", "rtc-before-year-0", base64.b64decode("ACYnTmAAAAAAC4IJ/zIJ/5kLAokAsn4J/wn/Cf8J/wn/Cf8J/wn/Cf8J/wn/Cf8J/wn/Cf8J/wn/Cf8J/wn///////8J/wn/Cf8J/wn/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAP8J/wn/Cf//Cf8J/wn5Cf8J/wn/Cf8J/wn/Cf8J/wn/Cf8J/wn/Cf8J/wn/Cf8J/wn/Cf8J/wn/Cf8J/w=="))
