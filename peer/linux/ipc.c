/*
 * ipc.c: the Linux peer of Musubi's `ipc` benchmark (`cargo xtask bench ipc --peer linux`).
 *
 * Runs as PID 1 (/init of its own initramfs) under QEMU in deterministic mode on two vCPUs,
 * where the TSC advances by one per executed instruction (of both vCPUs together), so every
 * figure below is instructions per operation. It prints one line per sample on the console:
 *
 *   BENCH {"peer":"linux","case":"futex ping-pong, 1 CPU","unit":"instructions","per_op":10230.0}
 *
 * then `BENCH done`, and powers the machine off. The number of samples per case comes from
 * the kernel command line word `bench_runs=N` (Linux hands unknown `key=value` words to init
 * as environment variables); the default is 5.
 *
 * Cases (each run once to warm up, then N samples, each the mean over a fixed count):
 *   pipe ping-pong, 1 CPU / 2 CPUs: two processes (fork) pass one byte back and forth
 *     through two pipes; one round trip is a write and a read by each side. "1 CPU": both
 *     pinned to CPU 0 (sched_setaffinity); "2 CPUs": the parent on CPU 0, the child on 1.
 *   futex ping-pong, 1 CPU / 2 CPUs: the same with a word in a MAP_SHARED page and
 *     FUTEX_WAIT / FUTEX_WAKE (shared futexes: the two are processes, as Musubi's client and
 *     server are); one round trip is a wake and a wait by each side.
 *   io_uring NOP, batch K (K = 1, 8, 64): per request, with raw system calls
 *     (io_uring_setup, mmap of the rings, io_uring_enter): K IORING_OP_NOP entries are
 *     queued, one io_uring_enter(K, K, GETEVENTS) submits them and waits for K completions,
 *     and the K completions are reaped from the ring. The figure is per request.
 *
 * Build: musl-gcc -static -O2 -Wall -o ipc ipc.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
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

#include "bench.h"

static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set) != 0)
		fail("sched_setaffinity");
}

/* ---- ping-pong between two processes ---------------------------------------------------- */

/*
 * One ping-pong case: `child_cpu` is where the child runs (the parent is on CPU 0). The
 * parent times `rounds` round trips per sample; the child answers until it is told to stop.
 */
struct pingpong {
	void (*setup)(void);
	void (*parent_round)(void);
	void (*child_loop)(void);
	void (*stop)(void);
};

/* pipes: parent -> child through p2c, back through c2p */
static int p2c[2], c2p[2];

static void pipe_setup(void)
{
	if (pipe(p2c) != 0 || pipe(c2p) != 0)
		fail("pipe");
}

static void pipe_parent_round(void)
{
	char b = 1;
	if (write(p2c[1], &b, 1) != 1 || read(c2p[0], &b, 1) != 1)
		fail("pipe round trip");
}

static void pipe_child_loop(void)
{
	char b;
	for (;;) {
		if (read(p2c[0], &b, 1) != 1)
			_exit(1);
		if (b == 0)
			_exit(0);
		if (write(c2p[1], &b, 1) != 1)
			_exit(1);
	}
}

static void pipe_stop(void)
{
	char b = 0;
	if (write(p2c[1], &b, 1) != 1)
		fail("pipe stop");
	close(p2c[0]);
	close(p2c[1]);
	close(c2p[0]);
	close(c2p[1]);
}

/*
 * futexes: `turn` says whose turn it is: 1 = the child's (the parent has pinged), 0 = the
 * parent's (the child has ponged), 2 = stop. (linux/futex.h's values; musl has no copy.)
 */
#define FUTEX_WAIT 0
#define FUTEX_WAKE 1

static volatile uint32_t *turn;

static long futex(volatile uint32_t *addr, int op, uint32_t val)
{
	return syscall(SYS_futex, addr, op, val, NULL, NULL, 0);
}

static void futex_setup(void)
{
	turn = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (turn == MAP_FAILED)
		fail("mmap shared page");
	*turn = 0;
}

/* Wait until *turn is no longer `from`. */
static void futex_wait_change(uint32_t from)
{
	while (__atomic_load_n(turn, __ATOMIC_ACQUIRE) == from) {
		if (futex(turn, FUTEX_WAIT, from) != 0 && errno != EAGAIN && errno != EINTR)
			fail("futex wait");
	}
}

static void futex_parent_round(void)
{
	__atomic_store_n(turn, 1, __ATOMIC_RELEASE);
	if (futex(turn, FUTEX_WAKE, 1) < 0)
		fail("futex wake");
	futex_wait_change(1);
}

static void futex_child_loop(void)
{
	for (;;) {
		futex_wait_change(0);
		if (__atomic_load_n(turn, __ATOMIC_ACQUIRE) == 2)
			_exit(0);
		__atomic_store_n(turn, 0, __ATOMIC_RELEASE);
		if (futex(turn, FUTEX_WAKE, 1) < 0)
			_exit(1);
	}
}

static void futex_stop(void)
{
	__atomic_store_n(turn, 2, __ATOMIC_RELEASE);
	futex(turn, FUTEX_WAKE, 1);
	munmap((void *)turn, 4096);
}

static void run_pingpong(const char *name, const struct pingpong *pp, int child_cpu,
			 unsigned rounds, unsigned samples)
{
	pin(0);
	pp->setup();
	pid_t child = fork();
	if (child < 0)
		fail("fork");
	if (child == 0) {
		pin(child_cpu);
		pp->child_loop();
		_exit(1);
	}
	/* warm-up: the child reaches its loop, caches and the scheduler settle */
	for (unsigned i = 0; i < rounds; i++)
		pp->parent_round();
	for (unsigned s = 0; s < samples; s++) {
		uint64_t t0 = rdtsc();
		for (unsigned i = 0; i < rounds; i++)
			pp->parent_round();
		report(name, rdtsc() - t0, rounds);
	}
	pp->stop();
	int status;
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail("ping-pong child");
}

/* ---- io_uring, with raw system calls (the ABI of linux/io_uring.h, Linux 6.1) ---------- */

#define IORING_OFF_SQ_RING 0ULL
#define IORING_OFF_CQ_RING 0x8000000ULL
#define IORING_OFF_SQES 0x10000000ULL
#define IORING_FEAT_SINGLE_MMAP (1U << 0)
#define IORING_ENTER_GETEVENTS (1U << 0)
#define IORING_OP_NOP 0

struct io_sqring_offsets {
	uint32_t head, tail, ring_mask, ring_entries, flags, dropped, array, resv1;
	uint64_t resv2;
};

struct io_cqring_offsets {
	uint32_t head, tail, ring_mask, ring_entries, overflow, cqes, flags, resv1;
	uint64_t resv2;
};

struct io_uring_params {
	uint32_t sq_entries, cq_entries, flags, sq_thread_cpu, sq_thread_idle, features, wq_fd;
	uint32_t resv[3];
	struct io_sqring_offsets sq_off;
	struct io_cqring_offsets cq_off;
};

struct io_uring_sqe {
	uint8_t opcode, flags;
	uint16_t ioprio;
	int32_t fd;
	uint64_t off, addr;
	uint32_t len, rw_flags;
	uint64_t user_data;
	uint16_t buf_index, personality;
	int32_t splice_fd_in;
	uint64_t addr3, pad2;
};

struct io_uring_cqe {
	uint64_t user_data;
	int32_t res;
	uint32_t flags;
};

_Static_assert(sizeof(struct io_uring_sqe) == 64, "sqe is 64 bytes");
_Static_assert(sizeof(struct io_uring_params) == 120, "params is 120 bytes");

#define RING_ENTRIES 64

static struct {
	int fd;
	uint32_t *sq_head, *sq_tail, *sq_mask, *sq_array;
	uint32_t *cq_head, *cq_tail, *cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
} ring;

static void uring_setup(void)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof p);
	ring.fd = (int)syscall(__NR_io_uring_setup, RING_ENTRIES, &p);
	if (ring.fd < 0)
		fail("io_uring_setup");
	size_t sq_size = p.sq_off.array + p.sq_entries * sizeof(uint32_t);
	size_t cq_size = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	if (p.features & IORING_FEAT_SINGLE_MMAP) {
		if (cq_size > sq_size)
			sq_size = cq_size;
		cq_size = sq_size;
	}
	uint8_t *sq = mmap(NULL, sq_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
			   ring.fd, IORING_OFF_SQ_RING);
	if (sq == MAP_FAILED)
		fail("mmap SQ ring");
	uint8_t *cq = sq;
	if (!(p.features & IORING_FEAT_SINGLE_MMAP)) {
		cq = mmap(NULL, cq_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
			  ring.fd, IORING_OFF_CQ_RING);
		if (cq == MAP_FAILED)
			fail("mmap CQ ring");
	}
	ring.sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe),
			 PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring.fd,
			 IORING_OFF_SQES);
	if (ring.sqes == MAP_FAILED)
		fail("mmap SQEs");
	ring.sq_head = (uint32_t *)(sq + p.sq_off.head);
	ring.sq_tail = (uint32_t *)(sq + p.sq_off.tail);
	ring.sq_mask = (uint32_t *)(sq + p.sq_off.ring_mask);
	ring.sq_array = (uint32_t *)(sq + p.sq_off.array);
	ring.cq_head = (uint32_t *)(cq + p.cq_off.head);
	ring.cq_tail = (uint32_t *)(cq + p.cq_off.tail);
	ring.cq_mask = (uint32_t *)(cq + p.cq_off.ring_mask);
	ring.cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
}

/* `requests` NOPs (a multiple of k) in rounds of k: queue k, one enter, reap k. */
static uint64_t uring_nops(unsigned k, unsigned requests)
{
	uint64_t t0 = rdtsc();
	for (unsigned r = 0; r < requests / k; r++) {
		uint32_t tail = *ring.sq_tail, mask = *ring.sq_mask;
		for (unsigned i = 0; i < k; i++) {
			uint32_t idx = (tail + i) & mask;
			struct io_uring_sqe *sqe = &ring.sqes[idx];
			memset(sqe, 0, sizeof *sqe);
			sqe->opcode = IORING_OP_NOP;
			sqe->fd = -1;
			sqe->user_data = i;
			ring.sq_array[idx] = idx;
		}
		__atomic_store_n(ring.sq_tail, tail + k, __ATOMIC_RELEASE);
		long n = syscall(__NR_io_uring_enter, ring.fd, k, k, IORING_ENTER_GETEVENTS, NULL, 0);
		if (n != (long)k)
			fail("io_uring_enter");
		uint32_t head = *ring.cq_head;
		uint32_t ctail = __atomic_load_n(ring.cq_tail, __ATOMIC_ACQUIRE);
		if (ctail - head != k)
			fail("io_uring completions");
		for (uint32_t h = head; h != ctail; h++)
			if (ring.cqes[h & *ring.cq_mask].res != 0)
				fail("io_uring NOP result");
		__atomic_store_n(ring.cq_head, ctail, __ATOMIC_RELEASE);
	}
	return rdtsc() - t0;
}

static void run_uring(unsigned k, unsigned requests, unsigned samples)
{
	char name[64];
	snprintf(name, sizeof name, "io_uring NOP, batch %u", k);
	uring_nops(k, requests); /* warm-up */
	for (unsigned s = 0; s < samples; s++)
		report(name, uring_nops(k, requests), requests);
}

int main(void)
{
	if (getpid() != 1) {
		fprintf(stderr, "ipc: run me as /init of a Linux guest\n");
		return 1;
	}
	unsigned samples = samples_from_env();
	printf("BENCH start samples=%u cpus=%ld\n", samples, sysconf(_SC_NPROCESSORS_ONLN));
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		errno = 0;
		fail("the ipc peer needs two CPUs");
	}

	static const struct pingpong pipes = {pipe_setup, pipe_parent_round, pipe_child_loop,
					      pipe_stop};
	static const struct pingpong futexes = {futex_setup, futex_parent_round,
						futex_child_loop, futex_stop};
	run_pingpong("pipe ping-pong, 1 CPU", &pipes, 0, 200, samples);
	run_pingpong("pipe ping-pong, 2 CPUs", &pipes, 1, 200, samples);
	run_pingpong("futex ping-pong, 1 CPU", &futexes, 0, 200, samples);
	run_pingpong("futex ping-pong, 2 CPUs", &futexes, 1, 200, samples);

	pin(0);
	uring_setup();
	run_uring(1, 1024, samples);
	run_uring(8, 1024, samples);
	run_uring(64, 1024, samples);

	printf("BENCH done\n");
	fflush(stdout);
	power_off();
}
