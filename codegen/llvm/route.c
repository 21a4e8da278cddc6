/* route.c — the cpu kernels of a mixture of experts' ops (ir/route.c):
 * topk (torch.topk's order, topk.c), gather and its gradient, and the
 * matmul of the rows routed to one expert, which computes those rows only:
 * a work item owns a block of LRC_SUM_COLS output columns of every row,
 * so the weight's block stays in cache across the rows it serves. */
#include "kgen.h"

#define C(v) em_i64(e, v)

static int64_t last_of(const lrc_shape *s) { return s->ndim ? s->dim[s->ndim - 1] : 1; }

/* rows [begin, end): ids of the k largest of each row, in torch.topk's order */
void kg_topk(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    int64_t E = last_of(&k->g->nodes[n->in[0]].shape), K = n->iattr[0];
    LLVMValueRef X = kg_ptr(k, n->in[0]), O = LLVMBuildBitCast(e->b, kg_ptr(k, k->gr->anchor), e->i32p, "");
    LLVMValueRef order = kg_topk_order_fn(e);
    /* a row's values and indices: on the stack (a router's few experts), from the heap past 4096 */
    bool heap = E > 4096;
    LLVMValueRef v = heap ? em_malloc(e, C(E * 4)) : LLVMBuildBitCast(e->b, em_alloca(e, LLVMArrayType(e->f32, (unsigned)E), "v"), e->f32p, "");
    LLVMValueRef ix = heap ? LLVMBuildBitCast(e->b, em_malloc(e, C(E * 4)), e->i32p, "")
                           : LLVMBuildBitCast(e->b, em_alloca(e, LLVMArrayType(e->i32, (unsigned)E), "ix"), e->i32p, "");
    em_loop lr, lj;
    LLVMValueRef r = em_for_begin(e, &lr, e->begin, e->end);
    LLVMValueRef j = em_for_begin(e, &lj, C(0), C(E));
    em_store(e, v, j, em_load(e, X, em_iadd(e, em_imul(e, r, C(E)), j), 1), 1);
    LLVMBuildStore(e->b, LLVMBuildTrunc(e->b, j, e->i32, ""), LLVMBuildGEP2(e->b, e->i32, ix, &j, 1, ""));
    em_for_end(e, &lj, C(1));
    LLVMValueRef args[4] = {v, ix, C(E), C(K)};
    LLVMBuildCall2(e->b, LLVMGlobalGetValueType(order), order, args, 4, "");
    j = em_for_begin(e, &lj, C(0), C(K));
    LLVMValueRef at = em_iadd(e, em_imul(e, r, C(K)), j);
    LLVMBuildStore(e->b, em_load_i32(e, ix, j), LLVMBuildGEP2(e->b, e->i32, O, &at, 1, ""));
    em_for_end(e, &lj, C(1));
    em_for_end(e, &lr, C(1));
    if (heap) em_free(e, v), em_free(e, ix);
}

/* rows [begin, end) of out[..., k] = x[..., ids]; the runtime checked ids from inputs */
void kg_gather(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    int64_t E = last_of(&k->g->nodes[n->in[0]].shape), K = last_of(&n->shape);
    LLVMValueRef X = kg_ptr(k, n->in[0]), ids = LLVMBuildBitCast(e->b, kg_ptr(k, n->in[1]), e->i32p, "");
    LLVMValueRef O = kg_ptr(k, k->gr->anchor);
    em_loop lr, lj;
    LLVMValueRef r = em_for_begin(e, &lr, e->begin, e->end);
    LLVMValueRef j = em_for_begin(e, &lj, C(0), C(K)), at = em_iadd(e, em_imul(e, r, C(K)), j);
    LLVMValueRef id = LLVMBuildSExt(e->b, em_load_i32(e, ids, at), e->i64, "");
    em_store(e, O, at, em_load(e, X, em_iadd(e, em_imul(e, r, C(E)), id), 1), 1);
    em_for_end(e, &lj, C(1));
    em_for_end(e, &lr, C(1));
}

/* rows [begin, end) of out[..., n]: zeros, then dy added at each id (repeats sum in order) */
void kg_gather_grad(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    int64_t E = last_of(&n->shape), K = last_of(&k->g->nodes[n->in[0]].shape);
    LLVMValueRef ids = LLVMBuildBitCast(e->b, kg_ptr(k, n->in[0]), e->i32p, ""), DY = kg_ptr(k, n->in[1]);
    LLVMValueRef O = kg_ptr(k, k->gr->anchor);
    em_loop lr, lj;
    LLVMValueRef r = em_for_begin(e, &lr, e->begin, e->end);
    LLVMValueRef j = em_for_begin(e, &lj, C(0), C(E));
    em_store(e, O, em_iadd(e, em_imul(e, r, C(E)), j), em_f32(e, 0), 1);
    em_for_end(e, &lj, C(1));
    j = em_for_begin(e, &lj, C(0), C(K));
    LLVMValueRef at = em_iadd(e, em_imul(e, r, C(K)), j);
    LLVMValueRef dst = em_iadd(e, em_imul(e, r, C(E)), LLVMBuildSExt(e->b, em_load_i32(e, ids, at), e->i64, ""));
    em_store(e, O, dst, em_add(e, em_load(e, O, dst, 1), em_load(e, DY, at, 1)), 1);
    em_for_end(e, &lj, C(1));
    em_for_end(e, &lr, C(1));
}

/* The row of input `in` (x[..., S|1, K]) that slot row r reads. */
static LLVMValueRef routed_row(kgen *k, const lrc_node *n, int in, LLVMValueRef r)
{
    em_t *e = k->e;
    const lrc_shape *x = &k->g->nodes[n->in[in]].shape;
    int64_t S = last_of(&k->g->nodes[n->in[2]].shape);
    return x->dim[x->ndim - 2] == S ? r : LLVMBuildSDiv(e->b, r, C(S), "");
}

/* This item's block of columns [c0, c1) of D, and the end of its whole vectors. */
static void column_block(kgen *k, LLVMValueRef item, int64_t D, LLVMValueRef *c0, LLVMValueRef *c1, LLVMValueRef *vend)
{
    em_t *e = k->e;
    *c0 = em_imul(e, item, C(LRC_SUM_COLS));
    LLVMValueRef hi = em_iadd(e, *c0, C(LRC_SUM_COLS));
    *c1 = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, hi, C(D), ""), hi, C(D), "");
    LLVMValueRef span = LLVMBuildSub(e->b, *c1, *c0, "");
    *vend = em_iadd(e, *c0, em_imul(e, LLVMBuildSDiv(e->b, span, C(k->vec), ""), C(k->vec)));
}

/* out[r, j] = x[r] . W[j] (W [N, K]) for j in [c0, c1): K-long dot products */
static void expert_rows_dot(kgen *k, LLVMValueRef X, LLVMValueRef W, LLVMValueRef O, LLVMValueRef xr, LLVMValueRef orow, LLVMValueRef c0,
                            LLVMValueRef c1, int64_t K)
{
    em_t *e = k->e;
    int w = k->vec;
    int64_t kv = K / w * w;
    em_loop lj, lk;
    LLVMValueRef j = em_for_begin(e, &lj, c0, c1), wr = em_imul(e, j, C(K));
    LLVMValueRef acc = em_alloca(e, em_vty(e, w), "acc"), tail = em_alloca(e, e->f32, "tail");
    LLVMBuildStore(e->b, em_fw(e, 0, w), acc);
    LLVMBuildStore(e->b, em_f32(e, 0), tail);
    if (kv > 0) {
        LLVMValueRef i = em_for_begin(e, &lk, C(0), C(kv));
        LLVMValueRef a = em_fma(e, em_load(e, X, em_iadd(e, xr, i), w), em_load(e, W, em_iadd(e, wr, i), w),
                                LLVMBuildLoad2(e->b, em_vty(e, w), acc, ""));
        LLVMBuildStore(e->b, a, acc);
        em_for_end(e, &lk, C(w));
    }
    if (kv < K) {
        LLVMValueRef i = em_for_begin(e, &lk, C(kv), C(K));
        LLVMValueRef a = em_fma(e, em_load(e, X, em_iadd(e, xr, i), 1), em_load(e, W, em_iadd(e, wr, i), 1),
                                LLVMBuildLoad2(e->b, e->f32, tail, ""));
        LLVMBuildStore(e->b, a, tail);
        em_for_end(e, &lk, C(1));
    }
    LLVMValueRef sum = em_add(e, em_hsum(e, LLVMBuildLoad2(e->b, em_vty(e, w), acc, ""), w), LLVMBuildLoad2(e->b, e->f32, tail, ""));
    em_store(e, O, em_iadd(e, orow, j), sum, 1);
    em_for_end(e, &lj, C(1));
}

/* out[r, j] = sum_i x[r, i] W[i, j] (W [K, N]) for j in [c0, c1): vectors along j */
static void expert_rows_axpy(kgen *k, LLVMValueRef X, LLVMValueRef W, LLVMValueRef O, LLVMValueRef xr, LLVMValueRef orow, LLVMValueRef c0,
                             LLVMValueRef c1, LLVMValueRef vend, int64_t K, int64_t N)
{
    em_t *e = k->e;
    for (int pass = 0; pass < 2; pass++) {
        int w = pass == 0 ? k->vec : 1;
        em_loop lj, li;
        LLVMValueRef j = em_for_begin(e, &lj, pass == 0 ? c0 : vend, pass == 0 ? vend : c1);
        LLVMValueRef acc = em_alloca(e, em_vty(e, w), "acc");
        LLVMBuildStore(e->b, em_fw(e, 0, w), acc);
        LLVMValueRef i = em_for_begin(e, &li, C(0), C(K));
        LLVMValueRef xs = em_splat(e, em_load(e, X, em_iadd(e, xr, i), 1), w);
        LLVMValueRef a = em_fma(e, xs, em_load(e, W, em_iadd(e, em_imul(e, i, C(N)), j), w), LLVMBuildLoad2(e->b, em_vty(e, w), acc, ""));
        LLVMBuildStore(e->b, a, acc);
        em_for_end(e, &li, C(1));
        em_store(e, O, em_iadd(e, orow, j), LLVMBuildLoad2(e->b, em_vty(e, w), acc, ""), w);
        em_for_end(e, &lj, C(w));
    }
}

/* items: blocks of LRC_SUM_COLS output columns; in each, every row not
 * routed to the expert is zeros and every routed row is computed */
void kg_expert_matmul(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    bool nn = n->iattr[2] != 0;
    int64_t rows = lrc_shape_numel(&k->g->nodes[n->in[2]].shape), K = last_of(&k->g->nodes[n->in[0]].shape), N = last_of(&n->shape);
    LLVMValueRef X = kg_ptr(k, n->in[0]), W = kg_ptr(k, n->in[1]), O = kg_ptr(k, k->gr->anchor);
    LLVMValueRef ids = LLVMBuildBitCast(e->b, kg_ptr(k, n->in[2]), e->i32p, "");
    em_loop li, lr, lz;
    LLVMValueRef item = em_for_begin(e, &li, e->begin, e->end), c0, c1, vend;
    column_block(k, item, N, &c0, &c1, &vend);
    LLVMValueRef r = em_for_begin(e, &lr, C(0), C(rows)), orow = em_imul(e, r, C(N));
    LLVMValueRef routed = LLVMBuildICmp(e->b, LLVMIntEQ, em_load_i32(e, ids, r), LLVMConstInt(e->i32, (unsigned long long)n->iattr[0], 1), "");
    LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "routed"), no = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "zeros");
    LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "next_row");
    LLVMBuildCondBr(e->b, routed, yes, no);
    LLVMPositionBuilderAtEnd(e->b, no);
    LLVMValueRef z = em_for_begin(e, &lz, c0, c1);
    em_store(e, O, em_iadd(e, orow, z), em_f32(e, 0), 1);
    em_for_end(e, &lz, C(1));
    LLVMBuildBr(e->b, next);
    LLVMPositionBuilderAtEnd(e->b, yes);
    LLVMValueRef xr = em_imul(e, routed_row(k, n, 0, r), C(K));
    if (nn) expert_rows_axpy(k, X, W, O, xr, orow, c0, c1, vend, K, N);
    else expert_rows_dot(k, X, W, O, xr, orow, c0, c1, K);
    LLVMBuildBr(e->b, next);
    LLVMPositionBuilderAtEnd(e->b, next);
    em_for_end(e, &lr, C(1));
    em_for_end(e, &li, C(1));
}

/* items: blocks of LRC_SUM_COLS columns of out[N, K] = sum over the routed
 * rows of a[r]^T b[r], rows in order */
void kg_expert_matmul_tn(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    int64_t rows = lrc_shape_numel(&k->g->nodes[n->in[2]].shape), N = n->shape.dim[0], K = n->shape.dim[1];
    LLVMValueRef A = kg_ptr(k, n->in[0]), B = kg_ptr(k, n->in[1]), O = kg_ptr(k, k->gr->anchor);
    LLVMValueRef ids = LLVMBuildBitCast(e->b, kg_ptr(k, n->in[2]), e->i32p, "");
    em_loop li, lr, lj, lz, lc;
    LLVMValueRef item = em_for_begin(e, &li, e->begin, e->end), c0, c1, vend;
    column_block(k, item, K, &c0, &c1, &vend);
    LLVMValueRef j = em_for_begin(e, &lj, C(0), C(N));
    LLVMValueRef z = em_for_begin(e, &lz, c0, c1);
    em_store(e, O, em_iadd(e, em_imul(e, j, C(K)), z), em_f32(e, 0), 1);
    em_for_end(e, &lz, C(1));
    em_for_end(e, &lj, C(1));
    LLVMValueRef r = em_for_begin(e, &lr, C(0), C(rows));
    em_if routed;
    em_if_begin(e, &routed, LLVMBuildICmp(e->b, LLVMIntEQ, em_load_i32(e, ids, r), LLVMConstInt(e->i32, (unsigned long long)n->iattr[0], 1), ""));
    LLVMValueRef ar = em_imul(e, routed_row(k, n, 0, r), C(N)), br = em_imul(e, routed_row(k, n, 1, r), C(K));
    j = em_for_begin(e, &lj, C(0), C(N));
    LLVMValueRef orow = em_imul(e, j, C(K)), aj = em_load(e, A, em_iadd(e, ar, j), 1);
    for (int pass = 0; pass < 2; pass++) {
        int w = pass == 0 ? k->vec : 1;
        LLVMValueRef c = em_for_begin(e, &lc, pass == 0 ? c0 : vend, pass == 0 ? vend : c1), at = em_iadd(e, orow, c);
        em_store(e, O, at, em_fma(e, em_splat(e, aj, w), em_load(e, B, em_iadd(e, br, c), w), em_load(e, O, at, w)), w);
        em_for_end(e, &lc, C(w));
    }
    em_for_end(e, &lj, C(1));
    em_if_end(e, &routed);
    em_for_end(e, &lr, C(1));
    em_for_end(e, &li, C(1));
}
