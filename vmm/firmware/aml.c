#include "vmm/firmware/aml.h"

#include <string.h>

/* AML opcodes (ACPI 6.5, 20.2). */
enum {
	AML_ZERO = 0x00,
	AML_ONE = 0x01,
	AML_NAME = 0x08,
	AML_BYTE = 0x0A,
	AML_WORD = 0x0B,
	AML_DWORD = 0x0C,
	AML_STRING = 0x0D,
	AML_QWORD = 0x0E,
	AML_SCOPE = 0x10,
	AML_BUFFER = 0x11,
	AML_PACKAGE = 0x12,
	AML_DUAL_NAME = 0x2E,
	AML_MULTI_NAME = 0x2F,
	AML_EXT = 0x5B,
	AML_EXT_DEVICE = 0x82,
	AML_ROOT = 0x5C,
	AML_PARENT = 0x5E,
};

void aml_init(struct aml *a, uint8_t *buf, size_t cap)
{
	memset(a, 0, sizeof(*a));
	a->buf = buf;
	a->cap = cap;
}

void aml_bytes(struct aml *a, const void *p, size_t n)
{
	if (a->overflow || n > a->cap - a->len) {
		a->overflow = true;
		return;
	}
	memcpy(a->buf + a->len, p, n);
	a->len += n;
}

static void aml_byte(struct aml *a, uint8_t b)
{
	aml_bytes(a, &b, 1);
}

static void aml_le(struct aml *a, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		aml_byte(a, (uint8_t)(v >> (8 * i)));
}

/* 20.2.2: NameSeg is a lead character (A-Z, _) and three of A-Z, 0-9, _. */
static void aml_name_seg(struct aml *a, const char *s, size_t n)
{
	char seg[4] = {'_', '_', '_', '_'};
	for (size_t i = 0; i < n && i < 4; i++)
		seg[i] = s[i];
	aml_bytes(a, seg, 4);
}

void aml_name_string(struct aml *a, const char *path)
{
	while (*path == '\\' || *path == '^') {
		aml_byte(a, *path == '\\' ? AML_ROOT : AML_PARENT);
		path++;
	}
	unsigned nseg = 0;
	for (const char *p = path; *p; p++)
		if (p == path || p[-1] == '.')
			nseg++;
	if (nseg == 0) {
		aml_byte(a, 0x00); /* NullName */
		return;
	}
	if (nseg == 2)
		aml_byte(a, AML_DUAL_NAME);
	else if (nseg > 2) {
		aml_byte(a, AML_MULTI_NAME);
		aml_byte(a, (uint8_t)nseg);
	}
	while (*path) {
		const char *dot = strchr(path, '.');
		size_t n = dot ? (size_t)(dot - path) : strlen(path);
		aml_name_seg(a, path, n);
		path += n + (dot ? 1 : 0);
	}
}

void aml_integer(struct aml *a, uint64_t v)
{
	if (v == 0)
		aml_byte(a, AML_ZERO);
	else if (v == 1)
		aml_byte(a, AML_ONE);
	else if (v <= 0xFF) {
		aml_byte(a, AML_BYTE);
		aml_le(a, v, 1);
	} else if (v <= 0xFFFF) {
		aml_byte(a, AML_WORD);
		aml_le(a, v, 2);
	} else if (v <= 0xFFFFFFFF) {
		aml_byte(a, AML_DWORD);
		aml_le(a, v, 4);
	} else {
		aml_byte(a, AML_QWORD);
		aml_le(a, v, 8);
	}
}

void aml_string(struct aml *a, const char *s)
{
	aml_byte(a, AML_STRING);
	aml_bytes(a, s, strlen(s) + 1);
}

uint32_t aml_eisaid_value(const char *id)
{
	if (strlen(id) != 7)
		return 0;
	uint8_t b[4];
	for (int i = 0; i < 3; i++)
		if (id[i] < 'A' || id[i] > 'Z')
			return 0;
	uint32_t hex = 0;
	for (int i = 3; i < 7; i++) {
		char c = id[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (d < 0)
			return 0;
		hex = hex << 4 | (uint32_t)d;
	}
	uint8_t c1 = (uint8_t)(id[0] & 0x1F), c2 = (uint8_t)(id[1] & 0x1F),
		c3 = (uint8_t)(id[2] & 0x1F);
	b[0] = (uint8_t)(c1 << 2 | c2 >> 3);
	b[1] = (uint8_t)((c2 & 7) << 5 | c3);
	b[2] = (uint8_t)(hex >> 8);
	b[3] = (uint8_t)hex;
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

void aml_eisaid(struct aml *a, const char *id)
{
	uint32_t v = aml_eisaid_value(id);
	if (!v) {
		a->overflow = true; /* a programming error: fail the whole table */
		return;
	}
	aml_byte(a, AML_DWORD); /* always a DWord, as iasl's EISAID() */
	aml_le(a, v, 4);
}

void aml_name(struct aml *a, const char *name)
{
	aml_byte(a, AML_NAME);
	aml_name_string(a, name);
}

unsigned aml_pkglen_encode(size_t content, uint8_t out[4])
{
	if (content + 1 < 0x40) {
		out[0] = (uint8_t)(content + 1);
		return 1;
	}
	for (unsigned n = 2; n <= 4; n++) {
		size_t total = content + n;
		if (total < (1ULL << (4 + 8 * (n - 1)))) {
			out[0] = (uint8_t)((n - 1) << 6 | (total & 0x0F));
			for (unsigned i = 1; i < n; i++)
				out[i] = (uint8_t)(total >> (4 + 8 * (i - 1)));
			return n;
		}
	}
	return 0;
}

static void aml_open(struct aml *a)
{
	if (a->depth == AML_MAX_DEPTH) {
		a->overflow = true;
		return;
	}
	a->open[a->depth++] = a->len;
}

void aml_end(struct aml *a)
{
	if (a->depth == 0) {
		a->overflow = true;
		return;
	}
	size_t start = a->open[--a->depth];
	if (a->overflow)
		return;
	uint8_t enc[4];
	unsigned n = aml_pkglen_encode(a->len - start, enc);
	if (n == 0 || n > a->cap - a->len) {
		a->overflow = true;
		return;
	}
	memmove(a->buf + start + n, a->buf + start, a->len - start);
	memcpy(a->buf + start, enc, n);
	a->len += n;
}

void aml_scope(struct aml *a, const char *name)
{
	aml_byte(a, AML_SCOPE);
	aml_open(a);
	aml_name_string(a, name);
}

void aml_device(struct aml *a, const char *name)
{
	aml_byte(a, AML_EXT);
	aml_byte(a, AML_EXT_DEVICE);
	aml_open(a);
	aml_name_string(a, name);
}

void aml_package(struct aml *a, uint8_t nelems)
{
	aml_byte(a, AML_PACKAGE);
	aml_open(a);
	aml_byte(a, nelems);
}

void aml_buffer(struct aml *a, const uint8_t *p, size_t n)
{
	aml_byte(a, AML_BUFFER);
	aml_open(a);
	aml_integer(a, n);
	aml_bytes(a, p, n);
	aml_end(a);
}

/* Resource descriptors. */
void aml_res_io(struct aml *a, uint16_t base, uint8_t len)
{
	const uint8_t d[8] = {
	    0x47, 0x01, (uint8_t)base, (uint8_t)(base >> 8), (uint8_t)base, (uint8_t)(base >> 8),
	    0x01, len};
	aml_bytes(a, d, sizeof(d));
}

void aml_res_irq(struct aml *a, uint16_t mask)
{
	const uint8_t d[3] = {0x22, (uint8_t)mask, (uint8_t)(mask >> 8)};
	aml_bytes(a, d, sizeof(d));
}

#define GENERAL_PRODUCER_FIXED 0x0C /* MaxFixed | MinFixed, producer, positive */

static void aml_res_word(struct aml *a, uint8_t type, uint8_t specific, uint16_t min, uint16_t max)
{
	uint16_t length = (uint16_t)(max - min + 1);
	const uint8_t d[16] = {0x88,
			       13,
			       0,
			       type,
			       GENERAL_PRODUCER_FIXED,
			       specific,
			       0,
			       0, /* granularity */
			       (uint8_t)min,
			       (uint8_t)(min >> 8),
			       (uint8_t)max,
			       (uint8_t)(max >> 8),
			       0,
			       0, /* translation */
			       (uint8_t)length,
			       (uint8_t)(length >> 8)};
	aml_bytes(a, d, sizeof(d));
}

void aml_res_word_bus(struct aml *a, uint16_t min, uint16_t max)
{
	aml_res_word(a, 2, 0, min, max);
}

void aml_res_word_io(struct aml *a, uint16_t min, uint16_t max)
{
	aml_res_word(a, 1, 0x03 /* ISA and non-ISA ranges */, min, max);
}

void aml_res_dword_mem(struct aml *a, uint32_t min, uint32_t max)
{
	uint8_t d[26] = {0x87, 23, 0, 0 /* memory */, GENERAL_PRODUCER_FIXED,
			 0x01 /* read-write, non-cacheable */};
	uint32_t f[5] = {0, min, max, 0, max - min + 1}; /* granularity .. length */
	for (int i = 0; i < 5; i++)
		for (int b = 0; b < 4; b++)
			d[6 + 4 * i + b] = (uint8_t)(f[i] >> (8 * b));
	aml_bytes(a, d, sizeof(d));
}

void aml_res_end(struct aml *a)
{
	const uint8_t d[2] = {0x79, 0x00}; /* checksum 0: "treat as correct" (6.4.2.9) */
	aml_bytes(a, d, sizeof(d));
}
