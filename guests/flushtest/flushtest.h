/*
 * flushtest: the guest side of the fault and no-lost-writes tests
 * (tests/faults/). A polled virtio driver (modern virtio-pci, virtio 1.2)
 * with no interrupts at all: every queue is set up with
 * VIRTQ_AVAIL_F_NO_INTERRUPT and no MSI-X vector, and the guest polls its
 * used rings at CPL 3 (native speed on our hosts; ring 0 is emulated and
 * does nothing here but the kit's set-up). Shared between its files.
 */
#ifndef FLUSHTEST_H
#define FLUSHTEST_H

#include "guest/kit.h"
#include "guest/pcienum.h"
#include "guest/virtio.h"

/* The block the tests write: 4 KiB at sector seq * 8. */
#define FT_SECTOR      512u
#define FT_BLOCK       4096u
#define FT_SECTORS_PER (FT_BLOCK / FT_SECTOR)
#define FT_MAX_DEPTH   32u
#define FT_QUEUE_SIZE  128u

/* virtio 1.2, 5.2.3 / 5.2.6 */
#define VIRTIO_BLK_F_RO	   5
#define VIRTIO_BLK_F_FLUSH 9
#define VIRTIO_BLK_T_IN	   0
#define VIRTIO_BLK_T_OUT   1
#define VIRTIO_BLK_T_FLUSH 4
#define VIRTIO_BLK_S_OK	   0
#define VIRTIO_BLK_S_IOERR 1
#define BLK_CFG_CAPACITY   0

struct ft_dev {
	const struct pci_func *pf;
	const char *name;
	struct virtio_pci_dev vp;
	uint64_t features; /* negotiated */
	unsigned nq;
	struct virtq vq[2];
	bool up;
};

struct flushtest {
	uint64_t tsc_hz;
	/* keys */
	const char *mode; /* write, ioerr, readfail, tapgone */
	size_t mode_len;
	uint64_t cycle, batch, blocks, wait_s;
	bool flush; /* negotiate VIRTIO_BLK_F_FLUSH */
	/* the disk */
	struct ft_dev blk, net;
	uint64_t capacity; /* sectors */
	uint64_t nblocks;  /* 4 KiB blocks the test may use */
};

extern struct flushtest ft;

__attribute__((format(printf, 1, 2))) void ft_fail(const char *fmt, ...);

/* TSC ticks for a number of microseconds. */
uint64_t ft_us(uint64_t us);

/* 3.1.1 with the wanted features (VERSION_1 added), nq queues of at most
 * FT_QUEUE_SIZE, polled (no vectors, NO_INTERRUPT), then DRIVER_OK. */
bool ft_bringup(struct ft_dev *d, uint16_t type, uint64_t wanted, unsigned nq);
bool ft_needs_reset(const struct ft_dev *d);

/* blk.c: the block pattern and requests. */
void ft_fill_block(uint8_t *p, uint64_t cycle, uint64_t seq);
/* Offset of the first byte that differs from the block's pattern, or -1. */
int64_t ft_check_block(const uint8_t *p, uint64_t cycle, uint64_t seq);
bool ft_blk_init(void);
/* Requests: post without a kick, then ft_blk_wait for all posted. */
struct ft_req {
	struct {
		uint32_t type, reserved;
		uint64_t sector;
	} * hdr;
	uint8_t *buf;
	volatile uint8_t *status;
	int head;
	bool done;
	uint32_t len; /* used length */
};
extern struct ft_req ft_reqs[FT_MAX_DEPTH];
bool ft_blk_post(struct ft_req *r, uint32_t type, uint64_t sector, bool with_data);
/* Kicks and waits until reqs[0..n) are all used, at most ft.wait_s
 * seconds; false (with a FAIL line naming `what`) on a time-out. */
bool ft_blk_wait(unsigned n, const char *what);
/* One request at a time: returns its status byte, or -1 on a time-out. */
int ft_blk_one(uint32_t type, uint64_t seq, const char *what);

int ft_mode_write(void);
int ft_mode_ioerr(void);
int ft_mode_readfail(void);
/* net.c */
int ft_mode_tapgone(void);

#endif
