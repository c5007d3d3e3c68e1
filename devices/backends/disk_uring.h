/* The io_uring disk backend (devices/backends/disk.h) over a raw file or
 * block device: one restricted ring per queue, the queue's notify eventfd
 * registered with it. */
#ifndef DEVICES_BACKENDS_DISK_URING_H
#define DEVICES_BACKENDS_DISK_URING_H

#include "devices/backends/disk.h"

struct io_uring;

/* Opens `path` (O_DIRECT with `direct`); NULL with an error. */
struct disk *disk_uring_open(const char *path, bool readonly, bool direct, struct err *e);
/* A queue's ring, for tests that look into it. */
struct io_uring *disk_uring_ring(struct disk_queue *q);

#endif
