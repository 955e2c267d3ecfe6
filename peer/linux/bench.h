/*
 * bench.h: what every Linux peer /init shares: the instruction-counting clock (under
 * QEMU's -icount the TSC advances by one per instruction), the BENCH line format xtask
 * parses, and powering off (the only way PID 1 may end).
 */
#ifndef MUSUBI_PEER_BENCH_H
#define MUSUBI_PEER_BENCH_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/reboot.h>
#include <termios.h>
#include <unistd.h>

static inline uint64_t rdtsc(void)
{
	uint32_t lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi) : : "memory");
	return ((uint64_t)hi << 32) | lo;
}

/* Flush the console and power off: the only way PID 1 may end. */
static void power_off(void)
{
	tcdrain(STDOUT_FILENO);
	sync();
	reboot(RB_POWER_OFF);
	for (;;)
		pause();
}

static void fail(const char *what)
{
	printf("BENCH error: %s: %s\n", what, strerror(errno));
	fflush(stdout);
	power_off();
}

static void report(const char *name, uint64_t cycles, unsigned iters)
{
	printf("BENCH {\"peer\":\"linux\",\"case\":\"%s\",\"unit\":\"instructions\","
	       "\"per_op\":%.1f}\n",
	       name, (double)cycles / iters);
	fflush(stdout);
}


/* Samples per case: the kernel command-line word `bench_runs=N` (Linux hands unknown words
 * to init as environment variables); 5 by default. */
static unsigned samples_from_env(void)
{
	const char *v = getenv("bench_runs");
	long n = v ? strtol(v, NULL, 10) : 5;
	return n > 0 && n < 10000 ? (unsigned)n : 5;
}

#endif
