#include "vmm/cpu/kvm.h"

#include "vmm/cpu/cpu_model.h"

#include "vmm/base/err.h"
#include "vmm/base/guest_mem.h"
#include "vmm/base/layout.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define CPUID_MAX_ENTRIES 256
#define MSR_LIST_MAX	  1024

static const struct {
	int cap;
	const char *name;
} required_caps[] = {
    {KVM_CAP_IRQCHIP, "KVM_CAP_IRQCHIP"},
    {KVM_CAP_IRQFD, "KVM_CAP_IRQFD"},
    {KVM_CAP_IOEVENTFD, "KVM_CAP_IOEVENTFD"},
    {KVM_CAP_SIGNAL_MSI, "KVM_CAP_SIGNAL_MSI"},
    {KVM_CAP_IRQ_ROUTING, "KVM_CAP_IRQ_ROUTING"},
    {KVM_CAP_USER_MEMORY, "KVM_CAP_USER_MEMORY"},
    {KVM_CAP_IMMEDIATE_EXIT, "KVM_CAP_IMMEDIATE_EXIT"},
    {KVM_CAP_PIT2, "KVM_CAP_PIT2"},
    {KVM_CAP_EXT_CPUID, "KVM_CAP_EXT_CPUID"},
};

/* On a host without vmx/svm the KVM is nested and page-table based (the
 * kvm_pvm module): guest ring 0 is emulated (see notes/kvm-host.md). */
static bool kvm_detect_emulated_host(void)
{
	if (access("/sys/module/kvm_pvm", F_OK) == 0)
		return true;
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[4096];
	bool hw = false;
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "flags", 5) && (strstr(line, " vmx") || strstr(line, " svm")))
			hw = true;
	fclose(f);
	return !hw;
}

/* What KVM offers, in the layout vmm/cpu/cpu_model.h works on. */
static int kvm_read_cpuid(struct kvm *k, struct err *e)
{
	struct kvm_cpuid2 *c =
	    calloc(1, sizeof(*c) + CPUID_MAX_ENTRIES * sizeof(struct kvm_cpuid_entry2));
	k->cpuid = calloc(CPUID_MAX_ENTRIES, sizeof(*k->cpuid));
	if (!c || !k->cpuid) {
		free(c);
		return err_set(e, ERR_HOST, "out of memory");
	}
	c->nent = CPUID_MAX_ENTRIES;
	if (ioctl(k->dev_fd, KVM_GET_SUPPORTED_CPUID, c) < 0) {
		free(c);
		return err_set(e, ERR_HOST, "KVM_GET_SUPPORTED_CPUID failed: %s", strerror(errno));
	}
	for (uint32_t i = 0; i < c->nent; i++) {
		const struct kvm_cpuid_entry2 *en = &c->entries[i];
		k->cpuid[i] = (struct cpuid_leaf){en->function, en->index, en->flags, en->eax,
						  en->ebx,	en->ecx,   en->edx};
	}
	k->ncpuid = c->nent;
	free(c);
	return 0;
}

/* The MSRs KVM saves and emulates; optional (an old KVM may refuse it). */
static int kvm_read_msr_list(struct kvm *k, struct err *e)
{
	struct kvm_msr_list *l = calloc(1, sizeof(*l) + MSR_LIST_MAX * sizeof(uint32_t));
	if (!l)
		return err_set(e, ERR_HOST, "out of memory");
	l->nmsrs = MSR_LIST_MAX;
	if (ioctl(k->dev_fd, KVM_GET_MSR_INDEX_LIST, l) == 0) {
		k->msrs = malloc(l->nmsrs * sizeof(uint32_t) + 1);
		if (!k->msrs) {
			free(l);
			return err_set(e, ERR_HOST, "out of memory");
		}
		memcpy(k->msrs, l->indices, l->nmsrs * sizeof(uint32_t));
		k->nmsrs = l->nmsrs;
	}
	free(l);
	return 0;
}

const char *kvm_host_kind(const struct kvm *k)
{
	/* Set by scripts/vmm-host for commands it runs on the emulated host:
	 * its description ("emulated (QEMU x.y TCG, nested SVM, kernel z)"). */
	const char *emulated = getenv("VMM_EMULATED_HOST");
	if (emulated && *emulated)
		return emulated;
	return k->emulated_host ? "nested page-table KVM without hardware virtualisation (guest "
				  "ring 0 is emulated)"
				: "hardware-assisted KVM";
}

int kvm_open(struct kvm *k, const char *path, struct err *e)
{
	memset(k, 0, sizeof(*k));
	k->vm_fd = -1;
	if (!path)
		path = "/dev/kvm";
	k->dev_fd = open(path, O_RDWR | O_CLOEXEC);
	if (k->dev_fd < 0) {
		int err = errno;
		if (err == ENOENT)
			return err_set(e, ERR_HOST,
				       "%s does not exist: KVM is not available on this host",
				       path);
		if (err == EACCES || err == EPERM)
			return err_set(
			    e, ERR_HOST,
			    "permission denied opening %s (add yourself to the kvm group)", path);
		return err_set(e, ERR_HOST, "cannot open %s: %s", path, strerror(err));
	}
	int api = ioctl(k->dev_fd, KVM_GET_API_VERSION, 0);
	if (api != KVM_API_VERSION)
		return err_set(e, ERR_HOST, "%s speaks KVM API %d, this VMM needs %d", path, api,
			       KVM_API_VERSION);
	for (size_t i = 0; i < sizeof(required_caps) / sizeof(required_caps[0]); i++)
		if (ioctl(k->dev_fd, KVM_CHECK_EXTENSION, required_caps[i].cap) <= 0)
			return err_set(e, ERR_HOST,
				       "KVM on this host lacks %s, which the VMM needs",
				       required_caps[i].name);
	/* Optional: without it INTx falls back to KVM_IRQ_LINE. */
	k->has_irqfd_resample = ioctl(k->dev_fd, KVM_CHECK_EXTENSION, KVM_CAP_IRQFD_RESAMPLE) > 0;
	k->has_emulation_failure_bytes =
	    ioctl(k->dev_fd, KVM_CHECK_EXTENSION, KVM_CAP_EXIT_ON_EMULATION_FAILURE) > 0;
	k->run_size = ioctl(k->dev_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (k->run_size <= 0)
		return err_set(e, ERR_HOST, "KVM_GET_VCPU_MMAP_SIZE failed: %s", strerror(errno));
	k->max_vcpus = ioctl(k->dev_fd, KVM_CHECK_EXTENSION, KVM_CAP_MAX_VCPUS);
	if (k->max_vcpus <= 0)
		k->max_vcpus = ioctl(k->dev_fd, KVM_CHECK_EXTENSION, KVM_CAP_NR_VCPUS);
	if (k->max_vcpus <= 0)
		k->max_vcpus = 1;
	if (kvm_read_cpuid(k, e) || kvm_read_msr_list(k, e))
		return -1;
	k->emulated_host = kvm_detect_emulated_host();
	return 0;
}

int kvm_create_vm(struct kvm *k, struct guest_mem *m, struct err *e)
{
	k->vm_fd = ioctl(k->dev_fd, KVM_CREATE_VM, 0);
	if (k->vm_fd < 0)
		return err_set(e, ERR_HOST, "KVM_CREATE_VM failed: %s", strerror(errno));
	/* Intel needs these below 4 GiB, outside RAM; harmless elsewhere. */
	if (ioctl(k->vm_fd, KVM_SET_TSS_ADDR, (unsigned long)LAYOUT_KVM_TSS) < 0)
		return err_set(e, ERR_HOST, "KVM_SET_TSS_ADDR failed: %s", strerror(errno));
	uint64_t ident = LAYOUT_KVM_IDENT_MAP;
	ioctl(k->vm_fd, KVM_SET_IDENTITY_MAP_ADDR, &ident);
	if (ioctl(k->vm_fd, KVM_CREATE_IRQCHIP, 0) < 0)
		return err_set(e, ERR_HOST, "KVM_CREATE_IRQCHIP failed: %s", strerror(errno));
	/* SPEAKER_DUMMY: KVM serves port 0x61 (PIT channel 2 gate and OUT),
	 * which Linux uses to calibrate the TSC. */
	struct kvm_pit_config pit = {.flags = KVM_PIT_SPEAKER_DUMMY};
	if (ioctl(k->vm_fd, KVM_CREATE_PIT2, &pit) < 0)
		return err_set(e, ERR_HOST, "KVM_CREATE_PIT2 failed: %s", strerror(errno));
	if (k->has_emulation_failure_bytes) {
		struct kvm_enable_cap cap = {.cap = KVM_CAP_EXIT_ON_EMULATION_FAILURE, .args = {1}};
		if (ioctl(k->vm_fd, KVM_ENABLE_CAP, &cap) < 0)
			k->has_emulation_failure_bytes = false;
	}
	for (int i = 0; i < m->nregions; i++) {
		struct kvm_userspace_memory_region r = {
		    .slot = (uint32_t)i,
		    .guest_phys_addr = m->regions[i].gpa,
		    .memory_size = m->regions[i].size,
		    .userspace_addr = (uint64_t)(uintptr_t)m->regions[i].host,
		};
		if (ioctl(k->vm_fd, KVM_SET_USER_MEMORY_REGION, &r) < 0)
			return err_set(e, ERR_HOST,
				       "KVM_SET_USER_MEMORY_REGION (%llu MiB at 0x%llx) failed: %s",
				       (unsigned long long)(r.memory_size >> 20),
				       (unsigned long long)r.guest_phys_addr, strerror(errno));
	}
	return 0;
}

int kvm_set_ioapic_id(struct kvm *k, uint8_t id, struct err *e)
{
	struct kvm_irqchip chip = {.chip_id = KVM_IRQCHIP_IOAPIC};
	if (ioctl(k->vm_fd, KVM_GET_IRQCHIP, &chip) < 0)
		return err_set(e, ERR_HOST, "KVM_GET_IRQCHIP (IOAPIC) failed: %s", strerror(errno));
	chip.chip.ioapic.id = id;
	if (ioctl(k->vm_fd, KVM_SET_IRQCHIP, &chip) < 0)
		return err_set(e, ERR_HOST, "KVM_SET_IRQCHIP (IOAPIC) failed: %s", strerror(errno));
	return 0;
}

void kvm_close(struct kvm *k)
{
	if (k->vm_fd >= 0)
		close(k->vm_fd);
	if (k->dev_fd >= 0)
		close(k->dev_fd);
	free(k->cpuid);
	free(k->msrs);
	k->cpuid = NULL;
	k->msrs = NULL;
	k->vm_fd = k->dev_fd = -1;
}
