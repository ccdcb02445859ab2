/* exec.c — exec("command line"): a persistent external program as a UDF.
 *
 * The adapter is an ordinary struct orch_udf whose state is one child process and two
 * pipes. The wire format is udfs/EXEC_PROTOCOL.md; in short, frames of
 * `tag[4] u64 length body` in both directions: HELO → REDY|IERR once, then BTCH → ANSW|BERR
 * per batch, and end-of-file on the program's stdin to say goodbye.
 *
 * Invariants of a state:
 *   - `to` (the program's stdin, non-blocking on our side) and `from` (its stdout) are open,
 *     `pid` is a live or unreaped child, and so is `keeper`, whose pipe `guard` is open,
 *     unless `broken`;
 *   - once `broken`, the program's group has been killed, the program and the keeper are
 *     reaped, every descriptor is closed, and every run fails at once with `why` (the
 *     worker must be replaced);
 *   - `r` holds bytes read from the program and not yet consumed, from `rpos`.
 *
 * The keeper: no program outlives its worker. `/bin/sh -c` forks the command rather than
 * exec it (dash does, for `python3 x.py`), and the program may start processes of its own;
 * PR_SET_PDEATHSIG reaches only the direct child (sh), and nothing the worker does can
 * help once it is SIGKILLed (a batch timeout, a hung init, its driver killed with -9, a
 * crash). So each program runs in a process group that is not its own but a keeper's: a
 * second child of the worker, forked without exec, that blocks every signal and waits on a
 * pipe whose one write end (`guard`) only the worker holds. When the worker ends, however
 * it ends, the kernel closes `guard`; the keeper reads end-of-file and SIGKILLs its whole
 * group (the program, what the program started, itself). While the worker lives it kills
 * the group itself (a broken program, fini) with kill(-keeper): the keeper is alive or an
 * unreaped zombie until then, so the group's id cannot have been reused. No process of the
 * group is alive 15 ms after a SIGKILL of its worker or of the driver (measured by polling
 * ps; tests/e2e/init_hang.sh and exec_orphans.sh check it). A process that leaves the group
 * (setsid, setpgid) leaves this guarantee too.
 *
 * Deadlock. While it writes a batch the host also reads whatever the program writes, so
 * neither side can block on a full pipe whatever the program does.
 *
 * SIGPIPE. Writing to a program that exited raises SIGPIPE. The adapter blocks it in the
 * calling thread around its writes and consumes the one it caused, so the worker's signal
 * dispositions are never changed.
 */
#define _GNU_SOURCE /* pipe2, close_range */
#include "udf_int.h"

#include "orch_le.h"
#include "proc.h"
#include "support.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define EXEC_PROTOCOL_VERSION 1
#define FRAME_HEADER 12               /* tag[4] u64 length */
#define FRAME_MAX ((uint64_t)1 << 40) /* a longer frame is garbage, not data */
/* How long a program that closed its stdout may take to exit before it is killed (so that
 * its own exit status can be told), and how long fini waits after closing its stdin. */
#define INIT_GRACE_MS 500
#define FINI_GRACE_MS 5000

struct buf {
    unsigned char *p;
    size_t len, cap;
};

struct exec_state {
    char *cmd;
    pid_t pid;    /* the program (sh): > 0 until reaped */
    pid_t keeper; /* > 0 until reaped; also the program's process group */
    int guard;    /* the keeper waits for end-of-file on this pipe; -1 once closed */
    int to, from; /* -1 once closed */
    bool broken;
    enum orch_udf_op op;
    size_t nin, nout;
    struct buf w;  /* the frame being sent */
    struct buf r;  /* bytes read from the program */
    size_t rpos;   /* first unconsumed byte of r */
    bool eof;      /* the program closed its stdout */
    char why[512]; /* when broken: why */
};

/* ---- buffers -------------------------------------------------------------------------- */

static int buf_reserve(struct buf *b, size_t more)
{
    if (b->cap - b->len >= more) /* the common case, once per field: no call */
        return 0;
    if (more > SIZE_MAX - b->len)
        return -ENOMEM;
    return orch__grow_n(&b->p, &b->cap, b->len + more, 1);
}

static int put(struct buf *b, const void *d, size_t n)
{
    int rc = buf_reserve(b, n);
    if (rc == 0 && n > 0) {
        memcpy(b->p + b->len, d, n);
        b->len += n;
    }
    return rc;
}

static int put_u8(struct buf *b, uint8_t v)
{
    return put(b, &v, 1);
}

static int put_u32(struct buf *b, uint32_t v)
{
    unsigned char p[4];
    orch__le_put32(p, v);
    return put(b, p, 4);
}

static int put_u64(struct buf *b, uint64_t v)
{
    unsigned char p[8];
    orch__le_put64(p, v);
    return put(b, p, 8);
}

static int put_str(struct buf *b, const char *s)
{
    size_t n = s != NULL ? strlen(s) : 0;
    if (n > UINT32_MAX)
        return -EINVAL;
    int rc = put_u32(b, (uint32_t)n);
    return rc < 0 ? rc : put(b, s, n);
}

/* Starts a frame in b (which is emptied); frame_end() fills in its length. */
static int frame_begin(struct buf *b, const char *tag)
{
    b->len = 0;
    int rc = put(b, tag, 4);
    return rc < 0 ? rc : put_u64(b, 0);
}

static void frame_end(struct buf *b)
{
    orch__le_put64(b->p + 4, (uint64_t)(b->len - FRAME_HEADER));
}

/* A read cursor over one frame's body. `bad` is set by any read past the end. */
struct cur {
    const unsigned char *p, *end;
    bool bad;
};

static const unsigned char *get(struct cur *c, uint64_t n)
{
    if (c->bad || n > (uint64_t)(c->end - c->p)) {
        c->bad = true;
        return NULL;
    }
    const unsigned char *at = c->p;
    c->p += n;
    return at;
}

static uint8_t get_u8(struct cur *c)
{
    const unsigned char *p = get(c, 1);
    return p != NULL ? p[0] : 0;
}

static uint32_t get_u32(struct cur *c)
{
    const unsigned char *p = get(c, 4);
    return p != NULL ? orch__le_get32(p) : 0;
}

static uint64_t get_u64(struct cur *c)
{
    const unsigned char *p = get(c, 8);
    return p != NULL ? orch__le_get64(p) : 0;
}

/* A str as a new NUL-terminated string (NULL on a bad cursor or -ENOMEM: *nomem says). */
static char *get_str(struct cur *c, bool *nomem)
{
    uint32_t n = get_u32(c);
    const unsigned char *p = get(c, n);
    if (p == NULL)
        return NULL;
    char *s = strndup((const char *)p, n);
    if (s == NULL)
        *nomem = true;
    return s;
}

/* ---- the child process -------------------------------------------------------------- */

/* Closes the pipes, waits up to grace_ms for the program to exit, then kills its process
 * group (whatever the program left running in it, and the keeper), and reaps the program
 * and the keeper. Writes how the program ended into how (when not NULL). */
static void close_and_reap(struct exec_state *st, long grace_ms, char *how, size_t n)
{
    if (st->to >= 0)
        close(st->to);
    if (st->from >= 0)
        close(st->from);
    st->to = st->from = -1;
    if (how != NULL && n > 0)
        how[0] = '\0';
    int status = ORCH_PROC_STATUS_GONE;
    enum orch_proc_wait w = ORCH_PROC_GONE;
    if (st->pid > 0)
        w = orch_proc_wait_ms(st->pid, grace_ms, &status);
    /* The keeper is not reaped yet, so its group's id is still its own. */
    if (st->keeper > 0)
        kill(-st->keeper, SIGKILL);
    if (w == ORCH_PROC_RUNNING)
        w = orch_proc_kill_reap(st->pid, &status); /* also if it left the group */
    if (st->guard >= 0)
        close(st->guard);
    st->guard = -1;
    if (st->keeper > 0)
        orch_proc_reap(st->keeper, true, NULL);
    st->keeper = 0;
    if (how != NULL && w == ORCH_PROC_ENDED)
        orch_proc_describe(status, true, how, n);
    st->pid = 0;
}

/* Breaks the state: kills and reaps the program, remembers why. grace_ms: how long to
 * let a program that is exiting by itself finish (so that its status can be told). */
static void breakf(struct exec_state *st, long grace_ms, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void breakf(struct exec_state *st, long grace_ms, const char *fmt, ...)
{
    char what[256], how[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    close_and_reap(st, grace_ms, how, sizeof how);
    snprintf(st->why, sizeof st->why, "exec '%s': %s%s%s", st->cmd, what,
             how[0] ? "; the program " : "", how);
    st->broken = true;
}

/* Closes descriptors lo..hi (async-signal-safe). */
static void close_fds(unsigned lo, unsigned hi)
{
    if (lo > hi || close_range(lo, hi, 0) == 0)
        return;
    for (unsigned fd = lo; fd <= hi && fd < 4096; fd++)
        close((int)fd);
}

/* The keeper (see the top of this file), after fork: only async-signal-safe calls. It
 * holds no descriptor but `watch`: the worker's socket above all, whose end-of-file tells
 * the driver that the worker died, and the program's pipes. */
__attribute__((noreturn)) static void keeper_main(int watch)
{
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL); /* a signal to the group must not end it first */
    setpgid(0, 0);
    prctl(PR_SET_NAME, "orch keeper"); /* for ps -o comm: its arguments are the worker's */
    if (watch > 0)
        close_fds(0, (unsigned)watch - 1);
    close_fds((unsigned)watch + 1, ~0U);
    char c;
    while (read(watch, &c, 1) < 0 && errno == EINTR)
        ;
    kill(0, SIGKILL); /* the group: the program, whatever it started, and this process */
    _exit(0);
}

/* Starts the keeper, then the program in the keeper's group. Returns 0 or -errno, with
 * nothing left running. */
static int spawn(struct exec_state *st)
{
    int in[2], out[2], watch[2];
    if (pipe2(in, O_CLOEXEC) < 0)
        return -errno;
    int rc = pipe2(out, O_CLOEXEC) < 0 ? -errno : 0;
    if (rc < 0)
        goto fail_out;
    if (pipe2(watch, O_CLOEXEC) < 0) {
        rc = -errno;
        goto fail_watch;
    }
    pid_t keeper = orch_proc_fork();
    if (keeper < 0) {
        rc = -errno;
        close(watch[0]);
        close(watch[1]);
        goto fail_watch;
    }
    if (keeper == 0)
        keeper_main(watch[0]);
    close(watch[0]);
    st->keeper = keeper;
    st->guard = watch[1];
    /* Also done by the keeper: whichever runs first makes the group before the program
     * joins it. It cannot fail for a child that has not exec'd. */
    if (setpgid(keeper, keeper) < 0) {
        rc = -errno;
        goto fail_proc;
    }
    /* The program: its stdin and stdout are the pipes; it dies with the worker, and its
     * group is the keeper's (outside it nothing would end it with the worker). */
    char *argv[] = {"sh", "-c", st->cmd, NULL};
    struct orch_proc_spec spec = {.path = "/bin/sh",
                                  .argv = argv,
                                  .nfd = 3,
                                  .fd = {in[0], out[1], STDERR_FILENO},
                                  .deathsig = SIGKILL,
                                  .pgroup = keeper};
    if ((rc = orch_proc_spawn(&spec, &st->pid)) < 0) {
        st->pid = 0;
        goto fail_proc;
    }
    close(in[0]);
    close(out[1]);
    st->to = in[1];
    st->from = out[0];
    fcntl(st->to, F_SETFL, fcntl(st->to, F_GETFL) | O_NONBLOCK);
    return 0;

fail_proc:
    close_and_reap(st, 0, NULL, 0); /* kills and reaps the keeper, closes the guard */
fail_watch:
    close(out[0]);
    close(out[1]);
fail_out:
    close(in[0]);
    close(in[1]);
    return rc;
}

/* ---- I/O ------------------------------------------------------------------------------ */

/* Reads what is available from the program into r (blocking once). Sets eof at its end.
 * Returns 0 or -errno. */
static int read_some(struct exec_state *st)
{
    if (st->rpos > 0 && st->rpos == st->r.len)
        st->r.len = st->rpos = 0;
    int rc = buf_reserve(&st->r, 65536);
    if (rc < 0)
        return rc;
    ssize_t n;
    while ((n = read(st->from, st->r.p + st->r.len, st->r.cap - st->r.len)) < 0 &&
           errno == EINTR)
        ;
    if (n < 0)
        return -errno;
    if (n == 0)
        st->eof = true;
    st->r.len += (size_t)n;
    return 0;
}

/* Writes the frame in w, reading the program's output meanwhile. Returns 0, -EPIPE when the
 * program no longer reads its stdin, or -errno. */
static int send_frame(struct exec_state *st)
{
    sigset_t pipe_set, old, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    sigpending(&pending);
    bool was_pending = sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);

    int rc = 0;
    size_t off = 0;
    while (off < st->w.len) {
        struct pollfd pf[2] = {{.fd = st->to, .events = POLLOUT},
                               {.fd = st->from, .events = POLLIN}};
        if (poll(pf, st->eof ? 1 : 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            break;
        }
        if (!st->eof && (pf[1].revents & (POLLIN | POLLHUP | POLLERR)) &&
            (rc = read_some(st)) < 0)
            break;
        if (!(pf[0].revents & (POLLOUT | POLLHUP | POLLERR)))
            continue;
        ssize_t n = write(st->to, st->w.p + off, st->w.len - off);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n < 0) {
            rc = -errno;
            break;
        }
        off += (size_t)n;
    }

    if (rc == -EPIPE && !was_pending) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

/* Makes at least `need` unconsumed bytes available in r. Returns 0, -EPIPE at the end of
 * the program's output, or -errno. */
static int fill(struct exec_state *st, size_t need)
{
    if (st->rpos > 0 && st->r.len - st->rpos < need) {
        memmove(st->r.p, st->r.p + st->rpos, st->r.len - st->rpos);
        st->r.len -= st->rpos;
        st->rpos = 0;
    }
    while (st->r.len - st->rpos < need) {
        if (st->eof)
            return -EPIPE;
        int rc = buf_reserve(&st->r, need - (st->r.len - st->rpos));
        if (rc == 0)
            rc = read_some(st);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Prints a tag for a message: "REDY", or its bytes in hex when they are not printable. */
static void tag_text(const unsigned char *t, char *out, size_t n)
{
    bool printable = true;
    for (int k = 0; k < 4; k++)
        printable = printable && t[k] >= 0x20 && t[k] < 0x7f;
    if (printable)
        snprintf(out, n, "\"%.4s\"", (const char *)t);
    else
        snprintf(out, n, "bytes %02x %02x %02x %02x", t[0], t[1], t[2], t[3]);
}

/* Reads one frame whose tag must be `want1` or `want2`; *tag gets which, *body its body
 * (valid until the next read). On any failure the state is broken (`when` says at which
 * moment, for the message) and -EPIPE / -EPROTO / -errno is returned. */
static int read_frame(struct exec_state *st, const char *want1, const char *want2,
                      const char *want3, const char *when, const char **tag, struct cur *body)
{
    int rc = fill(st, FRAME_HEADER);
    if (rc == 0) {
        const unsigned char *h = st->r.p + st->rpos;
        char seen[32];
        if (memcmp(h, want1, 4) == 0)
            *tag = want1;
        else if (memcmp(h, want2, 4) == 0)
            *tag = want2;
        else if (want3 != NULL && memcmp(h, want3, 4) == 0)
            *tag = want3;
        else {
            tag_text(h, seen, sizeof seen);
            breakf(st, 0, "protocol error %s: expected %s%s%s or %s, got %s", when, want1,
                   want3 ? ", " : "", want3 ? want2 : "", want3 ? want3 : want2, seen);
            return -EPROTO;
        }
        struct cur c = {h + 4, h + FRAME_HEADER, false};
        uint64_t len = get_u64(&c);
        if (len > FRAME_MAX) {
            breakf(st, 0, "protocol error %s: a %s frame of %" PRIu64 " bytes", when, *tag,
                   len);
            return -EPROTO;
        }
        rc = fill(st, FRAME_HEADER + (size_t)len);
        if (rc == 0) {
            body->p = st->r.p + st->rpos + FRAME_HEADER;
            body->end = body->p + len;
            body->bad = false;
            st->rpos += FRAME_HEADER + (size_t)len;
            return 0;
        }
    }
    if (rc == -EPIPE)
        breakf(st, INIT_GRACE_MS, "the program closed its output %s", when);
    else
        breakf(st, 0, "reading from the program %s: %s", when, strerror(-rc));
    return rc;
}

/* ---- init / fini ------------------------------------------------------------------- */

static int send_hello(struct exec_state *st, const struct orch_udf_config *cfg)
{
    struct buf *w = &st->w;
    int rc = frame_begin(w, "HELO");
    rc = rc ? rc : put_u32(w, EXEC_PROTOCOL_VERSION);
    rc = rc ? rc : put_str(w, cfg->call);
    rc = rc ? rc : put_str(w, cfg->function);
    rc = rc ? rc : put_u32(w, (uint32_t)cfg->op);
    rc = rc ? rc : put_u32(w, (uint32_t)cfg->nin);
    rc = rc ? rc : put_u32(w, (uint32_t)cfg->nout);
    rc = rc ? rc : put_u32(w, (uint32_t)cfg->worker);
    rc = rc ? rc : put_u32(w, (uint32_t)cfg->nargs);
    for (size_t k = 0; rc == 0 && k < cfg->nargs; k++) {
        rc = put_str(w, cfg->arg_keys[k]);
        rc = rc ? rc : put_str(w, cfg->arg_values[k]);
    }
    if (rc < 0)
        return rc;
    frame_end(w);
    return send_frame(st);
}

static void exec_free(struct exec_state *st)
{
    free(st->cmd);
    free(st->w.p);
    free(st->r.p);
    free(st);
}

/* Talks HELO/REDY with a freshly spawned program. Returns 0, or an error with the message
 * in cfg->error; the program is reaped in every failure. */
static int handshake(struct exec_state *st, const struct orch_udf_config *cfg)
{
    int rc = send_hello(st, cfg);
    if (rc == -ENOMEM) {
        close_and_reap(st, 0, NULL, 0);
        return orch_udf_config_error(cfg, rc, "exec '%s': out of memory", st->cmd);
    }
    /* A write error (the program exited at once) shows again as the end of its output. */
    const char *tag;
    struct cur c;
    rc = read_frame(st, "REDY", "IERR", NULL, "before it answered the hello", &tag, &c);
    if (rc < 0)
        return orch_udf_config_error(cfg, rc, "%s", st->why);
    if (strcmp(tag, "IERR") == 0) {
        bool nomem = false;
        char *msg = get_str(&c, &nomem);
        close_and_reap(st, FINI_GRACE_MS, NULL, 0);
        rc = orch_udf_config_error(cfg, -EIO, "exec '%s': init failed: %s", st->cmd,
                                   msg != NULL ? msg : "(no message)");
        free(msg);
        return rc;
    }
    uint32_t version = get_u32(&c);
    if (c.bad || c.p != c.end || version != EXEC_PROTOCOL_VERSION) {
        breakf(st, 0, "the program speaks exec protocol version %" PRIu32 ", not %d", version,
               EXEC_PROTOCOL_VERSION);
        return orch_udf_config_error(cfg, -EPROTO, "%s", st->why);
    }
    return 0;
}

static int exec_init(const struct orch_udf_config *cfg, void **state)
{
    if (cfg->function == NULL || cfg->function[0] == '\0')
        return orch_udf_config_error(cfg, -EINVAL, "exec(): the command line is empty");
    if (cfg->nin > UINT32_MAX || cfg->nout > UINT32_MAX || cfg->nargs > UINT32_MAX)
        return orch_udf_config_error(cfg, -EINVAL, "exec(): too many inputs or arguments");
    struct exec_state *st = calloc(1, sizeof *st);
    if (st == NULL || (st->cmd = strdup(cfg->function)) == NULL) {
        free(st);
        return orch_udf_config_error(cfg, -ENOMEM, "exec: out of memory");
    }
    st->to = st->from = st->guard = -1;
    st->op = cfg->op;
    st->nin = cfg->nin;
    st->nout = cfg->nout;
    int rc = spawn(st);
    if (rc < 0) {
        orch_udf_config_error(cfg, rc, "exec '%s': cannot start it: %s", st->cmd,
                              strerror(-rc));
        exec_free(st);
        return rc;
    }
    rc = handshake(st, cfg);
    if (rc < 0) {
        exec_free(st);
        return rc;
    }
    *state = st;
    return 0;
}

static void exec_fini(void *state)
{
    struct exec_state *st = state;
    close_and_reap(st, FINI_GRACE_MS, NULL, 0);
    exec_free(st);
}

/* ---- run ------------------------------------------------------------------------------ */

static int put_batch(struct exec_state *st, const struct orch_udf_batch *batch)
{
    struct buf *w = &st->w;
    if (batch->n > UINT32_MAX)
        return -EINVAL;
    int rc = frame_begin(w, "BTCH");
    rc = rc ? rc : put_u32(w, (uint32_t)batch->n);
    for (size_t i = 0; rc == 0 && i < batch->n; i++) {
        const struct orch_udf_record *r = &batch->rec[i];
        rc = put_u64(w, r->grain_id);
        rc = rc ? rc : put_u32(w, r->generation);
        rc = rc ? rc : put_u32(w, r->attempt);
        for (size_t k = 0; rc == 0 && k < st->nin; k++) {
            const struct orch_udf_input *in = &r->in[k];
            rc = in->n > UINT32_MAX ? -EINVAL : put_u32(w, (uint32_t)in->n);
            for (size_t v = 0; rc == 0 && v < in->n; v++) {
                rc = put_u8(w, in->v[v].present ? 1 : 0);
                if (rc == 0 && in->v[v].present) {
                    rc = put_u64(w, in->v[v].len);
                    rc = rc ? rc : put(w, in->v[v].data, in->v[v].len);
                }
            }
        }
    }
    if (rc == 0)
        frame_end(w);
    return rc;
}

/* Reads `nout` blobs and emits them for record i; *fit becomes -EINVAL on the first value
 * the host refused. Returns -ENOMEM or 0 (a short body shows in c->bad). */
static int take_values(struct exec_state *st, struct orch_udf_batch *batch, size_t i,
                       struct cur *c, int *fit)
{
    for (size_t p = 0; p < st->nout && !c->bad; p++) {
        uint64_t len = get_u64(c);
        const unsigned char *data = get(c, len);
        if (data == NULL)
            break;
        int rc = *fit == 0 ? orch_udf_emit(batch, i, p, data, (size_t)len) : 0;
        if (rc == -ENOMEM)
            return rc;
        if (rc < 0)
            *fit = rc;
    }
    return 0;
}

/* Decodes n children of record i ('C': values only; 'E' and CHLD, `tagged`: each 'v' +
 * values or 'f' + message) and gives them to the host; *fit as in take_values. Returns 0,
 * -ENOMEM, or -EBADMSG with *kind set to an unknown child tag. */
static int take_children(struct exec_state *st, struct orch_udf_batch *batch, size_t i,
                         struct cur *c, uint32_t n, bool tagged, int *fit, uint8_t *kind)
{
    bool nomem = false;
    for (uint32_t k = 0; k < n && !c->bad; k++) {
        uint8_t tag = tagged ? get_u8(c) : 'v';
        int r = 0;
        if (c->bad)
            break;
        if (tag == 'v') {
            r = *fit == 0 ? orch_udf_child(batch, i) : 0;
            if (r == -ENOMEM)
                return r;
            *fit = *fit ? *fit : r;
            if (take_values(st, batch, i, c, fit) == -ENOMEM)
                return -ENOMEM;
        } else if (tag == 'f') {
            char *msg = get_str(c, &nomem);
            if (msg != NULL && *fit == 0)
                *fit = orch_udf_fail_child(batch, i, msg);
            free(msg);
            if (nomem || *fit == -ENOMEM)
                return -ENOMEM;
        } else {
            *kind = tag;
            return -EBADMSG;
        }
    }
    return 0;
}

/* Makes record i a RecordFailure that says its answer does not fit the call. */
static int misfit(struct exec_state *st, struct orch_udf_batch *batch, size_t i, uint8_t kind)
{
    char why[160];
    snprintf(why, sizeof why, "exec: the program answered '%c', which does not fit a %s call",
             kind, orch_udf_op_name(st->op));
    return orch_udf_fail_record(batch, i, why) == -ENOMEM ? -ENOMEM : 0;
}

/* Decodes one answer and gives it to the host. `streamed`: children of the record came in
 * CHLD frames before (1), or were refused there (2: the record failed already). Returns 0,
 * -ENOMEM, or -EPROTO (-EBADMSG: a child of an 'E' answer) with *kind set to the offending
 * kind (child tag) byte. A short body shows in c->bad. */
static int take_answer(struct exec_state *st, struct orch_udf_batch *batch, size_t i,
                       struct cur *c, uint8_t streamed, uint8_t *kind)
{
    int fit = streamed == 2 ? 1 : 0, rc = 0;
    bool nomem = false;
    char *msg = NULL;
    *kind = get_u8(c);
    switch (*kind) {
    case 'V':
        rc = take_values(st, batch, i, c, &fit);
        break;
    case 'C':
    case 'E': { /* children in order; 'E': each made ('v' + values) or failed ('f' + msg) */
        uint32_t n = get_u32(c);
        uint8_t k = *kind;
        rc = take_children(st, batch, i, c, n, k == 'E', &fit, kind);
        if (rc == 0 && n == 0 && !c->bad && streamed == 0)
            fit = orch_udf_no_children(batch, i);
        break;
    }
    case 'K': {
        uint8_t keep = get_u8(c);
        if (!c->bad)
            fit = orch_udf_keep(batch, i, keep != 0);
        break;
    }
    case 'D':
        fit = orch_udf_drop(batch, i);
        break;
    case 'R':
    case 'G':
        msg = get_str(c, &nomem);
        if (msg != NULL)
            fit = *kind == 'R' ? orch_udf_fail_record(batch, i, msg)
                               : orch_udf_fail_group(batch, i, msg);
        free(msg);
        break;
    default:
        return -EPROTO;
    }
    if (rc == -EBADMSG || rc == -ENOMEM)
        return rc;
    if (nomem || fit == -ENOMEM)
        return -ENOMEM;
    if (fit < 0 && !c->bad && streamed != 2)
        return misfit(st, batch, i, *kind);
    return 0;
}

/* Decodes a CHLD frame (u32 record, u32 n, n children as in an 'E' answer): children of
 * a record of the batch, given to the host at once so that they stream. Records go in
 * order: one below the last streamed is a protocol error, and so is any on a call that is
 * not an expand. `streamed` (one byte a record) and *last record which records streamed.
 * Returns 0, -ENOMEM, or -EPROTO with the state broken. */
static int take_chld(struct exec_state *st, struct orch_udf_batch *batch, struct cur *c,
                     uint8_t *streamed, size_t *last)
{
    uint32_t i = get_u32(c), n = get_u32(c);
    if (c->bad) /* truncated: said below, unless record 0 is out of the batch */
        i = n = 0;
    if (st->op != ORCH_UDF_OP_EXPAND && st->op != ORCH_UDF_OP_EXPAND_ALIGNED) {
        breakf(st, 0, "protocol error: children streamed (CHLD) to a %s call",
               orch_udf_op_name(st->op));
        return -EPROTO;
    }
    if (i >= batch->n) {
        breakf(st, 0, "protocol error: CHLD for record %" PRIu32 " of a batch of %zu records",
               i, batch->n);
        return -EPROTO;
    }
    if (*last != SIZE_MAX && i < *last) {
        breakf(st, 0, "protocol error: CHLD for record %" PRIu32 " after record %zu", i, *last);
        return -EPROTO;
    }
    *last = i;
    int fit = streamed[i] == 2 ? 1 : 0, rc;
    uint8_t kind = 0;
    rc = take_children(st, batch, i, c, n, true, &fit, &kind);
    if (rc == -ENOMEM || fit == -ENOMEM)
        return -ENOMEM;
    if (rc == -EBADMSG) {
        breakf(st, 0, "protocol error: unknown child tag 0x%02x in record %" PRIu32, kind, i);
        return -EPROTO;
    }
    if (c->bad || c->p != c->end) {
        breakf(st, 0, "protocol error: the CHLD frame is %s",
               c->bad ? "truncated" : "too long");
        return -EPROTO;
    }
    if (fit < 0 && streamed[i] != 2) {
        streamed[i] = 2;
        return misfit(st, batch, i, 'v');
    }
    if (streamed[i] == 0 && n > 0)
        streamed[i] = 1;
    return 0;
}

static int take_answers(struct exec_state *st, struct orch_udf_batch *batch, struct cur *c,
                        const uint8_t *streamed)
{
    uint32_t n = get_u32(c);
    if (!c->bad && n != batch->n) {
        breakf(st, 0, "protocol error: %" PRIu32 " answers to a batch of %zu records", n,
               batch->n);
        return -EPROTO;
    }
    for (size_t i = 0; i < batch->n && !c->bad; i++) {
        uint8_t kind;
        int rc = take_answer(st, batch, i, c, streamed != NULL ? streamed[i] : 0, &kind);
        if (rc == -ENOMEM)
            return orch_udf_batch_error(batch, rc, "exec '%s': out of memory", st->cmd);
        if (rc == -EPROTO) {
            breakf(st, 0, "protocol error: unknown answer kind 0x%02x for record %zu", kind, i);
            return rc;
        }
        if (rc == -EBADMSG) {
            breakf(st, 0, "protocol error: unknown child tag 0x%02x in record %zu", kind, i);
            return -EPROTO;
        }
    }
    if (c->bad || c->p != c->end) {
        breakf(st, 0, "protocol error: the ANSW frame is %s",
               c->bad ? "truncated" : "too long");
        return -EPROTO;
    }
    return 0;
}

/* Reads the program's reply to the batch just sent (CHLD frames, then ANSW or BERR) and
 * gives its answers to batch as they come. Returns what run returns. */
static int take_reply(struct exec_state *st, struct orch_udf_batch *batch)
{
    const char *tag;
    struct cur c;
    uint8_t *streamed = NULL; /* one byte a record, from the first CHLD on */
    size_t last = SIZE_MAX;
    int rc;
    for (;;) {
        rc = read_frame(st, "ANSW", "BERR", "CHLD", "in the middle of a batch", &tag, &c);
        if (rc < 0 || strcmp(tag, "CHLD") != 0)
            break;
        if (streamed == NULL && (streamed = calloc(batch->n + 1, 1)) == NULL)
            rc = -ENOMEM;
        rc = rc ? rc : take_chld(st, batch, &c, streamed, &last);
        if (rc == -ENOMEM) /* the rest of the reply cannot be read: the program goes */
            breakf(st, 0, "out of memory in the middle of a batch");
        if (rc < 0)
            break;
    }
    if (rc < 0)
        rc = orch_udf_batch_error(batch, rc, "%s", st->why);
    else if (strcmp(tag, "BERR") == 0) {
        bool nomem = false;
        char *msg = get_str(&c, &nomem);
        rc = orch_udf_batch_error(batch, nomem ? -ENOMEM : -EIO, "exec '%s': %s", st->cmd,
                                  msg != NULL ? msg : "the batch failed");
        free(msg);
    } else if ((rc = take_answers(st, batch, &c, streamed)) == -EPROTO)
        rc = orch_udf_batch_error(batch, rc, "%s", st->why);
    free(streamed);
    return rc;
}

static int exec_run(void *state, struct orch_udf_batch *batch)
{
    struct exec_state *st = state;
    if (st->broken)
        return orch_udf_batch_error(batch, -EPIPE, "%s (the worker must be restarted)",
                                    st->why);
    int rc = put_batch(st, batch);
    if (rc < 0)
        return orch_udf_batch_error(batch, rc, "exec '%s': cannot encode the batch: %s",
                                    st->cmd, strerror(-rc));
    rc = send_frame(st);
    if (rc < 0 && rc != -EPIPE) {
        breakf(st, 0, "writing to the program: %s", strerror(-rc));
        return orch_udf_batch_error(batch, rc, "%s", st->why);
    }
    /* On -EPIPE the program is gone or going: reading tells how. */
    return take_reply(st, batch);
}

/* udf_int.h. A state with no program: no descriptors and no process (pid and keeper 0, so
 * that breakf() kills and reaps nothing), whose whole output is already read (eof). */
int orch_udf__exec_take_reply(enum orch_udf_op op, size_t nout, const void *data, size_t len,
                              struct orch_udf_batch *batch)
{
    char cmd[] = "decode";
    struct exec_state st = {
        .cmd = cmd, .guard = -1, .to = -1, .from = -1, .op = op, .nout = nout, .eof = true};
    /* A copy of exactly len bytes, so that a sanitizer sees any read past them. */
    st.r.p = malloc(len > 0 ? len : 1);
    if (st.r.p == NULL)
        return orch_udf_batch_error(batch, -ENOMEM, "exec: out of memory");
    if (len > 0)
        memcpy(st.r.p, data, len);
    st.r.len = st.r.cap = len;
    int rc = take_reply(&st, batch);
    free(st.r.p);
    return rc;
}

const struct orch_udf orch_udf_exec = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "exec",
    .init = exec_init,
    .run = exec_run,
    .fini = exec_fini,
};
