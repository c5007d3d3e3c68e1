#include "helpers.h"

#include "vmm/machine/stop.h"

#include <check.h>
#include <elf.h>
#include <errno.h>
#include <lz4.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

void fill_noise(uint8_t *p, size_t len, uint32_t seed)
{
	uint32_t x = seed ? seed : 1;
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

static void *xmalloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);
	if (!p) {
		fprintf(stderr, "out of memory (%zu bytes)\n", n);
		abort();
	}
	return p;
}

void fake_ram_init(struct fake_ram *r, uint64_t size)
{
	r->size = size;
	r->buf = xmalloc(size);
	guest_mem_init_with(&r->m, r->buf, size);
}

void fake_ram_free(struct fake_ram *r)
{
	free(r->buf);
	r->buf = NULL;
}

bool bytes_all(const uint8_t *p, size_t len, uint8_t v)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != v)
			return false;
	return true;
}

struct bz_params bz_defaults(const uint8_t *pm, size_t pm_len)
{
	return (struct bz_params){
	    .version = 0x020F,
	    .xloadflags = XLF_KERNEL_64,
	    .setup_sects = 4,
	    .init_size = 0x400000,
	    .pref_address = 0x1000000,
	    .relocatable = 0,
	    .kernel_alignment = 0x200000,
	    .cmdline_size = 2047,
	    .initrd_addr_max = 0x7FFFFFFF,
	    .pm = pm,
	    .pm_len = pm_len,
	};
}

size_t bz_pm_offset(const struct bz_params *p)
{
	size_t sects = p->setup_sects ? p->setup_sects : 4;
	return (sects + 1) * 512;
}

uint8_t *bz_build(const struct bz_params *p, size_t *len)
{
	size_t off = bz_pm_offset(p);
	uint8_t *img = xmalloc(off + p->pm_len);
	/* Real-mode part: arbitrary non-zero bytes, then the header fields. */
	memset(img, 0x90, off);
	memset(img + HDR_SETUP_SECTS, 0, HDR_END - HDR_SETUP_SECTS);
	img[HDR_SETUP_SECTS] = p->setup_sects;
	put32(img + HDR_SYSSIZE, (uint32_t)((p->pm_len + 15) / 16));
	put16(img + HDR_BOOT_FLAG, 0xAA55);
	img[HDR_JUMP] = 0xEB;				/* jmp short */
	img[HDR_JUMP + 1] = (uint8_t)(HDR_END - 0x202); /* end of header */
	memcpy(img + HDR_HEADER, "HdrS", 4);
	put16(img + HDR_VERSION, p->version);
	img[HDR_LOADFLAGS] = LOADED_HIGH_FLAG;
	put32(img + HDR_INITRD_ADDR_MAX, p->initrd_addr_max);
	put32(img + HDR_KERNEL_ALIGNMENT, p->kernel_alignment);
	img[HDR_RELOCATABLE] = p->relocatable;
	put16(img + HDR_XLOADFLAGS, p->xloadflags);
	put32(img + HDR_CMDLINE_SIZE, p->cmdline_size);
	put32(img + HDR_PAYLOAD_OFFSET, p->payload_offset);
	put32(img + HDR_PAYLOAD_LENGTH, p->payload_length);
	put64(img + HDR_PREF_ADDRESS, p->pref_address);
	put32(img + HDR_INIT_SIZE, p->init_size);
	if (p->pm_len)
		memcpy(img + off, p->pm, p->pm_len);
	*len = off + p->pm_len;
	return img;
}

size_t elf_phdr_off(unsigned i)
{
	return sizeof(Elf64_Ehdr) + i * sizeof(Elf64_Phdr);
}

uint8_t *elf_build(uint64_t entry, const struct elf_seg *segs, unsigned nsegs, size_t *len)
{
	size_t data_off = elf_phdr_off(nsegs), total;
	size_t offs[8];
	total = (data_off + 15) & ~(size_t)15;
	for (unsigned i = 0; i < nsegs && i < 8; i++) {
		offs[i] = total;
		total += (segs[i].data ? segs[i].filesz : 0);
		total = (total + 15) & ~(size_t)15;
	}
	uint8_t *img = xmalloc(total);
	Elf64_Ehdr eh;
	memset(&eh, 0, sizeof(eh));
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_EXEC;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_entry = entry;
	eh.e_phoff = sizeof(Elf64_Ehdr);
	eh.e_ehsize = sizeof(Elf64_Ehdr);
	eh.e_phentsize = sizeof(Elf64_Phdr);
	eh.e_phnum = (Elf64_Half)nsegs;
	memcpy(img, &eh, sizeof(eh));
	for (unsigned i = 0; i < nsegs && i < 8; i++) {
		Elf64_Phdr ph;
		memset(&ph, 0, sizeof(ph));
		ph.p_type = segs[i].type;
		ph.p_flags = PF_R | PF_W | PF_X;
		ph.p_offset = offs[i];
		ph.p_vaddr = segs[i].vaddr;
		ph.p_paddr = segs[i].paddr;
		ph.p_filesz = segs[i].filesz;
		ph.p_memsz = segs[i].memsz;
		ph.p_align = 0x1000;
		memcpy(img + elf_phdr_off(i), &ph, sizeof(ph));
		if (segs[i].data && segs[i].filesz)
			memcpy(img + offs[i], segs[i].data, segs[i].filesz);
	}
	*len = total;
	return img;
}

uint8_t *gzip_bytes(const uint8_t *in, size_t len, size_t *out_len)
{
	z_stream zs;
	memset(&zs, 0, sizeof(zs));
	if (deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		abort();
	size_t cap = deflateBound(&zs, (uLong)len) + 64;
	uint8_t *out = xmalloc(cap);
	zs.next_in = (Bytef *)in;
	zs.avail_in = (uInt)len;
	zs.next_out = out;
	zs.avail_out = (uInt)cap;
	if (deflate(&zs, Z_FINISH) != Z_STREAM_END)
		abort();
	*out_len = zs.total_out;
	deflateEnd(&zs);
	return out;
}

uint8_t *lz4_legacy_bytes(const uint8_t *in, size_t len, size_t *out_len)
{
	const size_t block = 8 * MiB;
	size_t nblocks = (len + block - 1) / block;
	size_t cap = 4 + nblocks * (4 + (size_t)LZ4_compressBound((int)block)) + 4;
	uint8_t *out = xmalloc(cap);
	size_t pos = 0;
	put32(out, 0x184C2102u);
	pos = 4;
	for (size_t done = 0; done < len; done += block) {
		size_t n = len - done < block ? len - done : block;
		int c = LZ4_compress_default((const char *)in + done, (char *)out + pos + 4, (int)n,
					     (int)(cap - pos - 4));
		if (c <= 0)
			abort();
		put32(out + pos, (uint32_t)c);
		pos += 4 + (size_t)c;
	}
	put32(out + pos, (uint32_t)len); /* size_append (scripts/Makefile.lib) */
	pos += 4;
	*out_len = pos;
	return out;
}

uint8_t *bz_with_payload(const uint8_t *payload, size_t payload_len, size_t *len,
			 struct bz_params *used)
{
	size_t pm_len = BZ_PAYLOAD_STUB + payload_len + 16;
	uint8_t *pm = xmalloc(pm_len);
	fill_noise(pm, BZ_PAYLOAD_STUB, 77);
	memcpy(pm + BZ_PAYLOAD_STUB, payload, payload_len);
	memset(pm + BZ_PAYLOAD_STUB + payload_len, 0xEE, 16);
	struct bz_params p = bz_defaults(pm, pm_len);
	p.payload_offset = BZ_PAYLOAD_STUB;
	p.payload_length = (uint32_t)payload_len;
	uint8_t *img = bz_build(&p, len);
	free(pm);
	p.pm = NULL; /* freed; the image holds the bytes */
	if (used)
		*used = p;
	return img;
}

static int irq_rec_set_line(void *ctx, uint32_t gsi, int level)
{
	struct irq_rec *r = ctx;
	if (r->n < IRQ_REC_MAX) {
		r->calls[r->n].gsi = gsi;
		r->calls[r->n].level = level;
		r->n++;
	}
	return r->fail ? -EIO : 0;
}

const struct irq_sink_ops irq_rec_ops = {.set_line = irq_rec_set_line};

int irq_rec_last(const struct irq_rec *r, uint32_t gsi)
{
	for (unsigned i = r->n; i > 0; i--)
		if (r->calls[i - 1].gsi == gsi)
			return r->calls[i - 1].level;
	return -1;
}

static void stop_rec_request(void *ctx, enum machine_stop_reason reason, uint32_t value,
			     const char *why)
{
	struct stop_rec *r = ctx;
	if (r->n++ == 0) {
		r->reason = reason;
		r->value = value;
		r->code = exit_code_for_stop(reason, value); /* what ./vmm would exit with */
		snprintf(r->why, sizeof(r->why), "%s", why ? why : "");
	}
}

struct machine_ctl stop_rec_ctl(struct stop_rec *r)
{
	memset(r, 0, sizeof(*r));
	r->code = -1;
	return (struct machine_ctl){.request_stop = stop_rec_request, .ctx = r};
}

static void char_rec_write(void *ctx, const uint8_t *buf, size_t len)
{
	struct char_rec *r = ctx;
	for (size_t i = 0; i < len && r->n < sizeof(r->buf); i++)
		r->buf[r->n++] = buf[i];
}

struct char_sink char_rec_sink(struct char_rec *r)
{
	memset(r, 0, sizeof(*r));
	return (struct char_sink){.write = char_rec_write, .ctx = r};
}

/* ---- full recording sink ---- */

static struct sink_call *sink_rec_push(struct sink_rec *s, enum sink_kind kind)
{
	static struct sink_call spill;
	struct sink_call *c = s->n < SINK_REC_MAX ? &s->calls[s->n++] : &spill;
	memset(c, 0, sizeof(*c));
	c->kind = kind;
	c->fd = c->resample_fd = -1;
	return c;
}

static int sink_rec_set_line(void *ctx, uint32_t gsi, int level)
{
	struct sink_rec *s = ctx;
	struct sink_call *c = sink_rec_push(s, SINK_SET_LINE);
	c->gsi = gsi;
	c->level = level;
	s->set_line_n++;
	return 0;
}

static int sink_rec_signal_msi(void *ctx, uint64_t addr, uint32_t data)
{
	struct sink_rec *s = ctx;
	struct sink_call *c = sink_rec_push(s, SINK_SIGNAL_MSI);
	c->addr = addr;
	c->data = data;
	s->signal_msi_n++;
	return s->signal_ret;
}

static int sink_rec_set_routes(void *ctx, const struct irq_route *routes, unsigned n)
{
	struct sink_rec *s = ctx;
	struct sink_call *c = sink_rec_push(s, SINK_SET_ROUTES);
	c->nroutes = n;
	s->set_routes_n++;
	s->last_nroutes = n <= IRQ_MAX_ROUTES ? n : IRQ_MAX_ROUTES;
	memcpy(s->last_routes, routes, s->last_nroutes * sizeof(*routes));
	return s->routes_ret;
}

static int sink_rec_irqfd_assign(void *ctx, int fd, uint32_t gsi, int resample_fd)
{
	struct sink_rec *s = ctx;
	struct sink_call *c = sink_rec_push(s, SINK_IRQFD_ASSIGN);
	c->fd = fd;
	c->gsi = gsi;
	c->resample_fd = resample_fd;
	s->irqfd_n++;
	return s->irqfd_ret;
}

static int sink_rec_irqfd_deassign(void *ctx, int fd, uint32_t gsi)
{
	struct sink_rec *s = ctx;
	struct sink_call *c = sink_rec_push(s, SINK_IRQFD_DEASSIGN);
	c->fd = fd;
	c->gsi = gsi;
	s->deassign_n++;
	return 0;
}

const struct irq_sink_ops sink_rec_ops = {
    .set_line = sink_rec_set_line,
    .signal_msi = sink_rec_signal_msi,
    .set_routes = sink_rec_set_routes,
    .irqfd_assign = sink_rec_irqfd_assign,
    .irqfd_deassign = sink_rec_irqfd_deassign,
};

bool sink_rec_fd_bound(const struct sink_rec *s, int fd, uint32_t gsi)
{
	bool bound = false;
	for (unsigned i = 0; i < s->n; i++) {
		const struct sink_call *c = &s->calls[i];
		if (c->fd == fd && c->gsi == gsi && c->kind == SINK_IRQFD_ASSIGN)
			bound = true;
		else if (c->fd == fd && c->gsi == gsi && c->kind == SINK_IRQFD_DEASSIGN)
			bound = false;
	}
	return bound;
}

unsigned sink_rec_fd_calls(const struct sink_rec *s, enum sink_kind kind, int fd)
{
	unsigned n = 0;
	for (unsigned i = 0; i < s->n; i++)
		n += s->calls[i].kind == kind && s->calls[i].fd == fd;
	return n;
}

void sink_rec_reset(struct sink_rec *s)
{
	memset(s, 0, sizeof(*s));
	s->signal_ret = 1;
}

int sink_rec_find(const struct sink_rec *s, enum sink_kind kind, unsigned nth)
{
	for (unsigned i = 0; i < s->n; i++)
		if (s->calls[i].kind == kind && nth-- == 0)
			return (int)i;
	return -1;
}

unsigned sink_rec_lines(const struct sink_rec *s, uint32_t gsi, int level)
{
	unsigned n = 0;
	for (unsigned i = 0; i < s->n; i++)
		if (s->calls[i].kind == SINK_SET_LINE && s->calls[i].gsi == gsi &&
		    (level < 0 || s->calls[i].level == level))
			n++;
	return n;
}

const struct irq_route *sink_rec_route(const struct sink_rec *s, uint32_t gsi,
				       enum irq_route_type type)
{
	for (unsigned i = 0; i < s->last_nroutes; i++)
		if (s->last_routes[i].gsi == gsi && s->last_routes[i].type == type)
			return &s->last_routes[i];
	return NULL;
}

/* ---- PCI rig ---- */

void pci_rig_init(struct pci_rig *r, enum irq_msi_delivery msi, enum irq_intx_delivery intx)
{
	memset(r, 0, sizeof(*r));
	fake_ram_init(&r->ram, RIG_RAM_SIZE);
	r->logf = open_memstream(&r->logbuf, &r->loglen);
	ck_assert_ptr_nonnull(r->logf);
	log_init(&r->log, LOG_WARN, r->logf);
	bus_init(&r->pio, "pio", &r->log);
	bus_init(&r->mmio, "mmio", &r->log);
	sink_rec_reset(&r->sink);
	irq_router_init(&r->irq, &sink_rec_ops, &r->sink,
			&(struct irq_router_config){&r->log, msi, intx});
	const struct pci_bus_env env = {&r->pio, &r->mmio, &r->ram.m,
					&r->irq, &r->log,  rig_pci_window};
	int ret = pci_bus_init(&r->pci, &env);
	ck_assert_int_eq(ret, 0);
}

struct pci_testdev *pci_rig_add(struct pci_rig *r, uint8_t slot, unsigned nvectors)
{
	return pci_rig_add_mode(r, slot, nvectors, IRQ_MODE_MSIX);
}

struct pci_testdev *pci_rig_add_mode(struct pci_rig *r, uint8_t slot, unsigned nvectors,
				     enum irq_mode mode)
{
	ck_assert_uint_lt(r->ndev, RIG_MAX_DEVS);
	struct pci_testdev *t = &r->dev[r->ndev];
	char name[16];
	snprintf(name, sizeof(name), "testdev%u", r->ndev);
	ck_assert_int_eq(pci_testdev_init(t, name, &r->irq, nvectors, mode), 0);
	ck_assert_int_eq(pci_bus_add_device(&r->pci, &t->pci, slot, 1), 0);
	r->ndev++;
	return t;
}

void pci_rig_free(struct pci_rig *r)
{
	for (unsigned i = 0; i < r->ndev; i++)
		pci_testdev_destroy(&r->dev[i]);
	irq_router_destroy(&r->irq);
	bus_destroy(&r->pio);
	bus_destroy(&r->mmio);
	if (r->logf)
		fclose(r->logf);
	free(r->logbuf);
	r->logf = NULL;
	r->logbuf = NULL;
	fake_ram_free(&r->ram);
}

const char *pci_rig_log(struct pci_rig *r)
{
	fflush(r->logf);
	return r->logbuf ? r->logbuf : "";
}

uint32_t pio_in(struct pci_rig *r, uint16_t port, unsigned len)
{
	uint8_t b[4] = {0};
	bus_read(&r->pio, port, b, len);
	return len == 1 ? b[0] : len == 2 ? get16(b) : get32(b);
}

void pio_out(struct pci_rig *r, uint16_t port, unsigned len, uint32_t v)
{
	uint8_t b[4];
	put32(b, v);
	bus_write(&r->pio, port, b, len);
}

uint32_t mmio_rd32(struct pci_rig *r, uint64_t addr)
{
	uint8_t b[4] = {0};
	bus_read(&r->mmio, addr, b, 4);
	return get32(b);
}

void mmio_wr32(struct pci_rig *r, uint64_t addr, uint32_t v)
{
	uint8_t b[4];
	put32(b, v);
	bus_write(&r->mmio, addr, b, 4);
}

uint64_t mmio_rd64(struct pci_rig *r, uint64_t addr)
{
	uint8_t b[8] = {0};
	bus_read(&r->mmio, addr, b, 8);
	return get64(b);
}

void mmio_wr64(struct pci_rig *r, uint64_t addr, uint64_t v)
{
	uint8_t b[8];
	put64(b, v);
	bus_write(&r->mmio, addr, b, 8);
}

uint32_t conf1_address(uint8_t bus, uint8_t dev, uint8_t fn, unsigned reg)
{
	return 0x80000000u | (uint32_t)bus << 16 | (uint32_t)(dev & 31) << 11 |
	       (uint32_t)(fn & 7) << 8 | (reg & 0xFC);
}

uint32_t conf1_read(struct pci_rig *r, uint8_t bus, uint8_t dev, uint8_t fn, unsigned reg,
		    unsigned len)
{
	pio_out(r, 0xCF8, 4, conf1_address(bus, dev, fn, reg));
	return pio_in(r, (uint16_t)(0xCFC + (reg & 3)), len);
}

void conf1_write(struct pci_rig *r, uint8_t bus, uint8_t dev, uint8_t fn, unsigned reg,
		 unsigned len, uint32_t v)
{
	pio_out(r, 0xCF8, 4, conf1_address(bus, dev, fn, reg));
	pio_out(r, (uint16_t)(0xCFC + (reg & 3)), len, v);
}

uint32_t cfg_rd(struct pci_rig *r, uint8_t slot, unsigned off, unsigned len)
{
	return pci_config_read(&r->pci, 0, (uint8_t)(slot << 3), off, len);
}

void cfg_wr(struct pci_rig *r, uint8_t slot, unsigned off, unsigned len, uint32_t v)
{
	pci_config_write(&r->pci, 0, (uint8_t)(slot << 3), off, len, v);
}

uint64_t rig_bar_addr(struct pci_rig *r, uint8_t slot, int bar)
{
	uint32_t lo = cfg_rd(r, slot, 0x10 + 4 * (unsigned)bar, 4);
	uint64_t a = lo & ~0xFu;
	if ((lo & 0x7) == 0x4) /* 64-bit memory BAR */
		a |= (uint64_t)cfg_rd(r, slot, 0x14 + 4 * (unsigned)bar, 4) << 32;
	return a;
}

uint64_t rig_bar_size(struct pci_rig *r, uint8_t slot, int bar)
{
	unsigned off = 0x10 + 4 * (unsigned)bar;
	uint32_t old = cfg_rd(r, slot, off, 4);
	cfg_wr(r, slot, off, 4, 0xFFFFFFFFu);
	uint32_t v = cfg_rd(r, slot, off, 4);
	cfg_wr(r, slot, off, 4, old);
	if (v == 0)
		return 0;
	uint32_t mask = (old & 1) ? ~0x3u : ~0xFu;
	return (uint64_t)(uint32_t)(~(v & mask) + 1u);
}

uint64_t eventfd_take(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	uint64_t v = 0;
	if (fd < 0 || poll(&p, 1, 0) != 1 || !(p.revents & POLLIN))
		return 0;
	if (read(fd, &v, sizeof(v)) != sizeof(v))
		return 0;
	return v;
}

/* ---- a test device through its driver's eyes ---- */

void tdev_view_init(struct tdev_view *v, struct pci_rig *r, struct pci_testdev *t, uint8_t slot)
{
	v->rig = r;
	v->t = t;
	v->slot = slot;
	v->cap = (uint8_t)cfg_rd(r, slot, PCI_CAPABILITY_LIST, 1);
	v->bar0 = rig_bar_addr(r, slot, 0);
	v->bar1 = rig_bar_addr(r, slot, 1);
}

void tdev_msix_ctrl(const struct tdev_view *v, uint16_t set, uint16_t clear)
{
	uint16_t c = (uint16_t)conf1_read(v->rig, 0, v->slot, 0, v->cap + 2u, 2);
	conf1_write(v->rig, 0, v->slot, 0, v->cap + 2u, 2, (uint16_t)((c | set) & ~clear));
}

uint64_t tdev_entry(const struct tdev_view *v, unsigned n)
{
	return v->bar1 + (cfg_rd(v->rig, v->slot, v->cap + 4u, 4) & ~7u) + (uint64_t)n * 16;
}

uint64_t tdev_pba(const struct tdev_view *v)
{
	return v->bar1 + (cfg_rd(v->rig, v->slot, v->cap + 8u, 4) & ~7u);
}

bool tdev_pba_bit(const struct tdev_view *v, unsigned n)
{
	return (mmio_rd64(v->rig, tdev_pba(v) + (n / 64) * 8) >> (n % 64)) & 1;
}

void tdev_program(const struct tdev_view *v, unsigned n, uint64_t addr, uint32_t data, bool masked)
{
	uint64_t e = tdev_entry(v, n);
	mmio_wr32(v->rig, e + MSIX_E_ADDR_LO, (uint32_t)addr);
	mmio_wr32(v->rig, e + MSIX_E_ADDR_HI, (uint32_t)(addr >> 32));
	mmio_wr32(v->rig, e + MSIX_E_DATA, data);
	mmio_wr32(v->rig, e + MSIX_E_CTRL, masked ? 1 : 0);
}

void tdev_mask(const struct tdev_view *v, unsigned n, bool masked)
{
	mmio_wr32(v->rig, tdev_entry(v, n) + MSIX_E_CTRL, masked ? 1 : 0);
}

void tdev_ring(const struct tdev_view *v, uint32_t n)
{
	mmio_wr32(v->rig, v->bar0 + TESTDEV_REG_DOORBELL, n);
}

uint32_t tdev_reg(const struct tdev_view *v, unsigned reg)
{
	return mmio_rd32(v->rig, v->bar0 + reg);
}
