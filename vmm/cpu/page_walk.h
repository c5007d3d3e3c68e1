/* A guest linear address to a physical one through the guest's page
 * tables, with the access rights the CPU would check (Intel SDM vol. 3,
 * 4.5 4/5-level paging, 4.6 access rights, 4.7 page-fault error code;
 * AMD APM vol. 2, 5.6 page-protection checks). The emulation fallbacks
 * access memory the way the instruction would; the crash report reads
 * with PAGE_WALK_PEEK, as a debugger does. */
#ifndef VMM_PAGE_WALK_H
#define VMM_PAGE_WALK_H

#include <stdint.h>

struct guest_mem;
struct kvm_sregs;

enum page_access {
	PAGE_WALK_PEEK = 0,  /* no rights checked: the report reads */
	PAGE_WALK_READ = 1,  /* a data read */
	PAGE_WALK_WRITE = 2, /* a data write */
	PAGE_WALK_FETCH = 3, /* an instruction fetch */
};

/* #PF error code bits (SDM vol. 3, 4.7). */
#define PF_ERR_P    (1u << 0)
#define PF_ERR_W    (1u << 1)
#define PF_ERR_U    (1u << 2)
#define PF_ERR_RSVD (1u << 3)
#define PF_ERR_I    (1u << 4)

enum page_walk_result {
	PAGE_WALK_OK = 0,
	PAGE_WALK_PF = -1,	   /* the CPU raises #PF(*pf_error), CR2 = lin */
	PAGE_WALK_GP = -2,	   /* non-canonical: #GP(0) */
	PAGE_WALK_UNREADABLE = -3, /* a table outside guest RAM, or 32-bit paging */
};

/* `cpl` and `rflags` decide user/supervisor (CPL 3 is user) and SMAP's
 * AC override. 4-level paging, or 5-level with CR4.LA57. */
enum page_walk_result page_walk(const struct guest_mem *m, const struct kvm_sregs *s, unsigned cpl,
				uint64_t rflags, uint64_t lin, enum page_access access,
				uint64_t *pa, uint32_t *pf_error);

#endif
