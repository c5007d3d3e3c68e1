/* The device side of the virtio interface: the pass over a queue that every
 * device ends the same way. */
#include "devices/virtio/virtio.h"

void virtio_queue_end_pass(struct virtio_dev *d, unsigned q, int ret, uint16_t used_before)
{
	if (ret < 0)
		virtio_needs_reset(d, virtq_error_name(ret));
	if (d->vqs[q].used_idx != used_before) {
		virtq_publish(&d->vqs[q]); /* entries only filled become visible at once */
		virtio_queue_used(d, q);
	}
}

unsigned virtio_queue_serve(struct virtio_dev *d, unsigned q, struct virtq_elem *elem,
			    uint32_t (*serve)(void *ctx, const struct virtq_elem *e), void *ctx)
{
	struct virtq *vq = &d->vqs[q];
	struct virtio_budget budget = virtio_budget_pass();
	uint16_t before = vq->used_idx;
	int ret = 0;
	while (virtio_budget_left(&budget) && (ret = virtq_pop(vq, elem)) == 1) {
		virtq_fill(vq, elem->head, serve(ctx, elem));
		virtio_budget_spend(&budget, elem->in_len + elem->out_len);
	}
	if (ret == 1 && virtq_has_avail(vq))
		virtio_queue_yield(d, q);
	virtio_queue_end_pass(d, q, ret < 0 ? ret : 0, before);
	return (uint16_t)(vq->used_idx - before);
}
