/* emit.h — helpers for building kernels with the LLVM C API: types,
 * constants, loops, vector loads and stores, FMA, exp (internal to
 * codegen/llvm). Values of width w are f32 scalars (w == 1) or <w x float>. */
#ifndef LRC_LLVM_EMIT_H
#define LRC_LLVM_EMIT_H

#include <llvm-c/Core.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct em {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    LLVMTypeRef f32, f64, i1, i8, i32, i64, voidt, f32p, i32p, i8p, i8pp, kernel_ty;
    LLVMValueRef fn;      /* the function being built */
    LLVMBasicBlockRef entry;
    LLVMValueRef args, begin, end; /* kernel parameters */
} em_t;

void em_init(em_t *e, const char *module_name);
void em_dispose_builder(em_t *e);

/* Starts `void name(i8 **args, i64 begin, i64 end)`; the builder is left in
 * its body. em_finish_kernel adds the return. */
void em_begin_kernel(em_t *e, const char *name);
void em_finish_kernel(em_t *e);
/* args[i] as a float* (or i32* with is_int), loaded in the entry block. */
LLVMValueRef em_arg(em_t *e, int i, int is_int);
/* A stack slot in the entry block (SROA turns it into registers). */
LLVMValueRef em_alloca(em_t *e, LLVMTypeRef t, const char *name);

LLVMTypeRef em_vty(em_t *e, int w);
LLVMValueRef em_i64(em_t *e, int64_t v);
LLVMValueRef em_f32(em_t *e, double v);
LLVMValueRef em_fw(em_t *e, double v, int w); /* constant splat of width w */
LLVMValueRef em_splat(em_t *e, LLVMValueRef s, int w);

/* p[idx .. idx+w) */
LLVMValueRef em_load(em_t *e, LLVMValueRef p, LLVMValueRef idx, int w);
void em_store(em_t *e, LLVMValueRef p, LLVMValueRef idx, LLVMValueRef v, int w);
/* A vector store past the caches (non-temporal), for data not read again
 * soon: p + idx must be aligned to the vector (4 w bytes), and the kernel
 * ends with em_store_fence before another thread may read it. */
void em_store_stream(em_t *e, LLVMValueRef p, LLVMValueRef idx, LLVMValueRef v, int w);
void em_store_fence(em_t *e);
/* A hint that p[idx] (f32) will be read (write: written) soon, into L1
 * (locality 3) or L2 (2); never faults */
void em_prefetch(em_t *e, LLVMValueRef p, LLVMValueRef idx, bool write, int locality);
LLVMValueRef em_load_i32(em_t *e, LLVMValueRef p, LLVMValueRef idx);
/* bf16 storage (p's idx-th 16-bit element): a load widened to f32 (a shift:
 * exact), and a store rounded to nearest even (NaN stays NaN) */
LLVMValueRef em_load_bf16(em_t *e, LLVMValueRef p, LLVMValueRef idx, int w);
void em_store_bf16(em_t *e, LLVMValueRef p, LLVMValueRef idx, LLVMValueRef v, int w);
LLVMValueRef em_gep(em_t *e, LLVMValueRef p, LLVMValueRef idx);

LLVMValueRef em_add(em_t *e, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef em_mul(em_t *e, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef em_imul(em_t *e, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef em_iadd(em_t *e, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef em_fma(em_t *e, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c);
/* llvm.NAME.{f32,vNf32} with one or two operands: sqrt, floor, maxnum */
LLVMValueRef em_intr1(em_t *e, const char *name, LLVMValueRef x);
LLVMValueRef em_intr2(em_t *e, const char *name, LLVMValueRef x, LLVMValueRef y);
/* exp(x) to about 2 ulp (Cephes' expf), vectorisable; saturates outside
 * [-87.34, 88.72] (at FLT_MIN and near FLT_MAX) instead of returning 0 or
 * inf. */
LLVMValueRef em_exp(em_t *e, LLVMValueRef x, int w);
/* erf(x) to 3.4e-7 absolute, vectorisable (a rational approximation). */
LLVMValueRef em_erf(em_t *e, LLVMValueRef x, int w);
/* tanh(x) and sigmoid(x) = 1 / (1 + e^-x) over the whole f32 line without
 * overflow, vectorisable, NaN kept. Against libm in double, on every 16th
 * f32 of +-[2^-24, 128) (beyond, tanh is +-1 and sigmoid 1 or below
 * FLT_MIN): tanh within 1.51 ulp, sigmoid within 2.78 ulp where it is a
 * normal f32 and within FLT_MIN (absolute) below; test_cpu_kernels checks
 * every 512th against 2 and 3 ulp. em_sigmoid_pair also gives sigmoid(-x)
 * = 1 - sigmoid(x) without the cancellation (from the same exponential). */
LLVMValueRef em_tanh(em_t *e, LLVMValueRef x, int w);
LLVMValueRef em_sigmoid(em_t *e, LLVMValueRef x, int w);
void em_sigmoid_pair(em_t *e, LLVMValueRef x, int w, LLVMValueRef *s, LLVMValueRef *s_neg);
/* Horizontal sum / max of a vector (a fixed pairwise order). */
LLVMValueRef em_hsum(em_t *e, LLVMValueRef v, int w);
LLVMValueRef em_hmax(em_t *e, LLVMValueRef v, int w);
/* Lanes [first, first + n) of v, a vector of n (n > 1) */
LLVMValueRef em_lanes(em_t *e, LLVMValueRef v, int first, int n);
/* A call to a libm double function (cold paths only): cos, sin, exp, log, pow. */
LLVMValueRef em_libm(em_t *e, const char *name, LLVMValueRef x, LLVMValueRef y);
/* Scalar precision changes and a double constant, for the double-precision
 * paths that mirror the reference. */
LLVMValueRef em_to_f64(em_t *e, LLVMValueRef x);
LLVMValueRef em_to_f32(em_t *e, LLVMValueRef x);
LLVMValueRef em_d64(em_t *e, double v);
/* Heap scratch from libc, cast to float*: for per-item buffers sized by the
 * shape, too large for the stack. em_free takes any pointer. */
LLVMValueRef em_malloc(em_t *e, LLVMValueRef bytes);
void em_free(em_t *e, LLVMValueRef ptr);

/* for (iv = start; iv < end; iv += step) — em_for_begin leaves the builder
 * in the body and returns iv; em_for_end closes the loop and leaves the
 * builder after it. */
typedef struct em_loop {
    LLVMBasicBlockRef head, body, exit, pre;
    LLVMValueRef iv;
} em_loop;
LLVMValueRef em_for_begin(em_t *e, em_loop *l, LLVMValueRef start, LLVMValueRef end);
void em_for_end(em_t *e, em_loop *l, LLVMValueRef step);
/* if (cond) { ... } */
typedef struct em_if {
    LLVMBasicBlockRef then, done;
} em_if;
void em_if_begin(em_t *e, em_if *c, LLVMValueRef cond);
void em_if_end(em_t *e, em_if *c);

#endif
