/* launch.c — the listening socket, the secret, the handshake of remote workers, and the
 * srun command that starts them (launch.h). */
#define _GNU_SOURCE
#include "launch.h"

#include "orch_error.h"
#include "proc.h"
#include "sha256.h"
#include "support.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* The srun guard (orch_srun_guard_main): once told to end srun, it says so again this
 * often, and kills srun after this long. */
#define GUARD_RESEND_MS 1000
#define GUARD_KILL_AFTER_MS 45000

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
#define CANCEL_POLL_MS 100
#define CANCEL_WAIT_MS 5000
#define SECRET_BYTES 32
#define SECRET_ENV "ORCH_WORKER_SECRET"

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

struct orch_launcher {
    struct event_base *base;
    int lfd;
    struct event *ev_accept;
    char addr[320];
    uint8_t secret[SECRET_BYTES];
    char secret_env[sizeof SECRET_ENV + 2 * SECRET_BYTES + 1];
    char **words; /* srun and the --launcher-args, NULL-terminated */
    char scancel[4096]; /* the one beside srun when srun was found by path, else "scancel" */
    int nwords;
    uint64_t next_token;
    struct expect *expect;
    int nexpect, cap_expect;
    struct conn *conns;
    int nconns;
    pid_t *cancels; /* scancel processes not reaped yet */
    int ncancels, cap_cancels;
    struct event *ev_cancel; /* polls them while there are any */
};

/* ---- set-up ---------------------------------------------------------------------------- */

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

/* "HOST:PORT", "[V6]:PORT", ":PORT" into host (empty: every address) and port. */
static int parse_listen(const char *s, char *host, size_t hsz, char *port, size_t psz)
{
    const char *colon = strrchr(s, ':');
    if (colon == NULL || !colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1))
        return orch_error_set(-EINVAL, "--listen %s: expected HOST:PORT", s);
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

static int open_listener(orch_launcher *l, const char *listen_at)
{
    char host[256] = "", port[16] = "0";
    int rc;
    if (listen_at && (rc = parse_listen(listen_at, host, sizeof host, port, sizeof port)) < 0)
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
            l->lfd = fd;
            break;
        }
        err = errno;
        close(fd);
    }
    freeaddrinfo(res);
    if (l->lfd < 0)
        return orch_error_set(-err, "cannot listen for workers on %s: %s",
                              listen_at ? listen_at : "a free port", strerror(err));
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

static void on_accept(evutil_socket_t fd, short what, void *arg);
static void on_cancel_poll(evutil_socket_t fd, short what, void *arg);

/* TCP keepalive: a worker's node that vanishes (powered off, cut from the network) sends
 * no FIN, and Linux's default keepalive waits two hours before its first probe. With
 * these, a dead peer is found in about a minute: 30 s idle, then 3 probes 10 s apart; and
 * data left unacknowledged for 120 s ends the connection too (a peer that is alive acks
 * what reaches it even while it does not read, so only a dead one runs into it). The driver then sees its
 * worker lost (a crash, retried) even in the middle of a long batch; the worker sees its
 * driver gone and exits. */
static void keepalive(int fd)
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

/* Finds the command (srun) in PATH once, so that each start is an execve of a full path;
 * a missing srun is one clear error at start rather than a worker failing its init. */
static int resolve_command(orch_launcher *l)
{
    const char *cmd = l->words[0];
    if (strchr(cmd, '/')) {
        if (access(cmd, X_OK) == 0)
            return 0;
        return orch_error_set(-errno, "cannot run %s: %s", cmd, strerror(errno));
    }
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        char full[4096];
        if (n > 0 && n + strlen(cmd) + 2 <= sizeof full) {
            snprintf(full, sizeof full, "%.*s/%s", (int)n, p, cmd);
            if (access(full, X_OK) == 0) {
                char *copy = strdup(full);
                if (!copy)
                    return -ENOMEM;
                free(l->words[0]);
                l->words[0] = copy;
                return 0;
            }
        }
        p += n + (p[n] == ':');
    }
    return orch_error_set(-ENOENT, "--launcher slurm: %s is not in PATH (is Slurm's client "
                                   "installed on this machine?)", cmd);
}

/* scancel beside srun when it is there (an srun given by path, a site's own install),
 * else the one in PATH (orch_launcher_cancel). */
static void find_scancel(orch_launcher *l)
{
    snprintf(l->scancel, sizeof l->scancel, "scancel");
    const char *slash = strrchr(l->words[0], '/');
    if (!slash || (size_t)(slash - l->words[0]) + sizeof "/scancel" > sizeof l->scancel)
        return;
    snprintf(l->scancel, sizeof l->scancel, "%.*s/scancel", (int)(slash - l->words[0]),
             l->words[0]);
    if (access(l->scancel, X_OK) != 0)
        snprintf(l->scancel, sizeof l->scancel, "scancel");
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
    const char *srun = cfg->srun ? cfg->srun : getenv("ORCH_SRUN");
    if ((rc = split_words(l, srun && *srun ? srun : "srun")) < 0 ||
        (cfg->args && (rc = split_words(l, cfg->args)) < 0))
        goto fail;
    if ((rc = resolve_command(l)) < 0)
        goto fail;
    find_scancel(l);
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
    l->ev_cancel = evtimer_new(base, on_cancel_poll, l);
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

static void conn_free(struct conn *c);
static void finish_cancels(orch_launcher *l);

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
    finish_cancels(l);
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

/* ---- tokens ---------------------------------------------------------------------------- */

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

/* ---- what a dead srun leaves behind ----------------------------------------------------- */

/* "JOBID" or "JOBID.STEPID", digits only: what a worker's AUTH may name. Anything else is
 * not passed to scancel (it would be read as an option or a job name). */
static bool is_step_id(const char *s)
{
    const char *p = s;
    if (!(*p >= '0' && *p <= '9'))
        return false;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p == '.') {
        if (!(p[1] >= '0' && p[1] <= '9'))
            return false;
        for (p++; *p >= '0' && *p <= '9'; p++)
            ;
    }
    return *p == '\0';
}

/* Reaps those of pids[0 .. *n) that have ended (or are not ours to wait for), keeping the
 * others in pids[0 .. *n). */
static void reap_pids(pid_t *pids, int *n)
{
    for (int i = 0; i < *n;) {
        if (orch_proc_reap(pids[i], false, NULL) == ORCH_PROC_RUNNING)
            i++;
        else
            pids[i] = pids[--*n];
    }
}

/* Waits up to ms for pids[0 .. *n), then kills and reaps the rest: none outlives the
 * caller. */
static void finish_pids(pid_t *pids, int *n, int ms)
{
    for (int waited = 0; *n > 0 && waited < ms; waited += 10) {
        reap_pids(pids, n);
        if (*n > 0)
            orch_clock_sleep_ms(10);
    }
    for (int i = 0; i < *n; i++)
        orch_proc_kill_reap(pids[i], NULL);
    *n = 0;
}

static void reap_cancels(orch_launcher *l)
{
    reap_pids(l->cancels, &l->ncancels);
    if (l->ncancels > 0 && !evtimer_pending(l->ev_cancel, NULL)) {
        struct timeval tv = {0, CANCEL_POLL_MS * 1000};
        (void)evtimer_add(l->ev_cancel, &tv); /* if it fails, the next cancel or free reaps */
    }
}

static void on_cancel_poll(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    reap_cancels(arg);
}

/* Waits up to CANCEL_WAIT_MS for the scancel processes still running, then kills and
 * reaps the rest: none outlives the launcher. */
static void finish_cancels(orch_launcher *l)
{
    finish_pids(l->cancels, &l->ncancels, CANCEL_WAIT_MS);
}

/* Starts `scancel --quiet ARGS...` (args: at most three, NULL-terminated) with stdin and
 * stdout on /dev/null and no signal blocked (the srun guard blocks some). It gets no
 * parent-death signal: a cancel outlives a driver that dies meanwhile. Returns 0 and *pid,
 * or the error of starting it with the detail set (a scancel that cannot be run exits
 * 127). */
static int scancel_start(char *scancel, char *const *args, pid_t *pid)
{
    char *argv[6] = {scancel, "--quiet"};
    for (int i = 0; i < 3 && args[i]; i++)
        argv[2 + i] = args[i];
    struct orch_proc_spec spec = {
        .path = scancel,
        .search = true,
        .argv = argv,
        .nfd = 3,
        .fd = {ORCH_PROC_FD_NULL, ORCH_PROC_FD_NULL, STDERR_FILENO},
        .pgroup = ORCH_PROC_PGROUP_SAME};
    int rc = orch_proc_spawn(&spec, pid);
    return rc == 0 ? 0 : orch_error_set(rc, "cannot start %s: %s", scancel, strerror(-rc));
}

/* Starts scancel (scancel_start) and returns at once; reap_cancels() reaps it. */
static int spawn_scancel(orch_launcher *l, char *const *args)
{
    if (orch__grow(&l->cancels, &l->cap_cancels, l->ncancels + 1, sizeof *l->cancels) < 0)
        return -ENOMEM;
    pid_t pid;
    int rc = scancel_start(l->scancel, args, &pid);
    if (rc < 0)
        return rc;
    l->cancels[l->ncancels++] = pid;
    reap_cancels(l);
    return 0;
}

int orch_launcher_cancel(orch_launcher *l, const char *slurm_job,
                         char target[ORCH_SLURM_ID_MAX])
{
    target[0] = '\0';
    if (!is_step_id(slurm_job) || strlen(slurm_job) >= ORCH_SLURM_ID_MAX)
        return -EINVAL;
    snprintf(target, ORCH_SLURM_ID_MAX, "%s", slurm_job);
    /* A step in the allocation the driver itself runs in: that step only. Otherwise the
     * job is the one srun made for this worker alone, and the job is what is left. */
    size_t jlen = strcspn(target, ".");
    const char *mine = getenv("SLURM_JOB_ID");
    if (!(mine && strlen(mine) == jlen && strncmp(mine, target, jlen) == 0))
        target[jlen] = '\0';
    return spawn_scancel(l, (char *[]){target, NULL});
}

/* Whether the user's --launcher-args name the job themselves (theirs win over ours): the
 * name is then no longer one start's own, and nothing is cancelled by it. */
static bool user_names_job(const orch_launcher *l)
{
    for (int i = 1; i < l->nwords; i++) {
        const char *w = l->words[i];
        if (strncmp(w, "-J", 2) == 0 || strcmp(w, "--job-name") == 0 ||
            strncmp(w, "--job-name=", 11) == 0)
            return true;
    }
    return false;
}

static void job_name(char *out, size_t size, const char *call, uint64_t token)
{
    snprintf(out, size, "orch-%s-%" PRIu64, call, token);
}

int orch_launcher_cancel_start(orch_launcher *l, const char *call, uint64_t token,
                               char target[ORCH_SLURM_NAME_MAX])
{
    target[0] = '\0';
    /* Inside the driver's own allocation srun makes a step, never a job: nothing is left
     * when it dies before its step started. */
    if (getenv("SLURM_JOB_ID") != NULL || user_names_job(l))
        return -ENOENT;
    char name[ORCH_SLURM_NAME_MAX - 8];
    job_name(name, sizeof name, call, token);
    snprintf(target, ORCH_SLURM_NAME_MAX, "--name=%s", name);
    return spawn_scancel(l, (char *[]){"--me", target, NULL});
}

/* ---- the handshake --------------------------------------------------------------------- */

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

static void mac_of(const orch_launcher *l, const uint8_t nonce[ORCH_WIRE_NONCE],
                   uint64_t token, unsigned char mac[32])
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
            fprintf(stderr, "orch: scancel %s: its worker (step %s) connected after its start "
                            "ended\n", target, au.slurm_job);
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

static void describe_peer(const struct sockaddr_storage *sa, socklen_t len, char *buf,
                          size_t n)
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
            fprintf(stderr, "orch: refused a worker connection from %s: %d others are "
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
        keepalive(fd);
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

/* ---- the srun command ------------------------------------------------------------------ */

int orch_launcher_command(const orch_launcher *l, const struct orch_launch_request *req,
                          char ***argv_out, char ***envp_out)
{
    *argv_out = NULL;
    *envp_out = NULL;
    char ours[8][384];
    int n = 0;
    int cpus = (int)(req->cpus + 0.999999), gpus = (int)(req->gpus + 0.999999);
    snprintf(ours[n++], sizeof ours[0], "--ntasks=1");
    snprintf(ours[n++], sizeof ours[0], "--cpus-per-task=%d", cpus < 1 ? 1 : cpus);
    if (gpus > 0)
        snprintf(ours[n++], sizeof ours[0], "--gpus=%d", gpus);
    /* The job's name is this start's own (its token): what cancels the job when srun dies
     * before its worker connected to name it (orch_launcher_cancel_start). */
    char name[ORCH_SLURM_NAME_MAX - 8];
    job_name(name, sizeof name, req->call, req->token);
    snprintf(ours[n++], sizeof ours[0], "--job-name=%s", name);
    snprintf(ours[n++], sizeof ours[0], "--quiet");
    int nafter = 0;
    char after[6][384];
    snprintf(after[nafter++], sizeof after[0], "%s", req->exe);
    snprintf(after[nafter++], sizeof after[0], "__worker");
    snprintf(after[nafter++], sizeof after[0], "--connect");
    snprintf(after[nafter++], sizeof after[0], "%s", l->addr);
    snprintf(after[nafter++], sizeof after[0], "--token");
    snprintf(after[nafter++], sizeof after[0], "%" PRIu64, req->token);

    /* With a guard: orch __srun-guard SCANCEL NAME, then srun's command (the NAME to cancel
     * if the guard has to kill srun, "-" when the job's name is not this start's own). */
    int nguard = 0;
    char guard[4][ORCH_SLURM_NAME_MAX + 4096];
    if (req->guard) {
        snprintf(guard[nguard++], sizeof guard[0], "%s", req->guard);
        snprintf(guard[nguard++], sizeof guard[0], "__srun-guard");
        snprintf(guard[nguard++], sizeof guard[0], "%s", l->scancel);
        snprintf(guard[nguard++], sizeof guard[0], "%s",
                 getenv("SLURM_JOB_ID") != NULL || user_names_job(l) ? "-" : name);
    }
    /* srun, our options, the user's (later options win in srun, so theirs do), then the
     * worker's command. One block: the pointers, then the strings. */
    size_t count = (size_t)nguard + (size_t)l->nwords + (size_t)n + (size_t)nafter + 1;
    size_t bytes = 0;
    for (int i = 0; i < nguard; i++)
        bytes += strlen(guard[i]) + 1;
    for (int i = 0; i < l->nwords; i++)
        bytes += strlen(l->words[i]) + 1;
    for (int i = 0; i < n; i++)
        bytes += strlen(ours[i]) + 1;
    for (int i = 0; i < nafter; i++)
        bytes += strlen(after[i]) + 1;
    char **argv = malloc(count * sizeof *argv + bytes);
    if (!argv)
        return -ENOMEM;
    char *s = (char *)(argv + count);
    size_t k = 0;
#define PUT(str)                                                                              \
    do {                                                                                      \
        argv[k++] = strcpy(s, (str));                                                          \
        s += strlen(s) + 1;                                                                    \
    } while (0)
    for (int i = 0; i < nguard; i++)
        PUT(guard[i]);
    PUT(l->words[0]);
    for (int i = 0; i < n; i++)
        PUT(ours[i]);
    for (int i = 1; i < l->nwords; i++)
        PUT(l->words[i]);
    for (int i = 0; i < nafter; i++)
        PUT(after[i]);
#undef PUT
    argv[k] = NULL;

    size_t ne = 0;
    while (environ[ne])
        ne++;
    char **envp = malloc((ne + 2) * sizeof *envp);
    if (!envp) {
        free(argv);
        return -ENOMEM;
    }
    size_t j = 0;
    for (size_t i = 0; i < ne; i++)
        if (strncmp(environ[i], SECRET_ENV "=", sizeof SECRET_ENV) != 0)
            envp[j++] = environ[i];
    envp[j++] = (char *)l->secret_env;
    envp[j] = NULL;
    *argv_out = argv;
    *envp_out = envp;
    return 0;
}

/* ---- the worker's side ----------------------------------------------------------------- */

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
        fprintf(stderr, "orch worker: %s is not set (it comes from the driver through srun's "
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
    if (parse_listen(addr, host, sizeof host, port, sizeof port) < 0 || !*host) {
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
    keepalive(fd);

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

/* ---- the srun guard -------------------------------------------------------------------- */

/* The exit status of the guard is srun's: its exit code, or the signal that ended it (raised
 * again on the guard itself, without a core). */
static int mirror_status(int st)
{
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    int sig = WTERMSIG(st);
    struct rlimit none = {0, 0};
    (void)setrlimit(RLIMIT_CORE, &none);
    signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    sigprocmask(SIG_UNBLOCK, &one, NULL);
    kill(getpid(), sig);
    return 128 + sig; /* a signal whose default is not to end the process */
}

/* After the guard killed srun: its job may be left RUNNING without a step (as after any
 * kill -9 of srun), and no driver is there to cancel it; cancelled by its name, waiting
 * for scancel as the launcher does (CANCEL_WAIT_MS at most). */
static void guard_cancel(char *scancel, const char *name)
{
    if (strcmp(name, "-") == 0)
        return;
    char opt[ORCH_SLURM_NAME_MAX + 16];
    snprintf(opt, sizeof opt, "--name=%s", name);
    pid_t pid;
    int n = scancel_start(scancel, (char *[]){"--me", opt, NULL}, &pid) == 0;
    finish_pids(&pid, &n, CANCEL_WAIT_MS);
}

int orch_srun_guard_main(char *scancel, const char *name, char **srun_argv)
{
    sigset_t set;
    sigemptyset(&set);
    static const int watched[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD};
    for (size_t i = 0; i < sizeof watched / sizeof *watched; i++)
        sigaddset(&set, watched[i]);
    sigprocmask(SIG_BLOCK, &set, NULL);
    /* srun ends if the guard is killed (SIGKILL of the driver's child): one SIGTERM, as
     * srun had when it was the driver's child itself. */
    struct orch_proc_spec spec = {
        .path = srun_argv[0],
        .search = true,
        .argv = srun_argv,
        .nfd = 3,
        .fd = {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO},
        .deathsig = SIGTERM,
        .pgroup = ORCH_PROC_PGROUP_SAME};
    pid_t pid;
    int rc = orch_proc_spawn(&spec, &pid);
    if (rc < 0) {
        fprintf(stderr, "orch: cannot start %s: %s\n", srun_argv[0], strerror(-rc));
        return 127;
    }
    bool ending = false, killed = false;
    int64_t ending_since = 0, kill_after = GUARD_KILL_AFTER_MS;
    const char *e = getenv("ORCH_SRUN_GUARD_KILL_MS"); /* tests: a shorter patience */
    if (e && atoll(e) > 0)
        kill_after = atoll(e);
    for (;;) {
        struct timespec tick = {GUARD_RESEND_MS / 1000, (GUARD_RESEND_MS % 1000) * 1000000L};
        int sig = ending ? sigtimedwait(&set, NULL, &tick) : sigwaitinfo(&set, NULL);
        int st;
        enum orch_proc_wait r = orch_proc_reap(pid, false, &st);
        if (r == ORCH_PROC_ENDED) {
            if (killed)
                guard_cancel(scancel, name);
            return mirror_status(st);
        }
        if (r == ORCH_PROC_GONE)
            return 127; /* not ours any more: nothing to guard */
        if (sig > 0 && sig != SIGCHLD) {
            /* The driver died (its SIGTERM on the guard's death signal) or stops the worker:
             * srun is told once now, then again each GUARD_RESEND_MS (below). */
            if (!ending)
                ending_since = orch_clock_mono_ms();
            ending = true;
            kill(pid, SIGTERM);
        } else if (sig < 0 && errno == EAGAIN && ending && !killed) {
            if (orch_clock_mono_ms() - ending_since >= kill_after) {
                kill(pid, SIGKILL);
                killed = true;
            } else {
                kill(pid, SIGTERM);
            }
        }
    }
}
