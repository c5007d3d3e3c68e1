/*
 * The ranked-lock checker (vmm/base/lock.h), built here with VMM_LOCK_CHECKS
 * whatever the build type: locks taken in rank order pass, and each rule
 * broken aborts (SIGABRT) where it is broken.
 */
#include "vmm/base/lock.h"

#include <check.h>
#include <signal.h>
#include <stdlib.h>

#ifndef VMM_LOCK_CHECKS
#error "this test is built with VMM_LOCK_CHECKS"
#endif

static struct vmm_lock config, queue0, queue1, router, log_lock;
static struct vmm_rwlock bus;

static void setup(void)
{
	lock_init(&config, "virtio-pci config", LOCK_RANK_VIRTIO_CONFIG);
	lock_init(&queue0, "virtio queue 0", LOCK_RANK_VIRTIO_QUEUE);
	lock_init(&queue1, "virtio queue 1", LOCK_RANK_VIRTIO_QUEUE);
	lock_init(&router, "interrupt router", LOCK_RANK_IRQ_ROUTER);
	lock_init(&log_lock, "log", LOCK_RANK_LOG);
	rwlock_init(&bus, "bus ranges", LOCK_RANK_BUS);
}

START_TEST(test_rank_order_passes)
{
	lock_take(&config);
	lock_take_nested(&queue0, 0);
	lock_take_nested(&queue1, 1);
	lock_assert_held(&queue1);
	lock_take(&router);
	rwlock_read(&bus);
	lock_take(&log_lock);
	lock_release(&log_lock);
	rwlock_release(&bus);
	lock_release(&router);
	/* Released in any order. */
	lock_release(&queue0);
	lock_release(&config);
	lock_release(&queue1);
	/* Once released, taken again in another order of nothing held. */
	lock_take(&router);
	lock_release(&router);
	lock_take(&config);
	lock_release(&config);
}
END_TEST

START_TEST(test_out_of_order_aborts)
{
	lock_take(&router);
	lock_take(&config);
}
END_TEST

START_TEST(test_same_rank_in_decreasing_sub_aborts)
{
	lock_take_nested(&queue1, 1);
	lock_take_nested(&queue0, 0);
}
END_TEST

START_TEST(test_twice_aborts)
{
	lock_take(&config);
	lock_take(&config);
}
END_TEST

START_TEST(test_locked_function_without_its_lock_aborts)
{
	lock_take(&config);
	lock_assert_held(&router);
}
END_TEST

START_TEST(test_release_of_a_lock_not_held_aborts)
{
	lock_release(&router);
}
END_TEST

START_TEST(test_rwlock_out_of_order_aborts)
{
	rwlock_write(&bus);
	lock_take(&router);
}
END_TEST

/* The rank names cover the table (DESIGN.md's list is checked against
 * them by tests/style/check_lock_order.py). */
START_TEST(test_every_rank_named)
{
	for (int r = 1; r < LOCK_RANK_COUNT; r++)
		ck_assert_str_ne(lock_rank_name((enum lock_rank)r), "?");
	ck_assert_str_eq(lock_rank_name(LOCK_RANK_COUNT), "?");
}
END_TEST

static Suite *lock_suite(void)
{
	Suite *s = suite_create("lock");
	TCase *t = tcase_create("lock");
	tcase_add_checked_fixture(t, setup, NULL);
	tcase_add_test(t, test_rank_order_passes);
	tcase_add_test_raise_signal(t, test_out_of_order_aborts, SIGABRT);
	tcase_add_test_raise_signal(t, test_same_rank_in_decreasing_sub_aborts, SIGABRT);
	tcase_add_test_raise_signal(t, test_twice_aborts, SIGABRT);
	tcase_add_test_raise_signal(t, test_locked_function_without_its_lock_aborts, SIGABRT);
	tcase_add_test_raise_signal(t, test_release_of_a_lock_not_held_aborts, SIGABRT);
	tcase_add_test_raise_signal(t, test_rwlock_out_of_order_aborts, SIGABRT);
	tcase_add_test(t, test_every_rank_named);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(lock_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
