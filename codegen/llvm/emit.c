/* emit.c — LLVM C API helpers for building kernels (see emit.h). */
#include "emit.h"

#include <stdio.h>
#include <string.h>

void em_init(em_t *e, const char *module_name)
{
    memset(e, 0, sizeof *e);
    e->ctx = LLVMContextCreate();
    e->mod = LLVMModuleCreateWithNameInContext(module_name, e->ctx);
    e->b = LLVMCreateBuilderInContext(e->ctx);
    e->f32 = LLVMFloatTypeInContext(e->ctx);
    e->f64 = LLVMDoubleTypeInContext(e->ctx);
    e->i1 = LLVMInt1TypeInContext(e->ctx);
    e->i8 = LLVMInt8TypeInContext(e->ctx);
    e->i32 = LLVMInt32TypeInContext(e->ctx);
    e->i64 = LLVMInt64TypeInContext(e->ctx);
    e->voidt = LLVMVoidTypeInContext(e->ctx);
    e->f32p = LLVMPointerType(e->f32, 0);
    e->i32p = LLVMPointerType(e->i32, 0);
    e->i8p = LLVMPointerType(e->i8, 0);
    e->i8pp = LLVMPointerType(e->i8p, 0);
    LLVMTypeRef params[3] = {e->i8pp, e->i64, e->i64};
    e->kernel_ty = LLVMFunctionType(e->voidt, params, 3, 0);
}

void em_dispose_builder(em_t *e)
{
    if (e->b) LLVMDisposeBuilder(e->b);
    e->b = NULL;
}

void em_begin_kernel(em_t *e, const char *name)
{
    e->fn = LLVMAddFunction(e->mod, name, e->kernel_ty);
    /* kernels must not unwind into the runtime's C frames */
    unsigned kind = LLVMGetEnumAttributeKindForName("nounwind", 8);
    LLVMAddAttributeAtIndex(e->fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(e->ctx, kind, 0));
    e->entry = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "entry");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "body");
    LLVMPositionBuilderAtEnd(e->b, body);
    e->args = LLVMGetParam(e->fn, 0);
    e->begin = LLVMGetParam(e->fn, 1);
    e->end = LLVMGetParam(e->fn, 2);
}

void em_finish_kernel(em_t *e)
{
    LLVMBuildRetVoid(e->b);
    LLVMBasicBlockRef body = LLVMGetNextBasicBlock(e->entry);
    LLVMPositionBuilderAtEnd(e->b, e->entry);
    LLVMBuildBr(e->b, body);
}

/* Emits at the end of the entry block (before its terminator, which is
 * only added by em_finish_kernel). */
static void at_entry(em_t *e, LLVMBasicBlockRef *saved)
{
    *saved = LLVMGetInsertBlock(e->b);
    LLVMPositionBuilderAtEnd(e->b, e->entry);
}

LLVMValueRef em_arg(em_t *e, int i, int is_int)
{
    LLVMBasicBlockRef saved;
    at_entry(e, &saved);
    LLVMValueRef idx = em_i64(e, i);
    LLVMValueRef slot = LLVMBuildGEP2(e->b, e->i8p, e->args, &idx, 1, "argp");
    LLVMValueRef p = LLVMBuildLoad2(e->b, e->i8p, slot, "arg");
    LLVMValueRef r = LLVMBuildBitCast(e->b, p, is_int ? e->i32p : e->f32p, "argf");
    LLVMPositionBuilderAtEnd(e->b, saved);
    return r;
}

LLVMValueRef em_alloca(em_t *e, LLVMTypeRef t, const char *name)
{
    LLVMBasicBlockRef saved;
    at_entry(e, &saved);
    LLVMValueRef a = LLVMBuildAlloca(e->b, t, name);
    LLVMPositionBuilderAtEnd(e->b, saved);
    return a;
}

LLVMTypeRef em_vty(em_t *e, int w) { return w == 1 ? e->f32 : LLVMVectorType(e->f32, (unsigned)w); }
LLVMValueRef em_i64(em_t *e, int64_t v) { return LLVMConstInt(e->i64, (unsigned long long)v, 1); }
LLVMValueRef em_f32(em_t *e, double v) { return LLVMConstReal(e->f32, v); }

LLVMValueRef em_fw(em_t *e, double v, int w)
{
    LLVMValueRef c = em_f32(e, v);
    if (w == 1) return c;
    LLVMValueRef elems[64];
    for (int i = 0; i < w; i++) elems[i] = c;
    return LLVMConstVector(elems, (unsigned)w);
}

LLVMValueRef em_splat(em_t *e, LLVMValueRef s, int w)
{
    if (w == 1) return s;
    LLVMTypeRef vt = em_vty(e, w);
    LLVMValueRef v = LLVMBuildInsertElement(e->b, LLVMGetUndef(vt), s, LLVMConstInt(e->i32, 0, 0), "");
    LLVMValueRef zeros = LLVMConstNull(LLVMVectorType(e->i32, (unsigned)w));
    return LLVMBuildShuffleVector(e->b, v, LLVMGetUndef(vt), zeros, "splat");
}

LLVMValueRef em_gep(em_t *e, LLVMValueRef p, LLVMValueRef idx)
{
    return LLVMBuildGEP2(e->b, e->f32, p, &idx, 1, "");
}

LLVMValueRef em_load(em_t *e, LLVMValueRef p, LLVMValueRef idx, int w)
{
    LLVMValueRef q = em_gep(e, p, idx);
    if (w > 1) q = LLVMBuildBitCast(e->b, q, LLVMPointerType(em_vty(e, w), 0), "");
    LLVMValueRef v = LLVMBuildLoad2(e->b, em_vty(e, w), q, "");
    LLVMSetAlignment(v, 4);
    return v;
}

void em_store(em_t *e, LLVMValueRef p, LLVMValueRef idx, LLVMValueRef v, int w)
{
    LLVMValueRef q = em_gep(e, p, idx);
    if (w > 1) q = LLVMBuildBitCast(e->b, q, LLVMPointerType(em_vty(e, w), 0), "");
    LLVMValueRef s = LLVMBuildStore(e->b, v, q);
    LLVMSetAlignment(s, 4);
}

void em_store_stream(em_t *e, LLVMValueRef p, LLVMValueRef idx, LLVMValueRef v, int w)
{
    LLVMValueRef q = LLVMBuildBitCast(e->b, em_gep(e, p, idx), LLVMPointerType(em_vty(e, w), 0), "");
    LLVMValueRef s = LLVMBuildStore(e->b, v, q);
    LLVMSetAlignment(s, (unsigned)(4 * w));
    LLVMValueRef one = LLVMConstInt(e->i32, 1, 0);
    LLVMMetadataRef md = LLVMMDNodeInContext2(e->ctx, (LLVMMetadataRef[]){LLVMValueAsMetadata(one)}, 1);
    LLVMSetMetadata(s, LLVMGetMDKindIDInContext(e->ctx, "nontemporal", 11), LLVMMetadataAsValue(e->ctx, md));
}

void em_store_fence(em_t *e)
{
    const char *name = "llvm.x86.sse.sfence";
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(e->mod, LLVMLookupIntrinsicID(name, strlen(name)), NULL, 0);
    LLVMBuildCall2(e->b, LLVMFunctionType(LLVMVoidTypeInContext(e->ctx), NULL, 0, 0), f, NULL, 0, "");
}

void em_prefetch(em_t *e, LLVMValueRef p, LLVMValueRef idx, bool write, int locality)
{
    const char *name = "llvm.prefetch";
    LLVMTypeRef i8p = LLVMPointerType(LLVMInt8TypeInContext(e->ctx), 0);
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(e->mod, LLVMLookupIntrinsicID(name, strlen(name)), &i8p, 1);
    LLVMTypeRef params[4] = {i8p, e->i32, e->i32, e->i32};
    LLVMValueRef args[4] = {LLVMBuildBitCast(e->b, em_gep(e, p, idx), i8p, ""), LLVMConstInt(e->i32, write, 0),
                            LLVMConstInt(e->i32, (unsigned)locality, 0), LLVMConstInt(e->i32, 1, 0)}; /* 1: data */
    LLVMBuildCall2(e->b, LLVMFunctionType(LLVMVoidTypeInContext(e->ctx), params, 4, 0), f, args, 4, "");
}

LLVMValueRef em_load_i32(em_t *e, LLVMValueRef p, LLVMValueRef idx)
{
    LLVMValueRef q = LLVMBuildGEP2(e->b, e->i32, p, &idx, 1, "");
    return LLVMBuildLoad2(e->b, e->i32, q, "");
}

/* p as a pointer to w 16-bit integers at element idx */
static LLVMValueRef bf16_at(em_t *e, LLVMValueRef p, LLVMValueRef idx, int w)
{
    LLVMTypeRef i16 = LLVMInt16TypeInContext(e->ctx);
    LLVMValueRef q = LLVMBuildBitCast(e->b, p, LLVMPointerType(i16, 0), "");
    q = LLVMBuildGEP2(e->b, i16, q, &idx, 1, "");
    return w > 1 ? LLVMBuildBitCast(e->b, q, LLVMPointerType(LLVMVectorType(i16, (unsigned)w), 0), "") : q;
}

static LLVMValueRef ivec_const(em_t *e, unsigned long long v, int w)
{
    LLVMValueRef c = LLVMConstInt(e->i32, v, 0);
    if (w == 1) return c;
    LLVMValueRef lanes[64];
    for (int i = 0; i < w; i++) lanes[i] = c;
    return LLVMConstVector(lanes, (unsigned)w);
}

LLVMValueRef em_load_bf16(em_t *e, LLVMValueRef p, LLVMValueRef idx, int w)
{
    LLVMTypeRef i16 = LLVMInt16TypeInContext(e->ctx);
    LLVMTypeRef ht = w > 1 ? LLVMVectorType(i16, (unsigned)w) : i16, it = w > 1 ? LLVMVectorType(e->i32, (unsigned)w) : e->i32;
    LLVMValueRef h = LLVMBuildLoad2(e->b, ht, bf16_at(e, p, idx, w), "");
    LLVMSetAlignment(h, 2);
    LLVMValueRef u = LLVMBuildShl(e->b, LLVMBuildZExt(e->b, h, it, ""), ivec_const(e, 16, w), "");
    return LLVMBuildBitCast(e->b, u, em_vty(e, w), "");
}

void em_store_bf16(em_t *e, LLVMValueRef p, LLVMValueRef idx, LLVMValueRef v, int w)
{
    LLVMTypeRef i16 = LLVMInt16TypeInContext(e->ctx);
    LLVMTypeRef ht = w > 1 ? LLVMVectorType(i16, (unsigned)w) : i16, it = w > 1 ? LLVMVectorType(e->i32, (unsigned)w) : e->i32;
    LLVMValueRef u = LLVMBuildBitCast(e->b, v, it, "");
    /* nearest even: add 0x7fff and the kept part's lowest bit, then drop 16 bits */
    LLVMValueRef odd = LLVMBuildAnd(e->b, LLVMBuildLShr(e->b, u, ivec_const(e, 16, w), ""), ivec_const(e, 1, w), "");
    LLVMValueRef r = LLVMBuildAdd(e->b, u, LLVMBuildAdd(e->b, odd, ivec_const(e, 0x7fff, w), ""), "");
    /* a NaN keeps its top bits, quiet (the rounding could carry it into an infinity) */
    LLVMValueRef nan = LLVMBuildICmp(e->b, LLVMIntUGT, LLVMBuildAnd(e->b, u, ivec_const(e, 0x7fffffff, w), ""), ivec_const(e, 0x7f800000, w), "");
    r = LLVMBuildSelect(e->b, nan, LLVMBuildOr(e->b, u, ivec_const(e, 0x400000, w), ""), r, "");
    LLVMValueRef h = LLVMBuildTrunc(e->b, LLVMBuildLShr(e->b, r, ivec_const(e, 16, w), ""), ht, "");
    LLVMValueRef s = LLVMBuildStore(e->b, h, bf16_at(e, p, idx, w));
    LLVMSetAlignment(s, 2);
}

LLVMValueRef em_add(em_t *e, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFAdd(e->b, a, b, ""); }
LLVMValueRef em_mul(em_t *e, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFMul(e->b, a, b, ""); }
LLVMValueRef em_imul(em_t *e, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildMul(e->b, a, b, ""); }
LLVMValueRef em_iadd(em_t *e, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAdd(e->b, a, b, ""); }

static LLVMValueRef call_intrinsic(em_t *e, const char *name, LLVMValueRef *ops, int n)
{
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMTypeRef t = LLVMTypeOf(ops[0]);
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(e->mod, id, &t, 1);
    LLVMTypeRef params[3] = {t, t, t};
    LLVMTypeRef ft = LLVMFunctionType(t, params, (unsigned)n, 0);
    return LLVMBuildCall2(e->b, ft, f, ops, (unsigned)n, "");
}

LLVMValueRef em_fma(em_t *e, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
    LLVMValueRef ops[3] = {a, b, c};
    return call_intrinsic(e, "llvm.fma", ops, 3);
}

LLVMValueRef em_intr1(em_t *e, const char *name, LLVMValueRef x)
{
    char full[64];
    snprintf(full, sizeof full, "llvm.%s", name);
    return call_intrinsic(e, full, &x, 1);
}

LLVMValueRef em_intr2(em_t *e, const char *name, LLVMValueRef x, LLVMValueRef y)
{
    char full[64];
    LLVMValueRef ops[2] = {x, y};
    snprintf(full, sizeof full, "llvm.%s", name);
    return call_intrinsic(e, full, ops, 2);
}

/* x clamped to [lo, hi], NaN to hi: minnum's and maxnum's values with
 * constant bounds, as ordered compares and selects, which x86 does in one
 * vminps / vmaxps each, where the intrinsics take three instructions
 * (min, unordered compare, blend) to give NaN the other operand */
static LLVMValueRef clamp_const(em_t *e, LLVMValueRef x, double lo, double hi, int w)
{
    LLVMValueRef h = em_fw(e, hi, w), l = em_fw(e, lo, w);
    x = LLVMBuildSelect(e->b, LLVMBuildFCmp(e->b, LLVMRealOLT, x, h, ""), x, h, "");
    return LLVMBuildSelect(e->b, LLVMBuildFCmp(e->b, LLVMRealOGT, x, l, ""), x, l, "");
}

LLVMValueRef em_exp(em_t *e, LLVMValueRef x, int w)
{
    /* exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 in two parts */
    x = clamp_const(e, x, -87.3365479, 88.7228391, w);
    LLVMValueRef n = em_intr1(e, "floor", em_fma(e, x, em_fw(e, 1.44269504088896341, w), em_fw(e, 0.5, w)));
    LLVMValueRef r = em_fma(e, n, em_fw(e, -0.693359375, w), x);
    r = em_fma(e, n, em_fw(e, 2.12194440e-4, w), r);
    static const double c[] = {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3,
                               4.1665795894E-2, 1.6666665459E-1, 5.0000001201E-1};
    LLVMValueRef p = em_fw(e, c[0], w);
    for (int i = 1; i < 6; i++) p = em_fma(e, p, r, em_fw(e, c[i], w));
    LLVMValueRef r2 = em_mul(e, r, r);
    LLVMValueRef y = em_add(e, em_fma(e, p, r2, r), em_fw(e, 1.0, w));
    /* 2^n from the exponent bits; n is in [-126, 128], so split off one factor
     * of two to keep the biased exponent in range: 2^(n-1) 2 for n > 0 (the
     * top end), 2^(n+1) / 2 otherwise (2^(n-1) would be 2^-127, no normal
     * f32, and gave 0 for x in [-87.34, -86.98]). Both are exact scalings. */
    LLVMValueRef low = LLVMBuildFCmp(e->b, LLVMRealOLE, n, em_fw(e, 0.0, w), "");
    LLVMTypeRef it = w == 1 ? e->i32 : LLVMVectorType(e->i32, (unsigned)w);
    LLVMValueRef split = LLVMBuildSelect(e->b, low, em_fw(e, 1.0, w), em_fw(e, -1.0, w), "");
    LLVMValueRef ni = LLVMBuildFPToSI(e->b, em_add(e, n, split), it, "");
    LLVMValueRef b127 = LLVMConstInt(e->i32, 127, 0), s23 = LLVMConstInt(e->i32, 23, 0);
    LLVMValueRef k127 = b127, k23 = s23;
    if (w > 1) {
        LLVMValueRef v1[64], v2[64];
        for (int i = 0; i < w; i++) v1[i] = b127, v2[i] = s23;
        k127 = LLVMConstVector(v1, (unsigned)w);
        k23 = LLVMConstVector(v2, (unsigned)w);
    }
    LLVMValueRef bits = LLVMBuildShl(e->b, LLVMBuildAdd(e->b, ni, k127, ""), k23, "");
    LLVMValueRef pow2 = LLVMBuildBitCast(e->b, bits, em_vty(e, w), "");
    return em_mul(e, em_mul(e, y, pow2), LLVMBuildSelect(e->b, low, em_fw(e, 0.5, w), em_fw(e, 2.0, w), ""));
}

LLVMValueRef em_erf(em_t *e, LLVMValueRef x, int w)
{
    /* odd over even polynomial in x on [-4, 4] (erf is +-1 in f32 outside):
     * at most 3.4e-7 from erf over the f32 line, checked by test_cpu_kernels */
    static const double a[] = {-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
                               -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02};
    static const double b[] = {-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
                               -1.42647390514189e-02};
    x = clamp_const(e, x, -4.0, 4.0, w);
    LLVMValueRef x2 = em_mul(e, x, x), p = em_fw(e, a[0], w), q = em_fw(e, b[0], w);
    for (int i = 1; i < 7; i++) p = em_fma(e, p, x2, em_fw(e, a[i], w));
    for (int i = 1; i < 5; i++) q = em_fma(e, q, x2, em_fw(e, b[i], w));
    return LLVMBuildFDiv(e->b, em_mul(e, x, p), q, "");
}

/* NaN in, NaN out: em_exp's clamps would turn it into a number */
static LLVMValueRef keep_nan(em_t *e, LLVMValueRef x, LLVMValueRef v)
{
    return LLVMBuildSelect(e->b, LLVMBuildFCmp(e->b, LLVMRealUNO, x, x, ""), x, v, "");
}

void em_sigmoid_pair(em_t *e, LLVMValueRef x, int w, LLVMValueRef *s, LLVMValueRef *s_neg)
{
    /* from t = e^-|x| in (0, 1], never an overflow: r = 1 / (1 + t) is
     * sigmoid(|x|) and t r = sigmoid(-|x|), whose small values keep their
     * relative precision (1 - r would cancel) */
    LLVMValueRef t = em_exp(e, LLVMBuildFNeg(e->b, em_intr1(e, "fabs", x), ""), w);
    LLVMValueRef r = LLVMBuildFDiv(e->b, em_fw(e, 1.0, w), em_add(e, em_fw(e, 1.0, w), t), "");
    LLVMValueRef tr = em_mul(e, t, r);
    LLVMValueRef pos = LLVMBuildFCmp(e->b, LLVMRealOGE, x, em_fw(e, 0.0, w), "");
    *s = keep_nan(e, x, LLVMBuildSelect(e->b, pos, r, tr, ""));
    if (s_neg) *s_neg = keep_nan(e, x, LLVMBuildSelect(e->b, pos, tr, r, ""));
}

LLVMValueRef em_sigmoid(em_t *e, LLVMValueRef x, int w)
{
    LLVMValueRef s;
    em_sigmoid_pair(e, x, w, &s, NULL);
    return s;
}

LLVMValueRef em_tanh(em_t *e, LLVMValueRef x, int w)
{
    /* |x| < 0.625: Cephes' tanhf polynomial, x + x^3 P(x^2); elsewhere
     * (1 - t) / (1 + t) with t = e^-2|x| in (0, 0.29), no overflow and no
     * cancellation, its sign copied from x. The compare is unordered so that
     * NaN takes the polynomial and stays NaN. */
    static const double c[] = {-5.70498872745E-3, 2.06390887954E-2, -5.37397155531E-2, 1.33314422036E-1, -3.33332819422E-1};
    LLVMValueRef ax = em_intr1(e, "fabs", x), z = em_mul(e, x, x), p = em_fw(e, c[0], w);
    for (int i = 1; i < 5; i++) p = em_fma(e, p, z, em_fw(e, c[i], w));
    LLVMValueRef small = em_fma(e, em_mul(e, p, z), x, x);
    LLVMValueRef t = em_exp(e, em_mul(e, ax, em_fw(e, -2.0, w)), w);
    LLVMValueRef big = LLVMBuildFDiv(e->b, LLVMBuildFSub(e->b, em_fw(e, 1.0, w), t, ""), em_add(e, em_fw(e, 1.0, w), t), "");
    big = em_intr2(e, "copysign", big, x);
    return LLVMBuildSelect(e->b, LLVMBuildFCmp(e->b, LLVMRealULT, ax, em_fw(e, 0.625, w), ""), small, big, "");
}

static LLVMValueRef reduce(em_t *e, LLVMValueRef v, int w, int is_max)
{
    while (w > 1) {
        int h = w / 2;
        LLVMValueRef lo[32], hi[32];
        for (int i = 0; i < h; i++) {
            lo[i] = LLVMConstInt(e->i32, (unsigned long long)i, 0);
            hi[i] = LLVMConstInt(e->i32, (unsigned long long)(i + h), 0);
        }
        LLVMValueRef a = LLVMBuildShuffleVector(e->b, v, LLVMGetUndef(LLVMTypeOf(v)), LLVMConstVector(lo, (unsigned)h), "");
        LLVMValueRef b = LLVMBuildShuffleVector(e->b, v, LLVMGetUndef(LLVMTypeOf(v)), LLVMConstVector(hi, (unsigned)h), "");
        if (h == 1) {
            a = LLVMBuildExtractElement(e->b, a, LLVMConstInt(e->i32, 0, 0), "");
            b = LLVMBuildExtractElement(e->b, b, LLVMConstInt(e->i32, 0, 0), "");
        }
        v = is_max ? em_intr2(e, "maxnum", a, b) : em_add(e, a, b);
        w = h;
    }
    return v;
}

LLVMValueRef em_hsum(em_t *e, LLVMValueRef v, int w) { return reduce(e, v, w, 0); }
LLVMValueRef em_hmax(em_t *e, LLVMValueRef v, int w) { return reduce(e, v, w, 1); }

LLVMValueRef em_lanes(em_t *e, LLVMValueRef v, int first, int n)
{
    LLVMValueRef idx[64];
    for (int i = 0; i < n; i++) idx[i] = LLVMConstInt(e->i32, (unsigned long long)(first + i), 0);
    return LLVMBuildShuffleVector(e->b, v, LLVMGetUndef(LLVMTypeOf(v)), LLVMConstVector(idx, (unsigned)n), "");
}

LLVMValueRef em_libm(em_t *e, const char *name, LLVMValueRef x, LLVMValueRef y)
{
    LLVMTypeRef params[2] = {e->f64, e->f64};
    int n = y ? 2 : 1;
    LLVMTypeRef ft = LLVMFunctionType(e->f64, params, (unsigned)n, 0);
    LLVMValueRef f = LLVMGetNamedFunction(e->mod, name);
    if (!f) f = LLVMAddFunction(e->mod, name, ft);
    LLVMValueRef ops[2] = {x, y};
    return LLVMBuildCall2(e->b, ft, f, ops, (unsigned)n, "");
}

LLVMValueRef em_to_f64(em_t *e, LLVMValueRef x) { return LLVMBuildFPExt(e->b, x, e->f64, ""); }
LLVMValueRef em_to_f32(em_t *e, LLVMValueRef x) { return LLVMBuildFPTrunc(e->b, x, e->f32, ""); }
LLVMValueRef em_d64(em_t *e, double v) { return LLVMConstReal(e->f64, v); }

static LLVMValueRef libc_fn(em_t *e, const char *name, LLVMTypeRef ret, LLVMTypeRef param, LLVMTypeRef *ft)
{
    *ft = LLVMFunctionType(ret, &param, 1, 0);
    LLVMValueRef f = LLVMGetNamedFunction(e->mod, name);
    return f ? f : LLVMAddFunction(e->mod, name, *ft);
}

LLVMValueRef em_malloc(em_t *e, LLVMValueRef bytes)
{
    LLVMTypeRef ft;
    LLVMValueRef f = libc_fn(e, "malloc", e->i8p, e->i64, &ft);
    return LLVMBuildBitCast(e->b, LLVMBuildCall2(e->b, ft, f, &bytes, 1, ""), e->f32p, "");
}

void em_free(em_t *e, LLVMValueRef ptr)
{
    LLVMTypeRef ft;
    LLVMValueRef f = libc_fn(e, "free", e->voidt, e->i8p, &ft);
    LLVMValueRef arg = LLVMBuildBitCast(e->b, ptr, e->i8p, "");
    LLVMBuildCall2(e->b, ft, f, &arg, 1, "");
}

LLVMValueRef em_for_begin(em_t *e, em_loop *l, LLVMValueRef start, LLVMValueRef end)
{
    l->pre = LLVMGetInsertBlock(e->b);
    l->head = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "loop");
    l->body = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "body");
    l->exit = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "after");
    LLVMBuildBr(e->b, l->head);
    LLVMPositionBuilderAtEnd(e->b, l->head);
    l->iv = LLVMBuildPhi(e->b, e->i64, "i");
    LLVMAddIncoming(l->iv, &start, &l->pre, 1);
    LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, l->iv, end, ""), l->body, l->exit);
    LLVMPositionBuilderAtEnd(e->b, l->body);
    return l->iv;
}

void em_for_end(em_t *e, em_loop *l, LLVMValueRef step)
{
    LLVMValueRef next = LLVMBuildAdd(e->b, l->iv, step, "");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(e->b);
    LLVMBuildBr(e->b, l->head);
    LLVMAddIncoming(l->iv, &next, &latch, 1);
    LLVMPositionBuilderAtEnd(e->b, l->exit);
}

void em_if_begin(em_t *e, em_if *c, LLVMValueRef cond)
{
    c->then = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "then");
    c->done = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "endif");
    LLVMBuildCondBr(e->b, cond, c->then, c->done);
    LLVMPositionBuilderAtEnd(e->b, c->then);
}

void em_if_end(em_t *e, em_if *c)
{
    LLVMBuildBr(e->b, c->done);
    LLVMPositionBuilderAtEnd(e->b, c->done);
}
