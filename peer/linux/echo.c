/* /init of the Linux peer of `cargo xtask bench net --peer linux`: a UDP echo on port 7,
 * the peer of Musubi's `udpecho 7`.
 *
 * Debian's kernel builds virtio-net as modules, so this program loads them itself with
 * finit_module (the .ko files come from the same Debian package as the kernel and lie at
 * the root of the initramfs, in dependency order below), gives eth0 the address QEMU's user
 * network hands out by DHCP (10.0.2.15/24) with ioctls, brings it up, and answers every
 * datagram on port 7 with the same bytes, forever. It prints `BENCH echo ready` when bound;
 * xtask ends QEMU when its client is done. Errors print `BENCH error: ...` and power off.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/syscall.h>
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
    set_addr(s, SIOCSIFADDR, "eth0", "10.0.2.15");
    set_addr(s, SIOCSIFNETMASK, "eth0", "255.255.255.0");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    strncpy(ifr.ifr_name, "eth0", IFNAMSIZ - 1);
    if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) fail("SIOCGIFFLAGS");
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0) fail("SIOCSIFFLAGS");
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
