/* /dev/kvm, the VM file descriptor and the capabilities the VMM relies on. */
#ifndef VMM_KVM_H
#define VMM_KVM_H

#include <stdbool.h>
#include <stdint.h>

struct err;
struct guest_mem;
struct cpuid_leaf;

struct kvm {
	int dev_fd;
	int vm_fd;
	int run_size; /* mmap size of struct kvm_run */
	int max_vcpus;
	bool emulated_host; /* nested, page-table based KVM (kvm_pvm): ring 0 emulated */
	bool has_emulation_failure_bytes;
	bool has_irqfd_resample;
	struct cpuid_leaf *cpuid; /* KVM_GET_SUPPORTED_CPUID */
	unsigned ncpuid;
	uint32_t *msrs; /* KVM_GET_MSR_INDEX_LIST */
	unsigned nmsrs;
};

/* Opens /dev/kvm (or `path`), checks API 12 and every capability we rely on. */
int kvm_open(struct kvm *k, const char *path, struct err *e);
/* Creates the VM with in-kernel irqchip and PIT, and maps guest RAM. */
int kvm_create_vm(struct kvm *k, struct guest_mem *m, struct err *e);
/* Sets the in-kernel IOAPIC's ID register (what the MP table says). */
int kvm_set_ioapic_id(struct kvm *k, uint8_t id, struct err *e);
void kvm_close(struct kvm *k);
/* One line describing the host for diagnostics and benchmark output. */
const char *kvm_host_kind(const struct kvm *k);

#endif
