/* params.c — seeded random numbers, parameter initialisation by each
 * parameter's init rule, binding a weights file to a graph, and an input
 * file's tokens or images checked. */
#include "lrc_runtime.h"

#include <assert.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void lrc_rng_seed(lrc_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t lrc_rng_next(lrc_rng *r)
{
    uint64_t *s = r->s, result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double lrc_rng_uniform(lrc_rng *r) { return (double)(lrc_rng_next(r) >> 11) * 0x1.0p-53; }

double lrc_rng_normal(lrc_rng *r)
{
    double u1 = 1.0 - lrc_rng_uniform(r); /* (0, 1]: log stays finite */
    double u2 = lrc_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* FNV-1a, then mixed with the seed: the per-parameter stream. */
uint64_t lrc_hash_str(const char *s, uint64_t seed)
{
    uint64_t x = lrc_fnv1a(LRC_FNV_SEED, s, strlen(s)) ^ seed;
    return splitmix64(&x);
}

static void fill(lrc_tensor *t, const lrc_node *n, uint64_t seed)
{
    float *d = t->data;
    int64_t count = lrc_shape_numel(&t->shape);
    double std = 0;
    switch (n->init.kind) {
    case LRC_INIT_ZEROS: return;
    case LRC_INIT_ONES:
    case LRC_INIT_CONST:
        for (int64_t i = 0; i < count; i++) d[i] = (float)(n->init.kind == LRC_INIT_ONES ? 1.0 : n->init.value);
        return;
    case LRC_INIT_IDENTITY:
        for (int64_t i = 0; i < t->shape.dim[0]; i++) d[i * t->shape.dim[1] + i] = 1.0f;
        return;
    case LRC_INIT_NORMAL: std = n->init.value; break;
    case LRC_INIT_XAVIER_NORMAL: /* [out, in]: fan_out = dim 0, fan_in = dim 1 */
        std = n->init.value * sqrt(2.0 / (double)(t->shape.dim[0] + t->shape.dim[1]));
        break;
    default: return;
    }
    lrc_rng r;
    lrc_rng_seed(&r, lrc_hash_str(n->name, seed));
    for (int64_t i = 0; i < count; i++) d[i] = (float)(std * lrc_rng_normal(&r));
}

typedef struct {
    lrc_tensor *t;
    const lrc_node *n;
} init_item;

typedef struct {
    init_item *items;
    int count;
    uint64_t seed;
    atomic_int next;
} init_job;

/* A worker takes the next tensor until none is left: the tensors differ in
 * size by thousands of times (an embedding against a norm's gain), so fixed
 * chunks of the list would leave threads idle. Each tensor has its own
 * stream, so which thread fills it changes nothing. */
static void init_part(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)begin, (void)end, (void)thread;
    init_job *j = ctx;
    for (int i; (i = atomic_fetch_add(&j->next, 1)) < j->count;) fill(j->items[i].t, j->items[i].n, j->seed);
}

static int by_size_desc(const void *a, const void *b)
{
    size_t x = ((const init_item *)a)->t->nbytes, y = ((const init_item *)b)->t->nbytes;
    return (x < y) - (x > y);
}

int lrc_params_init(const lrc_graph *g, uint64_t seed, lrc_pool *pool, lrc_tensor_set *out, lrc_err *err)
{
    lrc_tensor_set_init(out);
    init_job j = {lrc_malloc((size_t)g->n_nodes * sizeof *j.items + 8), 0, seed, 0};
    if (!j.items) return lrc_err_nomem(err, "initializing the parameters of a graph of %d nodes", g->n_nodes);
    for (int i = 0; i < g->n_nodes; i++) {
        const lrc_node *n = &g->nodes[i];
        if (n->op != LRC_OP_PARAM) continue;
        lrc_tensor *t = lrc_tensor_new(n->name, LRC_F32, &n->shape, err);
        if (!t || lrc_tensor_set_add(out, t, err)) {
            lrc_tensor_set_clear(out);
            free(j.items);
            return LRC_EUSER;
        }
        j.items[j.count++] = (init_item){t, n};
    }
    /* the largest first, so that the last tensor a thread takes is a small one */
    qsort(j.items, (size_t)j.count, sizeof *j.items, by_size_desc);
    int rc = LRC_OK;
    if (pool) rc = lrc_pool_run(pool, init_part, &j, lrc_pool_threads(pool), err);
    else init_part(&j, 0, 1, 0);
    free(j.items);
    if (rc) lrc_tensor_set_clear(out);
    return rc;
}

/* The index of name among the set's tensors not yet taken (NULL), or -1. */
static int take_index(const lrc_tensor_set *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (s->items[i] && !strcmp(s->items[i]->name, name)) return i;
    return -1;
}

int lrc_params_bind(const lrc_graph *g, lrc_tensor_set *file, const char *what, lrc_tensor_set *out, lrc_err *err)
{
    char b1[96], b2[96];
    lrc_tensor_set_init(out);
    /* every check first: a refused file is left as it was */
    for (int i = 0; i < g->n_nodes; i++) {
        const lrc_node *n = &g->nodes[i];
        if (n->op != LRC_OP_PARAM) continue;
        const lrc_tensor *t = lrc_tensor_set_find(file, n->name);
        if (!t) {
            bool any = false; /* none of the model's names: another model's weights */
            for (int j = 0; j < file->n && !any; j++) any = lrc_graph_find(g, LRC_OP_PARAM, file->items[j]->name) >= 0;
            if (!any && file->n > 0)
                return lrc_err_set(err, "%s holds none of this model's parameters (it has '%s', the model wants '%s'): "
                                        "weights of another model?", what, file->items[0]->name, n->name);
            return lrc_err_set(err, "%s: missing tensor '%s' (%s)", what, n->name,
                               lrc_shape_str(&n->shape, b1, sizeof b1));
        }
        if (!lrc_shape_eq(&t->shape, &n->shape) || t->dtype == LRC_I32 || t->dtype == LRC_U8)
            return lrc_err_set(err, "%s: tensor '%s' is %s %s, the model expects a float tensor %s", what,
                               n->name, lrc_dtype_st_name(t->dtype), lrc_shape_str(&t->shape, b1, sizeof b1),
                               lrc_shape_str(&n->shape, b2, sizeof b2));
    }
    for (int i = 0; i < file->n; i++)
        if (lrc_graph_find(g, LRC_OP_PARAM, file->items[i]->name) < 0)
            return lrc_err_set(err, "%s: extra tensor '%s' that the model does not have", what,
                               file->items[i]->name);
    int rc = LRC_OK;
    for (int i = 0; i < g->n_nodes && !rc; i++) {
        const lrc_node *n = &g->nodes[i];
        if (n->op != LRC_OP_PARAM) continue;
        int j = take_index(file, n->name);
        assert(j >= 0); /* checked above, and the graph's names are distinct */
        lrc_tensor *f = file->items[j];
        if (f->dtype == LRC_F32) file->items[j] = NULL; /* moved */
        else if (!(f = lrc_tensor_to_f32(f, err))) rc = LRC_EUSER;
        if (f) rc = lrc_tensor_set_add(out, f, err);
    }
    int kept = 0; /* file keeps what was not moved */
    for (int i = 0; i < file->n; i++)
        if (file->items[i]) file->items[kept++] = file->items[i];
    file->n = kept;
    if (rc) lrc_tensor_set_clear(out);
    return rc;
}

int lrc_tokens_check(const lrc_tensor_set *in, const char *path, int64_t vocab, const lrc_tensor **out, lrc_err *err)
{
    char b[96];
    const lrc_tensor *im = lrc_tensor_set_find(in, "images");
    if (im) {
        if (im->dtype != LRC_F32 || im->shape.ndim != 4)
            return lrc_err_set(err, "%s: 'images' is %s %s, expected F32 [B, C, H, W]", path, lrc_dtype_st_name(im->dtype),
                               lrc_shape_str(&im->shape, b, sizeof b));
        *out = im;
        return LRC_OK;
    }
    const lrc_tensor *t = lrc_tensor_set_find(in, "tokens");
    if (!t)
        return lrc_err_set(err, "%s: no tensor 'tokens' (I32 [B, T]) or 'images' (F32 [B, C, H, W])%s%s%s", path,
                           in->n ? "; it holds '" : "", in->n ? in->items[0]->name : "", in->n ? "'" : "");
    if (t->dtype != LRC_I32 || t->shape.ndim != 2 || t->shape.dim[0] < 1 || t->shape.dim[1] < 1)
        return lrc_err_set(err, "%s: 'tokens' is %s %s, expected I32 [B, T] with B, T >= 1", path,
                           lrc_dtype_st_name(t->dtype), lrc_shape_str(&t->shape, b, sizeof b));
    const int32_t *ids = t->data;
    int64_t n = lrc_shape_numel(&t->shape);
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return lrc_err_set(err, "%s: tokens[%lld,%lld] = %d is outside the vocabulary [0, %lld)", path,
                               (long long)(i / t->shape.dim[1]), (long long)(i % t->shape.dim[1]), ids[i],
                               (long long)vocab);
    *out = t;
    return LRC_OK;
}
