#include "devices/virtio/virtqueue.h"

#include "vmm/base/guest_mem.h"

#include <linux/virtio_ring.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

/* Ring layouts (virtio 1.2, 2.7.5, 2.7.6, 2.7.8), from the uapi structs:
 * the available ring's used_event and the used ring's avail_event sit
 * right after their ring arrays (2.7.10). */
#define DESC_SIZE sizeof(struct vring_desc)
#define AVAIL_IDX offsetof(struct vring_avail, idx)
#define USED_IDX  offsetof(struct vring_used, idx)
#define AVAIL_RING(i)                                                                              \
	(offsetof(struct vring_avail, ring) +                                                      \
	 sizeof(((struct vring_avail *)0)->ring[0]) * (uint64_t)(i))
#define USED_RING(i)                                                                               \
	(offsetof(struct vring_used, ring) + sizeof(struct vring_used_elem) * (uint64_t)(i))
_Static_assert(sizeof(struct vring_desc) == 16 && sizeof(struct vring_used_elem) == 8,
	       "virtio 1.2 2.7.5 and 2.7.8 layouts");

static uint64_t avail_bytes(uint16_t size, bool event_idx)
{
	return AVAIL_RING(size) + (event_idx ? sizeof(uint16_t) : 0);
}

static uint64_t used_bytes(uint16_t size, bool event_idx)
{
	return USED_RING(size) + (event_idx ? sizeof(uint16_t) : 0);
}

int virtq_init(struct virtq *q, const struct guest_mem *mem, uint16_t size, uint16_t max_size,
	       uint64_t desc, uint64_t avail, uint64_t used, bool event_idx)
{
	memset(q, 0, sizeof(*q));
	/* 2.7: Queue Size is a power of 2, at most what the device offers. */
	if (size == 0 || (size & (size - 1)) || size > max_size || size > VIRTQ_MAX_SIZE)
		return VIRTQ_ERR_RING;
	/* 2.7.2 alignment: descriptor table 16, available 2, used 4. */
	if ((desc & 15) || (avail & 1) || (used & 3))
		return VIRTQ_ERR_RING;
	if (!guest_mem_is_ram(mem, desc, (uint64_t)size * DESC_SIZE) ||
	    !guest_mem_is_ram(mem, avail, avail_bytes(size, event_idx)) ||
	    !guest_mem_is_ram(mem, used, used_bytes(size, event_idx)))
		return VIRTQ_ERR_RING;
	q->mem = mem;
	q->size = size;
	q->desc_addr = desc;
	q->avail_addr = avail;
	q->used_addr = used;
	q->event_idx = event_idx;
	return VIRTQ_OK;
}

/* Ring fields are shared with the guest: read each once, with ordering. */
static uint16_t ring_read16(const struct virtq *q, uint64_t gpa)
{
	uint16_t v;
	volatile uint16_t *p = guest_mem_ptr(q->mem, gpa, 2);
	v = *p;
	atomic_thread_fence(memory_order_acquire);
	return v;
}

static void ring_write16(const struct virtq *q, uint64_t gpa, uint16_t v)
{
	volatile uint16_t *p = guest_mem_ptr(q->mem, gpa, 2);
	*p = v;
}

/* A descriptor as read from the table (struct vring_desc, little-endian
 * like the host: virtio 1.x devices are little-endian, 2.5). */
struct desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags, next;
};
_Static_assert(sizeof(struct desc) == sizeof(struct vring_desc) &&
		   offsetof(struct desc, next) == offsetof(struct vring_desc, next),
	       "struct desc is struct vring_desc's layout");

static void desc_read(const struct virtq *q, uint64_t table, uint32_t i, struct desc *d)
{
	/* Callers checked that the whole table is RAM. */
	memcpy(d, guest_mem_ptr(q->mem, table + (uint64_t)i * DESC_SIZE, DESC_SIZE), DESC_SIZE);
}

static bool overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return a < b + blen && b < a + alen;
}

/* Whether [addr, addr+len), known to be RAM, touches one of q's rings. */
static bool hits_rings(const struct virtq *q, uint64_t addr, uint32_t len)
{
	return overlaps(addr, len, q->desc_addr, (uint64_t)q->size * DESC_SIZE) ||
	       overlaps(addr, len, q->avail_addr, avail_bytes(q->size, q->event_idx)) ||
	       overlaps(addr, len, q->used_addr, used_bytes(q->size, q->event_idx));
}

static int elem_add(const struct virtq *q, struct virtq_elem *e, const struct desc *d)
{
	bool write = d->flags & VRING_DESC_F_WRITE;
	if (d->len == 0)
		return VIRTQ_OK; /* nothing to map */
	void *host = guest_mem_ptr(q->mem, d->addr, d->len);
	if (!host)
		return VIRTQ_ERR_ADDR;
	/* 2.7.5: "Drivers MUST NOT add a descriptor chain longer than 2^32
	 * bytes in total" (a used len could not say how much was written). */
	if (e->out_len + e->in_len + d->len > (1ULL << 32))
		return VIRTQ_ERR_TOO_LONG;
	/* The descriptor table and the available ring are only written by the
	 * driver (2.7.5, 2.7.6), the used ring holds the device's used entries
	 * (2.7.8): a buffer the device would write over them is refused. */
	if (write && hits_rings(q, d->addr, d->len))
		return VIRTQ_ERR_OVERLAP;
	/* 2.7.4.2: device-readable descriptors come before device-writable. */
	if (!write && e->nin)
		return VIRTQ_ERR_ORDER;
	if ((write ? e->nin : e->nout) == VIRTQ_MAX_IOV)
		return VIRTQ_ERR_LOOP;
	if (write) {
		e->in[e->nin++] = (struct iovec){host, d->len};
		e->in_len += d->len;
	} else {
		e->out[e->nout++] = (struct iovec){host, d->len};
		e->out_len += d->len;
	}
	return VIRTQ_OK;
}

/* 2.7.5.3: an indirect table is a buffer of descriptors; the WRITE flag
 * of the descriptor pointing at it is ignored (2.7.5.3.2), NEXT is not
 * allowed with INDIRECT (2.7.5.3.1). */
static int walk_indirect(const struct virtq *q, struct virtq_elem *e, const struct desc *ind)
{
	if (ind->len == 0 || ind->len % DESC_SIZE || (ind->flags & VRING_DESC_F_NEXT))
		return VIRTQ_ERR_INDIRECT;
	uint32_t n = ind->len / DESC_SIZE;
	if (n > q->size || !guest_mem_is_ram(q->mem, ind->addr, ind->len))
		return VIRTQ_ERR_INDIRECT;
	uint32_t i = 0, steps = 0;
	for (;;) {
		struct desc d;
		desc_read(q, ind->addr, i, &d);
		if (d.flags & VRING_DESC_F_INDIRECT)
			return VIRTQ_ERR_INDIRECT; /* no nesting (2.7.5.3.1) */
		int ret = elem_add(q, e, &d);
		if (ret)
			return ret;
		if (!(d.flags & VRING_DESC_F_NEXT))
			return VIRTQ_OK;
		if (d.next >= n)
			return VIRTQ_ERR_NEXT;
		if (++steps >= n)
			return VIRTQ_ERR_LOOP;
		i = d.next;
	}
}

bool virtq_has_avail(const struct virtq *q)
{
	return q->size && ring_read16(q, q->avail_addr + AVAIL_IDX) != q->last_avail;
}

int virtq_pop(struct virtq *q, struct virtq_elem *e)
{
	if (!q->size)
		return 0;
	uint16_t avail_idx = ring_read16(q, q->avail_addr + AVAIL_IDX);
	uint16_t pending = (uint16_t)(avail_idx - q->last_avail);
	if (pending == 0)
		return 0;
	if (pending > q->size)
		return VIRTQ_ERR_AVAIL_IDX;
	uint16_t head = ring_read16(q, q->avail_addr + AVAIL_RING(q->last_avail % q->size));
	if (head >= q->size)
		return VIRTQ_ERR_HEAD;
	e->head = head;
	e->nin = e->nout = 0;
	e->in_len = e->out_len = 0;
	uint32_t i = head, steps = 0;
	for (;;) {
		struct desc d;
		desc_read(q, q->desc_addr, i, &d);
		int ret = (d.flags & VRING_DESC_F_INDIRECT) ? walk_indirect(q, e, &d)
							    : elem_add(q, e, &d);
		if (ret)
			return ret;
		if ((d.flags & VRING_DESC_F_INDIRECT) || !(d.flags & VRING_DESC_F_NEXT))
			break;
		if (d.next >= q->size)
			return VIRTQ_ERR_NEXT;
		if (++steps >= q->size)
			return VIRTQ_ERR_LOOP; /* longer than the queue: a loop */
		i = d.next;
	}
	q->last_avail++;
	if (q->event_idx) /* 2.7.10: tell the driver how far we have read */
		ring_write16(q, q->used_addr + USED_RING(q->size), q->last_avail);
	return 1;
}

void virtq_unpop(struct virtq *q, uint16_t n)
{
	q->last_avail = (uint16_t)(q->last_avail - n);
	if (q->event_idx && q->size)
		ring_write16(q, q->used_addr + USED_RING(q->size), q->last_avail);
}

int virtq_fill(struct virtq *q, uint16_t head, uint32_t len)
{
	if (!q->size)
		return VIRTQ_ERR_RING;
	uint64_t slot = q->used_addr + USED_RING(q->used_idx % q->size);
	struct vring_used_elem elem = {.id = head, .len = len};
	memcpy(guest_mem_ptr(q->mem, slot, sizeof(elem)), &elem, sizeof(elem));
	q->used_idx++;
	return VIRTQ_OK;
}

void virtq_publish(struct virtq *q)
{
	if (!q->size)
		return;
	atomic_thread_fence(memory_order_release); /* elements before the index */
	ring_write16(q, q->used_addr + USED_IDX, q->used_idx);
}

int virtq_push(struct virtq *q, uint16_t head, uint32_t len)
{
	int ret = virtq_fill(q, head, len);
	if (!ret)
		virtq_publish(q);
	return ret;
}

bool virtq_should_notify(struct virtq *q)
{
	atomic_thread_fence(memory_order_seq_cst); /* used idx before reading the event */
	if (!q->event_idx) {
		uint16_t flags = ring_read16(q, q->avail_addr);
		return !(flags & VRING_AVAIL_F_NO_INTERRUPT);
	}
	/* 2.7.10: interrupt when used_event was crossed since the last one. */
	uint16_t event = ring_read16(q, q->avail_addr + AVAIL_RING(q->size));
	uint16_t old = q->signalled_used, now = q->used_idx;
	bool valid = q->signalled_valid;
	q->signalled_used = now;
	q->signalled_valid = true;
	if (!valid)
		return true;
	return (uint16_t)(now - event - 1) < (uint16_t)(now - old);
}

const char *virtq_error_name(int err)
{
	switch (err) {
	case VIRTQ_ERR_AVAIL_IDX: return "avail index more than the queue size ahead";
	case VIRTQ_ERR_HEAD: return "chain head out of range";
	case VIRTQ_ERR_NEXT: return "descriptor next out of range";
	case VIRTQ_ERR_LOOP: return "descriptor chain longer than the queue (loop)";
	case VIRTQ_ERR_ADDR: return "buffer outside guest RAM";
	case VIRTQ_ERR_INDIRECT: return "invalid indirect descriptor table";
	case VIRTQ_ERR_ORDER: return "device-readable descriptor after a device-writable one";
	case VIRTQ_ERR_RING: return "ring not configured or outside guest RAM";
	case VIRTQ_ERR_TOO_LONG: return "descriptor chain longer than 2^32 bytes";
	case VIRTQ_ERR_OVERLAP: return "device-writable buffer over the queue's own rings";
	default: return "no error";
	}
}
