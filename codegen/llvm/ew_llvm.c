/* ew_llvm.c — the cpu renderer's elementwise algebra (ir/lrc_ew.h): each
 * primitive as LLVM IR through emit.c's helpers, over f32 vectors of width
 * w (exp, erf, tanh and sigmoid vectorised; the other transcendentals
 * through libm in double, lane by lane), or over f64 scalars with libm for
 * the ops computed in double (LRC_EW_F64). */
#include "ew_llvm.h"

#define E (((ew_llvm *)A->ctx)->e)
#define W (((ew_llvm *)A->ctx)->w)
#define F64 (((ew_llvm *)A->ctx)->f64)
#define V(k) ((LLVMValueRef)x[k].p)
#define R(v) return (lrc_ew_val){.p = (v)}
#define PRIM(name) static lrc_ew_val ll_##name(lrc_ew_alg *A, const lrc_ew_val *x)

static lrc_ew_val ll_const(lrc_ew_alg *A, double v) { R(F64 ? em_d64(E, v) : em_fw(E, v, W)); }
static LLVMValueRef cst(lrc_ew_alg *A, double v) { return ll_const(A, v).p; }

/* libm's double function `name` of one or two operands: directly in f64,
 * else on each lane widened to double and the result rounded to f32 */
static LLVMValueRef libm(lrc_ew_alg *A, const char *name, LLVMValueRef a, LLVMValueRef b)
{
    em_t *e = E;
    if (F64) return em_libm(e, name, a, b);
    if (W == 1) return em_to_f32(e, em_libm(e, name, em_to_f64(e, a), b ? em_to_f64(e, b) : NULL));
    LLVMValueRef out = LLVMGetUndef(em_vty(e, W));
    for (int i = 0; i < W; i++) {
        LLVMValueRef lane = LLVMConstInt(e->i32, (unsigned long long)i, 0);
        LLVMValueRef la = em_to_f64(e, LLVMBuildExtractElement(e->b, a, lane, ""));
        LLVMValueRef lb = b ? em_to_f64(e, LLVMBuildExtractElement(e->b, b, lane, "")) : NULL;
        out = LLVMBuildInsertElement(e->b, out, em_to_f32(e, em_libm(e, name, la, lb)), lane, "");
    }
    return out;
}

static LLVMValueRef select_cmp(lrc_ew_alg *A, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b, LLVMValueRef t, LLVMValueRef f)
{
    return LLVMBuildSelect(E->b, LLVMBuildFCmp(E->b, p, a, b, ""), t, f, "");
}
#define CMP(name, pred) PRIM(name) { R(select_cmp(A, pred, V(0), V(1), cst(A, 1.0), cst(A, 0.0))); }

PRIM(neg) { R(LLVMBuildFNeg(E->b, V(0), "")); }
PRIM(abs) { R(em_intr1(E, "fabs", V(0))); }
PRIM(sqrt) { R(em_intr1(E, "sqrt", V(0))); }
PRIM(rsqrt) { R(LLVMBuildFDiv(E->b, cst(A, 1.0), em_intr1(E, "sqrt", V(0)), "")); }
PRIM(log) { R(libm(A, "log", V(0), NULL)); }
PRIM(log1p) { R(libm(A, "log1p", V(0), NULL)); }
PRIM(exp) { R(F64 ? em_libm(E, "exp", V(0), NULL) : em_exp(E, V(0), W)); }
PRIM(expm1) { R(libm(A, "expm1", V(0), NULL)); }
PRIM(sin) { R(libm(A, "sin", V(0), NULL)); }
PRIM(cos) { R(libm(A, "cos", V(0), NULL)); }
PRIM(erf) { R(F64 ? em_libm(E, "erf", V(0), NULL) : em_erf(E, V(0), W)); }
PRIM(floor) { R(em_intr1(E, "floor", V(0))); }
PRIM(sign) /* 1, -1, else x itself (0, -0, NaN) */
{
    LLVMValueRef neg = select_cmp(A, LLVMRealOLT, V(0), cst(A, 0.0), cst(A, -1.0), V(0));
    R(select_cmp(A, LLVMRealOGT, V(0), cst(A, 0.0), cst(A, 1.0), neg));
}
PRIM(reciprocal) { R(LLVMBuildFDiv(E->b, cst(A, 1.0), V(0), "")); }
PRIM(tanh) { R(F64 ? em_libm(E, "tanh", V(0), NULL) : em_tanh(E, V(0), W)); }
PRIM(sigmoid)
{
    if (!F64) R(em_sigmoid(E, V(0), W));
    LLVMValueRef ex = em_libm(E, "exp", LLVMBuildFNeg(E->b, V(0), ""), NULL);
    R(LLVMBuildFDiv(E->b, cst(A, 1.0), LLVMBuildFAdd(E->b, cst(A, 1.0), ex, ""), ""));
}
PRIM(add) { R(em_add(E, V(0), V(1))); }
PRIM(sub) { R(LLVMBuildFSub(E->b, V(0), V(1), "")); }
PRIM(mul) { R(em_mul(E, V(0), V(1))); }
PRIM(div) { R(LLVMBuildFDiv(E->b, V(0), V(1), "")); }
PRIM(pow) { R(libm(A, "pow", V(0), V(1))); }
PRIM(maximum) { R(em_intr2(E, "maxnum", V(0), V(1))); }
PRIM(minimum) { R(em_intr2(E, "minnum", V(0), V(1))); }
CMP(lt, LLVMRealOLT)
CMP(le, LLVMRealOLE)
CMP(eq, LLVMRealOEQ)
CMP(ne, LLVMRealUNE)
CMP(gt, LLVMRealOGT)
CMP(ge, LLVMRealOGE)
PRIM(where) { R(select_cmp(A, LLVMRealUNE, V(0), cst(A, 0.0), V(1), V(2))); }
PRIM(fma) { R(em_fma(E, V(0), V(1), V(2))); }

const lrc_ew_prim_fn lrc_ew_llvm_prims[LRC_PRIM_COUNT] = {
    [LRC_PRIM_NEG] = ll_neg,         [LRC_PRIM_ABS] = ll_abs,       [LRC_PRIM_SQRT] = ll_sqrt,
    [LRC_PRIM_RSQRT] = ll_rsqrt,     [LRC_PRIM_LOG] = ll_log,       [LRC_PRIM_LOG1P] = ll_log1p,
    [LRC_PRIM_EXP] = ll_exp,         [LRC_PRIM_EXPM1] = ll_expm1,   [LRC_PRIM_SIN] = ll_sin,
    [LRC_PRIM_COS] = ll_cos,         [LRC_PRIM_ERF] = ll_erf,       [LRC_PRIM_FLOOR] = ll_floor,
    [LRC_PRIM_SIGN] = ll_sign,       [LRC_PRIM_RECIPROCAL] = ll_reciprocal,
    [LRC_PRIM_TANH] = ll_tanh,       [LRC_PRIM_SIGMOID] = ll_sigmoid,
    [LRC_PRIM_ADD] = ll_add,         [LRC_PRIM_SUB] = ll_sub,       [LRC_PRIM_MUL] = ll_mul,
    [LRC_PRIM_DIV] = ll_div,         [LRC_PRIM_POW] = ll_pow,       [LRC_PRIM_MAXIMUM] = ll_maximum,
    [LRC_PRIM_MINIMUM] = ll_minimum, [LRC_PRIM_LT] = ll_lt,         [LRC_PRIM_LE] = ll_le,
    [LRC_PRIM_EQ] = ll_eq,           [LRC_PRIM_NE] = ll_ne,         [LRC_PRIM_GT] = ll_gt,
    [LRC_PRIM_GE] = ll_ge,           [LRC_PRIM_WHERE] = ll_where,   [LRC_PRIM_FMA] = ll_fma,
};

LLVMValueRef lrc_ew_llvm_eval(em_t *e, const lrc_node *n, const LLVMValueRef *in, int w, bool f64)
{
    ew_llvm ctx = {e, w, f64};
    lrc_ew_alg A = {ll_const, lrc_ew_llvm_prims, &ctx};
    lrc_ew_val x[LRC_MAX_INPUTS];
    for (int k = 0; k < n->n_in; k++) x[k].p = in[k];
    return lrc_ew_eval(&A, n, x).p;
}
