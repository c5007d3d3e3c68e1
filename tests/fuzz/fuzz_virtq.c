/*
 * libFuzzer target: a hostile driver's split virtqueue. The input is
 *   byte 0   queue size (1 << (b % 11)), byte 1 flags:
 *            bit0 VIRTIO_F_EVENT_IDX, bit1 rings at the very end of RAM,
 *            bit2 unpop/re-pop once, bit3 bump avail idx mid-run
 *   then     the descriptor table (size * 16 bytes), the avail ring
 *            (4 + 2 * size (+2)), the used ring's avail_event (2 bytes),
 *            and anything left is laid at SCRATCH (indirect tables, data).
 * The device side virtq_init()s, virtq_pop()s in a bounded loop, touches
 * every returned iovec (reads out, writes in) and virtq_push()es it back.
 * RAM is fenced by guard pages, so an iovec or ring access outside RAM
 * faults.
 */
#include "fuzz_common.h"

#include "devices/virtio/virtqueue.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RAM_SIZE    (1ULL << 20)
#define DESC_GPA    0x10000ULL
#define AVAIL_GPA   0x20000ULL
#define USED_GPA    0x30000ULL
#define SCRATCH_GPA 0x40000ULL

FUZZ_GUEST_RAM(ram, RAM_SIZE)
static struct virtq_elem elem;
static uint8_t bounce[64 * 1024];

static void lay(uint64_t gpa, const uint8_t **p, size_t *left, size_t want)
{
	size_t n = *left < want ? *left : want;
	memcpy(ram.buf + gpa, *p, n);
	*p += n;
	*left -= n;
}

static void touch(const struct virtq_elem *e)
{
	/* Every iovec must be inside RAM: read all out bytes, fill all in bytes. */
	uint64_t done = 0;
	while (done < e->out_len) {
		uint64_t got = iov_to_buf(e->out, e->nout, done, bounce, sizeof(bounce));
		if (!got)
			break;
		done += got;
	}
	memset(bounce, 0xA5, sizeof(bounce));
	done = 0;
	while (done < e->in_len) {
		uint64_t put = buf_to_iov(e->in, e->nin, done, bounce, sizeof(bounce));
		if (!put)
			break;
		done += put;
	}
	for (unsigned i = 0; i < e->nout; i++)
		if (e->out[i].iov_len &&
		    ((uint8_t *)e->out[i].iov_base < ram.buf ||
		     (uint8_t *)e->out[i].iov_base + e->out[i].iov_len > ram.buf + ram.size))
			__builtin_trap();
	for (unsigned i = 0; i < e->nin; i++)
		if (e->in[i].iov_len &&
		    ((uint8_t *)e->in[i].iov_base < ram.buf ||
		     (uint8_t *)e->in[i].iov_base + e->in[i].iov_len > ram.buf + ram.size))
			__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	uint16_t qsize = (uint16_t)(1u << (data[0] % 11));
	uint8_t flags = data[1];
	bool event_idx = flags & 1;
	const uint8_t *p = data + 2;
	size_t left = size - 2;

	uint64_t desc = DESC_GPA, avail = AVAIL_GPA, used = USED_GPA;
	uint64_t avail_len = 4 + 2 * (uint64_t)qsize + (event_idx ? 2 : 0);
	uint64_t used_len = 4 + 8 * (uint64_t)qsize + (event_idx ? 2 : 0);
	if (flags & 2) {
		/* Rings flush against the end of RAM: off-by-ones there fault. */
		used = (RAM_SIZE - used_len) & ~3ULL;
		avail = (used - avail_len) & ~1ULL;
		desc = (avail - (uint64_t)qsize * 16) & ~15ULL;
	}
	lay(desc, &p, &left, (size_t)qsize * 16);
	lay(avail, &p, &left, avail_len);
	if (event_idx)
		lay(used + 4 + 8 * (uint64_t)qsize, &p, &left, 2);
	lay(SCRATCH_GPA, &p, &left, RAM_SIZE - SCRATCH_GPA - 0x10000);

	struct virtq q;
	if (virtq_init(&q, &ram.m, qsize, VIRTQ_MAX_SIZE, desc, avail, used, event_idx) == 0) {
		bool unpopped = false, bumped = false;
		for (unsigned i = 0; i < 2u * qsize + 8; i++) {
			int ret = virtq_pop(&q, &elem);
			if (ret < 0) {
				(void)virtq_error_name(ret);
				break;
			}
			if (ret == 0) {
				if ((flags & 8) && !bumped) {
					/* The driver publishes more while we run. */
					bumped = true;
					uint16_t idx;
					memcpy(&idx, ram.buf + avail + 2, 2);
					idx = (uint16_t)(idx + 1 + (flags >> 4));
					memcpy(ram.buf + avail + 2, &idx, 2);
					continue;
				}
				break;
			}
			if (elem.head >= qsize)
				__builtin_trap();
			touch(&elem);
			if ((flags & 4) && !unpopped) {
				unpopped = true;
				virtq_unpop(&q, 1);
				continue;
			}
			uint32_t len =
			    (uint32_t)(elem.in_len > UINT32_MAX ? UINT32_MAX : elem.in_len);
			if (virtq_push(&q, elem.head, len) < 0)
				break;
			(void)virtq_should_notify(&q);
		}
	}
	fuzz_ram_reset(&ram);
	return 0;
}
