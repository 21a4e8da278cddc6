/* zero.c — --zero 1: AdamW's moments sharded over the ranks (ZeRO's first
 * stage, docs/distributed.md). The parameters, end to end, are cut into one
 * contiguous shard a rank (sizes within one element of each other). A rank
 * keeps its shard's moments alone and updates its shard of the weights;
 * then each shard goes from its rank to every rank (MPI_Bcast per tensor
 * and rank), so that every rank holds the whole new weights. A checkpoint
 * is whole: rank 0 gathers the moments (MPI_Send to it) before it writes
 * one, and frees them at the next step. */
#include "lrc_runtime.h"

#include <stdlib.h>
#include <string.h>

struct lrc_zero {
    lrc_dist *d;
    lrc_train_state *st;
    int n, size;
    int64_t *at;            /* where tensor i begins, end to end */
    int64_t *lo, *hi;       /* rank r's shard: the elements [lo[r], hi[r]) */
    lrc_param_spans *spans; /* this rank's shard */
    lrc_tensor **m, **v;    /* per tensor, its elements in this rank's shard (NULL: none) */
    size_t bytes;           /* of m and v */
    bool whole;             /* rank 0 holds the whole moments in st, gathered for a checkpoint */
};

/* Tensor i's elements in rank r's shard: [*a, *b), empty when *a == *b */
static void piece(const lrc_zero *z, int i, int r, int64_t *a, int64_t *b)
{
    int64_t num = lrc_shape_numel(&z->st->params.items[i]->shape), at = z->at[i];
    *a = z->lo[r] > at ? z->lo[r] - at : 0;
    *b = z->hi[r] < at + num ? z->hi[r] - at : num;
    if (*b < *a) *b = *a;
}

/* The moments' storage in st (whole) freed, or made again (zeroed) */
static void drop_whole(lrc_train_state *st, int n)
{
    for (int i = 0; i < n; i++) free(st->m[i]->data), free(st->v[i]->data), st->m[i]->data = st->v[i]->data = NULL;
}

static int make_whole(lrc_train_state *st, int n, lrc_err *err)
{
    for (int i = 0; i < n; i++) {
        if (!st->m[i]->data) st->m[i]->data = lrc_calloc(1, st->m[i]->nbytes);
        if (!st->v[i]->data) st->v[i]->data = lrc_calloc(1, st->v[i]->nbytes);
        if (!st->m[i]->data || !st->v[i]->data) return lrc_err_nomem(err, "for the moments of '%s' (a checkpoint)", st->m[i]->name);
    }
    return LRC_OK;
}

void lrc_zero_free(lrc_zero *z)
{
    if (!z) return;
    for (int i = 0; z->m && i < z->n; i++) lrc_tensor_free(z->m[i]), lrc_tensor_free(z->v[i]);
    free(z->m), free(z->v), free(z->at), free(z->lo), free(z->hi);
    lrc_param_spans_free(z->spans);
    free(z);
}

/* This rank's shard of st's moments copied out, and st's freed */
static int take_shard(lrc_zero *z, int me, lrc_err *err)
{
    for (int i = 0; i < z->n; i++) {
        int64_t a, b;
        piece(z, i, me, &a, &b);
        if (a == b) continue;
        lrc_shape sh = {1, {b - a}};
        if (!(z->m[i] = lrc_tensor_new(z->st->m[i]->name, LRC_F32, &sh, err)) || !(z->v[i] = lrc_tensor_new(z->st->v[i]->name, LRC_F32, &sh, err)))
            return LRC_EUSER;
        memcpy(z->m[i]->data, (const float *)z->st->m[i]->data + a, z->m[i]->nbytes);
        memcpy(z->v[i]->data, (const float *)z->st->v[i]->data + a, z->v[i]->nbytes);
        z->bytes += z->m[i]->nbytes + z->v[i]->nbytes;
    }
    drop_whole(z->st, z->n);
    return LRC_OK;
}

int lrc_zero_new(lrc_dist *d, lrc_train_state *st, lrc_zero **out, lrc_err *err)
{
    *out = NULL;
    lrc_zero *z = lrc_calloc(1, sizeof *z);
    if (!z) return lrc_err_nomem(err, "for --zero's shards");
    z->d = d, z->st = st, z->n = st->params.n, z->size = lrc_dist_size(d);
    z->at = lrc_calloc((size_t)z->n + 1, sizeof *z->at);
    z->lo = lrc_calloc((size_t)z->size, sizeof *z->lo);
    z->hi = lrc_calloc((size_t)z->size, sizeof *z->hi);
    z->m = lrc_calloc((size_t)z->n + 1, sizeof *z->m);
    z->v = lrc_calloc((size_t)z->n + 1, sizeof *z->v);
    if (!z->at || !z->lo || !z->hi || !z->m || !z->v) return lrc_zero_free(z), lrc_err_nomem(err, "for --zero's shards");
    int64_t total = 0;
    for (int i = 0; i < z->n; i++) z->at[i] = total, total += lrc_shape_numel(&st->params.items[i]->shape);
    for (int r = 0; r < z->size; r++) z->lo[r] = total / z->size * r + (r < total % z->size ? r : total % z->size);
    for (int r = 0; r < z->size; r++) z->hi[r] = r + 1 < z->size ? z->lo[r + 1] : total;
    int me = lrc_dist_rank(d);
    if (!(z->spans = lrc_param_spans_shard(st->params.items, z->n, z->lo[me], z->hi[me])))
        return lrc_zero_free(z), lrc_err_nomem(err, "for --zero's spans");
    if (take_shard(z, me, err)) return lrc_zero_free(z), LRC_EUSER;
    *out = z;
    return LRC_OK;
}

size_t lrc_zero_bytes(const lrc_zero *z) { return z->bytes; }

/* The gradients are whole on every rank: lrc_dist_sum_tensors all-reduced
 * them, not a reduce-scatter, so that the clip's global norm and the check
 * for a gradient that is not finite stay the plain run's, with no further
 * collective, and the update is that of one process bit for bit. */
int lrc_zero_step(lrc_zero *z, const lrc_adamw_cfg *c, lrc_pool *pool, int64_t step, double lr, double norm, lrc_tensor **params,
                  lrc_tensor **grads, lrc_err *err)
{
    if (z->whole) drop_whole(z->st, z->n), z->whole = false;
    if (lrc_adamw_step(c, pool, z->spans, step, lr, norm, params, grads, z->m, z->v, err)) return LRC_EUSER;
    for (int i = 0; i < z->n; i++)
        for (int r = 0; r < z->size; r++) {
            int64_t a, b;
            piece(z, i, r, &a, &b);
            if (a < b && lrc_dist_bcast_f32(z->d, (float *)params[i]->data + a, (size_t)(b - a), r, err)) return LRC_EUSER;
        }
    return LRC_OK;
}

int lrc_zero_gather(lrc_zero *z, lrc_err *err)
{
    int me = lrc_dist_rank(z->d);
    if (me == 0 && make_whole(z->st, z->n, err)) return LRC_EUSER;
    for (int i = 0; i < z->n; i++)
        for (int r = 0; r < z->size; r++) {
            int64_t a, b;
            piece(z, i, r, &a, &b);
            if (a == b || (me != 0 && me != r)) continue;
            for (int k = 0; k < 2; k++) {
                lrc_tensor *whole = k ? z->st->v[i] : z->st->m[i], *mine = k ? z->v[i] : z->m[i];
                int rc = LRC_OK;
                if (me == 0 && r == 0) memcpy((float *)whole->data + a, mine->data, mine->nbytes);
                else if (me == 0) rc = lrc_dist_recv_f32(z->d, (float *)whole->data + a, (size_t)(b - a), r, err);
                else rc = lrc_dist_send_f32(z->d, mine->data, (size_t)(b - a), 0, err);
                if (rc) return rc;
            }
        }
    z->whole = me == 0;
    return LRC_OK;
}
