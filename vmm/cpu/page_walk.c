#include "vmm/cpu/page_walk.h"

#include "vmm/base/guest_mem.h"

#include <linux/kvm.h>
#include <stdbool.h>

#define CR0_PG	  (1ULL << 31)
#define CR0_WP	  (1ULL << 16)
#define CR4_LA57  (1ULL << 12)
#define CR4_SMEP  (1ULL << 20)
#define CR4_SMAP  (1ULL << 21)
#define EFER_LMA  (1ULL << 10)
#define EFER_NXE  (1ULL << 11)
#define RFLAGS_AC (1ULL << 18)

#define PTE_P	 (1ULL << 0)
#define PTE_RW	 (1ULL << 1)
#define PTE_US	 (1ULL << 2)
#define PTE_PS	 (1ULL << 7)
#define PTE_NX	 (1ULL << 63)
#define PTE_ADDR 0x000FFFFFFFFFF000ULL

/* What the walk gathered: an access is allowed by a translation only when
 * every level allows it (SDM vol. 3, 4.6.1). */
struct rights {
	bool user, writable, executable;
};

static enum page_walk_result fault(enum page_access access, unsigned cpl, bool present,
				   uint32_t *pf_error)
{
	*pf_error = (present ? PF_ERR_P : 0) | (access == PAGE_WALK_WRITE ? PF_ERR_W : 0) |
		    (cpl == 3 ? PF_ERR_U : 0) | (access == PAGE_WALK_FETCH ? PF_ERR_I : 0);
	return PAGE_WALK_PF;
}

/* SDM vol. 3, 4.6.1: the checks, for a translation with rights `r`. */
static bool allowed(const struct kvm_sregs *s, unsigned cpl, uint64_t rflags,
		    enum page_access access, struct rights r)
{
	bool user_mode = cpl == 3;
	if (access == PAGE_WALK_FETCH) {
		if (!r.executable)
			return false;
		if (user_mode)
			return r.user;
		return !(r.user && (s->cr4 & CR4_SMEP)); /* SMEP */
	}
	if (user_mode) {
		if (!r.user)
			return false;
		return access != PAGE_WALK_WRITE || r.writable;
	}
	/* Supervisor data access to a user page: SMAP, unless RFLAGS.AC. */
	if (r.user && (s->cr4 & CR4_SMAP) && !(rflags & RFLAGS_AC))
		return false;
	if (access == PAGE_WALK_WRITE && !r.writable)
		return !(s->cr0 & CR0_WP); /* CR0.WP = 0: ring 0 writes anything */
	return true;
}

static bool canonical(uint64_t lin, unsigned bits)
{
	int64_t x = (int64_t)(lin << (64 - bits)) >> (64 - bits);
	return (uint64_t)x == lin;
}

enum page_walk_result page_walk(const struct guest_mem *m, const struct kvm_sregs *s, unsigned cpl,
				uint64_t rflags, uint64_t lin, enum page_access access,
				uint64_t *pa, uint32_t *pf_error)
{
	*pf_error = 0;
	if (!(s->cr0 & CR0_PG)) {
		*pa = lin;
		return PAGE_WALK_OK;
	}
	if (!(s->efer & EFER_LMA))
		return PAGE_WALK_UNREADABLE; /* 32-bit and PAE paging: not our guests */
	int top = (s->cr4 & CR4_LA57) ? 4 : 3;
	if (!canonical(lin, 12 + 9 * (top + 1)))
		return access == PAGE_WALK_PEEK ? PAGE_WALK_UNREADABLE : PAGE_WALK_GP;
	struct rights r = {true, true, true};
	bool nxe = s->efer & EFER_NXE;
	uint64_t table = s->cr3 & PTE_ADDR;
	for (int level = top; level >= 0; level--) {
		uint64_t idx = (lin >> (12 + 9 * level)) & 0x1FF, pte;
		if (guest_mem_read(m, table + idx * 8, &pte, 8))
			return PAGE_WALK_UNREADABLE;
		if (!(pte & PTE_P))
			return access == PAGE_WALK_PEEK ? PAGE_WALK_UNREADABLE
							: fault(access, cpl, false, pf_error);
		r.user &= !!(pte & PTE_US);
		r.writable &= !!(pte & PTE_RW);
		if (nxe && (pte & PTE_NX))
			r.executable = false;
		/* A large page: 1 GiB at level 2 (PDPTE), 2 MiB at level 1. */
		if (level == 0 || ((level == 1 || level == 2) && (pte & PTE_PS))) {
			uint64_t page = 1ULL << (12 + 9 * level);
			if (access != PAGE_WALK_PEEK && !allowed(s, cpl, rflags, access, r))
				return fault(access, cpl, true, pf_error);
			*pa = (pte & PTE_ADDR & ~(page - 1)) | (lin & (page - 1));
			return PAGE_WALK_OK;
		}
		table = pte & PTE_ADDR;
	}
	return PAGE_WALK_UNREADABLE;
}
