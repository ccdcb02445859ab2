/* test_launch.c — the driver's side of remote workers (engine/worker/launch.h) without a
 * cluster: the srun command a worker is started with (options, rounding, the user's words,
 * the secret in the environment and never in argv), bad options, and the handshake over
 * real TCP on loopback: a worker with the secret is handed over with what it said; a wrong
 * secret, an unknown token and garbage are refused and hand nothing over; a worker with the
 * secret whose token is no longer awaited has its Slurm job cancelled; what
 * orch_launcher_cancel() passes to scancel. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "launch.h"
#include "orch_error.h"

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <netdb.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int nargv(char **argv)
{
    int n = 0;
    while (argv[n])
        n++;
    return n;
}

static const char *env_get(char **envp, const char *key)
{
    size_t k = strlen(key);
    for (int i = 0; envp[i]; i++)
        if (strncmp(envp[i], key, k) == 0 && envp[i][k] == '=')
            return envp[i] + k + 1;
    return NULL;
}

static void test_command(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    orch_launcher *l;
    struct orch_launcher_config cfg = {
        .kind = ORCH_LAUNCHER_SLURM,
        .args = "--partition=gpu --account 'my proj' --comment=\"a b\" x\\ y",
        .listen = "127.0.0.1:0",
        .srun = "/bin/true",
    };
    assert_int_equal(orch_launcher_new(base, &cfg, &l), 0);
    const char *addr = orch_launcher_address(l);
    assert_memory_equal(addr, "127.0.0.1:", 10);
    assert_true(atoi(addr + 10) > 0);

    struct orch_launch_request req = {
        .exe = "/opt/orch/bin/orch", .call = "ocr", .cpus = 1.5, .gpus = 0.5, .token = 77};
    char **argv, **envp;
    assert_int_equal(orch_launcher_command(l, &req, &argv, &envp), 0);
    const char *want[] = {"/bin/true", "--ntasks=1", "--cpus-per-task=2", "--gpus=1",
                          "--job-name=orch-ocr-77", "--quiet", "--partition=gpu", "--account",
                          "my proj", "--comment=a b", "x y", "/opt/orch/bin/orch",
                          "__worker", "--connect", addr, "--token", "77"};
    int n = (int)(sizeof want / sizeof *want);
    assert_int_equal(nargv(argv), n);
    for (int i = 0; i < n; i++)
        assert_string_equal(argv[i], want[i]);
    const char *secret = env_get(envp, "ORCH_WORKER_SECRET");
    assert_non_null(secret);
    assert_int_equal(strlen(secret), 64);
    assert_int_equal(strspn(secret, "0123456789abcdef"), 64);
    for (int i = 0; i < n; i++)
        assert_null(strstr(argv[i], secret));
    free(argv);
    free(envp);

    /* No GPUs asked: no --gpus; fewer than one CPU asks for one. */
    req.cpus = 0.25;
    req.gpus = 0;
    assert_int_equal(orch_launcher_command(l, &req, &argv, &envp), 0);
    assert_string_equal(argv[2], "--cpus-per-task=1");
    assert_string_equal(argv[3], "--job-name=orch-ocr-77"); /* the start's own name */
    free(argv);
    free(envp);

    /* Under a guard: orch __srun-guard SCANCEL NAME, then srun's command. */
    req.guard = "/opt/orch/bin/orch";
    unsetenv("SLURM_JOB_ID");
    assert_int_equal(orch_launcher_command(l, &req, &argv, &envp), 0);
    assert_string_equal(argv[0], "/opt/orch/bin/orch");
    assert_string_equal(argv[1], "__srun-guard");
    /* beside srun when there is one there, else the one in PATH */
    assert_string_equal(argv[2], access("/bin/scancel", X_OK) == 0 ? "/bin/scancel" : "scancel");
    assert_string_equal(argv[3], "orch-ocr-77");
    assert_string_equal(argv[4], "/bin/true");
    assert_string_equal(argv[7], "--job-name=orch-ocr-77");
    free(argv);
    free(envp);
    orch_launcher_free(l);
    event_base_free(base);
}

static void test_bad_options(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    orch_launcher *l = NULL;
    struct orch_launcher_config cfg = {.kind = ORCH_LAUNCHER_SLURM,
                                       .args = "--comment='open",
                                       .listen = "127.0.0.1:0",
                                       .srun = "/bin/true"};
    assert_int_equal(orch_launcher_new(base, &cfg, &l), -EINVAL);
    assert_non_null(strstr(orch_error_detail(), "unclosed"));
    cfg.args = NULL;
    cfg.listen = "no-port-here";
    assert_int_equal(orch_launcher_new(base, &cfg, &l), -EINVAL);
    assert_non_null(strstr(orch_error_detail(), "HOST:PORT"));
    cfg.listen = "127.0.0.1:0";
    cfg.srun = "no-such-srun-anywhere";
    assert_true(orch_launcher_new(base, &cfg, &l) < 0);
    assert_non_null(strstr(orch_error_detail(), "not in PATH"));
    assert_null(l);
    event_base_free(base);
}

/* A directory with a fake srun and, beside it, a fake scancel that appends its arguments to
 * DIR/cancelled: what the launcher asks Slurm to cancel, without a cluster. */
struct fake_slurm {
    char dir[64], srun[96], log[96];
};

static void write_script(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, 0755), 0);
}

static void fake_slurm_make(struct fake_slurm *fs)
{
    snprintf(fs->dir, sizeof fs->dir, "/tmp/orch-test-launch-XXXXXX");
    assert_non_null(mkdtemp(fs->dir));
    snprintf(fs->srun, sizeof fs->srun, "%s/srun", fs->dir);
    snprintf(fs->log, sizeof fs->log, "%s/cancelled", fs->dir);
    write_script(fs->srun, "#!/bin/sh\nexit 0\n");
    char path[128], text[256];
    snprintf(path, sizeof path, "%s/scancel", fs->dir);
    snprintf(text, sizeof text, "#!/bin/sh\necho \"$*\" >> '%s'\n", fs->log);
    write_script(path, text);
}

/* What the fake scancel was given, one line a call ("" when never called). */
static void fake_slurm_log(const struct fake_slurm *fs, char *buf, size_t n)
{
    buf[0] = '\0';
    FILE *f = fopen(fs->log, "r");
    if (!f)
        return;
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
}

/* Removes the directory and every file a test put in it. */
static void fake_slurm_remove(const struct fake_slurm *fs)
{
    DIR *d = opendir(fs->dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[384];
        snprintf(path, sizeof path, "%s/%s", fs->dir, e->d_name);
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            assert_int_equal(unlink(path), 0);
    }
    closedir(d);
    assert_int_equal(rmdir(fs->dir), 0);
}

/* DIR/name into path. */
static void fake_path(const struct fake_slurm *fs, const char *name, char path[128])
{
    snprintf(path, 128, "%s/%s", fs->dir, name);
}

/* Writes the shell script DIR/name (its path into path): "#!/bin/sh", then fmt's lines. */
__attribute__((format(printf, 4, 5))) static void
fake_script(const struct fake_slurm *fs, const char *name, char path[128], const char *fmt, ...)
{
    char text[512] = "#!/bin/sh\n";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text + strlen(text), sizeof text - strlen(text), fmt, ap);
    va_end(ap);
    fake_path(fs, name, path);
    write_script(path, text);
}

/* orch_launcher_cancel(): the job alone, or the step when the job is the driver's own
 * allocation; nothing but digits with at most one dot reaches scancel; the launcher waits
 * for its scancel processes when it is freed. */
static void test_cancel(void **state)
{
    (void)state;
    struct fake_slurm fs;
    fake_slurm_make(&fs);
    struct event_base *base = event_base_new();
    orch_launcher *l;
    struct orch_launcher_config cfg = {
        .kind = ORCH_LAUNCHER_SLURM, .listen = "127.0.0.1:0", .srun = fs.srun};
    assert_int_equal(orch_launcher_new(base, &cfg, &l), 0);
    char target[ORCH_SLURM_ID_MAX];
    static const char *const bad[] = {"", "-1", "41.", ".4", "41.0.1", "41;x", "--all", "4 1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(orch_launcher_cancel(l, bad[i], target), -EINVAL);
    unsetenv("SLURM_JOB_ID");
    assert_int_equal(orch_launcher_cancel(l, "41.3", target), 0); /* srun's own job: all of it */
    assert_string_equal(target, "41");
    orch_launcher_free(l); /* waits for that scancel: the order of the lines is known */
    assert_int_equal(orch_launcher_new(base, &cfg, &l), 0);
    setenv("SLURM_JOB_ID", "41", 1); /* the driver runs in job 41: the step alone */
    assert_int_equal(orch_launcher_cancel(l, "41.3", target), 0);
    assert_string_equal(target, "41.3");
    orch_launcher_free(l);
    assert_int_equal(orch_launcher_new(base, &cfg, &l), 0);
    setenv("SLURM_JOB_ID", "410", 1); /* another job than the worker's */
    assert_int_equal(orch_launcher_cancel(l, "41.3", target), 0);
    assert_int_equal(orch_launcher_cancel(l, "7", target), 0);
    /* An srun that died before its worker connected: no job is known, its start's name is
     * (the one orch_launcher_command gave it). Not inside the driver's own allocation
     * (srun made a step there, no job), nor when the user's arguments name the job. */
    char name[ORCH_SLURM_NAME_MAX];
    assert_int_equal(orch_launcher_cancel_start(l, "ocr", 77, name), -ENOENT);
    orch_launcher_free(l);
    unsetenv("SLURM_JOB_ID");
    assert_int_equal(orch_launcher_new(base, &cfg, &l), 0);
    assert_int_equal(orch_launcher_cancel_start(l, "ocr", 77, name), 0);
    assert_string_equal(name, "--name=orch-ocr-77");
    orch_launcher_free(l);
    static const char *const theirs[] = {"-J mine", "-Jmine", "--job-name mine",
                                         "--job-name=mine"};
    for (size_t i = 0; i < sizeof theirs / sizeof *theirs; i++) {
        struct orch_launcher_config named = cfg;
        named.args = theirs[i];
        assert_int_equal(orch_launcher_new(base, &named, &l), 0);
        assert_int_equal(orch_launcher_cancel_start(l, "ocr", 77, name), -ENOENT);
        orch_launcher_free(l);
    }
    char got[256];
    fake_slurm_log(&fs, got, sizeof got);
    /* 41.3 and 7 run at once: either order. */
    assert_true(strcmp(got, "--quiet 41\n--quiet 41.3\n--quiet 41\n--quiet 7\n"
                            "--quiet --me --name=orch-ocr-77\n") == 0 ||
                strcmp(got, "--quiet 41\n--quiet 41.3\n--quiet 7\n--quiet 41\n"
                            "--quiet --me --name=orch-ocr-77\n") == 0);
    fake_slurm_remove(&fs);
    event_base_free(base);
}

/* ---- the srun guard ----------------------------------------------------------------------- */

/* The guard as the driver's child would be: a child of the test running
 * orch_srun_guard_main() with `srun` (a script), the fake scancel, and the patience
 * kill_after_ms (0: the guard's own). */
static pid_t guard_start(const struct fake_slurm *fs, const char *srun, const char *name,
                         int64_t kill_after_ms)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char scancel[128];
        fake_path(fs, "scancel", scancel);
        char *argv[] = {(char *)srun, NULL};
        _exit(orch_srun_guard_main(scancel, name, argv, kill_after_ms));
    }
    return pid;
}

/* Waits up to 10 s for path to exist. */
static void wait_file(const char *path)
{
    for (int i = 0; i < 1000 && access(path, F_OK) != 0; i++)
        usleep(10 * 1000);
    assert_int_equal(access(path, F_OK), 0);
}

/* Waits up to 10 s for pid to end; returns its wait status. */
static int wait_status(pid_t pid)
{
    int st = 0;
    pid_t r = 0;
    for (int i = 0; i < 1000 && (r = waitpid(pid, &st, WNOHANG)) == 0; i++)
        usleep(10 * 1000);
    if (r == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        fail_msg("the guard did not end in 10 s");
    }
    return st;
}

/* An srun that misses a SIGTERM (as one that is asking for its job may: launch.h) still
 * ends: the guard says it again; its exit status is the guard's. */
static void test_guard_resends(void **state)
{
    (void)state;
    struct fake_slurm fs;
    fake_slurm_make(&fs);
    char srun[128], ready[128], terms[128];
    fake_path(&fs, "ready", ready);
    fake_path(&fs, "terms", terms);
    fake_script(&fs, "deaf-srun", srun,
                "n=0\ntrap 'n=$((n+1)); if [ $n -ge 2 ]; then echo $n > %s; exit 3; fi' TERM\n"
                ": > %s\nwhile :; do :; done\n",
                terms, ready);
    pid_t g = guard_start(&fs, srun, "orch-x-1", 0);
    wait_file(ready);
    assert_int_equal(kill(g, SIGTERM), 0);
    int st = wait_status(g);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 3);
    char buf[16] = "";
    FILE *f = fopen(terms, "r");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof buf, f));
    fclose(f);
    assert_string_equal(buf, "2\n"); /* the second SIGTERM ended it */
    char got[64];
    fake_slurm_log(&fs, got, sizeof got);
    assert_string_equal(got, ""); /* srun ended by itself: nothing to cancel */
    fake_slurm_remove(&fs);
}

/* An srun that a signal ended: the guard ends by the same signal (what the pool reads to
 * decide whether srun left a job behind). The guard killed: srun gets SIGTERM. */
static void test_guard_mirrors(void **state)
{
    (void)state;
    struct fake_slurm fs;
    fake_slurm_make(&fs);
    char srun[128], ready[128], got_term[128];
    fake_script(&fs, "shot-srun", srun, "kill -USR1 $$\n");
    int st = wait_status(guard_start(&fs, srun, "-", 0));
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGUSR1);

    fake_path(&fs, "ready", ready);
    fake_path(&fs, "got-term", got_term);
    fake_script(&fs, "shot-srun", srun,
                "trap ': > %s; exit 0' TERM\n: > %s\nwhile :; do :; done\n", got_term, ready);
    pid_t g = guard_start(&fs, srun, "-", 0);
    wait_file(ready);
    assert_int_equal(kill(g, SIGKILL), 0);
    st = wait_status(g);
    assert_true(WIFSIGNALED(st));
    wait_file(got_term); /* its death signal, from the guard's death */
    fake_slurm_remove(&fs);
}

/* An srun deaf to SIGTERM is killed after the guard's patience, and its job cancelled by
 * name (no driver may be there to do it); not when there is no name ("-"). */
static void test_guard_kills(void **state)
{
    (void)state;
    struct fake_slurm fs;
    fake_slurm_make(&fs);
    char srun[128], ready[128];
    fake_path(&fs, "ready", ready);
    fake_script(&fs, "stone-srun", srun, "trap '' TERM\n: > %s\nwhile :; do :; done\n", ready);
    const char *names[] = {"orch-ocr-9", "-"};
    for (int i = 0; i < 2; i++) {
        pid_t g = guard_start(&fs, srun, names[i], 300);
        wait_file(ready);
        assert_int_equal(kill(g, SIGTERM), 0);
        int st = wait_status(g);
        assert_true(WIFSIGNALED(st));
        assert_int_equal(WTERMSIG(st), SIGKILL);
        unlink(ready);
    }
    char got[64];
    fake_slurm_log(&fs, got, sizeof got);
    assert_string_equal(got, "--quiet --me --name=orch-ocr-9\n");
    fake_slurm_remove(&fs);
}

/* ---- the handshake ----------------------------------------------------------------------- */

struct attached {
    int calls;
    int fd;
    struct orch_wire_auth au;
    char host[64], job[64];
    struct event_base *base;
};

static void on_attach(void *who, int fd, const struct orch_wire_auth *au)
{
    struct attached *a = who;
    a->calls++;
    a->fd = fd;
    a->au = *au;
    snprintf(a->host, sizeof a->host, "%s", au->host);
    snprintf(a->job, sizeof a->job, "%s", au->slurm_job);
    event_base_loopbreak(a->base);
}

/* A child that connects as a worker with token and the secret `secret`, then waits for the
 * driver to close (so that its socket is still open when the parent looks). */
static pid_t worker_child(const char *addr, uint64_t token, const char *secret)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("ORCH_WORKER_SECRET", secret, 1);
        setenv("SLURM_JOB_ID", "41", 1);
        setenv("SLURM_STEP_ID", "0", 1);
        int fd = orch_launch_connect(addr, token);
        if (fd < 0)
            _exit(3);
        if (getenv("ORCH_WORKER_SECRET") != NULL)
            _exit(4); /* the secret must not reach what the worker starts */
        char c;
        _exit(read(fd, &c, 1) == 0 ? 0 : 5); /* EOF: closed by the driver */
    }
    return pid;
}

/* Runs the loop until attach is called or ms pass. */
static void loop_for(struct event_base *base, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    event_base_loopexit(base, &tv);
    event_base_dispatch(base);
}

static int child_status(pid_t pid)
{
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void test_handshake(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    orch_launcher *l;
    struct fake_slurm fs;
    fake_slurm_make(&fs);
    unsetenv("SLURM_JOB_ID");
    struct orch_launcher_config cfg = {
        .kind = ORCH_LAUNCHER_SLURM, .listen = "127.0.0.1:0", .srun = fs.srun};
    assert_int_equal(orch_launcher_new(base, &cfg, &l), 0);
    char addr[128];
    snprintf(addr, sizeof addr, "%s", orch_launcher_address(l));
    struct orch_launch_request req = {.exe = "/x", .call = "c", .cpus = 1, .token = 0};
    struct attached a = {.fd = -1, .base = base};
    uint64_t token;
    assert_int_equal(orch_launcher_expect(l, on_attach, &a, &token), 0);
    req.token = token;
    char **argv, **envp;
    assert_int_equal(orch_launcher_command(l, &req, &argv, &envp), 0);
    char secret[65];
    snprintf(secret, sizeof secret, "%s", env_get(envp, "ORCH_WORKER_SECRET"));
    free(argv);
    free(envp);

    /* A wrong secret, then the right secret with a token nobody waits for: both refused,
     * nothing handed over; the driver closes them, so the children see EOF. */
    char wrong[65];
    snprintf(wrong, sizeof wrong, "%s", secret);
    wrong[0] = wrong[0] == '0' ? '1' : '0';
    pid_t p1 = worker_child(addr, token, wrong);
    pid_t p2 = worker_child(addr, token + 1000, secret);
    /* Garbage: a stranger that is not a worker at all. */
    pid_t p3 = fork();
    if (p3 == 0) {
        char host[128];
        snprintf(host, sizeof host, "%s", addr);
        char *colon = strrchr(host, ':');
        *colon = '\0';
        struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res;
        if (getaddrinfo(host, colon + 1, &hints, &res) != 0)
            _exit(7);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) < 0)
            _exit(8);
        char buf[64];
        size_t got = 0;
        while (got < 41) { /* the CHALLENGE */
            ssize_t r = read(fd, buf, 41 - got);
            if (r <= 0)
                _exit(9);
            got += (size_t)r;
        }
        static const char junk[] = "GET / HTTP/1.0\r\n\r\n";
        if (write(fd, junk, sizeof junk - 1) < 0)
            _exit(10);
        _exit(read(fd, buf, sizeof buf) == 0 ? 0 : 11); /* refused: closed, no answer */
    }
    for (int i = 0; i < 20 && a.calls == 0; i++)
        loop_for(base, 50);
    assert_int_equal(a.calls, 0);
    assert_int_equal(child_status(p3), 0);

    /* The real worker: handed over once, with what its AUTH said. */
    pid_t p4 = worker_child(addr, token, secret);
    for (int i = 0; i < 200 && a.calls == 0; i++)
        loop_for(base, 50);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.au.token, token);
    assert_int_equal(a.au.pid, (uint32_t)p4);
    assert_string_equal(a.job, "41.0");
    char me[64];
    gethostname(me, sizeof me);
    me[sizeof me - 1] = '\0';
    assert_string_equal(a.host, me);
    close(a.fd); /* the child reads EOF: it was connected */
    assert_int_equal(child_status(p4), 0);
    assert_int_equal(child_status(p1), 0);
    assert_int_equal(child_status(p2), 0);

    /* Used once: the same token again is refused. */
    pid_t p5 = worker_child(addr, token, secret);
    for (int i = 0; i < 10; i++)
        loop_for(base, 50);
    assert_int_equal(a.calls, 1);
    assert_int_equal(child_status(p5), 0);
    orch_launcher_free(l);
    /* p2 and p5 knew the secret (workers of this driver) but their tokens were not awaited:
     * the step each named, job 41, was cancelled; the wrong secret's was not. */
    char got[256];
    fake_slurm_log(&fs, got, sizeof got);
    assert_string_equal(got, "--quiet 41\n--quiet 41\n");
    fake_slurm_remove(&fs);
    event_base_free(base);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_command),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_handshake),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_guard_resends),
        cmocka_unit_test(test_guard_mirrors),
        cmocka_unit_test(test_guard_kills),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
