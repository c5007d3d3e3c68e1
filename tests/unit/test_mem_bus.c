/*
 * guest_mem: the one bounds-checked gpa -> host translation (fails closed),
 * the 3 GiB MMIO hole and RAM above 4 GiB. bus: registration without
 * overlaps, dispatch relative to the base, unclaimed accesses.
 */
#include "helpers.h"

#include "vmm/base/bus.h"
#include "vmm/base/err.h"
#include "vmm/base/guest_mem.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define RAM_SIZE (64 * MiB)

static struct fake_ram ram;

static void setup(void)
{
	fake_ram_init(&ram, RAM_SIZE);
}

static void teardown(void)
{
	fake_ram_free(&ram);
}

/* ---- guest_mem ---- */

START_TEST(test_translation_inside_ram_is_base_plus_gpa)
{
	ck_assert_ptr_eq(guest_mem_ptr(&ram.m, 0, 1), ram.buf);
	ck_assert_ptr_eq(guest_mem_ptr(&ram.m, 0x123456, 16), ram.buf + 0x123456);
	ck_assert_ptr_eq(guest_mem_ptr(&ram.m, RAM_SIZE - 1, 1), ram.buf + RAM_SIZE - 1);
	ck_assert_ptr_eq(guest_mem_ptr(&ram.m, 0, RAM_SIZE), ram.buf);
	ck_assert(guest_mem_is_ram(&ram.m, RAM_SIZE - 8, 8));
	ck_assert_uint_eq(guest_mem_low_end(&ram.m), RAM_SIZE);
}
END_TEST

START_TEST(test_translation_outside_ram_is_null)
{
	ck_assert_ptr_null(guest_mem_ptr(&ram.m, RAM_SIZE, 1));
	ck_assert_ptr_null(guest_mem_ptr(&ram.m, RAM_SIZE + 4096, 8));
	ck_assert_ptr_null(guest_mem_ptr(&ram.m, GUEST_MMIO_HOLE_START, 4));
	ck_assert_ptr_null(guest_mem_ptr(&ram.m, GUEST_4G, 4));
	ck_assert(!guest_mem_is_ram(&ram.m, RAM_SIZE, 1));
}
END_TEST

START_TEST(test_range_crossing_end_of_ram_is_null)
{
	ck_assert_ptr_null(guest_mem_ptr(&ram.m, RAM_SIZE - 4, 8));
	ck_assert_ptr_null(guest_mem_ptr(&ram.m, RAM_SIZE - 1, 2));
	ck_assert_ptr_null(guest_mem_ptr(&ram.m, 0, RAM_SIZE + 1));
	uint8_t buf[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	memset(ram.buf + RAM_SIZE - 4, 0xAB, 4);
	ck_assert_int_eq(guest_mem_write(&ram.m, RAM_SIZE - 4, buf, 8), -EFAULT);
	/* Fails closed: no partial write. */
	ck_assert(bytes_all(ram.buf + RAM_SIZE - 4, 4, 0xAB));
	ck_assert_int_eq(guest_mem_read(&ram.m, RAM_SIZE - 4, buf, 8), -EFAULT);
}
END_TEST

START_TEST(test_zero_length_outside_ram_is_null)
{
	ck_assert_ptr_null(guest_mem_ptr(&ram.m, RAM_SIZE + 1, 0));
	ck_assert_ptr_null(guest_mem_ptr(&ram.m, UINT64_MAX, 0));
	/* An empty access inside RAM is harmless and must not fault. */
	uint8_t b = 0;
	ck_assert_int_eq(guest_mem_read(&ram.m, 0x1000, &b, 0), 0);
}
END_TEST

START_TEST(test_wrapping_ranges_are_null)
{
	ck_assert_ptr_null(guest_mem_ptr(&ram.m, UINT64_MAX, 1));
	ck_assert_ptr_null(guest_mem_ptr(&ram.m, UINT64_MAX, 2));
	ck_assert_ptr_null(guest_mem_ptr(&ram.m, UINT64_MAX - 3, 8));
	/* gpa + len wraps to a small in-RAM value. */
	ck_assert_ptr_null(guest_mem_ptr(&ram.m, 0x1000, UINT64_MAX));
	ck_assert_ptr_null(guest_mem_ptr(&ram.m, 0x1000, UINT64_MAX - 0x0FFF + 0x10));
	ck_assert_ptr_null(guest_mem_ptr(&ram.m, UINT64_MAX - 0xF, 0x20));
}
END_TEST

START_TEST(test_read_write_round_trip)
{
	uint8_t in[64], out[64];
	fill_noise(in, sizeof(in), 3);
	ck_assert_int_eq(guest_mem_write(&ram.m, 0x7FF0, in, sizeof(in)), 0);
	ck_assert_mem_eq(ram.buf + 0x7FF0, in, sizeof(in));
	ck_assert_int_eq(guest_mem_read(&ram.m, 0x7FF0, out, sizeof(out)), 0);
	ck_assert_mem_eq(out, in, sizeof(in));
}
END_TEST

/* 3 GiB + 64 MiB: RAM below the hole, then 64 MiB from 4 GiB. */
#define BIG_RAM (3 * GiB + 64 * MiB)

static uint8_t *map_sparse(uint64_t size)
{
	uint8_t *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ck_assert_msg(p != MAP_FAILED, "cannot map a sparse region of %llu MiB",
		      (unsigned long long)(size >> 20));
	return p;
}

START_TEST(test_mmio_hole_between_3g_and_4g_is_not_ram)
{
	uint8_t *host = map_sparse(BIG_RAM);
	struct guest_mem m;
	guest_mem_init_with(&m, host, BIG_RAM);
	ck_assert_uint_eq(guest_mem_low_end(&m), GUEST_MMIO_HOLE_START);
	ck_assert_ptr_eq(guest_mem_ptr(&m, GUEST_MMIO_HOLE_START - 1, 1),
			 host + GUEST_MMIO_HOLE_START - 1);
	ck_assert_ptr_null(guest_mem_ptr(&m, GUEST_MMIO_HOLE_START, 1));
	ck_assert_ptr_null(guest_mem_ptr(&m, GUEST_MMIO_HOLE_START - 2, 4));
	ck_assert_ptr_null(guest_mem_ptr(&m, 0xFEC00000, 4)); /* IOAPIC */
	ck_assert_ptr_null(guest_mem_ptr(&m, 0xFEE00000, 4)); /* LAPIC */
	ck_assert_ptr_null(guest_mem_ptr(&m, GUEST_4G - 1, 1));
	/* A range spanning the hole is not wholly RAM. */
	ck_assert_ptr_null(guest_mem_ptr(&m, GUEST_MMIO_HOLE_START - 4096, GUEST_4G));
	munmap(host, BIG_RAM);
}
END_TEST

START_TEST(test_ram_above_4g_follows_low_ram_in_host_buffer)
{
	uint8_t *host = map_sparse(BIG_RAM);
	struct guest_mem m;
	guest_mem_init_with(&m, host, BIG_RAM);
	const uint64_t high = BIG_RAM - GUEST_MMIO_HOLE_START;
	ck_assert_ptr_eq(guest_mem_ptr(&m, GUEST_4G, 1), host + GUEST_MMIO_HOLE_START);
	ck_assert_ptr_eq(guest_mem_ptr(&m, GUEST_4G + high - 8, 8), host + BIG_RAM - 8);
	ck_assert_ptr_null(guest_mem_ptr(&m, GUEST_4G + high, 1));
	ck_assert_ptr_null(guest_mem_ptr(&m, GUEST_4G + high - 4, 8));
	uint32_t v = 0xC0FFEE11;
	ck_assert_int_eq(guest_mem_write(&m, GUEST_4G + 0x1000, &v, 4), 0);
	ck_assert_uint_eq(get32(host + GUEST_MMIO_HOLE_START + 0x1000), 0xC0FFEE11);
	munmap(host, BIG_RAM);
}
END_TEST

START_TEST(test_exactly_3g_has_no_ram_above_4g)
{
	uint8_t *host = map_sparse(3 * GiB);
	struct guest_mem m;
	guest_mem_init_with(&m, host, 3 * GiB);
	ck_assert_uint_eq(guest_mem_low_end(&m), 3 * GiB);
	ck_assert_ptr_null(guest_mem_ptr(&m, GUEST_4G, 1));
	ck_assert_ptr_eq(guest_mem_ptr(&m, 3 * GiB - 1, 1), host + 3 * GiB - 1);
	munmap(host, 3 * GiB);
}
END_TEST

/* guest_mem_create's RAM is a memfd mapped shared: the regions it shares
 * say where each lies in the fd, and a second mapping of the fd (what a
 * vhost-user backend makes) sees the same bytes both ways. */
START_TEST(test_created_ram_is_a_shared_memfd)
{
	struct guest_mem m;
	struct guest_mem_share sh[GUEST_MEM_MAX_REGIONS];
	struct err e = {0};
	ck_assert_int_eq(guest_mem_create(&m, BIG_RAM, true, &e), 0);
	ck_assert_int_ge(m.fd, 0);
	ck_assert_int_eq(guest_mem_share(&m, sh, 1), 0); /* no room for both */
	ck_assert_int_eq(guest_mem_share(&m, sh, GUEST_MEM_MAX_REGIONS), 2);
	ck_assert_uint_eq(sh[0].gpa, 0);
	ck_assert_uint_eq(sh[0].size, GUEST_MMIO_HOLE_START);
	ck_assert_uint_eq(sh[0].offset, 0);
	ck_assert_uint_eq(sh[0].host, (uintptr_t)m.base);
	ck_assert_uint_eq(sh[1].gpa, GUEST_4G);
	ck_assert_uint_eq(sh[1].size, 64 * MiB);
	ck_assert_uint_eq(sh[1].offset, GUEST_MMIO_HOLE_START);
	ck_assert_uint_eq(sh[1].host, (uintptr_t)m.base + GUEST_MMIO_HOLE_START);
	ck_assert_int_eq(sh[0].fd, m.fd);
	ck_assert_int_eq(sh[1].fd, m.fd);
	uint8_t *other =
	    mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd, (off_t)sh[1].offset);
	ck_assert(other != MAP_FAILED);
	uint32_t v = 0x5A5AA5A5;
	ck_assert_int_eq(guest_mem_write(&m, GUEST_4G + 8, &v, 4), 0);
	ck_assert_uint_eq(get32(other + 8), v);
	put32(other + 16, 0x12345678);
	ck_assert_int_eq(guest_mem_read(&m, GUEST_4G + 16, &v, 4), 0);
	ck_assert_uint_eq(v, 0x12345678);
	munmap(other, 4096);
	guest_mem_destroy(&m);
	ck_assert_int_eq(m.fd, -1);
}
END_TEST

/* Memory a caller provides has no fd: nothing to share. */
START_TEST(test_caller_memory_is_not_shared)
{
	static uint8_t buf[64 * 1024];
	struct guest_mem m;
	struct guest_mem_share sh[GUEST_MEM_MAX_REGIONS];
	guest_mem_init_with(&m, buf, sizeof(buf));
	ck_assert_int_eq(m.fd, -1);
	ck_assert_int_eq(guest_mem_share(&m, sh, GUEST_MEM_MAX_REGIONS), 0);
}
END_TEST

/* ---- bus ---- */

struct dev_rec {
	unsigned reads, writes;
	uint64_t offset;
	unsigned len;
	uint8_t data[8];
	uint8_t fill; /* what reads return */
};

static void dev_read(void *opaque, uint64_t offset, void *data, unsigned len)
{
	struct dev_rec *d = opaque;
	d->reads++;
	d->offset = offset;
	d->len = len;
	memset(data, d->fill, len);
}

static void dev_write(void *opaque, uint64_t offset, const void *data, unsigned len)
{
	struct dev_rec *d = opaque;
	d->writes++;
	d->offset = offset;
	d->len = len;
	memcpy(d->data, data, len > 8 ? 8 : len);
}

static struct bus bus;
static struct dev_rec dev_a, dev_b;

static void bus_setup(void)
{
	bus_init(&bus, "pio", NULL);
	memset(&dev_a, 0, sizeof(dev_a));
	memset(&dev_b, 0, sizeof(dev_b));
	dev_a.fill = 0xA1;
	dev_b.fill = 0xB2;
}

static void bus_teardown(void)
{
	bus_destroy(&bus);
}

static int reg(uint64_t base, uint64_t len, struct dev_rec *d)
{
	return bus_register(&bus, base, len, dev_read, dev_write, d);
}

START_TEST(test_bus_register_disjoint_ranges)
{
	ck_assert_int_eq(reg(0x100, 8, &dev_a), 0);
	ck_assert_int_eq(reg(0x200, 8, &dev_b), 0);
}
END_TEST

START_TEST(test_bus_overlapping_registrations_refused)
{
	ck_assert_int_eq(reg(0x100, 8, &dev_a), 0);	     /* [0x100, 0x108) */
	ck_assert_int_eq(reg(0x100, 8, &dev_b), -EEXIST);    /* identical */
	ck_assert_int_eq(reg(0x104, 8, &dev_b), -EEXIST);    /* overlaps the end */
	ck_assert_int_eq(reg(0xFC, 5, &dev_b), -EEXIST);     /* overlaps the start */
	ck_assert_int_eq(reg(0x102, 2, &dev_b), -EEXIST);    /* contained */
	ck_assert_int_eq(reg(0x0, 0x1000, &dev_b), -EEXIST); /* contains */
	ck_assert_int_eq(reg(0x107, 1, &dev_b), -EEXIST);    /* last byte */
	ck_assert_int_eq(reg(0x200, 0x10, &dev_b), 0);
	ck_assert_int_eq(reg(0x108, 0x100, &dev_b), -EEXIST); /* bridges two ranges */
	/* A refused registration leaves the original owner in place. */
	uint8_t v;
	ck_assert(bus_read(&bus, 0x104, &v, 1));
	ck_assert_uint_eq(v, 0xA1);
}
END_TEST

START_TEST(test_bus_adjacent_ranges_allowed)
{
	ck_assert_int_eq(reg(0x100, 8, &dev_a), 0);
	ck_assert_int_eq(reg(0x108, 8, &dev_b), 0); /* right after */
	ck_assert_int_eq(reg(0xF8, 8, &dev_b), 0);  /* right before */
	uint8_t v;
	ck_assert(bus_read(&bus, 0x107, &v, 1));
	ck_assert_uint_eq(v, 0xA1);
	ck_assert(bus_read(&bus, 0x108, &v, 1));
	ck_assert_uint_eq(v, 0xB2);
	ck_assert(bus_read(&bus, 0xFF, &v, 1));
	ck_assert_uint_eq(v, 0xB2);
}
END_TEST

START_TEST(test_bus_empty_or_wrapping_range_invalid)
{
	ck_assert_int_eq(reg(0x100, 0, &dev_a), -EINVAL);
	ck_assert_int_eq(reg(UINT64_MAX - 1, 4, &dev_a), -EINVAL);
	ck_assert_int_eq(reg(UINT64_MAX - 3, 4, &dev_a), 0); /* ends exactly at 2^64 */
}
END_TEST

START_TEST(test_bus_dispatch_passes_offset_from_base_and_length)
{
	ck_assert_int_eq(reg(0x3F8, 8, &dev_a), 0);
	uint8_t buf[8] = {0};
	ck_assert(bus_read(&bus, 0x3FD, buf, 1));
	ck_assert_uint_eq(dev_a.reads, 1);
	ck_assert_uint_eq(dev_a.offset, 5);
	ck_assert_uint_eq(dev_a.len, 1);
	ck_assert_uint_eq(buf[0], 0xA1);
	uint32_t w = 0x11223344;
	ck_assert(bus_write(&bus, 0x3FC, &w, 4));
	ck_assert_uint_eq(dev_a.writes, 1);
	ck_assert_uint_eq(dev_a.offset, 4);
	ck_assert_uint_eq(dev_a.len, 4);
	ck_assert_uint_eq(get32(dev_a.data), 0x11223344);
	ck_assert(bus_read(&bus, 0x3F8, buf, 8));
	ck_assert_uint_eq(dev_a.offset, 0);
	ck_assert_uint_eq(dev_a.len, 8);
}
END_TEST

START_TEST(test_bus_unclaimed_read_is_all_ones_of_access_size)
{
	ck_assert_int_eq(reg(0x100, 8, &dev_a), 0);
	static const unsigned sizes[] = {1, 2, 4, 8};
	for (unsigned i = 0; i < 4; i++) {
		uint8_t buf[16];
		memset(buf, 0, sizeof(buf));
		ck_assert(!bus_read(&bus, 0x500, buf, sizes[i]));
		ck_assert(bytes_all(buf, sizes[i], 0xFF));
		ck_assert(bytes_all(buf + sizes[i], sizeof(buf) - sizes[i], 0));
	}
	ck_assert_uint_eq(dev_a.reads, 0);
}
END_TEST

START_TEST(test_bus_unclaimed_write_is_dropped)
{
	ck_assert_int_eq(reg(0x100, 8, &dev_a), 0);
	uint32_t w = 0xDEADBEEF;
	ck_assert(!bus_write(&bus, 0x108, &w, 4));
	ck_assert(!bus_write(&bus, 0xFF, &w, 1));
	ck_assert_uint_eq(dev_a.writes, 0);
}
END_TEST

START_TEST(test_bus_access_straddling_range_end_is_unclaimed)
{
	ck_assert_int_eq(reg(0x100, 8, &dev_a), 0);
	ck_assert_int_eq(reg(0x108, 8, &dev_b), 0);
	uint8_t buf[4] = {0};
	/* 0x106..0x109 spans both devices: neither may see a partial access. */
	ck_assert(!bus_read(&bus, 0x106, buf, 4));
	ck_assert(bytes_all(buf, 4, 0xFF));
	ck_assert(!bus_write(&bus, 0x106, buf, 4));
	/* And an access starting in a gap, ending inside a range. */
	ck_assert(!bus_read(&bus, 0xFE, buf, 4));
	ck_assert_uint_eq(dev_a.reads + dev_a.writes + dev_b.reads + dev_b.writes, 0);
	/* One byte past the end of the last range. */
	ck_assert(!bus_read(&bus, 0x10E, buf, 4));
}
END_TEST

START_TEST(test_bus_unregister_removes_range)
{
	ck_assert_int_eq(reg(0x100, 8, &dev_a), 0);
	ck_assert_int_eq(reg(0x200, 8, &dev_b), 0);
	ck_assert_int_eq(bus_unregister(&bus, 0x100, &dev_b), -ENOENT); /* wrong owner */
	ck_assert_int_eq(bus_unregister(&bus, 0x104, &dev_a), -ENOENT); /* not the base */
	ck_assert_int_eq(bus_unregister(&bus, 0x100, &dev_a), 0);
	uint8_t v = 0;
	ck_assert(!bus_read(&bus, 0x100, &v, 1));
	ck_assert_uint_eq(v, 0xFF);
	ck_assert_uint_eq(dev_a.reads, 0);
	ck_assert_int_eq(bus_unregister(&bus, 0x100, &dev_a), -ENOENT);
	/* The other range still works, and the freed one can be reused. */
	ck_assert(bus_read(&bus, 0x200, &v, 1));
	ck_assert_uint_eq(v, 0xB2);
	ck_assert_int_eq(reg(0x100, 8, &dev_b), 0);
	ck_assert(bus_read(&bus, 0x100, &v, 1));
	ck_assert_uint_eq(v, 0xB2);
}
END_TEST

START_TEST(test_bus_many_ranges_in_any_order_dispatch_to_owner)
{
	enum { N = 40 };
	static struct dev_rec devs[N];
	/* Register in a scrambled order (i * 7 mod 40 visits all). */
	for (unsigned k = 0; k < N; k++) {
		unsigned i = (k * 7) % N;
		memset(&devs[i], 0, sizeof(devs[i]));
		devs[i].fill = (uint8_t)i;
		ck_assert_int_eq(reg(0x1000 + i * 0x10, 0x10, &devs[i]), 0);
	}
	for (unsigned i = 0; i < N; i++) {
		uint8_t v;
		ck_assert(bus_read(&bus, 0x1000 + i * 0x10 + 0xF, &v, 1));
		ck_assert_uint_eq(v, i);
		ck_assert_uint_eq(devs[i].offset, 0xF);
		ck_assert_int_eq(reg(0x1000 + i * 0x10 + 4, 1, &dev_a), -EEXIST);
	}
}
END_TEST

static Suite *mem_bus_suite(void)
{
	Suite *s = suite_create("mem_bus");
	TCase *t = tcase_create("guest_mem");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_translation_inside_ram_is_base_plus_gpa);
	tcase_add_test(t, test_translation_outside_ram_is_null);
	tcase_add_test(t, test_range_crossing_end_of_ram_is_null);
	tcase_add_test(t, test_zero_length_outside_ram_is_null);
	tcase_add_test(t, test_wrapping_ranges_are_null);
	tcase_add_test(t, test_read_write_round_trip);
	tcase_add_test(t, test_mmio_hole_between_3g_and_4g_is_not_ram);
	tcase_add_test(t, test_ram_above_4g_follows_low_ram_in_host_buffer);
	tcase_add_test(t, test_exactly_3g_has_no_ram_above_4g);
	tcase_add_test(t, test_created_ram_is_a_shared_memfd);
	tcase_add_test(t, test_caller_memory_is_not_shared);
	suite_add_tcase(s, t);

	t = tcase_create("bus");
	tcase_add_checked_fixture(t, bus_setup, bus_teardown);
	tcase_add_test(t, test_bus_register_disjoint_ranges);
	tcase_add_test(t, test_bus_overlapping_registrations_refused);
	tcase_add_test(t, test_bus_adjacent_ranges_allowed);
	tcase_add_test(t, test_bus_empty_or_wrapping_range_invalid);
	tcase_add_test(t, test_bus_dispatch_passes_offset_from_base_and_length);
	tcase_add_test(t, test_bus_unclaimed_read_is_all_ones_of_access_size);
	tcase_add_test(t, test_bus_unclaimed_write_is_dropped);
	tcase_add_test(t, test_bus_access_straddling_range_end_is_unclaimed);
	tcase_add_test(t, test_bus_unregister_removes_range);
	tcase_add_test(t, test_bus_many_ranges_in_any_order_dispatch_to_owner);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(mem_bus_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
