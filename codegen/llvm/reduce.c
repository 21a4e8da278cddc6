/* reduce.c — the cpu kernels of the ops along one axis (ir/reduce.c): the
 * reductions sum, mean, amax and logsumexp, cumsum, scan, concat, expand and
 * amax's gradient. Each walks its input as [outer, len, inner] about the
 * axis with strided loads (no transposed copy) and sums in f64 as the
 * reference does; a work item is an outer index (codegen/program.c's
 * OUTER), expand's one item the whole output. A reduction with an
 * elementwise prologue (fuse rule 11) computes each input element where it
 * would load it. */
#include "ew_llvm.h"
#include "kgen.h"

#include <stdlib.h>

#define C(v) em_i64(e, v)

static LLVMValueRef load_f64(em_t *e, LLVMValueRef p, LLVMValueRef at) { return em_to_f64(e, em_load(e, p, at, 1)); }
static LLVMValueRef get(em_t *e, LLVMValueRef slot, LLVMTypeRef t) { return LLVMBuildLoad2(e->b, t, slot, ""); }

/* x[o, r, i] for the loops' o and i: base + r * inner */
static LLVMValueRef at_r(em_t *e, LLVMValueRef base, LLVMValueRef r, int64_t inner) { return em_iadd(e, base, em_imul(e, r, C(inner))); }

/* Fuse rule 11's prologue: the reduction's input computed at each element
 * it is loaded from its members, the other values loaded at their
 * broadcast strides (0 along an axis where they have 1). */
typedef struct prologue {
    int64_t *astride;  /* node id -> a loaded value's stride along the axis */
    LLVMValueRef *at0; /* node id -> its offset at (o, 0, i) */
} prologue;

/* x's strides over the dims of xs it broadcasts to (aligned at the right) */
static void bstrides(const lrc_shape *x, const lrc_shape *xs, int64_t *st)
{
    int64_t run = 1;
    for (int d = xs->ndim - 1; d >= 0; d--) {
        int xd = x->ndim - xs->ndim + d;
        int64_t size = xd >= 0 ? x->dim[xd] : 1;
        st[d] = size == 1 ? 0 : run;
        run *= size;
    }
}

/* the offset of v's digits over dims [lo, hi) of xs, strides st */
static LLVMValueRef digits_off(em_t *e, LLVMValueRef v, const lrc_shape *xs, int lo, int hi, const int64_t *st)
{
    LLVMValueRef off = C(0), rest = v;
    for (int d = hi - 1; d >= lo; d--) {
        if (st[d]) off = em_iadd(e, off, em_imul(e, LLVMBuildSRem(e->b, rest, C(xs->dim[d]), ""), C(st[d])));
        rest = LLVMBuildSDiv(e->b, rest, C(xs->dim[d]), "");
    }
    return off;
}

/* every loaded value's offset at (o, 0, i), inside the loop over i */
static void prologue_offsets(kgen *k, prologue *pr, int axis, LLVMValueRef o, LLVMValueRef i)
{
    const lrc_graph *g = k->g;
    const lrc_shape *xs = &g->nodes[g->nodes[k->gr->anchor].in[0]].shape;
    for (int j = 0; j < k->gr->n_nodes; j++) {
        const lrc_node *m = &g->nodes[k->gr->nodes[j]];
        if (k->gr->nodes[j] == k->gr->anchor) continue;
        for (int q = 0; q < m->n_in; q++) {
            int x = m->in[q];
            if (k->member[x] || pr->at0[x]) continue;
            int64_t st[LRC_MAX_DIMS];
            bstrides(&g->nodes[x].shape, xs, st);
            pr->astride[x] = st[axis];
            pr->at0[x] = em_iadd(k->e, digits_off(k->e, o, xs, 0, axis, st), digits_off(k->e, i, xs, axis + 1, xs->ndim, st));
        }
    }
}

static LLVMValueRef prologue_value(kgen *k, const prologue *pr, int id, LLVMValueRef r)
{
    if (k->memo[id]) return k->memo[id];
    em_t *e = k->e;
    const lrc_node *n = &k->g->nodes[id];
    LLVMValueRef v;
    if (k->member[id]) {
        LLVMValueRef x[LRC_MAX_INPUTS];
        for (int q = 0; q < n->n_in; q++) x[q] = prologue_value(k, pr, n->in[q], r);
        v = lrc_ew_llvm_eval(e, n, x, 1, false);
    } else {
        v = em_load(e, kg_ptr(k, id), em_iadd(e, pr->at0[id], em_imul(e, r, C(pr->astride[id]))), 1);
    }
    k->memo[id] = v;
    return v;
}

/* the reduction's input at (o, r, i): loaded at base + r * inner, or its prologue's value */
static LLVMValueRef x_at(kgen *k, const prologue *pr, const lrc_node *n, LLVMValueRef base, LLVMValueRef r, int64_t inner)
{
    if (!pr) return load_f64(k->e, kg_ptr(k, n->in[0]), at_r(k->e, base, r, inner));
    kg_reset(k);
    return em_to_f64(k->e, prologue_value(k, pr, n->in[0], r));
}

/* sum, mean, amax, logsumexp: an output element per (o, i), its max first
 * where the op needs it */
void kg_reduce(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    int64_t outer, len, inner;
    lrc_axis_split(&k->g->nodes[n->in[0]].shape, (int)n->iattr[0], &outer, &len, &inner);
    int N = k->g->n_nodes;
    prologue pro = {0}, *pr = NULL;
    if (lrc_group_is_reduce_prologue(k->g, k->gr)) {
        pro.astride = lrc_xcalloc((size_t)N, sizeof *pro.astride);
        pro.at0 = lrc_xcalloc((size_t)N, sizeof *pro.at0);
        pr = &pro;
    }
    LLVMValueRef O = kg_ptr(k, k->gr->anchor);
    LLVMValueRef m = em_alloca(e, e->f64, "max"), s = em_alloca(e, e->f64, "sum");
    bool wants_max = n->op == LRC_OP_AMAX || n->op == LRC_OP_LOGSUMEXP;
    em_loop lo, li, lr;
    LLVMValueRef o = em_for_begin(e, &lo, e->begin, e->end);
    LLVMValueRef i = em_for_begin(e, &li, C(0), C(inner));
    LLVMValueRef base = em_iadd(e, em_imul(e, o, C(len * inner)), i);
    if (pr) prologue_offsets(k, pr, (int)n->iattr[0], o, i);
    LLVMBuildStore(e->b, x_at(k, pr, n, base, C(0), inner), m);
    LLVMBuildStore(e->b, em_d64(e, 0), s);
    if (wants_max) {
        LLVMValueRef r = em_for_begin(e, &lr, C(1), C(len));
        LLVMValueRef v = x_at(k, pr, n, base, r, inner), cur = get(e, m, e->f64);
        LLVMBuildStore(e->b, LLVMBuildSelect(e->b, LLVMBuildFCmp(e->b, LLVMRealOGT, v, cur, ""), v, cur, ""), m);
        em_for_end(e, &lr, C(1));
    }
    if (n->op != LRC_OP_AMAX) {
        LLVMValueRef r = em_for_begin(e, &lr, C(0), C(len));
        LLVMValueRef v = x_at(k, pr, n, base, r, inner);
        if (n->op == LRC_OP_LOGSUMEXP) v = em_libm(e, "exp", LLVMBuildFSub(e->b, v, get(e, m, e->f64), ""), NULL);
        LLVMBuildStore(e->b, LLVMBuildFAdd(e->b, get(e, s, e->f64), v, ""), s);
        em_for_end(e, &lr, C(1));
    }
    LLVMValueRef y = get(e, s, e->f64);
    if (n->op == LRC_OP_AMAX) y = get(e, m, e->f64);
    else if (n->op == LRC_OP_MEAN) y = LLVMBuildFDiv(e->b, y, em_d64(e, (double)len), "");
    else if (n->op == LRC_OP_LOGSUMEXP) y = LLVMBuildFAdd(e->b, get(e, m, e->f64), em_libm(e, "log", y, NULL), "");
    em_store(e, O, em_iadd(e, em_imul(e, o, C(inner)), i), em_to_f32(e, y), 1);
    em_for_end(e, &li, C(1));
    em_for_end(e, &lo, C(1));
    free(pro.astride);
    free(pro.at0);
}

/* the running sum along the axis, from its end with `reverse` */
void kg_cumsum(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    int64_t outer, len, inner;
    lrc_axis_split(&n->shape, (int)n->iattr[0], &outer, &len, &inner);
    LLVMValueRef X = kg_ptr(k, n->in[0]), O = kg_ptr(k, k->gr->anchor), s = em_alloca(e, e->f64, "sum");
    em_loop lo, li, lr;
    LLVMValueRef o = em_for_begin(e, &lo, e->begin, e->end);
    LLVMValueRef i = em_for_begin(e, &li, C(0), C(inner));
    LLVMValueRef base = em_iadd(e, em_imul(e, o, C(len * inner)), i);
    LLVMBuildStore(e->b, em_d64(e, 0), s);
    LLVMValueRef j = em_for_begin(e, &lr, C(0), C(len));
    LLVMValueRef r = n->iattr[1] ? LLVMBuildSub(e->b, C(len - 1), j, "") : j, at = at_r(e, base, r, inner);
    LLVMValueRef v = LLVMBuildFAdd(e->b, get(e, s, e->f64), load_f64(e, X, at), "");
    LLVMBuildStore(e->b, v, s);
    em_store(e, O, at, em_to_f32(e, v), 1);
    em_for_end(e, &lr, C(1));
    em_for_end(e, &li, C(1));
    em_for_end(e, &lo, C(1));
}

/* one row r of a scan: h[r, i] = a[r, i] * prev[i] + b[r, i] over the inner
 * indices, prev the row before (at `from`) or init (P) or 0 (P NULL) */
static void scan_row(kgen *k, const lrc_node *n, LLVMValueRef o, LLVMValueRef r, LLVMValueRef P, LLVMValueRef from, int64_t len, int64_t inner)
{
    em_t *e = k->e;
    LLVMValueRef A = kg_ptr(k, n->in[0]), B = kg_ptr(k, n->in[1]), O = kg_ptr(k, k->gr->anchor);
    em_loop li;
    LLVMValueRef i = em_for_begin(e, &li, C(0), C(inner));
    LLVMValueRef at = em_iadd(e, em_imul(e, em_iadd(e, em_imul(e, o, C(len)), r), C(inner)), i);
    LLVMValueRef prev = em_d64(e, 0);
    if (P) prev = load_f64(e, P, from ? em_iadd(e, from, i) : em_iadd(e, em_imul(e, o, C(inner)), i));
    LLVMValueRef h = LLVMBuildFAdd(e->b, LLVMBuildFMul(e->b, load_f64(e, A, at), prev, ""), load_f64(e, B, at), "");
    em_store(e, O, at, em_to_f32(e, h), 1);
    em_for_end(e, &li, C(1));
}

/* h_t = a_t h_{t-1} + b_t: per outer index, the rows in order along the axis
 * and within a row the contiguous inner indices (a loop the vectoriser
 * takes), each step in f64 from h as stored, as the reference does */
void kg_scan(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    int64_t outer, len, inner;
    lrc_axis_split(&n->shape, (int)n->iattr[0], &outer, &len, &inner);
    bool rev = n->iattr[1] != 0;
    LLVMValueRef O = kg_ptr(k, k->gr->anchor);
    em_loop lo, lr;
    LLVMValueRef o = em_for_begin(e, &lo, e->begin, e->end);
    scan_row(k, n, o, C(rev ? len - 1 : 0), n->n_in == 3 ? kg_ptr(k, n->in[2]) : NULL, NULL, len, inner);
    LLVMValueRef j = em_for_begin(e, &lr, C(1), C(len));
    LLVMValueRef r = rev ? LLVMBuildSub(e->b, C(len - 1), j, "") : j;
    LLVMValueRef from = em_imul(e, em_iadd(e, em_imul(e, o, C(len)), rev ? em_iadd(e, r, C(1)) : LLVMBuildSub(e->b, r, C(1), "")), C(inner));
    scan_row(k, n, o, r, O, from, len, inner);
    em_for_end(e, &lr, C(1));
    em_for_end(e, &lo, C(1));
}

/* each input's block of len * inner values per outer index, in turn */
void kg_concat(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    int axis = (int)n->iattr[0];
    int64_t outer, total, inner, at = 0;
    lrc_axis_split(&n->shape, axis, &outer, &total, &inner);
    LLVMValueRef O = kg_ptr(k, k->gr->anchor);
    for (int q = 0; q < n->n_in; q++) {
        int64_t span = k->g->nodes[n->in[q]].shape.dim[axis] * inner;
        LLVMValueRef X = kg_ptr(k, n->in[q]);
        em_loop lo, lc;
        LLVMValueRef o = em_for_begin(e, &lo, e->begin, e->end);
        LLVMValueRef src = em_imul(e, o, C(span)), dst = em_iadd(e, em_imul(e, o, C(total * inner)), C(at * inner));
        LLVMValueRef c = em_for_begin(e, &lc, C(0), C(span));
        em_store(e, O, em_iadd(e, dst, c), em_load(e, X, em_iadd(e, src, c), 1), 1);
        em_for_end(e, &lc, C(1));
        em_for_end(e, &lo, C(1));
        at += k->g->nodes[n->in[q]].shape.dim[axis];
    }
}

/* out[i] = x at i's index, with stride 0 where x has 1 or lacks the axis */
void kg_expand(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    const lrc_shape *x = &k->g->nodes[n->in[0]].shape, *os = &n->shape;
    int64_t stride[LRC_MAX_DIMS] = {0}, st = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        stride[d + os->ndim - x->ndim] = x->dim[d] == 1 ? 0 : st;
        st *= x->dim[d];
    }
    em_loop l;
    LLVMValueRef i = em_for_begin(e, &l, C(0), C(lrc_shape_numel(os)));
    LLVMValueRef rest = i, src = C(0);
    for (int d = os->ndim - 1; d >= 0; d--) {
        LLVMValueRef digit = LLVMBuildSRem(e->b, rest, C(os->dim[d]), "");
        rest = LLVMBuildSDiv(e->b, rest, C(os->dim[d]), "");
        if (stride[d]) src = em_iadd(e, src, em_imul(e, digit, C(stride[d])));
    }
    em_store(e, kg_ptr(k, k->gr->anchor), i, em_load(e, kg_ptr(k, n->in[0]), src, 1), 1);
    em_for_end(e, &l, C(1));
}

/* dy / (the count of maxima) where x equals the max y, else 0 */
void kg_amax_grad(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    int64_t outer, len, inner;
    lrc_axis_split(&n->shape, (int)n->iattr[0], &outer, &len, &inner);
    LLVMValueRef X = kg_ptr(k, n->in[0]), Y = kg_ptr(k, n->in[1]), DY = kg_ptr(k, n->in[2]), O = kg_ptr(k, k->gr->anchor);
    LLVMValueRef ties = em_alloca(e, e->f64, "ties");
    em_loop lo, li, lr;
    LLVMValueRef o = em_for_begin(e, &lo, e->begin, e->end);
    LLVMValueRef i = em_for_begin(e, &li, C(0), C(inner));
    LLVMValueRef base = em_iadd(e, em_imul(e, o, C(len * inner)), i), yi = em_iadd(e, em_imul(e, o, C(inner)), i);
    LLVMValueRef y = em_load(e, Y, yi, 1);
    LLVMBuildStore(e->b, em_d64(e, 0), ties);
    LLVMValueRef r = em_for_begin(e, &lr, C(0), C(len));
    LLVMValueRef hit = LLVMBuildFCmp(e->b, LLVMRealOEQ, em_load(e, X, at_r(e, base, r, inner), 1), y, "");
    LLVMBuildStore(e->b, LLVMBuildFAdd(e->b, get(e, ties, e->f64), LLVMBuildSelect(e->b, hit, em_d64(e, 1), em_d64(e, 0), ""), ""), ties);
    em_for_end(e, &lr, C(1));
    LLVMValueRef share = em_to_f32(e, LLVMBuildFDiv(e->b, load_f64(e, DY, yi), get(e, ties, e->f64), ""));
    r = em_for_begin(e, &lr, C(0), C(len));
    LLVMValueRef at = at_r(e, base, r, inner);
    hit = LLVMBuildFCmp(e->b, LLVMRealOEQ, em_load(e, X, at, 1), y, "");
    em_store(e, O, at, LLVMBuildSelect(e->b, hit, share, em_f32(e, 0), ""), 1);
    em_for_end(e, &lr, C(1));
    em_for_end(e, &li, C(1));
    em_for_end(e, &lo, C(1));
}
