/*
 * FUSE protocol 7.31 (Linux include/uapi/linux/fuse.h), the part the test
 * guests speak to a virtio-fs device (virtio 1.2 5.11.6: each request is a
 * device-readable fuse_in_header and arguments, then a device-writable
 * fuse_out_header and the reply).
 */
#ifndef GUEST_FUSE_H
#define GUEST_FUSE_H

#include <stdint.h>

/* The opcodes used. */
#define FUSE_LOOKUP  1
#define FUSE_OPEN    14
#define FUSE_READ    15
#define FUSE_WRITE   16
#define FUSE_RELEASE 18
#define FUSE_INIT    26
#define FUSE_CREATE  35
#define FUSE_ROOT_ID 1

#define O_WRONLY_ 01
#define O_CREAT_  0100
#define O_TRUNC_  01000

struct fuse_in_header {
	uint32_t len, opcode;
	uint64_t unique, nodeid;
	uint32_t uid, gid, pid;
	uint16_t total_extlen, padding;
};

struct fuse_out_header {
	uint32_t len;
	int32_t error;
	uint64_t unique;
};

struct fuse_init_in {
	uint32_t major, minor, max_readahead, flags;
};

struct fuse_init_out {
	uint32_t major, minor, max_readahead, flags;
	uint16_t max_background, congestion_threshold;
	uint32_t max_write, time_gran;
	uint16_t max_pages, map_alignment;
	uint32_t flags2, unused[7];
};

struct fuse_attr {
	uint64_t ino, size, blocks, atime, mtime, ctime;
	uint32_t atimensec, mtimensec, ctimensec, mode, nlink, uid, gid, rdev, blksize, flags;
};

struct fuse_entry_out {
	uint64_t nodeid, generation, entry_valid, attr_valid;
	uint32_t entry_valid_nsec, attr_valid_nsec;
	struct fuse_attr attr;
};

struct fuse_open_in {
	uint32_t flags, open_flags;
};

struct fuse_open_out {
	uint64_t fh;
	uint32_t open_flags, padding;
};

struct fuse_create_in {
	uint32_t flags, mode, umask, open_flags;
};

struct fuse_rw_in { /* fuse_read_in and fuse_write_in have one layout */
	uint64_t fh, offset;
	uint32_t size, rw_flags;
	uint64_t lock_owner;
	uint32_t flags, padding;
};

struct fuse_write_out {
	uint32_t size, padding;
};

#endif
