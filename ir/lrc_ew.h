/* lrc_ew.h — the elementwise algebra: the primitive micro-ops that every
 * elementwise op's value is written over, once (ir/ew.c), and that each
 * renderer implements once: ref in double (ir/ew_ref.c), the cpu's LLVM
 * IR (codegen/llvm/ew_llvm.c), cuda's C (codegen/cuda/ew_cuda.c), and the
 * graph builder that gradient rules are written against (ir/ew.c), where
 * each primitive adds the op of its name. tinygrad's renderers map one op
 * set to code the same way. */
#ifndef LRC_EW_H
#define LRC_EW_H

#include "lrc_ir.h"

/* X(ENUM, name, operands). Every primitive is also an op of LRC_EW_OPS
 * (LRC_OP_<ENUM>), which is what the graph builder adds. fma is a * b + c,
 * rounded once on the cpu and cuda and computed in double by ref; lt..ge
 * are 1 or 0; where(c, a, b) is a where c != 0, else b; maximum and
 * minimum take the number where one operand is NaN (C's fmax). */
#define LRC_PRIMS(X)                                                                                                   \
    X(NEG, neg, 1) X(ABS, abs, 1) X(SQRT, sqrt, 1) X(RSQRT, rsqrt, 1) X(LOG, log, 1) X(LOG1P, log1p, 1)             \
    X(EXP, exp, 1) X(EXPM1, expm1, 1) X(SIN, sin, 1) X(COS, cos, 1) X(ERF, erf, 1) X(FLOOR, floor, 1)                \
    X(SIGN, sign, 1) X(RECIPROCAL, reciprocal, 1) X(TANH, tanh, 1) X(SIGMOID, sigmoid, 1)                             \
    X(ADD, add, 2) X(SUB, sub, 2) X(MUL, mul, 2) X(DIV, div, 2) X(POW, pow, 2) X(MAXIMUM, maximum, 2)              \
    X(MINIMUM, minimum, 2) X(LT, lt, 2) X(LE, le, 2) X(EQ, eq, 2) X(NE, ne, 2) X(GT, gt, 2) X(GE, ge, 2)           \
    X(WHERE, where, 3) X(FMA, fma, 3)

typedef enum lrc_prim {
#define LRC_PRIM_ENUM(E, name, arity) LRC_PRIM_##E,
    LRC_PRIMS(LRC_PRIM_ENUM)
#undef LRC_PRIM_ENUM
    LRC_PRIM_COUNT
} lrc_prim;

/* A value of some algebra: a double (ref), an LLVMValueRef, a string of C,
 * a node id. */
typedef union lrc_ew_val {
    double d;
    void *p;
    const char *s;
    int64_t i;
} lrc_ew_val;

typedef struct lrc_ew_alg lrc_ew_alg;
typedef lrc_ew_val (*lrc_ew_prim_fn)(lrc_ew_alg *A, const lrc_ew_val *x);

/* An algebra: a constant, every primitive (prim[LRC_PRIM_COUNT], none
 * NULL: ctest ew_walk checks each renderer's), and the renderer's state. */
struct lrc_ew_alg {
    lrc_ew_val (*c)(lrc_ew_alg *A, double v);
    const lrc_ew_prim_fn *prim;
    void *ctx;
};

const char *lrc_prim_name(lrc_prim p);
int lrc_prim_arity(lrc_prim p);

/* Node n's value (an op of LRC_EW_OPS) from its inputs' values x[]. */
lrc_ew_val lrc_ew_eval(lrc_ew_alg *A, const lrc_node *n, const lrc_ew_val *x);
/* Whether op is elementwise (a row of LRC_EW_OPS), and its flags. */
bool lrc_ew_is(lrc_op op);
int lrc_ew_flags(lrc_op op);
/* Whether it has a gradient rule (every op but the gradient ops). */
bool lrc_ew_has_grad(lrc_op op);

/* ref's algebra (ir/ew_ref.c): doubles, libm. */
extern const lrc_ew_prim_fn lrc_ew_ref_prims[LRC_PRIM_COUNT];
lrc_ew_val lrc_ew_ref_const(lrc_ew_alg *A, double v);

/* The gradient rule of elementwise node id (the op table's grad). */
int lrc_ew_grad(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
/* The graph builder's primitives, for ctest ew_walk. */
extern const lrc_ew_prim_fn lrc_ew_graph_prims[LRC_PRIM_COUNT];

/* Shorthands for expressions: ew_add(A, a, b), ew_exp(A, x), ... */
#define LRC_EW_CALL1(E, name) \
    static inline lrc_ew_val ew_##name(lrc_ew_alg *A, lrc_ew_val a) { return A->prim[LRC_PRIM_##E](A, &a); }
#define LRC_EW_CALL2(E, name)                                           \
    static inline lrc_ew_val ew_##name(lrc_ew_alg *A, lrc_ew_val a, lrc_ew_val b) \
    {                                                                   \
        lrc_ew_val x[2] = {a, b};                                       \
        return A->prim[LRC_PRIM_##E](A, x);                             \
    }
#define LRC_EW_CALL3(E, name)                                                         \
    static inline lrc_ew_val ew_##name(lrc_ew_alg *A, lrc_ew_val a, lrc_ew_val b, lrc_ew_val c) \
    {                                                                                 \
        lrc_ew_val x[3] = {a, b, c};                                                  \
        return A->prim[LRC_PRIM_##E](A, x);                                           \
    }
#define LRC_EW_CALL(E, name, arity) LRC_EW_CALL##arity(E, name)
LRC_PRIMS(LRC_EW_CALL)
#undef LRC_EW_CALL
static inline lrc_ew_val ew_c(lrc_ew_alg *A, double v) { return A->c(A, v); }

#endif
