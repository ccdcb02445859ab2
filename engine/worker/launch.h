/* launch.h — workers on other machines (DESIGN §11): the driver's side of `--launcher
 * slurm`.
 *
 * With the local launcher (the default, no orch_launcher at all) a pool starts each worker
 * itself, connected by a socketpair, and the worker maps the job's LMDB (pool.h). With a
 * launcher, a pool starts each worker through the workload manager — `srun` — and the
 * worker connects back to the driver over TCP:
 *
 *   1. The pool asks for a token (orch_launcher_expect) and starts
 *        srun --ntasks=1 --cpus-per-task=C [--gpus=G] --job-name=orch-CALL-T --quiet
 *             [--launcher-args ...] EXE __worker --connect HOST:PORT --token T
 *      with ORCH_WORKER_SECRET=<hex> added to srun's environment, which Slurm passes on to
 *      the step. The secret is in no command line, so `ps` on the node does not show it;
 *      /proc/PID/environ is readable by the job's own user and root only.
 *   2. The worker connects; the launcher sends CHALLENGE (a fresh random nonce); the
 *      worker answers AUTH: its token and HMAC-SHA256(secret, nonce | token), its pid, host
 *      and Slurm step. A wrong mac, an unknown or used token, a frame that is not AUTH, or
 *      no AUTH within AUTH_WAIT_MS: the connection is closed and one line is written to
 *      stderr; nothing else happens (no state of the job is touched, no slot changes).
 *   3. On a good AUTH the connection is handed to the pool that asked for the token
 *      (its `attach` callback), which from then on speaks to it as to a local worker, in
 *      values mode (wire.h): input values travel in batches, output values in reports,
 *      and the pool writes them to LMDB before the report reaches the driver.
 *
 * What the secret protects: the driver's port against strangers (another user on a node, a
 * port scanner) who would otherwise feed it reports. What it does not: the connection is
 * not encrypted, so payload bytes cross the network in the clear, and anyone who can read
 * the job owner's processes' environments (the owner, root) can read the secret. One
 * secret per driver start: a resume makes a new one.
 *
 * srun runs under a guard, `orch __srun-guard` (orch_srun_guard_main), the driver's child:
 * the pool reaps the guard like a local worker's process, and its exit, srun's own status,
 * is the worker's death (a step cancelled by `scancel` or a time limit ends srun). The
 * guard gets SIGTERM when the driver dies (PR_SET_PDEATHSIG) and has srun forward it to
 * the step before it ends the job, saying it again each second until srun ends: srun that
 * is asking for its job can miss one SIGTERM and then wait for ever (seen: a killed
 * driver's srun still waiting 60 s later, under load). The worker itself exits as soon as
 * its connection ends, even in the middle of a batch: no step outlives the driver.
 * (SIGKILL was tried: srun's "shepherd" process then cancels the job, but under load jobs
 * were left RUNNING without a step, measured; with SIGTERM, srun took over 10 s to end
 * once, on a loaded machine under ASan, while Slurm ended its step.)
 */
#ifndef ORCH_LAUNCH_H
#define ORCH_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

struct event_base;

typedef struct orch_launcher orch_launcher;

enum orch_launcher_kind { ORCH_LAUNCHER_LOCAL, ORCH_LAUNCHER_SLURM };

struct orch_launcher_config {
    enum orch_launcher_kind kind; /* SLURM: the only kind that makes a launcher */
    const char *args;             /* --launcher-args, split like a shell's words; or NULL */
    const char *listen;           /* --listen HOST:PORT, HOST:0, or NULL: every address, a
                                   * free port, advertised under this host's name */
    const char *srun;             /* the srun command, split like args; NULL or "": "srun" */
};

/* Opens the listening socket and makes the secret. Returns 0, or a negative error with the
 * detail set: -EINVAL (a bad --listen or --launcher-args), a bind/listen error, -ENOMEM. */
int orch_launcher_new(struct event_base *base, const struct orch_launcher_config *cfg,
                      orch_launcher **out);
/* Whether a launcher could listen at listen_at (--listen; NULL: a free port): its syntax,
 * its port (0 to 65535), and a socket bound there and closed again (a port in use fails).
 * Returns 0, or a negative error with the detail set, as orch_launcher_new would. */
int orch_launcher_check_listen(const char *listen_at);
/* Closes the listening socket and every connection not yet handed over. */
void orch_launcher_free(orch_launcher *l);

/* "HOST:PORT": where workers connect. */
const char *orch_launcher_address(const orch_launcher *l);

/* Called with the authenticated connection (non-blocking, close-on-exec; the callee owns
 * it) of the worker that was given `token`. */
typedef void (*orch_launcher_attach_fn)(void *who, int fd, const struct orch_wire_auth *au);

/* A new token that a worker about to be started will present; attach(who, ...) is called
 * once when it has connected and proved itself. Returns 0 (and *token), or -ENOMEM. */
int orch_launcher_expect(orch_launcher *l, orch_launcher_attach_fn attach, void *who,
                         uint64_t *token);
/* The worker of token will not connect (its process ended first): a connection presenting
 * it later is refused. */
void orch_launcher_forget(orch_launcher *l, uint64_t token);

/* Ends in Slurm what a worker's srun left behind when it died by a signal (kill -9 of srun
 * leaves its job RUNNING with no step, for ever unless the cluster sets InactiveLimit).
 * slurm_job is the worker's "JOBID.STEPID" (its AUTH): the step alone when JOBID is the
 * allocation the driver runs in (SLURM_JOB_ID), else the whole job, which srun made for
 * this worker. Starts `scancel --quiet` (the one beside srun when srun was found by path)
 * and returns at once; the launcher reaps it, and orch_launcher_free() waits for it (at
 * most CANCEL_WAIT_MS), and target says what it cancels. Returns 0, -EINVAL (not digits
 * with at most one dot), -ENOMEM, or the error of starting it with the detail set.
 * An srun that died before its worker connected: orch_launcher_cancel_start(). */
#define ORCH_SLURM_ID_MAX 64
int orch_launcher_cancel(orch_launcher *l, const char *slurm_job,
                         char target[ORCH_SLURM_ID_MAX]);

/* The same for an srun that a signal ended before its worker connected (while its job
 * waited in Slurm's queue, or between its allocation and its step's start): no worker
 * named the job, so it is cancelled by its name, which is this start's own
 * ("orch-CALL-TOKEN", orch_launcher_command): `scancel --quiet --me --name=NAME`, a job
 * that no longer exists (srun died before asking for it) being no error. target is the
 * --name option given. Returns 0, -ENOENT when there is nothing to cancel by name (the
 * driver runs inside an allocation, where srun makes a step and no job; or the
 * --launcher-args name the job themselves, so that the name is no longer one start's),
 * -ENOMEM, or the error of starting scancel. */
#define ORCH_SLURM_NAME_MAX 160
int orch_launcher_cancel_start(orch_launcher *l, const char *call, uint64_t token,
                               char target[ORCH_SLURM_NAME_MAX]);

/* orch_launcher_cancel_start() for a start known by its job's name (the next driver's
 * cancel of a start a stopped one recorded: orch_launcher_job_name()). The same results,
 * and -EINVAL for a name too long. */
int orch_launcher_cancel_name(orch_launcher *l, const char *name,
                              char target[ORCH_SLURM_NAME_MAX]);
/* The Slurm job name of a start: "orch-CALL-TOKEN". */
void orch_launcher_job_name(char *out, size_t size, const char *call, uint64_t token);

/* What a worker needs from the launcher. */
struct orch_launch_request {
    const char *exe;  /* the orch binary, at the same path on every node */
    const char *call; /* the call's name: part of the Slurm job name */
    double cpus;      /* the call's cpus (rounded up, at least 1) */
    double gpus;      /* the call's gpus (rounded up; 0: none asked) */
    uint64_t token;
    const char *guard; /* the orch binary that guards srun (orch_srun_guard_main), or NULL:
                        * srun's command alone */
};

/* The command line (NULL-terminated argv) and environment (environ plus the secret) that
 * start one worker. Both are malloc'd, with their strings, in one block each: free() them.
 * Returns 0 or -ENOMEM. */
int orch_launcher_command(const orch_launcher *l, const struct orch_launch_request *req,
                          char ***argv, char ***envp);

/* `orch __srun-guard SCANCEL NAME SRUN ARGS...`: the driver's child that runs srun as its
 * own child and ends it when told to. srun waiting for its allocation can miss a single
 * SIGTERM (one that comes while it asks for the job, before it waits: it then waits for an
 * allocation that never comes, for ever; seen when a driver was killed under load), so the
 * guard, on a SIGTERM (the driver's death signal, or the pool stopping the worker), sends
 * srun SIGTERM at once and again each second until it ends, SIGKILL after 45 s, and then
 * cancels the job by NAME ("-": not) with SCANCEL, since no driver may be left to do it.
 * srun gets SIGTERM if the guard is killed. kill_after_ms > 0 replaces the 45 s (tests: a
 * shorter patience). Returns srun's exit status (a signal that ended srun is raised again
 * on the guard), 127 when srun cannot be started. */
int orch_srun_guard_main(char *scancel, const char *name, char **srun_argv,
                         int64_t kill_after_ms);

/* The worker's side: connects to addr ("HOST:PORT"), answers the CHALLENGE with the secret
 * of ORCH_WORKER_SECRET (removed from the environment, so that nothing the UDF starts
 * inherits it) and token. Returns the connected socket (blocking), or -1 after writing why
 * to stderr. */
int orch_launch_connect(const char *addr, uint64_t token);

#endif
