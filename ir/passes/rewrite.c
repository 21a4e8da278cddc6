/* rewrite.c — the graph passes: gain folding (constant evaluation and
 * folding constant diagonal scales into matmul weights), common-subexpression
 * elimination and dead-code elimination (ir/passes/pipeline.c runs them). */
#include "lrc_passes.h"

#include <stdlib.h>
#include <string.h>

/* Constant subgraphs larger than this stay computed at run time. */
#define MAX_FOLD_ELEMENTS (16 << 20)

bool lrc_node_is_const(const lrc_graph *g, int id, const lrc_pass_ctx *ctx)
{
    const lrc_node *n = &g->nodes[id];
    return ctx && ctx->consts && n->op == LRC_OP_PARAM && lrc_tensor_set_find(ctx->consts, n->name);
}

/* Adds a copy of old node n with inputs renamed through map. */
static int copy_node(lrc_graph *ng, const lrc_node *n, const int *map, lrc_err *err)
{
    lrc_node p = *n;
    for (int k = 0; k < n->n_in; k++) p.in[k] = map[n->in[k]];
    return lrc_graph_add(ng, &p, err);
}

static int copy_outputs(lrc_graph *ng, const lrc_graph *g, const int *map, lrc_err *err)
{
    for (int i = 0; i < g->n_outputs; i++)
        if (lrc_graph_add_output(ng, g->output_names[i], map[g->outputs[i]], err)) return LRC_EUSER;
    return LRC_OK;
}

/* Ends a rewrite of *gp into ng (nodes renamed by map): the outputs carry
 * over and ng replaces *gp, or on failure ng is dropped. Frees map. */
static int finish(lrc_graph **gp, lrc_graph *ng, int *map, int rc, lrc_err *err)
{
    if (!rc) rc = copy_outputs(ng, *gp, map, err);
    free(map);
    if (rc) {
        lrc_graph_free(ng);
        return rc;
    }
    lrc_graph_free(*gp);
    *gp = ng;
    return LRC_OK;
}

/* A new constant: the tensor goes into ctx->consts, a PARAM names it. */
static int add_const(lrc_graph *ng, lrc_pass_ctx *ctx, lrc_tensor *t, const char *loc, lrc_err *err)
{
    lrc_init none = {LRC_INIT_ZEROS, 0};
    lrc_shape s = t->shape;
    char name[512];
    snprintf(name, sizeof name, "%s", t->name);
    if (lrc_tensor_set_add(ctx->consts, t, err)) return -1;
    return lrc_graph_add_param(ng, name, &s, none, "folded", loc, err);
}

static const float *const_data(const lrc_graph *g, int id, const lrc_pass_ctx *ctx)
{
    return lrc_tensor_set_find(ctx->consts, g->nodes[id].name)->data;
}

/* c is a vector along x's last axis: shape [K] or [1, ..., 1, K]. */
static bool is_last_axis_vector(const lrc_shape *c, const lrc_shape *x)
{
    if (c->ndim < 1 || c->ndim > x->ndim || x->ndim < 1) return false;
    for (int i = 0; i + 1 < c->ndim; i++)
        if (c->dim[i] != 1) return false;
    return c->dim[c->ndim - 1] == x->dim[x->ndim - 1];
}

/* For a MUL node of ng with one constant last-axis-vector operand, returns
 * that operand's index (0 or 1), else -1. */
static int const_vector_operand(const lrc_graph *ng, int id, const lrc_pass_ctx *ctx)
{
    const lrc_node *m = &ng->nodes[id];
    if (m->op != LRC_OP_MUL) return -1;
    for (int k = 0; k < 2; k++) {
        int c = m->in[k], x = m->in[1 - k];
        if (lrc_node_is_const(ng, c, ctx) && !lrc_node_is_const(ng, x, ctx) &&
            is_last_axis_vector(&ng->nodes[c].shape, &ng->nodes[x].shape) &&
            lrc_shape_eq(&ng->nodes[x].shape, &m->shape))
            return k;
    }
    return -1;
}

/* "PREFIX.K:WHAT" with the least K from the set's size up that no constant
 * has: dce frees dead constants (own_consts), so the size alone could name
 * a constant as one made before. */
static void const_name(char *buf, size_t cap, const lrc_pass_ctx *ctx, const char *prefix, const char *what)
{
    for (int k = ctx->consts->n;; k++) {
        snprintf(buf, cap, "%s.%d:%s", prefix, k, what);
        if (!lrc_tensor_set_find(ctx->consts, buf)) return;
    }
}

/* W'[n, k] = W[n, k] * (col ? c[k] : c[n]): a diagonal scale on the input
 * (columns) or the output (rows) of y = x W^T, moved into the weight. */
static lrc_tensor *scaled_weight(const lrc_graph *ng, int w, int c, bool col, lrc_pass_ctx *ctx, lrc_err *err)
{
    const lrc_shape *ws = &ng->nodes[w].shape;
    char name[512];
    const_name(name, sizeof name, ctx, "fold", ng->nodes[w].name);
    lrc_tensor *t = lrc_tensor_new_uninit(name, LRC_F32, ws, err); /* every element written below */
    if (!t) return NULL;
    const float *W = const_data(ng, w, ctx), *s = const_data(ng, c, ctx);
    float *o = t->data;
    for (int64_t n = 0; n < ws->dim[0]; n++)
        for (int64_t k = 0; k < ws->dim[1]; k++)
            o[n * ws->dim[1] + k] = (float)((double)W[n * ws->dim[1] + k] * (col ? s[k] : s[n]));
    return t;
}

/* Evaluates node id of ng (all inputs constant) with its reference
 * implementation into a new constant. */
static lrc_tensor *evaluate(const lrc_graph *ng, int id, lrc_pass_ctx *ctx, lrc_err *err)
{
    const lrc_node *n = &ng->nodes[id];
    char name[512];
    const_name(name, sizeof name, ctx, "fold", lrc_op_name(n->op));
    lrc_tensor *t = lrc_tensor_new(name, LRC_F32, &n->shape, err);
    if (!t) return NULL;
    void *in[LRC_MAX_INPUTS];
    for (int k = 0; k < n->n_in; k++) in[k] = (void *)const_data(ng, n->in[k], ctx);
    if (lrc_op_table[n->op].ref(ng, n, in, t->data, err)) {
        lrc_tensor_free(t);
        return NULL;
    }
    return t;
}

/* A broadcast (an expand, or an elementwise op whose result is larger than
 * each input) of constants stays computed at run time: folded, it would
 * store copies, and a shape that follows the batch and the sequence (a
 * per-channel decay expanded to [B, T, d] for a scan) would bind the
 * constant to one shape, which a package compiled at several cannot take. */
static bool is_broadcast(const lrc_graph *g, const lrc_node *n, const int *map)
{
    if (n->op != LRC_OP_EXPAND && lrc_op_table[n->op].fusion != LRC_FUSE_ELEMENTWISE) return false;
    int64_t out = lrc_shape_numel(&n->shape);
    for (int k = 0; k < n->n_in; k++)
        if (lrc_shape_numel(&g->nodes[map[n->in[k]]].shape) >= out) return false;
    return true;
}

/* Consumers of every node: CSR arrays. */
typedef struct {
    int *start, *list;
} uses_t;

static void uses_build(const lrc_graph *g, uses_t *u)
{
    u->start = lrc_xcalloc((size_t)g->n_nodes + 1, sizeof(int));
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) u->start[g->nodes[i].in[k] + 1]++;
    for (int i = 0; i < g->n_nodes; i++) u->start[i + 1] += u->start[i];
    u->list = lrc_xmalloc((size_t)u->start[g->n_nodes] * sizeof(int) + 1);
    int *fill = lrc_xcalloc((size_t)g->n_nodes, sizeof(int));
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int src = g->nodes[i].in[k];
            u->list[u->start[src] + fill[src]++] = i;
        }
    free(fill);
}

static void uses_free(uses_t *u)
{
    free(u->start);
    free(u->list);
}

static bool is_graph_output(const lrc_graph *g, int id)
{
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == id) return true;
    return false;
}

/* Every consumer of old node m is a matmul reading it as x with a constant weight. */
static bool only_const_matmuls(const lrc_graph *g, const uses_t *u, int m, const lrc_pass_ctx *ctx)
{
    if (u->start[m] == u->start[m + 1] || is_graph_output(g, m)) return false;
    for (int j = u->start[m]; j < u->start[m + 1]; j++) {
        const lrc_node *c = &g->nodes[u->list[j]];
        if (c->op != LRC_OP_MATMUL || c->in[0] != m || c->in[1] == m || !lrc_node_is_const(g, c->in[1], ctx))
            return false;
    }
    return true;
}

int lrc_pass_fold_gains(lrc_graph **gp, lrc_pass_ctx *ctx, lrc_err *err)
{
    if (!ctx || !ctx->consts) return LRC_OK; /* parameters are variables: nothing is constant */
    lrc_graph *g = *gp, *ng = lrc_graph_new();
    int *map = lrc_xmalloc((size_t)g->n_nodes * sizeof(int));
    uses_t u;
    uses_build(g, &u);
    int rc = LRC_OK;
    for (int id = 0; id < g->n_nodes && !rc; id++) {
        const lrc_node *n = &g->nodes[id];
        int nid = -1;
        if (lrc_op_table[n->op].fusion != LRC_FUSE_SOURCE) {
            bool all_const = n->n_in > 0;
            for (int k = 0; k < n->n_in; k++) all_const = all_const && lrc_node_is_const(ng, map[n->in[k]], ctx);
            if (all_const && lrc_shape_numel(&n->shape) <= MAX_FOLD_ELEMENTS && lrc_op_table[n->op].ref &&
                !is_broadcast(ng, n, map)) {
                /* 1. constant subgraphs (LayerRoPE's depth_gain) become constants */
                int tmp = copy_node(ng, n, map, err);
                lrc_tensor *t = tmp < 0 ? NULL : evaluate(ng, tmp, ctx, err);
                nid = t ? add_const(ng, ctx, t, n->loc, err) : -1;
                if (nid < 0) rc = LRC_EUSER;
            } else if (n->op == LRC_OP_MUL) {
                /* 2. a write gain: mul(x W^T, c) with the matmul used only here -> x (c W)^T */
                int k = -1, y = -1;
                for (int j = 0; j < 2 && k < 0; j++) {
                    int c = map[n->in[j]], yy = map[n->in[1 - j]];
                    const lrc_node *yn = &ng->nodes[yy];
                    if (lrc_node_is_const(ng, c, ctx) && yn->op == LRC_OP_MATMUL &&
                        u.start[n->in[1 - j] + 1] - u.start[n->in[1 - j]] == 1 &&
                        !is_graph_output(g, n->in[1 - j]) && lrc_node_is_const(ng, yn->in[1], ctx) &&
                        lrc_shape_numel(&ng->nodes[c].shape) == yn->shape.dim[yn->shape.ndim - 1] &&
                        is_last_axis_vector(&ng->nodes[c].shape, &yn->shape)) {
                        k = c;
                        y = yy;
                    }
                }
                if (k >= 0) {
                    lrc_tensor *t = scaled_weight(ng, ng->nodes[y].in[1], k, false, ctx, err);
                    int w = t ? add_const(ng, ctx, t, n->loc, err) : -1;
                    lrc_node p = {.op = LRC_OP_MATMUL, .n_in = 2, .in = {ng->nodes[y].in[0], w}, .loc = n->loc};
                    nid = w < 0 ? -1 : lrc_graph_add(ng, &p, err);
                    if (nid < 0) rc = LRC_EUSER;
                }
            } else if (n->op == LRC_OP_SCALE) {
                /* 3. scale(mul(x, c), s) -> mul(x, s c): keeps a diagonal scale foldable (LNS) */
                int m = map[n->in[0]], k = const_vector_operand(ng, m, ctx);
                if (k >= 0 && u.start[n->in[0] + 1] - u.start[n->in[0]] == 1) {
                    int c = ng->nodes[m].in[k];
                    char name[512];
                    const_name(name, sizeof name, ctx, "fold", "scaled");
                    lrc_tensor *t = lrc_tensor_new(name, LRC_F32, &ng->nodes[c].shape, err);
                    if (t) {
                        const float *src = const_data(ng, c, ctx);
                        for (int64_t i = 0; i < lrc_shape_numel(&t->shape); i++)
                            ((float *)t->data)[i] = (float)((double)src[i] * n->fattr[0]);
                    }
                    int cc = t ? add_const(ng, ctx, t, n->loc, err) : -1;
                    lrc_node p = {.op = LRC_OP_MUL, .n_in = 2, .in = {ng->nodes[m].in[1 - k], cc}, .loc = n->loc};
                    nid = cc < 0 ? -1 : lrc_graph_add(ng, &p, err);
                    if (nid < 0) rc = LRC_EUSER;
                }
            } else if (n->op == LRC_OP_MATMUL && lrc_node_is_const(ng, map[n->in[1]], ctx)) {
                /* 4. a read gain: matmul(mul(x, c), W) -> matmul(x, W c) when every
                 * consumer of the mul can take it, so the mul disappears */
                int m = map[n->in[0]], k = const_vector_operand(ng, m, ctx);
                if (k >= 0 && only_const_matmuls(g, &u, n->in[0], ctx)) {
                    lrc_tensor *t = scaled_weight(ng, map[n->in[1]], ng->nodes[m].in[k], true, ctx, err);
                    int w = t ? add_const(ng, ctx, t, n->loc, err) : -1;
                    lrc_node p = {.op = LRC_OP_MATMUL, .n_in = 2, .in = {ng->nodes[m].in[1 - k], w}, .loc = n->loc};
                    nid = w < 0 ? -1 : lrc_graph_add(ng, &p, err);
                    if (nid < 0) rc = LRC_EUSER;
                }
            }
        }
        if (!rc && nid < 0) {
            nid = copy_node(ng, n, map, err);
            if (nid < 0) rc = LRC_EUSER;
        }
        map[id] = nid;
    }
    uses_free(&u);
    if ((rc = finish(gp, ng, map, rc, err))) return rc;
    return lrc_pass_dce(gp, ctx, err); /* the scales folded away are dead now */
}

/* ---- hidden widths padded (cuda) ---------------------------------------- */

/* Ops that give zero where every input is zero: a padded column stays an
 * exact zero through them, so the GEMM that contracts it adds nothing. */
static bool keeps_zero(lrc_op op) { return lrc_op_table[op].keeps_zero; }

enum { PAD_NONE, PAD_MEMBER, PAD_SINK, PAD_VECTOR };

/* x W^T with a constant W [N, K] and the given output shape */
static bool is_pad_source(const lrc_graph *g, int id, const lrc_shape *shape, const lrc_pass_ctx *ctx)
{
    const lrc_node *n = &g->nodes[id];
    return n->op == LRC_OP_MATMUL && lrc_node_is_const(g, n->in[1], ctx) && g->nodes[n->in[1]].shape.ndim == 2 &&
           lrc_shape_eq(&n->shape, shape);
}

/* Marks the region that can widen with source matmul `seed`: members
 * (matmuls x W^T with constant W [N, K], and ops that keep zeros, all of
 * the seed's shape, reached through uses and inputs), sinks (matmuls that contract a member with a constant
 * weight [N2, N]) and constant [N] vectors the members read. Newly marked
 * nodes are appended to touched. False when a use of a member cannot take
 * the padding (a graph output, another op, the member as a weight). */
static bool pad_region(const lrc_graph *g, const uses_t *u, int seed, const lrc_pass_ctx *ctx, unsigned char *mark, int *stack,
                       int *touched, int *n_touched)
{
    const lrc_shape *shape = &g->nodes[seed].shape;
    const int64_t N = shape->dim[shape->ndim - 1];
    int top = 0, sinks = 0;
    mark[seed] = PAD_MEMBER, stack[top++] = seed, touched[(*n_touched)++] = seed;
    while (top) {
        const int id = stack[--top];
        const lrc_node *n = &g->nodes[id];
        if (is_graph_output(g, id)) return false;
        for (int k = 0; k < n->n_in && n->op != LRC_OP_MATMUL; k++) {
            const int x = n->in[k];
            const lrc_shape *xs = &g->nodes[x].shape;
            const bool vector = lrc_node_is_const(g, x, ctx) && xs->ndim == 1 && xs->dim[0] == N;
            if (mark[x] == PAD_MEMBER || (mark[x] == PAD_VECTOR && vector)) continue; /* a vector another region widens too */
            if (mark[x] != PAD_NONE) return false;
            if (vector) mark[x] = PAD_VECTOR;
            else if (is_pad_source(g, x, shape, ctx) || (keeps_zero(g->nodes[x].op) && lrc_shape_eq(xs, shape)))
                mark[x] = PAD_MEMBER, stack[top++] = x;
            else return false;
            touched[(*n_touched)++] = x;
        }
        for (int j = u->start[id]; j < u->start[id + 1]; j++) {
            const int c = u->list[j];
            const lrc_node *cn = &g->nodes[c];
            if (cn->op == LRC_OP_MATMUL) {
                if (mark[c] == PAD_SINK) continue;
                if (mark[c] != PAD_NONE || cn->in[0] != id || cn->in[1] == id || !lrc_node_is_const(g, cn->in[1], ctx)) return false;
                mark[c] = PAD_SINK, sinks++;
            } else if (keeps_zero(cn->op) && lrc_shape_eq(&cn->shape, shape)) {
                if (mark[c] == PAD_MEMBER) continue;
                if (mark[c] != PAD_NONE) return false;
                mark[c] = PAD_MEMBER, stack[top++] = c;
            } else {
                return false;
            }
            touched[(*n_touched)++] = c;
        }
    }
    return sinks > 0;
}

/* Constant w of ng widened with zeros: its last axis to cols, and for a
 * matrix its rows to rows (-1: as they are). */
static int padded_const(lrc_graph *ng, int w, int64_t rows, int64_t cols, lrc_pass_ctx *ctx, lrc_err *err)
{
    const lrc_shape *ws = &ng->nodes[w].shape;
    lrc_shape s = *ws;
    const int64_t c0 = ws->dim[ws->ndim - 1], r0 = lrc_shape_numel(ws) / c0;
    s.dim[s.ndim - 1] = cols;
    if (rows >= 0) s.dim[0] = rows;
    char name[512];
    const_name(name, sizeof name, ctx, "pad", ng->nodes[w].name);
    lrc_tensor *t = lrc_tensor_new(name, LRC_F32, &s, err); /* zeros */
    if (!t) return -1;
    const float *src = const_data(ng, w, ctx);
    for (int64_t r = 0; r < r0; r++) memcpy((float *)t->data + r * cols, src + r * c0, (size_t)c0 * sizeof(float));
    return add_const(ng, ctx, t, ng->nodes[w].loc, err);
}

/* The widened copy of constant w (old id) in ng, made once: *slot caches it. */
static int widened(lrc_graph *ng, int *slot, int w, int64_t rows, int64_t cols, lrc_pass_ctx *ctx, lrc_err *err)
{
    if (*slot < 0) *slot = padded_const(ng, w, rows, cols, ctx, err);
    return *slot;
}

static int64_t round_up(int64_t n, int64_t a) { return (n + a - 1) / a * a; }

int lrc_pass_pad_hidden(lrc_graph **gp, lrc_pass_ctx *ctx, lrc_err *err)
{
    const int64_t A = ctx ? ctx->pad_multiple : 0;
    if (A <= 1 || !ctx->consts) return LRC_OK; /* no target asked, or the weights are variables */
    lrc_graph *g = *gp;
    uses_t u;
    uses_build(g, &u);
    unsigned char *mark = lrc_xcalloc((size_t)g->n_nodes, 1);
    int *stack = lrc_xmalloc((size_t)g->n_nodes * sizeof(int)), *touched = lrc_xmalloc((size_t)g->n_nodes * sizeof(int));
    bool any = false;
    for (int id = 0; id < g->n_nodes; id++) {
        const lrc_node *n = &g->nodes[id];
        if (mark[id] || !is_pad_source(g, id, &n->shape, ctx) || n->shape.dim[n->shape.ndim - 1] % A == 0) continue;
        int n_touched = 0;
        if (pad_region(g, &u, id, ctx, mark, stack, touched, &n_touched)) any = true;
        else
            for (int k = 0; k < n_touched; k++) mark[touched[k]] = PAD_NONE;
    }
    free(stack);
    free(touched);
    uses_free(&u);
    if (!any) {
        free(mark);
        return LRC_OK;
    }
    /* the widened constants, by old node id: weights of sources, of sinks, vectors */
    int *cache = lrc_xmalloc((size_t)g->n_nodes * 3 * sizeof(int));
    for (int i = 0; i < 3 * g->n_nodes; i++) cache[i] = -1;
    lrc_graph *ng = lrc_graph_new();
    int *map = lrc_xmalloc((size_t)g->n_nodes * sizeof(int));
    int rc = LRC_OK;
    for (int id = 0; id < g->n_nodes && !rc; id++) {
        const lrc_node *n = &g->nodes[id];
        lrc_node p = *n;
        for (int k = 0; k < n->n_in; k++) p.in[k] = map[n->in[k]];
        const lrc_shape *w = n->op == LRC_OP_MATMUL ? &g->nodes[n->in[1]].shape : NULL; /* sources and sinks are matmuls */
        if (mark[id] == PAD_MEMBER && w) /* W [N, K] -> [Np, K], zero rows */
            p.in[1] = widened(ng, &cache[n->in[1]], p.in[1], round_up(w->dim[0], A), w->dim[1], ctx, err);
        else if (mark[id] == PAD_SINK) /* W [N2, N] -> [N2, Np], zero columns */
            p.in[1] = widened(ng, &cache[g->n_nodes + n->in[1]], p.in[1], -1, round_up(w->dim[1], A), ctx, err);
        else if (mark[id] == PAD_MEMBER) /* a bias [N] -> [Np], zero entries */
            for (int k = 0; k < n->n_in; k++)
                if (mark[n->in[k]] == PAD_VECTOR)
                    p.in[k] = widened(ng, &cache[2 * g->n_nodes + n->in[k]], p.in[k], -1, round_up(g->nodes[n->in[k]].shape.dim[0], A),
                                      ctx, err);
        for (int k = 0; k < p.n_in; k++)
            if (p.in[k] < 0) rc = LRC_EUSER;
        if (!rc && (map[id] = lrc_graph_add(ng, &p, err)) < 0) rc = LRC_EUSER; /* shapes inferred anew: widened */
    }
    free(cache);
    free(mark);
    if ((rc = finish(gp, ng, map, rc, err))) return rc;
    return lrc_pass_dce(gp, ctx, err); /* the unpadded weights are dead now */
}

/* ---- CSE --------------------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull + (h >> 29); }

static uint64_t node_hash(const lrc_node *n)
{
    uint64_t h = mix(0xcbf29ce484222325ull, (uint64_t)n->op);
    for (int k = 0; k < n->n_in; k++) h = mix(h, (uint64_t)n->in[k]);
    for (int a = 0; a < LRC_MAX_IATTR; a++) h = mix(h, (uint64_t)n->iattr[a]);
    for (int a = 0; a < LRC_MAX_FATTR; a++) {
        uint64_t bits;
        memcpy(&bits, &n->fattr[a], 8);
        h = mix(h, bits);
    }
    return mix(h, (uint64_t)n->n_iattr);
}

static bool node_same(const lrc_node *a, const lrc_node *b)
{
    return a->op == b->op && a->n_in == b->n_in && !memcmp(a->in, b->in, sizeof a->in) &&
           a->n_iattr == b->n_iattr && !memcmp(a->iattr, b->iattr, sizeof a->iattr) &&
           !memcmp(a->fattr, b->fattr, sizeof a->fattr) && a->dtype == b->dtype && lrc_shape_eq(&a->shape, &b->shape);
}

int lrc_pass_cse(lrc_graph **gp, lrc_pass_ctx *ctx, lrc_err *err)
{
    (void)ctx;
    lrc_graph *g = *gp, *ng = lrc_graph_new();
    int *map = lrc_xmalloc((size_t)g->n_nodes * sizeof(int));
    size_t cap = 64;
    while (cap < 2 * (size_t)g->n_nodes) cap *= 2;
    int *table = lrc_xmalloc(cap * sizeof(int)); /* ids in ng, -1 empty */
    for (size_t i = 0; i < cap; i++) table[i] = -1;
    int rc = LRC_OK;
    for (int id = 0; id < g->n_nodes && !rc; id++) {
        const lrc_node *n = &g->nodes[id];
        if (lrc_op_table[n->op].fusion == LRC_FUSE_SOURCE) { /* names make sources unique */
            if ((map[id] = copy_node(ng, n, map, err)) < 0) rc = LRC_EUSER;
            continue;
        }
        lrc_node p = *n;
        for (int k = 0; k < n->n_in; k++) p.in[k] = map[n->in[k]];
        size_t slot = (size_t)node_hash(&p) & (cap - 1);
        while (table[slot] >= 0 && !node_same(&ng->nodes[table[slot]], &p)) slot = (slot + 1) & (cap - 1);
        if (table[slot] >= 0) {
            map[id] = table[slot];
            continue;
        }
        if ((map[id] = lrc_graph_add(ng, &p, err)) < 0) rc = LRC_EUSER;
        else table[slot] = map[id];
    }
    free(table);
    return finish(gp, ng, map, rc, err);
}

/* ---- outputs of their own ---------------------------------------------- */

/* The node whose buffer holds node id's value: a view aliases its input, a
 * loop's final state its state (as the schedule places them). */
static int buffer_root(const lrc_graph *g, int id)
{
    for (;;) {
        const lrc_node *n = &g->nodes[id];
        if (lrc_op_table[n->op].fusion != LRC_FUSE_VIEW && n->op != LRC_OP_LOOP_NEXT) return id;
        id = n->in[0];
    }
}

int lrc_pass_own_outputs(lrc_graph *g, lrc_err *err)
{
    const int n0 = g->n_nodes; /* the copies added below are nobody else's buffer */
    bool *taken = lrc_xcalloc((size_t)n0 + 1, sizeof(bool));
    int rc = LRC_OK;
    for (int i = 0; i < g->n_outputs && !rc; i++) {
        const int out = g->outputs[i], root = buffer_root(g, out);
        if (lrc_op_table[g->nodes[root].op].fusion != LRC_FUSE_SOURCE && !taken[root]) {
            taken[root] = true;
            continue;
        }
        /* the value is a source's (an input, a parameter, a constant folded
         * from parameters) or another output's (two gradients CSE merged):
         * this output gets a copy, since an executor writes each output
         * into its own buffer and binds sources to the caller's */
        if (g->nodes[out].dtype == LRC_I32) { /* scale takes floats alone */
            const lrc_node *r = &g->nodes[root];
            rc = lrc_op_table[r->op].fusion == LRC_FUSE_SOURCE
                     ? lrc_err_set(err, "output '%s' is the i32 %s '%s' itself, which no kernel copies into an output",
                                   g->output_names[i], lrc_op_name(r->op), r->name)
                     : lrc_err_set(err, "output '%s' is the i32 value of an earlier output, which no kernel copies: return it once",
                                   g->output_names[i]);
            break;
        }
        lrc_node copy = {.op = LRC_OP_SCALE, .n_in = 1, .in = {out}, .fattr = {1.0}, .loc = g->nodes[out].loc};
        int c = lrc_graph_add(g, &copy, err);
        if (c < 0) rc = LRC_EUSER;
        else g->outputs[i] = c;
    }
    free(taken);
    return rc;
}

/* ---- DCE --------------------------------------------------------------- */

/* The constants no PARAM of g names any more (weights folded or widened
 * into new ones) freed, when the set is the graph's alone: a 1b's folded
 * and padded copies would otherwise sit beside the originals. */
static void drop_dead_consts(const lrc_graph *g, lrc_pass_ctx *ctx)
{
    lrc_tensor_set *s = ctx ? ctx->consts : NULL; /* the kv-cache pass runs dce with no context */
    if (!s || !ctx->own_consts) return;
    int kept = 0;
    for (int i = 0; i < s->n; i++) {
        if (lrc_graph_find(g, LRC_OP_PARAM, s->items[i]->name) >= 0) s->items[kept++] = s->items[i];
        else lrc_tensor_free(s->items[i]);
    }
    s->n = kept;
}

int lrc_pass_dce(lrc_graph **gp, lrc_pass_ctx *ctx, lrc_err *err)
{
    lrc_graph *g = *gp;
    bool *live = lrc_xcalloc((size_t)g->n_nodes, sizeof(bool));
    for (int i = 0; i < g->n_outputs; i++) live[g->outputs[i]] = true;
    for (int id = g->n_nodes - 1; id >= 0; id--)
        if (live[id] || g->nodes[id].op == LRC_OP_INPUT) /* inputs stay: the caller provides them */
            for (int k = 0; k < g->nodes[id].n_in; k++) live[g->nodes[id].in[k]] = true;
    lrc_graph *ng = lrc_graph_new();
    int *map = lrc_xmalloc((size_t)g->n_nodes * sizeof(int));
    int rc = LRC_OK;
    for (int id = 0; id < g->n_nodes && !rc; id++) {
        map[id] = -1;
        if (live[id] || g->nodes[id].op == LRC_OP_INPUT)
            if ((map[id] = copy_node(ng, &g->nodes[id], map, err)) < 0) rc = LRC_EUSER;
    }
    free(live);
    if ((rc = finish(gp, ng, map, rc, err))) return rc;
    drop_dead_consts(*gp, ctx);
    return LRC_OK;
}
