/* train.c — what training needs besides gradients: text as token ids with
 * a deterministic train/validation split and seeded batches, AdamW over all
 * parameters, the learning-rate schedule and gradient clipping. Plain C on
 * the runtime's thread pool; deterministic for a fixed thread count. */
#include "lrc_runtime.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Validation is every 20th block of 64 Ki tokens (or of four sequences, when
 * longer): spread through the text, so it follows the training data's
 * distribution instead of being its last book; no window ever crosses
 * from one split into the other. */
static int text_from_ids(lrc_text *t, const int32_t *ids, int64_t n, int64_t seq, const char *what, const char *unit,
                         lrc_err *err)
{
    memset(t, 0, sizeof *t);
    int64_t need = 2 * (seq + 1), bs = (int64_t)1 << 16;
    if (bs < 4 * (seq + 1)) bs = 4 * (seq + 1);
    if (n < need * 2)
        return lrc_err_set(err, "%s: %lld %s of text, too few for sequences of %lld (at least %lld)", what,
                           (long long)n, unit, (long long)seq, (long long)(need * 2));
    int64_t nb = (n + bs - 1) / bs;
    if (nb < 2) bs = n / 2, nb = 2; /* a short text: its second half is validation */
    if (!(t->tok = lrc_malloc((size_t)n * sizeof *t->tok))) return lrc_err_nomem(err, "for %s: %lld %s of text", what, (long long)n, unit);
    memcpy(t->tok, ids, (size_t)n * sizeof *t->tok);
    t->n = n;
    t->block = bs;
    t->n_blocks = nb;
    for (int split = 0; split < 2; split++) {
        if (!(t->cum[split] = lrc_calloc((size_t)nb + 1, sizeof(int64_t)))) {
            lrc_text_free(t);
            return lrc_err_nomem(err, "for %s: the blocks of %lld %s of text", what, (long long)n, unit);
        }
        int64_t total = 0;
        for (int64_t i = 0; i < nb; i++) {
            int64_t lo = i * bs, hi = i == nb - 1 ? n : lo + bs;
            bool val = nb >= 20 ? i % 20 == 19 : i == nb - 1;
            if (val == (split == 1) && hi - lo > seq + 1) total += hi - lo - seq - 1 + 1;
            t->cum[split][i + 1] = total;
        }
        if (total == 0) {
            lrc_text_free(t);
            return lrc_err_set(err, "%s: %lld %s of text leave no %s window of %lld", what, (long long)n, unit,
                               split ? "validation" : "training", (long long)(seq + 1));
        }
    }
    t->n_train = t->cum[0][nb];
    return LRC_OK;
}

int lrc_text_from_ids(lrc_text *t, const int32_t *ids, int64_t n, int64_t seq, const char *what, lrc_err *err)
{
    return text_from_ids(t, ids, n, seq, what, "tokens", err);
}

int lrc_text_from_bytes(lrc_text *t, const uint8_t *bytes, int64_t n, int64_t seq, const char *what, lrc_err *err)
{
    int32_t *ids = lrc_malloc((size_t)(n > 0 ? n : 1) * sizeof *ids);
    if (!ids) return lrc_err_nomem(err, "for %s: %lld bytes of text as ids", what, (long long)n);
    for (int64_t i = 0; i < n; i++) ids[i] = bytes[i];
    int rc = text_from_ids(t, ids, n, seq, what, "bytes", err);
    free(ids);
    return rc;
}

int lrc_text_load(lrc_text *t, const char *path, int64_t seq, lrc_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return lrc_err_set(err, "%s: cannot open: %s", path, strerror(errno));
    size_t len = 0;
    uint8_t *buf = (uint8_t *)lrc_read_all(f, &len);
    bool nomem = !buf && errno == ENOMEM;
    fclose(f);
    int rc = nomem ? lrc_err_nomem(err, "reading %s", path)
             : !buf ? lrc_err_set(err, "%s: read error", path)
                    : lrc_text_from_bytes(t, buf, (int64_t)len, seq, path, err);
    free(buf);
    return rc;
}

void lrc_text_free(lrc_text *t)
{
    free(t->tok);
    free(t->cum[0]);
    free(t->cum[1]);
    memset(t, 0, sizeof *t);
}

/* Window r of a split (r < cum[n_blocks]) into row b: tokens and the next ones */
static void text_window(const lrc_text *t, bool validation, int64_t r, int64_t b, int64_t T, int32_t *tokens, int32_t *labels)
{
    const int64_t *cum = t->cum[validation];
    int64_t lo = 0, hi = t->n_blocks;
    while (hi - lo > 1) { /* the block i with cum[i] <= r < cum[i + 1] */
        int64_t mid = (lo + hi) / 2;
        if (cum[mid] <= r) lo = mid;
        else hi = mid;
    }
    int64_t start = lo * t->block + (r - cum[lo]);
    for (int64_t i = 0; i < T; i++) {
        tokens[b * T + i] = t->tok[start + i];
        labels[b * T + i] = t->tok[start + i + 1];
    }
}

void lrc_text_batch(const lrc_text *t, bool validation, int64_t B, int64_t T, lrc_rng *rng, int32_t *tokens,
                    int32_t *labels)
{
    /* window starts uniform over all of the split's windows */
    for (int64_t b = 0; b < B; b++)
        text_window(t, validation, (int64_t)(lrc_rng_next(rng) % (uint64_t)t->cum[validation][t->n_blocks]), b, T, tokens, labels);
}

void lrc_text_val_windows(const lrc_text *t, int64_t first, int64_t B, int64_t T, int32_t *tokens, int32_t *labels)
{
    int64_t n = t->cum[1][t->n_blocks];
    for (int64_t b = 0; b < B; b++) text_window(t, true, (first + b) * T % n, b, T, tokens, labels);
}

double lrc_lr_at(const lrc_schedule_cfg *s, int64_t step)
{
    /* linear warm-up to the peak, then cosine down to floor x peak */
    int64_t warm = (int64_t)(s->warmup * (double)s->steps);
    if (step < warm) return s->peak * (double)(step + 1) / (double)warm;
    double p = s->steps > warm ? (double)(step - warm) / (double)(s->steps - warm) : 1.0;
    if (p > 1) p = 1;
    return s->peak * (s->floor + (1 - s->floor) * 0.5 * (1 + cos(M_PI * p)));
}

/* The optimizer's passes go over all parameters in spans of at most SPAN
 * elements: the two big embedding matrices split across threads like the
 * rest, and partial sums combine in span order whatever the thread count. */
#define SPAN ((int64_t)1 << 16)
/* Floats ahead that the passes over the gradients and moments ask the
 * memory for: the gradients come from memory, and a core's own misses in
 * flight did not cover its latency (the check's loop alone over 167 MB, two threads,
 * in a test program: 12-14 ms without, 9.3-10.2 ms with) */
#define PREFETCH 256

typedef struct {
    int t;
    int64_t lo, hi;
} span;

/* Made once per run (they depend on the shapes alone), with the per-span
 * partial results of the gradient check. */
struct lrc_param_spans {
    span *s;
    int64_t n;
    int n_tensors;
    double *sq;
    bool *bad;
    int64_t *moff; /* a shard's: per tensor, the element its moments begin at; NULL: whole tensors */
};

/* Tensor i's elements in [lo, hi) of all the tensors end to end */
static void overlap(lrc_tensor *const *ts, int i, int64_t at, int64_t lo, int64_t hi, int64_t *a, int64_t *b)
{
    int64_t num = lrc_shape_numel(&ts[i]->shape);
    *a = lo > at ? lo - at : 0;
    *b = hi < at + num ? hi - at : num;
    if (*b < *a) *b = *a;
}

lrc_param_spans *lrc_param_spans_shard(lrc_tensor *const *ts, int n, int64_t lo, int64_t hi)
{
    lrc_param_spans *ps = lrc_calloc(1, sizeof *ps);
    if (!ps) return NULL;
    int64_t at = 0, a, b;
    for (int i = 0; i < n; at += lrc_shape_numel(&ts[i]->shape), i++) overlap(ts, i, at, lo, hi, &a, &b), ps->n += (b - a + SPAN - 1) / SPAN;
    ps->s = lrc_calloc((size_t)ps->n + 1, sizeof *ps->s);
    ps->sq = lrc_calloc((size_t)ps->n + 1, sizeof *ps->sq);
    ps->bad = lrc_calloc((size_t)ps->n + 1, sizeof *ps->bad);
    ps->moff = lrc_calloc((size_t)n + 1, sizeof *ps->moff);
    if (!ps->s || !ps->sq || !ps->bad || !ps->moff) {
        lrc_param_spans_free(ps);
        return NULL;
    }
    ps->n_tensors = n;
    int64_t k = 0;
    at = 0;
    for (int i = 0; i < n; at += lrc_shape_numel(&ts[i]->shape), i++) {
        overlap(ts, i, at, lo, hi, &a, &b);
        ps->moff[i] = a;
        for (int64_t s = a; s < b; s += SPAN) ps->s[k++] = (span){i, s, s + SPAN < b ? s + SPAN : b};
    }
    return ps;
}

lrc_param_spans *lrc_param_spans_new(lrc_tensor *const *ts, int n)
{
    lrc_param_spans *ps = lrc_param_spans_shard(ts, n, 0, INT64_MAX);
    if (ps) free(ps->moff), ps->moff = NULL;
    return ps;
}

void lrc_param_spans_free(lrc_param_spans *ps)
{
    if (!ps) return;
    free(ps->s);
    free(ps->sq);
    free(ps->bad);
    free(ps->moff);
    free(ps);
}

typedef struct {
    const span *s;
    lrc_tensor **g;
    double *sq;
    bool *bad;
} check_job;

static void check_part(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    check_job *j = ctx;
    for (int64_t b = begin; b < end; b++) {
        const float *g = j->g[j->s[b].t]->data;
        /* eight partial sums, not one: one chain of dependent adds ran at
         * 4 cycles an element; these vectorise, in a fixed order */
        double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, sq = 0;
        int64_t k = j->s[b].lo, hi = j->s[b].hi;
        for (; k + 8 <= hi; k += 8) {
            if (k + PREFETCH < hi) __builtin_prefetch(g + k + PREFETCH);
            for (int i = 0; i < 8; i++) acc[i] += (double)g[k + i] * g[k + i];
        }
        for (; k < hi; k++) acc[0] += (double)g[k] * g[k];
        for (int i = 0; i < 8; i++) sq += acc[i];
        j->sq[b] = sq;
        j->bad[b] = !isfinite(sq); /* inf or nan in the span makes the sum so */
    }
}

int lrc_grads_check(lrc_pool *pool, lrc_param_spans *ps, lrc_tensor **grads, double *norm, int *bad, lrc_err *err)
{
    check_job j = {ps->s, grads, ps->sq, ps->bad};
    if (lrc_pool_run_stealing(pool, check_part, &j, ps->n, err)) return LRC_EUSER; /* each span's sum its own: any thread's */
    double sq = 0;
    *bad = -1;
    for (int64_t b = 0; b < ps->n; b++) {
        sq += ps->sq[b];
        if (ps->bad[b] && *bad < 0) *bad = ps->s[b].t;
    }
    *norm = sqrt(sq);
    return LRC_OK;
}

typedef struct {
    const lrc_adamw_cfg *c;
    const span *s;
    const int64_t *moff;
    lrc_tensor **p, **g, **m, **v;
    double lr, scale, bc1, bc2;
} adam_job;

/* One pass over p, g, m and v per element, in f32 in torch.optim.AdamW's
 * order (torch 1.13's _single_tensor_adamw): p * (1 - lr wd), then
 * m b1 + (1 - b1) g, v b2 + ((1 - b2) g) g, and
 * p + (-lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps). The scalars arrive as
 * PyTorch's do, computed in double and rounded to f32 once: (1 - beta) from
 * the f32 beta would be 1.f - 0.999f = 0.00099998713, not 0.0010000000475,
 * and v would sit 1.3e-5 below PyTorch's. The loop vectorises (this file is
 * built with -fno-math-errno so that sqrtf can), and the pass is bound by
 * the 28 bytes it moves per element. */
static void adam_span(float *restrict p, const float *restrict g, float *restrict m, float *restrict v, int64_t lo, int64_t hi,
                      const float hp[static 9])
{
    const float b1 = hp[0], c1 = hp[1], b2 = hp[2], c2 = hp[3], scale = hp[4], decay = hp[5], nstep = hp[6], sbc2 = hp[7],
                eps = hp[8];
    for (int64_t k0 = lo; k0 < hi; k0 += 16) { /* a cache line of each array at a time, asked for PREFETCH ahead */
        if (k0 + PREFETCH < hi) {
            __builtin_prefetch(g + k0 + PREFETCH);
            __builtin_prefetch(p + k0 + PREFETCH, 1);
            __builtin_prefetch(m + k0 + PREFETCH, 1);
            __builtin_prefetch(v + k0 + PREFETCH, 1);
        }
        for (int64_t k = k0, k1 = k0 + 16 < hi ? k0 + 16 : hi; k < k1; k++) {
            float gk = g[k] * scale;
            float mk = m[k] * b1 + c1 * gk, vk = v[k] * b2 + c2 * gk * gk;
            m[k] = mk;
            v[k] = vk;
            float pk = p[k] * decay; /* PyTorch rounds the decayed weight before the update */
            p[k] = pk + nstep * mk / (sqrtf(vk) / sbc2 + eps);
        }
    }
}

static void adam_part(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    adam_job *j = ctx;
    const lrc_adamw_cfg *c = j->c;
    for (int64_t b = begin; b < end; b++) {
        int i = j->s[b].t;
        /* decoupled weight decay, on matrices only unless asked otherwise */
        double wd = j->p[i]->shape.ndim >= 2 || c->decay_all ? c->weight_decay : 0;
        const float hp[9] = {(float)c->beta1, (float)(1 - c->beta1), (float)c->beta2, (float)(1 - c->beta2), (float)j->scale,
                             (float)(1 - j->lr * wd), (float)(-j->lr / j->bc1), (float)sqrt(j->bc2), (float)c->eps};
        int64_t off = j->moff ? j->moff[i] : 0; /* a shard's moments begin at its first element */
        adam_span((float *)j->p[i]->data + off, (const float *)j->g[i]->data + off, j->m[i]->data, j->v[i]->data, j->s[b].lo - off,
                  j->s[b].hi - off, hp);
    }
}

int lrc_adamw_step(const lrc_adamw_cfg *c, lrc_pool *pool, const lrc_param_spans *ps, int64_t step, double lr,
                   double grad_norm, lrc_tensor **params, lrc_tensor **grads, lrc_tensor **m, lrc_tensor **v, lrc_err *err)
{
    double scale = c->clip > 0 && grad_norm > c->clip ? c->clip / grad_norm : 1.0;
    /* the bias corrections in double, as PyTorch's 1 - beta ** step */
    adam_job j = {c, ps->s, ps->moff, params, grads, m, v, lr, scale, 1 - pow(c->beta1, (double)(step + 1)), 1 - pow(c->beta2, (double)(step + 1))};
    return lrc_pool_run_stealing(pool, adam_part, &j, ps->n, err); /* each element updated by one thread, a span by any */
}

/* ---- looped models -------------------------------------------------------- */

void lrc_fill_trunc_normal(float *x, int64_t n, double std, lrc_rng *r)
{
    for (int64_t i = 0; i < n; i++) {
        double v;
        do v = lrc_rng_normal(r);
        while (v < -3.0 || v > 3.0); /* rejection: the truncated law exactly */
        x[i] = (float)(std * v);
    }
}

void lrc_parcae_mask(float *mask, int64_t K, int64_t B, const int32_t *k, int64_t k_all)
{
    for (int64_t j = 0; j < K; j++)
        for (int64_t b = 0; b < B; b++) {
            bool run = j >= K - (k ? k[b] : k_all);
            mask[j * B + b] = run ? 1.0f : 0.0f;
            mask[(K + j) * B + b] = run ? 0.0f : 1.0f;
        }
}

int32_t lrc_poisson_at_least_1(double mu, lrc_rng *r)
{
    double limit = exp(-mu), p = 1.0;
    int32_t k = 0;
    do {
        k++;
        p *= lrc_rng_uniform(r);
    } while (p > limit && k < 100000);
    k--;
    return k < 1 ? 1 : k;
}
