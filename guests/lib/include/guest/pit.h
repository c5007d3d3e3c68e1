/*
 * The 8254 PIT's channel 2 as a PC wires it (Intel 8254 data sheet; the
 * PC/AT system control port B at 0x61: bit 0 gates channel 2, bit 1 drives
 * the speaker, bit 5 reads channel 2's OUT). Header only; port I/O works
 * at CPL 0 and in run_user().
 */
#ifndef GUEST_PIT_H
#define GUEST_PIT_H

#define PIT_HZ	       1193182u /* 8254 input clock on a PC: 14.31818 MHz / 12 */
#define PIT_CH2	       0x42
#define PIT_CMD	       0x43 /* control word: 0xb0 = counter 2, LSB then MSB, mode 0, binary */
#define PORT_B	       0x61
#define PORT_B_GATE2   0x01
#define PORT_B_SPEAKER 0x02
#define PORT_B_OUT2    0x20

#endif
