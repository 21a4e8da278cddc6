/* ew_ref.c — the reference's algebra (lrc_ew.h): every primitive in
 * double with libm, what ref_ops.c's elementwise kernel evaluates each
 * op's expression over (f32 and f64 storage alike). */
#include "lrc_ew.h"
#include "ref_template.h"

lrc_ew_val lrc_ew_ref_const(lrc_ew_alg *A, double v)
{
    (void)A;
    return (lrc_ew_val){.d = v};
}

#define R(v) return (lrc_ew_val){.d = (v)}
#define A0 x[0].d
#define A1 x[1].d
#define A2 x[2].d
#define PRIM(name) static lrc_ew_val rp_##name(lrc_ew_alg *A, const lrc_ew_val *x)
#define PRIM1(name, expr) PRIM(name) { (void)A; R(expr); }

PRIM1(neg, -A0)
PRIM1(abs, fabs(A0))
PRIM1(sqrt, sqrt(A0))
PRIM1(rsqrt, 1.0 / sqrt(A0))
PRIM1(log, log(A0))
PRIM1(log1p, log1p(A0))
PRIM1(exp, exp(A0))
PRIM1(expm1, expm1(A0))
PRIM1(sin, sin(A0))
PRIM1(cos, cos(A0))
PRIM1(erf, erf(A0))
PRIM1(floor, floor(A0))
PRIM1(sign, A0 > 0 ? 1.0 : A0 < 0 ? -1.0 : A0) /* 0, -0 and NaN stay */
PRIM1(reciprocal, 1.0 / A0)
PRIM1(tanh, tanh(A0))
PRIM1(sigmoid, ref_sigmoid(A0))
PRIM1(add, A0 + A1)
PRIM1(sub, A0 - A1)
PRIM1(mul, A0 * A1)
PRIM1(div, A0 / A1)
PRIM1(pow, pow(A0, A1))
PRIM1(maximum, A0 > A1 || isnan(A1) ? A0 : A1) /* fmax's NaN rule; max(-0, 0) = 0 as relu's x > 0 ? x : 0 */
PRIM1(minimum, A0 < A1 || isnan(A1) ? A0 : A1)
PRIM1(lt, A0 < A1 ? 1.0 : 0.0)
PRIM1(le, A0 <= A1 ? 1.0 : 0.0)
PRIM1(eq, A0 == A1 ? 1.0 : 0.0)
PRIM1(ne, A0 != A1 ? 1.0 : 0.0)
PRIM1(gt, A0 > A1 ? 1.0 : 0.0)
PRIM1(ge, A0 >= A1 ? 1.0 : 0.0)
PRIM1(where, A0 != 0 ? A1 : A2)
/* unfused, as the reference has always computed a * b + c in double */
PRIM1(fma, A0 * A1 + A2)

const lrc_ew_prim_fn lrc_ew_ref_prims[LRC_PRIM_COUNT] = {
    [LRC_PRIM_NEG] = rp_neg,         [LRC_PRIM_ABS] = rp_abs,       [LRC_PRIM_SQRT] = rp_sqrt,
    [LRC_PRIM_RSQRT] = rp_rsqrt,     [LRC_PRIM_LOG] = rp_log,       [LRC_PRIM_LOG1P] = rp_log1p,
    [LRC_PRIM_EXP] = rp_exp,         [LRC_PRIM_EXPM1] = rp_expm1,   [LRC_PRIM_SIN] = rp_sin,
    [LRC_PRIM_COS] = rp_cos,         [LRC_PRIM_ERF] = rp_erf,       [LRC_PRIM_FLOOR] = rp_floor,
    [LRC_PRIM_SIGN] = rp_sign,       [LRC_PRIM_RECIPROCAL] = rp_reciprocal,
    [LRC_PRIM_TANH] = rp_tanh,       [LRC_PRIM_SIGMOID] = rp_sigmoid,
    [LRC_PRIM_ADD] = rp_add,         [LRC_PRIM_SUB] = rp_sub,       [LRC_PRIM_MUL] = rp_mul,
    [LRC_PRIM_DIV] = rp_div,         [LRC_PRIM_POW] = rp_pow,       [LRC_PRIM_MAXIMUM] = rp_maximum,
    [LRC_PRIM_MINIMUM] = rp_minimum, [LRC_PRIM_LT] = rp_lt,         [LRC_PRIM_LE] = rp_le,
    [LRC_PRIM_EQ] = rp_eq,           [LRC_PRIM_NE] = rp_ne,         [LRC_PRIM_GT] = rp_gt,
    [LRC_PRIM_GE] = rp_ge,           [LRC_PRIM_WHERE] = rp_where,   [LRC_PRIM_FMA] = rp_fma,
};
