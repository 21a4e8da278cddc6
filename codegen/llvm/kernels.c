/* kernels.c — LLVM renderings of elementwise, row and opaque kernel groups,
 * the per-element evaluation that every group's elementwise members share,
 * and the driver that renders a whole program into one module. */
#include "ew_llvm.h"
#include "kgen.h"
#include "lrc_llvm.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int64_t last_dim(const lrc_shape *s) { return s->ndim ? s->dim[s->ndim - 1] : 1; }

/* What the cpu renderer does with an op (the table kg_ops, at the end of
 * this file): its value at one element of a fused group, a kernel of its
 * own (an opaque group, or the anchor of a row, GEMM or attention group),
 * or nothing at all (sources, views, a loop's back edge). */
typedef struct kg_op {
    bool elementwise; /* its expression (ir/ew.c) over the algebra of ew_llvm.c */
    void (*kernel)(kgen *k, const lrc_node *n);
    bool no_kernel;
} kg_op;

LLVMValueRef kg_ptr(kgen *k, int id)
{
    int a = k->arg_of[k->s->buffer_of[id]];
    return a < 0 ? NULL : k->argp[a];
}


LLVMValueRef kg_scratch(kgen *k)
{
    int a = k->k->n_args - 1;
    if (a < 0 || k->k->args[a] < k->g->n_nodes || k->p->extra[k->k->args[a] - k->g->n_nodes].panel != 0) return NULL;
    return k->argp[a];
}

void kg_reset(kgen *k) { memset(k->memo, 0, (size_t)k->g->n_nodes * sizeof *k->memo); }

static LLVMValueRef load_input(kgen *k, int id, LLVMValueRef row, LLVMValueRef col, int64_t D, int w)
{
    em_t *e = k->e;
    const lrc_shape *s = &k->g->nodes[id].shape;
    LLVMValueRef p = kg_ptr(k, id);
    if (lrc_shape_numel(s) == 1) return em_splat(e, em_load(e, p, em_i64(e, 0), 1), w);
    if (lrc_shape_numel(s) == last_dim(s) && last_dim(s) == D) return em_load(e, p, col, w);
    return em_load(e, p, em_iadd(e, em_imul(e, row, em_i64(e, D)), col), w);
}


static const kg_op kg_ops[LRC_OP_COUNT];

LLVMValueRef kg_value(kgen *k, int id, LLVMValueRef row, LLVMValueRef col, int64_t D, int w)
{
    if (k->memo[id]) return k->memo[id];
    em_t *e = k->e;
    const lrc_node *n = &k->g->nodes[id];
    LLVMValueRef v;
    if (!k->member[id]) {
        v = load_input(k, id, row, col, D, w);
    } else if (kg_ops[n->op].elementwise) {
        LLVMValueRef x[LRC_MAX_INPUTS];
        for (int q = 0; q < n->n_in; q++) x[q] = kg_value(k, n->in[q], row, col, D, w);
        v = lrc_ew_llvm_eval(e, n, x, w, false);
    } else {
        v = LLVMGetUndef(em_vty(e, w)); /* anchors are set by their kernel before members are evaluated */
    }
    k->memo[id] = v;
    return v;
}

void kg_store_outputs(kgen *k, LLVMValueRef row, LLVMValueRef col, int64_t D, int w)
{
    em_t *e = k->e;
    for (int j = 0; j < k->gr->n_outputs; j++) {
        int o = k->gr->outputs[j];
        LLVMValueRef v = kg_value(k, o, row, col, D, w);
        em_store(e, kg_ptr(k, o), em_iadd(e, em_imul(e, row, em_i64(e, D)), col), v, w);
    }
}

/* for col in [0, D): vector chunks, then a scalar tail; body(k, row, col, w) */
typedef void (*col_body)(kgen *k, LLVMValueRef row, LLVMValueRef col, int64_t D, int w, void *ctx);

static void for_cols(kgen *k, LLVMValueRef row, int64_t D, col_body body, void *ctx)
{
    em_t *e = k->e;
    int64_t vend = D / k->vec * k->vec;
    em_loop l;
    if (vend > 0) {
        LLVMValueRef c = em_for_begin(e, &l, em_i64(e, 0), em_i64(e, vend));
        kg_reset(k);
        body(k, row, c, D, k->vec, ctx);
        em_for_end(e, &l, em_i64(e, k->vec));
    }
    if (vend < D) {
        LLVMValueRef c = em_for_begin(e, &l, em_i64(e, vend), em_i64(e, D));
        kg_reset(k);
        body(k, row, c, D, 1, ctx);
        em_for_end(e, &l, em_i64(e, 1));
    }
}

/* ---- elementwise groups ------------------------------------------------ */

static void ew_body(kgen *k, LLVMValueRef row, LLVMValueRef col, int64_t D, int w, void *ctx)
{
    (void)ctx;
    kg_store_outputs(k, row, col, D, w);
}

static void kg_elementwise(kgen *k)
{
    em_t *e = k->e;
    int64_t D = last_dim(&k->g->nodes[k->gr->anchor].shape);
    em_loop rows;
    LLVMValueRef r = em_for_begin(e, &rows, e->begin, e->end);
    for_cols(k, r, D, ew_body, NULL);
    em_for_end(e, &rows, em_i64(e, 1));
}

/* ---- row groups: rmsnorm, layernorm and softmax with prologue and epilogue */

typedef struct {
    LLVMValueRef acc_v, acc_s; /* allocas: vector and scalar partial results */
    LLVMValueRef a;            /* the row's scale (rmsnorm), max (softmax) or mean (layernorm) */
    LLVMValueRef b;            /* softmax: 1 / sum; layernorm: 1 / sqrt(var + eps) */
    int pass;
} row_ctx;

static void row_body(kgen *k, LLVMValueRef row, LLVMValueRef col, int64_t D, int w, void *vctx)
{
    row_ctx *c = vctx;
    em_t *e = k->e;
    const lrc_node *a = &k->g->nodes[k->gr->anchor];
    LLVMValueRef x = kg_value(k, a->in[0], row, col, D, w);
    LLVMValueRef acc = w == 1 ? c->acc_s : c->acc_v;
    LLVMTypeRef t = em_vty(e, w);
    if (c->pass == 0 && a->op == LRC_OP_RMSNORM) {
        LLVMBuildStore(e->b, em_fma(e, x, x, LLVMBuildLoad2(e->b, t, acc, "")), acc);
    } else if (c->pass == 0 && a->op == LRC_OP_LAYERNORM) { /* the sum, for the mean */
        LLVMBuildStore(e->b, em_add(e, x, LLVMBuildLoad2(e->b, t, acc, "")), acc);
    } else if (c->pass == 1 && a->op == LRC_OP_LAYERNORM) { /* squares about the mean: no cancellation */
        LLVMValueRef xc = LLVMBuildFSub(e->b, x, em_splat(e, c->a, w), "");
        LLVMBuildStore(e->b, em_fma(e, xc, xc, LLVMBuildLoad2(e->b, t, acc, "")), acc);
    } else if (c->pass == 0) { /* softmax: running max */
        LLVMBuildStore(e->b, em_intr2(e, "maxnum", x, LLVMBuildLoad2(e->b, t, acc, "")), acc);
    } else if (c->pass == 1) { /* softmax: sum of exp(x - max) */
        LLVMValueRef ex = em_exp(e, LLVMBuildFSub(e->b, x, em_splat(e, c->a, w), ""), w);
        LLVMBuildStore(e->b, em_add(e, ex, LLVMBuildLoad2(e->b, t, acc, "")), acc);
    } else {
        LLVMValueRef y;
        if (a->op == LRC_OP_RMSNORM) y = em_mul(e, x, em_splat(e, c->a, w));
        else if (a->op == LRC_OP_LAYERNORM) y = em_mul(e, LLVMBuildFSub(e->b, x, em_splat(e, c->a, w), ""), em_splat(e, c->b, w));
        else y = em_mul(e, em_exp(e, LLVMBuildFSub(e->b, x, em_splat(e, c->a, w), ""), w), em_splat(e, c->b, w));
        k->memo[k->gr->anchor] = y;
        kg_store_outputs(k, row, col, D, w);
    }
}

static void kg_row(kgen *k)
{
    em_t *e = k->e;
    const lrc_node *a = &k->g->nodes[k->gr->anchor];
    int64_t D = last_dim(&a->shape);
    bool softmax = a->op == LRC_OP_SOFTMAX;
    row_ctx c = {em_alloca(e, em_vty(e, k->vec), "accv"), em_alloca(e, e->f32, "accs"), NULL, NULL, 0};
    em_loop rows;
    LLVMValueRef r = em_for_begin(e, &rows, e->begin, e->end);
    double init = softmax ? -INFINITY : 0.0;
    LLVMBuildStore(e->b, em_fw(e, init, k->vec), c.acc_v);
    LLVMBuildStore(e->b, em_f32(e, init), c.acc_s);
    c.pass = 0;
    for_cols(k, r, D, row_body, &c);
    LLVMValueRef v = LLVMBuildLoad2(e->b, em_vty(e, k->vec), c.acc_v, "");
    LLVMValueRef sc = LLVMBuildLoad2(e->b, e->f32, c.acc_s, "");
    if (a->op == LRC_OP_LAYERNORM) {
        c.a = LLVMBuildFDiv(e->b, em_add(e, em_hsum(e, v, k->vec), sc), em_f32(e, (double)D), "mean");
        LLVMBuildStore(e->b, em_fw(e, 0.0, k->vec), c.acc_v);
        LLVMBuildStore(e->b, em_f32(e, 0.0), c.acc_s);
        c.pass = 1;
        for_cols(k, r, D, row_body, &c);
        LLVMValueRef vv = em_add(e, em_hsum(e, LLVMBuildLoad2(e->b, em_vty(e, k->vec), c.acc_v, ""), k->vec),
                                 LLVMBuildLoad2(e->b, e->f32, c.acc_s, ""));
        LLVMValueRef var = em_add(e, LLVMBuildFDiv(e->b, vv, em_f32(e, (double)D), ""), em_f32(e, a->fattr[0]));
        c.b = LLVMBuildFDiv(e->b, em_f32(e, 1.0), em_intr1(e, "sqrt", var), "inv_std");
    } else if (!softmax) {
        LLVMValueRef ss = em_add(e, em_hsum(e, v, k->vec), sc);
        LLVMValueRef ms = em_add(e, LLVMBuildFDiv(e->b, ss, em_f32(e, (double)D), ""), em_f32(e, a->fattr[0]));
        c.a = LLVMBuildFDiv(e->b, em_f32(e, 1.0), em_intr1(e, "sqrt", ms), "inv_rms");
    } else {
        c.a = em_intr2(e, "maxnum", em_hmax(e, v, k->vec), sc);
        LLVMBuildStore(e->b, em_fw(e, 0.0, k->vec), c.acc_v);
        LLVMBuildStore(e->b, em_f32(e, 0.0), c.acc_s);
        c.pass = 1;
        for_cols(k, r, D, row_body, &c);
        LLVMValueRef sv = LLVMBuildLoad2(e->b, em_vty(e, k->vec), c.acc_v, "");
        LLVMValueRef ssum = em_add(e, em_hsum(e, sv, k->vec), LLVMBuildLoad2(e->b, e->f32, c.acc_s, ""));
        c.b = LLVMBuildFDiv(e->b, em_f32(e, 1.0), ssum, "");
    }
    c.pass = 2;
    for_cols(k, r, D, row_body, &c);
    em_for_end(e, &rows, em_i64(e, 1));
}

/* ---- opaque ops ------------------------------------------------------- */

static void copy_row(kgen *k, LLVMValueRef dst, LLVMValueRef dst_off, LLVMValueRef src, LLVMValueRef src_off, int64_t D)
{
    em_t *e = k->e;
    int64_t vend = D / k->vec * k->vec;
    em_loop l;
    if (vend > 0) {
        LLVMValueRef c = em_for_begin(e, &l, em_i64(e, 0), em_i64(e, vend));
        em_store(e, dst, em_iadd(e, dst_off, c), em_load(e, src, em_iadd(e, src_off, c), k->vec), k->vec);
        em_for_end(e, &l, em_i64(e, k->vec));
    }
    if (vend < D) {
        LLVMValueRef c = em_for_begin(e, &l, em_i64(e, vend), em_i64(e, D));
        em_store(e, dst, em_iadd(e, dst_off, c), em_load(e, src, em_iadd(e, src_off, c), 1), 1);
        em_for_end(e, &l, em_i64(e, 1));
    }
}

static void kg_embedding(kgen *k, const lrc_node *n)
{
    /* ids were checked against the vocabulary by the runtime before launch */
    em_t *e = k->e;
    int64_t D = n->shape.dim[n->shape.ndim - 1];
    LLVMValueRef ids = LLVMBuildBitCast(e->b, kg_ptr(k, n->in[0]), e->i32p, "");
    em_loop rows;
    LLVMValueRef r = em_for_begin(e, &rows, e->begin, e->end);
    LLVMValueRef id = LLVMBuildSExt(e->b, em_load_i32(e, ids, r), e->i64, "");
    copy_row(k, kg_ptr(k, k->gr->anchor), em_imul(e, r, em_i64(e, D)), kg_ptr(k, n->in[1]), em_imul(e, id, em_i64(e, D)), D);
    em_for_end(e, &rows, em_i64(e, 1));
}


/* Standalone RoPE on rows (b, t, h) of x[B,T,H,Dh] (training keeps the
 * rotated q and k for the backward; inference fuses RoPE into attention),
 * with the same compile-time angle tables and arithmetic as the fused one.
 * sign -1: rotation by -angle, the transpose: RoPE's gradient. */
static void kg_rope(kgen *k, const lrc_node *n, double sign)
{
    em_t *e = k->e;
    int64_t T = n->shape.dim[1], H = n->shape.dim[2], D = n->shape.dim[3], half = D / 2;
    LLVMValueRef x = kg_ptr(k, n->in[0]), o = kg_ptr(k, k->gr->anchor);
    lrc_rope rope = lrc_rope_of(n);
    LLVMValueRef cs = kg_rope_table(e, T, D, &rope, false), sn = kg_rope_table(e, T, D, &rope, true);
    em_loop rows;
    LLVMValueRef r = em_for_begin(e, &rows, e->begin, e->end);
    LLVMValueRef t = LLVMBuildSRem(e->b, LLVMBuildSDiv(e->b, r, em_i64(e, H), ""), em_i64(e, T), "");
    LLVMValueRef tb = em_imul(e, t, em_i64(e, half)), base = em_imul(e, r, em_i64(e, D));
    for (int64_t i = 0; i < half; i += (half - i >= k->vec ? k->vec : 1)) {
        int w = half - i >= k->vec ? k->vec : 1;
        LLVMValueRef c = em_load(e, cs, em_iadd(e, tb, em_i64(e, i)), w);
        LLVMValueRef s = em_load(e, sn, em_iadd(e, tb, em_i64(e, i)), w);
        if (sign < 0) s = LLVMBuildFNeg(e->b, s, "");
        LLVMValueRef at1 = em_iadd(e, base, em_i64(e, i)), at2 = em_iadd(e, base, em_i64(e, i + half));
        LLVMValueRef x1 = em_load(e, x, at1, w), x2 = em_load(e, x, at2, w);
        em_store(e, o, at1, LLVMBuildFSub(e->b, em_mul(e, x1, c), em_mul(e, x2, s), ""), w);
        em_store(e, o, at2, em_add(e, em_mul(e, x2, c), em_mul(e, x1, s)), w);
    }
    em_for_end(e, &rows, em_i64(e, 1));
}

/* LayerRoPE's gain for one layer (run once per forward when not folded). */
static void kg_depth_gain(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    int64_t d = k->g->nodes[n->in[0]].shape.dim[0];
    LLVMValueRef sc[5];
    for (int j = 1; j < 5; j++) sc[j] = em_to_f64(e, em_load(e, kg_ptr(k, n->in[j]), em_i64(e, 0), 1));
    double u = log((double)n->iattr[0] + 1.0);
    LLVMValueRef r = LLVMBuildFAdd(e->b, sc[1], LLVMBuildFMul(e->b, sc[2], em_d64(e, u), ""), "");
    LLVMValueRef mag = em_libm(e, "exp", r, NULL);
    LLVMValueRef theta = em_libm(e, "exp", LLVMBuildFAdd(e->b, sc[3], LLVMBuildFMul(e->b, sc[4], em_d64(e, u), ""), ""), NULL);
    LLVMValueRef gam = kg_ptr(k, n->in[0]), o = kg_ptr(k, k->gr->anchor);
    em_loop l;
    LLVMValueRef j = em_for_begin(e, &l, em_i64(e, 0), em_i64(e, d / 2));
    LLVMValueRef ex = LLVMBuildFMul(e->b, LLVMBuildSIToFP(e->b, j, e->f64, ""), em_d64(e, -2.0 / (double)d), "");
    LLVMValueRef ang = LLVMBuildFMul(e->b, theta, em_libm(e, "pow", em_d64(e, n->fattr[0]), ex), "");
    LLVMValueRef c = em_libm(e, "cos", ang, NULL), s = em_libm(e, "sin", ang, NULL);
    LLVMValueRef j0 = em_imul(e, j, em_i64(e, 2)), j1 = em_iadd(e, j0, em_i64(e, 1));
    LLVMValueRef g0 = em_to_f64(e, em_load(e, gam, j0, 1)), g1 = em_to_f64(e, em_load(e, gam, j1, 1));
    LLVMValueRef re = LLVMBuildFSub(e->b, LLVMBuildFMul(e->b, g0, c, ""), LLVMBuildFMul(e->b, g1, s, ""), "");
    LLVMValueRef im = LLVMBuildFAdd(e->b, LLVMBuildFMul(e->b, g0, s, ""), LLVMBuildFMul(e->b, g1, c, ""), "");
    em_store(e, o, j0, em_to_f32(e, LLVMBuildFMul(e->b, mag, re, "")), 1);
    em_store(e, o, j1, em_to_f32(e, LLVMBuildFMul(e->b, mag, im, "")), 1);
    em_for_end(e, &l, em_i64(e, 1));
}

#define CE_SC(r, f) LLVMBuildGEP2(e->b, e->f64, sc, (LLVMValueRef[]){em_iadd(e, em_imul(e, (r), em_i64(e, LRC_CE_STATS)), em_i64(e, f))}, 1, "")

void kg_ce_row_stats(kgen *k, LLVMValueRef x, LLVMValueRef y, LLVMValueRef sc, LLVMValueRef r, int64_t V, LLVMValueRef E)
{
    em_t *e = k->e;
    LLVMValueRef lab = em_load_i32(e, y, r);
    for (int f = 0; f < LRC_CE_STATS; f++) LLVMBuildStore(e->b, em_d64(e, 0), CE_SC(r, f));
    em_if skip;
    em_if_begin(e, &skip, LLVMBuildICmp(e->b, LLVMIntNE, lab, LLVMConstInt(e->i32, (unsigned long long)-100, 1), ""));
    LLVMValueRef m, sum;
    /* the logit at the label first: E may be x */
    LLVMValueRef at = em_iadd(e, em_imul(e, r, em_i64(e, V)), LLVMBuildSExt(e->b, lab, e->i64, ""));
    LLVMBuildStore(e->b, em_to_f64(e, em_load(e, x, at, 1)), CE_SC(r, 3));
    kg_row_logsumexp(k, x, em_imul(e, r, em_i64(e, V)), V, E, &m, &sum);
    LLVMBuildStore(e->b, em_to_f64(e, m), CE_SC(r, 0));
    LLVMBuildStore(e->b, sum, CE_SC(r, 1));
    LLVMBuildStore(e->b, em_d64(e, 1), CE_SC(r, 2));
    em_if_end(e, &skip);
}

void kg_ce_finish(kgen *k, LLVMValueRef sc, int64_t rows, LLVMValueRef mine, int64_t total, LLVMValueRef out)
{
    em_t *e = k->e;
    LLVMValueRef done = LLVMBuildGEP2(e->b, e->i64, LLVMBuildBitCast(e->b, sc, LLVMPointerType(e->i64, 0), ""),
                                      (LLVMValueRef[]){em_i64(e, LRC_CE_STATS * rows)}, 1, "");
    /* the count after this call's share (sequentially consistent: the last
     * caller sees every other caller's rows) */
    LLVMValueRef before = LLVMBuildAtomicRMW(e->b, LLVMAtomicRMWBinOpAdd, done, mine, LLVMAtomicOrderingSequentiallyConsistent, 0);
    em_if last;
    em_if_begin(e, &last, LLVMBuildICmp(e->b, LLVMIntEQ, em_iadd(e, before, mine), em_i64(e, total), ""));
    LLVMValueRef sum = em_alloca(e, e->f64, "total"), used = em_alloca(e, e->f64, "used");
    LLVMBuildStore(e->b, em_d64(e, 0), sum);
    LLVMBuildStore(e->b, em_d64(e, 0), used);
    em_loop lr;
    LLVMValueRef r = em_for_begin(e, &lr, em_i64(e, 0), em_i64(e, rows));
    LLVMValueRef one = LLVMBuildLoad2(e->b, e->f64, CE_SC(r, 2), "");
    em_if live;
    em_if_begin(e, &live, LLVMBuildFCmp(e->b, LLVMRealONE, one, em_d64(e, 0), ""));
    LLVMValueRef lse = LLVMBuildFAdd(e->b, LLVMBuildLoad2(e->b, e->f64, CE_SC(r, 0), ""), em_libm(e, "log", LLVMBuildLoad2(e->b, e->f64, CE_SC(r, 1), ""), NULL), "");
    LLVMValueRef term = LLVMBuildFSub(e->b, lse, LLVMBuildLoad2(e->b, e->f64, CE_SC(r, 3), ""), "");
    LLVMBuildStore(e->b, LLVMBuildFAdd(e->b, LLVMBuildLoad2(e->b, e->f64, sum, ""), term, ""), sum);
    LLVMBuildStore(e->b, LLVMBuildFAdd(e->b, LLVMBuildLoad2(e->b, e->f64, used, ""), one, ""), used);
    em_if_end(e, &live);
    em_for_end(e, &lr, em_i64(e, 1));
    /* 0/0 is NaN, as in PyTorch */
    LLVMValueRef mean = LLVMBuildFDiv(e->b, LLVMBuildLoad2(e->b, e->f64, sum, ""), LLVMBuildLoad2(e->b, e->f64, used, ""), "");
    em_store(e, out, em_i64(e, 0), em_to_f32(e, mean), 1);
    LLVMBuildStore(e->b, em_i64(e, 0), done);
    em_if_end(e, &last);
}
#undef CE_SC

/* Mean cross-entropy over labels != -100 (labels were range-checked). A
 * work item is a row: its statistics go to scratch (kg_ce_row_stats),
 * where the gradient's kernel finds them (program.c), or, with the
 * gradient in the group (fuse rule 9), the row's gradient follows at once
 * from them, the row still in cache (the 60m step's loss and gradient
 * kernels read the 131 MB of logits from memory twice); a count of finished
 * rows follows them. The call that finishes the last rows adds max +
 * log(sum) - x[label] in row order, as one thread would, and sets the count
 * back to zero: the loss is the same bit for bit however the rows were split. */
static void kg_cross_entropy(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    const lrc_shape *xs = &k->g->nodes[n->in[0]].shape;
    int64_t V = last_dim(xs), rows = lrc_shape_numel(xs) / V;
    LLVMValueRef x = kg_ptr(k, n->in[0]), sp = kg_scratch(k);
    assert(sp); /* program.c gives the cpu's cross-entropy its scratch */
    LLVMValueRef y = LLVMBuildBitCast(e->b, kg_ptr(k, n->in[1]), e->i32p, "");
    LLVMValueRef sc = LLVMBuildBitCast(e->b, sp, LLVMPointerType(e->f64, 0), "");
    int grad = lrc_group_loss_pair_grad(k->g, k->gr);
    LLVMValueRef nused = grad >= 0 ? kg_ce_used(k, y, rows) : NULL; /* every chunk counts the used labels itself */
    em_loop lr;
    LLVMValueRef r = em_for_begin(e, &lr, e->begin, e->end);
    /* the gradient's exponentials are the loss's: stored once, scaled in place */
    kg_ce_row_stats(k, x, y, sc, r, V, grad >= 0 ? kg_ptr(k, grad) : NULL);
    if (grad >= 0) kg_ce_grad_row(k, x, kg_ptr(k, grad), y, sp, r, V, nused);
    em_for_end(e, &lr, em_i64(e, 1));
    kg_ce_finish(k, sc, rows, LLVMBuildSub(e->b, e->end, e->begin, ""), rows, kg_ptr(k, k->gr->anchor));
}

static void kg_transpose(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    const lrc_shape *xs = &k->g->nodes[n->in[0]].shape;
    int64_t xst[LRC_MAX_DIMS], s = 1;
    for (int d = xs->ndim - 1; d >= 0; d--) {
        xst[d] = s;
        s *= xs->dim[d];
    }
    em_loop l;
    LLVMValueRef i = em_for_begin(e, &l, em_i64(e, 0), em_i64(e, lrc_shape_numel(&n->shape)));
    LLVMValueRef rest = i, src = em_i64(e, 0);
    for (int d = n->shape.ndim - 1; d >= 0; d--) { /* digit d of i walks input axis perm[d] */
        LLVMValueRef digit = LLVMBuildSRem(e->b, rest, em_i64(e, n->shape.dim[d]), "");
        rest = LLVMBuildSDiv(e->b, rest, em_i64(e, n->shape.dim[d]), "");
        src = em_iadd(e, src, em_imul(e, digit, em_i64(e, xst[n->iattr[d]])));
    }
    em_store(e, kg_ptr(k, k->gr->anchor), i, em_load(e, kg_ptr(k, n->in[0]), src, 1), 1);
    em_for_end(e, &l, em_i64(e, 1));
}

/* along one axis, out[.., i, ..] = x[.., i + start, ..], zeros outside x:
 * rows of the inner size copied or cleared */
static void kg_slice(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    const lrc_shape *xs = &k->g->nodes[n->in[0]].shape;
    int axis = (int)n->iattr[0];
    int64_t start = n->iattr[1], size = n->shape.dim[axis], len = xs->dim[axis], inner = 1, outer = 1;
    for (int d = axis + 1; d < xs->ndim; d++) inner *= xs->dim[d];
    for (int d = 0; d < axis; d++) outer *= xs->dim[d];
    LLVMValueRef x = kg_ptr(k, n->in[0]), o = kg_ptr(k, k->gr->anchor);
    em_loop lo, li, lz;
    LLVMValueRef a = em_for_begin(e, &lo, em_i64(e, 0), em_i64(e, outer));
    LLVMValueRef i = em_for_begin(e, &li, em_i64(e, 0), em_i64(e, size));
    LLVMValueRef j = em_iadd(e, i, em_i64(e, start));
    LLVMValueRef dst = em_imul(e, em_iadd(e, em_imul(e, a, em_i64(e, size)), i), em_i64(e, inner));
    LLVMValueRef inside = LLVMBuildAnd(e->b, LLVMBuildICmp(e->b, LLVMIntSGE, j, em_i64(e, 0), ""),
                                       LLVMBuildICmp(e->b, LLVMIntSLT, j, em_i64(e, len), ""), "");
    em_if in_x, out_x;
    em_if_begin(e, &in_x, inside);
    copy_row(k, o, dst, x, em_imul(e, em_iadd(e, em_imul(e, a, em_i64(e, len)), j), em_i64(e, inner)), inner);
    em_if_end(e, &in_x);
    em_if_begin(e, &out_x, LLVMBuildNot(e->b, inside, ""));
    LLVMValueRef c = em_for_begin(e, &lz, em_i64(e, 0), em_i64(e, inner));
    em_store(e, o, em_iadd(e, dst, c), em_f32(e, 0.0), 1);
    em_for_end(e, &lz, em_i64(e, 1));
    em_if_end(e, &out_x);
    em_for_end(e, &li, em_i64(e, 1));
    em_for_end(e, &lo, em_i64(e, 1));
}

/* an elementwise op alone: a broadcast the fused kernels cannot index (a
 * [1, T, d] position table over a batch), an op with no inputs, or one
 * computed in double (LRC_EW_F64); each input's element found from the
 * output index with its own strides */
static void kg_ew_alone(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    bool f64 = (lrc_ew_flags(n->op) & LRC_EW_F64) != 0;
    int64_t stride[LRC_MAX_INPUTS][LRC_MAX_DIMS] = {{0}};
    for (int q = 0; q < n->n_in; q++) {
        const lrc_shape *in = &k->g->nodes[n->in[q]].shape;
        int64_t st = 1;
        for (int d = n->shape.ndim - 1; d >= 0; d--) {
            int id = in->ndim - n->shape.ndim + d;
            int64_t size = id >= 0 ? in->dim[id] : 1;
            stride[q][d] = size == 1 ? 0 : st;
            st *= size;
        }
    }
    em_loop l;
    LLVMValueRef i = em_for_begin(e, &l, em_i64(e, 0), em_i64(e, lrc_shape_numel(&n->shape)));
    LLVMValueRef rest = i, at[LRC_MAX_INPUTS], x[LRC_MAX_INPUTS];
    for (int q = 0; q < n->n_in; q++) at[q] = lrc_shape_eq(&k->g->nodes[n->in[q]].shape, &n->shape) ? i : em_i64(e, 0);
    for (int d = n->shape.ndim - 1; d >= 0; d--) {
        LLVMValueRef digit = LLVMBuildSRem(e->b, rest, em_i64(e, n->shape.dim[d]), "");
        rest = LLVMBuildSDiv(e->b, rest, em_i64(e, n->shape.dim[d]), "");
        for (int q = 0; q < n->n_in; q++)
            if (at[q] != i) at[q] = em_iadd(e, at[q], em_imul(e, digit, em_i64(e, stride[q][d])));
    }
    for (int q = 0; q < n->n_in; q++) {
        x[q] = em_load(e, kg_ptr(k, n->in[q]), at[q], 1);
        if (f64) x[q] = em_to_f64(e, x[q]);
    }
    LLVMValueRef y = lrc_ew_llvm_eval(e, n, x, 1, f64);
    em_store(e, kg_ptr(k, k->gr->anchor), i, f64 ? em_to_f32(e, y) : y, 1);
    em_for_end(e, &l, em_i64(e, 1));
}

/* the loop's entry: the state starts as the initial value */
static void kg_loop_state(kgen *k, const lrc_node *n)
{
    copy_row(k, kg_ptr(k, k->gr->anchor), em_i64(k->e, 0), kg_ptr(k, n->in[0]), em_i64(k->e, 0), lrc_shape_numel(&n->shape));
}

/* the group kinds' kernels, for the ops that anchor them */
static void kg_row_kernel(kgen *k, const lrc_node *n) { (void)n; kg_row(k); }
static void kg_gemm_kernel(kgen *k, const lrc_node *n) { (void)n; kg_gemm(k); }
static void kg_attention_kernel(kgen *k, const lrc_node *n) { (void)n; kg_attention(k); }
static void kg_kv_attention_kernel(kgen *k, const lrc_node *n) { (void)n; kg_kv_attention(k); }
static void kg_attention_grad_kernel(kgen *k, const lrc_node *n) { (void)n; kg_attention_grad(k); }
static void kg_rope_kernel(kgen *k, const lrc_node *n) { kg_rope(k, n, 1.0); }
static void kg_rope_grad_kernel(kgen *k, const lrc_node *n) { kg_rope(k, n, -1.0); }

/* ---- the per-op table ---------------------------------------------------- */

/* KG_<op> for every op of LRC_OPS (ir/lrc_ir.h): an op without an entry
 * names an undefined KG_<op> and does not compile. NOT_RENDERED is what an
 * op this renderer has no code for would say, out loud. */
#define KERNEL(f) {.kernel = f}
#define NO_KERNEL {.no_kernel = true}
#define NOT_RENDERED {0}

#define KG_input NO_KERNEL /* sources and views: no computation */
#define KG_param NO_KERNEL
#define KG_state NO_KERNEL
#define KG_reshape NO_KERNEL
#define KG_loop_next NO_KERNEL /* the back edge: the executor's copies */
#define KG_embedding KERNEL(kg_embedding)
#define KG_matmul KERNEL(kg_gemm_kernel)
#define KG_matmul_nn KERNEL(kg_gemm_kernel)
#define KG_matmul_tn KERNEL(kg_gemm_kernel)
#define KG_rmsnorm KERNEL(kg_row_kernel)
#define KG_layernorm KERNEL(kg_row_kernel)
#define KG_softmax KERNEL(kg_row_kernel)
#define KG_rope KERNEL(kg_rope_kernel)
#define KG_rope_grad KERNEL(kg_rope_grad_kernel)
#define KG_attention KERNEL(kg_attention_kernel)
#define KG_kv_attention KERNEL(kg_kv_attention_kernel)
#define KG_attention_lse KERNEL(kg_attention_kernel) /* beside its output (fuse rule 7), or alone */
#define KG_attention_grad KERNEL(kg_attention_grad_kernel)
#define KG_transpose KERNEL(kg_transpose)
#define KG_slice KERNEL(kg_slice)
#define KG_depth_gain KERNEL(kg_depth_gain)
#define KG_depth_gain_grad KERNEL(kg_depth_gain_grad)
#define KG_cross_entropy KERNEL(kg_cross_entropy)
#define KG_cross_entropy_grad KERNEL(kg_cross_entropy_grad)
#define KG_loop_state KERNEL(kg_loop_state)
#define KG_rmsnorm_grad KERNEL(kg_rmsnorm_grad)
#define KG_layernorm_grad KERNEL(kg_layernorm_grad)
#define KG_softmax_grad KERNEL(kg_softmax_grad)
#define KG_sum_to KERNEL(kg_sum_to)
#define KG_embedding_grad KERNEL(kg_embedding_grad)
#define KG_topk KERNEL(kg_topk)
#define KG_gather KERNEL(kg_gather)
#define KG_gather_grad KERNEL(kg_gather_grad)
#define KG_expert_matmul KERNEL(kg_expert_matmul)
#define KG_expert_matmul_tn KERNEL(kg_expert_matmul_tn)
#define KG_sum KERNEL(kg_reduce)
#define KG_mean KERNEL(kg_reduce)
#define KG_amax KERNEL(kg_reduce)
#define KG_logsumexp KERNEL(kg_reduce)
#define KG_cumsum KERNEL(kg_cumsum)
#define KG_concat KERNEL(kg_concat)
#define KG_expand KERNEL(kg_expand)
#define KG_amax_grad KERNEL(kg_amax_grad)
#define KG_scan KERNEL(kg_scan)
#define KG_bmm KERNEL(kg_bmm)
#define KG_cast KERNEL(kg_cast)
#define KG_arange KERNEL(kg_arange)

static const kg_op kg_ops[LRC_OP_COUNT] = {
#define KG_ENTRY(E, op) [LRC_OP_##E] = KG_##op,
    LRC_OPS(KG_ENTRY)
#undef KG_ENTRY
/* every elementwise op: its expression in a fused group, kg_ew_alone by itself */
#define KG_EW_ENTRY(E, ...) [LRC_OP_##E] = {.elementwise = true, .kernel = kg_ew_alone},
    LRC_EW_OPS(KG_EW_ENTRY)
#undef KG_EW_ENTRY
};

bool lrc_llvm_supports_op(lrc_op op)
{
    const kg_op *o = &kg_ops[op];
    return o->no_kernel || o->elementwise || o->kernel;
}

/* ---- the FMA peak probe ------------------------------------------------- */

/* lrc_peak_fma: LRC_PEAK_ITERS iterations of mr * nv independent vector
 * FMAs per work item, the GEMM tile's shape without memory traffic: what
 * `lrc profile` divides achieved FLOP/s by. args[0] receives a sum so that
 * nothing is optimised away. */
static void emit_peak_kernel(em_t *e, const lrc_gemm_tiling *t)
{
    em_begin_kernel(e, LRC_PEAK_SYMBOL);
    int n = t->mr * t->nv, w = t->vec;
    LLVMValueRef slots[64], out = em_arg(e, 0, 0);
    for (int i = 0; i < n; i++) {
        slots[i] = em_alloca(e, em_vty(e, w), "acc");
        LLVMBuildStore(e->b, em_fw(e, 0.001 * (i + 1), w), slots[i]);
    }
    LLVMValueRef x = em_fw(e, 0.999, w), y = em_fw(e, 1e-6, w);
    em_loop items, it;
    em_for_begin(e, &items, e->begin, e->end);
    em_for_begin(e, &it, em_i64(e, 0), em_i64(e, LRC_PEAK_ITERS));
    for (int i = 0; i < n; i++)
        LLVMBuildStore(e->b, em_fma(e, LLVMBuildLoad2(e->b, em_vty(e, w), slots[i], ""), x, y), slots[i]);
    em_for_end(e, &it, em_i64(e, 1));
    em_for_end(e, &items, em_i64(e, 1));
    LLVMValueRef sum = em_fw(e, 0, w);
    for (int i = 0; i < n; i++) sum = em_add(e, sum, LLVMBuildLoad2(e->b, em_vty(e, w), slots[i], ""));
    em_store(e, out, em_i64(e, 0), em_hsum(e, sum, w), 1);
    em_finish_kernel(e);
}

/* ---- the driver -------------------------------------------------------- */

int lrc_llvm_generate(const lrc_graph *g, const lrc_schedule *s, const lrc_program *p, const lrc_llvm_target *t,
                      lrc_llvm_module **out, lrc_err *err)
{
    lrc_llvm_module *m = lrc_llvm_module_new("lrc", t, err);
    if (!m) return LRC_EUSER;
    em_t *e = lrc_llvm_module_emitter(m);
    int nbuf = g->n_nodes + p->n_extra;
    kgen k = {.e = e, .g = g, .s = s, .p = p, .vec = t->vec};
    k.arg_of = lrc_xmalloc((size_t)nbuf * sizeof(int));
    k.member = lrc_xcalloc((size_t)g->n_nodes, sizeof(bool));
    k.memo = lrc_xcalloc((size_t)g->n_nodes, sizeof(LLVMValueRef));
    int rc = LRC_OK;
    for (int i = 0; i < p->n_kernels; i++) {
        const lrc_kernel_desc *kd = &p->kernels[i];
        if (kd->impl != i || kd->loop_to >= 0) continue; /* runs the code of an identical kernel; a back edge has none */
        k.k = kd;
        k.gr = kd->group >= 0 ? &s->groups[kd->group] : NULL;
        for (int b = 0; b < nbuf; b++) k.arg_of[b] = -1;
        for (int a = 0; a < kd->n_args; a++) k.arg_of[kd->args[a]] = a;
        memset(k.member, 0, (size_t)g->n_nodes * sizeof(bool));
        if (k.gr)
            for (int j = 0; j < k.gr->n_nodes; j++) k.member[k.gr->nodes[j]] = true;
        em_begin_kernel(e, kd->name);
        k.argp = lrc_xmalloc((size_t)kd->n_args * sizeof(LLVMValueRef) + 1);
        for (int a = 0; a < kd->n_args; a++)
            k.argp[a] = em_arg(e, a, kd->args[a] < g->n_nodes && g->nodes[kd->args[a]].dtype == LRC_I32);
        kg_reset(&k);
        bool rendered = true;
        if (!k.gr) kg_gemm_pack(&k);
        else if (k.gr->kind == LRC_GROUP_ELEMENTWISE) kg_elementwise(&k);
        else { /* the anchor's kernel (fuse.c chose the group kind from the same op) */
            const lrc_node *a = &g->nodes[k.gr->anchor];
            rendered = kg_ops[a->op].kernel != NULL;
            if (rendered) kg_ops[a->op].kernel(&k, a);
        }
        free(k.argp);
        if (!rendered) {
            const lrc_node *n = &g->nodes[k.gr->anchor];
            rc = lrc_err_set(err, "op %s cannot be generated in a %s kernel", lrc_op_name(n->op), lrc_group_kind_name(k.gr->kind));
            if (n->loc) lrc_err_prefix(err, "%s", n->loc);
            break;
        }
        em_finish_kernel(e);
    }
    free(k.arg_of);
    free(k.member);
    free(k.memo);
    if (rc) {
        lrc_llvm_module_free(m);
        return rc;
    }
    emit_peak_kernel(e, &p->tiling);
    kg_emit_launch_table(e, g, p);
    if (lrc_llvm_module_verify(m, err)) {
        lrc_llvm_module_free(m);
        return LRC_EUSER;
    }
    *out = m;
    return LRC_OK;
}
