/*
 * basics.c: the Linux peer of Musubi's `basics` and `resources` benchmarks.
 *
 * Runs as PID 1 (/init of a tiny initramfs) under QEMU in deterministic mode, where the TSC
 * advances by one per executed instruction, so every figure below is instructions per
 * operation. It prints one line per sample on the console:
 *
 *   BENCH {"peer":"linux","case":"null call","unit":"instructions","per_op":361.2}
 *
 * then `BENCH done`, and powers the machine off. The number of samples per case comes from
 * the kernel command line word `bench_runs=N` (Linux hands unknown `key=value` words to
 * init as environment variables); the default is 5.
 *
 * The spawn+wait case starts /exit (exit.c), a static program that only exits. The
 * case mmap+munmap 4 KiB is the peer of the `resources` benchmark, and the last one, read
 * 512 B of a cached file, of the `agora` benchmark's read hit; neither is of `basics`.
 *
 * Build: musl-gcc -static -O2 -Wall -o basics basics.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/reboot.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

extern char **environ;

#include "bench.h"

/* A case runs `iters` operations and returns the TSC ticks they took. */
typedef uint64_t (*case_fn)(unsigned iters);

static void run_case(const char *name, case_fn fn, unsigned iters, unsigned samples)
{
	fn(iters); /* warm-up: caches, page tables, slabs, the scheduler's state */
	for (unsigned s = 0; s < samples; s++)
		report(name, fn(iters), iters);
}

/* null call: the cheapest system call, getppid, without any libc caching. */
static uint64_t null_call(unsigned iters)
{
	uint64_t t0 = rdtsc();
	for (unsigned i = 0; i < iters; i++)
		syscall(SYS_getppid);
	return rdtsc() - t0;
}

/*
 * yield ping-pong: two processes on CPU 0 take turns through a counter in a shared page.
 * The parent moves it from even to odd, the child from odd to even, and each yields while
 * it is not its turn, so one round trip is one sched_yield by each side (both counted).
 */
struct pingpong {
	volatile uint64_t turn;
	volatile uint64_t stop;
	volatile uint64_t yields;
};

static struct pingpong *pp;
static pid_t pp_child;
static uint64_t pp_yields, pp_rounds; /* inside the measured windows, for the check */

static void wait_turn(uint64_t want)
{
	while (__atomic_load_n(&pp->turn, __ATOMIC_ACQUIRE) != want && !pp->stop) {
		__atomic_fetch_add(&pp->yields, 1, __ATOMIC_RELAXED);
		sched_yield();
	}
}

static void pingpong_child(void)
{
	for (uint64_t t = 1;; t += 2) {
		wait_turn(t);
		if (pp->stop)
			_exit(0);
		__atomic_store_n(&pp->turn, t + 1, __ATOMIC_RELEASE);
	}
}

static uint64_t yield_pingpong(unsigned rounds)
{
	uint64_t base = pp->turn;
	pp->yields = 0;
	uint64_t t0 = rdtsc();
	for (unsigned r = 0; r < rounds; r++) {
		wait_turn(base + 2 * r);
		__atomic_store_n(&pp->turn, base + 2 * r + 1, __ATOMIC_RELEASE);
	}
	wait_turn(base + 2 * rounds);
	uint64_t t = rdtsc() - t0;
	pp_yields += pp->yields;
	pp_rounds += rounds;
	return t;
}

static void pin_to_cpu0(void)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(0, &set);
	if (sched_setaffinity(0, sizeof set, &set) != 0)
		fail("sched_setaffinity");
}

static void pingpong_start(void)
{
	pp = mmap(NULL, sizeof *pp, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (pp == MAP_FAILED)
		fail("mmap shared page");
	pin_to_cpu0(); /* inherited by the child */
	pp_child = fork();
	if (pp_child < 0)
		fail("fork");
	if (pp_child == 0)
		pingpong_child();
	/*
	 * CFS places a new task behind the running one, so the parent's first yields return to
	 * the parent until the child has caught up. Let that happen here, unmeasured and
	 * uncounted: from then on each yield hands the CPU to the other side.
	 */
	yield_pingpong(200);
	pp_yields = pp_rounds = 0;
}

/*
 * Stop the child; warn if the sides did not alternate: a round is 2 yields, and a kernel
 * thread that wakes during a round adds one (allowed for up to 1% of the rounds).
 */
static void pingpong_stop(void)
{
	pp->stop = 1;
	if (waitpid(pp_child, NULL, 0) != pp_child)
		fail("waitpid (ping-pong child)");
	if (pp_yields * 100 > pp_rounds * 201)
		printf("BENCH warning: yield ping-pong: %llu yields in %llu rounds, not 2 per round\n",
		       (unsigned long long)pp_yields, (unsigned long long)pp_rounds);
}

/* spawn+wait: posix_spawn /exit, a static program that only exits, then waitpid. */
static uint64_t spawn_wait(unsigned iters)
{
	char *argv[] = {"/exit", NULL};
	uint64_t t0 = rdtsc();
	for (unsigned i = 0; i < iters; i++) {
		pid_t pid;
		int status, err = posix_spawn(&pid, "/exit", NULL, NULL, argv, environ);
		if (err != 0) {
			errno = err;
			fail("posix_spawn");
		}
		if (waitpid(pid, &status, 0) != pid)
			fail("waitpid");
	}
	return rdtsc() - t0;
}

/*
 * heap grow 4 KiB: move the break up by one page with brk and write one byte of the new
 * page (the fault allocates and zeroes it). The heap is shrunk back after each sample,
 * outside the measurement, so every sample grows the same range.
 */
static uint64_t heap_grow(unsigned iters)
{
	/* Start on a page boundary, so that each step maps exactly the page it touches. */
	uintptr_t start = ((uintptr_t)syscall(SYS_brk, 0) + 4095) & ~(uintptr_t)4095, cur = start;
	if ((uintptr_t)syscall(SYS_brk, start) != start)
		fail("brk (align)");
	uint64_t t0 = rdtsc();
	for (unsigned i = 0; i < iters; i++) {
		uintptr_t next = cur + 4096;
		if ((uintptr_t)syscall(SYS_brk, next) != next)
			fail("brk");
		*(volatile char *)cur = 1;
		cur = next;
	}
	uint64_t t = rdtsc() - t0;
	if ((uintptr_t)syscall(SYS_brk, start) != start)
		fail("brk (shrink)");
	return t;
}

/*
 * mmap+munmap 4 KiB: map one anonymous private read-write page, write one byte of it (the
 * fault allocates and zeroes it), unmap it. Beside Musubi's vregion create, attach, one-byte
 * write, detach and delete in the `resources` benchmark (which labels this case
 * "mmap+write+munmap 4 KiB"); added after the basics cases so that their figures do not move.
 */
static uint64_t mmap_munmap(unsigned iters)
{
	uint64_t t0 = rdtsc();
	for (unsigned i = 0; i < iters; i++) {
		volatile char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			fail("mmap");
		*p = 1;
		if (munmap((void *)p, 4096) != 0)
			fail("munmap");
	}
	return rdtsc() - t0;
}

/*
 * read 512 B, cached file: sequential 512-byte `read`s of a 16 KiB file that was just
 * written and read through (the initramfs's root is in memory: every page is cached), from
 * its start. Beside Musubi's "read hit" in the `agora` benchmark (issue 16: a read that
 * hits the cache at most 1.0x Linux's); added last so that the other figures do not move.
 */
#define CACHED_SIZE (16 * 1024)
#define CACHED_BLOCK 512
static int cached_fd = -1;

static void cached_file_start(void)
{
	static char buf[CACHED_SIZE];
	for (unsigned i = 0; i < CACHED_SIZE; i++)
		buf[i] = (char)(i % 251);
	cached_fd = open("/cached.dat", O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (cached_fd < 0 || write(cached_fd, buf, CACHED_SIZE) != CACHED_SIZE)
		fail("writing /cached.dat");
	if (lseek(cached_fd, 0, SEEK_SET) != 0 || read(cached_fd, buf, CACHED_SIZE) != CACHED_SIZE)
		fail("reading /cached.dat");
}

static uint64_t read_cached(unsigned iters)
{
	char buf[CACHED_BLOCK];
	if (iters * CACHED_BLOCK > CACHED_SIZE || lseek(cached_fd, 0, SEEK_SET) != 0)
		fail("read_cached");
	uint64_t t0 = rdtsc();
	for (unsigned i = 0; i < iters; i++)
		if (read(cached_fd, buf, CACHED_BLOCK) != CACHED_BLOCK)
			fail("read");
	return rdtsc() - t0;
}

int main(void)
{
	if (getpid() != 1) {
		fprintf(stderr, "basics: run me as /init of a Linux guest\n");
		return 1;
	}
	unsigned samples = samples_from_env();
	printf("BENCH start samples=%u\n", samples);

	run_case("null call", null_call, 1000, samples);

	pingpong_start();
	run_case("yield ping-pong", yield_pingpong, 200, samples);
	pingpong_stop();

	run_case("spawn+wait", spawn_wait, 20, samples);
	run_case("heap grow 4 KiB", heap_grow, 256, samples);
	run_case("mmap+munmap 4 KiB", mmap_munmap, 256, samples);
	cached_file_start();
	run_case("read 512 B, cached file", read_cached, 32, samples);

	printf("BENCH done\n");
	fflush(stdout);
	power_off();
}
