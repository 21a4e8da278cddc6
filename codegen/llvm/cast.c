/* cast.c — the cpu kernels of cast (between i32 and f32) and arange
 * (ir/cast.c), each one work item over every element. */
#include "kgen.h"

#define C(v) em_i64(e, v)

/* i32 -> f32 rounded to nearest; f32 -> i32 toward zero where it fits,
 * else INT32_MIN (NaN too), as the reference computes it (an fptosi out of
 * range would be poison) */
void kg_cast(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    LLVMValueRef X = kg_ptr(k, n->in[0]), O = kg_ptr(k, k->gr->anchor);
    em_loop l;
    LLVMValueRef i = em_for_begin(e, &l, C(0), C(lrc_shape_numel(&n->shape)));
    if (n->dtype == LRC_F32) {
        em_store(e, O, i, LLVMBuildSIToFP(e->b, em_load_i32(e, X, i), e->f32, ""), 1);
    } else {
        LLVMValueRef v = em_load(e, X, i, 1);
        LLVMValueRef fits = LLVMBuildAnd(e->b, LLVMBuildFCmp(e->b, LLVMRealOGE, v, em_f32(e, -2147483648.0), ""),
                                         LLVMBuildFCmp(e->b, LLVMRealOLT, v, em_f32(e, 2147483648.0), ""), "");
        LLVMValueRef safe = LLVMBuildSelect(e->b, fits, v, em_f32(e, 0.0), "");
        LLVMValueRef y = LLVMBuildSelect(e->b, fits, LLVMBuildFPToSI(e->b, safe, e->i32, ""), LLVMConstInt(e->i32, 0x80000000u, 0), "");
        LLVMBuildStore(e->b, y, LLVMBuildGEP2(e->b, e->i32, O, &i, 1, ""));
    }
    em_for_end(e, &l, C(1));
}

void kg_arange(kgen *k, const lrc_node *n)
{
    em_t *e = k->e;
    LLVMValueRef O = kg_ptr(k, k->gr->anchor);
    em_loop l;
    LLVMValueRef i = em_for_begin(e, &l, C(0), C(n->shape.dim[0]));
    LLVMBuildStore(e->b, LLVMBuildTrunc(e->b, i, e->i32, ""), LLVMBuildGEP2(e->b, e->i32, O, &i, 1, ""));
    em_for_end(e, &l, C(1));
}
