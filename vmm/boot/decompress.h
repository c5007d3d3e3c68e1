/*
 * Host-side decompression of a bzImage payload (the compressed vmlinux ELF),
 * so the guest need not run its own decompressor in (slow, emulated) ring 0.
 */
#ifndef VMM_DECOMPRESS_H
#define VMM_DECOMPRESS_H

#include <stddef.h>
#include <stdint.h>

struct err;

enum payload_format {
	PAYLOAD_NONE, /* payload_length 0: nothing to decompress */
	PAYLOAD_GZIP,
	PAYLOAD_LZ4, /* legacy LZ4 frames, as `lz4 -l` writes them */
	PAYLOAD_XZ,
	PAYLOAD_ZSTD,
	PAYLOAD_ELF,   /* CONFIG_KERNEL_UNCOMPRESSED */
	PAYLOAD_BZIP2, /* recognised, not decompressed here */
	PAYLOAD_LZMA,
	PAYLOAD_LZO,
	PAYLOAD_UNKNOWN,
};

enum payload_format payload_detect(const uint8_t *p, size_t len);
const char *payload_format_name(enum payload_format f);
/* True for the formats payload_decompress() handles. */
int payload_supported(enum payload_format f);
/*
 * Decompresses into a malloc()ed buffer of at most `max_out` bytes.
 * Every non-gzip kernel payload ends with its 4-byte little-endian
 * decompressed size (scripts/Makefile.lib size_append); gzip carries ISIZE.
 */
int payload_decompress(enum payload_format f, const uint8_t *p, size_t len, size_t max_out,
		       uint8_t **out, size_t *out_len, struct err *e);

#endif
