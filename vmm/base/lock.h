/*
 * Ranked locks: every mutex of the VMM has a rank, and a thread takes locks
 * in increasing rank only (one order, never reversed: DESIGN.md "Locks" is
 * checked against this table by tests/style/check_lock_order.py). In builds with
 * VMM_LOCK_CHECKS (debug and sanitizer builds) each thread records what it
 * holds, and taking a lock out of order, taking one twice, releasing one it
 * does not hold, or calling a `_locked` function without its lock
 * (lock_assert_held) aborts there with the names (Linux's lockdep and
 * lockdep_assert_held, as small as it can be). Without checks a lock is a
 * pthread mutex and nothing more.
 */
#ifndef VMM_BASE_LOCK_H
#define VMM_BASE_LOCK_H

#include <pthread.h>

/* Lowest first: a thread holding a lock of rank r takes only ranks > r.
 * Locks of one rank (a device's virtio queues) are taken in increasing
 * `sub` order. Keep DESIGN.md's list in this order (a test checks it). */
enum lock_rank {
	LOCK_RANK_PCI_CONF1 = 1, /* the conf1 address latch (0xCF8) */
	LOCK_RANK_VIRTIO_CONFIG, /* virtio-pci common/device config, status */
	LOCK_RANK_VIRTIO_QUEUE,	 /* one virtqueue and the device's state for it */
	LOCK_RANK_VIRTIO_ISR,	 /* the ISR byte and the INTx level */
	LOCK_RANK_PCI_FUNCTION,	 /* a PCI device model's own state: testdev, irqbench */
	LOCK_RANK_MSIX,		 /* an MSI-X table */
	LOCK_RANK_PCI_DEVICE,	 /* a PCI function's config space and BARs */
	LOCK_RANK_DEVICE,	 /* a legacy device's registers: UART, RTC, boot timer */
	LOCK_RANK_IRQ_ROUTER,	 /* MSI masks/pending/routes and INTx levels */
	LOCK_RANK_ISA_LINE,	 /* one ISA line's level (GSI 0-15) */
	LOCK_RANK_BUS,		 /* a bus's range table (no callback runs under it) */
	LOCK_RANK_BUS_UNCLAIMED, /* the unclaimed-access counter of a bus */
	LOCK_RANK_CONSOLE_OUT,	 /* console output (one writer at a time) */
	LOCK_RANK_LOG,		 /* the log: a leaf under everything */
	LOCK_RANK_COUNT
};

struct vmm_lock {
	pthread_mutex_t m;
	const char *name;
	enum lock_rank rank;
};

/* A reader-writer lock with a rank (a bus's range table: many vCPUs look
 * up at once, a BAR move writes). */
struct vmm_rwlock {
	pthread_rwlock_t rw;
	const char *name;
	enum lock_rank rank;
};

/* name: a literal that says which lock ("virtio-pci config"). */
void lock_init(struct vmm_lock *l, const char *name, enum lock_rank rank);
void lock_destroy(struct vmm_lock *l);
void rwlock_init(struct vmm_rwlock *l, const char *name, enum lock_rank rank);
void rwlock_destroy(struct vmm_rwlock *l);
#ifdef VMM_LOCK_CHECKS
void lock_take(struct vmm_lock *l);
/* Same rank, taken in increasing `sub` (a device's queues by index). */
void lock_take_nested(struct vmm_lock *l, unsigned sub);
void lock_release(struct vmm_lock *l);
void rwlock_read(struct vmm_rwlock *l);
void rwlock_write(struct vmm_rwlock *l);
void rwlock_release(struct vmm_rwlock *l);
/* Aborts unless the calling thread holds l. */
void lock_assert_held(const struct vmm_lock *l);
#else
/* Without checks a lock is its pthread lock, inline: the exit dispatch
 * path takes a few per exit (tests/bench/exit-dispatch-count). */
static inline void lock_take(struct vmm_lock *l)
{
	pthread_mutex_lock(&l->m);
}

static inline void lock_take_nested(struct vmm_lock *l, unsigned sub)
{
	(void)sub;
	pthread_mutex_lock(&l->m);
}

static inline void lock_release(struct vmm_lock *l)
{
	pthread_mutex_unlock(&l->m);
}

static inline void rwlock_read(struct vmm_rwlock *l)
{
	pthread_rwlock_rdlock(&l->rw);
}

static inline void rwlock_write(struct vmm_rwlock *l)
{
	pthread_rwlock_wrlock(&l->rw);
}

static inline void rwlock_release(struct vmm_rwlock *l)
{
	pthread_rwlock_unlock(&l->rw);
}

static inline void lock_assert_held(const struct vmm_lock *l)
{
	(void)l;
}
#endif

/* The rank's name as DESIGN.md lists it; for the order check and reports. */
const char *lock_rank_name(enum lock_rank r);

#endif
