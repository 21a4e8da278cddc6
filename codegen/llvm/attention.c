/* attention.c — fused causal attention. A work item is one (batch, head):
 * its keys, rotated by RoPE when the group holds the RoPE of k, are copied
 * once into a contiguous scratch block; then each query row (rotated and
 * pre-scaled) is scored against its keys, softmax-normalised and applied to
 * the values. Scores live in one row of T floats: the T x T matrix is never
 * stored. RoPE angles come from tables computed at compile time in double
 * precision, as the reference computes them. */
#include "kgen.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static LLVMValueRef libc_fn(em_t *e, const char *name, LLVMTypeRef ret, LLVMTypeRef *params, int n, LLVMTypeRef *ft)
{
    *ft = LLVMFunctionType(ret, params, (unsigned)n, 0);
    LLVMValueRef f = LLVMGetNamedFunction(e->mod, name);
    return f ? f : LLVMAddFunction(e->mod, name, *ft);
}

static LLVMValueRef call_malloc(em_t *e, int64_t bytes)
{
    LLVMTypeRef ft, p[1] = {e->i64};
    LLVMValueRef f = libc_fn(e, "malloc", e->i8p, p, 1, &ft);
    LLVMValueRef arg = em_i64(e, bytes);
    return LLVMBuildBitCast(e->b, LLVMBuildCall2(e->b, ft, f, &arg, 1, ""), e->f32p, "");
}

static void call_free(em_t *e, LLVMValueRef ptr)
{
    LLVMTypeRef ft, p[1] = {e->i8p};
    LLVMValueRef f = libc_fn(e, "free", e->voidt, p, 1, &ft);
    LLVMValueRef arg = LLVMBuildBitCast(e->b, ptr, e->i8p, "");
    LLVMBuildCall2(e->b, ft, f, &arg, 1, "");
}

/* cos or sin table [T][half] of RoPE angles t * base^(-2i/D), as a constant global. */
static LLVMValueRef rope_table(em_t *e, int64_t T, int64_t D, double base, bool sine)
{
    char name[96];
    snprintf(name, sizeof name, "rope_%s_%lld_%lld_%.17g", sine ? "sin" : "cos", (long long)T, (long long)D, base);
    LLVMValueRef gv = LLVMGetNamedGlobal(e->mod, name);
    int64_t half = D / 2, n = T * half;
    LLVMTypeRef at = LLVMArrayType(e->f32, (unsigned)n);
    if (!gv) {
        LLVMValueRef *vals = malloc((size_t)n * sizeof *vals);
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < half; i++) {
                double ang = (double)t * pow(base, -2.0 * (double)i / (double)D);
                vals[t * half + i] = LLVMConstReal(e->f32, (float)(sine ? sin(ang) : cos(ang)));
            }
        gv = LLVMAddGlobal(e->mod, at, name);
        LLVMSetInitializer(gv, LLVMConstArray(e->f32, vals, (unsigned)n));
        LLVMSetGlobalConstant(gv, 1);
        LLVMSetLinkage(gv, LLVMPrivateLinkage);
        free(vals);
    }
    LLVMValueRef zero = em_i64(e, 0);
    LLVMValueRef idx[2] = {zero, zero};
    return LLVMBuildGEP2(e->b, at, gv, idx, 2, "");
}

typedef struct {
    LLVMValueRef src;      /* rows [B,T,H,D] */
    LLVMValueRef cos, sin; /* tables, or NULL when not rotated */
} qk_src;

static qk_src source_of(kgen *k, int id, int64_t T, int64_t D)
{
    const lrc_node *n = &k->g->nodes[id];
    qk_src s = {0};
    if (k->member[id] && n->op == LRC_OP_ROPE) {
        s.src = kg_ptr(k, n->in[0]);
        s.cos = rope_table(k->e, T, D, n->fattr[0], false);
        s.sin = rope_table(k->e, T, D, n->fattr[0], true);
    } else {
        s.src = kg_ptr(k, id);
    }
    return s;
}

/* dst[0..D) = rotate(src[off..off+D), position t) * scale */
static void load_row(kgen *k, const qk_src *s, LLVMValueRef off, LLVMValueRef t, int64_t D, double scale,
                     LLVMValueRef dst, LLVMValueRef dst_off)
{
    em_t *e = k->e;
    int64_t half = D / 2;
    int vec = k->vec;
    if (!s->cos) {
        for (int64_t i = 0; i < D; i += (D - i >= vec ? vec : 1)) {
            int w = D - i >= vec ? vec : 1;
            LLVMValueRef x = em_load(e, s->src, em_iadd(e, off, em_i64(e, i)), w);
            em_store(e, dst, em_iadd(e, dst_off, em_i64(e, i)), em_mul(e, x, em_fw(e, scale, w)), w);
        }
        return;
    }
    LLVMValueRef tb = em_imul(e, t, em_i64(e, half));
    for (int64_t i = 0; i < half; i += (half - i >= vec ? vec : 1)) {
        int w = half - i >= vec ? vec : 1;
        LLVMValueRef c = em_load(e, s->cos, em_iadd(e, tb, em_i64(e, i)), w);
        LLVMValueRef sn = em_load(e, s->sin, em_iadd(e, tb, em_i64(e, i)), w);
        LLVMValueRef x1 = em_load(e, s->src, em_iadd(e, off, em_i64(e, i)), w);
        LLVMValueRef x2 = em_load(e, s->src, em_iadd(e, off, em_i64(e, i + half)), w);
        LLVMValueRef o1 = LLVMBuildFSub(e->b, em_mul(e, x1, c), em_mul(e, x2, sn), "");
        LLVMValueRef o2 = em_add(e, em_mul(e, x2, c), em_mul(e, x1, sn));
        em_store(e, dst, em_iadd(e, dst_off, em_i64(e, i)), em_mul(e, o1, em_fw(e, scale, w)), w);
        em_store(e, dst, em_iadd(e, dst_off, em_i64(e, i + half)), em_mul(e, o2, em_fw(e, scale, w)), w);
    }
}

void kg_attention(kgen *k)
{
    em_t *e = k->e;
    const lrc_node *a = &k->g->nodes[k->gr->anchor];
    int64_t B = a->shape.dim[0], T = a->shape.dim[1], H = a->shape.dim[2], D = a->shape.dim[3];
    (void)B;
    int vec = k->vec;
    bool causal = a->iattr[0] != 0;
    qk_src q = source_of(k, a->in[0], T, D), kk = source_of(k, a->in[1], T, D);
    LLVMValueRef V = kg_ptr(k, a->in[2]), O = kg_ptr(k, k->gr->anchor);
    int64_t nchunks = D / vec, tail = D % vec;
    LLVMTypeRef vt = em_vty(e, vec);
    LLVMValueRef qrow = em_alloca(e, LLVMArrayType(e->f32, (unsigned)D), "q");
    LLVMValueRef zero2[2] = {em_i64(e, 0), em_i64(e, 0)};
    LLVMValueRef acc[256]; /* D / vec + D % vec slots: D up to ~2000 */
    for (int64_t c = 0; c < nchunks + tail; c++) acc[c] = em_alloca(e, c < nchunks ? vt : e->f32, "acc");
    LLVMValueRef sumv = em_alloca(e, vt, "sumv"), sums = em_alloca(e, e->f32, "sums");
    LLVMValueRef maxs = em_alloca(e, e->f32, "max");

    em_loop litem, lj, lt;
    LLVMValueRef item = em_for_begin(e, &litem, e->begin, e->end);
    LLVMValueRef qp = LLVMBuildGEP2(e->b, LLVMArrayType(e->f32, (unsigned)D), qrow, zero2, 2, "");
    LLVMValueRef b = LLVMBuildSDiv(e->b, item, em_i64(e, H), ""), h = LLVMBuildSRem(e->b, item, em_i64(e, H), "");
    /* element (b, t, h, 0) of a [B,T,H,D] tensor */
    #define ROW(tv) em_imul(e, em_iadd(e, em_imul(e, em_iadd(e, em_imul(e, b, em_i64(e, T)), (tv)), em_i64(e, H)), h), em_i64(e, D))
    LLVMValueRef Kb = call_malloc(e, T * D * 4), S = call_malloc(e, T * 4);
    LLVMValueRef j = em_for_begin(e, &lj, em_i64(e, 0), em_i64(e, T));
    load_row(k, &kk, ROW(j), j, D, 1.0, Kb, em_imul(e, j, em_i64(e, D)));
    em_for_end(e, &lj, em_i64(e, 1));

    LLVMValueRef t = em_for_begin(e, &lt, em_i64(e, 0), em_i64(e, T));
    load_row(k, &q, ROW(t), t, D, a->fattr[0], qp, em_i64(e, 0));
    LLVMValueRef nkeys = causal ? em_iadd(e, t, em_i64(e, 1)) : em_i64(e, T);
    /* scores and their max */
    LLVMBuildStore(e->b, em_f32(e, -INFINITY), maxs);
    em_loop ls;
    j = em_for_begin(e, &ls, em_i64(e, 0), nkeys);
    LLVMValueRef koff = em_imul(e, j, em_i64(e, D));
    LLVMValueRef dv = em_fw(e, 0, vec), ds = em_f32(e, 0);
    for (int64_t c = 0; c < nchunks; c++)
        dv = em_fma(e, em_load(e, qp, em_i64(e, c * vec), vec), em_load(e, Kb, em_iadd(e, koff, em_i64(e, c * vec)), vec), dv);
    for (int64_t i = nchunks * vec; i < D; i++)
        ds = em_fma(e, em_load(e, qp, em_i64(e, i), 1), em_load(e, Kb, em_iadd(e, koff, em_i64(e, i)), 1), ds);
    LLVMValueRef sc = em_add(e, em_hsum(e, dv, vec), ds);
    em_store(e, S, j, sc, 1);
    LLVMBuildStore(e->b, em_intr2(e, "maxnum", sc, LLVMBuildLoad2(e->b, e->f32, maxs, "")), maxs);
    em_for_end(e, &ls, em_i64(e, 1));
    LLVMValueRef mx = LLVMBuildLoad2(e->b, e->f32, maxs, "");
    /* p = exp(s - max), vectorised over keys, and their sum */
    LLVMBuildStore(e->b, em_fw(e, 0, vec), sumv);
    LLVMBuildStore(e->b, em_f32(e, 0), sums);
    LLVMValueRef vend = em_imul(e, LLVMBuildSDiv(e->b, nkeys, em_i64(e, vec), ""), em_i64(e, vec));
    em_loop lp;
    j = em_for_begin(e, &lp, em_i64(e, 0), vend);
    LLVMValueRef pv = em_exp(e, LLVMBuildFSub(e->b, em_load(e, S, j, vec), em_splat(e, mx, vec), ""), vec);
    em_store(e, S, j, pv, vec);
    LLVMBuildStore(e->b, em_add(e, pv, LLVMBuildLoad2(e->b, vt, sumv, "")), sumv);
    em_for_end(e, &lp, em_i64(e, vec));
    j = em_for_begin(e, &lp, vend, nkeys);
    LLVMValueRef ps = em_exp(e, LLVMBuildFSub(e->b, em_load(e, S, j, 1), mx, ""), 1);
    em_store(e, S, j, ps, 1);
    LLVMBuildStore(e->b, em_add(e, ps, LLVMBuildLoad2(e->b, e->f32, sums, "")), sums);
    em_for_end(e, &lp, em_i64(e, 1));
    LLVMValueRef inv = LLVMBuildFDiv(e->b, em_f32(e, 1.0),
                                     em_add(e, em_hsum(e, LLVMBuildLoad2(e->b, vt, sumv, ""), vec),
                                            LLVMBuildLoad2(e->b, e->f32, sums, "")), "");
    /* out = sum_j p_j v_j / sum */
    for (int64_t c = 0; c < nchunks + tail; c++) LLVMBuildStore(e->b, c < nchunks ? em_fw(e, 0, vec) : em_f32(e, 0), acc[c]);
    em_loop lv;
    j = em_for_begin(e, &lv, em_i64(e, 0), nkeys);
    LLVMValueRef pj = em_load(e, S, j, 1), pjv = em_splat(e, pj, vec), voff = ROW(j);
    for (int64_t c = 0; c < nchunks + tail; c++) {
        bool isv = c < nchunks;
        int64_t i = isv ? c * vec : nchunks * vec + (c - nchunks);
        LLVMValueRef x = em_load(e, V, em_iadd(e, voff, em_i64(e, i)), isv ? vec : 1);
        LLVMBuildStore(e->b, em_fma(e, isv ? pjv : pj, x, LLVMBuildLoad2(e->b, isv ? vt : e->f32, acc[c], "")), acc[c]);
    }
    em_for_end(e, &lv, em_i64(e, 1));
    LLVMValueRef ooff = ROW(t);
    for (int64_t c = 0; c < nchunks + tail; c++) {
        bool isv = c < nchunks;
        int64_t i = isv ? c * vec : nchunks * vec + (c - nchunks);
        LLVMValueRef r = em_mul(e, LLVMBuildLoad2(e->b, isv ? vt : e->f32, acc[c], ""), em_splat(e, inv, isv ? vec : 1));
        em_store(e, O, em_iadd(e, ooff, em_i64(e, i)), r, isv ? vec : 1);
    }
    em_for_end(e, &lt, em_i64(e, 1));
    call_free(e, Kb);
    call_free(e, S);
    em_for_end(e, &litem, em_i64(e, 1));
    #undef ROW
}
