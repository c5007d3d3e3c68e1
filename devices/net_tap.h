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

#endif
