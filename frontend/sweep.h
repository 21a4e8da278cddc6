/* sweep.h — lrc sweep's record of finished runs (SWEEP_DIR/sweep.jsonl) and
 * what the table makes of it (frontend/sweep_table.c). */
#ifndef LRC_SWEEP_H
#define LRC_SWEEP_H

#include "../ir/lrc_ir.h"

#include <stdbool.h>
#include <stdio.h>

/* One finished run of the grid: a line of sweep.jsonl. */
typedef struct {
    char *run;     /* its directory in the sweep, "norm=pre,lr=3e-3,seed=1" */
    char *arm;     /* the grid's values other than lr and seed, "norm=pre" ("" when none) */
    char *x;       /* the value of the plotted key (--plot-key), or NULL */
    double lr;
    long long seed;
    double loss;   /* the last validation loss; NAN when diverged */
    bool diverged; /* the loss or a gradient was not finite */
    double l0;     /* ln V: a model that learned nothing, what a diverged run counts as */
} cli_sweep_point;

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
} cli_sweep_arm;

void cli_sweep_points_free(cli_sweep_point *p, int n);
/* Reads sweep.jsonl: a one-line error naming the file and the line. */
int cli_sweep_read(const char *path, cli_sweep_point **out, int *n, lrc_err *err);
/* Appends one point to sweep.jsonl, flushed and synced. */
int cli_sweep_append(const char *path, const cli_sweep_point *p, lrc_err *err);
/* The arms of pts, in order of first appearance; arms[i].arm points into pts. */
int cli_sweep_arms(const cli_sweep_point *pts, int n, cli_sweep_arm **arms, int *n_arms);
/* The markdown table (sweep.md): the arms, then L(lr) per rate and arm. */
void cli_sweep_write_table(FILE *f, const cli_sweep_point *pts, int n, const cli_sweep_arm *arms, int n_arms);
/* Plots: the final loss against the rate, a curve per arm (Fig. 4 of the
 * paper), to png; with points that carry x, the loss at each arm's best
 * rate against x (Fig. 16), to png_x. */
int cli_sweep_plot(const cli_sweep_point *pts, int n, const cli_sweep_arm *arms, int n_arms, const char *png, const char *png_x,
                   const char *x_key, lrc_err *err);

#endif
