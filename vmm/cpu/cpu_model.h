/*
 * What each vCPU is shown: its CPUID leaves and its initial MSRs, as a pure
 * function of what the host's KVM offers (KVM_GET_SUPPORTED_CPUID,
 * KVM_GET_MSR_INDEX_LIST, KVM_GET_TSC_KHZ, the host kind) and the shape of
 * the machine (vCPU count, this vCPU's ID, the paravirtual features asked
 * for). Nothing here calls KVM: vmm/cpu/vcpu.c applies the result, and the
 * unit tests feed recorded tables of an AMD and an Intel host
 * (tests/unit/hosts/), so neither vendor's path goes untested on the
 * other's box.
 */
#ifndef VMM_CPU_MODEL_H
#define VMM_CPU_MODEL_H

#include <stdbool.h>
#include <stdint.h>

struct err;

/* One CPUID leaf, laid out as struct kvm_cpuid_entry2 without padding. */
struct cpuid_leaf {
	uint32_t function, index, flags;
	uint32_t eax, ebx, ecx, edx;
};

enum cpu_vendor {
	CPU_VENDOR_OTHER,
	CPU_VENDOR_INTEL,
	CPU_VENDOR_AMD, /* AuthenticAMD and HygonGenuine: the same MSRs and leaves */
};

/* What the host's KVM offers. */
struct host_cpu {
	const struct cpuid_leaf *leaves; /* KVM_GET_SUPPORTED_CPUID */
	unsigned nleaves;
	const uint32_t *msrs; /* KVM_GET_MSR_INDEX_LIST */
	unsigned nmsrs;
	uint32_t tsc_khz;    /* KVM_GET_TSC_KHZ; 0: unknown */
	bool ring0_emulated; /* nested page-table KVM (kvm_pvm): see notes/kvm-host.md */
};

/* KVM's paravirtual features (CPUID 0x40000001 EAX), uapi asm/kvm_para.h. */
#define KVM_PV_CLOCKSOURCE	  (1u << 0)
#define KVM_PV_NOP_IO_DELAY	  (1u << 1)
#define KVM_PV_CLOCKSOURCE2	  (1u << 3)
#define KVM_PV_ASYNC_PF		  (1u << 4)
#define KVM_PV_STEAL_TIME	  (1u << 5)
#define KVM_PV_PV_EOI		  (1u << 6)
#define KVM_PV_PV_UNHALT	  (1u << 7)
#define KVM_PV_PV_TLB_FLUSH	  (1u << 9)
#define KVM_PV_ASYNC_PF_VMEXIT	  (1u << 10)
#define KVM_PV_PV_SEND_IPI	  (1u << 11)
#define KVM_PV_POLL_CONTROL	  (1u << 12)
#define KVM_PV_PV_SCHED_YIELD	  (1u << 13)
#define KVM_PV_ASYNC_PF_INT	  (1u << 14)
#define KVM_PV_MSI_EXT_DEST_ID	  (1u << 15)
#define KVM_PV_HC_MAP_GPA_RANGE	  (1u << 16)
#define KVM_PV_MIGRATION_CONTROL  (1u << 17)
#define KVM_PV_CLOCKSOURCE_STABLE (1u << 24)

/*
 * The features whose guest side is a hypercall (vmcall/vmmcall from ring
 * 0), which never completes on a host that emulates ring 0 (measured:
 * notes/kvm-host.md and this tree's tests/guest/linux_mq_test.py): a
 * 2-vCPU Linux hangs in its first PV IPI. kvmclock, steal time, PV EOI,
 * PV TLB flush and async PF are MSRs and shared memory, and work there.
 */
#define KVM_PV_HYPERCALLS                                                                          \
	(KVM_PV_PV_UNHALT | KVM_PV_PV_SEND_IPI | KVM_PV_PV_SCHED_YIELD | KVM_PV_HC_MAP_GPA_RANGE)

enum cpu_pv_policy {
	CPU_PV_AUTO, /* what KVM offers, less what does not work on this host kind */
	CPU_PV_ALL,  /* what KVM offers */
	CPU_PV_NONE, /* the KVM signature, no features: no kvmclock */
	CPU_PV_MASK, /* what KVM offers, ANDed with a mask */
};

struct cpu_model_params {
	unsigned id;	 /* this vCPU's index = its APIC ID */
	unsigned nvcpus; /* in the machine */
	enum cpu_pv_policy pv;
	uint32_t pv_mask; /* CPU_PV_MASK */
};

#define CPU_MODEL_MAX_LEAVES 260
#define CPU_MODEL_MAX_MSRS   16

struct cpu_msr {
	uint32_t index;
	uint64_t value;
	const char *name;
	bool optional; /* a refusal is reported with -v, not an error */
};

struct cpu_model {
	enum cpu_vendor vendor;
	struct cpuid_leaf leaves[CPU_MODEL_MAX_LEAVES];
	unsigned nleaves;
	struct cpu_msr msrs[CPU_MODEL_MAX_MSRS];
	unsigned nmsrs;
	uint32_t pv_offered; /* 0x40000001 EAX as KVM offers it */
	uint32_t pv_shown;   /* as the guest sees it */
	/* What the model could not do, for -v (NULL when none). */
	const char *note;
};

enum cpu_vendor cpu_vendor_of(const struct cpuid_leaf *leaves, unsigned n);
const char *cpu_vendor_name(enum cpu_vendor v);
/* The leaf (function, index), or NULL. */
const struct cpuid_leaf *cpuid_find(const struct cpuid_leaf *leaves, unsigned n, uint32_t function,
				    uint32_t index);
/* Builds vCPU p->id's leaves and MSRs; 0, or -1 with e set (ERR_HOST). */
int cpu_model_build(const struct host_cpu *h, const struct cpu_model_params *p,
		    struct cpu_model *out, struct err *e);
/* Writes the names of the PV feature bits in mask, comma-separated. */
void cpu_pv_names(uint32_t mask, char *out, unsigned len);
/* Parses --kvm-pv's argument; 0, or -1 with e set (ERR_INPUT). */
int cpu_pv_parse(const char *arg, enum cpu_pv_policy *pv, uint32_t *mask, struct err *e);

#endif
