/*
 * A small AML (ACPI Machine Language) emitter for the DSDT the VMM builds
 * (vmm/firmware/acpi.c): names, integers, strings, EISA IDs, packages, buffers,
 * scopes and devices, and the resource descriptors a _CRS needs. ACPI 6.5
 * chapter 20 (AML grammar) and 6.4 (resource data types). Encodings only:
 * what the objects mean is acpi.c's business.
 *
 * Writes into a caller's buffer; a construct that would not fit sets
 * `overflow` and the rest is dropped (the caller checks once at the end).
 * Scopes, devices and packages are opened and closed with aml_end(): the
 * PkgLength (20.2.4), which counts itself, is filled in at the end.
 */
#ifndef VMM_AML_H
#define VMM_AML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AML_MAX_DEPTH 8

struct aml {
	uint8_t *buf;
	size_t len, cap;
	bool overflow;
	size_t open[AML_MAX_DEPTH]; /* where each open construct's content starts */
	unsigned depth;
};

void aml_init(struct aml *a, uint8_t *buf, size_t cap);
void aml_bytes(struct aml *a, const void *p, size_t n);

/* NameString (20.2.2): "\\_SB_.PCI0", "_HID", "^FOO"; segments shorter
 * than 4 characters are padded with '_'. */
void aml_name_string(struct aml *a, const char *path);
/* The shortest integer encoding: ZeroOp, OneOp, Byte/Word/DWord/QWordConst. */
void aml_integer(struct aml *a, uint64_t v);
void aml_string(struct aml *a, const char *s);
/* EISAID("PNP0A03") as the DWord the ASL macro makes (19.6.35). */
void aml_eisaid(struct aml *a, const char *id);
/* A compressed EISA ID as a number, or 0 when `id` is not AAA#### form. */
uint32_t aml_eisaid_value(const char *id);

/* Name(NAME, ...): the data object comes next. */
void aml_name(struct aml *a, const char *name);
/* Opened constructs, closed by aml_end. */
void aml_scope(struct aml *a, const char *name);
void aml_device(struct aml *a, const char *name);
void aml_package(struct aml *a, uint8_t nelems);
void aml_end(struct aml *a);
/* Buffer(){bytes}: BufferOp, PkgLength, BufferSize, the bytes. */
void aml_buffer(struct aml *a, const uint8_t *p, size_t n);

/* Resource descriptors (6.4), appended to a byte buffer with the same
 * writer; aml_res_end adds the end tag. Producer windows: MinFixed,
 * MaxFixed, positive decode. */
void aml_res_io(struct aml *a, uint16_t base, uint8_t len);	  /* 6.4.2.5, 16-bit decode */
void aml_res_irq(struct aml *a, uint16_t mask);			  /* 6.4.2.1, edge high */
void aml_res_word_bus(struct aml *a, uint16_t min, uint16_t max); /* 6.4.3.5.3 */
void aml_res_word_io(struct aml *a, uint16_t min, uint16_t max);
void aml_res_dword_mem(struct aml *a, uint32_t min, uint32_t max); /* 6.4.3.5.2 */
void aml_res_end(struct aml *a);

/* PkgLength's encoding of a construct whose content is `content` bytes:
 * writes 1-4 bytes into out and returns how many, 0 if too long. */
unsigned aml_pkglen_encode(size_t content, uint8_t out[4]);

#endif
