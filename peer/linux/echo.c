/* /init of the Linux network peers: a UDP echo on port 7, the peer of Musubi's `udpecho 7`
 * (`cargo xtask bench net --peer linux`), or, with `bench_role=ping`, the pinging side of a
 * UDP ping-pong between two Linux guests on one virtual Ethernet, the peer of Musubi's
 * cross-machine round trip (`cargo xtask bench machines --peer linux`).
 *
 * Debian's kernel builds virtio-net as modules, so this program loads them itself with
 * finit_module (the .ko files come from the same Debian package as the kernel and lie at
 * the root of the initramfs, in dependency order below), gives eth0 its address with ioctls
 * and brings it up. The address is the kernel command-line word `bench_addr=A.B.C.D` (Linux
 * hands unknown words to init as environment variables), by default the one QEMU's user
 * network hands out by DHCP (10.0.2.15); the netmask is 255.255.255.0.
 *
 * Echo (the default): answers every datagram on port 7 with the same bytes, forever. It
 * prints `BENCH echo ready` when bound; xtask ends QEMU when its client is done.
 *
 * Ping (`bench_role=ping bench_peer=A.B.C.D bench_count=N bench_size=S`): sends a datagram
 * of S bytes (default 40, an mrpc header) to the peer's port 7 until one comes back (the
 * echo may still be booting; ARP resolves meanwhile; at most 600 tries, 100 ms apart), then
 * N (default 200) datagrams one at a time, each answered before the next, and prints one
 * `BENCH {...}` line per round trip (ns, CLOCK_MONOTONIC) after the last, then `BENCH done`,
 * and powers off. A reply not come within 1 s is counted lost (`BENCH lost N`).
 * Errors print `BENCH error: ...` and power off.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const char *const MODULES[] = {
    "virtio_ring.ko",   "virtio.ko",      "virtio_pci_modern_dev.ko", "virtio_pci_legacy_dev.ko",
    "virtio_pci.ko",    "failover.ko",    "net_failover.ko",          "virtio_net.ko",
};

static void fail(const char *what) {
    printf("BENCH error: %s: %s\n", what, strerror(errno));
    fflush(stdout);
    reboot(RB_POWER_OFF);
    for (;;) pause();
}

static void set_addr(int s, unsigned long req, const char *ifname, const char *addr) {
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
    struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;
    sin->sin_family = AF_INET;
    inet_pton(AF_INET, addr, &sin->sin_addr);
    if (ioctl(s, req, &ifr) < 0) fail(req == SIOCSIFADDR ? "SIOCSIFADDR" : "SIOCSIFNETMASK");
}

static const char *env_or(const char *name, const char *dflt) {
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

static unsigned long number_env(const char *name, unsigned long dflt, unsigned long max) {
    const char *v = getenv(name);
    if (!v) return dflt;
    char *end;
    unsigned long n = strtoul(v, &end, 10);
    return *end == 0 && n >= 1 && n <= max ? n : dflt;
}

static unsigned long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

/* Send `buf` (n bytes, its first 4 the sequence number) and wait for the same sequence to
 * come back; 1 if it did. Replies to earlier, late datagrams are skipped. */
static int round_trip(int s, char *buf, size_t n, unsigned seq) {
    memcpy(buf, &seq, sizeof seq);
    if (send(s, buf, n, 0) < 0) fail("send");
    static char in[2048];
    for (;;) {
        ssize_t got = recv(s, in, sizeof in, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            fail("recv");
        }
        unsigned back;
        if ((size_t)got == n && (memcpy(&back, in, sizeof back), back == seq)) return 1;
    }
}

static void ping(int s) {
    const char *peer = getenv("bench_peer");
    if (!peer) {
        errno = EINVAL;
        fail("bench_role=ping needs bench_peer=A.B.C.D");
    }
    unsigned long count = number_env("bench_count", 200, 100000);
    size_t size = number_env("bench_size", 40, 1472);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(7)};
    if (inet_pton(AF_INET, peer, &to.sin_addr) != 1) {
        errno = EINVAL;
        fail("bench_peer");
    }
    if (connect(s, (struct sockaddr *)&to, sizeof to) < 0) fail("connect");
    struct timeval wait = {.tv_sec = 0, .tv_usec = 100000};
    if (setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait) < 0) fail("SO_RCVTIMEO");
    static char buf[2048];
    memset(buf, 0x5a, sizeof buf);
    unsigned seq = 0;
    int up = 0;
    for (int i = 0; i < 600 && !up; i++) up = round_trip(s, buf, size, ++seq);
    if (!up) {
        errno = ETIMEDOUT;
        fail("the echo never answered");
    }
    wait.tv_sec = 1;
    wait.tv_usec = 0;
    if (setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait) < 0) fail("SO_RCVTIMEO");
    unsigned long long *rtt = calloc(count, sizeof *rtt);
    if (!rtt) fail("calloc");
    unsigned long answered = 0, lost = 0;
    for (unsigned long i = 0; i < count; i++) {
        unsigned long long start = now_ns();
        if (round_trip(s, buf, size, ++seq))
            rtt[answered++] = now_ns() - start;
        else
            lost++;
    }
    for (unsigned long i = 0; i < answered; i++)
        printf("BENCH {\"peer\":\"linux\",\"case\":\"UDP ping-pong, two guests\","
               "\"unit\":\"ns\",\"per_op\":%llu}\n",
               rtt[i]);
    printf("BENCH lost %lu\n", lost);
    printf("BENCH done\n");
    fflush(stdout);
    sync();
    reboot(RB_POWER_OFF);
    for (;;) pause();
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (unsigned i = 0; i < sizeof MODULES / sizeof MODULES[0]; i++) {
        char path[64];
        snprintf(path, sizeof path, "/%s", MODULES[i]);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) fail(path);
        if (syscall(SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST) fail(path);
        close(fd);
    }
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    if (s < 0) fail("socket");
    set_addr(s, SIOCSIFADDR, "eth0", env_or("bench_addr", "10.0.2.15"));
    set_addr(s, SIOCSIFNETMASK, "eth0", "255.255.255.0");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    strncpy(ifr.ifr_name, "eth0", IFNAMSIZ - 1);
    if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) fail("SIOCGIFFLAGS");
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0) fail("SIOCSIFFLAGS");
    if (strcmp(env_or("bench_role", "echo"), "ping") == 0) ping(s);
    struct sockaddr_in me = {.sin_family = AF_INET, .sin_port = htons(7)};
    me.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind(s, (struct sockaddr *)&me, sizeof me) < 0) fail("bind");
    printf("BENCH echo ready\n");
    static char buf[2048];
    for (;;) {
        struct sockaddr_in from;
        socklen_t len = sizeof from;
        ssize_t n = recvfrom(s, buf, sizeof buf, 0, (struct sockaddr *)&from, &len);
        if (n < 0) {
            if (errno == EINTR) continue;
            fail("recvfrom");
        }
        sendto(s, buf, (size_t)n, 0, (struct sockaddr *)&from, len);
    }
}
