/* train_dist.c — lrc train's ranks under mpirun (docs/distributed.md): the
 * global batch split into micro-batches over the ranks, the points where the
 * ranks agree to go on (their setup succeeded, their options and their model
 * are the same) and what only rank 0 does. One process without mpirun never
 * gets here past cli_dist_open, which leaves it NULL. */
#include "train_dist.h"

#include <cjson/cJSON.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a failure every rank knows of (at an agreement point): all may finalize */
static bool settled;

int cli_dist_open(lrc_dist **d, cli_args *a, lrc_err *err)
{
    if (lrc_dist_open(d, err)) return LRC_EUSER;
    if (!*d) return a->zero ? lrc_err_set(err, "--zero 1 shards AdamW's moments over MPI ranks: start lrc train with mpirun") : LRC_OK;
    int rank = lrc_dist_rank(*d), size = lrc_dist_size(*d);
    /* the progress, summary and compile lines are rank 0's; errors still reach stderr */
    if (rank != 0 && !freopen("/dev/null", "w", stdout)) return lrc_err_set(err, "rank %d: cannot close its output", rank);
    /* the cores of this machine shared among the ranks on it, unless --threads */
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    int64_t here = local ? atoll(local) : size, cores = lrc_pool_default_threads();
    if (a->threads <= 0) a->threads = here > 0 && cores / here > 1 ? cores / here : 1;
    return LRC_OK;
}

int cli_dist_split(lrc_dist *d, cli_args *a, bool resuming, lrc_err *err)
{
    int64_t size = lrc_dist_size(d);
    if (!d) return LRC_OK;
    if (resuming && a->accum % size)
        return lrc_err_set(err, "%s: a step of %lld micro-batches (run.json's accum) cannot be shared by %lld ranks", a->resume,
                           (long long)a->accum, (long long)size);
    if (resuming) return LRC_OK;
    if (a->batch % size)
        return lrc_err_set(err, "--batch %lld cannot be split over %lld ranks: give a batch that the rank count divides",
                           (long long)a->batch, (long long)size);
    /* run.json keeps the micro-batch and the step's count of them over all
     * ranks: one process with --accum resumes it, as any rank count that
     * divides that count does */
    a->batch /= size;
    a->accum *= size;
    return LRC_OK;
}

static uint64_t hash_str(uint64_t h, const char *s)
{
    return lrc_fnv1a(h, s ? s : "(none)", strlen(s ? s : "(none)") + 1);
}

static uint64_t hash_num(uint64_t h, double x) { return lrc_fnv1a(h, &x, sizeof x); }

/* What every rank must agree on: the run's settings (not --threads, which
 * may differ per machine) */
static uint64_t options_hash(const cli_args *a)
{
    uint64_t h = hash_str(LRC_FNV_SEED, a->m.model);
    h = hash_str(h, a->m.preset);
    for (int i = 0; i < a->m.n_sets; i++) h = hash_str(h, a->m.sets[i]);
    const double nums[] = {(double)a->steps, a->lr, (double)a->batch, (double)a->seq, a->warmup, (double)a->eval_every,
                           (double)a->val_tokens, (double)a->seed, a->clip, (double)a->accum, a->weight_decay, a->decay_all,
                           (double)a->crop_pad, a->flip, (double)a->stop_after, (double)a->zero};
    for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) h = hash_num(h, nums[i]);
    h = hash_str(h, a->data);
    h = hash_str(h, a->tokenizer);
    h = hash_str(h, a->target);
    return hash_str(h, a->resume);
}

/* Every rank learns whether any failed: the lowest that did says why, the
 * others stop quietly (LRC_EQUIET), and no rank waits for one that left. */
static int agree_status(lrc_dist *d, int rc, lrc_err *err)
{
    int size = lrc_dist_size(d), rank = lrc_dist_rank(d), first = rc ? size - rank : 0;
    if (lrc_dist_max_int(d, &first, 1, err)) return LRC_EUSER;
    settled = first > 0;
    return !settled ? LRC_OK : size - first == rank ? rc : LRC_EQUIET;
}

int cli_dist_agree_options(lrc_dist *d, int rc, const cli_args *a, lrc_err *err)
{
    if (!d || (rc = agree_status(d, rc, err))) return rc;
    int differ;
    if (lrc_dist_agree(d, options_hash(a), &differ, err)) return LRC_EUSER;
    if (differ < 0 && !(a->zero && !strcmp(a->target, "cuda"))) return LRC_OK;
    settled = true; /* the options are the same on every rank: each stops here */
    if (lrc_dist_rank(d) != 0) return LRC_EQUIET;
    if (differ < 0) /* before the kernels compile; trainer.c's check is the library's */
        return lrc_err_set(err, "--zero 1 shards the cpu's AdamW: on --target cuda it has no effect, leave it out");
    return lrc_err_set(err, "rank %d's options differ from rank 0's: every rank must run lrc train with the same model and options",
                       differ);
}

int cli_dist_agree_model(lrc_dist *d, int rc, const lrc_graph *g, const lrc_train_state *st, lrc_err *err)
{
    if (!d || (rc = agree_status(d, rc, err))) return rc;
    uint64_t h = LRC_FNV_SEED;
    for (int i = 0; i < g->n_nodes; i++) {
        const lrc_node *n = &g->nodes[i];
        int64_t head[4] = {n->op, n->dtype, n->shape.ndim, n->n_in};
        h = lrc_fnv1a(h, head, sizeof head);
        h = lrc_fnv1a(h, n->shape.dim, (size_t)n->shape.ndim * sizeof *n->shape.dim);
        h = lrc_fnv1a(h, n->in, (size_t)n->n_in * sizeof *n->in);
    }
    /* the parameters as initialised or loaded, with the moments, the step and the random state */
    for (int i = 0; i < st->ck.n; i++) h = lrc_fnv1a(hash_str(h, st->ck.items[i]->name), st->ck.items[i]->data, st->ck.items[i]->nbytes);
    h = lrc_fnv1a(h, &st->step, sizeof st->step);
    h = lrc_fnv1a(h, &st->rng, sizeof st->rng);
    int differ;
    if (lrc_dist_agree(d, h, &differ, err)) return LRC_EUSER;
    if (differ < 0) return LRC_OK;
    settled = true;
    if (lrc_dist_rank(d) != 0) return LRC_EQUIET;
    return lrc_err_set(err, "rank %d's model differs from rank 0's (its graph, its initial weights or the checkpoint it read): "
                            "every rank must see the same model files and run directory",
                       differ);
}

int cli_dist_val_sums(lrc_dist *d, double *loss, double *nats, double *bytes, lrc_err *err)
{
    double sums[3] = {*loss, *nats, *bytes};
    if (!d || lrc_dist_sum_f64(d, sums, 3, err)) return d ? LRC_EUSER : LRC_OK;
    *loss = sums[0], *nats = sums[1], *bytes = sums[2];
    return LRC_OK;
}

void cli_dist_step_comm(lrc_dist *d, double step_s, cJSON *metrics, char *line, size_t n)
{
    static double last;
    line[0] = 0;
    if (!d) return;
    double now = lrc_dist_comm_s(d), s = now - last;
    last = now;
    cJSON_AddNumberToObject(metrics, "allreduce_s", s);
    snprintf(line, n, "  all-reduce %.1f ms (%.0f%%)", 1e3 * s, step_s > 0 ? 100 * s / step_s : 0);
}

void cli_dist_name_rank(lrc_dist *d, int rc, lrc_err *err)
{
    if (d && rc && rc != LRC_EQUIET && lrc_dist_rank(d) != 0) lrc_err_prefix(err, "rank %d", lrc_dist_rank(d));
}

int cli_dist_close(lrc_dist *d, int rc, int status)
{
    /* after a failure that the ranks did not agree on, others may wait for
     * this one in a collective: no MPI_Finalize, which would wait for them.
     * Else MPI_Finalize waits for every rank, so that none exits (and has
     * mpirun end the others) before the one that failed printed why. */
    lrc_dist_close(d, rc == LRC_OK || settled);
    return status;
}

int cli_dist_opt_bytes(lrc_dist *d, size_t bytes, lrc_err *err)
{
    int size = lrc_dist_size(d);
    if (!d) return LRC_OK;
    double *b = lrc_calloc((size_t)size, sizeof *b);
    if (!b) return lrc_err_nomem(err, "for %d ranks' counts", size);
    b[lrc_dist_rank(d)] = (double)bytes;
    int rc = lrc_dist_sum_f64(d, b, size, err);
    if (!rc) {
        printf("optimizer state (AdamW's moments) a rank, in bytes:");
        for (int r = 0; r < size; r++) printf(" %.0f", b[r]);
        printf("\n");
    }
    free(b);
    return rc;
}
