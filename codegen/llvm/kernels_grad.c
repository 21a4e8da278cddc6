/* kernels_grad.c — LLVM renderings of gradient ops that are not GEMMs:
 * row kernels (rmsnorm, softmax, cross-entropy), reductions undoing
 * broadcasts and gathers (sum_to, embedding_grad) and LayerRoPE's gradient.
 * Written plainly, in double where the reference is: correct first; the
 * hot ones get vector forms when training needs their speed. */
#include "kgen.h"

#include <assert.h>
#include <math.h>

static int64_t last_dim(const lrc_shape *s) { return s->ndim ? s->dim[s->ndim - 1] : 1; }
static LLVMValueRef fadd(em_t *e, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFAdd(e->b, a, b, ""); }
static LLVMValueRef fmul(em_t *e, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFMul(e->b, a, b, ""); }
static LLVMValueRef fsub(em_t *e, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFSub(e->b, a, b, ""); }
static LLVMValueRef ld(em_t *e, LLVMValueRef p, LLVMValueRef i) { return em_to_f64(e, em_load(e, p, i, 1)); }
static void st(em_t *e, LLVMValueRef p, LLVMValueRef i, LLVMValueRef v) { em_store(e, p, i, em_to_f32(e, v), 1); }

/* Two double accumulators over a row: sum a(i) b(i) for the two (a, b)
 * pairs given, i in [0, D). */
static void row_dots(kgen *k, LLVMValueRef base, int64_t D, LLVMValueRef a0, LLVMValueRef b0, LLVMValueRef a1,
                     LLVMValueRef b1, LLVMValueRef acc0, LLVMValueRef acc1)
{
    em_t *e = k->e;
    LLVMBuildStore(e->b, em_d64(e, 0), acc0);
    LLVMBuildStore(e->b, em_d64(e, 0), acc1);
    em_loop l;
    LLVMValueRef i = em_for_begin(e, &l, em_i64(e, 0), em_i64(e, D));
    LLVMValueRef ix = em_iadd(e, base, i);
    LLVMBuildStore(e->b, fadd(e, LLVMBuildLoad2(e->b, e->f64, acc0, ""), fmul(e, ld(e, a0, ix), ld(e, b0, ix))), acc0);
    if (a1) LLVMBuildStore(e->b, fadd(e, LLVMBuildLoad2(e->b, e->f64, acc1, ""), fmul(e, ld(e, a1, ix), ld(e, b1, ix))), acc1);
    em_for_end(e, &l, em_i64(e, 1));
}

/* dx = r dy - x r^3 (dy . x) / d, r = 1 / sqrt(mean(x^2) + eps) */
void kg_rmsnorm_grad(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    int64_t D = last_dim(&n->shape);
    LLVMValueRef X = kg_ptr(k, n->in[0]), DY = kg_ptr(k, n->in[1]), O = kg_ptr(k, k->gr->anchor);
    LLVMValueRef ss = em_alloca(e, e->f64, "ss"), dot = em_alloca(e, e->f64, "dot");
    em_loop lr, l;
    LLVMValueRef r = em_for_begin(e, &lr, e->begin, e->end), base = em_imul(e, r, em_i64(e, D));
    row_dots(k, base, D, X, X, DY, X, ss, dot);
    LLVMValueRef ms = fadd(e, LLVMBuildFDiv(e->b, LLVMBuildLoad2(e->b, e->f64, ss, ""), em_d64(e, (double)D), ""), em_d64(e, n->fattr[0]));
    LLVMValueRef rs = LLVMBuildFDiv(e->b, em_d64(e, 1.0), em_intr1(e, "sqrt", ms), "");
    LLVMValueRef c = LLVMBuildFDiv(e->b, fmul(e, fmul(e, fmul(e, rs, rs), rs), LLVMBuildLoad2(e->b, e->f64, dot, "")), em_d64(e, (double)D), "");
    LLVMValueRef i = em_for_begin(e, &l, em_i64(e, 0), em_i64(e, D)), ix = em_iadd(e, base, i);
    st(e, O, ix, fsub(e, fmul(e, rs, ld(e, DY, ix)), fmul(e, ld(e, X, ix), c)));
    em_for_end(e, &l, em_i64(e, 1));
    em_for_end(e, &lr, em_i64(e, 1));
}

/* dx = r (dy - mean(dy) - xh mean(dy xh)), xh = (x - mean) r, r = 1 / sqrt(var + eps);
 * the four row sums in double, where var = E[x^2] - mean^2 loses nothing */
void kg_layernorm_grad(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    int64_t D = last_dim(&n->shape);
    LLVMValueRef X = kg_ptr(k, n->in[0]), DY = kg_ptr(k, n->in[1]), O = kg_ptr(k, k->gr->anchor);
    LLVMValueRef acc[4];
    for (int q = 0; q < 4; q++) acc[q] = em_alloca(e, e->f64, "acc");
    em_loop lr, l, l2;
    LLVMValueRef r = em_for_begin(e, &lr, e->begin, e->end), base = em_imul(e, r, em_i64(e, D));
    for (int q = 0; q < 4; q++) LLVMBuildStore(e->b, em_d64(e, 0), acc[q]);
    LLVMValueRef i = em_for_begin(e, &l, em_i64(e, 0), em_i64(e, D)), ix = em_iadd(e, base, i);
    LLVMValueRef x = ld(e, X, ix), dy = ld(e, DY, ix), term[4] = {x, fmul(e, x, x), dy, fmul(e, dy, x)};
    for (int q = 0; q < 4; q++) LLVMBuildStore(e->b, fadd(e, LLVMBuildLoad2(e->b, e->f64, acc[q], ""), term[q]), acc[q]);
    em_for_end(e, &l, em_i64(e, 1));
    LLVMValueRef m[4], invd = em_d64(e, 1.0 / (double)D);
    for (int q = 0; q < 4; q++) m[q] = fmul(e, LLVMBuildLoad2(e->b, e->f64, acc[q], ""), invd);
    LLVMValueRef var = fsub(e, m[1], fmul(e, m[0], m[0]));
    LLVMValueRef rs = LLVMBuildFDiv(e->b, em_d64(e, 1.0), em_intr1(e, "sqrt", fadd(e, var, em_d64(e, n->fattr[0]))), "");
    LLVMValueRef mdyx = fmul(e, rs, fsub(e, m[3], fmul(e, m[0], m[2]))); /* mean(dy xh) */
    LLVMValueRef j = em_for_begin(e, &l2, em_i64(e, 0), em_i64(e, D)), jx = em_iadd(e, base, j);
    LLVMValueRef xh = fmul(e, fsub(e, ld(e, X, jx), m[0]), rs);
    st(e, O, jx, fmul(e, rs, fsub(e, fsub(e, ld(e, DY, jx), m[2]), fmul(e, xh, mdyx))));
    em_for_end(e, &l2, em_i64(e, 1));
    em_for_end(e, &lr, em_i64(e, 1));
}

/* dx = y (dy - y . dy) */
void kg_softmax_grad(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    int64_t D = last_dim(&n->shape);
    LLVMValueRef Y = kg_ptr(k, n->in[0]), DY = kg_ptr(k, n->in[1]), O = kg_ptr(k, k->gr->anchor);
    LLVMValueRef dot = em_alloca(e, e->f64, "dot"), unused = em_alloca(e, e->f64, "unused");
    em_loop lr, l;
    LLVMValueRef r = em_for_begin(e, &lr, e->begin, e->end), base = em_imul(e, r, em_i64(e, D));
    row_dots(k, base, D, Y, DY, NULL, NULL, dot, unused);
    LLVMValueRef dt = LLVMBuildLoad2(e->b, e->f64, dot, "");
    LLVMValueRef i = em_for_begin(e, &l, em_i64(e, 0), em_i64(e, D)), ix = em_iadd(e, base, i);
    st(e, O, ix, fmul(e, ld(e, Y, ix), fsub(e, ld(e, DY, ix), dt)));
    em_for_end(e, &l, em_i64(e, 1));
    em_for_end(e, &lr, em_i64(e, 1));
}

/* Floats ahead of a pass over a row of logits that the loss's loops ask
 * the memory for: the 131 MB of an LM head's logits come from memory, and a
 * core's own misses in flight did not cover its latency. A prefetch past
 * the buffer's end is harmless (it never faults). */
#define ROW_PREFETCH 256

/* The max and the sum of exp(x - max) of a row of V logits, vectorised
 * (f32 exponentials, the sum in f32 vectors then in double): what the loss
 * and its gradient need, without V calls to libm. */
void kg_row_logsumexp(kgen *k, LLVMValueRef X, LLVMValueRef base, int64_t V, LLVMValueRef E, LLVMValueRef *max_out,
                      LLVMValueRef *sum_out)
{
    em_t *e = k->e;
    /* exponentials at the wide width (the 60m step's loss and its gradient:
     * 28.9 -> 24.3 ms), their sums in the vec-wide order */
    int vec = k->vec, wide = kg_wide_vec(k);
    int64_t wend = V / wide * wide, vend = V / vec * vec;
    LLVMTypeRef vt = em_vty(e, vec), wt = em_vty(e, wide);
    LLVMValueRef mw = em_alloca(e, wt, "lse_max"), ms = em_alloca(e, e->f32, "lse_maxs");
    LLVMValueRef sv = em_alloca(e, vt, "lse_sum"), ss = em_alloca(e, e->f32, "lse_sums");
    /* the max: the same in any order */
    LLVMBuildStore(e->b, em_fw(e, -INFINITY, wide), mw);
    LLVMBuildStore(e->b, em_f32(e, -INFINITY), ms);
    em_loop l;
    LLVMValueRef i = em_for_begin(e, &l, em_i64(e, 0), em_i64(e, wend));
    em_prefetch(e, X, em_iadd(e, base, em_iadd(e, i, em_i64(e, ROW_PREFETCH))), false, 3);
    LLVMBuildStore(e->b, em_intr2(e, "maxnum", em_load(e, X, em_iadd(e, base, i), wide), LLVMBuildLoad2(e->b, wt, mw, "")), mw);
    em_for_end(e, &l, em_i64(e, wide));
    i = em_for_begin(e, &l, em_i64(e, wend), em_i64(e, V));
    LLVMBuildStore(e->b, em_intr2(e, "maxnum", em_load(e, X, em_iadd(e, base, i), 1), LLVMBuildLoad2(e->b, e->f32, ms, "")), ms);
    em_for_end(e, &l, em_i64(e, 1));
    LLVMValueRef m = em_intr2(e, "maxnum", em_hmax(e, LLVMBuildLoad2(e->b, wt, mw, ""), wide), LLVMBuildLoad2(e->b, e->f32, ms, ""));
    /* the sum: vec lanes, each adding its elements in order (a wide
     * vector's exponentials as vec-wide parts in turn), then the lanes
     * pairwise, then the scalar tail: the same at any width */
    LLVMBuildStore(e->b, em_fw(e, 0, vec), sv);
    LLVMBuildStore(e->b, em_f32(e, 0), ss);
    i = em_for_begin(e, &l, em_i64(e, 0), em_i64(e, wend));
    LLVMValueRef ew = em_exp(e, LLVMBuildFSub(e->b, em_load(e, X, em_iadd(e, base, i), wide), em_splat(e, m, wide), ""), wide);
    if (E) em_store(e, E, em_iadd(e, base, i), ew, wide);
    LLVMValueRef acc = LLVMBuildLoad2(e->b, vt, sv, "");
    for (int h = 0; h < wide; h += vec) acc = em_add(e, wide > vec ? em_lanes(e, ew, h, vec) : ew, acc);
    LLVMBuildStore(e->b, acc, sv);
    em_for_end(e, &l, em_i64(e, wide));
    i = em_for_begin(e, &l, em_i64(e, wend), em_i64(e, vend));
    LLVMValueRef ev = em_exp(e, LLVMBuildFSub(e->b, em_load(e, X, em_iadd(e, base, i), vec), em_splat(e, m, vec), ""), vec);
    if (E) em_store(e, E, em_iadd(e, base, i), ev, vec);
    LLVMBuildStore(e->b, em_add(e, ev, LLVMBuildLoad2(e->b, vt, sv, "")), sv);
    em_for_end(e, &l, em_i64(e, vec));
    i = em_for_begin(e, &l, em_i64(e, vend), em_i64(e, V));
    LLVMValueRef es = em_exp(e, LLVMBuildFSub(e->b, em_load(e, X, em_iadd(e, base, i), 1), m, ""), 1);
    if (E) em_store(e, E, em_iadd(e, base, i), es, 1);
    LLVMBuildStore(e->b, em_add(e, es, LLVMBuildLoad2(e->b, e->f32, ss, "")), ss);
    em_for_end(e, &l, em_i64(e, 1));
    *max_out = m;
    *sum_out = fadd(e, em_to_f64(e, em_hsum(e, LLVMBuildLoad2(e->b, vt, sv, ""), vec)), em_to_f64(e, LLVMBuildLoad2(e->b, e->f32, ss, "")));
}

LLVMValueRef kg_ce_used(kgen *k, LLVMValueRef Y, int64_t rows)
{
    em_t *e = k->e;
    LLVMValueRef used = em_alloca(e, e->f64, "used");
    em_loop lu;
    LLVMBuildStore(e->b, em_d64(e, 0), used);
    LLVMValueRef u = em_for_begin(e, &lu, em_i64(e, 0), em_i64(e, rows));
    LLVMValueRef is = LLVMBuildICmp(e->b, LLVMIntNE, em_load_i32(e, Y, u), LLVMConstInt(e->i32, (unsigned long long)-100, 1), "");
    LLVMBuildStore(e->b, fadd(e, LLVMBuildLoad2(e->b, e->f64, used, ""), LLVMBuildSelect(e->b, is, em_d64(e, 1), em_d64(e, 0), "")), used);
    em_for_end(e, &lu, em_i64(e, 1));
    return LLVMBuildLoad2(e->b, e->f64, used, "");
}

void kg_ce_grad_row(kgen *k, LLVMValueRef X, LLVMValueRef O, LLVMValueRef Y, LLVMValueRef stats, LLVMValueRef r, int64_t V,
                    LLVMValueRef nused)
{
    em_t *e = k->e;
    int vec = kg_wide_vec(k); /* elementwise: the same values at any width */
    int64_t vend = V / vec * vec;
    em_loop l;
    LLVMValueRef base = em_imul(e, r, em_i64(e, V));
    LLVMValueRef lab = em_load_i32(e, Y, r), live = LLVMBuildICmp(e->b, LLVMIntNE, lab, LLVMConstInt(e->i32, (unsigned long long)-100, 1), "");
    LLVMValueRef m, s;
    if (stats) { /* an ignored row has no max: +inf makes its exponentials 0, which f then zeroes */
        LLVMValueRef sc = LLVMBuildBitCast(e->b, stats, LLVMPointerType(e->f64, 0), ""), r3 = em_imul(e, r, em_i64(e, LRC_CE_STATS));
        m = em_to_f32(e, LLVMBuildLoad2(e->b, e->f64, LLVMBuildGEP2(e->b, e->f64, sc, &r3, 1, ""), ""));
        m = LLVMBuildSelect(e->b, live, m, em_f32(e, INFINITY), "");
        LLVMValueRef r31 = em_iadd(e, r3, em_i64(e, 1));
        s = LLVMBuildLoad2(e->b, e->f64, LLVMBuildGEP2(e->b, e->f64, sc, &r31, 1, ""), "");
    } else
        kg_row_logsumexp(k, X, base, V, NULL, &m, &s);
    /* p / used for live rows, 0 for ignored ones: one factor per row */
    LLVMValueRef f = em_to_f32(e, LLVMBuildSelect(e->b, live, LLVMBuildFDiv(e->b, em_d64(e, 1.0), fmul(e, s, nused), ""), em_d64(e, 0), ""));
    /* with stats, O's row holds exp(x - m) (the same values at any width),
     * where live: an ignored row's was never written, and is zeroed */
    bool exps = stats != NULL;
    LLVMValueRef i = em_for_begin(e, &l, em_i64(e, 0), em_i64(e, vend));
    LLVMValueRef pv;
    if (exps) {
        pv = LLVMBuildSelect(e->b, live, em_load(e, O, em_iadd(e, base, i), vec), em_fw(e, 0, vec), "");
    } else {
        em_prefetch(e, X, em_iadd(e, base, em_iadd(e, i, em_i64(e, ROW_PREFETCH))), false, 3);
        if (O != X) em_prefetch(e, O, em_iadd(e, base, em_iadd(e, i, em_i64(e, ROW_PREFETCH))), true, 3);
        pv = em_exp(e, LLVMBuildFSub(e->b, em_load(e, X, em_iadd(e, base, i), vec), em_splat(e, m, vec), ""), vec);
    }
    em_store(e, O, em_iadd(e, base, i), em_mul(e, pv, em_splat(e, f, vec)), vec);
    em_for_end(e, &l, em_i64(e, vec));
    i = em_for_begin(e, &l, em_i64(e, vend), em_i64(e, V));
    LLVMValueRef ps = exps ? LLVMBuildSelect(e->b, live, em_load(e, O, em_iadd(e, base, i), 1), em_f32(e, 0), "")
                           : em_exp(e, LLVMBuildFSub(e->b, em_load(e, X, em_iadd(e, base, i), 1), m, ""), 1);
    em_store(e, O, em_iadd(e, base, i), em_mul(e, ps, f), 1);
    em_for_end(e, &l, em_i64(e, 1));
    em_if hot;
    em_if_begin(e, &hot, live);
    LLVMValueRef at = em_iadd(e, base, LLVMBuildSExt(e->b, lab, e->i64, ""));
    em_store(e, O, at, em_to_f32(e, fsub(e, ld(e, O, at), LLVMBuildFDiv(e->b, em_d64(e, 1.0), nused, ""))), 1);
    em_if_end(e, &hot);
}

/* (softmax(x) - onehot(label)) / (labels not -100), zero rows for -100,
 * each row's max and sum of exp(x - max) computed here: the gradient of a
 * loss over the same logits runs in the loss's kernel instead (fuse rule 9,
 * kg_cross_entropy), from the statistics it just took. */
void kg_cross_entropy_grad(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    int64_t V = last_dim(&n->shape), rows = lrc_shape_numel(&n->shape) / V;
    LLVMValueRef X = kg_ptr(k, n->in[0]), O = kg_ptr(k, k->gr->anchor);
    LLVMValueRef Y = LLVMBuildBitCast(e->b, kg_ptr(k, n->in[1]), e->i32p, "");
    LLVMValueRef nused = kg_ce_used(k, Y, rows); /* every chunk counts the used labels itself */
    em_loop lr;
    LLVMValueRef r = em_for_begin(e, &lr, e->begin, e->end);
    kg_ce_grad_row(k, X, O, Y, NULL, r, V, nused);
    em_for_end(e, &lr, em_i64(e, 1));
}

/* Row r's terms of columns at..at+w (w floats): x, or x y when the summand
 * is a product in the group (fuse rule 10), rounded to f32 as the product's
 * own kernel would have stored it, then widened to double. */
static LLVMValueRef sum_terms(em_t *e, LLVMValueRef X, LLVMValueRef Y, LLVMValueRef at, int w)
{
    LLVMValueRef x = em_load(e, X, at, w);
    if (Y) x = LLVMBuildFMul(e->b, x, em_load(e, Y, at, w), "");
    return LLVMBuildFPExt(e->b, x, w > 1 ? LLVMVectorType(e->f64, (unsigned)w) : e->f64, "");
}

/* Rows summed into the last axis, a block of LRC_SUM_COLS columns per work
 * item: each column's rows added in order, in double, by one thread; SB
 * columns at a time in vectors (the same sums: lanes are columns), the
 * block's last columns one by one. */
static void sum_rows(kgen *k, const lrc_node *n, int64_t D)
{
    enum { SB = 8, NA = 4, SUM_AHEAD = 8 }; /* columns per accumulator, accumulators a pass, rows prefetched ahead */
    em_t *e = k->e;
    int64_t R = lrc_shape_numel(&k->g->nodes[n->in[0]].shape) / D;
    int prod = lrc_group_sum_product(k->g, k->gr);
    const lrc_node *pn = prod >= 0 ? &k->g->nodes[prod] : NULL;
    LLVMValueRef X = kg_ptr(k, pn ? pn->in[0] : n->in[0]), Y = pn ? kg_ptr(k, pn->in[1]) : NULL, O = kg_ptr(k, k->gr->anchor);
    LLVMTypeRef dv = LLVMVectorType(e->f64, SB);
    LLVMValueRef acc = em_alloca(e, e->f64, "colsum"), vacc[NA];
    for (int v = 0; v < NA; v++) vacc[v] = em_alloca(e, dv, "colsums");
    em_loop li, lb, lr, lc;
    LLVMValueRef item = em_for_begin(e, &li, e->begin, e->end);
    LLVMValueRef c0 = em_imul(e, item, em_i64(e, LRC_SUM_COLS));
    LLVMValueRef c1 = em_iadd(e, c0, em_i64(e, LRC_SUM_COLS));
    c1 = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, c1, em_i64(e, D), ""), c1, em_i64(e, D), "");
    LLVMValueRef w = LLVMBuildSub(e->b, c1, c0, ""), wv = em_imul(e, LLVMBuildSDiv(e->b, w, em_i64(e, NA * SB), ""), em_i64(e, NA * SB));
    LLVMValueRef cb = em_for_begin(e, &lb, em_i64(e, 0), wv);
    for (int v = 0; v < NA; v++) LLVMBuildStore(e->b, LLVMConstNull(dv), vacc[v]);
    LLVMValueRef r = em_for_begin(e, &lr, em_i64(e, 0), em_i64(e, R));
    LLVMValueRef base = em_iadd(e, em_imul(e, r, em_i64(e, D)), em_iadd(e, c0, cb));
    /* a column block's rows are D apart: ahead of the stride prefetcher */
    for (int l = 0; l < NA * SB; l += 16) { /* a cache line each */
        em_prefetch(e, X, em_iadd(e, base, em_i64(e, SUM_AHEAD * D + l)), false, 3);
        if (Y) em_prefetch(e, Y, em_iadd(e, base, em_i64(e, SUM_AHEAD * D + l)), false, 3);
    }
    for (int v = 0; v < NA; v++)
        LLVMBuildStore(e->b, fadd(e, LLVMBuildLoad2(e->b, dv, vacc[v], ""), sum_terms(e, X, Y, em_iadd(e, base, em_i64(e, v * SB)), SB)),
                       vacc[v]);
    em_for_end(e, &lr, em_i64(e, 1));
    for (int v = 0; v < NA; v++)
        em_store(e, O, em_iadd(e, em_iadd(e, c0, cb), em_i64(e, v * SB)),
                 LLVMBuildFPTrunc(e->b, LLVMBuildLoad2(e->b, dv, vacc[v], ""), em_vty(e, SB), ""), SB);
    em_for_end(e, &lb, em_i64(e, NA * SB));
    LLVMValueRef c = em_for_begin(e, &lc, wv, w);
    LLVMBuildStore(e->b, em_d64(e, 0), acc);
    r = em_for_begin(e, &lr, em_i64(e, 0), em_i64(e, R));
    LLVMValueRef at = em_iadd(e, em_imul(e, r, em_i64(e, D)), em_iadd(e, c0, c));
    LLVMBuildStore(e->b, fadd(e, LLVMBuildLoad2(e->b, e->f64, acc, ""), sum_terms(e, X, Y, at, 1)), acc);
    em_for_end(e, &lr, em_i64(e, 1));
    st(e, O, em_iadd(e, c0, c), LLVMBuildLoad2(e->b, e->f64, acc, ""));
    em_for_end(e, &lc, em_i64(e, 1));
    em_for_end(e, &li, em_i64(e, 1));
}

/* Every input element added into the output element it was broadcast from,
 * in double (these are the gradients of gains: sums of many rows, whose
 * small results feed LayerRoPE's scalars); whole rows in column blocks, any
 * other broadcast as one work item, a serial sum. */
void kg_sum_to(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    int64_t D = lrc_sum_to_columns(k->g, n);
    if (D) {
        sum_rows(k, n, D);
        return;
    }
    assert(lrc_group_sum_product(k->g, k->gr) < 0); /* fuse rule 10 takes sums over whole rows only */
    const lrc_shape *x = &k->g->nodes[n->in[0]].shape, *o = &n->shape;
    LLVMValueRef X = kg_ptr(k, n->in[0]), O = kg_ptr(k, k->gr->anchor);
    int64_t ost[LRC_MAX_DIMS], s = 1, no = lrc_shape_numel(o);
    for (int d = o->ndim - 1; d >= 0; d--) {
        ost[d] = o->dim[d] == 1 ? 0 : s;
        s *= o->dim[d];
    }
    LLVMValueRef raw = em_malloc(e, em_i64(e, no * 8));
    LLVMValueRef acc = LLVMBuildBitCast(e->b, raw, LLVMPointerType(e->f64, 0), "");
    #define AT(i) LLVMBuildGEP2(e->b, e->f64, acc, (LLVMValueRef[1]){(i)}, 1, "")
    em_loop lz, l;
    LLVMValueRef z = em_for_begin(e, &lz, em_i64(e, 0), em_i64(e, no));
    LLVMBuildStore(e->b, em_d64(e, 0), AT(z));
    em_for_end(e, &lz, em_i64(e, 1));
    LLVMValueRef i = em_for_begin(e, &l, em_i64(e, 0), em_i64(e, lrc_shape_numel(x)));
    LLVMValueRef rest = i, dst = em_i64(e, 0);
    for (int d = x->ndim - 1; d >= 0; d--) {
        LLVMValueRef digit = LLVMBuildSRem(e->b, rest, em_i64(e, x->dim[d]), "");
        rest = LLVMBuildSDiv(e->b, rest, em_i64(e, x->dim[d]), "");
        int od = o->ndim - x->ndim + d;
        if (od >= 0 && ost[od]) dst = em_iadd(e, dst, em_imul(e, digit, em_i64(e, ost[od])));
    }
    LLVMValueRef slot = AT(dst);
    LLVMBuildStore(e->b, fadd(e, LLVMBuildLoad2(e->b, e->f64, slot, ""), ld(e, X, i)), slot);
    em_for_end(e, &l, em_i64(e, 1));
    z = em_for_begin(e, &lz, em_i64(e, 0), em_i64(e, no));
    st(e, O, z, LLVMBuildLoad2(e->b, e->f64, AT(z), ""));
    em_for_end(e, &lz, em_i64(e, 1));
    em_free(e, raw);
    #undef AT
}

/* dW[id] += dy row, rows in order; a work item owns a block of
 * LRC_SUM_COLS columns of every row, so no two threads add to one element */
void kg_embedding_grad(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    int64_t V = n->shape.dim[0], d = n->shape.dim[1], rows = lrc_shape_numel(&k->g->nodes[n->in[0]].shape);
    LLVMValueRef ids = LLVMBuildBitCast(e->b, kg_ptr(k, n->in[0]), e->i32p, "");
    LLVMValueRef DY = kg_ptr(k, n->in[1]), O = kg_ptr(k, k->gr->anchor);
    em_loop li, lv, lz, lr, l;
    LLVMValueRef item = em_for_begin(e, &li, e->begin, e->end);
    LLVMValueRef c0 = em_imul(e, item, em_i64(e, LRC_SUM_COLS)), c1 = em_iadd(e, c0, em_i64(e, LRC_SUM_COLS));
    c1 = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, c1, em_i64(e, d), ""), c1, em_i64(e, d), "");
    LLVMValueRef v = em_for_begin(e, &lv, em_i64(e, 0), em_i64(e, V));
    LLVMValueRef z = em_for_begin(e, &lz, c0, c1);
    em_store(e, O, em_iadd(e, em_imul(e, v, em_i64(e, d)), z), em_f32(e, 0), 1);
    em_for_end(e, &lz, em_i64(e, 1));
    em_for_end(e, &lv, em_i64(e, 1));
    LLVMValueRef r = em_for_begin(e, &lr, em_i64(e, 0), em_i64(e, rows));
    LLVMValueRef dst = em_imul(e, LLVMBuildSExt(e->b, em_load_i32(e, ids, r), e->i64, ""), em_i64(e, d));
    LLVMValueRef i = em_for_begin(e, &l, c0, c1);
    LLVMValueRef at = em_iadd(e, dst, i);
    em_store(e, O, at, em_add(e, em_load(e, O, at, 1), em_load(e, DY, em_iadd(e, em_imul(e, r, em_i64(e, d)), i), 1)), 1);
    em_for_end(e, &l, em_i64(e, 1));
    em_for_end(e, &lr, em_i64(e, 1));
    em_for_end(e, &li, em_i64(e, 1));
}

/* LayerRoPE's gradients (see ir/ref_grad.c for the algebra): every one the
 * group holds (fuse rule 6), gamma's and the four scalars', in one pass. */
void kg_depth_gain_grad(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    int64_t d = k->g->nodes[n->in[0]].shape.dim[0];
    LLVMValueRef out_of[5] = {NULL, NULL, NULL, NULL, NULL};
    for (int q = 0; q < k->gr->n_nodes; q++) {
        const lrc_node *m = &k->g->nodes[k->gr->nodes[q]];
        if (m->op == LRC_OP_DEPTH_GAIN_GRAD) out_of[m->iattr[1]] = kg_ptr(k, k->gr->nodes[q]);
    }
    double u = log((double)n->iattr[0] + 1.0);
    LLVMValueRef G = kg_ptr(k, n->in[0]), DY = kg_ptr(k, n->in[5]), sc[5];
    for (int j = 1; j < 5; j++) sc[j] = ld(e, kg_ptr(k, n->in[j]), em_i64(e, 0));
    LLVMValueRef m = em_libm(e, "exp", fadd(e, sc[1], fmul(e, sc[2], em_d64(e, u))), NULL);
    LLVMValueRef theta = em_libm(e, "exp", fadd(e, sc[3], fmul(e, sc[4], em_d64(e, u))), NULL);
    LLVMValueRef dmag = em_alloca(e, e->f64, "dmag"), dth = em_alloca(e, e->f64, "dtheta");
    LLVMBuildStore(e->b, em_d64(e, 0), dmag);
    LLVMBuildStore(e->b, em_d64(e, 0), dth);
    em_loop l;
    LLVMValueRef j = em_for_begin(e, &l, em_i64(e, 0), em_i64(e, d / 2));
    LLVMValueRef f = em_libm(e, "pow", em_d64(e, n->fattr[0]), fmul(e, LLVMBuildSIToFP(e->b, j, e->f64, ""), em_d64(e, -2.0 / (double)d)));
    LLVMValueRef ang = fmul(e, theta, f), c = em_libm(e, "cos", ang, NULL), s = em_libm(e, "sin", ang, NULL);
    LLVMValueRef j0 = em_imul(e, j, em_i64(e, 2)), j1 = em_iadd(e, j0, em_i64(e, 1));
    LLVMValueRef g0 = ld(e, G, j0), g1 = ld(e, G, j1), dy0 = ld(e, DY, j0), dy1 = ld(e, DY, j1);
    LLVMValueRef o0 = fmul(e, m, fsub(e, fmul(e, g0, c), fmul(e, g1, s))), o1 = fmul(e, m, fadd(e, fmul(e, g0, s), fmul(e, g1, c)));
    if (out_of[0]) {
        st(e, out_of[0], j0, fmul(e, m, fadd(e, fmul(e, dy0, c), fmul(e, dy1, s))));
        st(e, out_of[0], j1, fmul(e, m, fsub(e, fmul(e, dy1, c), fmul(e, dy0, s))));
    }
    LLVMBuildStore(e->b, fadd(e, LLVMBuildLoad2(e->b, e->f64, dmag, ""), fadd(e, fmul(e, dy0, o0), fmul(e, dy1, o1))), dmag);
    LLVMBuildStore(e->b, fadd(e, LLVMBuildLoad2(e->b, e->f64, dth, ""), fmul(e, f, fsub(e, fmul(e, dy1, o0), fmul(e, dy0, o1)))), dth);
    em_for_end(e, &l, em_i64(e, 1));
    LLVMValueRef dm = LLVMBuildLoad2(e->b, e->f64, dmag, ""), dt = fmul(e, LLVMBuildLoad2(e->b, e->f64, dth, ""), theta);
    LLVMValueRef v[5] = {NULL, dm, fmul(e, dm, em_d64(e, u)), dt, fmul(e, dt, em_d64(e, u))};
    for (int w = 1; w < 5; w++)
        if (out_of[w]) st(e, out_of[w], em_i64(e, 0), v[w]);
}
