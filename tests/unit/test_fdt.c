/*
 * The machine's flattened device tree (vmm/firmware/fdt.h), read back with libfdt:
 * memory, CPUs and the PCI host bridge per the IEEE 1275 PCI bus binding
 * (Documentation/devicetree/bindings/pci/pci.txt): phys.hi cells
 * "npt000ss bbbbbbbb dddddfff rrrrrrrr", interrupt-map from (device, INTx#)
 * to the IOAPIC (intel,ce4100-ioapic: <pin type>, type 1 = level, low).
 */
#include "helpers.h"

#include "devices/pci/pci.h"
#include "devices/pci/pci_testdev.h"
#include "vmm/base/err.h"
#include "vmm/base/layout.h"
#include "vmm/firmware/fdt.h"

#include <check.h>
#include <libfdt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static struct pci_rig rig;
static void *blob;
static size_t blob_len;

static const struct {
	uint8_t slot;
	unsigned nvec;
	const char *path;
} devs[] = {
    {1, 4, "/pci@cf8/testdev0@1"},
    {9, 2048, "/pci@cf8/testdev1@9"},
    {2, 1, "/pci@cf8/testdev2@2"},
};
#define NDEVS (sizeof(devs) / sizeof(devs[0]))

static void build(const struct guest_mem *mem, unsigned ncpus)
{
	struct fdt_machine m = {.mem = mem, .ncpus = ncpus, .pci = &rig.pci};
	struct err e;
	memset(&e, 0, sizeof(e));
	free(blob);
	blob = NULL;
	ck_assert_msg(fdt_build_machine(&m, &blob, &blob_len, &e) == 0, "%s", e.msg);
	ck_assert_ptr_nonnull(blob);
}

static void setup(void)
{
	pci_rig_init(&rig, IRQ_MSI_SIGNAL, IRQ_INTX_LINE);
	for (size_t i = 0; i < NDEVS; i++)
		pci_rig_add(&rig, devs[i].slot, devs[i].nvec);
	ck_assert_int_eq(pci_bus_assign_resources(&rig.pci), 0);
	build(&rig.ram.m, 2);
}

static void teardown(void)
{
	free(blob);
	blob = NULL;
	pci_rig_free(&rig);
}

static int node(const char *path)
{
	int off = fdt_path_offset(blob, path);
	ck_assert_msg(off >= 0, "%s: %s", path, fdt_strerror(off));
	return off;
}

static const fdt32_t *prop(int off, const char *name, int *len)
{
	const fdt32_t *p = fdt_getprop(blob, off, name, len);
	ck_assert_msg(p != NULL, "property %s missing", name);
	return p;
}

static uint32_t prop_u32(int off, const char *name)
{
	int len;
	const fdt32_t *p = prop(off, name, &len);
	ck_assert_int_eq(len, 4);
	return fdt32_to_cpu(p[0]);
}

static uint64_t cells(const fdt32_t *p, int n)
{
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v = v << 32 | fdt32_to_cpu(p[i]);
	return v;
}

/* A node's reg as (address, size) with the parent's cell counts. */
static void reg_of(int off, uint64_t *addr, uint64_t *size)
{
	int parent = fdt_parent_offset(blob, off);
	int ac = fdt_address_cells(blob, parent), sc = fdt_size_cells(blob, parent), len;
	const fdt32_t *p = prop(off, "reg", &len);
	ck_assert_int_ge(len, (ac + sc) * 4);
	*addr = cells(p, ac);
	*size = cells(p + ac, sc);
}

START_TEST(test_tree_passes_full_check)
{
	ck_assert_int_eq(fdt_check_full(blob, blob_len), 0);
	ck_assert_uint_eq(fdt_totalsize(blob), blob_len);
	ck_assert_int_eq(fdt_magic(blob), FDT_MAGIC);
}
END_TEST

START_TEST(test_memory_node_covers_ram)
{
	int off = node("/memory@0");
	ck_assert_str_eq(fdt_getprop(blob, off, "device_type", NULL), "memory");
	uint64_t a, s;
	reg_of(off, &a, &s);
	ck_assert_uint_eq(a, 0);
	ck_assert_uint_eq(s, RIG_RAM_SIZE);
	ck_assert_int_lt(fdt_path_offset(blob, "/memory@100000000"), 0);
}
END_TEST

START_TEST(test_memory_above_4g_gets_its_own_node)
{
	uint64_t size = 5 * GiB;
	void *host =
	    mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ck_assert(host != MAP_FAILED);
	struct guest_mem m;
	guest_mem_init_with(&m, host, size);
	build(&m, 1);
	ck_assert_int_eq(fdt_check_full(blob, blob_len), 0);
	uint64_t a, s;
	reg_of(node("/memory@0"), &a, &s);
	ck_assert_uint_eq(a, 0);
	ck_assert_uint_eq(s, GUEST_MMIO_HOLE_START);
	reg_of(node("/memory@100000000"), &a, &s);
	ck_assert_uint_eq(a, GUEST_4G);
	ck_assert_uint_eq(s, size - GUEST_MMIO_HOLE_START);
	munmap(host, size);
}
END_TEST

START_TEST(test_cpu_nodes)
{
	for (unsigned i = 0; i < 2; i++) {
		char path[32];
		snprintf(path, sizeof(path), "/cpus/cpu@%u", i);
		int off = node(path);
		ck_assert_str_eq(fdt_getprop(blob, off, "device_type", NULL), "cpu");
		ck_assert_uint_eq(prop_u32(off, "reg"), i);
	}
	ck_assert_int_lt(fdt_path_offset(blob, "/cpus/cpu@2"), 0);
	int cpus = node("/cpus");
	ck_assert_int_eq(fdt_address_cells(blob, cpus), 1);
	ck_assert_int_eq(fdt_size_cells(blob, cpus), 0);
}
END_TEST

START_TEST(test_pci_host_node)
{
	int off = node("/pci@cf8");
	ck_assert_str_eq(fdt_getprop(blob, off, "device_type", NULL), "pci");
	int len;
	const fdt32_t *br = prop(off, "bus-range", &len);
	ck_assert_int_eq(len, 8);
	ck_assert_uint_eq(fdt32_to_cpu(br[0]), 0);
	ck_assert_uint_eq(fdt32_to_cpu(br[1]), 0);
	ck_assert_uint_eq(prop_u32(off, "#address-cells"), 3);
	ck_assert_uint_eq(prop_u32(off, "#size-cells"), 2);
	ck_assert_uint_eq(prop_u32(off, "#interrupt-cells"), 1);
}
END_TEST

START_TEST(test_pci_ranges_map_the_mmio_window_and_hold_every_bar)
{
	int pci = node("/pci@cf8"), len;
	int pa = fdt_address_cells(blob, 0), ps = fdt_size_cells(blob, pci);
	const fdt32_t *r = prop(pci, "ranges", &len);
	int step = 3 + pa + ps, n = len / 4 / step;
	ck_assert_int_eq(len % (4 * step), 0);
	bool window = false;
	for (int i = 0; i < n; i++) {
		const fdt32_t *e = r + i * step;
		uint32_t space = (fdt32_to_cpu(e[0]) >> 24) & 3;
		uint64_t child = cells(e + 1, 2), parent = cells(e + 3, pa),
			 size = cells(e + 3 + pa, ps);
		if (space == 2 && child == LAYOUT_PCI_MMIO_START &&
		    parent == LAYOUT_PCI_MMIO_START &&
		    size == LAYOUT_PCI_MMIO_END - LAYOUT_PCI_MMIO_START)
			window = true;
	}
	ck_assert_msg(window, "no 1:1 mem32 range for 0x%llx-0x%llx",
		      (unsigned long long)LAYOUT_PCI_MMIO_START,
		      (unsigned long long)LAYOUT_PCI_MMIO_END);
	for (size_t d = 0; d < NDEVS; d++)
		for (int bar = 0; bar < 2; bar++) {
			uint64_t a = rig_bar_addr(&rig, devs[d].slot, bar);
			uint64_t s = rig_bar_size(&rig, devs[d].slot, bar);
			bool inside = false;
			for (int i = 0; i < n; i++) {
				const fdt32_t *e = r + i * step;
				uint64_t child = cells(e + 1, 2), size = cells(e + 3 + pa, ps);
				inside |= ((fdt32_to_cpu(e[0]) >> 24) & 3) == 2 && a >= child &&
					  a + s <= child + size;
			}
			ck_assert_msg(inside, "slot %u BAR%d 0x%llx outside ranges", devs[d].slot,
				      bar, (unsigned long long)a);
		}
}
END_TEST

START_TEST(test_interrupt_map_sends_each_inta_to_its_ioapic_pin)
{
	int pci = node("/pci@cf8"), len, mlen;
	const fdt32_t *map = prop(pci, "interrupt-map", &len);
	const fdt32_t *mask = prop(pci, "interrupt-map-mask", &mlen);
	ck_assert_int_eq(mlen, 4 * 4); /* 3 address cells + 1 interrupt cell */
	int ncells = len / 4, i = 0;
	unsigned entries = 0;
	bool found[NDEVS] = {false};
	while (i < ncells) {
		ck_assert_int_le(i + 5, ncells);
		uint32_t hi = fdt32_to_cpu(map[i]), intx = fdt32_to_cpu(map[i + 3]);
		int parent = fdt_node_offset_by_phandle(blob, fdt32_to_cpu(map[i + 4]));
		ck_assert_int_ge(parent, 0);
		ck_assert_ptr_nonnull(fdt_getprop(blob, parent, "interrupt-controller", NULL));
		const fdt32_t *pac = fdt_getprop(blob, parent, "#address-cells", NULL);
		int pa = pac ? (int)fdt32_to_cpu(*pac) : 2;
		int pi = (int)prop_u32(parent, "#interrupt-cells");
		ck_assert_int_le(i + 5 + pa + pi, ncells);
		const fdt32_t *spec = &map[i + 5 + pa];
		for (size_t d = 0; d < NDEVS; d++) {
			uint32_t want_hi = ((uint32_t)devs[d].slot << 11) & fdt32_to_cpu(mask[0]);
			if ((hi & fdt32_to_cpu(mask[0])) != want_hi ||
			    (intx & fdt32_to_cpu(mask[3])) != 1)
				continue;
			found[d] = true;
			ck_assert_uint_eq(fdt32_to_cpu(spec[0]),
					  pci_intx_ioapic_pin(devs[d].slot, 1));
			if (pi >= 2)
				ck_assert_uint_eq(fdt32_to_cpu(spec[1]), 1); /* level, active low */
		}
		entries++;
		i += 5 + pa + pi;
	}
	ck_assert_int_eq(i, ncells);
	ck_assert_uint_eq(entries, NDEVS); /* one per INTx device; not the bridge */
	for (size_t d = 0; d < NDEVS; d++)
		ck_assert_msg(found[d], "no interrupt-map entry for slot %u", devs[d].slot);
}
END_TEST

START_TEST(test_device_nodes_carry_vectors_ids_and_reg)
{
	for (size_t d = 0; d < NDEVS; d++) {
		int off = node(devs[d].path);
		ck_assert_uint_eq(prop_u32(off, "msix-vectors"), devs[d].nvec);
		ck_assert_uint_eq(prop_u32(off, "vendor-id"), TESTDEV_VENDOR);
		ck_assert_uint_eq(prop_u32(off, "device-id"), TESTDEV_DEVICE);
		int len;
		const fdt32_t *reg = prop(off, "reg", &len);
		ck_assert_int_ge(len, 5 * 4);
		ck_assert_uint_eq(fdt32_to_cpu(reg[0]), (uint32_t)devs[d].slot << 11);
	}
}
END_TEST

START_TEST(test_assigned_addresses_match_the_bars)
{
	for (size_t d = 0; d < NDEVS; d++) {
		uint8_t slot = devs[d].slot;
		int len;
		const fdt32_t *aa = prop(node(devs[d].path), "assigned-addresses", &len);
		ck_assert_int_eq(len, 2 * 5 * 4); /* BAR0 and BAR1 */
		bool seen[2] = {false, false};
		for (int e = 0; e < 2; e++) {
			const fdt32_t *c = aa + 5 * e;
			uint32_t hi = fdt32_to_cpu(c[0]);
			int bar = (int)((hi & 0xFF) - 0x10) / 4;
			ck_assert_msg((hi & 0xFF) == 0x10 || (hi & 0xFF) == 0x14, "register 0x%x",
				      hi & 0xFF);
			ck_assert_uint_eq((hi >> 24) & 3, 2);	 /* 32-bit memory space */
			ck_assert_uint_eq((hi >> 30) & 1, 0);	 /* not prefetchable */
			ck_assert_uint_eq((hi >> 16) & 0xFF, 0); /* bus 0 */
			ck_assert_uint_eq((hi >> 11) & 0x1F, slot);
			ck_assert_uint_eq((hi >> 8) & 7, 0); /* function 0 */
			ck_assert_uint_eq(cells(c + 1, 2), rig_bar_addr(&rig, slot, bar));
			ck_assert_uint_eq(cells(c + 3, 2), rig_bar_size(&rig, slot, bar));
			seen[bar] = true;
		}
		ck_assert(seen[0] && seen[1]);
	}
}
END_TEST

START_TEST(test_intx_mode_device_has_no_vector_count)
{
	static struct pci_testdev t;
	ck_assert_int_eq(pci_testdev_init(&t, "intx", &rig.irq, 8, IRQ_MODE_INTX), 0);
	ck_assert_int_eq(pci_bus_add_device(&rig.pci, &t.pci, 5, 1), 0);
	ck_assert_int_eq(pci_bus_assign_resources(&rig.pci), 0);
	build(&rig.ram.m, 2);
	ck_assert_int_eq(fdt_check_full(blob, blob_len), 0);
	int off = node("/pci@cf8/intx@5");
	ck_assert_ptr_null(fdt_getprop(blob, off, "msix-vectors", NULL));
	ck_assert_uint_eq(prop_u32(node(devs[0].path), "msix-vectors"), devs[0].nvec);
	pci_testdev_destroy(&t);
}
END_TEST

static Suite *fdt_suite(void)
{
	Suite *s = suite_create("fdt");
	TCase *t = tcase_create("machine");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_tree_passes_full_check);
	tcase_add_test(t, test_memory_node_covers_ram);
	tcase_add_test(t, test_memory_above_4g_gets_its_own_node);
	tcase_add_test(t, test_cpu_nodes);
	tcase_add_test(t, test_pci_host_node);
	tcase_add_test(t, test_pci_ranges_map_the_mmio_window_and_hold_every_bar);
	tcase_add_test(t, test_interrupt_map_sends_each_inta_to_its_ioapic_pin);
	tcase_add_test(t, test_device_nodes_carry_vectors_ids_and_reg);
	tcase_add_test(t, test_assigned_addresses_match_the_bars);
	tcase_add_test(t, test_intx_mode_device_has_no_vector_count);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(fdt_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
