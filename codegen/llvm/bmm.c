/* bmm.c — the cpu kernel of bmm (ir/bmm.c), a [..., M, K] x b [..., K, N]
 * with broadcast batch axes: a work item per output row (codegen/program.c's
 * ROWS), each dot product summed in f64 in the order of k as the reference
 * sums it, so that cpu and ref agree to the rounding of the result. */
#include "kgen.h"

#define C(v) em_i64(e, v)

void kg_bmm(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    const lrc_shape *o = &n->shape;
    int nb = o->ndim - 2;
    int64_t M = o->dim[nb], N = o->dim[nb + 1], K = k->g->nodes[n->in[0]].shape.dim[k->g->nodes[n->in[0]].shape.ndim - 1];
    int64_t sa[LRC_MAX_DIMS], sb[LRC_MAX_DIMS];
    lrc_bmm_strides(&k->g->nodes[n->in[0]].shape, &k->g->nodes[n->in[1]].shape, o, sa, sb);
    LLVMValueRef A = kg_ptr(k, n->in[0]), B = kg_ptr(k, n->in[1]), O = kg_ptr(k, k->gr->anchor);
    LLVMValueRef acc = em_alloca(e, e->f64, "acc");
    em_loop lr, lj, lk;
    LLVMValueRef r = em_for_begin(e, &lr, e->begin, e->end);
    LLVMValueRef bi = LLVMBuildSDiv(e->b, r, C(M), ""), m = LLVMBuildSRem(e->b, r, C(M), "");
    /* the batch index's digits, each moving a's and b's matrix by its stride */
    LLVMValueRef rest = bi, ia = C(0), ib = C(0);
    for (int d = nb - 1; d >= 0; d--) {
        LLVMValueRef digit = LLVMBuildSRem(e->b, rest, C(o->dim[d]), "");
        rest = LLVMBuildSDiv(e->b, rest, C(o->dim[d]), "");
        if (sa[d]) ia = em_iadd(e, ia, em_imul(e, digit, C(sa[d])));
        if (sb[d]) ib = em_iadd(e, ib, em_imul(e, digit, C(sb[d])));
    }
    LLVMValueRef arow = em_iadd(e, em_imul(e, ia, C(M * K)), em_imul(e, m, C(K))), bmat = em_imul(e, ib, C(K * N));
    LLVMValueRef j = em_for_begin(e, &lj, C(0), C(N));
    LLVMBuildStore(e->b, em_d64(e, 0), acc);
    LLVMValueRef q = em_for_begin(e, &lk, C(0), C(K));
    LLVMValueRef x = em_to_f64(e, em_load(e, A, em_iadd(e, arow, q), 1));
    LLVMValueRef y = em_to_f64(e, em_load(e, B, em_iadd(e, bmat, em_iadd(e, em_imul(e, q, C(N)), j)), 1));
    LLVMBuildStore(e->b, LLVMBuildFAdd(e->b, LLVMBuildLoad2(e->b, e->f64, acc, ""), LLVMBuildFMul(e->b, x, y, ""), ""), acc);
    em_for_end(e, &lk, C(1));
    em_store(e, O, em_iadd(e, em_imul(e, r, C(N)), j), em_to_f32(e, LLVMBuildLoad2(e->b, e->f64, acc, "")), 1);
    em_for_end(e, &lj, C(1));
    em_for_end(e, &lr, C(1));
}
