/* jobdir.c — creating and opening a job directory (orch_job.h). */
/* renameat2() and RENAME_NOREPLACE */
#define _GNU_SOURCE
#include "orch_job.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "orch_error.h"
#include "orch_facts.h"
#include "orch_lang.h"
#include "source.h"
#include "update.h"

static char *path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* The pid of the process that holds the flock of the open lock file fd: the pid the
 * holder wrote into it, or — when it has not written it yet (a lock race lost to a
 * driver that just took the lock) — the holder the kernel lists in /proc/locks for
 * this file (FLOCK lines name the process that took the lock). 0 when neither says. */
static long lock_holder(int fd)
{
    char buf[32] = "";
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    long pid = strtol(buf, NULL, 10);
    struct stat st;
    FILE *locks;
    if (pid > 0 || fstat(fd, &st) != 0 || !(locks = fopen("/proc/locks", "re")))
        return pid > 0 ? pid : 0;
    char line[256], kind[16], dev[64];
    long holder;
    unsigned long long ino;
    unsigned maj, mnr;
    while (pid == 0 && fgets(line, sizeof line, locks)) {
        /* "1: FLOCK  ADVISORY  WRITE 4242 fe:00:10961005 0 EOF" */
        if (sscanf(line, "%*d: %15s %*s %*s %ld %63s", kind, &holder, dev) == 3 &&
            strcmp(kind, "FLOCK") == 0 && sscanf(dev, "%x:%x:%llu", &maj, &mnr, &ino) == 3 &&
            maj == major(st.st_dev) && mnr == minor(st.st_dev) && ino == st.st_ino)
            pid = holder;
    }
    fclose(locks);
    return pid;
}

/* Takes the driver lock: an flock on JOB/lock, which the kernel releases when the holder
 * dies, so a dead driver never blocks a resume. The holder's pid is written into the file
 * only to name it in the message of a refused second driver. The descriptor is
 * close-on-exec: workers must not inherit (and so prolong) the lock. */
static int lock_take(struct orch_job *job)
{
    char *path = path_join(job->dir, "lock");
    if (!path)
        return -ENOMEM;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        int rc = orch_error_set(-errno, "%s: %s", path, strerror(errno));
        free(path);
        return rc;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        long holder = err == EWOULDBLOCK ? lock_holder(fd) : 0;
        close(fd);
        int rc;
        if (err == EWOULDBLOCK)
            rc = orch_error_set(ORCH_ELOCKED,
                                "%s: job is being run by another orch process (pid %ld)",
                                job->dir, holder);
        else
            rc = orch_error_set(-err, "%s: %s", path, strerror(err));
        free(path);
        return rc;
    }
    free(path);
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
        /* The pid is only for messages; the lock itself is held. */
    }
    job->lock_fd = fd;
    return 0;
}

/* Writes the plan's domains, calls and ports with the plan's indexes as ids. */
int orch_job_write_plan_rows(orch_store *s, const orch_plan *p)
{
    int rc = 0;
    for (int i = 0; i < orch_plan_ndomains(p) && rc == 0; i++) {
        const struct orch_domain *d = orch_plan_domain(p, i);
        rc = orch_store_plan_domain_put(s, i, d->name, d->parent, d->depth);
    }
    for (int i = 0; i < orch_plan_ncalls(p) && rc == 0; i++) {
        const struct orch_call *c = orch_plan_call(p, i);
        const struct orch_stmt *m = c->stmt >= 0 ? orch_plan_stmt(p, c->stmt) : NULL;
        rc = orch_store_plan_call_put(s, i, c->name, m ? orch_op_name(m->op) : NULL,
                                      c->function, m ? m->domain : -1, m ? m->target : -1);
    }
    for (int i = 0; i < orch_plan_nports(p) && rc == 0; i++) {
        const struct orch_port *pt = orch_plan_port(p, i);
        int producer = pt->producer >= 0 ? orch_plan_stmt(p, pt->producer)->call : -1;
        rc = orch_store_plan_port_put(s, i, pt->domain, pt->name, pt->qualified, producer,
                                      pt->output);
    }
    return rc;
}

static int write_source(const char *dest, const char *text, size_t len)
{
    FILE *f = fopen(dest, "wx");
    if (!f || fwrite(text, 1, len, f) != len || fflush(f) != 0 || fsync(fileno(f)) != 0) {
        int rc = orch_error_set(-errno, "%s: %s", dest, strerror(errno));
        if (f)
            fclose(f);
        return rc;
    }
    fclose(f);
    return 0;
}

static void remove_tree(const char *dir)
{
    /* Only what orch_job_create made: the directory is new, so nothing else is in it. */
    const char *names[] = {
        "payloads/data.mdb", "payloads/lock.mdb", "payloads",      "state.db",
        "state.db-wal",      "state.db-shm",      "pipeline.orch", "lock"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *p = path_join(dir, names[i]);
        if (p) {
            if (remove(p) != 0 && errno != ENOENT) {
                /* best effort: a leftover file is reported by the next create */
            }
            free(p);
        }
    }
    rmdir(dir);
}

/* Opens state.db and the payload store. create: a new job (payloads/ is made); otherwise
 * the store must exist: every job gets payloads/ when it is created, so a missing one is
 * a lost store, refused here rather than silently made empty (and a read-only command
 * never creates it). A read-only open opens both read-only; quiet: nobody writes the job
 * while it is open (hold_quiet), so both may be read without the files that even their
 * readers write (LMDB's lock table, SQLite's -shm). */
static int open_stores(struct orch_job *job, int store_flags, bool create, bool quiet)
{
    char *db = path_join(job->dir, "state.db");
    char *pl = path_join(job->dir, "payloads");
    int rc = -ENOMEM;
    if (db && pl) {
        struct orch_payload_opts popts;
        orch_payload_job_opts(&popts);
        popts.no_create = !create;
        popts.readonly = store_flags & ORCH_STORE_READONLY;
        popts.lockless_ok = popts.readonly && quiet;
        if (popts.lockless_ok)
            store_flags |= ORCH_STORE_NO_WRITER;
        rc = orch_store_open(db, store_flags, &job->store);
        if (rc == 0 && (rc = orch_payload_open(pl, &popts, &job->payloads)) == -ENOENT &&
            !create) {
            char why[512]; /* the detail is the buffer that orch_error_set writes */
            snprintf(why, sizeof why, "%s", orch_error_detail());
            rc = orch_error_set(ORCH_EMISMATCH,
                                "%s: the job's payload store is missing (%s): the bytes of "
                                "its items are lost; restore this job's payloads/ or run the "
                                "pipeline again as a new job",
                                pl, why);
        }
    }
    free(db);
    free(pl);
    return rc;
}

/* Refuses to run a job that this process cannot write (resume, retry): each file that a
 * driver writes, checked before anything is, so that the message names what is not
 * writable and what to do instead of the first write's bare "Permission denied". */
static int writable_check(const char *dir)
{
    static const char *const names[] = {
        "",     "state.db", "state.db-wal",      "state.db-shm",
        "lock", "payloads", "payloads/data.mdb", "payloads/lock.mdb"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *path = names[i][0] ? path_join(dir, names[i]) : strdup(dir);
        if (!path)
            return -ENOMEM;
        int rc = 0;
        if (faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) != 0 && errno != ENOENT)
            rc = orch_error_set(-errno,
                                "%s: you cannot run this job: %s is not writable (%s). "
                                "Running a job (resume, retry) writes to its directory: run it "
                                "as a user who can write it, or copy it (cp -a %s COPY) and "
                                "resume the copy; status, export, sql, lineage and failures "
                                "read it as it is",
                                dir, path, strerror(errno), dir);
        free(path);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* For a read-only open of a job directory this process cannot write. Even a reader writes
 * to LMDB's lock table (payloads/lock.mdb) and to SQLite's state.db-shm; without them, it
 * reads safely only while nobody writes the job. So the driver lock is taken shared and
 * held while the job is open: no driver can start meanwhile (a `resume` then says the job
 * is in use), and *quiet is true. When a driver holds the lock now, *quiet is false and
 * *driver its pid: the database is still read through the driver's own -shm file (SQLite
 * supports readers that cannot write it), the payloads cannot be (unwritable_error). A job
 * without a lock file has had no driver that could hold it: *quiet (a driver that starts
 * would have to make the file first). */
static int hold_quiet(struct orch_job *job, bool *quiet, long *driver)
{
    *quiet = false;
    *driver = 0;
    char *path = path_join(job->dir, "lock");
    if (!path)
        return -ENOMEM;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int err = errno;
    free(path);
    if (fd < 0) {
        *quiet = err == ENOENT;
        return 0;
    }
    if (flock(fd, LOCK_SH | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK)
            *driver = lock_holder(fd);
        close(fd);
        return 0;
    }
    job->lock_fd = fd; /* released by orch_job_close */
    *quiet = true;
    return 0;
}

/* The message for a job directory that this process cannot write and could not open
 * read-only (rc, with its detail): why, and what to do. */
static int unwritable_error(const struct orch_job *job, int rc, long driver)
{
    char why[1024];
    snprintf(why, sizeof why, "%s",
             *orch_error_detail() ? orch_error_detail() : orch_strerror(rc));
    struct stat st;
    char *wal = path_join(job->dir, "state.db-wal"), *shm = path_join(job->dir, "state.db-shm");
    bool log_alone =
        wal && shm && stat(wal, &st) == 0 && st.st_size > 32 && stat(shm, &st) != 0;
    free(wal);
    free(shm);
    if (log_alone)
        return orch_error_set(rc,
                              "%s: the job cannot be read from a directory you cannot write: "
                              "state.db-wal holds commits that only a process that can write "
                              "the directory can read (its state.db-shm is missing: a copy "
                              "of a job whose driver was running or was killed). Copy the "
                              "job (cp -a %s COPY) and inspect the copy (%s)",
                              job->dir, job->dir, why);
    if (driver > 0)
        return orch_error_set(rc,
                              "%s: a driver (pid %ld) is running this job, and you cannot "
                              "write its directory: its payloads cannot be read safely while "
                              "it runs (LMDB's readers must write payloads/lock.mdb). Wait "
                              "for the run to end, or ask the job's owner (%s)",
                              job->dir, driver, why);
    return orch_error_set(rc,
                          "%s: the job cannot be read from a directory you cannot write (%s). "
                          "Copy it (cp -a %s COPY) and inspect the copy",
                          job->dir, why, job->dir);
}

/* 16 random bytes as 32 hex digits: the identity shared by a new job and its store. */
static int new_identity(char out[ORCH_PAYLOAD_IDENTITY_MAX])
{
    unsigned char b[16];
    ssize_t n = getrandom(b, sizeof b, 0);
    if (n != (ssize_t)sizeof b)
        return orch_error_set(n < 0 ? -errno : -EIO, "cannot draw a job identity: %s",
                              n < 0 ? strerror(errno) : "short read");
    for (size_t i = 0; i < sizeof b; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    return 0;
}

/* Checks that the payload store is not older than state.db: every payload id a committed
 * item names (job.payload_mark, migrations/0007_payload_mark.sql) must be below the store's
 * next id. A store with the job's identity can still be an older state of itself: a copy
 * of payloads/ restored from before the last run, or a store whose last writes a machine
 * crash undid (`--durability process` never syncs it). It lacks the bytes of the newest
 * items, and would hand out their ids again, to other bytes. A store that is newer than
 * state.db (state.db lost its last commits) is sound: the ids it has that no item names
 * are never read, and are reclaimed. */
static int payloads_current(struct orch_job *job)
{
    uint64_t mark;
    struct orch_payload_stat st;
    int rc = orch_store_payload_mark(job->store, &mark);
    if (rc < 0 || (rc = orch_payload_stat(job->payloads, &st)) < 0)
        return rc;
    if (st.next_id > mark)
        return 0;
    return orch_error_set(ORCH_EMISMATCH,
                          "%s/payloads: this payload store is older than the job's state: "
                          "state.db names payloads up to id %" PRIu64 ", the store holds "
                          "ids below %" PRIu64 " only, so the bytes of the newest items are "
                          "not in it (was an older copy of payloads/ restored, or were its "
                          "last writes lost in a machine crash under --durability "
                          "process?). Restore the newest copy of this job's payloads/, or "
                          "run the pipeline again as a new job",
                          job->dir, mark, st.next_id);
}

/* Checks that the payload store is the job's: state.db and the store hold the same
 * identity (migrations/0004_payload_identity.sql), and it is not older than state.db
 * (payloads_current). Item rows name payloads by ids that only the store's own counter
 * gives meaning to: another store (a lost one made anew, one copied from another job, an
 * older copy of this one) would be read as this job's bytes. Nothing is written on a
 * refusal. A job made before schema 4 has no identity yet: a
 * read-write open adopts the store it finds (the store first, synced, then state.db, so a
 * crash in between leaves a store whose identity the next open adopts); a read-only open
 * has nothing to check it against. */
static int payloads_bind(struct orch_job *job, bool ro)
{
    char want[ORCH_PAYLOAD_IDENTITY_MAX], have[ORCH_PAYLOAD_IDENTITY_MAX];
    int rc = orch_store_job_payload_identity(job->store, want, sizeof want);
    if (rc < 0)
        return rc;
    rc = orch_payload_identity_get(job->payloads, have);
    if (rc == ORCH_ENOTFOUND)
        have[0] = '\0';
    else if (rc < 0)
        return rc;
    if (want[0] != '\0' && strcmp(want, have) == 0)
        return payloads_current(job);
    if (want[0] != '\0')
        return orch_error_set(ORCH_EMISMATCH,
                              "%s/payloads: this payload store is not the job's (identity "
                              "%s, the job expects %s): was payloads/ replaced or restored "
                              "from another copy? Restore this job's own payloads/ or run "
                              "the pipeline again as a new job",
                              job->dir, have[0] ? have : "none", want);
    if ((rc = payloads_current(job)) < 0 || ro)
        return rc;
    if (have[0] == '\0' &&
        ((rc = new_identity(have)) < 0 ||
         (rc = orch_payload_identity_set(job->payloads, have)) < 0 ||
         (rc = orch_payload_sync(job->payloads)) < 0))
        return rc;
    return orch_store_job_set_payload_identity(job->store, have);
}

/* The message for a job directory that exists: it names the live driver when there is
 * one (its lock is held), else points to resume. */
static int exists_error(const char *dir)
{
    char *path = path_join(dir, "lock");
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    free(path);
    if (fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
        long holder = lock_holder(fd);
        close(fd);
        return orch_error_set(-EEXIST,
                              "%s already exists: a job being run by another orch process "
                              "(pid %ld); to start a new job, choose a new directory",
                              dir, holder);
    }
    if (fd >= 0)
        close(fd);
    return orch_error_set(-EEXIST,
                          "%s already exists; to continue that job, run `orch resume %s`; "
                          "to start a new one, choose a new directory",
                          dir, dir);
}

/* Whether dir holds a state.db: what tells an orch job directory from any other. */
static bool has_state_db(const char *dir)
{
    char *db = path_join(dir, "state.db");
    struct stat st;
    bool yes = db && stat(db, &st) == 0;
    free(db);
    return yes;
}

/* Refuses a --job DIR that cannot become a new job, each case with its own message that
 * says what to do; 0 when dir may be created (it does not exist, its parent does). A path
 * that is not a job is worded as everywhere else (orch_job_open, storage/store.c):
 * "PATH: not an orch job (WHY)". */
static int create_target_check(const char *dir)
{
    if (dir[0] == '\0')
        return orch_error_set(-EINVAL, "the job directory is an empty path; give the name of "
                                       "a new directory, e.g. --job my-job");
    const char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : dir;
    if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
        return orch_error_set(-EEXIST,
                              "%s is an existing directory, not a new one: a job is created "
                              "in a new directory; give its name, e.g. --job %s/my-job",
                              dir, dir);
    struct stat st;
    if (lstat(dir, &st) == 0) {
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
            return orch_error_set(-EEXIST,
                                  "%s is a file, not a directory: a job is created in a new "
                                  "directory; choose another name",
                                  dir);
        if (!has_state_db(dir))
            return orch_error_set(-EEXIST,
                                  "%s already exists and is not an orch job (no state.db "
                                  "in it); a new job needs a new directory: choose another "
                                  "name",
                                  dir);
        return exists_error(dir);
    }
    if (!slash || slash == dir)
        return 0; /* the parent is the current directory or / */
    char *parent = strndup(dir, (size_t)(slash - dir));
    if (!parent)
        return -ENOMEM;
    int rc = 0;
    if (stat(parent, &st) != 0)
        rc = errno == ENOENT ? orch_error_set(-ENOENT,
                                              "%s: cannot create the job: its parent "
                                              "directory %s does not exist; create it first "
                                              "(mkdir -p %s) or choose another place",
                                              dir, parent, parent)
                             : orch_error_set(-errno, "%s: cannot create the job: %s: %s",
                                              dir, parent, strerror(errno));
    else if (!S_ISDIR(st.st_mode))
        rc = orch_error_set(-ENOTDIR,
                            "%s: cannot create the job: %s is a file, not a directory", dir,
                            parent);
    free(parent);
    return rc;
}

/* ".NAME.creating.PID" beside dir: where a job is built before it is renamed into place. */
static char *staging_path(const char *dir)
{
    const char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : dir;
    int head = slash ? (int)(slash - dir) + 1 : 0;
    size_t n = strlen(dir) + 64;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%.*s.%s.creating.%ld", head, dir, base, (long)getpid());
    return p;
}

/* Whether a staging directory was left by a creation that died: the creating process
 * holds the flock of STAGE/lock until it renames the directory, and the kernel drops it
 * when that process dies, however it dies. A stage without a lock file died before it
 * took the lock: its name's pid must be gone. */
static bool stage_abandoned(const char *stage, const char *pid_text)
{
    char *lock = path_join(stage, "lock");
    if (!lock)
        return false;
    int fd = open(lock, O_RDONLY | O_CLOEXEC);
    free(lock);
    if (fd < 0) {
        char *end;
        long pid = strtol(pid_text, &end, 10);
        return errno == ENOENT && *end == '\0' && pid > 0 && kill((pid_t)pid, 0) != 0 &&
               errno == ESRCH;
    }
    bool dead = flock(fd, LOCK_EX | LOCK_NB) == 0;
    close(fd);
    return dead;
}

/* Removes the ".NAME.creating.PID" directories beside dir that earlier creations of the
 * same job left when they were killed: they are invisible, and nothing else would ever
 * remove them. Only what a creation makes is removed (remove_tree): a stage that holds
 * anything else stays. A stage of a creation still running is left alone. */
static void clean_abandoned_stages(const char *dir)
{
    const char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : dir;
    char *parent = slash ? strndup(dir, slash == dir ? 1 : (size_t)(slash - dir)) : strdup(".");
    size_t plen = strlen(base) + 16;
    char *prefix = malloc(plen);
    DIR *d = parent ? opendir(parent) : NULL;
    if (prefix)
        snprintf(prefix, plen, ".%s.creating.", base);
    for (struct dirent *e; d && prefix && (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        char *stage = path_join(parent, e->d_name);
        if (stage && stage_abandoned(stage, e->d_name + strlen(prefix)))
            remove_tree(stage);
        free(stage);
    }
    if (d)
        closedir(d);
    free(prefix);
    free(parent);
}

/* Checks, before a job directory exists, that its sources can be read: the directory
 * of a files() glob (the part before the first wildcard) exists, and a lines() file can
 * be opened. A typo then gets its message without leaving a job that tells the user to
 * `orch resume` it. A glob that matches nothing in an existing directory is a source of
 * zero roots, not an error. */
static int sources_check(const orch_plan *plan)
{
    for (int i = 0; i < orch_plan_nsources(plan); i++) {
        const struct orch_source *src = orch_plan_source(plan, i);
        const char *port = orch_plan_port(plan, src->port)->qualified;
        if (src->kind == ORCH_SOURCE_LINES) {
            FILE *f;
            int rc = orch_source_lines_open(src->arg, port, &f);
            if (rc < 0)
                return rc;
            fclose(f);
            continue;
        }
        size_t wild = strcspn(src->arg, "*?[");
        char *dir = strndup(src->arg, wild);
        if (!dir)
            return -ENOMEM;
        char *slash = strrchr(dir, '/');
        if (slash)
            slash[slash == dir ? 1 : 0] = '\0';
        struct stat st;
        int rc = 0;
        if (slash && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)))
            rc = orch_error_set(-ENOENT,
                                "source %s: files(\"%s\"): the directory %s does not exist",
                                port, src->arg, dir);
        free(dir);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* The job is built in a staging directory beside `dir` and renamed to `dir` only once its
 * first transaction (the job row and the plan) is committed: a crash at any moment of the
 * creation leaves either no job or a whole one, never a directory that neither `run` nor
 * `resume` can use. The stores are closed across the rename (SQLite names its WAL files
 * by path) and opened again at the final path; the lock's descriptor follows its inode. */
int orch_job_create(const char *dir, const char *pipeline, FILE *diag, struct orch_job **out)
{
    *out = NULL;
    orch_plan *plan = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc = orch_lang_compile_path(pipeline, diag, &plan, &text, &len);
    /* A pipeline that cannot be read was reported on diag ("PATH: error: cannot read: ..."),
     * like a syntax error: said as ORCH_ESYNTAX, so that the caller does not say it twice. */
    if (rc < 0 && rc != ORCH_ESYNTAX && rc != -ENOMEM && diag)
        return orch_error_set(ORCH_ESYNTAX, "%s", orch_error_detail());
    if (rc < 0)
        return rc;
    /* `--job out/` names the directory out: trailing slashes would put the staging
     * directory inside the job's own (not yet existing) directory. */
    char *name = strdup(dir);
    if (!name) {
        orch_plan_free(plan);
        free(text);
        return -ENOMEM;
    }
    for (size_t n = strlen(name); n > 1 && name[n - 1] == '/'; n--)
        name[n - 1] = '\0';
    dir = name;
    if ((rc = create_target_check(dir)) < 0 || (rc = sources_check(plan)) < 0) {
        orch_plan_free(plan);
        free(text);
        free(name);
        return rc;
    }
    clean_abandoned_stages(dir);
    char *stage = staging_path(dir);
    struct orch_job *job = calloc(1, sizeof *job);
    char *src = stage ? path_join(stage, "pipeline.orch") : NULL;
    bool staged = false;
    if (!job || !src || !(job->dir = strdup(stage))) {
        rc = -ENOMEM;
        goto fail;
    }
    job->lock_fd = -1;
    job->plan = plan;
    plan = NULL;
    if (mkdir(stage, 0755) != 0) {
        rc = orch_error_set(-errno, "%s: %s", stage, strerror(errno));
        goto fail;
    }
    staged = true;
    char identity[ORCH_PAYLOAD_IDENTITY_MAX];
    if ((rc = lock_take(job)) < 0 || (rc = write_source(src, text, len)) < 0 ||
        (rc = open_stores(job, ORCH_STORE_CREATE, true, false)) < 0 ||
        (rc = new_identity(identity)) < 0 ||
        (rc = orch_payload_identity_set(job->payloads, identity)) < 0 ||
        (rc = orch_payload_sync(job->payloads)) < 0)
        goto fail;
    if ((rc = orch_store_begin(job->store)) < 0)
        goto fail;
    if ((rc = orch_store_job_init(job->store, orch_plan_name(job->plan),
                                  orch_plan_canonical(job->plan), orch_plan_hash(job->plan),
                                  pipeline)) < 0 ||
        (rc = orch_store_job_set_payload_identity(job->store, identity)) < 0 ||
        (rc = orch_store_job_set_base_dir(job->store, orch_plan_basedir(job->plan))) < 0 ||
        (rc = orch_store_plan_adopt(job->store, orch_plan_canonical(job->plan),
                                    orch_plan_hash(job->plan), NULL)) < 0 ||
        (rc = orch_job_write_plan_rows(job->store, job->plan)) < 0) {
        orch_store_rollback(job->store);
        goto fail;
    }
    if ((rc = orch_store_commit(job->store)) < 0)
        goto fail;
    orch_payload_close(job->payloads);
    orch_store_close(job->store);
    job->payloads = NULL;
    job->store = NULL;
    /* RENAME_NOREPLACE: a plain rename would replace an empty directory made meanwhile. */
    if (renameat2(AT_FDCWD, stage, AT_FDCWD, dir, RENAME_NOREPLACE) != 0) {
        rc = errno == EEXIST ? exists_error(dir)
                             : orch_error_set(-errno, "%s: %s", dir, strerror(errno));
        goto fail;
    }
    staged = false;
    free(job->dir);
    if (!(job->dir = strdup(dir))) {
        rc = -ENOMEM;
        goto fail;
    }
    if ((rc = open_stores(job, 0, false, false)) < 0 || (rc = payloads_bind(job, false)) < 0 ||
        (rc = orch_store_job_get(job->store, &job->info)) < 0 ||
        (rc = orch_store_job_base_dir(job->store, &job->base_dir)) < 0)
        goto fail;
    free(text);
    free(src);
    free(stage);
    free(name);
    *out = job;
    return 0;
fail:
    free(text);
    free(src);
    free(name);
    orch_plan_free(plan);
    orch_job_close(job);
    if (staged)
        remove_tree(stage);
    free(stage);
    return rc;
}

int orch_job_open(const char *dir, int flags, struct orch_job **out)
{
    *out = NULL;
    struct stat st;
    if (dir[0] == '\0')
        return orch_error_set(-EINVAL, "the job directory is an empty path; give the job's "
                                       "directory");
    if (stat(dir, &st) != 0)
        return errno == ENOENT
                   ? orch_error_set(-ENOENT, "%s: not an orch job (it does not exist)", dir)
                   : orch_error_set(-errno, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return orch_error_set(-ENOTDIR, "%s: not an orch job (a file, not a directory)", dir);
    /* Checked before the lock is taken: the lock file would be left in a directory that
     * is not a job. */
    if (!has_state_db(dir))
        return orch_error_set(ORCH_ENOTFOUND,
                              "%s: not an orch job (no state.db in it; `orch run PIPELINE "
                              "--job DIR` makes a job)",
                              dir);
    struct orch_job *job = calloc(1, sizeof *job);
    if (!job || !(job->dir = strdup(dir))) {
        free(job);
        return -ENOMEM;
    }
    job->lock_fd = -1;
    int rc = 0;
    bool ro = flags & ORCH_JOB_READONLY, quiet = false;
    /* A directory this process cannot write: another user's job, a copy made read-only,
     * a read-only file system. */
    bool unwritable = faccessat(AT_FDCWD, dir, W_OK, AT_EACCESS) != 0;
    long driver = 0;
    if (!ro && (rc = writable_check(dir)) < 0)
        goto fail;
    if (!ro && (rc = lock_take(job)) < 0)
        goto fail;
    if (ro && unwritable && (rc = hold_quiet(job, &quiet, &driver)) < 0)
        goto fail;
    if ((rc = open_stores(job, ro ? ORCH_STORE_READONLY : 0, false, quiet)) < 0) {
        if (ro && unwritable)
            rc = unwritable_error(job, rc, driver);
        goto fail;
    }
    if ((rc = payloads_bind(job, ro)) < 0)
        goto fail;
    if ((rc = orch_store_job_get(job->store, &job->info)) < 0)
        goto fail;
    rc = orch_plan_from_canonical(job->info->plan_text, &job->plan);
    if (rc < 0) {
        rc = orch_error_set(ORCH_EMISMATCH,
                            "%s: the plan stored in the job does not compile "
                            "with this orch (%s)",
                            dir, orch_error_detail());
        goto fail;
    }
    if (strcmp(orch_plan_hash(job->plan), job->info->plan_hash) != 0) {
        rc = orch_error_set(ORCH_EMISMATCH,
                            "%s: plan hash mismatch: the job says %.12s…, "
                            "its plan text gives %.12s…",
                            dir, job->info->plan_hash, orch_plan_hash(job->plan));
        goto fail;
    }
    if ((rc = orch_store_job_base_dir(job->store, &job->base_dir)) < 0)
        goto fail;
    if (!job->base_dir && ro) {
        rc = orch_error_set(ORCH_EOLDER,
                            "%s: the job's keys are from before schema 13; open it "
                            "read-write once (orch resume) to convert them",
                            dir);
        goto fail;
    }
    if (!job->base_dir &&
        (rc = orch_update_rekey(job->store, job->plan, job->dir, job->info->pipeline_path,
                                &job->base_dir)) < 0)
        goto fail;
    *out = job;
    return 0;
fail:
    orch_job_close(job);
    return rc;
}

/* Walks the stored payload ids and the ids that items name, both ascending, in one merge
 * and in bounded memory: a page of stored ids at a time, the named ids streamed from
 * SQLite (which sorts them, spilling to disk for a big job). A stored id that no item
 * names is an orphan. */
int orch_job_reclaim(struct orch_job *job, size_t *deleted)
{
    enum { PAGE = 4096 };
    if (deleted)
        *deleted = 0;
    uint64_t *page = malloc(PAGE * sizeof *page), *gone = malloc(PAGE * sizeof *gone);
    struct orch_store_cursor named_ids = {0};
    int rc = !page || !gone ? -ENOMEM : 0;
    /* The rows that make a payload an orphan (no item names it, or a reclaimed span does) must
     * be on disk before its bytes go: a machine crash must not bring back a state.db
     * whose unsealed grains read them (engine/prop/reclaim.c, "Order of writes"). */
    if (rc == 0 && !orch_store_in_txn(job->store))
        rc = orch_store_sync(job->store);
    if (rc == 0)
        rc = orch_store_named_payloads_open(job->store, &named_ids);
    uint64_t start = 1, named = 0;
    int more_named = 0; /* 1 while `named` holds the next named id */
    if (rc == 0 && (more_named = orch_store_cursor_next_id(&named_ids, &named)) < 0)
        rc = more_named;
    while (rc == 0) {
        size_t n, ngone = 0;
        if ((rc = orch_payload_ids(job->payloads, start, page, PAGE, &n)) < 0 || n == 0)
            break;
        for (size_t i = 0; i < n && rc == 0; i++) {
            while (more_named == 1 && named < page[i])
                if ((more_named = orch_store_cursor_next_id(&named_ids, &named)) < 0)
                    rc = more_named;
            if (rc == 0 && (more_named != 1 || named != page[i]))
                gone[ngone++] = page[i];
        }
        size_t k = 0;
        if (rc == 0 && ngone)
            rc = orch_payload_delete_many(job->payloads, gone, ngone, &k);
        if (deleted)
            *deleted += k;
        if (n < PAGE)
            break;
        start = page[n - 1] + 1;
    }
    orch_store_cursor_close(&named_ids);
    free(page);
    free(gone);
    return rc < 0 ? rc : 0;
}

void orch_job_close(struct orch_job *job)
{
    if (!job)
        return;
    orch_payload_close(job->payloads);
    orch_store_close(job->store);
    orch_plan_free(job->plan);
    free(job->info);
    free(job->base_dir);
    if (job->lock_fd >= 0)
        close(job->lock_fd);
    free(job->dir);
    free(job);
}
