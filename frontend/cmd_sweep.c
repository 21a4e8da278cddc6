/* cmd_sweep.c — lrc sweep: a grid of lrc train runs over --grid KEY=V1,V2,...
 * (lr, seed or any config key), each an ordinary run directory in the
 * sweep's, run --jobs at a time by this same binary (fork and exec), with
 * the cores divided between them. A finished point is a line of
 * sweep.jsonl; a sweep started again skips those and resumes a stopped one
 * (lrc train --resume, bit for bit), so its table equals an uninterrupted
 * sweep's. Ctrl-C reaches the runs, which write their checkpoints. The
 * table and plots: frontend/sweep_table.c. */
#include "cli.h"
#include "sweep.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum { MAX_AXES = 8, MAX_JOBS = 64 };

typedef struct {
    char *key;
    char **vals;
    int n;
} grid_axis;

typedef struct {
    grid_axis axes[MAX_AXES];
    int n_axes;
    const char **specs; /* the --grid values, as given */
    int n_specs;
    char **train; /* MODEL and lrc train's options, given to every run */
    int n_train;
    const char *out, *plot_key;
    int jobs;
    bool table_only;
} sweep_args;

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

static const char *help =
    "usage: lrc sweep MODEL [--preset P] [--set KEY=VALUE]... --grid KEY=V1,V2,... [--grid ...]\n"
    "                 --steps N [lrc train's options] [--jobs N] [--plot-key KEY] -o SWEEP_DIR\n"
    "       lrc sweep --table SWEEP_DIR [--plot-key KEY]\n"
    "\n"
    "Trains every point of a grid: --grid lr=1e-3,3e-3,1e-2 --grid norm=pre,layerrope\n"
    "--grid seed=1,2 makes 12 runs. KEY is lr, seed or any config key (as --set);\n"
    "the other options go to every lrc train as they are (--lr or --seed alone fix\n"
    "one for all). Each point is a run directory SWEEP_DIR/KEY=V,KEY=V,...\n"
    "(its output in the same name with .log), --jobs at a time (default 1), the\n"
    "cores divided between them (--threads). An arm is a point's values other\n"
    "than lr and seed.\n"
    "\n"
    "SWEEP_DIR/sweep.jsonl gets a line per finished run: its last validation loss,\n"
    "or diverged (a loss or gradient not finite). Started again, the sweep skips\n"
    "those, resumes a stopped run (Ctrl-C stops them all, each with its\n"
    "checkpoint) and restarts one that stopped before its first checkpoint.\n"
    "\n"
    "SWEEP_DIR/sweep.md (printed too), per arm: eta*, the rate of the lowest\n"
    "L(rate) (the mean over seeds of min(loss, ln V), a diverged run counting as\n"
    "ln V); L*, that loss; the seeds' spread at eta*; the largest rate none of\n"
    "whose runs failed (diverged, or more than 1 nat above L*); the failed runs;\n"
    "and the sensitivity S of the LayerRoPE paper's Table 9, the mean of\n"
    "L(rate) - L* over the rates that every arm swept. Then L(rate) per rate and\n"
    "arm. SWEEP_DIR/sweep.png: the loss against the rate, a curve per arm; with\n"
    "--plot-key KEY (a grid key) also sweep-KEY.png: L* against KEY, a curve per\n"
    "arm less KEY. --table rewrites both from sweep.jsonl alone.\n";

static void args_free(sweep_args *a)
{
    for (int i = 0; i < a->n_axes; i++) {
        for (int j = 0; j < a->axes[i].n; j++) free(a->axes[i].vals[j]);
        free(a->axes[i].vals), free(a->axes[i].key);
    }
    free(a->train), free(a->specs);
}

/* --grid KEY=V1,V2,...: a one-line error (exit 1) on an empty grid, a rate
 * <= 0 or a seed that is not one */
static int add_axis(sweep_args *a, const char *spec, lrc_err *err)
{
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec) return lrc_err_set(err, "sweep: --grid %s: expected KEY=V1,V2,...", spec);
    if (a->n_axes == MAX_AXES) return lrc_err_set(err, "sweep: more than %d --grid keys", MAX_AXES);
    char *key = strndup(spec, (size_t)(eq - spec));
    for (int i = 0; i < a->n_axes; i++)
        if (!strcmp(a->axes[i].key, key)) {
            lrc_err_set(err, "sweep: --grid %s twice", key);
            return free(key), LRC_EUSER;
        }
    grid_axis *g = &a->axes[a->n_axes++];
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
static int check_grid(const sweep_args *a, lrc_err *err)
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

/* The sweep's own options that take a value (as "--grid V" or "--grid=V") */
static bool own_option(const char *s, size_t len)
{
    static const char *own[] = {"--grid", "--jobs", "-o", "--table", "--plot-key"};
    for (size_t k = 0; k < sizeof own / sizeof *own; k++)
        if (strlen(own[k]) == len && !strncmp(s, own[k], len)) return true;
    return false;
}

static int parse(int argc, char **argv, sweep_args *a, lrc_err *err)
{
    a->jobs = 1;
    a->train = lrc_xcalloc((size_t)argc + 1, sizeof *a->train);
    a->specs = lrc_xcalloc((size_t)argc + 1, sizeof *a->specs);
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *eq = strncmp(s, "--", 2) ? NULL : strchr(s, '='), *v;
        size_t len = eq ? (size_t)(eq - s) : strlen(s);
        if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
            fputs(help, stdout);
            return -1;
        } else if (own_option(s, len)) {
            if (!eq && i + 1 == argc) return cli_usage_error("sweep", "%s needs a value", s);
            v = eq ? eq + 1 : argv[++i];
            int64_t j;
            if (!strncmp(s, "--grid", len)) a->specs[a->n_specs++] = v; /* read after --help had its chance */
            if (!strncmp(s, "--jobs", len) && cli_parse_int(v, 1, &j)) return cli_usage_error("sweep", "--jobs %s: expected an integer >= 1", v);
            if (!strncmp(s, "--jobs", len)) a->jobs = (int)(j > MAX_JOBS ? MAX_JOBS : j);
            if (!strncmp(s, "-o", len) || !strncmp(s, "--table", len)) a->out = v, a->table_only = !strncmp(s, "--table", len);
            if (!strncmp(s, "--plot-key", len)) a->plot_key = v;
        } else if (!strncmp(s, "--threads", len) || !strncmp(s, "--resume", len)) {
            return cli_usage_error("sweep", "%.*s is the sweep's own to give each run", (int)len, s);
        } else {
            a->train[a->n_train++] = argv[i];
        }
    }
    for (int k = 0; k < a->n_specs; k++)
        if (add_axis(a, a->specs[k], err)) return cli_user_error(err);
    if (!a->out) return cli_usage_error("sweep", "needs -o SWEEP_DIR (or --table SWEEP_DIR)");
    if (a->table_only) return a->n_train || a->n_axes ? cli_usage_error("sweep", "--table takes only --plot-key") : 0;
    if (!a->n_axes) return cli_usage_error("sweep", "needs at least one --grid KEY=V1,V2,...");
    for (int i = 0; i < a->n_train; i++)
        for (int k = 0; k < a->n_axes; k++)
            if ((!strcmp(a->train[i], "--lr") && !strcmp(a->axes[k].key, "lr")) ||
                (!strcmp(a->train[i], "--seed") && !strcmp(a->axes[k].key, "seed")))
                return cli_usage_error("sweep", "%s and --grid %s both", a->train[i], a->axes[k].key);
    if (a->plot_key) {
        bool found = false;
        for (int k = 0; k < a->n_axes; k++) found |= !strcmp(a->axes[k].key, a->plot_key);
        if (!found || !strcmp(a->plot_key, "lr") || !strcmp(a->plot_key, "seed"))
            return cli_usage_error("sweep", "--plot-key %s: expected a --grid key other than lr and seed", a->plot_key);
    }
    return 0;
}

/* Point p of the grid (the first axis slowest): its values */
static void point_values(const sweep_args *a, int p, const char **vals)
{
    for (int k = a->n_axes - 1; k >= 0; k--) vals[k] = a->axes[k].vals[p % a->axes[k].n], p /= a->axes[k].n;
}

static void point_name(const sweep_args *a, const char **vals, bool arm_only, char *out, size_t cap)
{
    out[0] = 0;
    for (int k = 0; k < a->n_axes; k++) {
        if (arm_only && (!strcmp(a->axes[k].key, "lr") || !strcmp(a->axes[k].key, "seed"))) continue;
        snprintf(out + strlen(out), cap - strlen(out), "%s%s=%s", out[0] ? "," : "", a->axes[k].key, vals[k]);
    }
}

static bool recorded(const cli_sweep_point *done, int n_done, const char *run)
{
    for (int i = 0; i < n_done; i++)
        if (!strcmp(done[i].run, run)) return true;
    return false;
}

/* Runs lrc train for point p into dir (resuming it where it has a
 * checkpoint), its output into dir.log: the child's pid. */
static pid_t start_point(const sweep_args *a, const char **vals, const char *dir, int threads)
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
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        FILE *f = freopen(log, "a", stdout);
        if (!f || dup2(fileno(stdout), 2) < 0) _exit(127);
        execv("/proc/self/exe", argv);
        fprintf(stderr, "lrc sweep: cannot run lrc train: %s\n", strerror(errno));
        _exit(127);
    }
    free(argv);
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
static int run_l0(const char *dir, double *l0, lrc_err *err)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/run.json", dir);
    cli_args ra;
    cJSON *keep = NULL;
    memset(&ra, 0, sizeof ra);
    lrc_model m = {0};
    int rc = cli_run_load(dir, &ra, &keep, err) ? LRC_EUSER : cli_model_load("sweep", &ra.m, &m, err);
    free(ra.m.sets);
    cJSON_Delete(keep);
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
static int finish_point(const sweep_args *a, const char **vals, const char *dir, int status, cli_sweep_point *p, lrc_err *err)
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
    *p = (cli_sweep_point){.run = lrc_xstrdup(name), .arm = lrc_xstrdup(arm), .diverged = diverged, .loss = NAN};
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
    int rc = run_l0(dir, &p->l0, err);
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
static int reap(const sweep_args *a, job *jobs, int *n_jobs, const char *jsonl, bool *stop, bool *was_interrupted, lrc_err *err)
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
    const char *vals[MAX_AXES];
    char name[2048], dir[4200];
    point_values(a, jobs[j].point, vals);
    point_name(a, vals, false, name, sizeof name);
    snprintf(dir, sizeof dir, "%s/%s", a->out, name);
    jobs[j] = jobs[--*n_jobs];
    cli_sweep_point p;
    int r = finish_point(a, vals, dir, status, &p, err);
    if (r == 2) {
        *was_interrupted = *stop = true;
    } else if (r) {
        *stop = true, rc = r;
    } else {
        rc = cli_sweep_append(jsonl, &p, err);
        printf("sweep: %s: %s\n", name, p.diverged ? "diverged" : "done");
        if (!p.diverged) printf("       validation loss %.4f\n", p.loss);
        free(p.run), free(p.arm), free(p.x);
    }
    return rc;
}

/* The table (sweep.md, printed) and the plots from sweep.jsonl */
static int write_table(const sweep_args *a, const char *jsonl, lrc_err *err)
{
    cli_sweep_point *pts;
    int n;
    if (access(jsonl, F_OK)) return lrc_err_set(err, "sweep: %s is not a sweep (no sweep.jsonl)", a->out);
    if (cli_sweep_read(jsonl, &pts, &n, err)) return LRC_EUSER;
    if (n == 0) return cli_sweep_points_free(pts, n), lrc_err_set(err, "%s: no finished run", jsonl);
    cli_sweep_arm *arms;
    int n_arms;
    cli_sweep_arms(pts, n, &arms, &n_arms);
    char md[4200], png[4200], pngx[4200];
    snprintf(md, sizeof md, "%s/sweep.md", a->out);
    snprintf(png, sizeof png, "%s/sweep.png", a->out);
    if (a->plot_key) snprintf(pngx, sizeof pngx, "%s/sweep-%s.png", a->out, a->plot_key);
    FILE *f = fopen(md, "w");
    int rc = LRC_OK;
    if (!f) {
        rc = lrc_err_set(err, "cannot write %s: %s", md, strerror(errno));
    } else {
        cli_sweep_write_table(f, pts, n, arms, n_arms);
        if (fclose(f)) rc = lrc_err_set(err, "cannot write %s", md);
    }
    if (!rc) {
        cli_sweep_write_table(stdout, pts, n, arms, n_arms);
        rc = cli_sweep_plot(pts, n, arms, n_arms, png, a->plot_key ? pngx : NULL, a->plot_key, err);
        if (!rc) printf("\ntable %s, plot %s%s%s\n", md, png, a->plot_key ? ", " : "", a->plot_key ? pngx : "");
    }
    free(arms);
    cli_sweep_points_free(pts, n);
    return rc;
}

/* The grid's runs, --jobs at a time; points already in sweep.jsonl skipped */
static int run_grid(const sweep_args *a, const char *jsonl, bool *was_interrupted, lrc_err *err)
{
    cli_sweep_point *done = NULL;
    int n_done = 0, total = 1, rc = LRC_OK;
    if (access(jsonl, F_OK) == 0 && cli_sweep_read(jsonl, &done, &n_done, err)) return LRC_EUSER;
    for (int k = 0; k < a->n_axes; k++) total *= a->axes[k].n;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = (int)(cores / a->jobs > 1 ? cores / a->jobs : 1), n_jobs = 0, skipped = 0;
    job jobs[MAX_JOBS];
    bool stop = false;
    struct sigaction sa = {0}, old_sa;
    sa.sa_handler = on_sigint; /* no SA_RESTART: waitpid returns, and the runs hear of it */
    sigaction(SIGINT, &sa, &old_sa);
    for (int p = 0; p < total && !rc; p++) {
        const char *vals[MAX_AXES];
        char name[2048], dir[4200];
        point_values(a, p, vals);
        point_name(a, vals, false, name, sizeof name);
        if (recorded(done, n_done, name)) {
            skipped++;
            continue;
        }
        while (n_jobs == a->jobs && !rc) rc = reap(a, jobs, &n_jobs, jsonl, &stop, was_interrupted, err);
        if (stop || interrupted || rc) break;
        snprintf(dir, sizeof dir, "%s/%s", a->out, name);
        printf("sweep: %s (point %d of %d, %d threads)\n", name, p + 1, total, threads);
        jobs[n_jobs++] = (job){start_point(a, vals, dir, threads), p};
    }
    while (n_jobs > 0) {
        int r = reap(a, jobs, &n_jobs, jsonl, &stop, was_interrupted, err);
        if (!rc) rc = r;
    }
    *was_interrupted |= interrupted != 0;
    sigaction(SIGINT, &old_sa, NULL);
    if (skipped) printf("sweep: %d point%s already finished (sweep.jsonl)\n", skipped, skipped == 1 ? "" : "s");
    cli_sweep_points_free(done, n_done);
    return rc;
}

int cmd_sweep(int argc, char **argv)
{
    sweep_args a = {0};
    lrc_err err = {0};
    int st = parse(argc, argv, &a, &err);
    if (!st && !a.table_only && check_grid(&a, &err)) st = cli_user_error(&err);
    if (st) return args_free(&a), st < 0 ? 0 : st;
    char jsonl[4200];
    snprintf(jsonl, sizeof jsonl, "%s/sweep.jsonl", a.out);
    bool was_interrupted = false;
    int rc = LRC_OK;
    if (!a.table_only) {
        interrupted = 0;
        if ((cli_make_parents(a.out) || mkdir(a.out, 0755)) && errno != EEXIST) rc = lrc_err_set(&err, "cannot make %s: %s", a.out, strerror(errno));
        if (!rc) rc = run_grid(&a, jsonl, &was_interrupted, &err);
    }
    if (!rc && was_interrupted) {
        printf("sweep: interrupted; the runs wrote their checkpoints: the same command finishes the grid\n");
        args_free(&a);
        return 130;
    }
    if (!rc) rc = write_table(&a, jsonl, &err);
    args_free(&a);
    return rc ? cli_user_error(&err) : 0;
}
