#include "virtio_helpers.h"

#include "devices/pci/msix.h"
#include "devices/pci/pci.h"
#include "devices/virtio/virtio_net.h"
#include "vmm/base/err.h"

#include <check.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- split ring, driver side ---- */

void vrd_init(struct vring_drv *v, uint8_t *ram, uint16_t size, uint64_t desc, uint64_t avail,
	      uint64_t used)
{
	*v = (struct vring_drv){
	    .ram = ram, .size = size, .desc = desc, .avail = avail, .used = used};
}

void vrd_layout(struct vring_drv *v, uint8_t *ram, uint16_t size, uint64_t base)
{
	uint64_t avail = base + 16ULL * size;
	uint64_t used = (avail + 6 + 2ULL * size + 4095) & ~4095ULL;
	vrd_init(v, ram, size, base, avail, used);
	memset(ram + base, 0, used + 6 + 8ULL * size - base);
}

void vrd_desc_at(uint8_t *ram, uint64_t table, unsigned i, uint64_t addr, uint32_t len,
		 uint16_t flags, uint16_t next)
{
	uint8_t *d = ram + table + 16ULL * i;
	put64(d, addr);
	put32(d + 8, len);
	put16(d + 12, flags);
	put16(d + 14, next);
}

void vrd_desc(struct vring_drv *v, unsigned i, uint64_t addr, uint32_t len, uint16_t flags,
	      uint16_t next)
{
	vrd_desc_at(v->ram, v->desc, i, addr, len, flags, next);
}

static void chain_at(uint8_t *ram, uint64_t table, unsigned first, const struct vbuf *b, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		uint16_t f = (uint16_t)((b[i].write ? VQ_WRITE : 0) | (i + 1 < n ? VQ_NEXT : 0));
		vrd_desc_at(ram, table, first + i, b[i].addr, b[i].len, f,
			    (uint16_t)(i + 1 < n ? first + i + 1 : 0));
	}
}

uint16_t vrd_chain(struct vring_drv *v, uint16_t first, const struct vbuf *b, unsigned n)
{
	chain_at(v->ram, v->desc, first, b, n);
	return first;
}

void vrd_table(uint8_t *ram, uint64_t table, const struct vbuf *b, unsigned n)
{
	chain_at(ram, table, 0, b, n);
}

void vrd_publish(struct vring_drv *v, uint16_t head)
{
	put16(v->ram + v->avail + 4 + 2ULL * (v->avail_idx % v->size), head);
	v->avail_idx++;
	put16(v->ram + v->avail + 2, v->avail_idx);
}

void vrd_set_avail_idx(struct vring_drv *v, uint16_t idx)
{
	v->avail_idx = idx;
	put16(v->ram + v->avail + 2, idx);
}

void vrd_set_avail_flags(struct vring_drv *v, uint16_t flags)
{
	put16(v->ram + v->avail, flags);
}

void vrd_set_used_event(struct vring_drv *v, uint16_t e)
{
	put16(v->ram + v->avail + 4 + 2ULL * v->size, e);
}

uint16_t vrd_avail_event(const struct vring_drv *v)
{
	return get16(v->ram + v->used + 4 + 8ULL * v->size);
}

uint16_t vrd_used_idx(const struct vring_drv *v)
{
	return get16(v->ram + v->used + 2);
}

uint16_t vrd_used_flags(const struct vring_drv *v)
{
	return get16(v->ram + v->used);
}

void vrd_used_elem(const struct vring_drv *v, unsigned slot, uint32_t *id, uint32_t *len)
{
	const uint8_t *e = v->ram + v->used + 4 + 8ULL * (slot % v->size);
	if (id)
		*id = get32(e);
	if (len)
		*len = get32(e + 4);
}

/* ---- fake host ---- */

static int fh_ioeventfd(void *ctx, uint64_t gpa, unsigned len, int fd, bool assign)
{
	struct fake_host *h = ctx;
	ck_assert_uint_lt(h->nio, FAKE_HOST_IO_MAX);
	h->io[h->nio].gpa = gpa;
	h->io[h->nio].len = len;
	h->io[h->nio].fd = fd;
	h->io[h->nio].assign = assign;
	h->nio++;
	return h->ioeventfd_ret;
}

static int fh_watch(void *ctx, unsigned q, int fd, void (*ready)(void *arg), void *arg)
{
	struct fake_host *h = ctx;
	ck_assert_uint_lt(h->nw, FAKE_HOST_WATCH_MAX);
	h->w[h->nw].q = q;
	h->w[h->nw].fd = fd;
	h->w[h->nw].ready = ready;
	h->w[h->nw].arg = arg;
	h->nw++;
	return 0;
}

static int fh_watch_set(void *ctx, unsigned q, int fd, bool on)
{
	struct fake_host *h = ctx;
	for (unsigned i = 0; i < h->nw; i++)
		if (h->w[i].fd == fd) {
			ck_assert_uint_eq(h->w[i].q, q);
			h->w[i].off = !on;
			return 0;
		}
	return -ENOENT;
}

bool fake_host_watching(const struct fake_host *h, int fd)
{
	int i = fake_host_watch_of(h, fd);
	return i >= 0 && !h->w[i].off;
}

static int fh_defer(void *ctx, unsigned q, void (*fn)(void *arg), void *arg)
{
	struct fake_host *h = ctx;
	h->deferrals++;
	for (unsigned i = 0; i < h->ndeferred; i++)
		if (h->deferred[i].fn == fn && h->deferred[i].arg == arg)
			return 0;
	ck_assert_uint_lt(h->ndeferred, FAKE_HOST_WATCH_MAX);
	h->deferred[h->ndeferred].q = q;
	h->deferred[h->ndeferred].fn = fn;
	h->deferred[h->ndeferred].arg = arg;
	h->ndeferred++;
	return 0;
}

unsigned fake_host_run_deferred(struct fake_host *h)
{
	unsigned n = h->ndeferred;
	void (*fn[FAKE_HOST_WATCH_MAX])(void *);
	void *arg[FAKE_HOST_WATCH_MAX];
	for (unsigned i = 0; i < n; i++) {
		fn[i] = h->deferred[i].fn;
		arg[i] = h->deferred[i].arg;
	}
	h->ndeferred = 0;
	for (unsigned i = 0; i < n; i++)
		fn[i](arg[i]);
	return n;
}

struct virtio_host fake_host_make(struct fake_host *h, struct log *log)
{
	memset(h, 0, sizeof(*h));
	return (struct virtio_host){.ioeventfd = fh_ioeventfd,
				    .watch = fh_watch,
				    .defer = fh_defer,
				    .ctx = h,
				    .log = log,
				    .watch_set = fh_watch_set};
}

int fake_host_ioeventfd_at(const struct fake_host *h, uint64_t gpa)
{
	int fd = -1;
	for (unsigned i = 0; i < h->nio; i++)
		if (h->io[i].gpa == gpa)
			fd = h->io[i].assign ? h->io[i].fd : -1;
	return fd;
}

unsigned fake_host_ioeventfds(const struct fake_host *h)
{
	unsigned n = 0;
	for (unsigned i = 0; i < h->nio; i++) {
		bool later = false; /* count each gpa once, by its last record */
		for (unsigned j = i + 1; j < h->nio; j++)
			later |= h->io[j].gpa == h->io[i].gpa;
		if (!later && h->io[i].assign)
			n++;
	}
	return n;
}

static unsigned fake_host_poll_some(struct fake_host *h, int q)
{
	unsigned calls = 0;
	for (unsigned i = 0; i < h->nw; i++) {
		if ((q >= 0 && h->w[i].q != (unsigned)q) || h->w[i].off)
			continue;
		struct pollfd p = {.fd = h->w[i].fd, .events = POLLIN};
		if (poll(&p, 1, 0) == 1 && (p.revents & POLLIN)) {
			h->w[i].ready(h->w[i].arg);
			calls++;
		}
	}
	return calls;
}

unsigned fake_host_poll(struct fake_host *h)
{
	return fake_host_poll_some(h, -1);
}

unsigned fake_host_poll_queue(struct fake_host *h, unsigned q)
{
	return fake_host_poll_some(h, (int)q);
}

int fake_host_watch_of(const struct fake_host *h, int fd)
{
	for (unsigned i = 0; i < h->nw; i++)
		if (h->w[i].fd == fd)
			return (int)i;
	return -1;
}

/* ---- fake transport ---- */

static struct fake_transport *ft_of(struct virtio_transport *t)
{
	return (struct fake_transport *)t; /* t is the first member */
}

static void ft_queue_used(struct virtio_transport *t, unsigned q)
{
	if (q < VIRTIO_MAX_QUEUES)
		ft_of(t)->used[q]++;
}

static void ft_needs_reset(struct virtio_transport *t, const char *why)
{
	struct fake_transport *f = ft_of(t);
	f->needs_reset++;
	snprintf(f->why, sizeof(f->why), "%s", why ? why : "");
}

static void ft_lock(struct virtio_transport *t, unsigned q)
{
	ck_assert_uint_lt(q, VIRTIO_MAX_QUEUES);
	ck_assert_int_eq(ft_of(t)->lock_depth[q], 0); /* never taken twice */
	ft_of(t)->lock_depth[q]++;
	ft_of(t)->locks[q]++;
}

static void ft_unlock(struct virtio_transport *t, unsigned q)
{
	ft_of(t)->lock_depth[q]--;
}

/* A driver that has set DRIVER_OK, unless the test says otherwise. */
static bool ft_live(struct virtio_transport *t, unsigned q)
{
	(void)q;
	return !ft_of(t)->not_live;
}

static void ft_yield(struct virtio_transport *t, unsigned q)
{
	if (q < VIRTIO_MAX_QUEUES)
		ft_of(t)->yields[q]++;
}

static const struct virtio_transport_ops ft_ops = {
    .yield = ft_yield,
    .queue_used = ft_queue_used,
    .live = ft_live,
    .needs_reset = ft_needs_reset,
    .queue_lock = ft_lock,
    .queue_unlock = ft_unlock,
};

void fake_transport_attach(struct fake_transport *f, struct virtio_dev *d, uint64_t features)
{
	memset(f, 0, sizeof(*f));
	f->t.ops = &ft_ops;
	d->transport = &f->t;
	d->features = features;
}

void fake_dev_queue(struct virtio_dev *d, unsigned q, const struct guest_mem *m,
		    const struct vring_drv *v)
{
	bool ev = virtio_has_feature(d, VIRTIO_RING_F_EVENT_IDX);
	int ret =
	    virtq_init(&d->vqs[q], m, v->size, d->ops->queue_max, v->desc, v->avail, v->used, ev);
	ck_assert_msg(ret == 0, "virtq_init of queue %u: %s", q, virtq_error_name(ret));
}

void expect_budget_passes(struct fake_transport *f, struct virtio_dev *d, unsigned q,
			  const struct vring_drv *v, uint16_t per_pass, uint16_t total)
{
	d->ops->queue_notify(d, q);
	ck_assert_uint_eq(vrd_used_idx(v), per_pass);
	ck_assert_uint_eq(f->yields[q], 1);
	ck_assert_uint_eq(f->used[q], 1); /* one interrupt decision for the pass */
	d->ops->queue_notify(d, q);	  /* what the yield brings back */
	ck_assert_uint_eq(vrd_used_idx(v), total);
	ck_assert_uint_eq(f->yields[q], 1); /* nothing left behind this time */
}

/* ---- probe device ---- */

static void probe_notify(struct virtio_dev *d, unsigned qi)
{
	struct virtio_probe *p = d->priv;
	int ret;
	bool pushed = false;
	p->notified[qi]++;
	while ((ret = virtq_pop(&d->vqs[qi], &p->elem)) == 1) {
		for (unsigned i = 0; i < p->elem.nin; i++)
			memset(p->elem.in[i].iov_base, 0xA5, p->elem.in[i].iov_len);
		virtq_push(&d->vqs[qi], p->elem.head, (uint32_t)p->elem.in_len);
		pushed = true;
	}
	if (ret < 0)
		virtio_needs_reset(d, virtq_error_name(ret));
	if (pushed)
		virtio_queue_used(d, qi);
}

static void probe_config_read(struct virtio_dev *d, unsigned off, void *data, unsigned len)
{
	(void)d;
	for (unsigned i = 0; i < len; i++)
		((uint8_t *)data)[i] = (uint8_t)(0x30 + off + i);
}

static void probe_activate(struct virtio_dev *d)
{
	((struct virtio_probe *)d->priv)->activated++;
}

static void probe_reset(struct virtio_dev *d)
{
	((struct virtio_probe *)d->priv)->resets++;
}

void virtio_probe_init(struct virtio_probe *p, uint16_t type, unsigned nq, uint16_t qmax)
{
	ck_assert_uint_le(nq, PROBE_MAX_QUEUES);
	memset(p, 0, sizeof(*p));
	p->ops = (struct virtio_dev_ops){
	    .type = type,
	    .pci_class = 0xFF0000,
	    .features = PROBE_FEATURES,
	    .num_queues = nq,
	    .queue_max = qmax,
	    .config_size = PROBE_CONFIG_SIZE,
	    .config_read = probe_config_read,
	    .queue_notify = probe_notify,
	    .activate = probe_activate,
	    .reset = probe_reset,
	};
	p->vdev.ops = &p->ops;
	p->vdev.priv = p;
}

/* ---- virtio-pci driver view ---- */

uint32_t mmio_rd(struct pci_rig *r, uint64_t addr, unsigned len)
{
	uint8_t b[8] = {0};
	bus_read(&r->mmio, addr, b, len);
	return len == 1 ? b[0] : len == 2 ? get16(b) : get32(b);
}

void mmio_wr(struct pci_rig *r, uint64_t addr, unsigned len, uint32_t v)
{
	uint8_t b[8] = {0};
	put32(b, v);
	bus_write(&r->mmio, addr, b, len);
}

void vpv_init(struct vpci_view *v, struct pci_rig *r, uint8_t slot)
{
	memset(v, 0, sizeof(*v));
	v->rig = r;
	v->slot = slot;
	uint8_t c = (uint8_t)cfg_rd(r, slot, PCI_CAPABILITY_LIST, 1) & 0xFC;
	for (unsigned steps = 0; c && steps < 48; steps++) {
		uint8_t id = (uint8_t)cfg_rd(r, slot, c, 1);
		if (id == 0x09) {
			uint8_t type = (uint8_t)cfg_rd(r, slot, c + 3u, 1);
			if (type >= 1 && type <= 5 && !v->cap[type]) {
				v->cap[type] = c;
				uint8_t bar = (uint8_t)cfg_rd(r, slot, c + 4u, 1);
				if (type <= 4 && bar < 6)
					v->at[type] =
					    rig_bar_addr(r, slot, bar) + cfg_rd(r, slot, c + 8u, 4);
				if (type == VPCI_NOTIFY)
					v->notify_mult = cfg_rd(r, slot, c + 16u, 4);
			}
		} else if (id == PCI_CAP_ID_MSIX && !v->msix_cap) {
			v->msix_cap = c;
			uint32_t t = cfg_rd(r, slot, c + 4u, 4), p = cfg_rd(r, slot, c + 8u, 4);
			v->msix_table = rig_bar_addr(r, slot, t & 7) + (t & ~7u);
			v->msix_pba = rig_bar_addr(r, slot, p & 7) + (p & ~7u);
		}
		c = (uint8_t)cfg_rd(r, slot, c + 1u, 1) & 0xFC;
	}
}

uint32_t vpv_rd(const struct vpci_view *v, unsigned off, unsigned len)
{
	return mmio_rd(v->rig, v->at[VPCI_COMMON] + off, len);
}

void vpv_wr(const struct vpci_view *v, unsigned off, unsigned len, uint32_t val)
{
	mmio_wr(v->rig, v->at[VPCI_COMMON] + off, len, val);
}

uint8_t vpv_status(const struct vpci_view *v)
{
	return (uint8_t)vpv_rd(v, VPC_STATUS, 1);
}

void vpv_set_status(const struct vpci_view *v, uint8_t s)
{
	vpv_wr(v, VPC_STATUS, 1, s);
}

uint64_t vpv_device_features(const struct vpci_view *v)
{
	vpv_wr(v, VPC_DFSELECT, 4, 0);
	uint64_t lo = vpv_rd(v, VPC_DF, 4);
	vpv_wr(v, VPC_DFSELECT, 4, 1);
	uint64_t hi = vpv_rd(v, VPC_DF, 4);
	return lo | hi << 32;
}

bool vpv_negotiate(const struct vpci_view *v, uint64_t features)
{
	vpv_set_status(v, 0);
	vpv_set_status(v, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	vpv_set_status(v, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
	vpv_wr(v, VPC_GFSELECT, 4, 0);
	vpv_wr(v, VPC_GF, 4, (uint32_t)features);
	vpv_wr(v, VPC_GFSELECT, 4, 1);
	vpv_wr(v, VPC_GF, 4, (uint32_t)(features >> 32));
	vpv_set_status(v, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
			      VIRTIO_CONFIG_S_FEATURES_OK);
	return vpv_status(v) & VIRTIO_CONFIG_S_FEATURES_OK;
}

void vpv_select(const struct vpci_view *v, unsigned q)
{
	vpv_wr(v, VPC_Q_SELECT, 2, q);
}

static void wr64(const struct vpci_view *v, unsigned off, uint64_t val)
{
	vpv_wr(v, off, 4, (uint32_t)val);
	vpv_wr(v, off + 4, 4, (uint32_t)(val >> 32));
}

void vpv_queue(const struct vpci_view *v, unsigned q, const struct vring_drv *r)
{
	vpv_select(v, q);
	vpv_wr(v, VPC_Q_SIZE, 2, r->size);
	wr64(v, VPC_Q_DESC, r->desc);
	wr64(v, VPC_Q_DRIVER, r->avail);
	wr64(v, VPC_Q_DEVICE, r->used);
	vpv_wr(v, VPC_Q_ENABLE, 2, 1);
}

uint64_t vpv_notify_addr(const struct vpci_view *v, unsigned q)
{
	vpv_select(v, q);
	return v->at[VPCI_NOTIFY] + (uint64_t)vpv_rd(v, VPC_Q_NOFF, 2) * v->notify_mult;
}

void vpv_notify(const struct vpci_view *v, unsigned q)
{
	mmio_wr(v->rig, vpv_notify_addr(v, q), 2, q);
}

uint8_t vpv_isr(const struct vpci_view *v)
{
	return (uint8_t)mmio_rd(v->rig, v->at[VPCI_ISR], 1);
}

uint32_t vpv_cfg(const struct vpci_view *v, unsigned off, unsigned len)
{
	return mmio_rd(v->rig, v->at[VPCI_DEVICE] + off, len);
}

void vpv_msix_enable(const struct vpci_view *v, bool on)
{
	ck_assert_uint_ne(v->msix_cap, 0);
	uint16_t c = (uint16_t)conf1_read(v->rig, 0, v->slot, 0, v->msix_cap + 2u, 2);
	c = on ? (uint16_t)(c | PCI_MSIX_FLAGS_ENABLE) : (uint16_t)(c & ~PCI_MSIX_FLAGS_ENABLE);
	conf1_write(v->rig, 0, v->slot, 0, v->msix_cap + 2u, 2, c);
}

void vpv_msix_program(const struct vpci_view *v, unsigned n, uint64_t addr, uint32_t data,
		      bool masked)
{
	uint64_t e = v->msix_table + 16ULL * n;
	mmio_wr32(v->rig, e + MSIX_E_ADDR_LO, (uint32_t)addr);
	mmio_wr32(v->rig, e + MSIX_E_ADDR_HI, (uint32_t)(addr >> 32));
	mmio_wr32(v->rig, e + MSIX_E_DATA, data);
	mmio_wr32(v->rig, e + MSIX_E_CTRL, masked ? 1 : 0);
}

uint64_t virtio_offered_features(struct virtio_dev *d)
{
	static struct pci_rig r;
	static struct fake_host h;
	static struct virtio_pci vp;
	static struct virtq saved_vqs[VIRTIO_MAX_QUEUES];
	struct virtio_transport *saved_t = d->transport;
	uint64_t saved_f = d->features;
	memcpy(saved_vqs, d->vqs, sizeof(saved_vqs));
	pci_rig_init(&r, IRQ_MSI_SIGNAL, IRQ_INTX_LINE);
	struct virtio_host host = fake_host_make(&h, &r.log);
	ck_assert_int_eq(virtio_pci_init(&vp, d, "offered", &r.irq, &r.ram.m, &host, IRQ_MODE_MSIX),
			 0);
	ck_assert_int_eq(pci_bus_add_device(&r.pci, &vp.pci, 1, 1), 0);
	ck_assert_int_eq(pci_bus_assign_resources(&r.pci), 0);
	struct vpci_view v;
	vpv_init(&v, &r, 1);
	ck_assert_uint_ne(v.cap[VPCI_COMMON], 0);
	uint64_t f = vpv_device_features(&v);
	virtio_pci_destroy(&vp);
	pci_rig_free(&r);
	d->transport = saved_t;
	d->features = saved_f;
	memcpy(d->vqs, saved_vqs, sizeof(saved_vqs));
	return f;
}

bool tap_possible(const char *name, const uint8_t mac[6], unsigned pairs, char *why, size_t len)
{
	const char *kind = pairs > 1 ? "multiqueue tap" : "tap";
	if (access("/dev/net/tun", R_OK | W_OK) != 0) {
		snprintf(why, len, "/dev/net/tun: %s", strerror(errno));
		return false;
	}
	pid_t pid = fork();
	if (pid == 0) {
		if (unshare(CLONE_NEWNET) != 0)
			_exit(2);
		struct virtio_net n;
		struct err e = {0};
		_exit(virtio_net_init(&n, name, mac, pairs, NULL, &e) == 0 ? 0 : 3);
	}
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) {
		snprintf(why, len, "cannot fork a probe");
		return false;
	}
	if (WEXITSTATUS(st) == 2)
		snprintf(why, len, "unshare(CLONE_NEWNET) refused (not root?)");
	else if (WEXITSTATUS(st) == 3)
		snprintf(why, len, "cannot create a %s with /dev/net/tun", kind);
	return WEXITSTATUS(st) == 0;
}
