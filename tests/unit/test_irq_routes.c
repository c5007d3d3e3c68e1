/*
 * The interrupt door behind PCI devices (irq/irq.h): MSI through GSI routes
 * plus irqfds (IRQ_MSI_IRQFD) or KVM_SIGNAL_MSI (IRQ_MSI_SIGNAL), and the
 * shared, level-triggered INTx pins 16-23 through KVM_IRQ_LINE
 * (IRQ_INTX_LINE) or an irqfd + resamplefd per pin (IRQ_INTX_RESAMPLE).
 * KVM_SET_GSI_ROUTING replaces the whole table, so every table sent must
 * carry KVM's defaults: GSI 0-15 on both PICs and the IOAPIC, 16-23 on the
 * IOAPIC. INTx wiring: IOAPIC pin 16 + (slot + INTx# - 1) mod 8.
 */
#include "helpers.h"

#include "devices/pci/msix.h"
#include "devices/pci/pci.h"
#include "devices/pci/pci_testdev.h"

#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct pci_rig rig;
static struct tdev_view a, b;

static void irqfd_setup(void)
{
	pci_rig_init(&rig, IRQ_MSI_IRQFD, IRQ_INTX_LINE);
	struct pci_testdev *t = pci_rig_add(&rig, 1, 4);
	ck_assert_int_eq(pci_bus_assign_resources(&rig.pci), 0);
	tdev_view_init(&a, &rig, t, 1);
	tdev_msix_ctrl(&a, PCI_MSIX_FLAGS_ENABLE, 0);
	ck_assert_uint_eq(rig.sink.set_routes_n, 0); /* nothing unmasked yet */
}

static void signal_setup(void)
{
	pci_rig_init(&rig, IRQ_MSI_SIGNAL, IRQ_INTX_LINE);
	struct pci_testdev *t = pci_rig_add(&rig, 1, 4);
	ck_assert_int_eq(pci_bus_assign_resources(&rig.pci), 0);
	tdev_view_init(&a, &rig, t, 1);
}

static void shared_setup(enum irq_intx_delivery mode)
{
	pci_rig_init(&rig, IRQ_MSI_SIGNAL, mode);
	struct pci_testdev *ta = pci_rig_add(&rig, 1, 4), *tb = pci_rig_add(&rig, 9, 4);
	ck_assert_int_eq(pci_bus_assign_resources(&rig.pci), 0);
	tdev_view_init(&a, &rig, ta, 1);
	tdev_view_init(&b, &rig, tb, 9);
}

static void line_setup(void)
{
	shared_setup(IRQ_INTX_LINE);
}

static void resample_setup(void)
{
	shared_setup(IRQ_INTX_RESAMPLE);
}

static void teardown(void)
{
	pci_rig_free(&rig);
}

static bool has_chip_route(const struct irq_route *t, unsigned n, uint32_t gsi, uint32_t chip,
			   uint32_t pin)
{
	for (unsigned i = 0; i < n; i++)
		if (t[i].type == IRQ_ROUTE_IRQCHIP && t[i].gsi == gsi && t[i].chip == chip &&
		    t[i].pin == pin)
			return true;
	return false;
}

static unsigned count_msi_routes(const struct irq_route *t, unsigned n)
{
	unsigned c = 0;
	for (unsigned i = 0; i < n; i++)
		c += t[i].type == IRQ_ROUTE_MSI;
	return c;
}

/* KVM's default routing (what KVM_SET_GSI_ROUTING would otherwise drop). */
static void assert_defaults(const struct irq_route *t, unsigned n)
{
	for (uint32_t g = 0; g < 16; g++) {
		uint32_t pic = g < 8 ? IRQ_CHIP_PIC_MASTER : IRQ_CHIP_PIC_SLAVE;
		ck_assert_msg(has_chip_route(t, n, g, pic, g % 8), "GSI %u on its PIC", g);
		ck_assert_msg(has_chip_route(t, n, g, IRQ_CHIP_IOAPIC, g), "GSI %u on the IOAPIC",
			      g);
	}
	for (uint32_t g = 16; g < 24; g++)
		ck_assert_msg(has_chip_route(t, n, g, IRQ_CHIP_IOAPIC, g), "GSI %u on the IOAPIC",
			      g);
	for (unsigned i = 0; i < n; i++)
		if (t[i].type == IRQ_ROUTE_MSI)
			ck_assert_uint_ge(t[i].gsi, IRQ_MSI_FIRST_GSI);
	ck_assert_uint_eq(n - count_msi_routes(t, n), 16 * 2 + 8);
}

static const struct sink_call *irqfd_call(unsigned nth)
{
	int i = sink_rec_find(&rig.sink, SINK_IRQFD_ASSIGN, nth);
	ck_assert_int_ge(i, 0);
	return &rig.sink.calls[i];
}

static void eoi(int resamplefd)
{
	uint64_t one = 1;
	ck_assert_int_eq(write(resamplefd, &one, sizeof(one)), (int)sizeof(one));
}

/* ---- MSI, irqfd delivery ---- */

START_TEST(test_unmask_installs_route_before_irqfd)
{
	tdev_program(&a, 0, MSI_ADDR(1), MSI_DATA(0), true);
	ck_assert_uint_eq(rig.sink.set_routes_n, 0);
	ck_assert_uint_eq(rig.sink.irqfd_n, 0);
	tdev_mask(&a, 0, false);
	ck_assert_uint_eq(rig.sink.set_routes_n, 1);
	ck_assert_uint_eq(rig.sink.irqfd_n, 1);
	int r = sink_rec_find(&rig.sink, SINK_SET_ROUTES, 0);
	int f = sink_rec_find(&rig.sink, SINK_IRQFD_ASSIGN, 0);
	ck_assert_int_lt(r, f);
	const struct sink_call *c = &rig.sink.calls[f];
	ck_assert_int_ge(c->fd, 0);
	ck_assert_uint_ge(c->gsi, IRQ_MSI_FIRST_GSI);
	ck_assert_int_lt(c->resample_fd, 0);
	const struct irq_route *rt = sink_rec_route(&rig.sink, c->gsi, IRQ_ROUTE_MSI);
	ck_assert_ptr_nonnull(rt);
	ck_assert_uint_eq(rt->addr, MSI_ADDR(1));
	ck_assert_uint_eq(rt->data, MSI_DATA(0));
	assert_defaults(rig.sink.last_routes, rig.sink.last_nroutes);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 0);
}
END_TEST

START_TEST(test_every_table_sent_keeps_defaults_and_earlier_routes)
{
	tdev_program(&a, 0, MSI_ADDR(0), MSI_DATA(0), false);
	assert_defaults(rig.sink.last_routes, rig.sink.last_nroutes);
	ck_assert_uint_eq(count_msi_routes(rig.sink.last_routes, rig.sink.last_nroutes), 1);
	tdev_program(&a, 3, MSI_ADDR(2), MSI_DATA(3), false);
	assert_defaults(rig.sink.last_routes, rig.sink.last_nroutes);
	ck_assert_uint_eq(count_msi_routes(rig.sink.last_routes, rig.sink.last_nroutes), 2);
	uint32_t g0 = irqfd_call(0)->gsi, g3 = irqfd_call(1)->gsi;
	ck_assert_uint_ne(g0, g3);
	ck_assert_ptr_nonnull(sink_rec_route(&rig.sink, g0, IRQ_ROUTE_MSI));
	ck_assert_uint_eq(sink_rec_route(&rig.sink, g3, IRQ_ROUTE_MSI)->data, MSI_DATA(3));
	ck_assert_uint_eq(rig.sink.calls[sink_rec_find(&rig.sink, SINK_SET_ROUTES, 1)].nroutes,
			  rig.sink.last_nroutes);
}
END_TEST

START_TEST(test_rewriting_same_route_does_not_resend)
{
	tdev_program(&a, 1, MSI_ADDR(3), MSI_DATA(1), false);
	unsigned sends = rig.sink.set_routes_n;
	ck_assert_uint_eq(sends, 1);
	tdev_program(&a, 1, MSI_ADDR(3), MSI_DATA(1), false); /* same values again */
	mmio_wr64(&rig, tdev_entry(&a, 1), MSI_ADDR(3));
	mmio_wr64(&rig, tdev_entry(&a, 1) + MSIX_E_DATA, MSI_DATA(1)); /* data + ctrl 0 */
	tdev_mask(&a, 1, true);
	tdev_mask(&a, 1, false);
	tdev_msix_ctrl(&a, PCI_MSIX_FLAGS_MASKALL, 0);
	tdev_msix_ctrl(&a, 0, PCI_MSIX_FLAGS_MASKALL);
	ck_assert_uint_eq(rig.sink.set_routes_n, sends);
	ck_assert_uint_eq(rig.sink.irqfd_n, 1);
}
END_TEST

START_TEST(test_changing_masked_entry_does_not_resend)
{
	tdev_program(&a, 2, MSI_ADDR(0), MSI_DATA(0), true); /* never unmasked */
	tdev_program(&a, 2, MSI_ADDR(1), MSI_DATA(9), true);
	ck_assert_uint_eq(rig.sink.set_routes_n, 0);
	tdev_mask(&a, 2, false);
	ck_assert_uint_eq(rig.sink.set_routes_n, 1);
	uint32_t gsi = irqfd_call(0)->gsi;
	tdev_mask(&a, 2, true); /* installed, then masked and changed */
	mmio_wr32(&rig, tdev_entry(&a, 2) + MSIX_E_DATA, MSI_DATA(7));
	mmio_wr32(&rig, tdev_entry(&a, 2) + MSIX_E_ADDR_LO, (uint32_t)MSI_ADDR(5));
	ck_assert_uint_eq(rig.sink.set_routes_n, 1);
	tdev_mask(&a, 2, false); /* the new route goes out on unmask, once */
	ck_assert_uint_eq(rig.sink.set_routes_n, 2);
	const struct irq_route *rt = sink_rec_route(&rig.sink, gsi, IRQ_ROUTE_MSI);
	ck_assert_ptr_nonnull(rt);
	ck_assert_uint_eq(rt->addr, MSI_ADDR(5));
	ck_assert_uint_eq(rt->data, MSI_DATA(7));
	ck_assert_uint_eq(rig.sink.irqfd_n, 1);
}
END_TEST

START_TEST(test_changing_unmasked_entry_resends_once)
{
	tdev_program(&a, 0, MSI_ADDR(0), MSI_DATA(0), false);
	uint32_t gsi = irqfd_call(0)->gsi;
	mmio_wr32(&rig, tdev_entry(&a, 0) + MSIX_E_DATA, MSI_DATA(0x11));
	ck_assert_uint_eq(rig.sink.set_routes_n, 2);
	ck_assert_uint_eq(sink_rec_route(&rig.sink, gsi, IRQ_ROUTE_MSI)->data, MSI_DATA(0x11));
	mmio_wr64(&rig, tdev_entry(&a, 0), MSI_ADDR(6)); /* one qword write */
	ck_assert_uint_eq(rig.sink.set_routes_n, 3);
	ck_assert_uint_eq(sink_rec_route(&rig.sink, gsi, IRQ_ROUTE_MSI)->addr, MSI_ADDR(6));
	assert_defaults(rig.sink.last_routes, rig.sink.last_nroutes);
	ck_assert_uint_eq(count_msi_routes(rig.sink.last_routes, rig.sink.last_nroutes), 1);
	ck_assert_uint_eq(rig.sink.irqfd_n, 1);
}
END_TEST

START_TEST(test_unmasked_fire_writes_its_eventfd)
{
	tdev_program(&a, 1, MSI_ADDR(0), MSI_DATA(1), false);
	int fd = irqfd_call(0)->fd;
	ck_assert_uint_eq(eventfd_take(fd), 0);
	tdev_ring(&a, 1);
	ck_assert_uint_eq(eventfd_take(fd), 1);
	tdev_ring(&a, 1);
	tdev_ring(&a, 1);
	ck_assert_uint_eq(eventfd_take(fd), 2);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 0);
	ck_assert_uint_eq(rig.sink.set_line_n, 0);
}
END_TEST

START_TEST(test_masked_fire_pends_without_eventfd_write)
{
	tdev_program(&a, 1, MSI_ADDR(0), MSI_DATA(1), false);
	int fd = irqfd_call(0)->fd;
	tdev_mask(&a, 1, true);
	tdev_ring(&a, 1);
	tdev_ring(&a, 1);
	ck_assert_uint_eq(eventfd_take(fd), 0);
	ck_assert(tdev_pba_bit(&a, 1));
	tdev_mask(&a, 1, false);
	ck_assert_uint_eq(eventfd_take(fd), 1);
	ck_assert(!tdev_pba_bit(&a, 1));
	ck_assert_uint_eq(rig.sink.signal_msi_n, 0);
}
END_TEST

START_TEST(test_pending_before_first_unmask_goes_through_new_irqfd)
{
	tdev_program(&a, 3, MSI_ADDR(1), MSI_DATA(3), true);
	tdev_ring(&a, 3);
	ck_assert(tdev_pba_bit(&a, 3));
	ck_assert_uint_eq(rig.sink.irqfd_n, 0);
	tdev_mask(&a, 3, false);
	ck_assert_uint_eq(rig.sink.irqfd_n, 1);
	ck_assert_int_lt(sink_rec_find(&rig.sink, SINK_SET_ROUTES, 0),
			 sink_rec_find(&rig.sink, SINK_IRQFD_ASSIGN, 0));
	ck_assert_uint_eq(eventfd_take(irqfd_call(0)->fd), 1);
	ck_assert(!tdev_pba_bit(&a, 3));
	ck_assert_uint_eq(rig.sink.signal_msi_n, 0);
}
END_TEST

START_TEST(test_function_mask_holds_eventfd_until_cleared)
{
	tdev_program(&a, 0, MSI_ADDR(0), MSI_DATA(0), false);
	int fd = irqfd_call(0)->fd;
	tdev_msix_ctrl(&a, PCI_MSIX_FLAGS_MASKALL, 0);
	tdev_ring(&a, 0);
	ck_assert_uint_eq(eventfd_take(fd), 0);
	ck_assert(tdev_pba_bit(&a, 0));
	tdev_msix_ctrl(&a, 0, PCI_MSIX_FLAGS_MASKALL);
	ck_assert_uint_eq(eventfd_take(fd), 1);
	ck_assert_uint_eq(eventfd_take(fd), 0);
}
END_TEST

START_TEST(test_each_vector_has_its_own_gsi_and_eventfd)
{
	for (unsigned n = 0; n < 4; n++)
		tdev_program(&a, n, MSI_ADDR(n), MSI_DATA(n), false);
	ck_assert_uint_eq(rig.sink.irqfd_n, 4);
	for (unsigned i = 0; i < 4; i++)
		for (unsigned j = i + 1; j < 4; j++) {
			ck_assert_uint_ne(irqfd_call(i)->gsi, irqfd_call(j)->gsi);
			ck_assert_int_ne(irqfd_call(i)->fd, irqfd_call(j)->fd);
		}
	ck_assert_uint_eq(count_msi_routes(rig.sink.last_routes, rig.sink.last_nroutes), 4);
	tdev_ring(&a, 2);
	for (unsigned i = 0; i < 4; i++) {
		const struct sink_call *c = irqfd_call(i);
		const struct irq_route *rt = sink_rec_route(&rig.sink, c->gsi, IRQ_ROUTE_MSI);
		ck_assert_ptr_nonnull(rt);
		ck_assert_uint_eq(eventfd_take(c->fd), rt->data == MSI_DATA(2) ? 1 : 0);
	}
}
END_TEST

START_TEST(test_bad_address_installs_nothing_and_counts_error)
{
	tdev_program(&a, 0, 0x12345000ULL, MSI_DATA(0), false);
	ck_assert_uint_eq(rig.sink.set_routes_n, 0);
	ck_assert_uint_eq(rig.sink.irqfd_n, 0);
	tdev_ring(&a, 0);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 0);
	ck_assert_uint_eq(atomic_load(&a.t->msix.vectors[0]->stats.errors), 1);
	tdev_program(&a, 0, MSI_ADDR(0), MSI_DATA(0), false);
	ck_assert_uint_eq(rig.sink.irqfd_n, 1);
	tdev_ring(&a, 0);
	ck_assert_uint_eq(eventfd_take(irqfd_call(0)->fd), 1);
}
END_TEST

START_TEST(test_irq_routes_build_defaults_plus_installed_vectors)
{
	static struct irq_route table[IRQ_MAX_ROUTES];
	static struct sink_rec s;
	static struct irq_router r;
	sink_rec_reset(&s);
	irq_router_init(&r, &sink_rec_ops, &s, NULL);
	r.msi_mode = IRQ_MSI_IRQFD;
	unsigned n = irq_routes_build(&r, table);
	ck_assert_uint_eq(n, 40);
	assert_defaults(table, n);
	struct irq_msi_vector *v[4];
	for (unsigned i = 0; i < 4; i++)
		v[i] = irq_msi_vector_new(&r, "t", i);
	irq_msi_route_update(v[0], MSI_ADDR(0), 0x30, false);
	irq_msi_route_update(v[1], MSI_ADDR(1), 0x31, true);	/* masked */
	irq_msi_route_update(v[2], 0xDEAD0000ULL, 0x32, false); /* not a LAPIC address */
	irq_msi_route_update(v[3], MSI_ADDR(3), 0x33, false);
	n = irq_routes_build(&r, table);
	ck_assert_uint_eq(n, 42);
	assert_defaults(table, n);
	ck_assert_uint_eq(count_msi_routes(table, n), 2);
	bool seen30 = false, seen33 = false;
	for (unsigned i = 0; i < n; i++) {
		if (table[i].type != IRQ_ROUTE_MSI)
			continue;
		seen30 |= table[i].addr == MSI_ADDR(0) && table[i].data == 0x30;
		seen33 |= table[i].addr == MSI_ADDR(3) && table[i].data == 0x33;
	}
	ck_assert(seen30 && seen33);
	irq_router_destroy(&r);
}
END_TEST

START_TEST(test_enabling_msix_installs_unmasked_entries)
{
	tdev_msix_ctrl(&a, 0, PCI_MSIX_FLAGS_ENABLE);
	tdev_program(&a, 1, MSI_ADDR(1), MSI_DATA(1), false);
	ck_assert_uint_eq(rig.sink.set_routes_n, 0); /* MSI-X off masks every vector */
	ck_assert_uint_eq(rig.sink.irqfd_n, 0);
	tdev_msix_ctrl(&a, PCI_MSIX_FLAGS_ENABLE, 0);
	ck_assert_uint_eq(rig.sink.set_routes_n, 1);
	ck_assert_uint_eq(rig.sink.irqfd_n, 1);
	ck_assert_uint_eq(sink_rec_route(&rig.sink, irqfd_call(0)->gsi, IRQ_ROUTE_MSI)->data,
			  MSI_DATA(1));
}
END_TEST

/* One guest access, one routing table: enabling MSI-X (or lifting the
 * function mask) with every vector unmasked sends the table once with all
 * of their routes, then registers each new irqfd after it (QEMU's
 * kvm_irqchip_commit_routes, Cloud Hypervisor's batched update). Before,
 * it was one full table per vector. */
START_TEST(test_enabling_msix_sends_one_table_for_all_vectors)
{
	tdev_msix_ctrl(&a, 0, PCI_MSIX_FLAGS_ENABLE);
	for (unsigned i = 0; i < 4; i++)
		tdev_program(&a, i, MSI_ADDR(i), MSI_DATA(i), false);
	ck_assert_uint_eq(rig.sink.set_routes_n, 0);
	tdev_msix_ctrl(&a, PCI_MSIX_FLAGS_ENABLE, 0);
	ck_assert_uint_eq(rig.sink.set_routes_n, 1);
	ck_assert_uint_eq(rig.irq.route_table_updates, 1);
	ck_assert_uint_eq(count_msi_routes(rig.sink.last_routes, rig.sink.last_nroutes), 4);
	assert_defaults(rig.sink.last_routes, rig.sink.last_nroutes);
	ck_assert_uint_eq(rig.sink.irqfd_n, 4);
	int table = sink_rec_find(&rig.sink, SINK_SET_ROUTES, 0);
	for (unsigned i = 0; i < 4; i++) {
		const struct sink_call *c = irqfd_call(i);
		ck_assert_int_gt(sink_rec_find(&rig.sink, SINK_IRQFD_ASSIGN, i), table);
		const struct irq_route *rt = sink_rec_route(&rig.sink, c->gsi, IRQ_ROUTE_MSI);
		ck_assert_ptr_nonnull(rt);
	}
	/* Function mask on and off: the routes did not change, no table. */
	tdev_msix_ctrl(&a, PCI_MSIX_FLAGS_MASKALL, 0);
	tdev_msix_ctrl(&a, 0, PCI_MSIX_FLAGS_MASKALL);
	ck_assert_uint_eq(rig.sink.set_routes_n, 1);
	ck_assert_uint_eq(rig.sink.irqfd_n, 4);
}
END_TEST

/* The door warns "cannot install MSI route ...; using KVM_SIGNAL_MSI for
 * it": a vector whose route or irqfd KVM refused must still reach the
 * guest, by KVM_SIGNAL_MSI, not through an eventfd KVM does not watch. */
START_TEST(test_refused_route_falls_back_to_signal_msi)
{
	rig.sink.routes_ret = -22; /* -EINVAL */
	tdev_program(&a, 0, MSI_ADDR(2), MSI_DATA(0), false);
	ck_assert_uint_ge(atomic_load(&a.t->msix.vectors[0]->stats.errors), 1);
	tdev_ring(&a, 0);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 1);
	if (rig.sink.signal_msi_n)
		ck_assert_uint_eq(rig.sink.calls[sink_rec_find(&rig.sink, SINK_SIGNAL_MSI, 0)].addr,
				  MSI_ADDR(2));
}
END_TEST

START_TEST(test_refused_irqfd_falls_back_to_signal_msi)
{
	rig.sink.irqfd_ret = -22;
	tdev_program(&a, 0, MSI_ADDR(2), MSI_DATA(0), false);
	ck_assert_uint_ge(atomic_load(&a.t->msix.vectors[0]->stats.errors), 1);
	ck_assert_ptr_nonnull(strstr(pci_rig_log(&rig), "KVM_SIGNAL_MSI"));
	tdev_ring(&a, 0);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 1);
}
END_TEST

START_TEST(test_new_door_vector_is_masked_until_updated)
{
	static struct sink_rec s;
	static struct irq_router r;
	sink_rec_reset(&s);
	irq_router_init(&r, &sink_rec_ops, &s, NULL);
	r.msi_mode = IRQ_MSI_SIGNAL;
	struct irq_msi_vector *v = irq_msi_vector_new(&r, "t", 0);
	irq_msi_fire(v); /* 6.8.2.9: masked at reset */
	ck_assert_uint_eq(s.signal_msi_n, 0);
	ck_assert(irq_msi_pending(v));
	irq_msi_route_update(v, MSI_ADDR(0), 0x30, false);
	ck_assert_uint_eq(s.signal_msi_n, 1);
	ck_assert(!irq_msi_pending(v));
	irq_router_destroy(&r);
}
END_TEST

/* KVM_SET_GSI_ROUTING takes at most IRQ_MAX_ROUTES entries, defaults
 * included: a vector given an irqfd must have its route in the table. */
START_TEST(test_full_route_table_still_routes_every_irqfd)
{
	enum { NV = 4100 };
	static struct sink_rec s;
	static struct irq_router r;
	static struct irq_msi_vector *v[NV];
	sink_rec_reset(&s);
	irq_router_init(&r, &sink_rec_ops, &s, NULL);
	r.msi_mode = IRQ_MSI_IRQFD;
	for (unsigned i = 0; i < NV; i++) {
		v[i] = irq_msi_vector_new(&r, "big", i);
		ck_assert_ptr_nonnull(v[i]);
		irq_msi_route_update(v[i], MSI_ADDR(i % 8), 0x20 + i % 200, false);
	}
	ck_assert_uint_le(s.last_nroutes, IRQ_MAX_ROUTES);
	assert_defaults(s.last_routes, s.last_nroutes);
	unsigned missing = 0, first_missing = 0;
	for (unsigned k = 0; k < s.n; k++) {
		if (s.calls[k].kind != SINK_IRQFD_ASSIGN)
			continue;
		if (!sink_rec_route(&s, s.calls[k].gsi, IRQ_ROUTE_MSI) && missing++ == 0)
			first_missing = s.calls[k].gsi;
	}
	ck_assert_msg(
	    missing == 0,
	    "%u of %u irqfds point at GSIs missing from the %u-entry table (first GSI %u)", missing,
	    s.irqfd_n, s.last_nroutes, first_missing);
	irq_router_destroy(&r);
}
END_TEST

/* ---- MSI, KVM_SIGNAL_MSI delivery ---- */

START_TEST(test_signal_mode_makes_no_route_or_irqfd_calls)
{
	tdev_msix_ctrl(&a, PCI_MSIX_FLAGS_ENABLE, 0);
	tdev_program(&a, 0, MSI_ADDR(0), MSI_DATA(0), false);
	tdev_program(&a, 1, MSI_ADDR(1), MSI_DATA(1), true);
	mmio_wr32(&rig, tdev_entry(&a, 0) + MSIX_E_DATA, MSI_DATA(9));
	tdev_ring(&a, 0);
	tdev_ring(&a, 1);
	tdev_mask(&a, 1, false);
	tdev_msix_ctrl(&a, PCI_MSIX_FLAGS_MASKALL, 0);
	tdev_ring(&a, 0);
	tdev_msix_ctrl(&a, 0, PCI_MSIX_FLAGS_MASKALL);
	tdev_msix_ctrl(&a, 0, PCI_MSIX_FLAGS_ENABLE);
	tdev_msix_ctrl(&a, PCI_MSIX_FLAGS_ENABLE, 0);
	ck_assert_uint_eq(rig.sink.set_routes_n, 0);
	ck_assert_uint_eq(rig.sink.irqfd_n, 0);
	ck_assert_uint_eq(rig.sink.signal_msi_n, 3);
	ck_assert_uint_eq(rig.sink.calls[sink_rec_find(&rig.sink, SINK_SIGNAL_MSI, 0)].data,
			  MSI_DATA(9));
}
END_TEST

/* ---- INTx, line delivery ---- */

START_TEST(test_intx_wiring_formula_and_interrupt_line)
{
	for (unsigned s = 0; s < PCI_SLOTS; s++)
		for (unsigned p = 1; p <= 4; p++) {
			uint8_t pin = pci_intx_ioapic_pin((uint8_t)s, (uint8_t)p);
			ck_assert_uint_eq(pin, 16 + (s + p - 1) % 8);
		}
	static const uint8_t more[] = {2, 3, 7, 8, 12, 31};
	for (size_t i = 0; i < sizeof(more); i++)
		pci_rig_add(&rig, more[i], 1);
	static const uint8_t all[] = {1, 9, 2, 3, 7, 8, 12, 31};
	for (size_t i = 0; i < sizeof(all); i++) {
		ck_assert_uint_eq(cfg_rd(&rig, all[i], PCI_INTERRUPT_PIN, 1), 1);
		ck_assert_uint_eq(cfg_rd(&rig, all[i], PCI_INTERRUPT_LINE, 1), 16 + all[i] % 8);
	}
	ck_assert_uint_eq(cfg_rd(&rig, 1, PCI_INTERRUPT_LINE, 1), 17);
	ck_assert_uint_eq(cfg_rd(&rig, 9, PCI_INTERRUPT_LINE, 1), 17);
	ck_assert_uint_eq(cfg_rd(&rig, 0, PCI_INTERRUPT_PIN, 1), 0); /* host bridge */
}
END_TEST

START_TEST(test_shared_pin_is_or_of_its_sharers)
{
	tdev_ring(&a, 0);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, 17, 1), 1);
	tdev_ring(&b, 0);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, 17, 1), 1);
	mmio_wr32(&rig, a.bar0 + TESTDEV_REG_INTX_ACK, 1);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, 17, 0), 0);
	mmio_wr32(&rig, b.bar0 + TESTDEV_REG_INTX_ACK, 1);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, 17, 0), 1);
	ck_assert_uint_eq(rig.sink.set_line_n, 2);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, 17, -1), 2);
	tdev_ring(&b, 0); /* and up again */
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, 17, 1), 2);
}
END_TEST

static void intx_disable(const struct tdev_view *v, bool on)
{
	uint16_t c = (uint16_t)conf1_read(&rig, 0, v->slot, 0, PCI_COMMAND, 2);
	c = on ? (c | PCI_COMMAND_INTX_DISABLE) : (c & ~PCI_COMMAND_INTX_DISABLE);
	conf1_write(&rig, 0, v->slot, 0, PCI_COMMAND, 2, c);
}

START_TEST(test_intx_disable_lowers_pin_but_status_stays)
{
	tdev_ring(&a, 0);
	ck_assert_int_eq(rig.sink.calls[rig.sink.n - 1].level, 1);
	intx_disable(&a, true);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, 17, 0), 1);
	ck_assert_uint_eq(cfg_rd(&rig, 1, PCI_STATUS, 2) & PCI_STATUS_INTERRUPT,
			  PCI_STATUS_INTERRUPT);
	ck_assert_uint_eq(tdev_reg(&a, TESTDEV_REG_INTX_PENDING), 1);
	intx_disable(&a, false);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, 17, 1), 2);
	ck_assert_int_eq(rig.sink.calls[rig.sink.n - 1].level, 1);
}
END_TEST

START_TEST(test_intx_disable_of_one_sharer_keeps_pin_for_other)
{
	tdev_ring(&a, 0);
	tdev_ring(&b, 0);
	intx_disable(&a, true);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, 17, 0), 0);
	mmio_wr32(&rig, b.bar0 + TESTDEV_REG_INTX_ACK, 1);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, 17, 0), 1);
	intx_disable(&a, false);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, 17, 1), 2);
}
END_TEST

START_TEST(test_ring_while_intx_disabled_sets_status_only)
{
	intx_disable(&a, true);
	tdev_ring(&a, 0);
	ck_assert_uint_eq(rig.sink.set_line_n, 0);
	ck_assert_uint_eq(cfg_rd(&rig, 1, PCI_STATUS, 2) & PCI_STATUS_INTERRUPT,
			  PCI_STATUS_INTERRUPT);
	intx_disable(&a, false);
	ck_assert_uint_eq(sink_rec_lines(&rig.sink, 17, 1), 1);
}
END_TEST

/* ---- INTx, irqfd + resamplefd ---- */

START_TEST(test_resample_registers_one_irqfd_per_pin)
{
	ck_assert_uint_eq(rig.sink.irqfd_n, 1); /* two sharers, one pin */
	const struct sink_call *c = irqfd_call(0);
	ck_assert_uint_eq(c->gsi, 17);
	ck_assert_int_ge(c->fd, 0);
	ck_assert_int_ge(c->resample_fd, 0);
	ck_assert_int_ne(c->fd, c->resample_fd);
	pci_rig_add(&rig, 2, 1); /* another pin, its own pair */
	ck_assert_uint_eq(rig.sink.irqfd_n, 2);
	ck_assert_uint_eq(irqfd_call(1)->gsi, 18);
	ck_assert_int_ge(irqfd_call(1)->resample_fd, 0);
	ck_assert_uint_eq(rig.sink.set_line_n, 0);
}
END_TEST

START_TEST(test_resample_assert_writes_irqfd)
{
	int fd = irqfd_call(0)->fd;
	tdev_ring(&a, 0);
	ck_assert_uint_eq(eventfd_take(fd), 1);
	mmio_wr32(&rig, a.bar0 + TESTDEV_REG_INTX_ACK, 1);
	ck_assert_uint_eq(eventfd_take(fd), 0);
	tdev_ring(&b, 0);
	ck_assert_uint_eq(eventfd_take(fd), 1);
	ck_assert_uint_eq(rig.sink.set_line_n, 0);
}
END_TEST

START_TEST(test_resample_refires_only_while_a_sharer_asserts)
{
	int fd = irqfd_call(0)->fd, rfd = irqfd_call(0)->resample_fd;
	struct irq_intx_pin *pin = &rig.irq.pins[17 - IRQ_INTX_FIRST];
	tdev_ring(&a, 0);
	tdev_ring(&b, 0);
	eventfd_take(fd);
	eoi(rfd);
	irq_intx_handle_resample(&rig.irq, 17 - IRQ_INTX_FIRST);
	ck_assert_uint_eq(eventfd_take(fd), 1);
	ck_assert_uint_eq(atomic_load(&pin->stats.refires), 1);
	mmio_wr32(&rig, a.bar0 + TESTDEV_REG_INTX_ACK, 1); /* b still asserts */
	eoi(rfd);
	irq_intx_handle_resample(&rig.irq, 17 - IRQ_INTX_FIRST);
	ck_assert_uint_eq(eventfd_take(fd), 1);
	ck_assert_uint_eq(atomic_load(&pin->stats.refires), 2);
	mmio_wr32(&rig, b.bar0 + TESTDEV_REG_INTX_ACK, 1); /* none */
	eoi(rfd);
	irq_intx_handle_resample(&rig.irq, 17 - IRQ_INTX_FIRST);
	ck_assert_uint_eq(eventfd_take(fd), 0);
	ck_assert_uint_eq(atomic_load(&pin->stats.refires), 2);
	ck_assert_uint_eq(atomic_load(&pin->stats.resamples), 3);
}
END_TEST

START_TEST(test_resample_ignores_intx_disabled_sharer)
{
	int fd = irqfd_call(0)->fd, rfd = irqfd_call(0)->resample_fd;
	tdev_ring(&a, 0);
	eventfd_take(fd);
	intx_disable(&a, true); /* condition stays, pin must not */
	eoi(rfd);
	irq_intx_handle_resample(&rig.irq, 17 - IRQ_INTX_FIRST);
	ck_assert_uint_eq(eventfd_take(fd), 0);
	intx_disable(&a, false);
	ck_assert_uint_eq(eventfd_take(fd), 1);
}
END_TEST

/* A machine that stops before KVM (no /dev/kvm: ./vmm then moves to the
 * emulated host with its stdin) destroys a router it never set up: its
 * zeroed pins must not close fd 0. */
START_TEST(test_destroying_a_router_never_set_up_closes_nothing)
{
	int fd = open("/dev/null", O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(dup2(fd, 0), 0);
	close(fd);
	struct irq_router never;
	memset(&never, 0, sizeof(never));
	irq_router_destroy(&never);
	ck_assert_int_ge(fcntl(0, F_GETFD), 0);
}
END_TEST

static Suite *irq_routes_suite(void)
{
	Suite *s = suite_create("irq_routes");
	TCase *t = tcase_create("msi_irqfd");
	tcase_add_checked_fixture(t, irqfd_setup, teardown);
	tcase_add_test(t, test_unmask_installs_route_before_irqfd);
	tcase_add_test(t, test_every_table_sent_keeps_defaults_and_earlier_routes);
	tcase_add_test(t, test_rewriting_same_route_does_not_resend);
	tcase_add_test(t, test_changing_masked_entry_does_not_resend);
	tcase_add_test(t, test_changing_unmasked_entry_resends_once);
	tcase_add_test(t, test_unmasked_fire_writes_its_eventfd);
	tcase_add_test(t, test_masked_fire_pends_without_eventfd_write);
	tcase_add_test(t, test_pending_before_first_unmask_goes_through_new_irqfd);
	tcase_add_test(t, test_function_mask_holds_eventfd_until_cleared);
	tcase_add_test(t, test_each_vector_has_its_own_gsi_and_eventfd);
	tcase_add_test(t, test_bad_address_installs_nothing_and_counts_error);
	tcase_add_test(t, test_irq_routes_build_defaults_plus_installed_vectors);
	tcase_add_test(t, test_enabling_msix_installs_unmasked_entries);
	tcase_add_test(t, test_enabling_msix_sends_one_table_for_all_vectors);
	tcase_add_test(t, test_refused_route_falls_back_to_signal_msi);
	tcase_add_test(t, test_refused_irqfd_falls_back_to_signal_msi);
	tcase_add_test(t, test_new_door_vector_is_masked_until_updated);
	tcase_add_test(t, test_full_route_table_still_routes_every_irqfd);
	suite_add_tcase(s, t);

	t = tcase_create("msi_signal");
	tcase_add_checked_fixture(t, signal_setup, teardown);
	tcase_add_test(t, test_signal_mode_makes_no_route_or_irqfd_calls);
	suite_add_tcase(s, t);

	t = tcase_create("intx_line");
	tcase_add_checked_fixture(t, line_setup, teardown);
	tcase_add_test(t, test_intx_wiring_formula_and_interrupt_line);
	tcase_add_test(t, test_shared_pin_is_or_of_its_sharers);
	tcase_add_test(t, test_intx_disable_lowers_pin_but_status_stays);
	tcase_add_test(t, test_intx_disable_of_one_sharer_keeps_pin_for_other);
	tcase_add_test(t, test_ring_while_intx_disabled_sets_status_only);
	suite_add_tcase(s, t);

	t = tcase_create("intx_resample");
	tcase_add_checked_fixture(t, resample_setup, teardown);
	tcase_add_test(t, test_resample_registers_one_irqfd_per_pin);
	tcase_add_test(t, test_resample_assert_writes_irqfd);
	tcase_add_test(t, test_resample_refires_only_while_a_sharer_asserts);
	tcase_add_test(t, test_resample_ignores_intx_disabled_sharer);
	suite_add_tcase(s, t);

	t = tcase_create("lifetime");
	tcase_add_test(t, test_destroying_a_router_never_set_up_closes_nothing);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(irq_routes_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
