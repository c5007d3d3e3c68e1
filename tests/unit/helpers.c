#include "helpers.h"

#include <elf.h>
#include <errno.h>
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
	img[HDR_JUMP] = 0xEB;                          /* jmp short */
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

static void stop_rec_request(void *ctx, int code, const char *why)
{
	struct stop_rec *r = ctx;
	if (r->n++ == 0) {
		r->code = code;
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
