/* monoclock — CLOCK_MONOTONIC in nanoseconds; see monoclock.h. */
#include "monoclock.h"

#include <time.h>

uint64_t monoclock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
