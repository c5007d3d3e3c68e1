#include "vmm/base/lock.h"

#include <stdio.h>
#include <stdlib.h>

static const char *const rank_names[LOCK_RANK_COUNT] = {
    [LOCK_RANK_PCI_CONF1] = "PCI conf1 latch",
    [LOCK_RANK_VIRTIO_CONFIG] = "virtio configuration",
    [LOCK_RANK_VIRTIO_QUEUE] = "virtio queue",
    [LOCK_RANK_VIRTIO_ISR] = "virtio ISR",
    [LOCK_RANK_PCI_FUNCTION] = "PCI device model",
    [LOCK_RANK_MSIX] = "MSI-X table",
    [LOCK_RANK_PCI_DEVICE] = "PCI device",
    [LOCK_RANK_DEVICE] = "legacy device",
    [LOCK_RANK_IRQ_ROUTER] = "interrupt router",
    [LOCK_RANK_ISA_LINE] = "ISA line",
    [LOCK_RANK_BUS] = "bus",
    [LOCK_RANK_BUS_UNCLAIMED] = "bus unclaimed counter",
    [LOCK_RANK_CONSOLE_OUT] = "console output",
    [LOCK_RANK_LOG] = "log",
};

const char *lock_rank_name(enum lock_rank r)
{
	return r > 0 && r < LOCK_RANK_COUNT && rank_names[r] ? rank_names[r] : "?";
}

void lock_init(struct vmm_lock *l, const char *name, enum lock_rank rank)
{
	pthread_mutex_init(&l->m, NULL);
	l->name = name;
	l->rank = rank;
}

void lock_destroy(struct vmm_lock *l)
{
	pthread_mutex_destroy(&l->m);
}

void rwlock_init(struct vmm_rwlock *l, const char *name, enum lock_rank rank)
{
	pthread_rwlock_init(&l->rw, NULL);
	l->name = name;
	l->rank = rank;
}

void rwlock_destroy(struct vmm_rwlock *l)
{
	pthread_rwlock_destroy(&l->rw);
}

#ifdef VMM_LOCK_CHECKS

/* A device's every queue (VIRTIO_MAX_QUEUES) under its config lock, and more. */
#define HELD_MAX 64

/* One lock a thread holds: which (either kind), its name and rank. */
struct held_lock {
	const void *lock;
	const char *name;
	enum lock_rank rank;
	unsigned sub;
};

/* What this thread holds, in the order taken. */
static _Thread_local struct {
	struct held_lock h[HELD_MAX];
	unsigned n;
} held;

static void lock_fail(const char *what, const char *name, enum lock_rank rank)
{
	fprintf(stderr, "vmm: lock check: %s \"%s\" (rank %d, %s); held:", what, name, rank,
		lock_rank_name(rank));
	for (unsigned i = 0; i < held.n; i++)
		fprintf(stderr, " \"%s\" (rank %d)", held.h[i].name, held.h[i].rank);
	fprintf(stderr, "%s\n", held.n ? "" : " nothing");
	abort();
}

static void lock_check_order(const void *lock, const char *name, enum lock_rank rank, unsigned sub)
{
	for (unsigned i = 0; i < held.n; i++) {
		const struct held_lock *h = &held.h[i];
		if (h->lock == lock)
			lock_fail("taking a lock it already holds:", name, rank);
		if (h->rank > rank || (h->rank == rank && h->sub >= sub))
			lock_fail("taking a lock out of order:", name, rank);
	}
	if (held.n == HELD_MAX)
		lock_fail("too many locks held at once, taking", name, rank);
}

static void lock_note(const void *lock, const char *name, enum lock_rank rank, unsigned sub)
{
	held.h[held.n++] = (struct held_lock){lock, name, rank, sub};
}

static void lock_forget(const void *lock, const char *name, enum lock_rank rank)
{
	for (unsigned i = held.n; i-- > 0;)
		if (held.h[i].lock == lock) {
			for (unsigned j = i; j + 1 < held.n; j++)
				held.h[j] = held.h[j + 1];
			held.n--;
			return;
		}
	lock_fail("releasing a lock it does not hold:", name, rank);
}

void lock_assert_held(const struct vmm_lock *l)
{
	for (unsigned i = 0; i < held.n; i++)
		if (held.h[i].lock == l)
			return;
	lock_fail("a _locked function runs without", l->name, l->rank);
}

void lock_take_nested(struct vmm_lock *l, unsigned sub)
{
	lock_check_order(l, l->name, l->rank, sub);
	pthread_mutex_lock(&l->m);
	lock_note(l, l->name, l->rank, sub);
}

void lock_take(struct vmm_lock *l)
{
	lock_take_nested(l, 0);
}

void lock_release(struct vmm_lock *l)
{
	lock_forget(l, l->name, l->rank);
	pthread_mutex_unlock(&l->m);
}

void rwlock_read(struct vmm_rwlock *l)
{
	lock_check_order(l, l->name, l->rank, 0);
	pthread_rwlock_rdlock(&l->rw);
	lock_note(l, l->name, l->rank, 0);
}

void rwlock_write(struct vmm_rwlock *l)
{
	lock_check_order(l, l->name, l->rank, 0);
	pthread_rwlock_wrlock(&l->rw);
	lock_note(l, l->name, l->rank, 0);
}

void rwlock_release(struct vmm_rwlock *l)
{
	lock_forget(l, l->name, l->rank);
	pthread_rwlock_unlock(&l->rw);
}

#endif
