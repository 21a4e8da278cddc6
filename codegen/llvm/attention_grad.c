/* attention_grad.c — the gradient of attention for the cpu target. A work
 * item is a (batch, key-value head); its G query heads in turn:
 *
 *   1. for RB query rows at once, the scores q_t . k_j and dP = dy_t . v_j
 *      a block of NB vectors of keys at a time, from keys and values
 *      transposed once per item ([D][Tp], zeros past T): per d, broadcasts
 *      of q_t[d] (dy_t[d]) times vectors of k^T[d] (v^T[d]) into 2 RB NB
 *      accumulators, each vector loaded once for the RB rows and no
 *      horizontal sums (a dot product per pair took twice the time);
 *   2. P = exp(s - lse) from the forward's log-sum-exp (attention_lse,
 *      which the forward's kernel wrote), rowsum(dP o P) as dy_t . y_t
 *      from the forward's output, and dS = P o (dP - rowsum) (times the
 *      soft-cap's 1 - tanh^2), as vector passes over the row's keys;
 *   3. the rows of dq (from rows of dS), dk (columns of dS) and dv (columns
 *      of P), dk and dv summed over the G heads.
 *
 * Only a row's keys [first(t), keys(t)) are read after step 1; a block may
 * write scores of keys before first(t) or past keys(t) (row stride Tp, a
 * multiple of the block): they are never read. Sums run in a fixed order,
 * so a run repeats bit for bit. */
#include "kgen.h"

#include <math.h>

#define NB 2 /* vectors of keys in a block of step 1 */
#define RB 4 /* query rows a block of step 1 computes together */

/* Rows [first, end) of the dk/dv column of key t that attend to it: query
 * rows j >= t under the causal mask, j < t + W under a window of W. */
static LLVMValueRef column_end(em_t *e, LLVMValueRef t, int64_t T, int64_t W)
{
    if (W <= 0) return em_i64(e, T);
    LLVMValueRef hi = em_iadd(e, t, em_i64(e, W));
    return LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, hi, em_i64(e, T), ""), hi, em_i64(e, T), "");
}

/* Where the rows of one (batch, query head) and of its key-value head are. */
typedef struct {
    int64_t T, Tp, H, Hkv, D, W, G; /* Tp: the stride of P's and S's rows, T rounded up to a block and padded */
    bool causal;
    LLVMValueRef head0, kv0; /* offsets of row 0 of the query head and of the key-value head */
} attn_rows;

/* The keys row (which 0) or column (1, 2) t of M covers: dq_t takes row t of
 * dS (first(t) <= j < keys(t)); dk_t and dv_t column t (causal: j >= t; a
 * window: j < t + W). */
static void covered(em_t *e, const attn_rows *a, int which, LLVMValueRef t, LLVMValueRef *lo, LLVMValueRef *hi)
{
    if (which == 0) {
        *lo = kg_first_key(e, t, a->W);
        *hi = a->causal ? em_iadd(e, t, em_i64(e, 1)) : em_i64(e, a->T);
    } else {
        *lo = a->causal ? t : em_i64(e, 0);
        *hi = column_end(e, t, a->T, a->W);
    }
}

/* Output rows t .. t + n - 1 (n = 1 or 2) of one gradient for one query
 * head: a sum over j of M's entry (row or column t + r, rows Tp apart)
 * times row j of R. Two rows share each load of R's row and give twice the
 * independent FMA chains; an entry outside a row's keys counts as zero (M
 * holds scores there, or nothing). Summed into the key-value head's rows
 * when G heads share them. */
static void grad_rows_at(kgen *k, const attn_rows *a, int which, LLVMValueRef t, int n, LLVMValueRef O, LLVMValueRef M, LLVMValueRef R,
                         double f, LLVMValueRef *acc, LLVMValueRef *tacc)
{
    em_t *e = k->e;
    int64_t Tp = a->Tp, H = a->H, Hkv = a->Hkv, D = a->D, G = a->G, nv = D / k->vec, nt = D % k->vec;
    int vec = k->vec;
    LLVMTypeRef vt = em_vty(e, vec);
    #define ROW(tv) em_iadd(e, a->head0, em_imul(e, (tv), em_i64(e, H * D)))
    #define KROW(tv) em_iadd(e, a->kv0, em_imul(e, (tv), em_i64(e, Hkv * D)))
    LLVMValueRef lo[2], hi[2], tr[2];
    for (int r = 0; r < n; r++) {
        tr[r] = em_iadd(e, t, em_i64(e, r));
        covered(e, a, which, tr[r], &lo[r], &hi[r]);
    }
    bool sum_heads = which != 0 && G > 1;
    /* the columns in passes of CG vectors (the last takes the tail), so
     * that the two rows' accumulators, R's vectors and the two broadcasts
     * fit the registers: AVX2 has 16, and all 8 vectors of D = 64 for two
     * rows (24 values) spilled in every iteration */
    int64_t CG = vec == 16 ? 8 : 4;
    for (int64_t c0 = 0; c0 == 0 || c0 < nv; c0 += CG) {
        int64_t c1 = c0 + CG < nv ? c0 + CG : nv, t1 = c1 == nv ? nt : 0;
        for (int r = 0; r < n; r++) {
            for (int64_t c = c0; c < c1; c++) LLVMBuildStore(e->b, em_fw(e, 0, vec), acc[r * nv + c]);
            for (int64_t c = 0; c < t1; c++) LLVMBuildStore(e->b, em_f32(e, 0), tacc[r * nt + c]);
        }
        em_loop lj;
        LLVMValueRef j = em_for_begin(e, &lj, lo[0], hi[n - 1]); /* lo and hi grow with t */
        LLVMValueRef roff = which == 0 ? KROW(j) : ROW(j), rv[256];
        for (int64_t c = c0; c < c1; c++) rv[c] = em_load(e, R, em_iadd(e, roff, em_i64(e, c * vec)), vec);
        for (int r = 0; r < n; r++) {
            LLVMValueRef at = which == 0 ? em_iadd(e, em_imul(e, tr[r], em_i64(e, Tp)), j) : em_iadd(e, em_imul(e, j, em_i64(e, Tp)), tr[r]);
            LLVMValueRef coef = em_load(e, M, at, 1);
            if (n > 1) {
                LLVMValueRef in = LLVMBuildAnd(e->b, LLVMBuildICmp(e->b, LLVMIntSGE, j, lo[r], ""), LLVMBuildICmp(e->b, LLVMIntSLT, j, hi[r], ""), "");
                coef = LLVMBuildSelect(e->b, in, coef, em_f32(e, 0), "");
            }
            LLVMValueRef cv = em_splat(e, coef, vec);
            for (int64_t c = c0; c < c1; c++)
                LLVMBuildStore(e->b, em_fma(e, cv, rv[c], LLVMBuildLoad2(e->b, vt, acc[r * nv + c], "")), acc[r * nv + c]);
            for (int64_t c = 0; c < t1; c++)
                LLVMBuildStore(e->b, em_fma(e, coef, em_load(e, R, em_iadd(e, roff, em_i64(e, nv * vec + c)), 1), LLVMBuildLoad2(e->b, e->f32, tacc[r * nt + c], "")),
                               tacc[r * nt + c]);
        }
        em_for_end(e, &lj, em_i64(e, 1));
        for (int r = 0; r < n; r++) {
            LLVMValueRef ooff = which == 0 ? ROW(tr[r]) : KROW(tr[r]);
            for (int64_t c = c0; c < c1; c++) {
                LLVMValueRef x = em_mul(e, LLVMBuildLoad2(e->b, vt, acc[r * nv + c], ""), em_fw(e, f, vec)), at = em_iadd(e, ooff, em_i64(e, c * vec));
                em_store(e, O, at, sum_heads ? em_add(e, em_load(e, O, at, vec), x) : x, vec);
            }
            for (int64_t c = 0; c < t1; c++) {
                LLVMValueRef x = em_mul(e, LLVMBuildLoad2(e->b, e->f32, tacc[r * nt + c], ""), em_f32(e, f)), at = em_iadd(e, ooff, em_i64(e, nv * vec + c));
                em_store(e, O, at, sum_heads ? em_add(e, em_load(e, O, at, 1), x) : x, 1);
            }
        }
    }
    #undef ROW
    #undef KROW
}

/* Every row of one gradient for one query head: pairs of rows, then the
 * last row alone when T is odd. */
static void grad_rows(kgen *k, const attn_rows *a, int which, LLVMValueRef O, LLVMValueRef M, LLVMValueRef R, double f,
                      LLVMValueRef *acc, LLVMValueRef *tacc)
{
    em_t *e = k->e;
    em_loop lt;
    LLVMValueRef t = em_for_begin(e, &lt, em_i64(e, 0), em_i64(e, a->T / 2 * 2));
    grad_rows_at(k, a, which, t, 2, O, M, R, f, acc, tacc);
    em_for_end(e, &lt, em_i64(e, 2));
    if (a->T % 2) grad_rows_at(k, a, which, em_i64(e, a->T - 1), 1, O, M, R, f, acc, tacc);
}

/* One elementwise pass over entries [lo, hi) of a row of P (and S, U):
 * whole vectors first, then one at a time. */
typedef struct {
    em_t *e;
    int vec;
    LLVMValueRef P, S, U, prow; /* the row's scratch and its offset */
    LLVMValueRef f;             /* score_pass: the scale; prob_pass: the log-sum-exp; ds_pass: rowsum(dP o P) */
    double cap;                 /* score_pass: the soft-cap, or 0 */
} row_pass;
typedef void (*row_pass_fn)(const row_pass *r, LLVMValueRef at, int w);

/* s = scale q . k, soft-capped to cap tanh(s / cap) with U = 1 - tanh^2 kept */
static void score_pass(const row_pass *r, LLVMValueRef at, int w)
{
    em_t *e = r->e;
    LLVMValueRef s = em_mul(e, em_load(e, r->P, at, w), em_splat(e, r->f, w));
    if (r->cap > 0) {
        LLVMValueRef th = em_tanh(e, LLVMBuildFDiv(e->b, s, em_fw(e, r->cap, w), ""), w);
        s = em_mul(e, th, em_fw(e, r->cap, w));
        em_store(e, r->U, at, LLVMBuildFSub(e->b, em_fw(e, 1.0, w), em_mul(e, th, th), ""), w);
    }
    em_store(e, r->P, at, s, w);
}

static void prob_pass(const row_pass *r, LLVMValueRef at, int w)
{
    em_t *e = r->e;
    em_store(e, r->P, at, em_exp(e, LLVMBuildFSub(e->b, em_load(e, r->P, at, w), em_splat(e, r->f, w), ""), w), w);
}

static void ds_pass(const row_pass *r, LLVMValueRef at, int w)
{
    em_t *e = r->e;
    LLVMValueRef ds = em_mul(e, em_load(e, r->P, at, w), LLVMBuildFSub(e->b, em_load(e, r->S, at, w), em_splat(e, r->f, w), ""));
    if (r->U) ds = em_mul(e, ds, em_load(e, r->U, at, w));
    em_store(e, r->S, at, ds, w);
}

static void row_passes(const row_pass *r, LLVMValueRef lo, LLVMValueRef hi, row_pass_fn fn)
{
    em_t *e = r->e;
    em_loop l;
    LLVMValueRef whole = LLVMBuildSDiv(e->b, LLVMBuildSub(e->b, hi, lo, ""), em_i64(e, r->vec), "");
    LLVMValueRef mid = em_iadd(e, lo, em_imul(e, whole, em_i64(e, r->vec)));
    LLVMValueRef j = em_for_begin(e, &l, lo, mid);
    fn(r, em_iadd(e, r->prow, j), r->vec);
    em_for_end(e, &l, em_i64(e, r->vec));
    j = em_for_begin(e, &l, mid, hi);
    fn(r, em_iadd(e, r->prow, j), 1);
    em_for_end(e, &l, em_i64(e, 1));
}

/* Rows [0, T) of the key-value head's src (row(t) its offsets, KV rows of D)
 * into dst [D][Tp], zeros in columns T..Tp. */
static void transpose_rows(kgen *k, LLVMValueRef dst, LLVMValueRef src, const attn_rows *a)
{
    em_t *e = k->e;
    em_loop lj, ld;
    LLVMValueRef j = em_for_begin(e, &lj, em_i64(e, 0), em_i64(e, a->Tp));
    LLVMValueRef inside = LLVMBuildICmp(e->b, LLVMIntSLT, j, em_i64(e, a->T), "");
    LLVMValueRef row = em_iadd(e, a->kv0, em_imul(e, LLVMBuildSelect(e->b, inside, j, em_i64(e, 0), ""), em_i64(e, a->Hkv * a->D)));
    LLVMValueRef d = em_for_begin(e, &ld, em_i64(e, 0), em_i64(e, a->D));
    LLVMValueRef v = LLVMBuildSelect(e->b, inside, em_load(e, src, em_iadd(e, row, d), 1), em_f32(e, 0), "");
    em_store(e, dst, em_iadd(e, em_imul(e, d, em_i64(e, a->Tp)), j), v, 1);
    em_for_end(e, &ld, em_i64(e, 1));
    em_for_end(e, &lj, em_i64(e, 1));
}

/* Step 1 for rows t .. t + rb - 1: blocks of NB vectors of keys from jlo (a
 * multiple of the block, at most the first row's first key) up to past hi
 * (the last row's end), the raw scores into P's rows and, when DY, dP into
 * S's. The rows share each vector of k^T and v^T: rb rows take rb times the
 * work from one pass over those columns. */
static void score_blocks(kgen *k, const attn_rows *a, LLVMValueRef t, int rb, LLVMValueRef jlo, LLVMValueRef hi, LLVMValueRef Q,
                         LLVMValueRef Kt, LLVMValueRef P, LLVMValueRef DY, LLVMValueRef Vt, LLVMValueRef S, LLVMValueRef *acc)
{
    em_t *e = k->e;
    int vec = k->vec, ns = DY ? 2 : 1;
    LLVMTypeRef vt = em_vty(e, vec);
    LLVMValueRef qrow[RB], prow[RB];
    for (int r = 0; r < rb; r++) {
        LLVMValueRef tr = em_iadd(e, t, em_i64(e, r));
        qrow[r] = em_iadd(e, a->head0, em_imul(e, tr, em_i64(e, a->H * a->D)));
        prow[r] = em_imul(e, tr, em_i64(e, a->Tp));
    }
    #define ACC(s, r, i) acc[((s) * rb + (r)) * NB + (i)]
    em_loop lb, ld;
    LLVMValueRef jb = em_for_begin(e, &lb, jlo, hi);
    /* the scores and dP in one pass over d where the registers hold both's
     * 2 rb NB accumulators (AVX-512's 32), else one pass each (AVX2's 16:
     * 16 accumulators spilled) */
    int per = vec == 16 ? ns : 1;
    for (int s0 = 0; s0 < ns; s0 += per) {
        for (int s = s0; s < s0 + per; s++)
            for (int i = 0; i < rb * NB; i++) LLVMBuildStore(e->b, em_fw(e, 0, vec), acc[s * rb * NB + i]);
        LLVMValueRef d = em_for_begin(e, &ld, em_i64(e, 0), em_i64(e, a->D));
        LLVMValueRef col = em_iadd(e, em_imul(e, d, em_i64(e, a->Tp)), jb);
        for (int s = s0; s < s0 + per; s++) {
            LLVMValueRef kv[NB];
            for (int i = 0; i < NB; i++) kv[i] = em_load(e, s ? Vt : Kt, em_iadd(e, col, em_i64(e, i * vec)), vec);
            for (int r = 0; r < rb; r++) {
                LLVMValueRef x = em_splat(e, em_load(e, s ? DY : Q, em_iadd(e, qrow[r], d), 1), vec);
                for (int i = 0; i < NB; i++)
                    LLVMBuildStore(e->b, em_fma(e, x, kv[i], LLVMBuildLoad2(e->b, vt, ACC(s, r, i), "")), ACC(s, r, i));
            }
        }
        em_for_end(e, &ld, em_i64(e, 1));
        for (int s = s0; s < s0 + per; s++)
            for (int r = 0; r < rb; r++)
                for (int i = 0; i < NB; i++)
                    em_store(e, s ? S : P, em_iadd(e, prow[r], em_iadd(e, jb, em_i64(e, i * vec))), LLVMBuildLoad2(e->b, vt, ACC(s, r, i), ""), vec);
    }
    em_for_end(e, &lb, em_i64(e, NB * vec));
    #undef ACC
}

/* The kernel's inputs that steps 1 and 2 read: q, dy, the forward's y and
 * log-sum-exp, keys and values transposed (Vt NULL when dS is not needed). */
typedef struct {
    LLVMValueRef Q, DY, Y, LSE, Kt, Vt;
} grad_io;

/* dy_t . y_t over the D entries at off: rowsum(dP o P) of row t, since y_t = sum_j P_tj v_j */
static LLVMValueRef row_dot(kgen *k, const attn_rows *a, LLVMValueRef DY, LLVMValueRef Y, LLVMValueRef off, LLVMValueRef red)
{
    em_t *e = k->e;
    int vec = k->vec;
    int64_t nv = a->D / vec;
    LLVMBuildStore(e->b, em_fw(e, 0, vec), red);
    em_loop l;
    LLVMValueRef i = em_for_begin(e, &l, em_i64(e, 0), em_i64(e, nv * vec));
    LLVMValueRef at = em_iadd(e, off, i);
    LLVMBuildStore(e->b, em_fma(e, em_load(e, DY, at, vec), em_load(e, Y, at, vec), LLVMBuildLoad2(e->b, em_vty(e, vec), red, "")), red);
    em_for_end(e, &l, em_i64(e, vec));
    LLVMValueRef d = em_hsum(e, LLVMBuildLoad2(e->b, em_vty(e, vec), red, ""), vec);
    for (int64_t c = nv * vec; c < a->D; c++)
        d = em_fma(e, em_load(e, DY, em_iadd(e, off, em_i64(e, c)), 1), em_load(e, Y, em_iadd(e, off, em_i64(e, c)), 1), d);
    return d;
}

/* Step 2 for row t: its probabilities in P from the forward's log-sum-exp,
 * and (need_ds) dS in S with rowsum(dP o P) taken as dy_t . y_t. */
static void row_softmax(kgen *k, const attn_rows *a, LLVMValueRef t, double scale, double cap, bool need_ds, const grad_io *io,
                        LLVMValueRef P, LLVMValueRef S, LLVMValueRef U, LLVMValueRef red)
{
    em_t *e = k->e;
    LLVMValueRef keys = a->causal ? em_iadd(e, t, em_i64(e, 1)) : em_i64(e, a->T), first = kg_first_key(e, t, a->W);
    LLVMValueRef qrow = em_iadd(e, a->head0, em_imul(e, t, em_i64(e, a->H * a->D)));
    row_pass rp = {e, k->vec, P, S, U, em_imul(e, t, em_i64(e, a->Tp)), em_f32(e, scale), cap};
    row_passes(&rp, first, keys, score_pass);
    rp.f = em_load(e, io->LSE, LLVMBuildSDiv(e->b, qrow, em_i64(e, a->D), ""), 1); /* [B,T,H]: q's row over D */
    row_passes(&rp, first, keys, prob_pass); /* P = exp(s - lse) */
    if (need_ds) {
        rp.f = row_dot(k, a, io->DY, io->Y, qrow, red);
        row_passes(&rp, first, keys, ds_pass); /* dS = P o (dP - rowsum) [o (1 - tanh^2)] */
    }
}

/* Steps 1 and 2 for rows t .. t + rb - 1 of one query head. */
static void row_block(kgen *k, const attn_rows *a, LLVMValueRef t, int rb, double scale, double cap, bool need_ds, const grad_io *io,
                      LLVMValueRef P, LLVMValueRef S, LLVMValueRef U, LLVMValueRef red, LLVMValueRef *acc)
{
    em_t *e = k->e;
    LLVMValueRef last = em_iadd(e, t, em_i64(e, rb - 1));
    LLVMValueRef hi = a->causal ? em_iadd(e, last, em_i64(e, 1)) : em_i64(e, a->T), bw = em_i64(e, NB * k->vec);
    LLVMValueRef jlo = em_imul(e, LLVMBuildSDiv(e->b, kg_first_key(e, t, a->W), bw, ""), bw);
    score_blocks(k, a, t, rb, jlo, hi, io->Q, io->Kt, P, need_ds ? io->DY : NULL, io->Vt, S, acc);
    em_loop lr;
    LLVMValueRef tr = em_for_begin(e, &lr, t, em_iadd(e, t, em_i64(e, rb)));
    row_softmax(k, a, tr, scale, cap, need_ds, io, P, S, U, red);
    em_for_end(e, &lr, em_i64(e, 1));
}

/* Steps 1 and 2 for every row of one query head: P (and, when need_ds, dS
 * in S), RB rows at a time, then the last T % RB one at a time */
static void head_rows(kgen *k, const attn_rows *a, double scale, double cap, bool need_ds, const grad_io *io, LLVMValueRef P,
                      LLVMValueRef S, LLVMValueRef U, LLVMValueRef red, LLVMValueRef *acc)
{
    em_t *e = k->e;
    em_loop lt;
    LLVMValueRef t = em_for_begin(e, &lt, em_i64(e, 0), em_i64(e, a->T / RB * RB));
    row_block(k, a, t, RB, scale, cap, need_ds, io, P, S, U, red, acc);
    em_for_end(e, &lt, em_i64(e, RB));
    if (a->T % RB) {
        t = em_for_begin(e, &lt, em_i64(e, a->T / RB * RB), em_i64(e, a->T));
        row_block(k, a, t, 1, scale, cap, need_ds, io, P, S, U, red, acc);
        em_for_end(e, &lt, em_i64(e, 1));
    }
}

void kg_attention_grad(kgen *k)
{
    if (kg_attention_grad_is_general(k->g, &k->g->nodes[k->gr->anchor])) {
        kg_attention_grad_general(k);
        return;
    }
    em_t *e = k->e;
    /* The GEMM tiling's vectors (16 floats with AVX-512), where the other
     * kernels take 8: steps 1 and 3 are mostly FMAs, and on a Xeon (family
     * 6, model 207) the 60m step's attention gradients took 44 ms instead of
     * 50 with them. (Every kernel at 16 floats, or the cross-entropy with
     * its sums in 16 lanes, moved a LayerRoPE gradient past its test's
     * tolerance against PyTorch: sums in another order. kg_row_logsumexp
     * takes 16-float exponentials but keeps the 8-lane sums.) */
    int vec_other = k->vec;
    k->vec = kg_wide_vec(k);
    const lrc_node *a = &k->g->nodes[k->gr->anchor];
    const lrc_shape *qs = &k->g->nodes[a->in[0]].shape;
    int64_t T = qs->dim[1], H = qs->dim[2], D = qs->dim[3], Hkv = k->g->nodes[a->in[1]].shape.dim[2], G = H / Hkv;
    /* Tp: T rounded up to a block, and one vector more, so that successive
     * rows do not fall into the same few cache sets: at T = 256 they lay
     * 1 KB apart, and a column's 256 rows (step 3's dk and dv read columns
     * of P and dS) shared four sets of L1 (the 60m step's attention
     * gradients: 61 ms, 50 ms padded) */
    int64_t BW = NB * k->vec, Tp = (T + BW - 1) / BW * BW + k->vec;
    /* the group holds the gradient of q, k and/or v (fuse rule 6): P and dS once for all */
    LLVMValueRef out_of[3] = {NULL, NULL, NULL};
    for (int j = 0; j < k->gr->n_nodes; j++) {
        const lrc_node *m = &k->g->nodes[k->gr->nodes[j]];
        if (m->op == LRC_OP_ATTENTION_GRAD) out_of[m->iattr[1]] = kg_ptr(k, k->gr->nodes[j]);
    }
    bool need_ds = out_of[0] || out_of[1];
    double scale = a->fattr[0], cap = a->fattr[1];
    LLVMValueRef Q = kg_ptr(k, a->in[0]), K = kg_ptr(k, a->in[1]), V = kg_ptr(k, a->in[2]), DY = kg_ptr(k, a->in[3]);
    LLVMValueRef red = em_alloca(e, em_vty(e, k->vec), "red"), blk[2 * RB * NB];
    for (int i = 0; i < 2 * RB * NB; i++) blk[i] = em_alloca(e, em_vty(e, k->vec), "blk");
    /* two output rows' accumulators (program.c refuses D over 1024) */
    LLVMValueRef acc[2 * 1024 / 4], tacc[2 * 16];
    for (int64_t c = 0; c < 2 * (D / k->vec); c++) acc[c] = em_alloca(e, em_vty(e, k->vec), "acc");
    for (int64_t c = 0; c < 2 * (D % k->vec); c++) tacc[c] = em_alloca(e, e->f32, "tacc");
    /* scratch once per call, for all its items */
    LLVMValueRef rows_bytes = em_i64(e, T * Tp * 4), kt_bytes = em_i64(e, D * Tp * 4);
    LLVMValueRef P = em_malloc(e, rows_bytes), S = em_malloc(e, rows_bytes), U = cap > 0 ? em_malloc(e, rows_bytes) : NULL;
    LLVMValueRef Kt = em_malloc(e, kt_bytes), Vt = need_ds ? em_malloc(e, kt_bytes) : NULL;
    em_loop li, lt, lg;
    LLVMValueRef item = em_for_begin(e, &li, e->begin, e->end);
    LLVMValueRef b = LLVMBuildSDiv(e->b, item, em_i64(e, Hkv), ""), hk = LLVMBuildSRem(e->b, item, em_i64(e, Hkv), "");
    LLVMValueRef kv0 = em_imul(e, em_iadd(e, em_imul(e, b, em_i64(e, T * Hkv)), hk), em_i64(e, D));
    attn_rows geo = {T, Tp, H, Hkv, D, a->iattr[2], G, a->iattr[0] != 0, NULL, kv0};
    transpose_rows(k, Kt, K, &geo);
    if (Vt) transpose_rows(k, Vt, V, &geo);
    if (G > 1) /* dk and dv rows of this item: sums over its query heads */
        for (int w = 1; w < 3; w++) {
            if (!out_of[w]) continue;
            LLVMValueRef t = em_for_begin(e, &lt, em_i64(e, 0), em_i64(e, T));
            LLVMValueRef row = em_iadd(e, kv0, em_imul(e, t, em_i64(e, Hkv * D)));
            for (int64_t i = 0; i < D; i++) em_store(e, out_of[w], em_iadd(e, row, em_i64(e, i)), em_f32(e, 0), 1);
            em_for_end(e, &lt, em_i64(e, 1));
        }
    LLVMValueRef gi = em_for_begin(e, &lg, em_i64(e, 0), em_i64(e, G));
    LLVMValueRef h = em_iadd(e, em_imul(e, hk, em_i64(e, G)), gi);
    geo.head0 = em_imul(e, em_iadd(e, em_imul(e, b, em_i64(e, T * H)), h), em_i64(e, D));
    grad_io io = {Q, DY, kg_ptr(k, a->in[4]), kg_ptr(k, a->in[5]), Kt, Vt};
    head_rows(k, &geo, scale, cap, need_ds, &io, P, S, U, red, blk);
    /* output row t: dq_t = scale sum_j dS[t,j] k_j, dk_t = scale sum_j dS[j,t] q_j, dv_t = sum_j P[j,t] dy_j */
    for (int which = 0; which < 3; which++)
        if (out_of[which])
            grad_rows(k, &geo, which, out_of[which], which == 2 ? P : S, which == 0 ? K : which == 1 ? Q : DY, which == 2 ? 1.0 : scale,
                      acc, tacc);
    em_for_end(e, &lg, em_i64(e, 1));
    em_for_end(e, &li, em_i64(e, 1));
    em_free(e, P);
    em_free(e, S);
    if (U) em_free(e, U);
    em_free(e, Kt);
    if (Vt) em_free(e, Vt);
    k->vec = vec_other;
}
