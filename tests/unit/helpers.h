/*
 * Shared fixtures for the unit tests: fake guest RAM, images built in memory
 * (bzImage per Documentation/arch/x86/boot.rst, ELF64 per the System V ABI),
 * compressors for payloads, and recorders that stand in for the machine.
 */
#ifndef TESTS_UNIT_HELPERS_H
#define TESTS_UNIT_HELPERS_H

#include "devices/pci/pci_testdev.h"
#include "irq/irq.h"
#include "vmm/base/bus.h"
#include "vmm/base/guest_mem.h"
#include "vmm/base/layout.h"
#include "vmm/base/log.h"
#include "vmm/base/machine_ctl.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The machine's BAR window (vmm/base/layout.h), so placements match ./vmm's. */
static const struct pci_window rig_pci_window = LAYOUT_PCI_WINDOW;

#define MiB (1024ULL * 1024ULL)
#define GiB (1024ULL * MiB)

/* Little-endian field access, independent of any struct layout. */
void put16(uint8_t *p, uint16_t v);
void put32(uint8_t *p, uint32_t v);
void put64(uint8_t *p, uint64_t v);
uint16_t get16(const uint8_t *p);
uint32_t get32(const uint8_t *p);
uint64_t get64(const uint8_t *p);

/* Deterministic filler that compresses badly (so payload corruption bites). */
void fill_noise(uint8_t *p, size_t len, uint32_t seed);

/* Guest RAM over a calloc()ed buffer. */
struct fake_ram {
	struct guest_mem m;
	uint8_t *buf;
	uint64_t size;
};
void fake_ram_init(struct fake_ram *r, uint64_t size);
void fake_ram_free(struct fake_ram *r);
/* True if every byte of [off, off+len) of the host buffer equals v. */
bool bytes_all(const uint8_t *p, size_t len, uint8_t v);

/* Setup header offsets within the image and the zero page (boot.rst). */
enum {
	HDR_SETUP_SECTS = 0x1F1,
	HDR_SYSSIZE = 0x1F4,
	HDR_BOOT_FLAG = 0x1FE,
	HDR_JUMP = 0x200,
	HDR_HEADER = 0x202,
	HDR_VERSION = 0x206,
	HDR_TYPE_OF_LOADER = 0x210,
	HDR_LOADFLAGS = 0x211,
	HDR_RAMDISK_IMAGE = 0x218,
	HDR_RAMDISK_SIZE = 0x21C,
	HDR_CMD_LINE_PTR = 0x228,
	HDR_INITRD_ADDR_MAX = 0x22C,
	HDR_KERNEL_ALIGNMENT = 0x230,
	HDR_RELOCATABLE = 0x234,
	HDR_XLOADFLAGS = 0x236,
	HDR_CMDLINE_SIZE = 0x238,
	HDR_PAYLOAD_OFFSET = 0x248,
	HDR_PAYLOAD_LENGTH = 0x24C,
	HDR_PREF_ADDRESS = 0x258,
	HDR_INIT_SIZE = 0x260,
	HDR_END = 0x26C, /* end of the 2.15 header (kernel_info_offset) */
};
/* Zero page fields outside the setup header (zero-page.rst). */
enum {
	ZP_EXT_RAMDISK_IMAGE = 0x0C0,
	ZP_EXT_RAMDISK_SIZE = 0x0C4,
	ZP_EXT_CMD_LINE_PTR = 0x0C8,
	ZP_E820_ENTRIES = 0x1E8,
	ZP_E820_TABLE = 0x2D0,
	ZP_E820_ENTRY_SIZE = 20,
};
#define XLF_KERNEL_64	 0x0001
#define LOADED_HIGH_FLAG 0x01

struct bz_params {
	uint16_t version;
	uint16_t xloadflags;
	uint8_t setup_sects; /* 0 means 4 (boot.rst) */
	uint32_t init_size;
	uint64_t pref_address;
	uint8_t relocatable;
	uint32_t kernel_alignment;
	uint32_t cmdline_size;
	uint32_t initrd_addr_max;
	const uint8_t *pm; /* protected-mode code */
	size_t pm_len;
	uint32_t payload_offset, payload_length; /* relative to pm */
};
/* Sensible 2.15, 64-bit, non-relocatable defaults at pref_address 16 MiB. */
struct bz_params bz_defaults(const uint8_t *pm, size_t pm_len);
/* Returns a malloc()ed image; *len its size. */
uint8_t *bz_build(const struct bz_params *p, size_t *len);
/* Offset of the protected-mode code in an image built with these params. */
size_t bz_pm_offset(const struct bz_params *p);

struct elf_seg {
	uint32_t type; /* PT_LOAD etc. */
	uint64_t paddr, vaddr;
	const uint8_t *data;
	uint64_t filesz, memsz;
};
/* ELF64 x86-64 ET_EXEC with one program header per segment. */
uint8_t *elf_build(uint64_t entry, const struct elf_seg *segs, unsigned nsegs, size_t *len);
/* Byte offset of program header i (for patching fields in tests). */
size_t elf_phdr_off(unsigned i);

/* gzip (RFC 1952) via zlib deflateInit2 windowBits 31. */
uint8_t *gzip_bytes(const uint8_t *in, size_t len, size_t *out_len);
/* LZ4 legacy frame as `lz4 -l` writes it, plus the kernel's LE32 size trailer. */
uint8_t *lz4_legacy_bytes(const uint8_t *in, size_t len, size_t *out_len);

/* A bzImage whose payload is `payload`, placed after a 0x400-byte stub. */
uint8_t *bz_with_payload(const uint8_t *payload, size_t payload_len, size_t *len,
			 struct bz_params *used);
#define BZ_PAYLOAD_STUB 0x400

/* Recording interrupt sink. */
#define IRQ_REC_MAX 256
struct irq_rec {
	struct {
		uint32_t gsi;
		int level;
	} calls[IRQ_REC_MAX];
	unsigned n;
	int fail; /* return -EIO when set */
};
extern const struct irq_sink_ops irq_rec_ops;
/* Level of the last call for gsi, or -1 if none. */
int irq_rec_last(const struct irq_rec *r, uint32_t gsi);

/* Recording machine control. */
struct stop_rec {
	unsigned n;
	enum machine_stop_reason reason;
	uint32_t value;
	int code;
	char why[128];
};
struct machine_ctl stop_rec_ctl(struct stop_rec *r);

/* Collecting char sink. */
struct char_rec {
	uint8_t buf[8192];
	size_t n;
};
struct char_sink char_rec_sink(struct char_rec *r);

/* Full recording interrupt sink: every call, in order, with counts; the
 * last routing table sent is kept whole. signal_msi returns `signal_ret`
 * (1 = delivered, unless a test changes it). */
enum sink_kind {
	SINK_SET_LINE = 1,
	SINK_SIGNAL_MSI,
	SINK_SET_ROUTES,
	SINK_IRQFD_ASSIGN,
	SINK_IRQFD_DEASSIGN
};
struct sink_call {
	enum sink_kind kind;
	uint32_t gsi;	     /* SET_LINE, IRQFD_ASSIGN, IRQFD_DEASSIGN */
	int level;	     /* SET_LINE */
	uint64_t addr;	     /* SIGNAL_MSI */
	uint32_t data;	     /* SIGNAL_MSI */
	int fd, resample_fd; /* IRQFD_ASSIGN (fd: IRQFD_DEASSIGN too) */
	unsigned nroutes;    /* SET_ROUTES */
};
#define SINK_REC_MAX 16384
struct sink_rec {
	struct sink_call calls[SINK_REC_MAX];
	unsigned n; /* recorded calls (at most SINK_REC_MAX) */
	unsigned set_line_n, signal_msi_n, set_routes_n, irqfd_n, deassign_n;
	struct irq_route last_routes[IRQ_MAX_ROUTES];
	unsigned last_nroutes;
	int signal_ret; /* returned by signal_msi (1: delivered) */
	int routes_ret; /* returned by set_routes (0) */
	int irqfd_ret;	/* returned by irqfd_assign (0) */
};
extern const struct irq_sink_ops sink_rec_ops;
void sink_rec_reset(struct sink_rec *s);
/* Index in calls[] of the nth (0-based) call of `kind`, or -1. */
int sink_rec_find(const struct sink_rec *s, enum sink_kind kind, unsigned nth);
/* Whether `fd` is assigned as an irqfd on `gsi` now (assigns and
 * deassigns replayed). */
bool sink_rec_fd_bound(const struct sink_rec *s, int fd, uint32_t gsi);
/* How many calls of `kind` name `fd`. */
unsigned sink_rec_fd_calls(const struct sink_rec *s, enum sink_kind kind, int fd);
/* set_line calls for gsi (with `level`, or any level when level < 0). */
unsigned sink_rec_lines(const struct sink_rec *s, uint32_t gsi, int level);
/* The route for `gsi` of `type` in the last table sent, or NULL. */
const struct irq_route *sink_rec_route(const struct sink_rec *s, uint32_t gsi,
				       enum irq_route_type type);

/* A PCI machine without KVM: fake RAM, pio/mmio buses, the door over a
 * sink_rec, bus 0 with the host bridge, and room for test devices. The
 * log goes to a memory stream (warnings and up). */
#define RIG_RAM_SIZE (64 * MiB)
#define RIG_MAX_DEVS 8
struct pci_rig {
	struct fake_ram ram;
	struct bus pio, mmio;
	struct log log;
	FILE *logf;
	char *logbuf;
	size_t loglen;
	struct sink_rec sink;
	struct irq_router irq;
	struct pci_bus pci;
	struct pci_testdev dev[RIG_MAX_DEVS];
	unsigned ndev;
};
/* Fails the test (ck_abort) when the bus cannot be set up. */
void pci_rig_init(struct pci_rig *r, enum irq_msi_delivery msi, enum irq_intx_delivery intx);
/* A testdev named "testdev<i>" in `slot` on INTA#; aborts the test on failure. */
struct pci_testdev *pci_rig_add(struct pci_rig *r, uint8_t slot, unsigned nvectors);
/* The same in `mode` (IRQ_MODE_INTX: no MSI-X at all). */
struct pci_testdev *pci_rig_add_mode(struct pci_rig *r, uint8_t slot, unsigned nvectors,
				     enum irq_mode mode);
void pci_rig_free(struct pci_rig *r);
/* What the log received so far (NUL-terminated). */
const char *pci_rig_log(struct pci_rig *r);

/* Guest-style accesses. */
uint32_t pio_in(struct pci_rig *r, uint16_t port, unsigned len);
void pio_out(struct pci_rig *r, uint16_t port, unsigned len, uint32_t v);
uint32_t mmio_rd32(struct pci_rig *r, uint64_t addr);
void mmio_wr32(struct pci_rig *r, uint64_t addr, uint32_t v);
uint64_t mmio_rd64(struct pci_rig *r, uint64_t addr);
void mmio_wr64(struct pci_rig *r, uint64_t addr, uint64_t v);
/* conf1 (PCI 3.0 3.2.2.3.2): CONFIG_ADDRESS with the enable bit. */
uint32_t conf1_address(uint8_t bus, uint8_t dev, uint8_t fn, unsigned reg);
/* dword to 0xCF8, then a len-byte access at 0xCFC + (reg & 3). */
uint32_t conf1_read(struct pci_rig *r, uint8_t bus, uint8_t dev, uint8_t fn, unsigned reg,
		    unsigned len);
void conf1_write(struct pci_rig *r, uint8_t bus, uint8_t dev, uint8_t fn, unsigned reg,
		 unsigned len, uint32_t v);
/* Config access to bus 0, function 0 of `slot` through pci_config_*. */
uint32_t cfg_rd(struct pci_rig *r, uint8_t slot, unsigned off, unsigned len);
void cfg_wr(struct pci_rig *r, uint8_t slot, unsigned off, unsigned len, uint32_t v);
/* A memory BAR's address as config space says (type bits cleared). */
uint64_t rig_bar_addr(struct pci_rig *r, uint8_t slot, int bar);
/* A BAR's size by the guest's sizing dance (save, all-ones, read, restore). */
uint64_t rig_bar_size(struct pci_rig *r, uint8_t slot, int bar);
/* Counts of an eventfd: read() result, 0 when nothing is there (EAGAIN). */
uint64_t eventfd_take(int fd);

/* A test device as its guest driver sees it: MSI-X capability and BARs. */
struct tdev_view {
	struct pci_rig *rig;
	struct pci_testdev *t;
	uint8_t slot, cap;
	uint64_t bar0, bar1;
};
enum { MSIX_E_ADDR_LO = 0, MSIX_E_ADDR_HI = 4, MSIX_E_DATA = 8, MSIX_E_CTRL = 12 };
#define MSI_ADDR(dest) (0xFEE00000ULL | ((uint64_t)(dest) << 12))
#define MSI_DATA(n)    (0x40u + (n))
void tdev_view_init(struct tdev_view *v, struct pci_rig *r, struct pci_testdev *t, uint8_t slot);
/* Read-modify-write of Message Control through conf1 (bits 15:14). */
void tdev_msix_ctrl(const struct tdev_view *v, uint16_t set, uint16_t clear);
uint64_t tdev_entry(const struct tdev_view *v, unsigned n);
uint64_t tdev_pba(const struct tdev_view *v);
bool tdev_pba_bit(const struct tdev_view *v, unsigned n);
/* Four dword writes: address low, high, data, vector control. */
void tdev_program(const struct tdev_view *v, unsigned n, uint64_t addr, uint32_t data, bool masked);
void tdev_mask(const struct tdev_view *v, unsigned n, bool masked);
void tdev_ring(const struct tdev_view *v, uint32_t n);
uint32_t tdev_reg(const struct tdev_view *v, unsigned reg);

#endif
