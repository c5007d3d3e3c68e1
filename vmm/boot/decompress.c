#include "vmm/boot/decompress.h"

#include "vmm/base/err.h"

#include <lz4.h>
#include <lzma.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#define LZ4_LEGACY_MAGIC 0x184C2102u
#define ZLIB_CHUNK	 (1u << 30)
/* Decoder memory a crafted image may ask for, at most. Linux compresses
 * with `xz --lzma2=dict=32MiB` (scripts/xz_wrap.sh) and `zstd -22 --ultra`
 * (window 2^27): both fit; a header asking a multi-GiB dictionary or
 * window is refused before anything is allocated. */
#define XZ_MEMLIMIT	   (128u << 20)
#define ZSTD_WINDOWLOG_MAX 27
#define LZ4_LEGACY_BLOCK   (8u << 20) /* legacy frames: 8 MiB blocks */

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

enum payload_format payload_detect(const uint8_t *p, size_t len)
{
	static const struct {
		enum payload_format f;
		uint8_t n;
		uint8_t magic[6];
	} magics[] = {
	    {PAYLOAD_GZIP, 2, {0x1F, 0x8B}},
	    {PAYLOAD_LZ4, 4, {0x02, 0x21, 0x4C, 0x18}},
	    {PAYLOAD_XZ, 6, {0xFD, '7', 'z', 'X', 'Z', 0x00}},
	    {PAYLOAD_ZSTD, 4, {0x28, 0xB5, 0x2F, 0xFD}},
	    {PAYLOAD_ELF, 4, {0x7F, 'E', 'L', 'F'}},
	    {PAYLOAD_BZIP2, 3, {'B', 'Z', 'h'}},
	    {PAYLOAD_LZMA, 3, {0x5D, 0x00, 0x00}},
	    {PAYLOAD_LZO, 4, {0x89, 'L', 'Z', 'O'}},
	};
	if (len == 0)
		return PAYLOAD_NONE;
	for (size_t i = 0; i < sizeof(magics) / sizeof(magics[0]); i++)
		if (len >= magics[i].n && !memcmp(p, magics[i].magic, magics[i].n))
			return magics[i].f;
	return PAYLOAD_UNKNOWN;
}

const char *payload_format_name(enum payload_format f)
{
	static const char *const names[] = {
	    "none",  "gzip", "lz4", "xz",     "zstd", "uncompressed ELF",
	    "bzip2", "lzma", "lzo", "unknown"};
	return (unsigned)f < sizeof(names) / sizeof(names[0]) ? names[f] : "unknown";
}

int payload_supported(enum payload_format f)
{
	return f == PAYLOAD_GZIP || f == PAYLOAD_LZ4 || f == PAYLOAD_XZ || f == PAYLOAD_ZSTD ||
	       f == PAYLOAD_ELF;
}

/* The size trailer of non-gzip payloads: bounds the output buffer. */
static int payload_trailer_size(const uint8_t *p, size_t len, size_t max_out, size_t *size,
				struct err *e)
{
	if (len < 8)
		return err_set(e, ERR_INPUT, "compressed payload is truncated (%zu bytes)", len);
	*size = get_le32(p + len - 4);
	if (*size == 0)
		return err_set(e, ERR_INPUT, "compressed payload declares an empty kernel");
	if (*size > max_out)
		return err_set(
		    e, ERR_INPUT,
		    "decompressed kernel would be %zu MiB, more than guest RAM allows (%zu MiB)",
		    *size >> 20, max_out >> 20);
	return 0;
}

static int decompress_gzip(const uint8_t *p, size_t len, size_t max_out, uint8_t **out,
			   size_t *out_len, struct err *e)
{
	z_stream zs;
	size_t cap;
	int ret;
	if (len < 18)
		return err_set(e, ERR_INPUT, "gzip payload is truncated (%zu bytes)", len);
	/* ISIZE (RFC 1952 section 2.3.1) is the size modulo 2^32: a hint. */
	cap = get_le32(p + len - 4);
	int capped_by_ram = cap == 0 || cap > max_out;
	if (capped_by_ram)
		cap = max_out;
	memset(&zs, 0, sizeof(zs));
	if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
		return err_set(e, ERR_HOST, "zlib: cannot initialise the inflater");
	uint8_t *buf = malloc(cap ? cap : 1);
	if (!buf) {
		inflateEnd(&zs);
		return err_set(e, ERR_HOST, "out of memory for a %zu MiB kernel", cap >> 20);
	}
	/* zlib counts in uInt (32 bits): feed and drain in pieces of at most
	 * 1 GiB, or a RAM of 4 GiB and more would be truncated to what its
	 * size is modulo 2^32. */
	zs.next_in = (Bytef *)p;
	zs.next_out = buf;
	size_t in_left = len, out_left = cap;
	for (;;) {
		if (zs.avail_in == 0 && in_left) {
			zs.avail_in = (uInt)(in_left < ZLIB_CHUNK ? in_left : ZLIB_CHUNK);
			in_left -= zs.avail_in;
		}
		if (zs.avail_out == 0 && out_left) {
			zs.avail_out = (uInt)(out_left < ZLIB_CHUNK ? out_left : ZLIB_CHUNK);
			out_left -= zs.avail_out;
		}
		ret = inflate(&zs, Z_NO_FLUSH);
		if (ret == Z_OK || (ret == Z_BUF_ERROR && ((zs.avail_in == 0 && in_left) ||
							   (zs.avail_out == 0 && out_left))))
			continue; /* progress, or a piece to refill */
		break;
	}
	size_t produced = zs.total_out;
	inflateEnd(&zs);
	if (ret != Z_STREAM_END) {
		free(buf);
		if (ret == Z_BUF_ERROR && zs.avail_out == 0 && capped_by_ram)
			return err_set(e, ERR_INPUT,
				       "gzip payload inflates past %zu MiB of guest RAM",
				       cap >> 20);
		if (ret == Z_BUF_ERROR && zs.avail_out == 0)
			return err_set(e, ERR_INPUT,
				       "gzip payload is corrupt: it inflates past its declared "
				       "size of %zu bytes",
				       cap);
		return err_set(e, ERR_INPUT, "gzip payload is corrupt or truncated (zlib: %s)",
			       zs.msg ? zs.msg : (ret == Z_BUF_ERROR ? "unexpected end" : "error"));
	}
	*out = buf;
	*out_len = produced;
	return 0;
}

static int decompress_lz4_legacy(const uint8_t *p, size_t len, size_t max_out, uint8_t **out,
				 size_t *out_len, struct err *e)
{
	size_t size, pos = 4, produced = 0, end;
	if (payload_trailer_size(p, len, max_out, &size, e))
		return -1;
	end = len - 4;
	uint8_t *buf = malloc(size);
	if (!buf)
		return err_set(e, ERR_HOST, "out of memory for a %zu MiB kernel", size >> 20);
	/* Legacy frame: magic, then (le32 compressed size, block)*; a repeated
	 * magic starts another concatenated frame. */
	while (pos + 4 <= end) {
		uint32_t csize = get_le32(p + pos);
		pos += 4;
		if (csize == LZ4_LEGACY_MAGIC)
			continue;
		if (csize == 0 || csize > end - pos ||
		    csize > (uint32_t)LZ4_compressBound(LZ4_LEGACY_BLOCK))
			goto corrupt;
		size_t room = size - produced;
		if (room > LZ4_LEGACY_BLOCK)
			room = LZ4_LEGACY_BLOCK;
		int n = LZ4_decompress_safe((const char *)p + pos, (char *)buf + produced,
					    (int)csize, (int)room);
		if (n < 0)
			goto corrupt;
		produced += (size_t)n;
		pos += csize;
	}
	if (pos != end || produced != size)
		goto corrupt;
	*out = buf;
	*out_len = produced;
	return 0;
corrupt:
	free(buf);
	return err_set(
	    e, ERR_INPUT,
	    "LZ4 payload is corrupt or truncated (at byte %zu of %zu, %zu of %zu bytes out)", pos,
	    len, produced, size);
}

static int decompress_xz(const uint8_t *p, size_t len, size_t max_out, uint8_t **out,
			 size_t *out_len, struct err *e)
{
	size_t size;
	lzma_stream xs = LZMA_STREAM_INIT;
	if (payload_trailer_size(p, len, max_out, &size, e))
		return -1;
	if (lzma_stream_decoder(&xs, XZ_MEMLIMIT, 0) != LZMA_OK)
		return err_set(e, ERR_HOST, "liblzma: cannot initialise the decoder");
	uint8_t *buf = malloc(size);
	if (!buf) {
		lzma_end(&xs);
		return err_set(e, ERR_HOST, "out of memory for a %zu MiB kernel", size >> 20);
	}
	xs.next_in = p;
	xs.avail_in = len - 4;
	xs.next_out = buf;
	xs.avail_out = size;
	lzma_ret ret = lzma_code(&xs, LZMA_FINISH);
	size_t produced = xs.total_out;
	lzma_end(&xs);
	if (ret == LZMA_MEMLIMIT_ERROR) {
		free(buf);
		return err_set(e, ERR_INPUT,
			       "xz payload asks for more than %u MiB of decoder memory (its "
			       "dictionary); Linux's own need 33 MiB",
			       XZ_MEMLIMIT >> 20);
	}
	if (ret != LZMA_STREAM_END || produced != size) {
		free(buf);
		return err_set(e, ERR_INPUT,
			       "xz payload is corrupt or truncated (liblzma error %d)", (int)ret);
	}
	*out = buf;
	*out_len = produced;
	return 0;
}

static int decompress_zstd(const uint8_t *p, size_t len, size_t max_out, uint8_t **out,
			   size_t *out_len, struct err *e)
{
	size_t size;
	if (payload_trailer_size(p, len, max_out, &size, e))
		return -1;
	ZSTD_DStream *ds = ZSTD_createDStream();
	uint8_t *buf = malloc(size);
	if (!ds || !buf) {
		ZSTD_freeDStream(ds);
		free(buf);
		return err_set(e, ERR_HOST, "out of memory for a %zu MiB kernel", size >> 20);
	}
	ZSTD_DCtx_setParameter(ds, ZSTD_d_windowLogMax, ZSTD_WINDOWLOG_MAX);
	ZSTD_inBuffer in = {p, len - 4, 0};
	ZSTD_outBuffer ob = {buf, size, 0};
	size_t r;
	do {
		r = ZSTD_decompressStream(ds, &ob, &in);
	} while (!ZSTD_isError(r) && r != 0 && in.pos < in.size && ob.pos < ob.size);
	ZSTD_freeDStream(ds);
	if (ZSTD_isError(r) && ZSTD_getErrorCode(r) == ZSTD_error_frameParameter_windowTooLarge) {
		free(buf);
		return err_set(e, ERR_INPUT,
			       "zstd payload asks for a window larger than 2^%d bytes (Linux's "
			       "own are 2^27 at most)",
			       ZSTD_WINDOWLOG_MAX);
	}
	if (ZSTD_isError(r) || r != 0 || ob.pos != size) {
		free(buf);
		return err_set(e, ERR_INPUT, "zstd payload is corrupt or truncated (%s)",
			       ZSTD_isError(r) ? ZSTD_getErrorName(r) : "unexpected end");
	}
	*out = buf;
	*out_len = ob.pos;
	return 0;
}

int payload_decompress(enum payload_format f, const uint8_t *p, size_t len, size_t max_out,
		       uint8_t **out, size_t *out_len, struct err *e)
{
	switch (f) {
	case PAYLOAD_GZIP: return decompress_gzip(p, len, max_out, out, out_len, e);
	case PAYLOAD_LZ4: return decompress_lz4_legacy(p, len, max_out, out, out_len, e);
	case PAYLOAD_XZ: return decompress_xz(p, len, max_out, out, out_len, e);
	case PAYLOAD_ZSTD: return decompress_zstd(p, len, max_out, out, out_len, e);
	case PAYLOAD_ELF:
		if (len > max_out)
			return err_set(e, ERR_INPUT,
				       "uncompressed kernel does not fit in guest RAM");
		*out = malloc(len);
		if (!*out)
			return err_set(e, ERR_HOST, "out of memory");
		memcpy(*out, p, len);
		*out_len = len;
		return 0;
	default:
		return err_set(e, ERR_INPUT, "%s payloads are not decompressed by the VMM",
			       payload_format_name(f));
	}
}
