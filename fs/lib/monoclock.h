/* monoclock — the time of CLOCK_MONOTONIC in nanoseconds, for durations
 * measured within this process (waits, loads): a clock set back neither
 * shortens nor lengthens them. */
#ifndef CKPTFS_MONOCLOCK_H
#define CKPTFS_MONOCLOCK_H

#include <stdint.h>

uint64_t monoclock_ns(void);

#endif
