/* launch_int.h — the launcher (launch.h) from the inside: the struct and what its files
 * share. Only engine/worker/launch*.c include it.
 *
 * The files of the launcher:
 *   launch.c          the listening socket, the secret, the tokens awaited, and the
 *                     handshake that hands an authenticated connection to its pool
 *   launch_slurm.c    Slurm: finding srun and scancel, the srun command of a worker, the
 *                     scancel of what a dead srun leaves behind, and the srun guard
 *   launch_connect.c  the worker's side: connecting back and proving itself
 */
#ifndef ORCH_LAUNCH_INT_H
#define ORCH_LAUNCH_INT_H

#include "launch.h"

#include <event2/event.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* How often the scancel processes started by orch_launcher_cancel() are looked for, and how
 * long orch_launcher_free() waits for the last ones before it kills them. */
#define CANCEL_POLL_MS 100
#define CANCEL_WAIT_MS 5000
/* The secret shared with the workers, and the variable of their environment that holds it
 * (hexadecimal). */
#define SECRET_BYTES 32
#define SECRET_ENV "ORCH_WORKER_SECRET"

struct conn;
struct expect;

struct orch_launcher {
    struct event_base *base;
    int lfd;
    struct event *ev_accept;
    char addr[320];
    uint8_t secret[SECRET_BYTES];
    char secret_env[sizeof SECRET_ENV + 2 * SECRET_BYTES + 1];
    char **words;       /* srun and the --launcher-args, NULL-terminated */
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

/* Splits "HOST:PORT" (or "[V6]:PORT") into host and port. 0 or -EINVAL. */
int orch_launcher__parse_listen(const char *s, char *host, size_t hsz, char *port, size_t psz);
/* TCP keepalive on a connection to a worker, so that a node that vanished is noticed. */
void orch_launcher__keepalive(int fd);

/* launch_slurm.c */

/* Finds l->words[0] (srun) in PATH once. 0, or an error with the detail set. */
int orch_launcher__resolve_command(orch_launcher *l);
/* Sets l->scancel: the one beside srun when it is there, else "scancel". */
void orch_launcher__find_scancel(orch_launcher *l);
/* The timer that reaps the scancel processes while there are any. */
void orch_launcher__on_cancel_poll(evutil_socket_t fd, short what, void *arg);
/* Waits up to CANCEL_WAIT_MS for the scancel processes, then kills and reaps the rest. */
void orch_launcher__finish_cancels(orch_launcher *l);

#endif
