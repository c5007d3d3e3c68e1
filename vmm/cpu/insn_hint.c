#include "vmm/cpu/insn_hint.h"

#include <stdbool.h>
#include <stddef.h>

/* Linux's X86_FEATURE_* numbers (cpufeatures.h): word 4 = CPUID 1 ECX,
 * word 9 = CPUID 7.0 EBX. */
#define F_PCLMULQDQ (4 * 32 + 1)
#define F_SSSE3	    (4 * 32 + 9)
#define F_CX16	    (4 * 32 + 13)
#define F_SSE4_1    (4 * 32 + 19)
#define F_SSE4_2    (4 * 32 + 20)
#define F_MOVBE	    (4 * 32 + 22)
#define F_POPCNT    (4 * 32 + 23)
#define F_AES	    (4 * 32 + 25)
#define F_XSAVE	    (4 * 32 + 26)
#define F_AVX	    (4 * 32 + 28)
#define F_RDRAND    (4 * 32 + 30)
#define F_RDSEED    (9 * 32 + 18)
#define F_ADX	    (9 * 32 + 19)
#define F_AVX512F   (9 * 32 + 16)
#define F_SHA_NI    (9 * 32 + 29)

enum opmap { MAP_0F, MAP_0F38, MAP_0F3A };
enum mprefix { P_NONE, P_66, P_F3, P_F2 };

/* Opcodes lo..hi of one map under one mandatory prefix (SDM vol. 2,
 * appendix A, opcode maps). */
struct op_range {
	enum opmap map;
	enum mprefix prefix;
	uint8_t lo, hi;
	struct insn_feature f;
};

static const struct op_range ranges[] = {
    {MAP_0F38, P_NONE, 0x00, 0x0B, {"pshufb/phadd/pmaddubsw (SSSE3)", "ssse3", F_SSSE3}},
    {MAP_0F38, P_66, 0x00, 0x0B, {"pshufb/phadd/pmaddubsw (SSSE3)", "ssse3", F_SSSE3}},
    {MAP_0F38, P_NONE, 0x1C, 0x1E, {"pabs (SSSE3)", "ssse3", F_SSSE3}},
    {MAP_0F38, P_66, 0x1C, 0x1E, {"pabs (SSSE3)", "ssse3", F_SSSE3}},
    {MAP_0F3A, P_NONE, 0x0F, 0x0F, {"palignr (SSSE3)", "ssse3", F_SSSE3}},
    {MAP_0F3A, P_66, 0x0F, 0x0F, {"palignr (SSSE3)", "ssse3", F_SSSE3}},
    {MAP_0F38, P_66, 0x10, 0x17, {"pblendvb/ptest (SSE4.1)", "sse4_1", F_SSE4_1}},
    {MAP_0F38, P_66, 0x20, 0x2B, {"pmovsx/pmuldq/packusdw (SSE4.1)", "sse4_1", F_SSE4_1}},
    {MAP_0F38, P_66, 0x30, 0x36, {"pmovzx (SSE4.1)", "sse4_1", F_SSE4_1}},
    {MAP_0F38, P_66, 0x37, 0x37, {"pcmpgtq (SSE4.2)", "sse4_2", F_SSE4_2}},
    {MAP_0F38, P_66, 0x38, 0x41, {"pmin/pmax/pmulld (SSE4.1)", "sse4_1", F_SSE4_1}},
    {MAP_0F3A, P_66, 0x08, 0x0E, {"round/blend (SSE4.1)", "sse4_1", F_SSE4_1}},
    {MAP_0F3A, P_66, 0x14, 0x17, {"pextr/extractps (SSE4.1)", "sse4_1", F_SSE4_1}},
    {MAP_0F3A, P_66, 0x20, 0x22, {"pinsr/insertps (SSE4.1)", "sse4_1", F_SSE4_1}},
    {MAP_0F3A, P_66, 0x40, 0x42, {"dpps/dppd/mpsadbw (SSE4.1)", "sse4_1", F_SSE4_1}},
    {MAP_0F3A, P_66, 0x60, 0x63, {"pcmpestr/pcmpistr (SSE4.2)", "sse4_2", F_SSE4_2}},
    {MAP_0F38, P_F2, 0xF0, 0xF1, {"crc32 (SSE4.2)", "sse4_2", F_SSE4_2}},
    {MAP_0F38, P_NONE, 0xF0, 0xF1, {"movbe", "movbe", F_MOVBE}},
    {MAP_0F38, P_66, 0xF0, 0xF1, {"movbe", "movbe", F_MOVBE}},
    {MAP_0F3A, P_66, 0x44, 0x44, {"pclmulqdq", "pclmulqdq", F_PCLMULQDQ}},
    {MAP_0F38, P_66, 0xDB, 0xDF, {"aesenc/aesdec/aesimc (AES-NI)", "aes", F_AES}},
    {MAP_0F3A, P_66, 0xDF, 0xDF, {"aeskeygenassist (AES-NI)", "aes", F_AES}},
    {MAP_0F38, P_NONE, 0xC8, 0xCD, {"sha1/sha256 (SHA-NI)", "sha_ni", F_SHA_NI}},
    {MAP_0F3A, P_NONE, 0xCC, 0xCC, {"sha1rnds4 (SHA-NI)", "sha_ni", F_SHA_NI}},
    {MAP_0F38, P_66, 0xF6, 0xF6, {"adcx (ADX)", "adx", F_ADX}},
    {MAP_0F38, P_F3, 0xF6, 0xF6, {"adox (ADX)", "adx", F_ADX}},
    {MAP_0F, P_F3, 0xB8, 0xB8, {"popcnt", "popcnt", F_POPCNT}},
};

static const struct insn_feature f_cx16 = {"cmpxchg16b", "cx16", F_CX16};
static const struct insn_feature f_xsave = {"xsave/xrstor", "xsave", F_XSAVE};
static const struct insn_feature f_xgetbv = {"xgetbv/xsetbv", "xsave", F_XSAVE};
static const struct insn_feature f_rdrand = {"rdrand", "rdrand", F_RDRAND};
static const struct insn_feature f_rdseed = {"rdseed", "rdseed", F_RDSEED};
static const struct insn_feature f_vex = {"a VEX-encoded instruction (AVX)", "avx", F_AVX};
static const struct insn_feature f_evex = {"an EVEX-encoded instruction (AVX-512)", "avx512f",
					   F_AVX512F};

static bool is_legacy_prefix(uint8_t b)
{
	return b == 0xF0 || b == 0xF2 || b == 0xF3 || b == 0x66 || b == 0x67 || b == 0x2E ||
	       b == 0x3E || b == 0x26 || b == 0x64 || b == 0x65 || b == 0x36;
}

/* 0F C7, 0F AE and 0F 01 are groups: the ModRM reg field picks the
 * instruction (SDM vol. 2, table A-6). */
static const struct insn_feature *group_feature(uint8_t op, uint8_t modrm, bool rex_w)
{
	uint8_t mod = modrm >> 6, reg = (modrm >> 3) & 7;
	if (op == 0xC7 && mod != 3 && reg == 1 && rex_w)
		return &f_cx16;
	if (op == 0xC7 && mod != 3 && (reg == 3 || reg == 4 || reg == 5))
		return &f_xsave; /* xrstors, xsavec, xsaves */
	if (op == 0xC7 && mod == 3 && reg == 6)
		return &f_rdrand;
	if (op == 0xC7 && mod == 3 && reg == 7)
		return &f_rdseed;
	if (op == 0xAE && mod != 3 && (reg == 4 || reg == 5 || reg == 6))
		return &f_xsave; /* xsave, xrstor, xsaveopt (without a 66 prefix) */
	if (op == 0x01 && (modrm == 0xD0 || modrm == 0xD1))
		return &f_xgetbv;
	return NULL;
}

const struct insn_feature *insn_feature_of(const uint8_t *insn, unsigned n)
{
	unsigned i = 0;
	enum mprefix prefix = P_NONE;
	bool rex_w = false;
	for (; i < n && is_legacy_prefix(insn[i]); i++)
		if (insn[i] == 0x66 || insn[i] == 0xF2 || insn[i] == 0xF3)
			prefix = insn[i] == 0x66 ? P_66 : insn[i] == 0xF3 ? P_F3 : P_F2;
	if (i < n && (insn[i] & 0xF0) == 0x40)
		rex_w = insn[i++] & 8;
	if (i < n && (insn[i] == 0xC4 || insn[i] == 0xC5))
		return &f_vex;
	if (i < n && insn[i] == 0x62)
		return &f_evex;
	if (i + 1 >= n || insn[i] != 0x0F)
		return NULL;
	enum opmap map = MAP_0F;
	uint8_t op = insn[i + 1];
	i += 2;
	if (op == 0x38 || op == 0x3A) {
		if (i >= n)
			return NULL;
		map = op == 0x38 ? MAP_0F38 : MAP_0F3A;
		op = insn[i++];
	}
	if (map == MAP_0F && i < n && prefix != P_66) {
		const struct insn_feature *g = group_feature(op, insn[i], rex_w);
		if (g)
			return g;
	}
	for (size_t k = 0; k < sizeof(ranges) / sizeof(ranges[0]); k++) {
		const struct op_range *r = &ranges[k];
		if (r->map == map && r->prefix == prefix && op >= r->lo && op <= r->hi)
			return &r->f;
	}
	return NULL;
}
