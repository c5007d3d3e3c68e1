/*
 * A virtio-pci device whose queues another process serves (virtio.h
 * external_queues; vhost-user): the transport hands the backend the queues
 * at DRIVER_OK and stops it at reset, and turns the backend's call eventfd
 * writes into the guest's interrupts (PCI Local Bus 3.0 6.8.2, virtio 1.2
 * 4.1.5): bound to the vector's GSI as an irqfd while the vector is
 * unmasked, else watched by the VMM and raised as an in-process device
 * would (PBA bit while masked, nothing for NO_VECTOR, ISR + INTx without
 * MSI-X). The tests write a call fd as the backend would and run the fake
 * loop; the recording sink stands for KVM (it never reads a bound fd, so a
 * write left there is one that raced an unbind).
 */
#include "virtio_helpers.h"

#include "devices/pci/msix.h"
#include "devices/pci/pci.h"
#include "devices/virtio/virtio_pci.h"

#include <check.h>
#include <errno.h>
#include <linux/virtio_pci.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SLOT		     3
#define PIN		     19 /* 16 + (3 + INTA# - 1) % 8 */
#define NQ		     2
#define QMAX		     16
#define QSZ		     8
#define EXT_TYPE	     26 /* virtio-fs */
#define F_V1		     VIRTIO_FEATURE(VIRTIO_F_VERSION_1)
#define RINGS		     0x100000ULL
#define CFGVEC		     0	 /* the configuration's vector */
#define VIRTIO_PCI_ISR_QUEUE 0x1 /* 4.1.4.5 (VIRTIO_PCI_ISR_CONFIG is the uapi's) */

/* The external device: records what the transport gives it. */
struct ext_dev {
	struct virtio_dev vdev;
	struct virtio_dev_ops ops;
	struct virtio_external_start st;
	unsigned starts, stops, notifies;
	int start_ret;
};

static struct pci_rig rig;
static struct fake_host host;
static struct ext_dev ext;
static struct virtio_pci vp;
static struct vpci_view v;
static struct vring_drv ring[NQ];
static struct virtio_host hostif;

static int ext_start(struct virtio_dev *d, const struct virtio_external_start *s)
{
	struct ext_dev *e = d->priv;
	e->starts++;
	e->st = *s;
	return e->start_ret;
}

static void ext_stop(struct virtio_dev *d)
{
	((struct ext_dev *)d->priv)->stops++;
}

static void ext_notify(struct virtio_dev *d, unsigned q)
{
	(void)q;
	((struct ext_dev *)d->priv)->notifies++;
}

static void rig_up(enum irq_msi_delivery msi, enum irq_mode mode)
{
	pci_rig_init(&rig, msi, IRQ_INTX_LINE);
	hostif = fake_host_make(&host, &rig.log);
	memset(&ext, 0, sizeof(ext));
	ext.ops = (struct virtio_dev_ops){
	    .type = EXT_TYPE,
	    .pci_class = 0x018000,
	    .num_queues = NQ,
	    .queue_max = QMAX,
	    .config_size = 40,
	    .queue_notify = ext_notify, /* never called: the backend serves */
	    .external_queues = true,
	    .start = ext_start,
	    .stop = ext_stop,
	};
	ext.vdev.ops = &ext.ops;
	ext.vdev.priv = &ext;
	/* A backend that serves every feature the transport offers. */
	ext.vdev.backend_features = ~0ULL;
	ck_assert_int_eq(virtio_pci_init(&vp, &ext.vdev, "fs", &rig.irq, &rig.ram.m, &hostif, mode),
			 0);
	ck_assert_int_eq(pci_bus_add_device(&rig.pci, &vp.pci, SLOT, 1), 0);
	ck_assert_int_eq(pci_bus_assign_resources(&rig.pci), 0);
	vpv_init(&v, &rig, SLOT);
	for (unsigned q = 0; q < NQ; q++)
		vrd_layout(&ring[q], rig.ram.buf, QSZ, RINGS + 0x10000ULL * q);
}

static void setup(void)
{
	rig_up(IRQ_MSI_IRQFD, IRQ_MODE_MSIX);
}
static void setup_signal(void)
{
	rig_up(IRQ_MSI_SIGNAL, IRQ_MODE_MSIX);
}
static void setup_intx(void)
{
	rig_up(IRQ_MSI_IRQFD, IRQ_MODE_INTX);
}

static void teardown(void)
{
	virtio_pci_destroy(&vp);
	pci_rig_free(&rig);
}

/* Features, queue q's vector `vec` (the config's CFGVEC), both queues,
 * DRIVER_OK: as Linux's virtio_pci sets up before DRIVER_OK. */
static void bring_up(uint16_t vec0, uint16_t vec1)
{
	ck_assert(vpv_negotiate(&v, F_V1));
	if (v.msix_cap)
		vpv_wr(&v, VPC_MSIX, 2, CFGVEC);
	for (unsigned q = 0; q < NQ; q++) {
		vpv_queue(&v, q, &ring[q]);
		vpv_wr(&v, VPC_Q_MSIX, 2, q == 0 ? vec0 : vec1);
	}
	vpv_set_status(&v, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
			       VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK);
	ck_assert_uint_eq(vpv_status(&v) & VIRTIO_CONFIG_S_NEEDS_RESET, 0);
}

/* MSI-X on, entries 0..NQ unmasked with valid messages. */
static void msix_up(void)
{
	vpv_msix_enable(&v, true);
	for (unsigned i = 0; i <= NQ; i++)
		vpv_msix_program(&v, i, MSI_ADDR(i), MSI_DATA(i), false);
}

static int call_fd(unsigned q)
{
	return vp.queues[q].call.fd;
}

static void backend_call(int fd)
{
	uint64_t one = 1;
	ck_assert_int_eq(write(fd, &one, sizeof(one)), sizeof(one));
}

static struct irq_msi_vector *vec(unsigned n)
{
	return vp.msix.vectors[n];
}

static uint64_t delivered(unsigned n)
{
	return atomic_load(&vec(n)->stats.asserts);
}

static bool pba_bit(unsigned n)
{
	return (mmio_rd64(&rig, v.msix_pba) >> n) & 1;
}

static bool bound_to(unsigned q, unsigned n)
{
	return sink_rec_fd_bound(&rig.sink, call_fd(q), vec(n)->gsi);
}

/* The pin's level as last driven (KVM_IRQ_LINE), -1 if never. */
static int pin_level(void)
{
	int level = -1;
	for (unsigned i = 0; i < rig.sink.n; i++)
		if (rig.sink.calls[i].kind == SINK_SET_LINE && rig.sink.calls[i].gsi == PIN)
			level = rig.sink.calls[i].level;
	return level;
}

/* ---- start and stop ---- */

START_TEST(test_driver_ok_starts_backend_with_queues_and_fds)
{
	bring_up(VIRTIO_MSI_NO_VECTOR, VIRTIO_MSI_NO_VECTOR);
	ck_assert_uint_eq(ext.starts, 1);
	ck_assert_uint_eq(ext.st.nq, NQ);
	for (unsigned q = 0; q < NQ; q++) {
		const struct virtio_queue_info *i = &ext.st.q[q];
		ck_assert_uint_eq(i->index, q);
		ck_assert_uint_eq(i->size, QSZ);
		ck_assert_uint_eq(i->desc, ring[q].desc);
		ck_assert_uint_eq(i->driver, ring[q].avail);
		ck_assert_uint_eq(i->device, ring[q].used);
		/* The kick fd is the notify address's ioeventfd, and the VMM
		 * does not watch it: the backend reads it. */
		ck_assert_int_ge(i->kick_fd, 0);
		ck_assert_int_eq(fake_host_ioeventfd_at(&host, vpv_notify_addr(&v, q)), i->kick_fd);
		ck_assert_int_eq(fake_host_watch_of(&host, i->kick_fd), -1);
		/* The call fd is the VMM's: watched while it is not bound. */
		ck_assert_int_eq(i->call_fd, call_fd(q));
		ck_assert(fake_host_watching(&host, i->call_fd));
	}
	ck_assert_int_ne(ext.st.q[0].call_fd, ext.st.q[1].call_fd);
	ck_assert_int_eq(ext.st.config_call_fd, vp.config_call.fd);
	ck_assert(fake_host_watching(&host, ext.st.config_call_fd));
	/* A notify goes to the backend's kick fd, never to the device. */
	vpv_notify(&v, 1);
	fake_host_poll(&host);
	ck_assert_uint_eq(ext.notifies, 0);
	ck_assert_uint_eq(eventfd_take(ext.st.q[1].kick_fd), 1);
}
END_TEST

START_TEST(test_only_enabled_queues_are_started)
{
	ck_assert(vpv_negotiate(&v, F_V1));
	vpv_queue(&v, 1, &ring[1]);
	vpv_set_status(&v, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
			       VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK);
	ck_assert_uint_eq(ext.starts, 1);
	ck_assert_uint_eq(ext.st.nq, 1);
	ck_assert_uint_eq(ext.st.q[0].index, 1);
	ck_assert_uint_eq(ext.st.q[0].desc, ring[1].desc);
}
END_TEST

START_TEST(test_reset_stops_backend_once)
{
	vpv_set_status(&v, 0);
	ck_assert_uint_eq(ext.stops, 0); /* never started */
	bring_up(VIRTIO_MSI_NO_VECTOR, VIRTIO_MSI_NO_VECTOR);
	vpv_set_status(&v, 0);
	ck_assert_uint_eq(ext.stops, 1);
	vpv_set_status(&v, 0);
	ck_assert_uint_eq(ext.stops, 1);
	/* Started again, then torn down: stopped at teardown. */
	bring_up(VIRTIO_MSI_NO_VECTOR, VIRTIO_MSI_NO_VECTOR);
	ck_assert_uint_eq(ext.starts, 2);
	virtio_pci_destroy(&vp);
	ck_assert_uint_eq(ext.stops, 2);
	ck_assert_int_eq(call_fd(0), -1);
	memset(&vp, 0, sizeof(vp)); /* teardown destroys it again */
	for (unsigned i = 0; i < VIRTIO_MAX_QUEUES; i++)
		vp.queues[i].call.fd = vp.queues[i].notify_fd = -1;
	vp.config_call.fd = -1;
}
END_TEST

/* A start that fails part way may have left rings running in the
 * backend: the reset still calls stop, which undoes what start did. */
START_TEST(test_failed_start_needs_reset_and_stop_undoes_it)
{
	ext.start_ret = -ECONNREFUSED;
	ck_assert(vpv_negotiate(&v, F_V1));
	vpv_queue(&v, 0, &ring[0]);
	vpv_set_status(&v, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
			       VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK);
	ck_assert_uint_eq(ext.starts, 1);
	ck_assert(vpv_status(&v) & VIRTIO_CONFIG_S_NEEDS_RESET);
	vpv_set_status(&v, 0);
	ck_assert_uint_eq(ext.stops, 1);
	ck_assert_uint_eq(vpv_status(&v), 0);
	vpv_set_status(&v, 0);
	ck_assert_uint_eq(ext.stops, 1);
}
END_TEST

/* A queue refused at enable (size not a power of 2) sets NEEDS_RESET; a
 * DRIVER_OK written anyway hands the backend nothing, not even the queue
 * that was set up right. */
START_TEST(test_driver_ok_after_needs_reset_starts_nothing)
{
	ck_assert(vpv_negotiate(&v, F_V1));
	vpv_queue(&v, 1, &ring[1]);
	vpv_wr(&v, VPC_Q_SELECT, 2, 0);
	vpv_wr(&v, VPC_Q_SIZE, 2, 3);
	vpv_wr(&v, VPC_Q_ENABLE, 2, 1);
	ck_assert(vpv_status(&v) & VIRTIO_CONFIG_S_NEEDS_RESET);
	vpv_set_status(&v, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
			       VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK);
	ck_assert_uint_eq(ext.starts, 0);
	vpv_set_status(&v, 0);
	ck_assert_uint_eq(ext.stops, 0);
	ck_assert_uint_eq(vpv_status(&v), 0);
}
END_TEST

/* 2.1.2: a backend that died: DEVICE_NEEDS_RESET and a configuration
 * change notification. */
START_TEST(test_needs_reset_sets_status_and_fires_config_vector)
{
	msix_up();
	bring_up(1, 2);
	uint8_t gen = (uint8_t)vpv_rd(&v, VPC_CFGGEN, 1);
	virtio_needs_reset(&ext.vdev, "backend gone");
	ck_assert(vpv_status(&v) & VIRTIO_CONFIG_S_NEEDS_RESET);
	ck_assert_uint_eq(delivered(CFGVEC), 1);
	ck_assert_uint_ne(vpv_rd(&v, VPC_CFGGEN, 1), gen);
	ck_assert_uint_eq(vpv_isr(&v) & VIRTIO_PCI_ISR_CONFIG, VIRTIO_PCI_ISR_CONFIG);
	vpv_set_status(&v, 0);
	ck_assert_uint_eq(ext.stops, 1);
	ck_assert_uint_eq(vpv_status(&v), 0);
}
END_TEST

START_TEST(test_needs_reset_intx_sets_isr_config_bit_and_pin)
{
	bring_up(VIRTIO_MSI_NO_VECTOR, VIRTIO_MSI_NO_VECTOR);
	virtio_needs_reset(&ext.vdev, "backend gone");
	ck_assert(vpv_status(&v) & VIRTIO_CONFIG_S_NEEDS_RESET);
	ck_assert_int_eq(pin_level(), 1);
	ck_assert_uint_eq(vpv_isr(&v), VIRTIO_PCI_ISR_CONFIG);
	ck_assert_int_eq(pin_level(), 0);
}
END_TEST

/* ---- the call fd under MSI-X ---- */

START_TEST(test_unmasked_vector_binds_call_fd_and_vmm_raises_nothing)
{
	msix_up();
	bring_up(1, 2);
	ck_assert(bound_to(0, 1));
	ck_assert(bound_to(1, 2));
	/* The route the fd is bound to is the vector's message. */
	const struct irq_route *r = sink_rec_route(&rig.sink, vec(1)->gsi, IRQ_ROUTE_MSI);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->addr, MSI_ADDR(1));
	ck_assert_uint_eq(r->data, MSI_DATA(1));
	ck_assert(!fake_host_watching(&host, call_fd(0)));
	/* The backend calls: KVM's business, not the VMM's. */
	backend_call(call_fd(0));
	fake_host_poll(&host);
	ck_assert_uint_eq(delivered(1), 0);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 0);
	ck_assert_uint_eq(atomic_load(&vp.queues[0].interrupts), 0);
	ck_assert_uint_eq(atomic_load(&vp.queues[0].call.binds), 1);
	/* The config call fd is never bound (4.1.4.5.1: the ISR bit first). */
	ck_assert_uint_eq(sink_rec_fd_calls(&rig.sink, SINK_IRQFD_ASSIGN, vp.config_call.fd), 0);
}
END_TEST

START_TEST(test_masked_vector_call_pends_then_unmask_sends_once_and_rebinds)
{
	msix_up();
	bring_up(1, 2);
	vpv_msix_program(&v, 1, MSI_ADDR(1), MSI_DATA(1), true);
	/* Masked: off KVM, watched by the VMM. */
	ck_assert(!bound_to(0, 1));
	ck_assert_uint_eq(sink_rec_fd_calls(&rig.sink, SINK_IRQFD_DEASSIGN, call_fd(0)), 1);
	ck_assert(fake_host_watching(&host, call_fd(0)));
	ck_assert(bound_to(1, 2)); /* the other queue's vector is untouched */
	backend_call(call_fd(0));
	ck_assert_uint_eq(fake_host_poll(&host), 1);
	ck_assert(pba_bit(1));
	ck_assert_uint_eq(delivered(1), 0);
	ck_assert_uint_eq(atomic_load(&vec(1)->stats.pended), 1);
	ck_assert_uint_eq(eventfd_take(call_fd(0)), 0); /* the VMM read it */
	/* Unmask: exactly one message, the PBA bit clear, KVM's again. */
	vpv_msix_program(&v, 1, MSI_ADDR(1), MSI_DATA(1), false);
	ck_assert_uint_eq(delivered(1), 1);
	ck_assert(!pba_bit(1));
	ck_assert(bound_to(0, 1));
	ck_assert_uint_eq(sink_rec_fd_calls(&rig.sink, SINK_IRQFD_ASSIGN, call_fd(0)), 2);
	ck_assert(!fake_host_watching(&host, call_fd(0)));
	fake_host_poll(&host);
	ck_assert_uint_eq(delivered(1), 1);
}
END_TEST

/* A write that KVM had not taken when the fd was unbound (here: the sink
 * never takes any) pends at once; it is never lost. */
START_TEST(test_call_racing_the_unbind_pends)
{
	msix_up();
	bring_up(1, 2);
	backend_call(call_fd(0));
	vpv_msix_program(&v, 1, MSI_ADDR(1), MSI_DATA(1), true);
	ck_assert(pba_bit(1));
	ck_assert_uint_eq(delivered(1), 0);
	vpv_msix_program(&v, 1, MSI_ADDR(1), MSI_DATA(1), false);
	ck_assert_uint_eq(delivered(1), 1);
	ck_assert(!pba_bit(1));
}
END_TEST

/* A write counted while masked but not yet read by the loop is sent on
 * unmask, before KVM takes the fd back. */
START_TEST(test_unmask_sends_what_the_loop_had_not_read)
{
	msix_up();
	bring_up(1, 2);
	vpv_msix_program(&v, 1, MSI_ADDR(1), MSI_DATA(1), true);
	backend_call(call_fd(0));
	vpv_msix_program(&v, 1, MSI_ADDR(1), MSI_DATA(1), false);
	ck_assert_uint_eq(delivered(1), 1);
	ck_assert(bound_to(0, 1));
	ck_assert_uint_eq(eventfd_take(call_fd(0)), 0);
}
END_TEST

START_TEST(test_function_mask_unbinds_and_rebinds_every_call_fd)
{
	msix_up();
	bring_up(1, 2);
	uint16_t c = (uint16_t)cfg_rd(&rig, SLOT, v.msix_cap + 2u, 2);
	cfg_wr(&rig, SLOT, v.msix_cap + 2u, 2, c | PCI_MSIX_FLAGS_MASKALL);
	ck_assert(!bound_to(0, 1));
	ck_assert(!bound_to(1, 2));
	backend_call(call_fd(1));
	fake_host_poll(&host);
	ck_assert(pba_bit(2));
	cfg_wr(&rig, SLOT, v.msix_cap + 2u, 2, c);
	ck_assert_uint_eq(delivered(2), 1);
	ck_assert(bound_to(0, 1));
	ck_assert(bound_to(1, 2));
}
END_TEST

START_TEST(test_vector_change_moves_the_binding)
{
	msix_up();
	bring_up(1, 2);
	vpv_select(&v, 0);
	vpv_wr(&v, VPC_Q_MSIX, 2, 2); /* queue 0 shares vector 2 now */
	ck_assert(!bound_to(0, 1));
	ck_assert(bound_to(0, 2));
	ck_assert(bound_to(1, 2));
	/* A vector beyond the table reads NO_VECTOR: unbound and dropped. */
	vpv_wr(&v, VPC_Q_MSIX, 2, 7);
	ck_assert(!bound_to(0, 2));
	ck_assert(fake_host_watching(&host, call_fd(0)));
}
END_TEST

START_TEST(test_no_vector_sends_nothing)
{
	msix_up();
	bring_up(VIRTIO_MSI_NO_VECTOR, 2);
	ck_assert_uint_eq(sink_rec_fd_calls(&rig.sink, SINK_IRQFD_ASSIGN, call_fd(0)), 0);
	ck_assert(fake_host_watching(&host, call_fd(0)));
	unsigned calls = rig.sink.n;
	backend_call(call_fd(0));
	ck_assert_uint_eq(fake_host_poll(&host), 1);
	ck_assert_uint_eq(eventfd_take(call_fd(0)), 0); /* read and dropped */
	ck_assert_uint_eq(rig.sink.n, calls);
	for (unsigned n = 0; n <= NQ; n++)
		ck_assert_uint_eq(delivered(n), 0);
	ck_assert_uint_eq(vpv_isr(&v), 0);
}
END_TEST

START_TEST(test_msix_disable_unbinds_and_intx_takes_over)
{
	msix_up();
	bring_up(1, 2);
	vpv_msix_enable(&v, false);
	ck_assert(!bound_to(0, 1));
	backend_call(call_fd(0));
	fake_host_poll(&host);
	ck_assert_uint_eq(delivered(1), 0);
	ck_assert_int_eq(pin_level(), 1);
	ck_assert_uint_eq(vpv_isr(&v), VIRTIO_PCI_ISR_QUEUE);
	vpv_msix_enable(&v, true);
	ck_assert(bound_to(0, 1));
}
END_TEST

/* The configuration's call fd: the ISR bit, the config vector, a new
 * generation. */
START_TEST(test_config_call_fires_config_vector_and_isr_bit)
{
	msix_up();
	bring_up(1, 2);
	uint8_t gen = (uint8_t)vpv_rd(&v, VPC_CFGGEN, 1);
	backend_call(vp.config_call.fd);
	fake_host_poll(&host);
	ck_assert_uint_eq(delivered(CFGVEC), 1);
	ck_assert_uint_ne(vpv_rd(&v, VPC_CFGGEN, 1), gen);
	ck_assert_uint_eq(vpv_isr(&v), VIRTIO_PCI_ISR_CONFIG);
}
END_TEST

/* After a reset every call fd is unbound (no vector), and a late call from
 * the stopping backend reaches no one. */
START_TEST(test_reset_unbinds_and_drops_late_calls)
{
	msix_up();
	bring_up(1, 2);
	vpv_set_status(&v, 0);
	ck_assert(!bound_to(0, 1));
	ck_assert(!bound_to(1, 2));
	backend_call(call_fd(0));
	fake_host_poll(&host);
	ck_assert_uint_eq(delivered(1), 0);
	ck_assert_uint_eq(vpv_isr(&v), 0);
}
END_TEST

/* ---- --msi-delivery signal: never bound, raised by the VMM ---- */

START_TEST(test_signal_delivery_never_binds)
{
	msix_up();
	bring_up(1, 2);
	ck_assert_uint_eq(sink_rec_fd_calls(&rig.sink, SINK_IRQFD_ASSIGN, call_fd(0)), 0);
	ck_assert(fake_host_watching(&host, call_fd(0)));
	backend_call(call_fd(0));
	fake_host_poll(&host);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 1);
	int i = sink_rec_find(&rig.sink, SINK_SIGNAL_MSI, 0);
	ck_assert_uint_eq(rig.sink.calls[i].data, MSI_DATA(1));
	ck_assert_uint_eq(atomic_load(&vp.queues[0].interrupts), 1);
	ck_assert_uint_eq(atomic_load(&vp.queues[0].last_vector), 1);
}
END_TEST

/* ---- --irq-mode intx: no MSI-X at all ---- */

START_TEST(test_intx_mode_call_sets_isr_and_pin)
{
	ck_assert_uint_eq(v.msix_cap, 0);
	bring_up(VIRTIO_MSI_NO_VECTOR, VIRTIO_MSI_NO_VECTOR);
	ck_assert_uint_eq(rig.sink.irqfd_n, 0);
	backend_call(call_fd(1));
	ck_assert_uint_eq(fake_host_poll(&host), 1);
	ck_assert_int_eq(pin_level(), 1);
	ck_assert_uint_eq(atomic_load(&vp.queues[1].last_vector), VIRTIO_PCI_LAST_INTX);
	ck_assert_uint_eq(vpv_isr(&v), VIRTIO_PCI_ISR_QUEUE); /* read clears... */
	ck_assert_int_eq(pin_level(), 0);		      /* ...and lowers the pin */
	ck_assert_uint_eq(vpv_isr(&v), 0);
}
END_TEST

static Suite *virtio_external_suite(void)
{
	Suite *s = suite_create("virtio_external");
	TCase *t = tcase_create("start_stop");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_driver_ok_starts_backend_with_queues_and_fds);
	tcase_add_test(t, test_only_enabled_queues_are_started);
	tcase_add_test(t, test_reset_stops_backend_once);
	tcase_add_test(t, test_failed_start_needs_reset_and_stop_undoes_it);
	tcase_add_test(t, test_driver_ok_after_needs_reset_starts_nothing);
	tcase_add_test(t, test_needs_reset_sets_status_and_fires_config_vector);
	tcase_add_test(t, test_needs_reset_intx_sets_isr_config_bit_and_pin);
	suite_add_tcase(s, t);

	t = tcase_create("msix_irqfd");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_unmasked_vector_binds_call_fd_and_vmm_raises_nothing);
	tcase_add_test(t, test_masked_vector_call_pends_then_unmask_sends_once_and_rebinds);
	tcase_add_test(t, test_call_racing_the_unbind_pends);
	tcase_add_test(t, test_unmask_sends_what_the_loop_had_not_read);
	tcase_add_test(t, test_function_mask_unbinds_and_rebinds_every_call_fd);
	tcase_add_test(t, test_vector_change_moves_the_binding);
	tcase_add_test(t, test_no_vector_sends_nothing);
	tcase_add_test(t, test_msix_disable_unbinds_and_intx_takes_over);
	tcase_add_test(t, test_config_call_fires_config_vector_and_isr_bit);
	tcase_add_test(t, test_reset_unbinds_and_drops_late_calls);
	suite_add_tcase(s, t);

	t = tcase_create("msix_signal");
	tcase_add_checked_fixture(t, setup_signal, teardown);
	tcase_add_test(t, test_signal_delivery_never_binds);
	suite_add_tcase(s, t);

	t = tcase_create("intx_mode");
	tcase_add_checked_fixture(t, setup_intx, teardown);
	tcase_add_test(t, test_intx_mode_call_sets_isr_and_pin);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(virtio_external_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
