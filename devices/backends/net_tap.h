/* The tap backend of virtio-net: IFF_TAP | IFF_NO_PI | IFF_VNET_HDR with
 * the 12-byte virtio 1 header (TUNSETVNETHDRSZ), offloads off. */
#ifndef DEVICES_NET_TAP_H
#define DEVICES_NET_TAP_H

#include <stdbool.h>

struct err;

/* Opens (creating if needed) tap `name` (NULL or "": the kernel picks
 * "tapN"); writes the final name into name_out (IFNAMSIZ) and whether it
 * was made now into *created (then it is also brought up). Nonblocking fd. */
int net_tap_open(const char *name, char *name_out, bool *created, struct err *e);
/* The same with `n` queues (IFF_MULTI_QUEUE when n > 1): one nonblocking
 * file per queue into fds[0..n-1], all attached. 0, or -1 with an error
 * (no file left open). */
int net_tap_open_queues(const char *name, unsigned n, int *fds, char *name_out, bool *created,
			struct err *e);
/* Attaches or detaches one queue of a multiqueue tap (TUNSETQUEUE): a
 * detached queue gets no frames and refuses I/O. 0 or -errno. */
int net_tap_attach_queue(int fd, bool attach);

#endif
