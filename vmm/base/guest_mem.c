#include "vmm/base/guest_mem.h"

#include "vmm/base/err.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void guest_mem_layout(struct guest_mem *m, uint8_t *host, uint64_t ram_size)
{
	uint64_t low = ram_size < GUEST_MMIO_HOLE_START ? ram_size : GUEST_MMIO_HOLE_START;
	memset(m, 0, sizeof(*m));
	m->base = host;
	m->fd = -1;
	m->ram_size = ram_size;
	m->regions[0] = (struct guest_region){.gpa = 0, .size = low, .host = host};
	m->nregions = 1;
	if (ram_size > low) {
		m->regions[1] = (struct guest_region){
		    .gpa = GUEST_4G, .size = ram_size - low, .host = host + low};
		m->nregions = 2;
	}
}

/* A memfd of `size` bytes mapped shared: the pages are the file's, so a
 * process given the fd sees the guest's RAM. ftruncate only sizes the file
 * (sparse): pages are allocated as the guest touches them, as before. The
 * fd, or -1 (errno) with nothing left open. */
static int guest_mem_map_memfd(uint64_t size, void **p)
{
	int fd = memfd_create("guest-ram", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)size) < 0) {
		int saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	*p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	if (*p == MAP_FAILED) {
		int saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	return fd;
}

int guest_mem_create(struct guest_mem *m, uint64_t ram_size, bool shared, struct err *e)
{
	void *p = MAP_FAILED;
	if (ram_size == 0 || ram_size > (1ULL << 46))
		return err_set(e, ERR_INPUT, "guest memory size %llu bytes is out of range",
			       (unsigned long long)ram_size);
	int fd = shared ? guest_mem_map_memfd(ram_size, &p) : -1;
	/* Where the host refuses memfds (old kernel, a sandbox) or a memfd
	 * that size, private memory still runs every in-process device. */
	if (fd < 0)
		p = mmap(NULL, ram_size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return err_set(e, ERR_HOST, "cannot map %llu MiB of guest memory: %s",
			       (unsigned long long)(ram_size >> 20), strerror(errno));
	/* Guest RAM is not worth dumping with the VMM, and THP helps the guest
	 * (for a memfd only where shmem_enabled allows it). */
	madvise(p, ram_size, MADV_DONTDUMP);
	madvise(p, ram_size, MADV_HUGEPAGE);
	guest_mem_layout(m, p, ram_size);
	m->owned = true;
	m->fd = fd;
	return 0;
}

void guest_mem_init_with(struct guest_mem *m, void *host, uint64_t ram_size)
{
	guest_mem_layout(m, host, ram_size);
}

void guest_mem_destroy(struct guest_mem *m)
{
	if (m->owned && m->base)
		munmap(m->base, m->ram_size);
	if (m->owned && m->fd >= 0)
		close(m->fd);
	memset(m, 0, sizeof(*m));
	m->fd = -1;
}

void *guest_mem_ptr(const struct guest_mem *m, uint64_t gpa, uint64_t len)
{
	for (int i = 0; i < m->nregions; i++) {
		const struct guest_region *r = &m->regions[i];
		/* Written so that no sum can wrap: gpa >= r->gpa first. */
		if (gpa < r->gpa)
			continue;
		uint64_t off = gpa - r->gpa;
		if (off >= r->size || len > r->size - off)
			continue;
		return r->host + off;
	}
	return NULL;
}

bool guest_mem_is_ram(const struct guest_mem *m, uint64_t gpa, uint64_t len)
{
	return guest_mem_ptr(m, gpa, len) != NULL;
}

int guest_mem_read(const struct guest_mem *m, uint64_t gpa, void *buf, uint64_t len)
{
	void *p = guest_mem_ptr(m, gpa, len);
	if (!p)
		return -EFAULT;
	memcpy(buf, p, len);
	return 0;
}

int guest_mem_write(const struct guest_mem *m, uint64_t gpa, const void *buf, uint64_t len)
{
	void *p = guest_mem_ptr(m, gpa, len);
	if (!p)
		return -EFAULT;
	memcpy(p, buf, len);
	return 0;
}

int guest_mem_share(const struct guest_mem *m, struct guest_mem_share *out, int max)
{
	if (m->fd < 0 || max < m->nregions)
		return 0;
	for (int i = 0; i < m->nregions; i++) {
		const struct guest_region *r = &m->regions[i];
		/* base maps the fd whole from 0, so an offset is a distance. */
		out[i] = (struct guest_mem_share){.gpa = r->gpa,
						  .size = r->size,
						  .host = (uint64_t)(uintptr_t)r->host,
						  .offset = (uint64_t)(r->host - m->base),
						  .fd = m->fd};
	}
	return m->nregions;
}

uint64_t guest_mem_low_end(const struct guest_mem *m)
{
	return m->regions[0].size;
}
