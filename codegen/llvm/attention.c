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

#define NB 2 /* vectors of keys a block of query rows scores at once */
_Static_assert(NB <= 2, "the transposed keys' padding (Tp) holds one vector past T's: a block's second");

/* (kgen.h) */
LLVMValueRef kg_first_key(em_t *e, LLVMValueRef t, int64_t W)
{
    if (W <= 0) return em_i64(e, 0);
    LLVMValueRef lo = em_iadd(e, t, em_i64(e, 1 - W));
    return LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSGT, lo, em_i64(e, 0), ""), lo, em_i64(e, 0), "");
}

/* (kgen.h) */
LLVMValueRef kg_rope_table(em_t *e, int64_t T, int64_t D, const lrc_rope *rope, bool sine)
{
    char name[160], key[128];
    lrc_rope_name(rope, key, sizeof key);
    snprintf(name, sizeof name, "rope_%s_%lld_%lld_%s", sine ? "sin" : "cos", (long long)T, (long long)D, key);
    LLVMValueRef gv = LLVMGetNamedGlobal(e->mod, name);
    int64_t half = D / 2, n = T * half;
    LLVMTypeRef at = LLVMArrayType(e->f32, (unsigned)n);
    if (!gv) {
        LLVMValueRef *vals = malloc((size_t)n * sizeof *vals);
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < half; i++) {
                double ang = (double)t * lrc_rope_inv_freq(rope, i, D); /* 0 without RoPE */
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
        lrc_rope rope = lrc_rope_of(n);
        s.cos = kg_rope_table(k->e, T, D, &rope, false);
        s.sin = kg_rope_table(k->e, T, D, &rope, true);
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

/* Scratch of one (batch, head) item: scores, accumulators, the query row. */
typedef struct {
    LLVMValueRef S, qp, acc[256], sumv, sums, maxs;
    int64_t nchunks, tail;
    double cap; /* the logits' soft-cap, 0: none */
} attend_ctx;

static void attend_init(kgen *k, attend_ctx *c, int64_t D)
{
    em_t *e = k->e;
    int vec = k->vec;
    c->nchunks = D / vec;
    c->tail = D % vec;
    for (int64_t i = 0; i < c->nchunks + c->tail; i++) c->acc[i] = em_alloca(e, i < c->nchunks ? em_vty(e, vec) : e->f32, "acc");
    c->sumv = em_alloca(e, em_vty(e, vec), "sumv");
    c->sums = em_alloca(e, e->f32, "sums");
    c->maxs = em_alloca(e, e->f32, "max");
    LLVMValueRef qrow = em_alloca(e, LLVMArrayType(e->f32, (unsigned)D), "q");
    LLVMValueRef zero2[2] = {em_i64(e, 0), em_i64(e, 0)};
    LLVMBasicBlockRef here = LLVMGetInsertBlock(e->b);
    LLVMPositionBuilderAtEnd(e->b, e->entry);
    c->qp = LLVMBuildGEP2(e->b, LLVMArrayType(e->f32, (unsigned)D), qrow, zero2, 2, "");
    LLVMPositionBuilderAtEnd(e->b, here);
}

/* out[ooff..+D) = softmax over j < nkeys of (q . K[kbase + j kstride]) applied
 * to V[vbase + j vstride]; q (c->qp) is already rotated and scaled. */
static void attend(kgen *k, attend_ctx *c, int64_t D, LLVMValueRef K, LLVMValueRef kbase, int64_t kstride, LLVMValueRef V,
                   LLVMValueRef vbase, int64_t vstride, LLVMValueRef nkeys, LLVMValueRef O, LLVMValueRef ooff)
{
    em_t *e = k->e;
    int vec = k->vec;
    LLVMTypeRef vt = em_vty(e, vec);
    LLVMValueRef qp = c->qp, S = c->S;
    /* scores and their max */
    LLVMBuildStore(e->b, em_f32(e, -INFINITY), c->maxs);
    em_loop ls;
    LLVMValueRef j = em_for_begin(e, &ls, em_i64(e, 0), nkeys);
    LLVMValueRef koff = em_iadd(e, kbase, em_imul(e, j, em_i64(e, kstride)));
    LLVMValueRef dv = em_fw(e, 0, vec), ds = em_f32(e, 0);
    for (int64_t ch = 0; ch < c->nchunks; ch++)
        dv = em_fma(e, em_load(e, qp, em_i64(e, ch * vec), vec), em_load(e, K, em_iadd(e, koff, em_i64(e, ch * vec)), vec), dv);
    for (int64_t i = c->nchunks * vec; i < D; i++)
        ds = em_fma(e, em_load(e, qp, em_i64(e, i), 1), em_load(e, K, em_iadd(e, koff, em_i64(e, i)), 1), ds);
    LLVMValueRef sc = em_add(e, em_hsum(e, dv, vec), ds);
    if (c->cap > 0) sc = em_mul(e, em_tanh(e, LLVMBuildFDiv(e->b, sc, em_f32(e, c->cap), ""), 1), em_f32(e, c->cap));
    em_store(e, S, j, sc, 1);
    LLVMBuildStore(e->b, em_intr2(e, "maxnum", sc, LLVMBuildLoad2(e->b, e->f32, c->maxs, "")), c->maxs);
    em_for_end(e, &ls, em_i64(e, 1));
    LLVMValueRef mx = LLVMBuildLoad2(e->b, e->f32, c->maxs, "");
    /* p = exp(s - max), vectorised over keys, and their sum */
    LLVMBuildStore(e->b, em_fw(e, 0, vec), c->sumv);
    LLVMBuildStore(e->b, em_f32(e, 0), c->sums);
    LLVMValueRef vend = em_imul(e, LLVMBuildSDiv(e->b, nkeys, em_i64(e, vec), ""), em_i64(e, vec));
    em_loop lp;
    j = em_for_begin(e, &lp, em_i64(e, 0), vend);
    LLVMValueRef pv = em_exp(e, LLVMBuildFSub(e->b, em_load(e, S, j, vec), em_splat(e, mx, vec), ""), vec);
    em_store(e, S, j, pv, vec);
    LLVMBuildStore(e->b, em_add(e, pv, LLVMBuildLoad2(e->b, vt, c->sumv, "")), c->sumv);
    em_for_end(e, &lp, em_i64(e, vec));
    j = em_for_begin(e, &lp, vend, nkeys);
    LLVMValueRef ps = em_exp(e, LLVMBuildFSub(e->b, em_load(e, S, j, 1), mx, ""), 1);
    em_store(e, S, j, ps, 1);
    LLVMBuildStore(e->b, em_add(e, ps, LLVMBuildLoad2(e->b, e->f32, c->sums, "")), c->sums);
    em_for_end(e, &lp, em_i64(e, 1));
    LLVMValueRef inv = LLVMBuildFDiv(e->b, em_f32(e, 1.0),
                                     em_add(e, em_hsum(e, LLVMBuildLoad2(e->b, vt, c->sumv, ""), vec),
                                            LLVMBuildLoad2(e->b, e->f32, c->sums, "")), "");
    /* out = sum_j p_j v_j / sum */
    int64_t n = c->nchunks + c->tail;
    for (int64_t ch = 0; ch < n; ch++) LLVMBuildStore(e->b, ch < c->nchunks ? em_fw(e, 0, vec) : em_f32(e, 0), c->acc[ch]);
    em_loop lv;
    j = em_for_begin(e, &lv, em_i64(e, 0), nkeys);
    LLVMValueRef pj = em_load(e, S, j, 1), pjv = em_splat(e, pj, vec);
    LLVMValueRef voff = em_iadd(e, vbase, em_imul(e, j, em_i64(e, vstride)));
    for (int64_t ch = 0; ch < n; ch++) {
        bool isv = ch < c->nchunks;
        int64_t i = isv ? ch * vec : c->nchunks * vec + (ch - c->nchunks);
        LLVMValueRef x = em_load(e, V, em_iadd(e, voff, em_i64(e, i)), isv ? vec : 1);
        LLVMBuildStore(e->b, em_fma(e, isv ? pjv : pj, x, LLVMBuildLoad2(e->b, isv ? vt : e->f32, c->acc[ch], "")), c->acc[ch]);
    }
    em_for_end(e, &lv, em_i64(e, 1));
    for (int64_t ch = 0; ch < n; ch++) {
        bool isv = ch < c->nchunks;
        int64_t i = isv ? ch * vec : c->nchunks * vec + (ch - c->nchunks);
        LLVMValueRef r = em_mul(e, LLVMBuildLoad2(e->b, isv ? vt : e->f32, c->acc[ch], ""), em_splat(e, inv, isv ? vec : 1));
        em_store(e, O, em_iadd(e, ooff, em_i64(e, i)), r, isv ? vec : 1);
    }
}

static LLVMValueRef splat_i64(em_t *e, LLVMValueRef x, int w)
{
    LLVMTypeRef vt = LLVMVectorType(e->i64, (unsigned)w);
    LLVMValueRef v = LLVMBuildInsertElement(e->b, LLVMGetUndef(vt), x, LLVMConstInt(e->i32, 0, 0), "");
    return LLVMBuildShuffleVector(e->b, v, LLVMGetUndef(vt), LLVMConstNull(LLVMVectorType(e->i32, (unsigned)w)), "");
}

/* The keys of one key-value head (kv0: its row 0), rotated when kk says so,
 * into a new block stored transposed, Kt[d * Tp + j], the padding keys
 * j >= T zeros (so that their unused scores stay finite). */
static LLVMValueRef transposed_keys(kgen *k, const qk_src *kk, LLVMValueRef kv0, int64_t T, int64_t Hkv, int64_t D, int64_t Tp)
{
    em_t *e = k->e;
    em_loop lj;
    LLVMValueRef zero2[2] = {em_i64(e, 0), em_i64(e, 0)};
    LLVMValueRef Kt = em_malloc(e, em_i64(e, D * Tp * 4));
    LLVMValueRef krow = em_alloca(e, LLVMArrayType(e->f32, (unsigned)D), "krow");
    LLVMValueRef kp = LLVMBuildGEP2(e->b, LLVMArrayType(e->f32, (unsigned)D), krow, zero2, 2, "");
    LLVMValueRef j = em_for_begin(e, &lj, em_i64(e, 0), em_i64(e, T));
    load_row(k, kk, em_iadd(e, kv0, em_imul(e, j, em_i64(e, Hkv * D))), j, D, 1.0, kp, em_i64(e, 0));
    for (int64_t d = 0; d < D; d++) em_store(e, Kt, em_iadd(e, j, em_i64(e, d * Tp)), em_load(e, kp, em_i64(e, d), 1), 1);
    em_for_end(e, &lj, em_i64(e, 1));
    for (int64_t d = 0; d < D; d++)
        for (int64_t jj = T; jj < Tp; jj++) em_store(e, Kt, em_i64(e, d * Tp + jj), em_f32(e, 0), 1);
    return Kt;
}

/* O[ooff..+D) = the accumulators over their row sum, where `in` (a row
 * inside the sequence) holds (O NULL: none); and, when L (attention_lse,
 * fuse rule 7), L[loff] = max + log(sum), the row's log-sum-exp. With
 * `empty_rows` (a bias, whose -inf masks may hide a whole row), a sum of 0
 * gives zeros and a log-sum-exp of -inf. */
static void store_row(kgen *k, LLVMValueRef O, LLVMValueRef ooff, LLVMValueRef in, int64_t D, LLVMValueRef *acc, LLVMValueRef *accs,
                      LLVMValueRef sumv, LLVMValueRef sums, LLVMValueRef L, LLVMValueRef loff, LLVMValueRef maxs, bool empty_rows)
{
    em_t *e = k->e;
    int vec = k->p->tiling.vec;
    int64_t nch = D / vec, tail = D % vec;
    LLVMTypeRef vt = em_vty(e, vec);
    em_if store;
    em_if_begin(e, &store, in);
    LLVMValueRef sum = em_add(e, em_hsum(e, LLVMBuildLoad2(e->b, vt, sumv, ""), vec), LLVMBuildLoad2(e->b, e->f32, sums, ""));
    LLVMValueRef inv = LLVMBuildFDiv(e->b, em_f32(e, 1.0), sum, "");
    if (empty_rows) inv = LLVMBuildSelect(e->b, LLVMBuildFCmp(e->b, LLVMRealOEQ, sum, em_f32(e, 0), ""), em_f32(e, 0), inv, "");
    if (L) {
        LLVMValueRef lg = em_libm(e, "log", em_to_f64(e, sum), NULL);
        em_store(e, L, loff, em_to_f32(e, LLVMBuildFAdd(e->b, em_to_f64(e, LLVMBuildLoad2(e->b, e->f32, maxs, "")), lg, "")), 1);
    }
    if (!O) nch = tail = 0; /* an attention_lse alone */
    for (int64_t c = 0; c < nch; c++)
        em_store(e, O, em_iadd(e, ooff, em_i64(e, c * vec)), em_mul(e, LLVMBuildLoad2(e->b, vt, acc[c], ""), em_splat(e, inv, vec)), vec);
    for (int64_t c = 0; c < tail; c++)
        em_store(e, O, em_iadd(e, ooff, em_i64(e, nch * vec + c)), em_mul(e, LLVMBuildLoad2(e->b, e->f32, accs[c], ""), inv), 1);
    em_if_end(e, &store);
}

/* Keys jv (a vector) a row sees: before nk, and from first on (NULL: no window). */
static LLVMValueRef seen_keys(em_t *e, LLVMValueRef jv, LLVMValueRef nk, LLVMValueRef first, int vec)
{
    LLVMValueRef seen = LLVMBuildICmp(e->b, LLVMIntSLT, jv, splat_i64(e, nk, vec), "");
    if (first) seen = LLVMBuildAnd(e->b, seen, LLVMBuildICmp(e->b, LLVMIntSGE, jv, splat_i64(e, first, vec), ""), "");
    return seen;
}

/* Causal (or full) attention of a block of QB query rows at once: every
 * key row and value row loaded from cache feeds QB dot products or QB
 * accumulators, instead of one (loads, not FMAs, bound the one-row form).
 * Scores of masked keys become exact zeros after the exponential, so the
 * value loop runs unmasked over the block's keys. */
void kg_attention(kgen *k)
{
    em_t *e = k->e;
    const lrc_node *a = &k->g->nodes[k->gr->anchor];
    if (a->op == LRC_OP_KV_ATTENTION) {
        kg_kv_attention(k);
        return;
    }
    /* the group's anchor is the attention, or an attention_lse alone (no output rows, no values read) */
    /* q [B,T,H,D], k [B,Tk,Hkv,D], v [B,Tk,Hkv,Dv], the bias [B|1,H|1,T,Tk] */
    const lrc_shape *qs = &k->g->nodes[a->in[0]].shape, *vs = &k->g->nodes[a->in[2]].shape;
    int64_t T = qs->dim[1], H = qs->dim[2], D = qs->dim[3], Tk = vs->dim[1], Dv = vs->dim[3];
    const lrc_shape *bs = a->n_in > 3 ? &k->g->nodes[a->in[3]].shape : NULL;
    /* QB query rows share each key load; the value loop takes them RG rows
     * by CG vectors of D at a time, so that its accumulators, the value
     * vectors and the broadcasts fit the registers: AVX-512 has 32, AVX2 16
     * (with all of D's 8 vectors of 8 for 2 rows, 24 values lived in 16
     * registers, and the 60m step's attention spilled in every loop) */
    int vec = k->p->tiling.vec, QB = vec == 16 ? 8 : 4, RG = vec == 16 ? 4 : 2, CG = (vec == 16 ? 16 : 8) / RG;
    /* keys padded to whole vectors plus one, so that rows of the transposed
     * keys are not a power of two apart (they would share a few L1 sets);
     * the padding also holds the scores' last block of NB vectors */
    int64_t nch = Dv / vec, tail = Dv % vec, Tp = (Tk + vec - 1) / vec * vec + vec;
    bool causal = a->iattr[0] != 0;
    /* GQA: query head h reads key-value head h / G; a sliding window of W
     * keys hides keys before row t - W + 1 (attn_first_key, ir/ref_template.h) */
    int64_t Hkv = k->g->nodes[a->in[1]].shape.dim[2], G = H / Hkv, W = a->iattr[1];
    double cap = a->fattr[1];
    qk_src q = source_of(k, a->in[0], T, D), kk = source_of(k, a->in[1], Tk, D);
    LLVMValueRef Bias = bs ? kg_ptr(k, a->in[3]) : NULL;
    LLVMValueRef V = kg_ptr(k, a->in[2]), O = a->op == LRC_OP_ATTENTION ? kg_ptr(k, k->gr->anchor) : NULL, L = NULL;
    for (int j = 0; j < k->gr->n_nodes; j++) /* the rows' log-sum-exp, for the backward (fuse rule 7) */
        if (k->g->nodes[k->gr->nodes[j]].op == LRC_OP_ATTENTION_LSE) L = kg_ptr(k, k->gr->nodes[j]);
    LLVMTypeRef vt = em_vty(e, vec);
    /* per block: rotated, scaled queries [QB][D]; per row accumulators */
    LLVMValueRef qarr = em_alloca(e, LLVMArrayType(e->f32, (unsigned)(QB * D)), "qblk");
    LLVMValueRef acc[8][64], accs[8][64], sumv[8], sums[8], maxs[8];
    for (int r = 0; r < QB; r++) {
        for (int64_t c = 0; c < nch; c++) acc[r][c] = em_alloca(e, vt, "acc");
        for (int64_t c = 0; c < tail; c++) accs[r][c] = em_alloca(e, e->f32, "accs");
        sumv[r] = em_alloca(e, vt, "sumv");
        sums[r] = em_alloca(e, e->f32, "sums");
        maxs[r] = em_alloca(e, e->f32, "max");
    }
    LLVMBasicBlockRef here = LLVMGetInsertBlock(e->b);
    LLVMPositionBuilderAtEnd(e->b, e->entry);
    LLVMValueRef zero2[2] = {em_i64(e, 0), em_i64(e, 0)};
    LLVMValueRef qp = LLVMBuildGEP2(e->b, LLVMArrayType(e->f32, (unsigned)(QB * D)), qarr, zero2, 2, "");
    LLVMPositionBuilderAtEnd(e->b, here);

    em_loop litem, lt, lk, lp, lv;
    LLVMValueRef item = em_for_begin(e, &litem, e->begin, e->end);
    LLVMValueRef b = LLVMBuildSDiv(e->b, item, em_i64(e, H), ""), h = LLVMBuildSRem(e->b, item, em_i64(e, H), "");
    LLVMValueRef head0 = em_imul(e, em_iadd(e, em_imul(e, b, em_i64(e, T * H)), h), em_i64(e, D));
    LLVMValueRef kv0 = em_imul(e, em_iadd(e, em_imul(e, b, em_i64(e, Tk * Hkv)), LLVMBuildSDiv(e->b, h, em_i64(e, G), "")), em_i64(e, D));
    /* the output's and the values' rows, Dv wide (the same as q's and k's when Dv == D) */
    LLVMValueRef ohead0 = Dv == D ? head0 : em_imul(e, em_iadd(e, em_imul(e, b, em_i64(e, T * H)), h), em_i64(e, Dv));
    LLVMValueRef vv0 = Dv == D ? kv0
                               : em_imul(e, em_iadd(e, em_imul(e, b, em_i64(e, Tk * Hkv)), LLVMBuildSDiv(e->b, h, em_i64(e, G), "")),
                                         em_i64(e, Dv));
    #define ROW(tv) em_iadd(e, head0, em_imul(e, (tv), em_i64(e, H * D)))
    #define OROW(tv) em_iadd(e, ohead0, em_imul(e, (tv), em_i64(e, H * Dv)))
    #define KROW(tv) em_iadd(e, vv0, em_imul(e, (tv), em_i64(e, Hkv * Dv)))
    LLVMValueRef Kt = transposed_keys(k, &kk, kv0, Tk, Hkv, D, Tp), S = em_malloc(e, em_i64(e, QB * Tp * 4)), j;

    LLVMValueRef t0 = em_for_begin(e, &lt, em_i64(e, 0), em_i64(e, T));
    /* rows past T repeat the last row: computed, never stored */
    LLVMValueRef trow[8], nk[8], first[8];
    for (int r = 0; r < QB; r++) {
        LLVMValueRef tr = em_iadd(e, t0, em_i64(e, r));
        LLVMValueRef in = LLVMBuildICmp(e->b, LLVMIntSLT, tr, em_i64(e, T), "");
        trow[r] = LLVMBuildSelect(e->b, in, tr, em_i64(e, T - 1), "");
        nk[r] = causal ? em_iadd(e, trow[r], em_i64(e, 1)) : em_i64(e, Tk);
        if (causal && T > Tk) /* torch's is_causal: row t sees keys j <= t, all Tk of them from t = Tk - 1 on */
            nk[r] = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, nk[r], em_i64(e, Tk), ""), nk[r], em_i64(e, Tk), "");
        first[r] = W > 0 ? kg_first_key(e, trow[r], W) : NULL;
        load_row(k, &q, ROW(trow[r]), trow[r], D, a->fattr[0], qp, em_i64(e, r * D));
        LLVMBuildStore(e->b, em_f32(e, -INFINITY), maxs[r]);
    }
    LLVMValueRef nkb = causal ? nk[QB - 1] : em_i64(e, Tk); /* keys any row of the block sees */
    /* from the first key of the block's first row, down to a whole vector */
    LLVMValueRef js = W > 0 ? em_imul(e, LLVMBuildSDiv(e->b, first[0], em_i64(e, vec), ""), em_i64(e, vec)) : em_i64(e, 0);
    /* scores, NB vectors of keys at a time for every row of the block: each
     * transposed key load feeds QB FMAs, no horizontal sums. The sums over
     * d are a loop, not unrolled: unrolled, the QB x D broadcasts of q are
     * the same for every j, and LLVM hoisted all of them out of the j loop
     * into 32 KB of stack, which each FMA then read back (the 60m step's
     * attention 25.5 ms). A block may score keys past nkb: S's rows have
     * room (Tp), and Kt is zero there. */
    j = em_for_begin(e, &lk, js, nkb);
    LLVMValueRef sa[8][NB];
    for (int r = 0; r < QB; r++)
        for (int n = 0; n < NB; n++) {
            sa[r][n] = em_alloca(e, vt, "score");
            LLVMBuildStore(e->b, em_fw(e, 0, vec), sa[r][n]);
        }
    em_loop ld;
    LLVMValueRef d = em_for_begin(e, &ld, em_i64(e, 0), em_i64(e, D));
    LLVMValueRef kd[NB];
    for (int n = 0; n < NB; n++) kd[n] = em_load(e, Kt, em_iadd(e, em_iadd(e, j, em_i64(e, n * vec)), em_imul(e, d, em_i64(e, Tp))), vec);
    for (int r = 0; r < QB; r++) {
        LLVMValueRef qd = em_splat(e, em_load(e, qp, em_iadd(e, d, em_i64(e, r * D)), 1), vec);
        for (int n = 0; n < NB; n++) LLVMBuildStore(e->b, em_fma(e, qd, kd[n], LLVMBuildLoad2(e->b, vt, sa[r][n], "")), sa[r][n]);
    }
    em_for_end(e, &ld, em_i64(e, 1));
    for (int r = 0; r < QB; r++)
        for (int n = 0; n < NB; n++) {
            LLVMValueRef sv = LLVMBuildLoad2(e->b, vt, sa[r][n], "");
            if (cap > 0) /* Gemma2's soft-cap, cap tanh(s / cap), before the mask */
                sv = em_mul(e, em_tanh(e, LLVMBuildFDiv(e->b, sv, em_fw(e, cap, vec), ""), vec), em_fw(e, cap, vec));
            em_store(e, S, em_iadd(e, j, em_i64(e, r * Tp + n * vec)), sv, vec);
        }
    em_for_end(e, &lk, em_i64(e, NB * vec));
    if (bs) /* the bias, after the soft-cap: each row's seen keys, one at a time (its rows are Tk long, not padded) */
        for (int r = 0; r < QB; r++) {
            LLVMValueRef bb = bs->dim[0] > 1 ? b : em_i64(e, 0), bh = bs->dim[1] > 1 ? h : em_i64(e, 0);
            LLVMValueRef brow = em_imul(e, em_iadd(e, em_imul(e, em_iadd(e, em_imul(e, bb, em_i64(e, bs->dim[1])), bh), em_i64(e, T)), trow[r]),
                                        em_i64(e, Tk));
            j = em_for_begin(e, &lk, js, nk[r]);
            LLVMValueRef at = em_iadd(e, j, em_i64(e, r * Tp));
            em_store(e, S, at, em_add(e, em_load(e, S, at, 1), em_load(e, Bias, em_iadd(e, brow, j), 1)), 1);
            em_for_end(e, &lk, em_i64(e, 1));
        }
    LLVMValueRef idxv[16];
    for (int i = 0; i < vec; i++) idxv[i] = LLVMConstInt(e->i64, (unsigned long long)i, 0);
    /* each row's max over the keys it sees */
    for (int r = 0; r < QB; r++) {
        LLVMValueRef mv = em_alloca(e, vt, "maxv");
        LLVMBuildStore(e->b, em_fw(e, -INFINITY, vec), mv);
        j = em_for_begin(e, &lk, js, nk[r]);
        LLVMValueRef jv = LLVMBuildAdd(e->b, splat_i64(e, j, vec), LLVMConstVector(idxv, (unsigned)vec), "");
        LLVMValueRef seen = seen_keys(e, jv, nk[r], first[r], vec);
        LLVMValueRef x = LLVMBuildSelect(e->b, seen, em_load(e, S, em_iadd(e, j, em_i64(e, r * Tp)), vec), em_fw(e, -INFINITY, vec), "");
        LLVMBuildStore(e->b, em_intr2(e, "maxnum", x, LLVMBuildLoad2(e->b, vt, mv, "")), mv);
        em_for_end(e, &lk, em_i64(e, vec));
        LLVMValueRef mx = em_hmax(e, LLVMBuildLoad2(e->b, vt, mv, ""), vec);
        if (bs) /* a row the bias masks whole: max 0, so that its exponentials are zeros, not NaN */
            mx = LLVMBuildSelect(e->b, LLVMBuildFCmp(e->b, LLVMRealOEQ, mx, em_f32(e, -INFINITY), ""), em_f32(e, 0), mx, "");
        LLVMBuildStore(e->b, mx, maxs[r]);
    }
    /* p = exp(s - max) for seen keys, exact zeros for the others (S rows
     * are padded to whole vectors); row sums */
    for (int r = 0; r < QB; r++) {
        LLVMValueRef mx = LLVMBuildLoad2(e->b, e->f32, maxs[r], ""), base = em_i64(e, r * Tp);
        LLVMBuildStore(e->b, em_fw(e, 0, vec), sumv[r]);
        LLVMBuildStore(e->b, em_f32(e, 0), sums[r]);
        j = em_for_begin(e, &lp, js, nkb);
        LLVMValueRef mxv = em_splat(e, mx, vec), sv = em_load(e, S, em_iadd(e, base, j), vec); /* in this order: the same IR as before */
        LLVMValueRef pv = em_exp(e, LLVMBuildFSub(e->b, sv, mxv, ""), vec);
        LLVMValueRef jv = LLVMBuildAdd(e->b, splat_i64(e, j, vec), LLVMConstVector(idxv, (unsigned)vec), "");
        LLVMValueRef seen = seen_keys(e, jv, nk[r], first[r], vec);
        if (bs) /* a -inf bias masks: em_exp's clamp would give it e^-87, not 0 */
            seen = LLVMBuildAnd(e->b, seen, LLVMBuildFCmp(e->b, LLVMRealOGT, sv, em_fw(e, -INFINITY, vec), ""), "");
        pv = LLVMBuildSelect(e->b, seen, pv, em_fw(e, 0, vec), "");
        em_store(e, S, em_iadd(e, base, j), pv, vec);
        LLVMBuildStore(e->b, em_add(e, pv, LLVMBuildLoad2(e->b, vt, sumv[r], "")), sumv[r]);
        em_for_end(e, &lp, em_i64(e, vec));
        for (int64_t c = 0; c < nch; c++) LLVMBuildStore(e->b, em_fw(e, 0, vec), acc[r][c]);
        for (int64_t c = 0; c < tail; c++) LLVMBuildStore(e->b, em_f32(e, 0), accs[r][c]);
    }
    /* out = P V: each value row loaded once for the block */
    LLVMValueRef kv[64], ks[64];
    for (int r0 = 0; r0 < QB && O; r0 += RG)
        for (int64_t c0 = 0; c0 == 0 || c0 < nch; c0 += CG) { /* the last pass takes the tail */
            int64_t c1 = c0 + CG < nch ? c0 + CG : nch, t1 = c1 == nch ? tail : 0;
            j = em_for_begin(e, &lv, js, nkb);
            LLVMValueRef voff = KROW(j);
            for (int64_t c = c0; c < c1; c++) kv[c] = em_load(e, V, em_iadd(e, voff, em_i64(e, c * vec)), vec);
            for (int64_t c = 0; c < t1; c++) ks[c] = em_load(e, V, em_iadd(e, voff, em_i64(e, nch * vec + c)), 1);
            for (int r = r0; r < r0 + RG; r++) {
                LLVMValueRef pj = em_load(e, S, em_iadd(e, j, em_i64(e, r * Tp)), 1), pjv = em_splat(e, pj, vec);
                for (int64_t c = c0; c < c1; c++)
                    LLVMBuildStore(e->b, em_fma(e, pjv, kv[c], LLVMBuildLoad2(e->b, vt, acc[r][c], "")), acc[r][c]);
                for (int64_t c = 0; c < t1; c++)
                    LLVMBuildStore(e->b, em_fma(e, pj, ks[c], LLVMBuildLoad2(e->b, e->f32, accs[r][c], "")), accs[r][c]);
            }
            em_for_end(e, &lv, em_i64(e, 1));
        }
    for (int r = 0; r < QB; r++) {
        LLVMValueRef tr = em_iadd(e, t0, em_i64(e, r));
        LLVMValueRef loff = em_iadd(e, em_imul(e, em_iadd(e, em_imul(e, b, em_i64(e, T)), tr), em_i64(e, H)), h);
        store_row(k, O, OROW(tr), LLVMBuildICmp(e->b, LLVMIntSLT, tr, em_i64(e, T), ""), Dv, acc[r], accs[r], sumv[r], sums[r], L, loff,
                  maxs[r], bs != NULL);
    }
    em_for_end(e, &lt, em_i64(e, QB));
    em_free(e, Kt);
    em_free(e, S);
    em_for_end(e, &litem, em_i64(e, 1));
    #undef ROW
    #undef OROW
    #undef KROW
}

/* One decoding step: the new rows' rotated k and their v go into the caches
 * at positions pos.. (each work item owns its (batch, key-value head) slice
 * of them), then each new query of the item's G query heads attends to
 * cache rows [0, pos + t], or the last `window` of them. */
void kg_kv_attention(kgen *k)
{
    em_t *e = k->e;
    const lrc_node *a = &k->g->nodes[k->gr->anchor];
    int64_t T = a->shape.dim[1], H = a->shape.dim[2], D = a->shape.dim[3];
    int64_t Tmax = k->g->nodes[a->in[3]].shape.dim[1], Hkv = k->g->nodes[a->in[1]].shape.dim[2], G = H / Hkv, W = a->iattr[0];
    lrc_rope rope = lrc_rope_of(a);
    qk_src q = {kg_ptr(k, a->in[0]), kg_rope_table(e, Tmax, D, &rope, false), kg_rope_table(e, Tmax, D, &rope, true)};
    qk_src kk = {kg_ptr(k, a->in[1]), q.cos, q.sin}, vv = {kg_ptr(k, a->in[2]), NULL, NULL};
    LLVMValueRef KC = kg_ptr(k, a->in[3]), VC = kg_ptr(k, a->in[4]), O = kg_ptr(k, k->gr->anchor);
    LLVMValueRef POS = LLVMBuildBitCast(e->b, kg_ptr(k, a->in[5]), e->i32p, "");
    LLVMValueRef pos = LLVMBuildSExt(e->b, em_load_i32(e, POS, em_i64(e, 0)), e->i64, "pos");
    attend_ctx c;
    attend_init(k, &c, D);
    c.cap = a->fattr[2];
    em_loop litem, lt, lg;
    LLVMValueRef item = em_for_begin(e, &litem, e->begin, e->end);
    LLVMValueRef b = LLVMBuildSDiv(e->b, item, em_i64(e, Hkv), ""), hk = LLVMBuildSRem(e->b, item, em_i64(e, Hkv), "");
    LLVMValueRef kvrow0 = em_imul(e, em_iadd(e, em_imul(e, b, em_i64(e, T * Hkv)), hk), em_i64(e, D));
    LLVMValueRef cache0 = em_imul(e, em_iadd(e, em_imul(e, b, em_i64(e, Tmax * Hkv)), hk), em_i64(e, D));
    #define KVROW(tv) em_iadd(e, kvrow0, em_imul(e, (tv), em_i64(e, Hkv * D)))
    #define CROW(tv) em_iadd(e, cache0, em_imul(e, (tv), em_i64(e, Hkv * D)))
    LLVMValueRef t = em_for_begin(e, &lt, em_i64(e, 0), em_i64(e, T));
    LLVMValueRef at = em_iadd(e, pos, t);
    load_row(k, &kk, KVROW(t), at, D, 1.0, KC, CROW(at));
    load_row(k, &vv, KVROW(t), at, D, 1.0, VC, CROW(at));
    em_for_end(e, &lt, em_i64(e, 1));
    c.S = em_malloc(e, em_i64(e, Tmax * 4));
    LLVMValueRef gi = em_for_begin(e, &lg, em_i64(e, 0), em_i64(e, G));
    LLVMValueRef h = em_iadd(e, em_imul(e, hk, em_i64(e, G)), gi);
    LLVMValueRef head0 = em_imul(e, em_iadd(e, em_imul(e, b, em_i64(e, T * H)), h), em_i64(e, D));
    #define ROW(tv) em_iadd(e, head0, em_imul(e, (tv), em_i64(e, H * D)))
    t = em_for_begin(e, &lt, em_i64(e, 0), em_i64(e, T));
    at = em_iadd(e, pos, t);
    load_row(k, &q, ROW(t), at, D, a->fattr[0], c.qp, em_i64(e, 0));
    /* the window's first key (attn_first_key): the cache rows from there on */
    LLVMValueRef first = em_i64(e, 0);
    if (W > 0) {
        LLVMValueRef lo = em_iadd(e, at, em_i64(e, 1 - W));
        first = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSGT, lo, em_i64(e, 0), ""), lo, em_i64(e, 0), "");
    }
    LLVMValueRef from = em_iadd(e, cache0, em_imul(e, first, em_i64(e, Hkv * D)));
    attend(k, &c, D, KC, from, Hkv * D, VC, from, Hkv * D, LLVMBuildSub(e->b, em_iadd(e, at, em_i64(e, 1)), first, ""), O, ROW(t));
    em_for_end(e, &lt, em_i64(e, 1));
    em_for_end(e, &lg, em_i64(e, 1));
    em_free(e, c.S);
    em_for_end(e, &litem, em_i64(e, 1));
    #undef ROW
    #undef KVROW
    #undef CROW
}
