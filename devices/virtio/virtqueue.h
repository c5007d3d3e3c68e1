/*
 * Split virtqueues (virtio 1.2, section 2.7), device side, hardened against
 * a hostile driver: every ring and buffer address is checked against guest
 * RAM through the one translation (vmm/guest_mem.h) before use; chains are
 * bounded by the queue size; `next` must be in range; an indirect table may
 * not contain another, nor be chained; an avail index more than queue-size
 * ahead is an error; so are a chain longer than 2^32 bytes in all (2.7.5)
 * and a device-writable buffer over the queue's own rings (the device
 * would write where only the driver writes, 2.7.5, 2.7.6, or into its own
 * used entries, 2.7.8). Errors are returned, never fatal: the transport marks
 * the device NEEDS_RESET (section 2.1.2) and the VMM keeps running.
 * VIRTIO_F_EVENT_IDX (2.7.7/2.7.10) and VIRTIO_F_INDIRECT_DESC (2.7.5.3).
 */
#ifndef DEVICES_VIRTQUEUE_H
#define DEVICES_VIRTQUEUE_H

#include "vmm/base/iov.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

struct guest_mem;

#define VIRTQ_MAX_SIZE 1024
#define VIRTQ_MAX_IOV  VIRTQ_MAX_SIZE

enum virtq_error {
	VIRTQ_OK = 0,
	VIRTQ_ERR_AVAIL_IDX = -1, /* avail index ran more than size ahead */
	VIRTQ_ERR_HEAD = -2,	  /* head index >= size */
	VIRTQ_ERR_NEXT = -3,	  /* next >= size */
	VIRTQ_ERR_LOOP = -4,	  /* chain longer than the queue */
	VIRTQ_ERR_ADDR = -5,	  /* buffer outside RAM */
	VIRTQ_ERR_INDIRECT = -6,  /* bad indirect table */
	VIRTQ_ERR_ORDER = -7,	  /* device-readable after device-writable */
	VIRTQ_ERR_RING = -8,	  /* ring itself not in RAM */
	VIRTQ_ERR_TOO_LONG = -9,  /* chain longer than 2^32 bytes */
	VIRTQ_ERR_OVERLAP = -10,  /* device-writable buffer over the queue's rings */
};

struct virtq {
	const struct guest_mem *mem;
	uint16_t size; /* 0 = not configured */
	uint64_t desc_addr, avail_addr, used_addr;
	bool event_idx; /* VIRTIO_F_EVENT_IDX negotiated */
	uint16_t last_avail;
	uint16_t used_idx;
	uint16_t signalled_used; /* used index at the last interrupt */
	bool signalled_valid;
};

/* One buffer: the guest's scatter list split into driver->device (out)
 * and device->driver (in) iovecs, host addresses already checked. */
struct virtq_elem {
	uint16_t head;
	unsigned nout, nin;
	uint64_t out_len, in_len;
	struct iovec out[VIRTQ_MAX_IOV];
	struct iovec in[VIRTQ_MAX_IOV];
};

/* Checks size (power of two, 1..max) and ring placement (alignment 16/2/4,
 * inside RAM). On success the queue is live with indices at 0. */
int virtq_init(struct virtq *q, const struct guest_mem *mem, uint16_t size, uint16_t max_size,
	       uint64_t desc, uint64_t avail, uint64_t used, bool event_idx);
/* Whether the driver has made buffers available that were not popped yet
 * (a broken avail index counts: the pop then says what is wrong). */
bool virtq_has_avail(const struct virtq *q);
/* 1 = an element was taken, 0 = ring empty, <0 = enum virtq_error. */
int virtq_pop(struct virtq *q, struct virtq_elem *e);
/* Gives back the last `n` popped, unpushed elements (a receive path that
 * found too little room), so the next pop sees them again. */
void virtq_unpop(struct virtq *q, uint16_t n);
/* Puts `head` in the used ring with `len` bytes written, and publishes
 * the used index. */
int virtq_push(struct virtq *q, uint16_t head, uint32_t len);
/* A batch (2.7.10, 2.7.13.3): virtq_fill writes used entries without
 * moving the driver-visible used index; virtq_publish then moves it once
 * for all of them. */
int virtq_fill(struct virtq *q, uint16_t head, uint32_t len);
void virtq_publish(struct virtq *q);
/* Whether the driver wants an interrupt for what was pushed since the last
 * one (used-event index, or the NO_INTERRUPT flag without EVENT_IDX). */
bool virtq_should_notify(struct virtq *q);
const char *virtq_error_name(int err);

#endif
