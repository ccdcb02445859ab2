/* launch_connect.c — the worker's side of a remote start (launch.h): it connects back to
 * the driver and proves itself with the secret of its environment. */
#define _GNU_SOURCE
#include "launch_int.h"

#include "orch_error.h"
#include "sha256.h"

#include <errno.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int read_exact(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r > 0)
            got += (size_t)r;
        else if (r == 0 || errno != EINTR)
            return -1;
    }
    return 0;
}

static int hex_val(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int orch_launch_connect(const char *addr, uint64_t token)
{
    const char *hex = getenv(SECRET_ENV);
    uint8_t secret[SECRET_BYTES];
    if (!hex || strlen(hex) != 2 * SECRET_BYTES) {
        fprintf(stderr,
                "orch worker: %s is not set (it comes from the driver through srun's "
                "environment: was --export changed in --launcher-args?)\n",
                SECRET_ENV);
        return -1;
    }
    for (size_t i = 0; i < SECRET_BYTES; i++) {
        int hi = hex_val(hex[2 * i]), lo = hex_val(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            fprintf(stderr, "orch worker: %s is not hexadecimal\n", SECRET_ENV);
            return -1;
        }
        secret[i] = (uint8_t)(hi << 4 | lo);
    }
    unsetenv(SECRET_ENV);

    char host[256], port[16];
    if (orch_launcher__parse_listen(addr, host, sizeof host, port, sizeof port) < 0 || !*host) {
        fprintf(stderr, "orch worker: --connect %s: expected HOST:PORT\n", addr);
        return -1;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int g = getaddrinfo(host, port, &hints, &res);
    if (g != 0) {
        fprintf(stderr, "orch worker: cannot find the driver at %s: %s\n", addr,
                gai_strerror(g));
        return -1;
    }
    int fd = -1, err = 0;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
            err = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        fprintf(stderr, "orch worker: cannot connect to the driver at %s: %s\n", addr,
                strerror(err));
        return -1;
    }
    orch_launcher__keepalive(fd);

    uint8_t frame[ORCH_WIRE_HEADER + 4 + ORCH_WIRE_NONCE];
    struct orch_wire_frame f;
    struct orch_wire_challenge ch;
    if (read_exact(fd, frame, sizeof frame) < 0 ||
        orch_wire_next(frame, sizeof frame, &f) != 1 || f.size != sizeof frame ||
        orch_wire_get_challenge(&f, &ch) < 0) {
        fprintf(stderr, "orch worker: the driver at %s did not send its challenge%s%s\n", addr,
                *orch_error_detail() ? ": " : "", orch_error_detail());
        close(fd);
        return -1;
    }
    struct orch_wire_auth au = {.token = token, .pid = (uint32_t)getpid()};
    char me[256] = "", step[64] = "";
    if (gethostname(me, sizeof me) < 0)
        snprintf(me, sizeof me, "?");
    me[sizeof me - 1] = '\0';
    const char *job = getenv("SLURM_JOB_ID"), *st = getenv("SLURM_STEP_ID");
    if (job && *job)
        snprintf(step, sizeof step, "%s%s%s", job, st && *st ? "." : "", st && *st ? st : "");
    au.host = me;
    au.slurm_job = step;
    uint8_t msg[ORCH_WIRE_NONCE + 8];
    memcpy(msg, ch.nonce, ORCH_WIRE_NONCE);
    for (int i = 0; i < 8; i++)
        msg[ORCH_WIRE_NONCE + i] = (uint8_t)(token >> (8 * i));
    orch_hmac_sha256(secret, sizeof secret, msg, sizeof msg, au.mac);
    explicit_bzero(secret, sizeof secret);
    struct orch_wire_buf b = {0};
    size_t off = 0;
    int rc = orch_wire_put_auth(&b, &au);
    while (rc == 0 && off < b.len) {
        ssize_t n = send(fd, b.data + off, b.len - off, MSG_NOSIGNAL);
        if (n > 0)
            off += (size_t)n;
        else if (errno != EINTR)
            rc = -errno;
    }
    orch_wire_buf_free(&b);
    if (rc < 0) {
        fprintf(stderr, "orch worker: cannot answer the driver at %s: %s\n", addr,
                strerror(-rc));
        close(fd);
        return -1;
    }
    return fd;
}
