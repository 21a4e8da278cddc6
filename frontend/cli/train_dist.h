/* train_dist.h — lrc train's ranks under mpirun (train_dist.c). Each takes
 * the NULL of one process and then does nothing. */
#ifndef LRC_TRAIN_DIST_H
#define LRC_TRAIN_DIST_H

#include "cli.h"

/* not an error of this rank: another failed, and said why */
enum { LRC_EQUIET = 3 };

/* The ranks, when mpirun started this process; ranks other than 0 print
 * nothing but errors, and --threads defaults to this machine's cores over
 * its ranks. */
int cli_dist_open(lrc_dist **d, cli_args *a, lrc_err *err);
/* A new run's --batch split over the ranks (run.json keeps the micro-batch
 * and, in accum, the step's micro-batches over all ranks), or a resumed
 * run's micro-batches shared by them. */
int cli_dist_split(lrc_dist *d, cli_args *a, bool resuming, lrc_err *err);
/* Agreement points, which every rank reaches with its rc: any rank's
 * failure stops all, and ranks whose options or model (graph, initial
 * state) differ from rank 0's are rank 0's one-line error. */
int cli_dist_agree_options(lrc_dist *d, int rc, const cli_args *a, lrc_err *err);
int cli_dist_agree_model(lrc_dist *d, int rc, const lrc_graph *g, const lrc_train_state *st, lrc_err *err);
/* The validation's sums over the ranks. */
int cli_dist_val_sums(lrc_dist *d, double *loss, double *nats, double *bytes, lrc_err *err);
/* The seconds of the gradients' all-reduce since the last call, in
 * metrics (allreduce_s) and in line, the progress line's words for them and
 * their share of step_s (empty for one process). */
struct cJSON;
void cli_dist_step_comm(lrc_dist *d, double step_s, struct cJSON *metrics, char *line, size_t n);
/* rc's error names the rank, where not rank 0 (before it is printed). */
/* Rank 0 prints the bytes of optimizer state each rank holds (--zero 1 shards them). */
int cli_dist_opt_bytes(lrc_dist *d, size_t bytes, lrc_err *err);
void cli_dist_name_rank(lrc_dist *d, int rc, lrc_err *err);
/* MPI closed, after the run ended with rc; returns the exit status. */
int cli_dist_close(lrc_dist *d, int rc, int status);

#endif
