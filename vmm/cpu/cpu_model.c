#include "vmm/cpu/cpu_model.h"

#include "vmm/base/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MSR_IA32_SYSENTER_CS	0x174
#define MSR_IA32_SYSENTER_ESP	0x175
#define MSR_IA32_SYSENTER_EIP	0x176
#define MSR_IA32_MISC_ENABLE	0x1A0
#define MSR_MTRR_DEF_TYPE	0x2FF
#define MSR_STAR		0xC0000081
#define MSR_LSTAR		0xC0000082
#define MSR_CSTAR		0xC0000083
#define MSR_SYSCALL_MASK	0xC0000084
#define MSR_KERNEL_GS_BASE	0xC0000102
#define MSR_K7_HWCR		0xC0010015
#define MISC_ENABLE_FAST_STRING 1
#define MTRR_ENABLE_WB		((1u << 11) | 6) /* MTRRs on, default write-back */
/* AMD BKDG/PPR, MSRC001_0015 HWCR bit 24 TscFreqSel: the TSC counts at
 * the P0 frequency. Linux's bsp_init_amd() (family > 0x10) warns "[Firmware
 * Bug]: TSC doesn't count with P0 frequency!" when it is clear, and KVM
 * (since 6.7) lets userspace set it; a new vCPU has it clear. */
#define HWCR_TSC_FREQ_SEL (1ull << 24)

#define CPUID_1_ECX_HYPERVISOR (1u << 31)
#define KVM_LEAF_SIGNATURE     0x40000000u
#define KVM_LEAF_FEATURES      0x40000001u
#define KVM_LEAF_TIMING	       0x40000010u /* the hypervisor timing leaf (VMware's, QEMU's) */

static const char *const pv_bit_names[32] = {
    [0] = "clocksource",	[1] = "nop-io-delay",	     [3] = "clocksource2",
    [4] = "async-pf",		[5] = "steal-time",	     [6] = "pv-eoi",
    [7] = "pv-unhalt",		[9] = "pv-tlb-flush",	     [10] = "async-pf-vmexit",
    [11] = "pv-send-ipi",	[12] = "poll-control",	     [13] = "pv-sched-yield",
    [14] = "async-pf-int",	[15] = "msi-ext-dest-id",    [16] = "hc-map-gpa-range",
    [17] = "migration-control", [24] = "clocksource-stable",
};

enum cpu_vendor cpu_vendor_of(const struct cpuid_leaf *leaves, unsigned n)
{
	const struct cpuid_leaf *l = cpuid_find(leaves, n, 0, 0);
	char id[13];
	if (!l)
		return CPU_VENDOR_OTHER;
	memcpy(id, &l->ebx, 4);
	memcpy(id + 4, &l->edx, 4);
	memcpy(id + 8, &l->ecx, 4);
	id[12] = 0;
	if (!strcmp(id, "GenuineIntel"))
		return CPU_VENDOR_INTEL;
	if (!strcmp(id, "AuthenticAMD") || !strcmp(id, "HygonGenuine"))
		return CPU_VENDOR_AMD;
	return CPU_VENDOR_OTHER;
}

const char *cpu_vendor_name(enum cpu_vendor v)
{
	return v == CPU_VENDOR_INTEL ? "Intel" : v == CPU_VENDOR_AMD ? "AMD" : "other";
}

const struct cpuid_leaf *cpuid_find(const struct cpuid_leaf *leaves, unsigned n, uint32_t function,
				    uint32_t index)
{
	for (unsigned i = 0; i < n; i++)
		if (leaves[i].function == function && leaves[i].index == index)
			return &leaves[i];
	return NULL;
}

static bool host_has_msr(const struct host_cpu *h, uint32_t index)
{
	for (unsigned i = 0; i < h->nmsrs; i++)
		if (h->msrs[i] == index)
			return true;
	return false;
}

/* Bits that hold an APIC ID below the package: ceil(log2(vCPUs)). */
static uint32_t id_bits(unsigned n)
{
	uint32_t bits = 0;
	while ((1u << bits) < n)
		bits++;
	return bits;
}

/*
 * The leaves that carry a vCPU's own APIC ID, per vCPU: 1 (initial APIC
 * ID, logical count; SDM vol. 2A CPUID), 0xB/0x1F (x2APIC ID; the levels
 * stay as KVM reports them) on both vendors; on AMD 0x8000001E (extended
 * APIC ID, which Linux 6.12 reads when it does not use 0xB; seen as "APIC
 * ID mismatch" on a second vCPU) and 0x80000008's core count to match
 * (AMD APM vol. 3, E.4.7 and E.4.16). Intel reserves both leaves.
 */
static void leaf_topology(struct cpuid_leaf *l, enum cpu_vendor v, unsigned id, unsigned n)
{
	switch (l->function) {
	case 1: l->ebx = (l->ebx & 0x0000FFFF) | (id << 24) | ((n > 255 ? 255 : n) << 16); break;
	case 0xB:
	case 0x1F: l->edx = id; break;
	case 0x80000008:
		if (v == CPU_VENDOR_AMD)
			l->ecx = (l->ecx & ~0xF0FFu) | (id_bits(n) << 12) | (n - 1);
		break;
	case 0x8000001E:
		if (v == CPU_VENDOR_AMD) {
			l->eax = id;
			l->ebx = id & 0xFF; /* core ID; threads per core - 1 = 0 */
			l->ecx = 0;	    /* node 0, one node */
		}
		break;
	default: break;
	}
}

/*
 * The TSC's rate, told the way other VMMs tell it, so a guest need not
 * calibrate it against the PIT (which fails when ring 0 is emulated):
 * Intel's leaf 0x15 (crystal = the TSC, ratio 1:1) and 0x16 (base MHz),
 * which Linux reads on Intel only (SDM vol. 2A CPUID), where the host's
 * table has them, and the hypervisor timing leaf 0x40000010 (EAX: TSC kHz)
 * on both. On AMD the rate reaches Linux through kvmclock.
 */
static void leaf_tsc(struct cpuid_leaf *l, enum cpu_vendor v, uint32_t khz)
{
	switch (l->function) {
	case 0x15:
		if (v == CPU_VENDOR_INTEL) {
			l->eax = 1;
			l->ebx = 1;
			l->ecx = khz * 1000;
		}
		break;
	case 0x16:
		if (v == CPU_VENDOR_INTEL)
			l->eax = (l->eax & ~0xFFFFu) | (khz / 1000);
		break;
	case KVM_LEAF_SIGNATURE:
		if (l->eax < KVM_LEAF_TIMING)
			l->eax = KVM_LEAF_TIMING;
		break;
	case KVM_LEAF_TIMING: l->eax = khz; break;
	default: break;
	}
}

static uint32_t pv_shown(const struct host_cpu *h, const struct cpu_model_params *p,
			 uint32_t offered)
{
	switch (p->pv) {
	case CPU_PV_ALL: return offered;
	case CPU_PV_NONE: return 0;
	case CPU_PV_MASK: return offered & p->pv_mask;
	case CPU_PV_AUTO:
	default: return h->ring0_emulated ? offered & ~KVM_PV_HYPERCALLS : offered;
	}
}

static int model_leaves(const struct host_cpu *h, const struct cpu_model_params *p,
			struct cpu_model *m, struct err *e)
{
	bool have_kvm = false, have_timing = false;
	if (h->nleaves + 1 > CPU_MODEL_MAX_LEAVES)
		return err_set(e, ERR_HOST, "KVM_GET_SUPPORTED_CPUID has %u leaves, more than %u",
			       h->nleaves, CPU_MODEL_MAX_LEAVES - 1);
	memcpy(m->leaves, h->leaves, h->nleaves * sizeof(*h->leaves));
	m->nleaves = h->nleaves;
	for (unsigned i = 0; i < m->nleaves; i++) {
		struct cpuid_leaf *l = &m->leaves[i];
		leaf_topology(l, m->vendor, p->id, p->nvcpus);
		if (h->tsc_khz)
			leaf_tsc(l, m->vendor, h->tsc_khz);
		if (l->function == 1)
			l->ecx |= CPUID_1_ECX_HYPERVISOR;
		if (l->function == KVM_LEAF_FEATURES) {
			m->pv_offered = l->eax;
			l->eax = m->pv_shown = pv_shown(h, p, l->eax);
		}
		have_kvm |= l->function == KVM_LEAF_SIGNATURE;
		have_timing |= l->function == KVM_LEAF_TIMING;
	}
	if (!have_kvm)
		return err_set(e, ERR_HOST, "KVM_GET_SUPPORTED_CPUID has no KVM leaf 0x40000000");
	if (h->tsc_khz && !have_timing)
		m->leaves[m->nleaves++] =
		    (struct cpuid_leaf){.function = KVM_LEAF_TIMING, .eax = h->tsc_khz};
	return 0;
}

static void add_msr(struct cpu_model *m, uint32_t index, uint64_t value, const char *name,
		    bool optional)
{
	if (m->nmsrs < CPU_MODEL_MAX_MSRS)
		m->msrs[m->nmsrs++] = (struct cpu_msr){
		    .index = index, .value = value, .name = name, .optional = optional};
}

static void model_msrs(const struct host_cpu *h, struct cpu_model *m)
{
	add_msr(m, MSR_IA32_SYSENTER_CS, 0, "SYSENTER_CS", false);
	add_msr(m, MSR_IA32_SYSENTER_ESP, 0, "SYSENTER_ESP", false);
	add_msr(m, MSR_IA32_SYSENTER_EIP, 0, "SYSENTER_EIP", false);
	add_msr(m, MSR_STAR, 0, "STAR", false);
	add_msr(m, MSR_LSTAR, 0, "LSTAR", false);
	add_msr(m, MSR_CSTAR, 0, "CSTAR", false);
	add_msr(m, MSR_SYSCALL_MASK, 0, "SYSCALL_MASK", false);
	add_msr(m, MSR_KERNEL_GS_BASE, 0, "KERNEL_GS_BASE", false);
	add_msr(m, MSR_IA32_MISC_ENABLE, MISC_ENABLE_FAST_STRING, "MISC_ENABLE", true);
	add_msr(m, MSR_MTRR_DEF_TYPE, MTRR_ENABLE_WB, "MTRR_DEF_TYPE", true);
	if (m->vendor != CPU_VENDOR_AMD)
		return;
	if (host_has_msr(h, MSR_K7_HWCR))
		add_msr(m, MSR_K7_HWCR, HWCR_TSC_FREQ_SEL, "HWCR (TscFreqSel)", true);
	else
		m->note = "KVM does not list MSR_K7_HWCR: HWCR.TscFreqSel stays clear, and Linux "
			  "will print \"[Firmware Bug]: TSC doesn't count with P0 frequency!\"";
}

int cpu_model_build(const struct host_cpu *h, const struct cpu_model_params *p,
		    struct cpu_model *out, struct err *e)
{
	memset(out, 0, sizeof(*out));
	out->vendor = cpu_vendor_of(h->leaves, h->nleaves);
	if (p->nvcpus == 0 || p->id >= p->nvcpus)
		return err_set(e, ERR_HOST, "vCPU %u of %u", p->id, p->nvcpus);
	if (model_leaves(h, p, out, e))
		return -1;
	model_msrs(h, out);
	return 0;
}

void cpu_pv_names(uint32_t mask, char *out, unsigned len)
{
	unsigned pos = 0;
	if (len)
		out[0] = 0;
	for (unsigned b = 0; b < 32 && pos < len; b++) {
		if (!(mask & (1u << b)))
			continue;
		int n =
		    pv_bit_names[b]
			? snprintf(out + pos, len - pos, "%s%s", pos ? "," : "", pv_bit_names[b])
			: snprintf(out + pos, len - pos, "%sbit%u", pos ? "," : "", b);
		pos += n > 0 ? (unsigned)n : 0;
	}
	if (len && !mask)
		snprintf(out, len, "none");
}

static int pv_bit_by_name(const char *name, size_t len)
{
	for (unsigned b = 0; b < 32; b++)
		if (pv_bit_names[b] && strlen(pv_bit_names[b]) == len &&
		    !strncasecmp(pv_bit_names[b], name, len))
			return (int)b;
	return -1;
}

int cpu_pv_parse(const char *arg, enum cpu_pv_policy *pv, uint32_t *mask, struct err *e)
{
	*mask = 0;
	if (!strcmp(arg, "auto") || !strcmp(arg, "all") || !strcmp(arg, "none")) {
		*pv = arg[0] == 'a' ? (arg[1] == 'u' ? CPU_PV_AUTO : CPU_PV_ALL) : CPU_PV_NONE;
		return 0;
	}
	*pv = CPU_PV_MASK;
	for (const char *s = arg; *s;) {
		size_t len = strcspn(s, ",");
		int b = len ? pv_bit_by_name(s, len) : -1;
		if (b < 0)
			return err_set(e, ERR_INPUT,
				       "--kvm-pv: unknown feature '%.*s' (auto, all, none, or a "
				       "comma-separated list such as clocksource2,steal-time)",
				       (int)len, s);
		*mask |= 1u << b;
		s += len + (s[len] == ',');
	}
	if (!*mask)
		return err_set(e, ERR_INPUT, "--kvm-pv: empty list");
	return 0;
}
