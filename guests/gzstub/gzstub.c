/*
 * The protected-mode part of hello-gz.bzImage. A VMM that boots that image
 * is expected to decompress the gzip payload on the host and enter the ELF
 * inside (shared/notes/kvm-host.md: in-guest decompression is far too slow
 * on our KVM hosts). If this code runs instead, the VMM took the plain
 * bzImage path: say so and fail with a value a test can recognise.
 */
#include "guest/kit.h"

int guest_main(struct boot_params *bp)
{
	(void)bp;
	printf("hello-gz stub: in-guest decompression is not implemented by this test image\n");
	guest_exit(GUEST_EXIT_STUB);
}
