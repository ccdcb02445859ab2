/* launch.c — the driver's side of remote workers (launch.h): the listening socket, the
 * secret, the tokens awaited, and the handshake that hands each authenticated connection
 * to the pool that started its worker. Slurm itself is launch_slurm.c. */
#define _GNU_SOURCE
#include "launch_int.h"

#include "orch_error.h"
#include "sha256.h"
#include "support.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

/* How long a connection may take to prove itself before it is closed. */
#define AUTH_WAIT_MS 10000
/* Connections waiting to prove themselves, at most; more are closed at once, so that a
 * flood of strangers cannot take the driver's descriptors. */
#define MAX_PENDING 64
/* An AUTH frame is small: a host name and a step id. Anything announcing more is refused
 * before it is read (no stranger makes the driver allocate). */
#define AUTH_MAX_BODY 4096
/* How often the scancel processes started by orch_launcher_cancel() are looked for, and how
 * long orch_launcher_free() waits for the last ones before it kills them. */

struct conn {
    orch_launcher *l;
    int fd;
    struct event *ev;
    struct event *timer;
    uint8_t nonce[ORCH_WIRE_NONCE];
    uint8_t in[ORCH_WIRE_HEADER + AUTH_MAX_BODY];
    size_t len;
    char peer[96];
    struct conn *next;
};

struct expect {
    uint64_t token;
    orch_launcher_attach_fn attach;
    void *who;
};

static void on_accept(evutil_socket_t fd, short what, void *arg);
static void conn_free(struct conn *c);

/* ---- set-up -------------------------------------------------------------------- */

/* Splits s into words as a shell would for plain words and quotes ('...', "...", \x), with
 * no expansion. Appends them to l->words. Returns 0, -EINVAL (an open quote), -ENOMEM. */
static int split_words(orch_launcher *l, const char *s)
{
    size_t cap = 0;
    char *word = NULL;
    size_t n = 0;
    int cap_words = l->nwords + 1;
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n')
            p++;
        if (!*p)
            break;
        n = 0;
        char quote = 0;
        for (; *p && (quote || (*p != ' ' && *p != '\t' && *p != '\n')); p++) {
            char c = *p;
            if (quote && c == quote) {
                quote = 0;
                continue;
            }
            if (!quote && (c == '\'' || c == '"')) {
                quote = c;
                continue;
            }
            if (c == '\\' && quote != '\'' && p[1]) {
                c = *++p;
            }
            if (orch__grow_n(&word, &cap, n + 2, 1) < 0)
                goto nomem;
            word[n++] = c;
        }
        if (quote) {
            free(word);
            return orch_error_set(-EINVAL, "--launcher-args: an unclosed %c quote", quote);
        }
        if (orch__grow_n(&word, &cap, n + 1, 1) < 0)
            goto nomem;
        word[n] = '\0';
        if (orch__grow(&l->words, &cap_words, l->nwords + 2, sizeof *l->words) < 0)
            goto nomem;
        if ((l->words[l->nwords] = strdup(word)) == NULL)
            goto nomem;
        l->words[++l->nwords] = NULL;
    }
    free(word);
    return 0;
nomem:
    free(word);
    return -ENOMEM;
}

/* "HOST:PORT", "[V6]:PORT", ":PORT" into host (empty: every address) and port (0 to
 * 65535). */
int orch_launcher__parse_listen(const char *s, char *host, size_t hsz, char *port, size_t psz)
{
    const char *colon = strrchr(s, ':');
    if (colon == NULL || !colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1))
        return orch_error_set(-EINVAL, "--listen %s: expected HOST:PORT", s);
    if (strlen(colon + 1) > 5 || strtoul(colon + 1, NULL, 10) > 65535)
        return orch_error_set(-EINVAL, "--listen %s: the port must be from 0 to 65535", s);
    const char *h = s;
    size_t hl = (size_t)(colon - s);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (hl >= hsz || strlen(colon + 1) >= psz)
        return orch_error_set(-EINVAL, "--listen %s: too long", s);
    memcpy(host, h, hl);
    host[hl] = '\0';
    snprintf(port, psz, "%s", colon + 1);
    return 0;
}

static bool any_address(const char *host)
{
    return !*host || strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0 ||
           strcmp(host, "*") == 0;
}

/* A listening socket at listen_at (NULL: every address, a free port): *fd, and the host
 * part of listen_at in host (empty: every address). */
static int bind_listener(const char *listen_at, char *host, size_t hsz, int *fd_out)
{
    char port[16] = "0";
    int rc;
    *fd_out = -1;
    host[0] = '\0';
    if (listen_at &&
        (rc = orch_launcher__parse_listen(listen_at, host, hsz, port, sizeof port)) < 0)
        return rc;
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int g = getaddrinfo(any_address(host) ? NULL : host, port, &hints, &res);
    if (g != 0)
        return orch_error_set(-EINVAL, "--listen %s: %s", listen_at, gai_strerror(g));
    int err = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 128) == 0) {
            *fd_out = fd;
            break;
        }
        err = errno;
        close(fd);
    }
    freeaddrinfo(res);
    if (*fd_out < 0)
        return orch_error_set(-err, "cannot listen for workers on %s: %s",
                              listen_at ? listen_at : "a free port", strerror(err));
    return 0;
}

int orch_launcher_check_listen(const char *listen_at)
{
    char host[256];
    int fd, rc = bind_listener(listen_at, host, sizeof host, &fd);
    if (rc == 0)
        close(fd);
    return rc;
}

static int open_listener(orch_launcher *l, const char *listen_at)
{
    char host[256];
    int rc = bind_listener(listen_at, host, sizeof host, &l->lfd);
    if (rc < 0)
        return rc;
    struct sockaddr_storage sa;
    socklen_t slen = sizeof sa;
    char pbuf[16];
    if (getsockname(l->lfd, (struct sockaddr *)&sa, &slen) < 0 ||
        getnameinfo((struct sockaddr *)&sa, slen, NULL, 0, pbuf, sizeof pbuf, NI_NUMERICSERV))
        return orch_error_set(-EIO, "cannot read the port workers connect to");
    if (any_address(host) && gethostname(host, sizeof host) < 0)
        return orch_error_set(-errno, "gethostname: %s", strerror(errno));
    host[sizeof host - 1] = '\0';
    snprintf(l->addr, sizeof l->addr, strchr(host, ':') ? "[%s]:%s" : "%s:%s", host, pbuf);
    return 0;
}

/* TCP orch_launcher__keepalive: a worker's node that vanishes (powered off, cut from the
 * network) sends no FIN, and Linux's default orch_launcher__keepalive waits two hours before
 * its first probe. With these, a dead peer is found in about a minute: 30 s idle, then 3 probes
 * 10 s apart; and data left unacknowledged for 120 s ends the connection too (a peer that is
 * alive acks what reaches it even while it does not read, so only a dead one runs into it). The
 * driver then sees its worker lost (a crash, retried) even in the middle of a long batch; the
 * worker sees its driver gone and exits. */
void orch_launcher__keepalive(int fd)
{
    int one = 1, idle = 30, intvl = 10, cnt = 3;
    unsigned user_timeout_ms = 120000;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms);
}

int orch_launcher_new(struct event_base *base, const struct orch_launcher_config *cfg,
                      orch_launcher **out)
{
    *out = NULL;
    if (cfg->kind != ORCH_LAUNCHER_SLURM)
        return orch_error_set(-EINVAL, "orch_launcher_new: only slurm has a launcher");
    orch_launcher *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    l->base = base;
    l->lfd = -1;
    int rc;
    const char *srun = cfg->srun;
    if ((rc = split_words(l, srun && *srun ? srun : "srun")) < 0 ||
        (cfg->args && (rc = split_words(l, cfg->args)) < 0))
        goto fail;
    if ((rc = orch_launcher__resolve_command(l)) < 0)
        goto fail;
    orch_launcher__find_scancel(l);
    if (getrandom(l->secret, sizeof l->secret, 0) != (ssize_t)sizeof l->secret) {
        rc = orch_error_set(-EIO, "cannot make the workers' secret: %s", strerror(errno));
        goto fail;
    }
    char *e = l->secret_env + sprintf(l->secret_env, "%s=", SECRET_ENV);
    for (size_t i = 0; i < sizeof l->secret; i++)
        e += sprintf(e, "%02x", l->secret[i]);
    if (getrandom(&l->next_token, sizeof l->next_token, 0) != (ssize_t)sizeof l->next_token)
        l->next_token = (uint64_t)getpid() << 32;
    if ((rc = open_listener(l, cfg->listen)) < 0)
        goto fail;
    l->ev_accept = event_new(base, l->lfd, EV_READ | EV_PERSIST, on_accept, l);
    l->ev_cancel = evtimer_new(base, orch_launcher__on_cancel_poll, l);
    if (!l->ev_accept || !l->ev_cancel || event_add(l->ev_accept, NULL) < 0) {
        rc = -ENOMEM;
        goto fail;
    }
    *out = l;
    return 0;
fail:
    orch_launcher_free(l);
    return rc;
}

void orch_launcher_free(orch_launcher *l)
{
    if (!l)
        return;
    while (l->conns) {
        struct conn *c = l->conns;
        l->conns = c->next;
        conn_free(c);
    }
    if (l->ev_accept)
        event_free(l->ev_accept);
    orch_launcher__finish_cancels(l);
    if (l->ev_cancel)
        event_free(l->ev_cancel);
    free(l->cancels);
    if (l->lfd >= 0)
        close(l->lfd);
    for (int i = 0; i < l->nwords; i++)
        free(l->words[i]);
    free(l->words);
    free(l->expect);
    explicit_bzero(l->secret, sizeof l->secret);
    explicit_bzero(l->secret_env, sizeof l->secret_env);
    free(l);
}

const char *orch_launcher_address(const orch_launcher *l)
{
    return l->addr;
}

/* ---- tokens -------------------------------------------------------------------- */

int orch_launcher_expect(orch_launcher *l, orch_launcher_attach_fn attach, void *who,
                         uint64_t *token)
{
    if (orch__grow(&l->expect, &l->cap_expect, l->nexpect + 1, sizeof *l->expect) < 0)
        return -ENOMEM;
    uint64_t t = ++l->next_token;
    if (t == 0)
        t = ++l->next_token;
    l->expect[l->nexpect++] = (struct expect){t, attach, who};
    *token = t;
    return 0;
}

void orch_launcher_forget(orch_launcher *l, uint64_t token)
{
    for (int i = 0; i < l->nexpect; i++)
        if (l->expect[i].token == token) {
            l->expect[i] = l->expect[--l->nexpect];
            return;
        }
}

/* ---- the handshake ------------------------------------------------------------- */

static void conn_free(struct conn *c)
{
    if (c->ev)
        event_free(c->ev);
    if (c->timer)
        event_free(c->timer);
    if (c->fd >= 0)
        close(c->fd);
    free(c);
}

static void conn_unlink(struct conn *c)
{
    orch_launcher *l = c->l;
    for (struct conn **p = &l->conns; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            l->nconns--;
            return;
        }
}

/* Closes a connection that did not prove itself, with one line on stderr. */
static void refuse(struct conn *c, const char *why)
{
    fprintf(stderr, "orch: refused a worker connection from %s: %s\n", c->peer, why);
    conn_unlink(c);
    conn_free(c);
}

static void mac_of(const orch_launcher *l, const uint8_t nonce[ORCH_WIRE_NONCE], uint64_t token,
                   unsigned char mac[32])
{
    uint8_t msg[ORCH_WIRE_NONCE + 8];
    memcpy(msg, nonce, ORCH_WIRE_NONCE);
    for (int i = 0; i < 8; i++)
        msg[ORCH_WIRE_NONCE + i] = (uint8_t)(token >> (8 * i));
    orch_hmac_sha256(l->secret, sizeof l->secret, msg, sizeof msg, mac);
}

/* Compares in time that does not depend on where the first difference is. */
static bool same_mac(const uint8_t *a, const uint8_t *b)
{
    unsigned diff = 0;
    for (size_t i = 0; i < ORCH_WIRE_NONCE; i++)
        diff |= (unsigned)(a[i] ^ b[i]);
    return diff == 0;
}

static void on_auth(struct conn *c, const struct orch_wire_frame *f)
{
    orch_launcher *l = c->l;
    struct orch__arena a = {0};
    struct orch_wire_auth au;
    unsigned char want[32];
    if (orch_wire_get_auth(f, &a, &au) < 0) {
        char why[300];
        snprintf(why, sizeof why, "%s", orch_error_detail());
        refuse(c, why);
        goto out;
    }
    mac_of(l, c->nonce, au.token, want);
    if (!same_mac(want, au.mac)) {
        refuse(c, "wrong secret");
        goto out;
    }
    int i = 0;
    while (i < l->nexpect && l->expect[i].token != au.token)
        i++;
    if (i == l->nexpect) {
        /* A worker of ours (it knows the secret) whose start was given up on, its srun
         * ended or being ended: what Slurm still runs for it is not wanted. */
        char target[ORCH_SLURM_ID_MAX];
        if (*au.slurm_job && orch_launcher_cancel(l, au.slurm_job, target) == 0)
            fprintf(stderr,
                    "orch: scancel %s: its worker (step %s) connected after its start "
                    "ended\n",
                    target, au.slurm_job);
        refuse(c, "a token no worker is waiting for (already used, or its start ended)");
        goto out;
    }
    struct expect e = l->expect[i];
    l->expect[i] = l->expect[--l->nexpect];
    int fd = c->fd;
    c->fd = -1;
    conn_unlink(c);
    conn_free(c);
    e.attach(e.who, fd, &au);
out:
    orch__arena_free(&a);
}

static void on_conn_read(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    (void)fd;
    if (what & EV_TIMEOUT) {
        refuse(c, "no proof of the secret in time");
        return;
    }
    ssize_t n = recv(c->fd, c->in + c->len, sizeof c->in - c->len, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        refuse(c, n == 0 ? "closed before it proved itself" : strerror(errno));
        return;
    }
    c->len += (size_t)n;
    struct orch_wire_frame f;
    int rc = orch_wire_next(c->in, c->len, &f);
    if (rc < 0) {
        refuse(c, "not an orch worker (garbage instead of a frame)");
        return;
    }
    if (f.size > 0 && (f.type != ORCH_WIRE_AUTH || f.len > AUTH_MAX_BODY)) {
        char why[128];
        snprintf(why, sizeof why, "a %s frame of %zu bytes where AUTH was due",
                 orch_wire_type_name(f.type), f.len);
        refuse(c, why);
        return;
    }
    if (rc == 0)
        return;
    if (c->len != f.size) {
        refuse(c, "bytes after its AUTH before the driver spoke");
        return;
    }
    on_auth(c, &f);
}

static void on_conn_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    refuse(arg, "no proof of the secret in time");
}

static void describe_peer(const struct sockaddr_storage *sa, socklen_t len, char *buf, size_t n)
{
    char h[64], p[16];
    if (getnameinfo((const struct sockaddr *)sa, len, h, sizeof h, p, sizeof p,
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0)
        snprintf(buf, n, strchr(h, ':') ? "[%s]:%s" : "%s:%s", h, p);
    else
        snprintf(buf, n, "an unknown address");
}

static void on_accept(evutil_socket_t lfd, short what, void *arg)
{
    orch_launcher *l = arg;
    (void)what;
    for (;;) {
        struct sockaddr_storage sa;
        socklen_t slen = sizeof sa;
        int fd = accept4(lfd, (struct sockaddr *)&sa, &slen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return; /* EAGAIN, or an error of one connection: the next event tries again */
        char peer[96];
        describe_peer(&sa, slen, peer, sizeof peer);
        if (l->nconns >= MAX_PENDING) {
            fprintf(stderr,
                    "orch: refused a worker connection from %s: %d others are "
                    "still proving themselves\n",
                    peer, MAX_PENDING);
            close(fd);
            continue;
        }
        struct conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        c->l = l;
        c->fd = fd;
        snprintf(c->peer, sizeof c->peer, "%s", peer);
        orch_launcher__keepalive(fd);
        struct orch_wire_challenge ch = {.version = ORCH_WIRE_VERSION};
        struct orch_wire_buf b = {0};
        struct timeval tv = {AUTH_WAIT_MS / 1000, (AUTH_WAIT_MS % 1000) * 1000};
        c->ev = event_new(l->base, fd, EV_READ | EV_PERSIST, on_conn_read, c);
        c->timer = evtimer_new(l->base, on_conn_timeout, c);
        /* A fresh socket takes a 41-byte frame whole: no partial send to track. */
        if (getrandom(c->nonce, sizeof c->nonce, 0) != (ssize_t)sizeof c->nonce || !c->ev ||
            !c->timer) {
            conn_free(c);
            continue;
        }
        memcpy(ch.nonce, c->nonce, sizeof ch.nonce);
        if (orch_wire_put_challenge(&b, &ch) < 0 ||
            send(fd, b.data, b.len, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)b.len ||
            event_add(c->ev, NULL) < 0 || evtimer_add(c->timer, &tv) < 0) {
            orch_wire_buf_free(&b);
            conn_free(c);
            continue;
        }
        orch_wire_buf_free(&b);
        c->next = l->conns;
        l->conns = c;
        l->nconns++;
    }
}
