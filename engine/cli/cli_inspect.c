/* cli_inspect.c — the helpers of cli_inspect.h that are more than a few lines: times,
 * and the job's status as the inspection commands say it (status, report). */
#include "cli_inspect.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"
#include "support.h"

/* ms since the epoch as ISO 8601 UTC with milliseconds: 2024-05-01T10:00:00.123Z. */
void orch_cli_iso_time(char *buf, size_t n, int64_t ms)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(buf, n, "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
        snprintf(buf, n, "%" PRId64 "ms", ms);
        return;
    }
    size_t len = strlen(buf);
    snprintf(buf + len, n - len, ".%03dZ", (int)(ms % 1000));
}

int64_t orch_cli_now_ms(void)
{
    return orch_clock_wall_ms();
}

/* Whether a driver holds the job's lock now (engine/job/jobdir.c: an flock on DIR/lock, with
 * the holder's pid written in the file), and that pid (0 when unknown).
 *
 * The file is never created here. When the pid recorded in it is gone, no driver holds
 * the lock (the kernel released it with the process), and it is not probed. Else the
 * probe takes a shared lock for an instant: that fails while a driver holds it. The
 * probe is skipped when it can be because, for its instant, it would make a `resume`
 * starting at the same moment refuse to run. */
bool orch_cli_driver_live(const char *dir, long *pid)
{
    *pid = 0;
    struct orch__buf path = {0};
    orch__buf_printf(&path, "%s/lock", dir);
    int fd = path.oom ? -1 : open(path.p, O_RDONLY | O_CLOEXEC);
    orch__buf_free(&path);
    if (fd < 0)
        return false;
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    *pid = strtol(buf, NULL, 10);
    bool live;
    if (*pid > 0 && kill((pid_t)*pid, 0) != 0 && errno == ESRCH)
        live = false;
    else if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
        flock(fd, LOCK_UN);
        live = false;
    } else
        live = errno == EWOULDBLOCK;
    close(fd);
    if (!live)
        *pid = 0;
    return live;
}

/* What a job's status is now: what job.status says, unless a driver stopped short
 * (job.stop_kind, "" or NULL when none), or none holds the lock (live) of a job left
 * `running` (killed, say). */
const char *orch_cli_status_now(const char *job_status, const char *stop_kind, bool live)
{
    if (live)
        return orch_job_status_name(ORCH_JOB_RUNNING);
    int status = orch_job_status_parse(job_status);
    if (status == ORCH_JOB_FINISHED)
        return job_status;
    if (stop_kind && stop_kind[0])
        return stop_kind;
    if (status == ORCH_JOB_RUNNING)
        return orch_job_status_name(ORCH_JOB_INTERRUPTED);
    return job_status;
}
