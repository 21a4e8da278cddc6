/* ew_cuda.c — the cuda renderer's elementwise algebra (ir/lrc_ew.h): each
 * primitive as a line of CUDA C, `const float <prefix>_<k> = ...;`, whose
 * value is the temporary's name; in double for the ops computed in double
 * (LRC_EW_F64). Templates name operand k as $k. */
#include "cugen.h"
#include "ir/lrc_ew.h"

#include <stdlib.h>
#include <string.h>

typedef struct ew_cuda {
    cu_text *t;
    const char *indent, *prefix;
    bool f64;
    int n, cap;
    char **names; /* the temporaries' names and the constants, each its own allocation: values point into them */
} ew_cuda;

static const char *const f32_tpl[LRC_PRIM_COUNT] = {
    [LRC_PRIM_NEG] = "-$0",
    [LRC_PRIM_ABS] = "fabsf($0)",
    [LRC_PRIM_SQRT] = "sqrtf($0)",
    [LRC_PRIM_RSQRT] = "rsqrtf($0)",
    [LRC_PRIM_LOG] = "logf($0)",
    [LRC_PRIM_LOG1P] = "log1pf($0)",
    [LRC_PRIM_EXP] = "expf($0)",
    [LRC_PRIM_EXPM1] = "expm1f($0)",
    [LRC_PRIM_SIN] = "sinf($0)",
    [LRC_PRIM_COS] = "cosf($0)",
    [LRC_PRIM_ERF] = "erff($0)",
    [LRC_PRIM_FLOOR] = "floorf($0)",
    [LRC_PRIM_SIGN] = "($0 > 0.f ? 1.f : $0 < 0.f ? -1.f : $0)",
    [LRC_PRIM_RECIPROCAL] = "1.f / $0",
    [LRC_PRIM_TANH] = "tanhf($0)",
    [LRC_PRIM_SIGMOID] = "sigmoid($0)",
    [LRC_PRIM_ADD] = "$0 + $1",
    [LRC_PRIM_SUB] = "$0 - $1",
    [LRC_PRIM_MUL] = "$0 * $1",
    [LRC_PRIM_DIV] = "$0 / $1",
    [LRC_PRIM_POW] = "powf($0, $1)",
    [LRC_PRIM_MAXIMUM] = "fmaxf($0, $1)",
    [LRC_PRIM_MINIMUM] = "fminf($0, $1)",
    [LRC_PRIM_LT] = "($0 < $1 ? 1.f : 0.f)",
    [LRC_PRIM_LE] = "($0 <= $1 ? 1.f : 0.f)",
    [LRC_PRIM_EQ] = "($0 == $1 ? 1.f : 0.f)",
    [LRC_PRIM_NE] = "($0 != $1 ? 1.f : 0.f)",
    [LRC_PRIM_GT] = "($0 > $1 ? 1.f : 0.f)",
    [LRC_PRIM_GE] = "($0 >= $1 ? 1.f : 0.f)",
    [LRC_PRIM_WHERE] = "($0 != 0.f ? $1 : $2)",
    [LRC_PRIM_FMA] = "fmaf($0, $1, $2)",
};

static const char *const f64_tpl[LRC_PRIM_COUNT] = {
    [LRC_PRIM_NEG] = "-$0",
    [LRC_PRIM_ABS] = "fabs($0)",
    [LRC_PRIM_SQRT] = "sqrt($0)",
    [LRC_PRIM_RSQRT] = "1.0 / sqrt($0)",
    [LRC_PRIM_LOG] = "log($0)",
    [LRC_PRIM_LOG1P] = "log1p($0)",
    [LRC_PRIM_EXP] = "exp($0)",
    [LRC_PRIM_EXPM1] = "expm1($0)",
    [LRC_PRIM_SIN] = "sin($0)",
    [LRC_PRIM_COS] = "cos($0)",
    [LRC_PRIM_ERF] = "erf($0)",
    [LRC_PRIM_FLOOR] = "floor($0)",
    [LRC_PRIM_SIGN] = "($0 > 0.0 ? 1.0 : $0 < 0.0 ? -1.0 : $0)",
    [LRC_PRIM_RECIPROCAL] = "1.0 / $0",
    [LRC_PRIM_TANH] = "tanh($0)",
    [LRC_PRIM_SIGMOID] = "1.0 / (1.0 + exp(-$0))",
    [LRC_PRIM_ADD] = "$0 + $1",
    [LRC_PRIM_SUB] = "$0 - $1",
    [LRC_PRIM_MUL] = "$0 * $1",
    [LRC_PRIM_DIV] = "$0 / $1",
    [LRC_PRIM_POW] = "pow($0, $1)",
    [LRC_PRIM_MAXIMUM] = "fmax($0, $1)",
    [LRC_PRIM_MINIMUM] = "fmin($0, $1)",
    [LRC_PRIM_LT] = "($0 < $1 ? 1.0 : 0.0)",
    [LRC_PRIM_LE] = "($0 <= $1 ? 1.0 : 0.0)",
    [LRC_PRIM_EQ] = "($0 == $1 ? 1.0 : 0.0)",
    [LRC_PRIM_NE] = "($0 != $1 ? 1.0 : 0.0)",
    [LRC_PRIM_GT] = "($0 > $1 ? 1.0 : 0.0)",
    [LRC_PRIM_GE] = "($0 >= $1 ? 1.0 : 0.0)",
    [LRC_PRIM_WHERE] = "($0 != 0.0 ? $1 : $2)",
    [LRC_PRIM_FMA] = "fma($0, $1, $2)",
};

#define NAME_LEN 48

static char *slot(ew_cuda *c)
{
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 32;
        c->names = lrc_xrealloc(c->names, (size_t)c->cap * sizeof *c->names);
    }
    return c->names[c->n++] = lrc_xmalloc(NAME_LEN);
}

static lrc_ew_val cu_const(lrc_ew_alg *A, double v)
{
    ew_cuda *c = A->ctx;
    char *s = slot(c);
    snprintf(s, NAME_LEN, c->f64 ? "%.17e" : "%.9ef", v);
    return (lrc_ew_val){.s = s};
}

/* `const T <prefix>_<k> = template with $k replaced by x[k];` */
static lrc_ew_val emit(lrc_ew_alg *A, lrc_prim p, const lrc_ew_val *x)
{
    ew_cuda *c = A->ctx;
    char *name = slot(c);
    snprintf(name, NAME_LEN, "%s_%d", c->prefix, c->n - 1);
    cu_printf(c->t, "%sconst %s %s = ", c->indent, c->f64 ? "double" : "float", name);
    for (const char *s = (c->f64 ? f64_tpl : f32_tpl)[p]; *s; s++) {
        if (s[0] == '$' && s[1] >= '0' && s[1] <= '2') cu_printf(c->t, "%s", x[*++s - '0'].s);
        else cu_printf(c->t, "%c", *s);
    }
    cu_printf(c->t, ";\n");
    return (lrc_ew_val){.s = name};
}

#define CU_PRIM(E, name, arity) \
    static lrc_ew_val cu_##name(lrc_ew_alg *A, const lrc_ew_val *x) { return emit(A, LRC_PRIM_##E, x); }
LRC_PRIMS(CU_PRIM)
#undef CU_PRIM

/* each primitive's function, where its template is (a missing template
 * leaves the entry NULL, which ctest ew_walk reports) */
void cu_ew_prims(lrc_ew_prim_fn *prims)
{
#define CU_ENTRY(E, name, arity) prims[LRC_PRIM_##E] = f32_tpl[LRC_PRIM_##E] && f64_tpl[LRC_PRIM_##E] ? cu_##name : NULL;
    LRC_PRIMS(CU_ENTRY)
#undef CU_ENTRY
}

void cu_ew_emit(cu_text *t, const lrc_node *n, const char *const *x, const char *indent, const char *prefix, bool f64, char *out,
                size_t len)
{
    ew_cuda ctx = {.t = t, .indent = indent, .prefix = prefix, .f64 = f64}, *c = &ctx;
    lrc_ew_prim_fn prims[LRC_PRIM_COUNT];
    cu_ew_prims(prims);
    lrc_ew_alg A = {cu_const, prims, c};
    lrc_ew_val in[LRC_MAX_INPUTS];
    for (int k = 0; k < n->n_in; k++) { /* each operand once, into a temporary */
        char *name = slot(c);
        snprintf(name, NAME_LEN, "%s_%d", prefix, c->n - 1);
        cu_printf(t, "%sconst %s %s = %s%s;\n", indent, f64 ? "double" : "float", name, f64 ? "(double)" : "", x[k]);
        in[k].s = name;
    }
    snprintf(out, len, "%s", lrc_ew_eval(&A, n, in).s);
    for (int i = 0; i < c->n; i++) free(c->names[i]);
    free(c->names);
}
