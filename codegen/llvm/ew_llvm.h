/* ew_llvm.h — the cpu renderer's elementwise algebra (internal to
 * codegen/llvm; ew_llvm.c). */
#ifndef LRC_EW_LLVM_H
#define LRC_EW_LLVM_H

#include "emit.h"
#include "ir/lrc_ew.h"

typedef struct ew_llvm {
    em_t *e;
    int w;    /* f32 lanes */
    bool f64; /* scalars in double with libm instead */
} ew_llvm;

extern const lrc_ew_prim_fn lrc_ew_llvm_prims[LRC_PRIM_COUNT];
/* Elementwise node n's value from its inputs' values in[] (f32 of width w,
 * or f64 scalars) */
LLVMValueRef lrc_ew_llvm_eval(em_t *e, const lrc_node *n, const LLVMValueRef *in, int w, bool f64);

#endif
