/* sweep.c — lrc sweep: a grid of lrc train runs over --grid KEY=V1,V2,...
 * (lr, seed or any config key), each an ordinary run directory in the
 * sweep's, run --jobs at a time by this same binary (fork and exec), with
 * the cores divided between them. A finished point is a line of
 * sweep.jsonl; a sweep started again skips those and resumes a stopped one
 * (lrc train --resume, bit for bit), so its table equals an uninterrupted
 * sweep's. Ctrl-C reaches the runs, which write their checkpoints. Under
 * mpirun, rank r runs the points p with p mod N = r and rank 0 writes the
 * table; --point I runs one point (a Slurm array task, --slurm's script)
 * and --gather writes the table afterwards. The table and plots:
 * sweep_table.c. */
#include "lrc_tools.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

void lrc_sweep_opts_free(lrc_sweep_opts *a)
{
    for (int i = 0; i < a->n_axes; i++) {
        for (int j = 0; j < a->axes[i].n; j++) free(a->axes[i].vals[j]);
        free(a->axes[i].vals), free(a->axes[i].key);
    }
    a->n_axes = 0;
}

/* --grid KEY=V1,V2,...: a one-line error (exit 1) on an empty grid, a rate
 * <= 0 or a seed that is not one */
int lrc_sweep_grid_add(lrc_sweep_opts *a, const char *spec, lrc_err *err)
{
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec) return lrc_err_set(err, "sweep: --grid %s: expected KEY=V1,V2,...", spec);
    if (a->n_axes == LRC_SWEEP_MAX_AXES) return lrc_err_set(err, "sweep: more than %d --grid keys", LRC_SWEEP_MAX_AXES);
    char *key = strndup(spec, (size_t)(eq - spec));
    for (int i = 0; i < a->n_axes; i++)
        if (!strcmp(a->axes[i].key, key)) {
            lrc_err_set(err, "sweep: --grid %s twice", key);
            return free(key), LRC_EUSER;
        }
    lrc_sweep_axis *g = &a->axes[a->n_axes++];
    g->key = key;
    for (const char *p = eq + 1;;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len == 0) return lrc_err_set(err, "sweep: --grid %s: an empty value (a grid needs at least one)", spec);
        char *v = strndup(p, len), *end;
        g->vals = lrc_xrealloc(g->vals, (size_t)(g->n + 1) * sizeof *g->vals);
        g->vals[g->n++] = v;
        double x = strtod(v, &end);
        if (!strcmp(key, "lr") && (*end || !(x > 0) || !isfinite(x)))
            return lrc_err_set(err, "sweep: --grid lr: '%s' is not a rate > 0", v);
        if (!strcmp(key, "seed") && (*end || x != floor(x) || x < 0))
            return lrc_err_set(err, "sweep: --grid seed: '%s' is not a seed (an integer >= 0)", v);
        if (strchr(v, '/') || strchr(v, ',')) return lrc_err_set(err, "sweep: --grid %s: '%s' names a run directory: no '/'", key, v);
        if (!c) break;
        p = c + 1;
    }
    return LRC_OK;
}

/* lrc train's options that take no value: the others' values are never MODEL */
static bool train_flag(const char *s) { return !strcmp(s, "--decay-all") || !strcmp(s, "--flip"); }

/* Each grid key other than lr and seed, at each of its values, is one the
 * model takes: the model loaded with the train options' --preset and --set,
 * one line naming the key otherwise (before any run starts) */
static int check_grid(const lrc_sweep_opts *a, lrc_err *err)
{
    const char *model = NULL, *preset = NULL;
    char **sets = lrc_xcalloc((size_t)a->n_train + 2, sizeof *sets);
    int n_sets = 0, rc = LRC_OK;
    for (int i = 0; i < a->n_train; i++) {
        const char *s = a->train[i];
        if (s[0] != '-') {
            if (!model) model = s;
            continue;
        }
        if (train_flag(s) || i + 1 == a->n_train) continue;
        if (!strcmp(s, "--preset")) preset = a->train[i + 1];
        if (!strcmp(s, "--set")) sets[n_sets++] = a->train[i + 1];
        i++;
    }
    if (!model) rc = lrc_err_set(err, "sweep: no MODEL (lrc sweep MODEL [--preset P] ... --grid KEY=V1,V2,... -o SWEEP_DIR)");
    for (int k = 0; k < a->n_axes && !rc; k++) {
        if (!strcmp(a->axes[k].key, "lr") || !strcmp(a->axes[k].key, "seed")) continue;
        for (int j = 0; j < a->axes[k].n && !rc; j++) {
            char set[1024];
            snprintf(set, sizeof set, "%s=%s", a->axes[k].key, a->axes[k].vals[j]);
            sets[n_sets] = set;
            lrc_model m = {0};
            if (lrc_model_load(&m, model, preset, sets, n_sets + 1, err)) {
                lrc_err_prefix(err, "sweep: --grid %s", set);
                rc = LRC_EUSER;
            }
            lrc_model_free(&m); /* what a failed load made too */
        }
    }
    free(sets);
    return rc;
}

/* Point p of the grid (the first axis slowest): its values */
static void point_values(const lrc_sweep_opts *a, int p, const char **vals)
{
    for (int k = a->n_axes - 1; k >= 0; k--) vals[k] = a->axes[k].vals[p % a->axes[k].n], p /= a->axes[k].n;
}

static void point_name(const lrc_sweep_opts *a, const char **vals, bool arm_only, char *out, size_t cap)
{
    out[0] = 0;
    for (int k = 0; k < a->n_axes; k++) {
        if (arm_only && (!strcmp(a->axes[k].key, "lr") || !strcmp(a->axes[k].key, "seed"))) continue;
        snprintf(out + strlen(out), cap - strlen(out), "%s%s=%s", out[0] ? "," : "", a->axes[k].key, vals[k]);
    }
}

static bool recorded(const lrc_sweep_point *done, int n_done, const char *run)
{
    for (int i = 0; i < n_done; i++)
        if (!strcmp(done[i].run, run)) return true;
    return false;
}

/* Runs lrc train for point p into dir (resuming it where it has a
 * checkpoint), its output into dir.log: the child's pid. */
static pid_t start_point(const lrc_sweep_opts *a, const char **vals, const char *dir, int threads)
{
    char ck[4300], log[4300], th[16];
    snprintf(ck, sizeof ck, "%s/checkpoint.safetensors", dir);
    snprintf(log, sizeof log, "%s.log", dir);
    snprintf(th, sizeof th, "%d", threads);
    bool resume = access(ck, F_OK) == 0;
    if (!resume) { /* stopped before its first checkpoint: nothing to keep */
        char cmd[4300];
        snprintf(cmd, sizeof cmd, "%s/run.json", dir);
        if (access(cmd, F_OK) == 0) {
            snprintf(cmd, sizeof cmd, "%s/metrics.jsonl", dir), unlink(cmd);
            snprintf(cmd, sizeof cmd, "%s/tokenizer.json", dir), unlink(cmd);
            snprintf(cmd, sizeof cmd, "%s/run.json", dir), unlink(cmd);
            rmdir(dir);
        }
    }
    char **argv = lrc_xcalloc((size_t)(a->n_train + 4 * a->n_axes + 12), sizeof *argv);
    char sets[8192], *at = sets; /* the --set KEY=VALUE strings of the grid's config keys */
    int n = 0;
    argv[n++] = "lrc", argv[n++] = "train";
    if (resume) {
        argv[n++] = "--resume", argv[n++] = (char *)dir;
    } else {
        for (int i = 0; i < a->n_train; i++) argv[n++] = a->train[i];
        for (int k = 0; k < a->n_axes; k++) {
            if (!strcmp(a->axes[k].key, "lr") || !strcmp(a->axes[k].key, "seed")) {
                argv[n++] = !strcmp(a->axes[k].key, "lr") ? "--lr" : "--seed", argv[n++] = (char *)vals[k];
            } else {
                size_t room = sizeof sets - (size_t)(at - sets);
                int w = snprintf(at, room, "%s=%s", a->axes[k].key, vals[k]);
                argv[n++] = "--set", argv[n++] = at, at += w < 0 ? 0 : (size_t)w < room ? (size_t)w + 1 : room - 1; /* cut short: train names it */
            }
        }
        argv[n++] = "-o", argv[n++] = (char *)dir;
    }
    argv[n++] = "--threads", argv[n++] = th;
    /* a run is one process: without the launcher's variables, which would
     * make lrc train join the sweep's MPI job as a rank */
    size_t n_env = 0;
    while (environ[n_env]) n_env++;
    char **envp = lrc_xcalloc(n_env + 1, sizeof *envp);
    for (size_t i = 0, k = 0; i < n_env; i++)
        if (strncmp(environ[i], "OMPI_", 5) && strncmp(environ[i], "PMIX_", 5)) envp[k++] = environ[i];
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        FILE *f = freopen(log, "a", stdout);
        if (!f || dup2(fileno(stdout), 2) < 0) _exit(127);
        execve("/proc/self/exe", argv, envp);
        fprintf(stderr, "lrc sweep: cannot run lrc train: %s\n", strerror(errno));
        _exit(127);
    }
    free(argv), free(envp);
    return pid;
}

/* The last line of text that holds needle (or any line when NULL) in path */
static bool log_line(const char *path, const char *needle, char *out, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char *buf = NULL;
    size_t bc = 0;
    bool found = false;
    while (getline(&buf, &bc, f) > 0) {
        char *cr = strrchr(buf, '\r'); /* the progress line rewrites itself */
        const char *line = cr && cr[1] && cr[1] != '\n' ? cr + 1 : buf;
        if (strspn(line, " \r\n") == strlen(line) || (needle && !strstr(line, needle))) continue;
        snprintf(out, cap, "%s", line);
        out[strcspn(out, "\r\n")] = 0;
        found = true;
    }
    free(buf);
    fclose(f);
    return found;
}

/* ln V for a run: vocab (or an image model's n_classes) as lrc inspect
 * gives it for the run's model, preset and sets (run.json) */
static int run_l0(lrc_run_model_fn run_model, const char *dir, double *l0, lrc_err *err)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/run.json", dir);
    lrc_model m = {0};
    int rc = run_model(dir, &m, err);
    if (rc) return lrc_model_free(&m), rc;
    int64_t v = 0;
    lrc_err e2 = {0};
    if (lrc_model_config_int(&m, "vocab", &v, &e2) && lrc_model_config_int(&m, "n_classes", &v, &e2)) v = 0;
    lrc_model_free(&m);
    if (v < 2) return lrc_err_set(err, "%s: the model has neither vocab nor n_classes, so ln V is unknown", path);
    *l0 = log((double)v);
    return LRC_OK;
}

/* A run that ended: its point for sweep.jsonl (0; the caller frees its
 * strings), interrupted (2), or a failure (1). The rate and seed are the
 * run's (run.json), whether the grid or a fixed option gave them. */
static int finish_point(const lrc_sweep_opts *a, const char **vals, const char *dir, int status, lrc_sweep_point *p, lrc_err *err)
{
    char log[4300], line[1024] = "";
    snprintf(log, sizeof log, "%s.log", dir);
    /* Ctrl-C: a run that had begun its steps wrote its checkpoint (130);
     * one still starting up had no handler yet, and starts again */
    if ((WIFEXITED(status) && WEXITSTATUS(status) == 130) || (WIFSIGNALED(status) && WTERMSIG(status) == SIGINT)) return 2;
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    bool diverged = WIFEXITED(status) && WEXITSTATUS(status) == 1 && log_line(log, "is not finite", line, sizeof line);
    if (!ok && !diverged) {
        if (!log_line(log, "lrc", line, sizeof line)) log_line(log, NULL, line, sizeof line);
        return lrc_err_set(err, "%s: lrc train failed (%s): %s", dir, WIFEXITED(status) ? "exit status" : "signal", line);
    }
    char name[2048], arm[2048];
    point_name(a, vals, false, name, sizeof name);
    point_name(a, vals, true, arm, sizeof arm);
    *p = (lrc_sweep_point){.run = lrc_xstrdup(name), .arm = lrc_xstrdup(arm), .diverged = diverged, .loss = NAN};
    for (int k = 0; k < a->n_axes; k++)
        if (a->plot_key && !strcmp(a->axes[k].key, a->plot_key)) p->x = lrc_xstrdup(vals[k]);
    char rj[4300];
    snprintf(rj, sizeof rj, "%s/run.json", dir);
    FILE *f = fopen(rj, "r");
    char *text = NULL;
    size_t tl = 0;
    if (f) getdelim(&text, &tl, 0, f), fclose(f);
    cJSON *run = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *lr = cJSON_GetObjectItemCaseSensitive(run, "lr"), *seed = cJSON_GetObjectItemCaseSensitive(run, "seed");
    if (cJSON_IsNumber(lr)) p->lr = lr->valuedouble;
    if (cJSON_IsNumber(seed)) p->seed = (long long)seed->valuedouble;
    cJSON_Delete(run);
    int rc = run_l0(a->run_model, dir, &p->l0, err);
    if (!rc && !diverged) {
        char mp[4300], last[4096] = "";
        snprintf(mp, sizeof mp, "%s/metrics.jsonl", dir);
        cJSON *o = log_line(mp, "\"val_loss\"", last, sizeof last) ? cJSON_Parse(last) : NULL;
        const cJSON *vl = cJSON_GetObjectItemCaseSensitive(o, "val_loss");
        if (cJSON_IsNumber(vl)) p->loss = vl->valuedouble;
        else rc = lrc_err_set(err, "%s: no validation loss in metrics.jsonl (give --eval-every a divisor of --steps)", mp);
        cJSON_Delete(o);
    }
    if (rc) free(p->run), free(p->arm), free(p->x);
    return rc;
}

typedef struct {
    pid_t pid;
    int point;
} job;

/* Waits for one of the running jobs and records it; a failure stops the
 * launching of new points (*stop) but not the jobs that run. */
static int reap(const lrc_sweep_opts *a, job *jobs, int *n_jobs, const char *jsonl, bool *stop, bool *was_interrupted, lrc_err *err)
{
    int status, rc = LRC_OK;
    pid_t pid;
    static bool forwarded;
    /* Ctrl-C (or a SIGINT to the sweep alone): each run hears of it once,
     * finishes its step and writes its checkpoint */
    for (;;) {
        if (interrupted && !forwarded) {
            for (int j = 0; j < *n_jobs; j++) kill(jobs[j].pid, SIGINT);
            forwarded = true;
        }
        if ((pid = waitpid(-1, &status, 0)) >= 0 || errno != EINTR) break;
    }
    if (pid < 0) return lrc_err_set(err, "sweep: waitpid: %s", strerror(errno));
    int j = 0;
    while (j < *n_jobs && jobs[j].pid != pid) j++;
    if (j == *n_jobs) return LRC_OK;
    const char *vals[LRC_SWEEP_MAX_AXES];
    char name[2048], dir[4200];
    point_values(a, jobs[j].point, vals);
    point_name(a, vals, false, name, sizeof name);
    snprintf(dir, sizeof dir, "%s/%s", a->out, name);
    jobs[j] = jobs[--*n_jobs];
    lrc_sweep_point p;
    int r = finish_point(a, vals, dir, status, &p, err);
    if (r == 2) {
        *was_interrupted = *stop = true;
    } else if (r) {
        *stop = true, rc = r;
    } else {
        rc = lrc_sweep_append(jsonl, &p, err);
        printf("sweep: %s: %s\n", name, p.diverged ? "diverged" : "done");
        if (!p.diverged) printf("       validation loss %.4f\n", p.loss);
        free(p.run), free(p.arm), free(p.x);
    }
    return rc;
}

static int grid_total(const lrc_sweep_opts *a)
{
    int total = 1;
    for (int k = 0; k < a->n_axes; k++) total *= a->axes[k].n;
    return total;
}

/* The points in the grid's order, whatever order the ranks, jobs or array
 * tasks finished them in (the arms' order and each sum's follow it), so the
 * table is the one process's. With --gather every point must be there. */
static int grid_order(const lrc_sweep_opts *a, lrc_sweep_point *pts, int n, lrc_err *err)
{
    int total = grid_total(a), k = 0;
    for (int p = 0; p < total; p++) {
        const char *vals[LRC_SWEEP_MAX_AXES];
        char name[2048];
        point_values(a, p, vals);
        point_name(a, vals, false, name, sizeof name);
        int i = k;
        while (i < n && strcmp(pts[i].run, name)) i++;
        if (i == n) {
            if (a->gather) return lrc_err_set(err, "sweep: point %d (%s) is not in sweep.jsonl: run it (--point %d)", p, name, p);
            continue;
        }
        lrc_sweep_point t = pts[i]; /* moved to k, the others kept in their order */
        memmove(pts + k + 1, pts + k, (size_t)(i - k) * sizeof *pts);
        pts[k++] = t;
    }
    return LRC_OK;
}

/* The table (sweep.md, printed) and the plots from sweep.jsonl */
static int write_table(const lrc_sweep_opts *a, const char *jsonl, lrc_err *err)
{
    lrc_sweep_point *pts;
    int n;
    if (access(jsonl, F_OK)) return lrc_err_set(err, "sweep: %s is not a sweep (no sweep.jsonl)", a->out);
    if (lrc_sweep_read(jsonl, &pts, &n, err)) return LRC_EUSER;
    if (n == 0) return lrc_sweep_points_free(pts, n), lrc_err_set(err, "%s: no finished run", jsonl);
    if (grid_order(a, pts, n, err)) return lrc_sweep_points_free(pts, n), LRC_EUSER;
    lrc_sweep_arm *arms;
    int n_arms;
    lrc_sweep_arms(pts, n, &arms, &n_arms);
    char md[4200], png[4200], pngx[4200];
    snprintf(md, sizeof md, "%s/sweep.md", a->out);
    snprintf(png, sizeof png, "%s/sweep.png", a->out);
    if (a->plot_key) snprintf(pngx, sizeof pngx, "%s/sweep-%s.png", a->out, a->plot_key);
    FILE *f = fopen(md, "w");
    int rc = LRC_OK;
    if (!f) {
        rc = lrc_err_set(err, "cannot write %s: %s", md, strerror(errno));
    } else {
        lrc_sweep_table_write(f, pts, n, arms, n_arms);
        if (fclose(f)) rc = lrc_err_set(err, "cannot write %s", md);
    }
    if (!rc) {
        lrc_sweep_table_write(stdout, pts, n, arms, n_arms);
        rc = lrc_sweep_plot(pts, n, arms, n_arms, png, a->plot_key ? pngx : NULL, a->plot_key, err);
        if (!rc) printf("\ntable %s, plot %s%s%s\n", md, png, a->plot_key ? ", " : "", a->plot_key ? pngx : "");
    }
    free(arms);
    lrc_sweep_points_free(pts, n);
    return rc;
}

/* Threads per run: the cores of this machine (a Slurm task's, when it says)
 * over the runs at a time on it: --jobs, times the ranks on it under mpirun */
static int run_threads(const lrc_sweep_opts *a, const lrc_dist *d)
{
    const char *slurm = getenv("SLURM_CPUS_PER_TASK"), *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    long cores = a->point >= 0 && slurm && atol(slurm) > 0 ? atol(slurm) : sysconf(_SC_NPROCESSORS_ONLN);
    long per = (long)a->jobs * (d && local && atol(local) > 0 ? atol(local) : 1);
    return (int)(cores / per > 1 ? cores / per : 1);
}

/* Whether this process runs point p: --point's alone, or under mpirun the
 * points of this rank (p mod N) */
static bool mine(const lrc_sweep_opts *a, const lrc_dist *d, int p)
{
    return a->point >= 0 ? p == a->point : p % lrc_dist_size(d) == lrc_dist_rank(d);
}

/* The grid's runs, --jobs at a time; points already in sweep.jsonl skipped */
static int run_grid(const lrc_sweep_opts *a, lrc_dist *d, const char *jsonl, bool *was_interrupted, lrc_err *err)
{
    lrc_sweep_point *done = NULL;
    int n_done = 0, total = grid_total(a), rc = LRC_OK;
    int bad = access(jsonl, F_OK) == 0 && lrc_sweep_read(jsonl, &done, &n_done, err);
    /* every rank reads sweep.jsonl before any appends to it */
    if (d && lrc_dist_max_int(d, &bad, 1, err)) return LRC_EUSER;
    if (bad) return err->msg[0] ? LRC_EUSER : lrc_err_set(err, "sweep: another rank cannot read %s", jsonl);
    int threads = run_threads(a, d), n_jobs = 0, skipped = 0;
    job jobs[LRC_SWEEP_MAX_JOBS];
    bool stop = false;
    struct sigaction sa = {0}, old_sa;
    sa.sa_handler = on_sigint; /* no SA_RESTART: waitpid returns, and the runs hear of it */
    sigaction(SIGINT, &sa, &old_sa);
    for (int p = 0; p < total && !rc; p++) {
        const char *vals[LRC_SWEEP_MAX_AXES];
        char name[2048], dir[4200];
        if (!mine(a, d, p)) continue;
        point_values(a, p, vals);
        point_name(a, vals, false, name, sizeof name);
        if (recorded(done, n_done, name)) {
            skipped++;
            continue;
        }
        while (n_jobs == a->jobs && !rc) rc = reap(a, jobs, &n_jobs, jsonl, &stop, was_interrupted, err);
        if (stop || interrupted || rc) break;
        snprintf(dir, sizeof dir, "%s/%s", a->out, name);
        printf("sweep: %s (point %d of %d, %d threads", name, p + 1, total, threads);
        printf(d ? ", rank %d of %d)\n" : ")\n", lrc_dist_rank(d), lrc_dist_size(d));
        jobs[n_jobs++] = (job){start_point(a, vals, dir, threads), p};
    }
    while (n_jobs > 0) {
        int r = reap(a, jobs, &n_jobs, jsonl, &stop, was_interrupted, err);
        if (!rc) rc = r;
    }
    *was_interrupted |= interrupted != 0;
    sigaction(SIGINT, &old_sa, NULL);
    if (skipped) printf("sweep: %d point%s already finished (sweep.jsonl)\n", skipped, skipped == 1 ? "" : "s");
    lrc_sweep_points_free(done, n_done);
    return rc;
}

/* After every rank's runs: whether any failed or was interrupted. Rank 0
 * alone goes on to the table; it names a failure of another rank, whose
 * own line says why. */
static int ranks_agree(lrc_dist *d, int rc, bool *was_interrupted, bool *any_failed, lrc_err *err)
{
    int flags[2] = {rc != 0, *was_interrupted};
    *any_failed = true;
    if (lrc_dist_max_int(d, flags, 2, err)) return LRC_EUSER;
    *was_interrupted = flags[1], *any_failed = flags[0];
    if (!rc && flags[0] && lrc_dist_rank(d) == 0) return lrc_err_set(err, "sweep: a run on another rank failed (that rank's line says why)");
    return rc;
}

static void shell_word(FILE *f, const char *s)
{
    fputs(" '", f);
    for (; *s; s++) *s == '\'' ? fputs("'\\''", f) : fputc(*s, f);
    fputc('\'', f);
}

/* lrc sweep's command line less --jobs: the grid, the train options, -o */
static void sweep_words(FILE *f, const char *exe, const lrc_sweep_opts *a)
{
    shell_word(f, exe), fputs(" sweep", f);
    for (int i = 0; i < a->n_train; i++) shell_word(f, a->train[i]);
    for (int k = 0; k < a->n_axes; k++) {
        char spec[4096];
        int at = snprintf(spec, sizeof spec, "%s=", a->axes[k].key);
        for (int j = 0; j < a->axes[k].n && at < (int)sizeof spec; j++)
            at += snprintf(spec + at, sizeof spec - (size_t)at, "%s%s", j ? "," : "", a->axes[k].vals[j]);
        fputs(" --grid", f), shell_word(f, spec);
    }
    if (a->plot_key) fputs(" --plot-key", f), shell_word(f, a->plot_key);
    fputs(" -o", f), shell_word(f, a->out);
}

/* --slurm: SWEEP_DIR/sweep.sbatch, a job array whose task I runs point I
 * with this binary in this folder; --gather writes the table after */
static int write_slurm(const lrc_sweep_opts *a, lrc_err *err)
{
    char exe[4096], cwd[4096], path[4300];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len < 0 || !getcwd(cwd, sizeof cwd)) return lrc_err_set(err, "sweep: --slurm: cannot find this binary or folder: %s", strerror(errno));
    exe[len] = 0;
    snprintf(path, sizeof path, "%s/sweep.sbatch", a->out);
    FILE *f = fopen(path, "w");
    if (!f) return lrc_err_set(err, "cannot write %s: %s", path, strerror(errno));
    int total = grid_total(a);
    fprintf(f, "#!/bin/bash\n#SBATCH --job-name=lrc-sweep\n#SBATCH --array=0-%d\n", total - 1);
    fprintf(f, "#SBATCH --output=%s%s%s/slurm-%%a.out\n", a->out[0] == '/' ? "" : cwd, a->out[0] == '/' ? "" : "/", a->out);
    fprintf(f, "# lrc sweep's grid of %d points as a Slurm job array: task I trains point I.\n", total);
    fprintf(f, "# Submit with sbatch %s; once every task has finished, the table:\n#  ", path);
    sweep_words(f, exe, a);
    fputs(" --gather\ncd", f), shell_word(f, cwd), fputs(" || exit 1\nexec", f);
    sweep_words(f, exe, a);
    fputs(" --point \"$SLURM_ARRAY_TASK_ID\"\n", f);
    if (fclose(f)) return lrc_err_set(err, "cannot write %s", path);
    chmod(path, 0755);
    printf("sweep: wrote %s, a job array of %d tasks (sbatch %s); then the same command with --gather writes the table\n", path, total,
           path);
    return LRC_OK;
}

int lrc_sweep_run(const lrc_sweep_opts *a, bool *was_interrupted, lrc_err *err)
{
    *was_interrupted = false;
    bool runs = !a->table_only && !a->gather && !a->slurm;
    if (lrc_dist_launcher() && !(runs && a->point < 0))
        return lrc_err_set(err, "sweep: --table, --gather, --slurm and --point run as one process, not under mpirun");
    if (a->point >= grid_total(a))
        return lrc_err_set(err, "sweep: --point %d: the grid has points 0 to %d", a->point, grid_total(a) - 1);
    if (runs && check_grid(a, err)) return LRC_EUSER;
    char jsonl[4200];
    snprintf(jsonl, sizeof jsonl, "%s/sweep.jsonl", a->out);
    int rc = LRC_OK;
    if (!a->table_only && !a->gather && (lrc_make_parents(a->out) || mkdir(a->out, 0755)) && errno != EEXIST)
        return lrc_err_set(err, "cannot make %s: %s", a->out, strerror(errno));
    if (a->slurm) return write_slurm(a, err);
    if (runs) {
        lrc_dist *d = NULL;
        if (lrc_dist_open(&d, err)) return LRC_EUSER;
        interrupted = 0;
        rc = run_grid(a, d, jsonl, was_interrupted, err);
        if (d) {
            bool any_failed, rank0 = lrc_dist_rank(d) == 0;
            rc = ranks_agree(d, rc, was_interrupted, &any_failed, err);
            /* MPI_Finalize waits for every rank: only when none failed */
            lrc_dist_close(d, !any_failed);
            if (!rank0) return rc;
        }
    }
    if (!rc && *was_interrupted) {
        printf("sweep: interrupted; the runs wrote their checkpoints: the same command finishes the grid\n");
        return LRC_OK;
    }
    if (!rc && a->point >= 0) return LRC_OK;
    return rc ? rc : write_table(a, jsonl, err);
}
