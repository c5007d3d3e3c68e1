/*
 * The vCPU model (vmm/cpu/cpu_model.h) over the recorded tables of real hosts
 * of our kind (the .txt files in tests/unit/hosts/, AMD and Intel), so each vendor's
 * path is checked on every box. Every case runs on every table; what a
 * vendor's rule says comes from the SDM (Intel) and the APM/PPR (AMD):
 * the leaves that carry the APIC ID, the TSC rate, HWCR.TscFreqSel, and
 * that nothing else KVM offers is changed.
 */
#include "vmm/base/err.h"
#include "vmm/cpu/cpu_model.h"

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef HOSTS_DIR
#error "HOSTS_DIR: the recorded tables (meson passes it)"
#endif

#define MAX_HOSTS 8
#define HWCR	  0xC0010015u

struct recorded_host {
	char name[64];
	enum cpu_vendor vendor; /* from the file's name: amd-* or intel-* */
	struct cpuid_leaf leaves[256];
	unsigned nleaves;
	uint32_t msrs[1024];
	unsigned nmsrs;
};

static struct recorded_host hosts[MAX_HOSTS];
static unsigned nhosts;

/* The format dump_host_tables.c writes: '#' lines name the section. */
static void load_host(const char *dir, const char *file)
{
	char path[512], line[8192];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	FILE *f = fopen(path, "r");
	ck_assert_msg(f, "cannot open %s", path);
	struct recorded_host *h = &hosts[nhosts++];
	memset(h, 0, sizeof(*h));
	snprintf(h->name, sizeof(h->name), "%s", file);
	h->vendor = !strncmp(file, "amd-", 4)	  ? CPU_VENDOR_AMD
		    : !strncmp(file, "intel-", 6) ? CPU_VENDOR_INTEL
						  : CPU_VENDOR_OTHER;
	enum { NONE, CPUID, MSRS, OTHER } sec = NONE;
	while (fgets(line, sizeof(line), f)) {
		if (line[0] == '#') {
			sec = strstr(line, "KVM_GET_SUPPORTED_CPUID")  ? CPUID
			      : strstr(line, "KVM_GET_MSR_INDEX_LIST") ? MSRS
			      : strstr(line, "KVM_GET_MSR_FEATURE")    ? OTHER
								       : sec;
			continue;
		}
		if (sec == CPUID) {
			struct cpuid_leaf *l = &h->leaves[h->nleaves];
			if (sscanf(line, "%x %x %x %x %x %x %x", &l->function, &l->index, &l->flags,
				   &l->eax, &l->ebx, &l->ecx, &l->edx) == 7)
				h->nleaves++;
		} else if (sec == MSRS) {
			char *s = line, *end;
			for (unsigned long v; (v = strtoul(s, &end, 16)), end != s; s = end)
				h->msrs[h->nmsrs++] = (uint32_t)v;
		}
	}
	fclose(f);
	ck_assert_msg(h->nleaves > 10, "%s: %u CPUID leaves", file, h->nleaves);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void load_hosts(void)
{
	DIR *d = opendir(HOSTS_DIR);
	char *names[MAX_HOSTS];
	unsigned n = 0;
	ck_assert_msg(d, "cannot open %s", HOSTS_DIR);
	for (struct dirent *de; (de = readdir(d));) {
		size_t len = strlen(de->d_name);
		if (len > 4 && !strcmp(de->d_name + len - 4, ".txt") && n < MAX_HOSTS)
			names[n++] = strdup(de->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof(names[0]), by_name);
	nhosts = 0;
	for (unsigned i = 0; i < n; i++) {
		load_host(HOSTS_DIR, names[i]);
		free(names[i]);
	}
}

static struct host_cpu as_host(const struct recorded_host *r, bool emulated)
{
	return (struct host_cpu){.leaves = r->leaves,
				 .nleaves = r->nleaves,
				 .msrs = r->msrs,
				 .nmsrs = r->nmsrs,
				 .tsc_khz = 2600000,
				 .ring0_emulated = emulated};
}

static struct cpu_model model;

static const struct cpu_model *build(const struct recorded_host *r, unsigned id, unsigned n)
{
	struct host_cpu h = as_host(r, true);
	struct cpu_model_params p = {.id = id, .nvcpus = n};
	struct err e = {0};
	ck_assert_msg(cpu_model_build(&h, &p, &model, &e) == 0, "%s: %s", r->name, e.msg);
	return &model;
}

static const struct cpuid_leaf *leaf(const struct cpu_model *m, uint32_t fn, uint32_t idx)
{
	return cpuid_find(m->leaves, m->nleaves, fn, idx);
}

static const struct cpu_msr *msr(const struct cpu_model *m, uint32_t index)
{
	for (unsigned i = 0; i < m->nmsrs; i++)
		if (m->msrs[i].index == index)
			return &m->msrs[i];
	return NULL;
}

/* Both vendors are recorded, so neither path goes untested. */
START_TEST(test_tables_of_both_vendors_are_recorded)
{
	bool amd = false, intel = false;
	ck_assert_uint_ge(nhosts, 2);
	for (unsigned i = 0; i < nhosts; i++) {
		ck_assert_msg(hosts[i].vendor != CPU_VENDOR_OTHER, "%s: name it amd-* or intel-*",
			      hosts[i].name);
		amd |= hosts[i].vendor == CPU_VENDOR_AMD;
		intel |= hosts[i].vendor == CPU_VENDOR_INTEL;
	}
	ck_assert_msg(amd && intel, "need an AMD and an Intel table in " HOSTS_DIR);
}
END_TEST

START_TEST(test_vendor_read_from_leaf_0)
{
	for (unsigned i = 0; i < nhosts; i++)
		ck_assert_msg(build(&hosts[i], 0, 1)->vendor == hosts[i].vendor, "%s",
			      hosts[i].name);
}
END_TEST

START_TEST(test_every_vcpu_sees_the_hypervisor_bit)
{
	for (unsigned i = 0; i < nhosts; i++)
		ck_assert_msg(leaf(build(&hosts[i], 1, 2), 1, 0)->ecx & (1u << 31), "%s",
			      hosts[i].name);
}
END_TEST

/* SDM vol. 2A CPUID leaf 1 EBX[31:24] initial APIC ID, [23:16] logical
 * processors; leaf 0xB/0x1F EDX x2APIC ID (both vendors). */
START_TEST(test_apic_id_in_leaf_1_and_0xb_per_vcpu)
{
	for (unsigned i = 0; i < nhosts; i++)
		for (unsigned id = 0; id < 3; id++) {
			const struct cpu_model *m = build(&hosts[i], id, 3);
			uint32_t ebx = leaf(m, 1, 0)->ebx;
			ck_assert_msg(ebx >> 24 == id && ((ebx >> 16) & 0xFF) == 3, "%s: ebx %#x",
				      hosts[i].name, ebx);
			ck_assert_uint_eq(ebx & 0xFFFF,
					  cpuid_find(hosts[i].leaves, hosts[i].nleaves, 1, 0)->ebx &
					      0xFFFF);
			for (unsigned j = 0; j < m->nleaves; j++)
				if (m->leaves[j].function == 0xB || m->leaves[j].function == 0x1F)
					ck_assert_uint_eq(m->leaves[j].edx, id);
		}
}
END_TEST

/* AMD APM vol. 3 E.4.16 (0x8000001E extended APIC ID, core ID) and E.4.7
 * (0x80000008 ECX NC and ApicIdSize); Intel reserves both leaves' fields,
 * so on Intel they stay as KVM gives them. */
START_TEST(test_amd_extended_topology_leaves_only_on_amd)
{
	for (unsigned i = 0; i < nhosts; i++) {
		const struct recorded_host *r = &hosts[i];
		const struct cpu_model *m = build(r, 2, 3);
		const struct cpuid_leaf *e = leaf(m, 0x8000001E, 0), *s = leaf(m, 0x80000008, 0);
		const struct cpuid_leaf *he = cpuid_find(r->leaves, r->nleaves, 0x8000001E, 0);
		const struct cpuid_leaf *hs = cpuid_find(r->leaves, r->nleaves, 0x80000008, 0);
		if (r->vendor == CPU_VENDOR_AMD) {
			ck_assert_msg(e && e->eax == 2 && e->ebx == 2 && e->ecx == 0, "%s",
				      r->name);
			ck_assert_msg(s && (s->ecx & 0xFF) == 2 && ((s->ecx >> 12) & 0xF) == 2,
				      "%s: 0x80000008 ecx %#x", r->name, s ? s->ecx : 0);
		} else {
			ck_assert_msg(!he || !memcmp(e, he, sizeof(*e)), "%s: 0x8000001E changed",
				      r->name);
			ck_assert_msg(!hs || !memcmp(s, hs, sizeof(*s)), "%s: 0x80000008 changed",
				      r->name);
		}
	}
}
END_TEST

/* Intel: leaf 0x15 (TSC = crystal * EBX/EAX) and 0x16 EAX (base MHz),
 * which Linux reads on Intel only; AMD reserves them. Both: 0x40000010. */
START_TEST(test_tsc_rate_where_each_vendor_reads_it)
{
	for (unsigned i = 0; i < nhosts; i++) {
		const struct recorded_host *r = &hosts[i];
		const struct cpu_model *m = build(r, 0, 1);
		const struct cpuid_leaf *l15 = leaf(m, 0x15, 0), *l16 = leaf(m, 0x16, 0);
		ck_assert_uint_eq(leaf(m, 0x40000010, 0)->eax, 2600000);
		ck_assert_uint_ge(leaf(m, 0x40000000, 0)->eax, 0x40000010);
		if (r->vendor == CPU_VENDOR_INTEL) {
			ck_assert_msg(l15 && l16, "%s: Intel table without 0x15/0x16", r->name);
			ck_assert_uint_eq(l15->eax, 1);
			ck_assert_uint_eq(l15->ebx, 1);
			ck_assert_uint_eq(l15->ecx, 2600000000u);
			ck_assert_uint_eq(l16->eax & 0xFFFF, 2600);
		} else {
			const struct cpuid_leaf *h15 = cpuid_find(r->leaves, r->nleaves, 0x15, 0);
			ck_assert_msg(!h15 || !memcmp(l15, h15, sizeof(*l15)),
				      "%s: AMD leaf 0x15 changed", r->name);
		}
	}
}
END_TEST

/* AMD PPR MSRC001_0015 bit 24: set on AMD, never written on Intel. */
START_TEST(test_hwcr_tsc_freq_sel_on_amd_only)
{
	for (unsigned i = 0; i < nhosts; i++) {
		const struct cpu_model *m = build(&hosts[i], 1, 2);
		const struct cpu_msr *h = msr(m, HWCR);
		if (hosts[i].vendor == CPU_VENDOR_AMD) {
			ck_assert_msg(h && h->value == (1ull << 24) && h->optional, "%s",
				      hosts[i].name);
			ck_assert_ptr_null(m->note);
		} else {
			ck_assert_msg(!h, "%s: HWCR written on Intel", hosts[i].name);
		}
	}
}
END_TEST

/* A KVM that does not list HWCR: the model says so and leaves it alone. */
START_TEST(test_hwcr_not_listed_is_said_not_written)
{
	for (unsigned i = 0; i < nhosts; i++) {
		if (hosts[i].vendor != CPU_VENDOR_AMD)
			continue;
		struct host_cpu h = as_host(&hosts[i], true);
		h.nmsrs = 0;
		struct cpu_model_params p = {.id = 0, .nvcpus = 1};
		struct err e = {0};
		ck_assert_int_eq(cpu_model_build(&h, &p, &model, &e), 0);
		ck_assert_ptr_null(msr(&model, HWCR));
		ck_assert_ptr_nonnull(model.note);
		ck_assert_ptr_nonnull(strstr(model.note, "TscFreqSel"));
	}
}
END_TEST

/* Only the documented fields differ from what KVM offers. */
START_TEST(test_nothing_else_changes)
{
	for (unsigned i = 0; i < nhosts; i++) {
		const struct recorded_host *r = &hosts[i];
		const struct cpu_model *m = build(r, 1, 2);
		ck_assert_uint_ge(m->nleaves, r->nleaves);
		ck_assert_uint_le(m->nleaves, r->nleaves + 1);
		for (unsigned j = 0; j < r->nleaves; j++) {
			const struct cpuid_leaf *h = &r->leaves[j], *l = &m->leaves[j];
			ck_assert(h->function == l->function && h->index == l->index &&
				  h->flags == l->flags);
			switch (h->function) {
			case 1:
			case 0xB:
			case 0x1F:
			case 0x15:
			case 0x16:
			case 0x80000008:
			case 0x8000001E:
			case 0x40000000:
			case 0x40000001:
			case 0x40000010: continue; /* checked by their own cases */
			default:
				ck_assert_msg(!memcmp(h, l, sizeof(*h)), "%s: leaf %#x.%u changed",
					      r->name, h->function, h->index);
			}
		}
	}
}
END_TEST

/* Where ring 0 is emulated, the hypercall features are hidden (auto);
 * all, none and a list do what they say. */
START_TEST(test_pv_features_by_policy)
{
	for (unsigned i = 0; i < nhosts; i++) {
		struct host_cpu h = as_host(&hosts[i], true);
		struct cpu_model_params p = {.id = 0, .nvcpus = 2};
		struct err e = {0};
		uint32_t offered = cpuid_find(h.leaves, h.nleaves, 0x40000001, 0)->eax;
		ck_assert_int_eq(cpu_model_build(&h, &p, &model, &e), 0);
		ck_assert_uint_eq(model.pv_offered, offered);
		ck_assert_uint_eq(model.pv_shown, offered & ~KVM_PV_HYPERCALLS);
		ck_assert_uint_eq(leaf(&model, 0x40000001, 0)->eax, model.pv_shown);
		ck_assert(model.pv_shown & KVM_PV_CLOCKSOURCE2);
		ck_assert(!(model.pv_shown & KVM_PV_PV_SEND_IPI));
		h.ring0_emulated = false;
		ck_assert_int_eq(cpu_model_build(&h, &p, &model, &e), 0);
		ck_assert_uint_eq(model.pv_shown, offered);
		p.pv = CPU_PV_NONE;
		ck_assert_int_eq(cpu_model_build(&h, &p, &model, &e), 0);
		ck_assert_uint_eq(leaf(&model, 0x40000001, 0)->eax, 0);
		p.pv = CPU_PV_MASK;
		p.pv_mask = KVM_PV_CLOCKSOURCE2 | KVM_PV_MIGRATION_CONTROL;
		ck_assert_int_eq(cpu_model_build(&h, &p, &model, &e), 0);
		ck_assert_uint_eq(model.pv_shown, offered & p.pv_mask);
		h.ring0_emulated = true;
		p.pv = CPU_PV_ALL;
		ck_assert_int_eq(cpu_model_build(&h, &p, &model, &e), 0);
		ck_assert_uint_eq(model.pv_shown, offered);
	}
}
END_TEST

START_TEST(test_every_common_msr_written_on_both_vendors)
{
	static const uint32_t want[] = {0x174,	    0x175,	0x176,	    0xC0000081, 0xC0000082,
					0xC0000083, 0xC0000084, 0xC0000102, 0x1A0,	0x2FF};
	for (unsigned i = 0; i < nhosts; i++) {
		const struct cpu_model *m = build(&hosts[i], 0, 1);
		for (unsigned j = 0; j < sizeof(want) / sizeof(want[0]); j++)
			ck_assert_msg(msr(m, want[j]), "%s: MSR %#x", hosts[i].name, want[j]);
		ck_assert_uint_eq(msr(m, 0x1A0)->value, 1); /* fast strings */
	}
}
END_TEST

START_TEST(test_bad_params_and_oversized_tables_refused)
{
	struct host_cpu h = as_host(&hosts[0], true);
	struct cpu_model_params p = {.id = 2, .nvcpus = 2};
	struct err e = {0};
	ck_assert_int_eq(cpu_model_build(&h, &p, &model, &e), -1);
	static struct cpuid_leaf many[CPU_MODEL_MAX_LEAVES];
	h.leaves = many;
	h.nleaves = CPU_MODEL_MAX_LEAVES;
	p.id = 0;
	e = (struct err){0};
	ck_assert_int_eq(cpu_model_build(&h, &p, &model, &e), -1);
	ck_assert_int_eq(e.kind, ERR_HOST);
	h.nleaves = 3; /* no KVM signature leaf */
	e = (struct err){0};
	ck_assert_int_eq(cpu_model_build(&h, &p, &model, &e), -1);
	ck_assert_ptr_nonnull(strstr(e.msg, "0x40000000"));
}
END_TEST

START_TEST(test_kvm_pv_option_parsing)
{
	enum cpu_pv_policy pv;
	uint32_t mask;
	struct err e = {0};
	char names[256];
	ck_assert_int_eq(cpu_pv_parse("auto", &pv, &mask, &e), 0);
	ck_assert_int_eq(pv, CPU_PV_AUTO);
	ck_assert_int_eq(cpu_pv_parse("all", &pv, &mask, &e), 0);
	ck_assert_int_eq(pv, CPU_PV_ALL);
	ck_assert_int_eq(cpu_pv_parse("none", &pv, &mask, &e), 0);
	ck_assert_int_eq(pv, CPU_PV_NONE);
	ck_assert_int_eq(cpu_pv_parse("clocksource2,steal-time,pv-send-ipi", &pv, &mask, &e), 0);
	ck_assert_int_eq(pv, CPU_PV_MASK);
	ck_assert_uint_eq(mask, KVM_PV_CLOCKSOURCE2 | KVM_PV_STEAL_TIME | KVM_PV_PV_SEND_IPI);
	cpu_pv_names(mask, names, sizeof(names));
	ck_assert_str_eq(names, "clocksource2,steal-time,pv-send-ipi");
	cpu_pv_names(0, names, sizeof(names));
	ck_assert_str_eq(names, "none");
	ck_assert_int_eq(cpu_pv_parse("clocksource2,,", &pv, &mask, &e), -1);
	ck_assert_int_eq(e.kind, ERR_INPUT);
	e = (struct err){0};
	ck_assert_int_eq(cpu_pv_parse("kvmclock", &pv, &mask, &e), -1);
	ck_assert_ptr_nonnull(strstr(e.msg, "'kvmclock'"));
	e = (struct err){0};
	ck_assert_int_eq(cpu_pv_parse("", &pv, &mask, &e), -1);
}
END_TEST

static Suite *cpu_model_suite(void)
{
	Suite *s = suite_create("cpu_model");
	TCase *t = tcase_create("cpu_model");
	tcase_add_unchecked_fixture(t, load_hosts, NULL);
	tcase_add_test(t, test_tables_of_both_vendors_are_recorded);
	tcase_add_test(t, test_vendor_read_from_leaf_0);
	tcase_add_test(t, test_every_vcpu_sees_the_hypervisor_bit);
	tcase_add_test(t, test_apic_id_in_leaf_1_and_0xb_per_vcpu);
	tcase_add_test(t, test_amd_extended_topology_leaves_only_on_amd);
	tcase_add_test(t, test_tsc_rate_where_each_vendor_reads_it);
	tcase_add_test(t, test_hwcr_tsc_freq_sel_on_amd_only);
	tcase_add_test(t, test_hwcr_not_listed_is_said_not_written);
	tcase_add_test(t, test_nothing_else_changes);
	tcase_add_test(t, test_pv_features_by_policy);
	tcase_add_test(t, test_every_common_msr_written_on_both_vendors);
	tcase_add_test(t, test_bad_params_and_oversized_tables_refused);
	tcase_add_test(t, test_kvm_pv_option_parsing);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(cpu_model_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
