/* pool_frames.c — the frames a worker sends, as the pool takes them (pool_int.h): HELLO,
 * INITFAIL and REPORT checked against the slot's state and the batch it holds, and the
 * non-blocking reads of its socket. */
#define _GNU_SOURCE
#include "pool_int.h"

#include "orch_error.h"
#include "orch_udf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

static void on_hello(orch_worker *w, const struct orch_wire_frame *f)
{
    orch_pool *p = w->pool;
    struct orch_wire_hello h;
    if (orch_wire_get_hello(f, &h) < 0) {
        orch_pool__protocol_error(w, "%s", orch_error_detail());
        return;
    }
    if (w->state != W_STARTING) {
        orch_pool__protocol_error(w, "HELLO from a worker that is already running");
        return;
    }
    if (h.pid != (uint32_t)w->wpid) {
        orch_pool__protocol_error(w, "HELLO says pid %" PRIu32 ", the worker is %d", h.pid,
                                  (int)w->wpid);
        return;
    }
    evtimer_del(w->timer); /* the init timeout */
    orch_pool__set_state(w, W_IDLE);
    p->init_failures = 0;
    p->in_callback++;
    p->cb.idle(p->ctx, p, w);
    p->in_callback--;
}

static void on_initfail(orch_worker *w, const struct orch_wire_frame *f)
{
    struct orch__arena a = {0};
    const char *msg;
    if (orch_wire_get_initfail(f, &a, &msg) < 0) {
        orch_pool__protocol_error(w, "%s", orch_error_detail());
    } else if (w->state != W_STARTING) {
        orch_pool__protocol_error(w, "INITFAIL from a worker that is already running");
    } else {
        /* The worker exits by itself; orch_pool__declare_lost keeps its pid to reap. */
        orch_pool__declare_lost(w, ORCH_LOSS_INIT,
                                *msg ? msg : "init failed without a message");
    }
    orch__arena_free(&a);
}

/* Checks a decoded report against the batch w runs (the first it holds: reports come in
 * the order of the batches) and the call; 0 or -1 after a protocol error. */
static int check_report(orch_worker *w, const struct orch_wire_report *r)
{
    const struct orch_wire_config *c = &w->pool->wcfg;
    const struct held_batch *h = &w->hold[0];
    if (w->state != W_BUSY || w->nhold == 0) {
        orch_pool__protocol_error(
            w, "a report for batch %" PRIu64 " from a worker that holds none", r->batch);
        return -1;
    }
    if (r->batch != h->id) {
        orch_pool__protocol_error(
            w, "a report for batch %" PRIu64 ", the worker runs batch %" PRIu64, r->batch,
            h->id);
        return -1;
    }
    if (r->status != ORCH_WIRE_STATUS_OK)
        return 0; /* no answers to check: the decoder refused any */
    if (r->nrec != h->nrec) {
        orch_pool__protocol_error(
            w, "batch %" PRIu64 " has %" PRIu32 " records, the report %" PRIu32, r->batch,
            h->nrec, r->nrec);
        return -1;
    }
    bool expand = c->op == ORCH_UDF_OP_EXPAND || c->op == ORCH_UDF_OP_EXPAND_ALIGNED;
    for (uint32_t i = 0; i < r->nrec; i++) {
        const struct orch_wire_answer *a = &r->rec[i];
        const char *bad = NULL;
        if (a->grain != h->grain[i].grain || a->generation != h->grain[i].generation)
            bad = "answers another grain";
        else if (a->outcome == ORCH_WIRE_OK && c->op == ORCH_UDF_OP_FILTER)
            bad = "is ok, but a filter answers keep or reject";
        else if ((a->outcome == ORCH_WIRE_KEEP_TRUE || a->outcome == ORCH_WIRE_KEEP_FALSE) &&
                 c->op != ORCH_UDF_OP_FILTER)
            bad = "is keep or reject, but the call is not a filter";
        else if (a->outcome == ORCH_WIRE_OK && a->nout != c->nout)
            bad = "has the wrong number of outputs";
        else if (a->outcome == ORCH_WIRE_OK && !expand && a->nchild != 1)
            bad = "has children, but the call is not an expand";
        else if (a->nfailed > 0 && !expand)
            bad = "has failed children, but the call is not an expand";
        if (bad) {
            orch_pool__protocol_error(
                w, "answer %" PRIu32 " of batch %" PRIu64 " (grain %" PRIu64 ") %s", i,
                r->batch, a->grain, bad);
            return -1;
        }
    }
    return 0;
}

/* The batch w ran was answered: the one queued behind it, if any, runs from now on, and its
 * timeout starts (one that cannot be armed: the worker is killed, its loss reported by
 * the reap, rather than left running without it); else w is IDLE. */
static void batch_answered(orch_worker *w)
{
    orch_pool *p = w->pool;
    evtimer_del(w->timer);
    struct held_batch done = w->hold[0];
    for (int k = 1; k < w->nhold; k++)
        w->hold[k - 1] = w->hold[k];
    w->hold[--w->nhold] = done; /* its allocation is kept for a later batch */
    if (w->nhold == 0) {
        orch_pool__set_state(w, W_IDLE);
        return;
    }
    struct timeval tv = ms_tv(p->timeout_ms);
    if (p->timeout_ms > 0 && evtimer_add(w->timer, &tv) < 0)
        orch_pool__break_worker(w,
                                "the event loop cannot arm a batch's timeout (out of memory?)");
}

static void on_report(orch_worker *w, const struct orch_wire_frame *f)
{
    orch_pool *p = w->pool;
    struct orch__arena a = {0};
    struct orch_wire_report r;
    if (orch_wire_get_report(f, &a, &r) < 0) {
        orch_pool__protocol_error(w, "%s", orch_error_detail());
    } else if (r.values != (p->launcher != NULL)) {
        orch_pool__protocol_error(w, "a report %s values from a %s worker",
                                  r.values ? "with" : "without",
                                  p->launcher ? "remote" : "local");
    } else if (check_report(w, &r) == 0) {
        if (r.values && orch_pool__store_values(w, &a, &r) < 0) {
            orch_pool__protocol_error(w, "no memory to store the values of batch %" PRIu64,
                                      r.batch);
            orch__arena_free(&a);
            return;
        }
        batch_answered(w);
        p->in_callback++;
        p->cb.report(p->ctx, p, w, &r);
        p->in_callback--;
    }
    orch__arena_free(&a);
}

/* Checks a decoded chunk against the batch w holds and the call; 0 or -1 after a
 * protocol error. */
static int check_chunk(orch_worker *w, const struct orch_wire_chunk *c)
{
    const orch_pool *p = w->pool;
    const char *bad = NULL;
    /* The batch that runs: the one ahead, hold[0] (a queued batch has not started). */
    const struct held_batch *h = &w->hold[0];
    uint32_t i = 0;
    while (w->nhold > 0 && i < h->nrec && h->grain[i].grain != c->a.grain)
        i++;
    if (p->cb.chunk == NULL || p->wcfg.op != ORCH_UDF_OP_EXPAND)
        bad = "but the call is not a plain expand";
    else if (c->values != (p->launcher != NULL))
        bad = c->values ? "with values from a local worker"
                        : "without values from a remote worker";
    else if (w->state != W_BUSY || w->nhold == 0 || c->batch != h->id)
        bad = "for a batch the worker does not run";
    else if (i == h->nrec || h->grain[i].generation != c->a.generation)
        bad = "for a grain the batch does not hold";
    else if (c->a.nout != p->wcfg.nout)
        bad = "with the wrong number of outputs";
    if (bad) {
        orch_pool__protocol_error(w, "a chunk of grain %" PRIu64 " in batch %" PRIu64 " %s",
                                  c->a.grain, c->batch, bad);
        return -1;
    }
    return 0;
}

static void on_chunk(orch_worker *w, const struct orch_wire_frame *f)
{
    orch_pool *p = w->pool;
    struct orch__arena a = {0};
    struct orch_wire_chunk c;
    if (orch_wire_get_chunk(f, &a, &c) < 0) {
        orch_pool__protocol_error(w, "%s", orch_error_detail());
    } else if (check_chunk(w, &c) == 0) {
        p->in_callback++;
        p->cb.chunk(p->ctx, p, w, &c);
        p->in_callback--;
    }
    orch__arena_free(&a);
}

/* A MORE: for a fed record of the batch w runs (hold[0]), of a reduce call. */
static void on_more(orch_worker *w, const struct orch_wire_frame *f)
{
    orch_pool *p = w->pool;
    struct orch_wire_more m;
    if (orch_wire_get_more(f, &m) < 0) {
        orch_pool__protocol_error(w, "%s", orch_error_detail());
        return;
    }
    const struct held_batch *h = &w->hold[0];
    uint32_t i = 0;
    while (w->nhold > 0 && i < h->nrec && h->grain[i].grain != m.grain)
        i++;
    if (p->cb.more == NULL || p->wcfg.op != ORCH_UDF_OP_REDUCE || p->launcher != NULL ||
        w->state != W_BUSY || w->nhold == 0 || m.batch != h->id || i == h->nrec) {
        orch_pool__protocol_error(
            w, "a request for inputs of grain %" PRIu64 " in batch %" PRIu64 " it does not run",
            m.grain, m.batch);
        return;
    }
    p->in_callback++;
    p->cb.more(p->ctx, p, w, &m);
    p->in_callback--;
}

void orch_pool_pause(orch_worker *w, bool pause)
{
    if (w->paused == pause || w->ev_read == NULL)
        return;
    w->paused = pause;
    if (pause)
        (void)event_del(w->ev_read); /* fails only for a bad event */
    else if (event_add(w->ev_read, NULL) == 0)
        event_active(w->ev_read, EV_READ, 0); /* the frames already read, first */
    else
        orch_pool__break_worker(w, "the event loop cannot watch its socket (out of memory?)");
}

bool orch_worker_paused(const orch_worker *w)
{
    return w->paused;
}

/* f->type is a known type: orch_wire_next() refuses any other. */
static void on_frame(orch_worker *w, const struct orch_wire_frame *f)
{
    switch ((enum orch_wire_type)f->type) {
    case ORCH_WIRE_HELLO:
        on_hello(w, f);
        break;
    case ORCH_WIRE_INITFAIL:
        on_initfail(w, f);
        break;
    case ORCH_WIRE_REPORT:
        on_report(w, f);
        break;
    case ORCH_WIRE_CHUNK:
        on_chunk(w, f);
        break;
    case ORCH_WIRE_MORE:
        on_more(w, f);
        break;
    case ORCH_WIRE_CONFIG:
    case ORCH_WIRE_BATCH:
    case ORCH_WIRE_INPUTS:
    case ORCH_WIRE_CHALLENGE:
    case ORCH_WIRE_AUTH:
        orch_pool__protocol_error(w, "a worker sent a %s frame", orch_wire_type_name(f->type));
        break;
    }
}

/* Room for n more bytes of input. */
static int in_reserve(orch_worker *w, size_t n)
{
    if (w->in_off > 0 && w->in.cap - w->in.len < n) {
        memmove(w->in.data, w->in.data + w->in_off, w->in.len - w->in_off);
        w->in.len -= w->in_off;
        w->in_off = 0;
    }
    if (n > SIZE_MAX - w->in.len)
        return -ENOMEM;
    return orch__grow_n(&w->in.data, &w->in.cap, w->in.len + n, 1);
}

/* Handles every whole frame in the input. Returns false when the slot's process changed or
 * its socket closed (stop reading). */
static bool handle_frames(orch_worker *w)
{
    uint64_t inc = w->incarnation;
    for (;;) {
        struct orch_wire_frame f;
        int rc = orch_wire_next(w->in.data + w->in_off, w->in.len - w->in_off, &f);
        if (rc < 0) {
            orch_pool__protocol_error(w, "%s", orch_error_detail());
            return false;
        }
        if (rc == 0) {
            if (w->in_off == w->in.len) {
                w->in.len = w->in_off = 0;
                if (w->in.cap > 4 * READ_CHUNK) /* do not keep a big frame's room */
                    orch_wire_buf_free(&w->in);
            }
            /* Make room for the whole frame at once. */
            if (f.size > 0 && in_reserve(w, f.size - (w->in.len - w->in_off)) < 0) {
                orch_pool__protocol_error(w, "no memory for a frame of %zu bytes", f.size);
                return false;
            }
            return true;
        }
        w->in_off += f.size; /* the body stays in place until the next read */
        on_frame(w, &f);
        if (w->incarnation != inc || w->fd < 0 || w->paused)
            return false;
    }
}

/* Reads what the socket holds and handles its frames. Without drain it stops after a few
 * chunks so that one worker cannot hold the loop; with drain it reads to EAGAIN or EOF. */
void orch_pool__read_some(orch_worker *w, bool drain)
{
    for (int round = 0; drain || round < 16; round++) {
        if (in_reserve(w, READ_CHUNK) < 0) {
            orch_pool__protocol_error(w, "no memory to read from the worker");
            return;
        }
        ssize_t n = recv(w->fd, w->in.data + w->in.len, w->in.cap - w->in.len, MSG_DONTWAIT);
        if (n > 0) {
            w->in.len += (size_t)n;
            if (!handle_frames(w))
                return;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        orch_pool__socket_gone(w); /* EOF, ECONNRESET, ... */
        return;
    }
}

void orch_pool__on_read(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    orch_worker *w = arg;
    /* Frames read before a pause (orch_pool_pause) are handled first. */
    if (w->in.len > w->in_off && !handle_frames(w))
        return;
    orch_pool__read_some(w, false);
}
