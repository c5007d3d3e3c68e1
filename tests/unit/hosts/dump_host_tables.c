/*
 * Records what this host's KVM offers a VMM, in the format the CPU-model
 * unit tests read (tests/unit/hosts/README.md): KVM_GET_SUPPORTED_CPUID,
 * KVM_GET_MSR_INDEX_LIST and KVM_GET_MSR_FEATURE_INDEX_LIST, with the CPU's
 * name and flags, and what a new vCPU's MSR_K7_HWCR does on AMD.
 *   build/tests/unit/dump_host_tables > tests/unit/hosts/NAME.txt
 */
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/utsname.h>
#include <unistd.h>

#define MAX_LEAVES  256
#define MAX_MSRS    1024
#define MSR_K7_HWCR 0xc0010015

static void cpuinfo_line(const char *key)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[8192];
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key))) {
			char *v = strchr(line, ':');
			printf("# /proc/cpuinfo %s: %s", key, v ? v + 1 : "\n");
			break;
		}
	if (f)
		fclose(f);
}

static void print_msr_list(int kvm, unsigned long req, const char *name)
{
	struct kvm_msr_list *l = calloc(1, sizeof(*l) + MAX_MSRS * sizeof(uint32_t));
	if (!l)
		return;
	l->nmsrs = MAX_MSRS;
	if (ioctl(kvm, req, l) == 0) {
		printf("# %s (%u)\n", name, l->nmsrs);
		for (unsigned i = 0; i < l->nmsrs; i++)
			printf("%#x%s", l->indices[i],
			       i % 8 == 7 || i + 1 == l->nmsrs ? "\n" : " ");
	}
	free(l);
}

/* A new vCPU's HWCR, and whether KVM takes TscFreqSel (bit 24). */
static void hwcr_line(int kvm)
{
	int vm = ioctl(kvm, KVM_CREATE_VM, 0);
	int cpu = vm < 0 ? -1 : ioctl(vm, KVM_CREATE_VCPU, 0);
	struct {
		struct kvm_msrs h;
		struct kvm_msr_entry e;
	} m = {.h.nmsrs = 1, .e.index = MSR_K7_HWCR};
	if (cpu < 0 || ioctl(cpu, KVM_GET_MSRS, &m) != 1) {
		printf("# MSR_K7_HWCR (0xc0010015) of a new vCPU: not readable\n");
		return;
	}
	unsigned long long before = m.e.data;
	m.e.data = before | (1ull << 24);
	int set = ioctl(cpu, KVM_SET_MSRS, &m);
	m.e.data = 0;
	ioctl(cpu, KVM_GET_MSRS, &m);
	printf("# MSR_K7_HWCR (0xc0010015) of a new vCPU: %#llx; KVM_SET_MSRS with bit 24 "
	       "(TscFreqSel) set: %s, reads back %#llx\n",
	       before, set == 1 ? "accepted" : "refused", (unsigned long long)m.e.data);
}

int main(void)
{
	int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	struct utsname u;
	if (kvm < 0) {
		perror("/dev/kvm");
		return 1;
	}
	uname(&u);
	printf("# host kernel %s; kvm_pvm module %s\n", u.release,
	       access("/sys/module/kvm_pvm", F_OK) == 0 ? "loaded" : "absent");
	cpuinfo_line("model name");
	cpuinfo_line("flags");
	struct kvm_cpuid2 *c = calloc(1, sizeof(*c) + MAX_LEAVES * sizeof(struct kvm_cpuid_entry2));
	if (!c)
		return 1;
	c->nent = MAX_LEAVES;
	if (ioctl(kvm, KVM_GET_SUPPORTED_CPUID, c) < 0) {
		perror("KVM_GET_SUPPORTED_CPUID");
		return 1;
	}
	for (unsigned i = 0; i < c->nent; i++)
		if (c->entries[i].function == 1) {
			unsigned a = c->entries[i].eax, fam = (a >> 8) & 0xf, mod = (a >> 4) & 0xf;
			if (fam == 0xf)
				fam += (a >> 20) & 0xff;
			if (fam == 6 || fam >= 0xf)
				mod |= ((a >> 16) & 0xf) << 4;
			printf("# cpu family/model/stepping:  %u / %u / %u\n", fam, mod, a & 0xf);
		}
	hwcr_line(kvm);
	printf("# KVM_GET_SUPPORTED_CPUID: function index flags eax ebx ecx edx\n");
	for (unsigned i = 0; i < c->nent; i++) {
		const struct kvm_cpuid_entry2 *e = &c->entries[i];
		printf("%#010x %#x %#x %#010x %#010x %#010x %#010x\n", e->function, e->index,
		       e->flags, e->eax, e->ebx, e->ecx, e->edx);
	}
	print_msr_list(kvm, KVM_GET_MSR_INDEX_LIST, "KVM_GET_MSR_INDEX_LIST");
	print_msr_list(kvm, KVM_GET_MSR_FEATURE_INDEX_LIST, "KVM_GET_MSR_FEATURE_INDEX_LIST");
	free(c);
	return 0;
}
