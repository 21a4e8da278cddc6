/* gemm.c — GEMM kernels: Y[M, N] = X[M, K] W[N, K]^T with a fused
 * elementwise epilogue. W is repacked once (pack kernel) into panels of NR
 * columns (f32, or bf16 for a frozen weight compiled with --weights-dtype
 * bf16: half the bytes streamed, widened in registers by a shift), so the
 * micro-kernel streams one contiguous panel while MR rows of
 * X are broadcast from L1/L2; MR x NR accumulators stay in vector registers
 * for the whole K loop, or for one block of at most KC of it when K is
 * longer (the partial sums wait in the work item's buffer): a row tile's
 * block of X then stays in L1 while the item's panels pass it from L2. A
 * work item is a block of at most MC rows by NC columns (dW's 2 NC), the
 * rows and panels shared out evenly. */
#include "kgen.h"

#include <assert.h>

static int64_t last_dim(const lrc_shape *s) { return s->ndim ? s->dim[s->ndim - 1] : 1; }

#define LRC_GEMM_MAX_PANELS 4 /* panels a micro-tile spans at most */

/* The packed form of matmul node mm's weight: the argument that is an
 * extra buffer derived from it (*store: its panels' storage). */
static LLVMValueRef packed_arg(kgen *k, int mm, lrc_wstore *store)
{
    int w = k->s->buffer_of[k->g->nodes[mm].in[1]];
    bool tr = k->g->nodes[mm].op != LRC_OP_MATMUL;
    for (int a = 0; a < k->k->n_args; a++)
        if (k->k->args[a] >= k->g->n_nodes && k->p->extra[k->k->args[a] - k->g->n_nodes].of_node == w &&
            k->p->extra[k->k->args[a] - k->g->n_nodes].transposed == tr) {
            *store = k->p->extra[k->k->args[a] - k->g->n_nodes].store;
            return k->argp[a];
        }
    return NULL;
}

/* Vector or element idx of a packed f32 or bf16 panel buffer (widened) */
static LLVMValueRef panel_load(em_t *e, LLVMValueRef P, lrc_wstore store, LLVMValueRef idx, int w)
{
    return store == LRC_WSTORE_BF16 ? em_load_bf16(e, P, idx, w) : em_load(e, P, idx, w);
}

static void panel_store(em_t *e, LLVMValueRef P, lrc_wstore store, LLVMValueRef idx, LLVMValueRef v, int w)
{
    if (store == LRC_WSTORE_BF16) em_store_bf16(e, P, idx, v, w);
    else em_store(e, P, idx, v, w);
}

/* A whole vector of a full panel, aligned (the panels are whole vectors
 * from a 64-byte aligned buffer): f32 panels are written past the caches.
 * In a training step every weight is packed before the first GEMM, twice
 * (168 MB each time for the 60m model), so little of it would still be
 * cached when read, and a store through the caches reads each line before
 * overwriting it: the step's packing took 28 ms instead of 48. (matmul_tn's
 * X, packed right before its GEMM, measured no slower to read.) */
static void panel_store_full(em_t *e, LLVMValueRef P, lrc_wstore store, LLVMValueRef idx, LLVMValueRef v, int w)
{
    if (store == LRC_WSTORE_F32) em_store_stream(e, P, idx, v, w);
    else panel_store(e, P, store, idx, v, w);
}

/* P + byte offset `at` as a pointer to t (a vector of w lanes when w > 1) */
static LLVMValueRef byte_ptr(em_t *e, LLVMValueRef P, LLVMValueRef at, LLVMTypeRef t, int w)
{
    LLVMTypeRef i8 = LLVMInt8TypeInContext(e->ctx);
    LLVMValueRef q = LLVMBuildGEP2(e->b, i8, LLVMBuildBitCast(e->b, P, LLVMPointerType(i8, 0), ""), &at, 1, "");
    return LLVMBuildBitCast(e->b, q, LLVMPointerType(w > 1 ? LLVMVectorType(t, (unsigned)w) : t, 0), "");
}

/* Columns j..j+w of q8 panel p (NR columns, K rows) at row kk, as f32:
 * the int8 values widened and multiplied by their block's f16 scales,
 * widened (vcvtph2ps). */
static LLVMValueRef q8_load(em_t *e, LLVMValueRef P, LLVMValueRef p, LLVMValueRef kk, int64_t j, int64_t NR, int64_t K, int w)
{
    int64_t nb = (K + LRC_Q8_BLOCK - 1) / LRC_Q8_BLOCK;
    LLVMValueRef base = em_imul(e, p, em_i64(e, lrc_q8_panel_bytes(NR, K)));
    LLVMValueRef blk = LLVMBuildLShr(e->b, kk, em_i64(e, 5), ""); /* LRC_Q8_BLOCK is 32 */
    LLVMValueRef sat = em_iadd(e, base, em_imul(e, em_iadd(e, em_imul(e, blk, em_i64(e, NR)), em_i64(e, j)), em_i64(e, 2)));
    LLVMValueRef qat = em_iadd(e, base, em_iadd(e, em_i64(e, nb * NR * 2 + j), em_imul(e, kk, em_i64(e, NR))));
    LLVMTypeRef half = LLVMHalfTypeInContext(e->ctx), ht = w > 1 ? LLVMVectorType(half, (unsigned)w) : half;
    LLVMValueRef sc = LLVMBuildLoad2(e->b, ht, byte_ptr(e, P, sat, half, w), "");
    LLVMSetAlignment(sc, 2);
    sc = LLVMBuildFPExt(e->b, sc, em_vty(e, w), "");
    LLVMTypeRef i8 = LLVMInt8TypeInContext(e->ctx);
    LLVMValueRef q = LLVMBuildLoad2(e->b, w > 1 ? LLVMVectorType(i8, (unsigned)w) : i8, byte_ptr(e, P, qat, i8, w), "");
    LLVMSetAlignment(q, 1);
    return em_mul(e, LLVMBuildSIToFP(e->b, q, em_vty(e, w), ""), sc);
}
_Static_assert(LRC_Q8_BLOCK == 32, "q8_load finds a row's block by a shift of 5");

/* One or two matmuls of the same X: with two, each tile column block holds
 * one vector of each (mm[0]'s then mm[1]'s), panels one vector wide. */
typedef struct {
    int n;          /* matmuls */
    int mm[2];      /* their nodes, in graph order */
    LLVMValueRef P[2];
    lrc_wstore store[2]; /* P[w]'s panels' storage */
    int nv;         /* vectors per row per matmul */
    int64_t NR;     /* output columns per panel */
    int np;         /* panels per tile: more than one when rows are few (decoding), so
                       that np x the accumulators' FMA chains run side by side */
    bool widened;   /* P[w] is an f32 copy of the current panel alone (panel index 0) */
    int mr;         /* rows per tile: the tiling's, or M when smaller (decoding) */
    bool a_trans;   /* X read transposed, X[r][i] at i * M + r (matmul_tn's dy^T): from its packed copy */
    bool head;      /* an LM head's loss in the kernel (fuse rule 8): the tiles store the
                       logits into the gradient's buffer, no epilogue */
} gemm_shape;

/* The tile's output values a[] (one per matmul) at row, col..col+w */
static void tile_store(kgen *k, const gemm_shape *gs, LLVMValueRef row, LLVMValueRef col, int64_t N, int w, const LLVMValueRef *a)
{
    if (gs->head) {
        em_store(k->e, kg_ptr(k, gs->mm[0]), em_iadd(k->e, em_imul(k->e, row, em_i64(k->e, N)), col), a[0], w);
        return;
    }
    kg_reset(k);
    for (int m = 0; m < gs->n; m++) k->memo[gs->mm[m]] = a[m];
    kg_store_outputs(k, row, col, N, w);
}

/* v[0..n) (n a power of two, each n lanes) transposed: log2 n stages, each
 * swapping blocks of b lanes between vectors b apart. */
static void transpose_square(em_t *e, LLVMValueRef *v, int n)
{
    for (int b = n / 2; b >= 1; b /= 2)
        for (int i = 0; i < n; i++) {
            if (i & b) continue;
            LLVMValueRef lo[64], hi[64];
            for (int l = 0; l < n; l++) { /* lane l of the pair: first vector's lanes 0..n-1, second's n..2n-1 */
                lo[l] = LLVMConstInt(e->i32, (unsigned)((l & b) ? n + l - b : l), 0);
                hi[l] = LLVMConstInt(e->i32, (unsigned)((l & b) ? n + l : l + b), 0);
            }
            LLVMValueRef a = v[i], c = v[i + b];
            v[i] = LLVMBuildShuffleVector(e->b, a, c, LLVMConstVector(lo, (unsigned)n), "");
            v[i + b] = LLVMBuildShuffleVector(e->b, a, c, LLVMConstVector(hi, (unsigned)n), "");
        }
}

/* Panels p in [p0, p1) that lie wholly inside the N columns, with vectors
 * of VEC: from [K, N] a row of the panel is NR contiguous floats; from
 * [N, K] a vector along k of each of the NR rows goes out one float per
 * packed row (the panel, K x NR, stays in L1/L2 for those stores). */
static void pack_full_panels(kgen *k, const lrc_extra_buf *xb, LLVMValueRef p0, LLVMValueRef p1)
{
    em_t *e = k->e;
    int VEC = k->p->tiling.vec;
    int64_t N = xb->cols, K = xb->inner, NR = xb->panel, KV = K / VEC * VEC;
    LLVMValueRef W = k->argp[0], P = k->argp[1];
    em_loop lp, lk, lj;
    LLVMValueRef p = em_for_begin(e, &lp, p0, p1);
    LLVMValueRef base = em_imul(e, p, em_i64(e, K * NR)), n0 = em_imul(e, p, em_i64(e, NR));
    if (xb->transposed) {
        LLVMValueRef kk = em_for_begin(e, &lk, em_i64(e, 0), em_i64(e, K));
        for (int64_t v = 0; v < NR; v += VEC)
            panel_store_full(e, P, xb->store, em_iadd(e, base, em_iadd(e, em_imul(e, kk, em_i64(e, NR)), em_i64(e, v))),
                             em_load(e, W, em_iadd(e, em_imul(e, kk, em_i64(e, N)), em_iadd(e, n0, em_i64(e, v))), VEC), VEC);
        em_for_end(e, &lk, em_i64(e, 1));
    } else if (NR % VEC == 0 && KV > 0) {
        /* VEC x VEC tiles: VEC rows' vectors along k, transposed in registers,
         * stored as VEC packed rows (scalar stores ran at half the speed) */
        LLVMValueRef kk = em_for_begin(e, &lk, em_i64(e, 0), em_i64(e, KV));
        for (int64_t v = 0; v < NR; v += VEC) {
            LLVMValueRef t[64];
            for (int i = 0; i < VEC; i++)
                t[i] = em_load(e, W, em_iadd(e, em_imul(e, em_iadd(e, n0, em_i64(e, v + i)), em_i64(e, K)), kk), VEC);
            transpose_square(e, t, VEC);
            for (int i = 0; i < VEC; i++)
                panel_store_full(e, P, xb->store, em_iadd(e, base, em_iadd(e, em_imul(e, em_iadd(e, kk, em_i64(e, i)), em_i64(e, NR)), em_i64(e, v))), t[i], VEC);
        }
        em_for_end(e, &lk, em_i64(e, VEC));
        if (KV < K) { /* the last K % VEC columns one float at a time */
            LLVMValueRef j = em_for_begin(e, &lj, em_i64(e, 0), em_i64(e, NR));
            LLVMValueRef row = em_imul(e, em_iadd(e, n0, j), em_i64(e, K)), out = em_iadd(e, base, j);
            kk = em_for_begin(e, &lk, em_i64(e, KV), em_i64(e, K));
            panel_store(e, P, xb->store, em_iadd(e, out, em_imul(e, kk, em_i64(e, NR))), em_load(e, W, em_iadd(e, row, kk), 1), 1);
            em_for_end(e, &lk, em_i64(e, 1));
            em_for_end(e, &lj, em_i64(e, 1));
        }
    } else {
        LLVMValueRef j = em_for_begin(e, &lj, em_i64(e, 0), em_i64(e, NR));
        LLVMValueRef row = em_imul(e, em_iadd(e, n0, j), em_i64(e, K)), out = em_iadd(e, base, j);
        if (KV > 0) {
            LLVMValueRef kk = em_for_begin(e, &lk, em_i64(e, 0), em_i64(e, KV));
            LLVMValueRef v = em_load(e, W, em_iadd(e, row, kk), VEC);
            for (int t = 0; t < VEC; t++)
                panel_store(e, P, xb->store, em_iadd(e, out, em_imul(e, em_iadd(e, kk, em_i64(e, t)), em_i64(e, NR))),
                         LLVMBuildExtractElement(e->b, v, LLVMConstInt(e->i32, (unsigned)t, 0), ""), 1);
            em_for_end(e, &lk, em_i64(e, VEC));
        }
        if (KV < K) {
            LLVMValueRef kk = em_for_begin(e, &lk, em_i64(e, KV), em_i64(e, K));
            panel_store(e, P, xb->store, em_iadd(e, out, em_imul(e, kk, em_i64(e, NR))), em_load(e, W, em_iadd(e, row, kk), 1), 1);
            em_for_end(e, &lk, em_i64(e, 1));
        }
        em_for_end(e, &lj, em_i64(e, 1));
    }
    em_for_end(e, &lp, em_i64(e, 1));
}

static LLVMValueRef imin(em_t *e, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, a, b, ""), a, b, "");
}

/* W's value (n, kk) as the GEMM sees it, 0 for columns n past N */
static LLVMValueRef panel_source(kgen *k, const lrc_extra_buf *xb, LLVMValueRef W, LLVMValueRef inside, LLVMValueRef n,
                                   LLVMValueRef kk)
{
    em_t *e = k->e;
    LLVMValueRef at = xb->transposed ? em_iadd(e, em_imul(e, kk, em_i64(e, xb->cols)), n) : em_iadd(e, em_imul(e, n, em_i64(e, xb->inner)), kk);
    LLVMValueRef src = LLVMBuildSelect(e->b, inside, at, kk, ""); /* rows past N read a valid element, then zero */
    return LLVMBuildSelect(e->b, inside, em_load(e, W, src, 1), em_f32(e, 0), "");
}

/* Q8 panels [begin, end), one column at a time (it runs once, when the
 * weights are bound): each block's scale the f16-rounded largest
 * magnitude / 127, its values round(x / scale) clamped to [-127, 127],
 * as lrc_tensor_quantize_q8 computes them; columns past N are zero. */
static void pack_q8(kgen *k, const lrc_extra_buf *xb)
{
    em_t *e = k->e;
    int64_t N = xb->cols, K = xb->inner, NR = xb->panel, nb = (K + LRC_Q8_BLOCK - 1) / LRC_Q8_BLOCK;
    LLVMValueRef W = k->argp[0], P = k->argp[1], amax = em_alloca(e, e->f32, "amax");
    LLVMTypeRef i8 = LLVMInt8TypeInContext(e->ctx), half = LLVMHalfTypeInContext(e->ctx);
    em_loop lp, lj, lb, lk;
    LLVMValueRef p = em_for_begin(e, &lp, e->begin, e->end);
    LLVMValueRef base = em_imul(e, p, em_i64(e, lrc_q8_panel_bytes(NR, K)));
    LLVMValueRef j = em_for_begin(e, &lj, em_i64(e, 0), em_i64(e, NR));
    LLVMValueRef n = em_iadd(e, em_imul(e, p, em_i64(e, NR)), j);
    LLVMValueRef inside = LLVMBuildICmp(e->b, LLVMIntSLT, n, em_i64(e, N), "");
    LLVMValueRef b = em_for_begin(e, &lb, em_i64(e, 0), em_i64(e, nb));
    LLVMValueRef k0 = em_imul(e, b, em_i64(e, LRC_Q8_BLOCK)), k1 = imin(e, em_iadd(e, k0, em_i64(e, LRC_Q8_BLOCK)), em_i64(e, K));
    LLVMBuildStore(e->b, em_f32(e, 0), amax);
    LLVMValueRef kk = em_for_begin(e, &lk, k0, k1);
    LLVMValueRef x = em_intr1(e, "fabs", panel_source(k, xb, W, inside, n, kk));
    LLVMBuildStore(e->b, em_intr2(e, "maxnum", LLVMBuildLoad2(e->b, e->f32, amax, ""), x), amax);
    em_for_end(e, &lk, em_i64(e, 1));
    LLVMValueRef d = LLVMBuildFDiv(e->b, LLVMBuildLoad2(e->b, e->f32, amax, ""), em_f32(e, 127.0), "");
    LLVMValueRef d16 = LLVMBuildFPTrunc(e->b, d, half, ""); /* an f16 scale, as the panel (and llama.cpp) stores it */
    d = LLVMBuildFPExt(e->b, d16, e->f32, "");
    LLVMValueRef inv = LLVMBuildSelect(e->b, LLVMBuildFCmp(e->b, LLVMRealONE, d, em_f32(e, 0), ""),
                                       LLVMBuildFDiv(e->b, em_f32(e, 1.0), d, ""), em_f32(e, 0), "");
    LLVMValueRef sat = em_iadd(e, base, em_imul(e, em_iadd(e, em_imul(e, b, em_i64(e, NR)), j), em_i64(e, 2)));
    LLVMSetAlignment(LLVMBuildStore(e->b, d16, byte_ptr(e, P, sat, half, 1)), 2);
    kk = em_for_begin(e, &lk, k0, k1);
    LLVMValueRef r = em_intr1(e, "round", em_mul(e, panel_source(k, xb, W, inside, n, kk), inv));
    r = em_intr2(e, "minnum", em_intr2(e, "maxnum", r, em_f32(e, -127.0)), em_f32(e, 127.0));
    LLVMValueRef qat = em_iadd(e, base, em_iadd(e, em_i64(e, nb * NR * 2), em_iadd(e, em_imul(e, kk, em_i64(e, NR)), j)));
    LLVMBuildStore(e->b, LLVMBuildFPToSI(e->b, r, i8, ""), byte_ptr(e, P, qat, i8, 1));
    em_for_end(e, &lk, em_i64(e, 1));
    em_for_end(e, &lb, em_i64(e, 1));
    em_for_end(e, &lj, em_i64(e, 1));
    em_for_end(e, &lp, em_i64(e, 1));
}

void kg_gemm_pack(kgen *k)
{
    em_t *e = k->e;
    const lrc_extra_buf *xb = &k->p->extra[k->k->args[1] - k->g->n_nodes];
    if (xb->store == LRC_WSTORE_Q8) {
        pack_q8(k, xb);
        return;
    }
    /* W [N, K] row-major, or transposed: the source is [K, N] (W^T); the
     * sizes as the GEMM sees the operand, whatever shape its buffer has */
    int64_t N = xb->cols, K = xb->inner, NR = xb->panel;
    LLVMValueRef W = k->argp[0], P = k->argp[1], full = em_i64(e, N / NR);
    LLVMValueRef mid = imin(e, e->end, full);
    pack_full_panels(k, xb, e->begin, mid);
    /* the last, partial panel: element by element, zeros past N */
    em_loop lp, lk, lj;
    LLVMValueRef p = em_for_begin(e, &lp, LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSGT, e->begin, full, ""), e->begin, full, ""), e->end);
    LLVMValueRef kk = em_for_begin(e, &lk, em_i64(e, 0), em_i64(e, K));
    LLVMValueRef dst = em_imul(e, em_iadd(e, em_imul(e, p, em_i64(e, K)), kk), em_i64(e, NR));
    LLVMValueRef j = em_for_begin(e, &lj, em_i64(e, 0), em_i64(e, NR));
    LLVMValueRef n = em_iadd(e, em_imul(e, p, em_i64(e, NR)), j);
    LLVMValueRef inside = LLVMBuildICmp(e->b, LLVMIntSLT, n, em_i64(e, N), "");
    panel_store(e, P, xb->store, em_iadd(e, dst, j), panel_source(k, xb, W, inside, n, kk), 1);
    em_for_end(e, &lj, em_i64(e, 1));
    em_for_end(e, &lk, em_i64(e, 1));
    em_for_end(e, &lp, em_i64(e, 1));
    em_store_fence(e); /* the streamed panels visible before the pool reports the kernel done */
}

/* One MR x NR tile at rows i0.., panel columns p0..; `edge` tiles clamp rows
 * to M - 1 when loading and store only rows < m1 and columns < n1. */
/* The inner range one pass of a tile sums: all of K, or (sums longer than
 * the tiling's kc) one block of it, the partial sums carried between blocks
 * in the work item's buffer `part`, a tile's accumulators at `at` there. */
typedef struct {
    LLVMValueRef k0, k1;      /* the block's inner range */
    LLVMValueRef first, last; /* i1: the first block (sums start at 0), the last (the epilogue runs) */
    LLVMValueRef part, at;    /* NULL part: one block, all of K */
    LLVMValueRef a_at;        /* matmul_tn's X, packed: the tile's row r at kk at a_at + kk * mr + r */
} k_block;

/* if (cond) { the builder in *then } else { in *other }, both joining *done */
static void branch3(em_t *e, LLVMValueRef cond, LLVMBasicBlockRef *then, LLVMBasicBlockRef *other, LLVMBasicBlockRef *done)
{
    *then = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "kb_then");
    *other = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "kb_else");
    *done = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "kb_done");
    LLVMBuildCondBr(e->b, cond, *then, *other);
    LLVMPositionBuilderAtEnd(e->b, *then);
}

/* The n accumulators start at 0, or in a later block at their partial sums */
static void tile_sums_begin(em_t *e, const k_block *kb, LLVMValueRef *acc, int n, int VEC)
{
    if (!kb->part) {
        for (int i = 0; i < n; i++) LLVMBuildStore(e->b, em_fw(e, 0, VEC), acc[i]);
        return;
    }
    LLVMBasicBlockRef zero, carry, done;
    branch3(e, kb->first, &zero, &carry, &done);
    for (int i = 0; i < n; i++) LLVMBuildStore(e->b, em_fw(e, 0, VEC), acc[i]);
    LLVMBuildBr(e->b, done);
    LLVMPositionBuilderAtEnd(e->b, carry);
    for (int i = 0; i < n; i++) LLVMBuildStore(e->b, em_load(e, kb->part, em_iadd(e, kb->at, em_i64(e, (int64_t)i * VEC)), VEC), acc[i]);
    LLVMBuildBr(e->b, done);
    LLVMPositionBuilderAtEnd(e->b, done);
}

/* The epilogue's operands of the tile at row i0, column p0 (its inputs
 * and outputs the size of the product) asked into L2 before the sums of
 * the tile's last block run, so that the epilogue does not wait for memory:
 * they are touched once, a line a vector per row, which no hardware
 * prefetcher foresees (the 60m step's GEMMs with epilogues ran at 185-250
 * GFLOP/s against 270-280 without; with this, 415 ms against 426, medians
 * of 6 alternated runs). */
static void tile_prefetch(kgen *k, const gemm_shape *gs, LLVMValueRef i0, LLVMValueRef p0, int64_t M, int64_t N)
{
    em_t *e = k->e;
    int ops[16], n_ops = 0, n_in = 0;
    for (int j = 0; j < k->gr->n_nodes && n_ops < 8; j++) {
        const lrc_node *n = &k->g->nodes[k->gr->nodes[j]];
        if (lrc_is_gemm_op(n->op)) continue;
        for (int q = 0; q < n->n_in && n_ops < 8; q++) {
            int id = n->in[q];
            bool seen = false;
            for (int o = 0; o < n_ops; o++) seen = seen || ops[o] == id;
            if (!seen && !k->member[id] && lrc_shape_numel(&k->g->nodes[id].shape) == M * N) ops[n_ops++] = id;
        }
    }
    n_in = n_ops;
    for (int j = 0; j < k->gr->n_outputs && n_ops < 16; j++) ops[n_ops++] = k->gr->outputs[j];
    for (int r = 0; r < gs->mr; r++) {
        LLVMValueRef at = em_imul(e, imin(e, em_iadd(e, i0, em_i64(e, r)), em_i64(e, M - 1)), em_i64(e, N));
        for (int64_t c = 0; c < (int64_t)gs->np * gs->NR; c += 16) /* a line: 16 floats */
            for (int o = 0; o < n_ops; o++)
                em_prefetch(e, kg_ptr(k, ops[o]), em_iadd(e, at, em_iadd(e, p0, em_i64(e, c))), o >= n_in, 2);
    }
}

static void micro_tile(kgen *k, LLVMValueRef X, const gemm_shape *gs, const k_block *kb, LLVMValueRef i0, LLVMValueRef p0,
                       LLVMValueRef m1, LLVMValueRef n1, int64_t M, int64_t N, int64_t K, LLVMValueRef *acc, bool edge)
{
    em_t *e = k->e;
    const lrc_gemm_tiling *t = &k->p->tiling;
    int MR = gs->mr, VEC = t->vec, NW = gs->n, NV = gs->nv * NW, NP = gs->np, NT = NV * NP; /* NT accumulator vectors per row */
    int64_t NR = gs->NR;
    LLVMTypeRef vt = em_vty(e, VEC);
    LLVMValueRef rowoff[32];
    for (int r = 0; r < MR; r++) {
        LLVMValueRef row = em_iadd(e, i0, em_i64(e, r));
        if (edge) row = imin(e, row, em_i64(e, M - 1));
        rowoff[r] = gs->a_trans ? em_iadd(e, kb->a_at, em_i64(e, r)) : em_imul(e, row, em_i64(e, K));
    }
    tile_sums_begin(e, kb, acc, MR * NT, VEC);
    if (!gs->head && k->gr->n_nodes > gs->n) {
        em_if last;
        if (kb->part) em_if_begin(e, &last, kb->last);
        tile_prefetch(k, gs, i0, p0, M, N);
        if (kb->part) em_if_end(e, &last);
    }
    /* the tile's panels; an edge tile's past the last read the last (their columns are not stored) */
    LLVMValueRef pidx[LRC_GEMM_MAX_PANELS], bp[LRC_GEMM_MAX_PANELS];
    for (int j = 0; j < NP; j++) {
        pidx[j] = gs->widened ? em_i64(e, 0) : em_iadd(e, LLVMBuildSDiv(e->b, p0, em_i64(e, NR), ""), em_i64(e, j));
        if (edge) pidx[j] = imin(e, pidx[j], em_i64(e, (N + NR - 1) / NR - 1));
        bp[j] = em_imul(e, pidx[j], em_i64(e, K * NR));
    }
    em_loop lk;
    LLVMValueRef kk = em_for_begin(e, &lk, kb->k0, kb->k1);
    LLVMValueRef bv[4 * LRC_GEMM_MAX_PANELS];
    for (int j = 0; j < NP; j++) {
        LLVMValueRef boff = em_iadd(e, bp[j], em_imul(e, kk, em_i64(e, NR)));
        for (int v = 0; v < NV; v++) /* weight v / nv, vector v % nv of panel j */
            bv[j * NV + v] = gs->store[v / gs->nv] == LRC_WSTORE_Q8
                                 ? q8_load(e, gs->P[v / gs->nv], pidx[j], kk, (v % gs->nv) * VEC, NR, K, VEC)
                                 : panel_load(e, gs->P[v / gs->nv], gs->store[v / gs->nv], em_iadd(e, boff, em_i64(e, (v % gs->nv) * VEC)), VEC);
    }
    for (int r = 0; r < MR; r++) {
        LLVMValueRef ai = gs->a_trans ? em_iadd(e, rowoff[r], em_imul(e, kk, em_i64(e, MR))) : em_iadd(e, rowoff[r], kk);
        LLVMValueRef a = em_splat(e, em_load(e, X, ai, 1), VEC);
        for (int v = 0; v < NT; v++) {
            LLVMValueRef *slot = &acc[r * NT + v];
            LLVMBuildStore(e->b, em_fma(e, a, bv[v], LLVMBuildLoad2(e->b, vt, *slot, "")), *slot);
        }
    }
    em_for_end(e, &lk, em_i64(e, 1));

    LLVMBasicBlockRef ep_last = NULL, ep_carry = NULL, ep_done = NULL;
    if (kb->part) { /* not the last block: the partial sums kept, no epilogue */
        branch3(e, kb->last, &ep_last, &ep_carry, &ep_done);
        LLVMPositionBuilderAtEnd(e->b, ep_carry);
        for (int i = 0; i < MR * NT; i++)
            em_store(e, kb->part, em_iadd(e, kb->at, em_i64(e, (int64_t)i * VEC)), LLVMBuildLoad2(e->b, vt, acc[i], ""), VEC);
        LLVMBuildBr(e->b, ep_done);
        LLVMPositionBuilderAtEnd(e->b, ep_last);
    }
    for (int r = 0; r < MR; r++) {
        LLVMValueRef row = em_iadd(e, i0, em_i64(e, r));
        em_if rok;
        if (edge) em_if_begin(e, &rok, LLVMBuildICmp(e->b, LLVMIntSLT, row, m1, ""));
        for (int jv = 0; jv < NP * gs->nv; jv++) { /* output column vectors of the tile: panel j, vector v */
            int j = jv / gs->nv, v = jv % gs->nv;
            LLVMValueRef col = em_iadd(e, p0, em_i64(e, j * NR + v * VEC));
            LLVMValueRef a[2];
            for (int w = 0; w < NW; w++) a[w] = LLVMBuildLoad2(e->b, vt, acc[r * NT + j * NV + w * gs->nv + v], "");
            if (!edge) {
                tile_store(k, gs, row, col, N, VEC, a);
                continue;
            }
            LLVMValueRef colend = em_iadd(e, col, em_i64(e, VEC));
            LLVMValueRef is_full = LLVMBuildICmp(e->b, LLVMIntSLE, colend, n1, "");
            LLVMBasicBlockRef then_full = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "fullv");
            LLVMBasicBlockRef else_part = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "partv");
            LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "donev");
            LLVMBuildCondBr(e->b, is_full, then_full, else_part);
            LLVMPositionBuilderAtEnd(e->b, then_full);
            tile_store(k, gs, row, col, N, VEC, a);
            LLVMBuildBr(e->b, done);
            LLVMPositionBuilderAtEnd(e->b, else_part);
            em_loop lj;
            LLVMValueRef c = em_for_begin(e, &lj, col, imin(e, colend, n1));
            LLVMValueRef lane = LLVMBuildTrunc(e->b, LLVMBuildSub(e->b, c, col, ""), e->i32, ""), one[2];
            for (int w = 0; w < NW; w++) one[w] = LLVMBuildExtractElement(e->b, a[w], lane, "");
            tile_store(k, gs, row, c, N, 1, one);
            em_for_end(e, &lj, em_i64(e, 1));
            LLVMBuildBr(e->b, done);
            LLVMPositionBuilderAtEnd(e->b, done);
        }
        if (edge) em_if_end(e, &rok);
    }
    if (kb->part) {
        LLVMBuildBr(e->b, ep_done);
        LLVMPositionBuilderAtEnd(e->b, ep_done);
    }
}

/* The panels of p0 (each weight's) widened to f32 in W[w]: K x NR floats */
static void widen_panel(em_t *e, const gemm_shape *gs, const LLVMValueRef *W, LLVMValueRef p0, int64_t K, int VEC)
{
    int64_t NR = gs->NR;
    LLVMValueRef p = LLVMBuildSDiv(e->b, p0, em_i64(e, NR), "");
    em_loop lk;
    LLVMValueRef kk = em_for_begin(e, &lk, em_i64(e, 0), em_i64(e, K));
    for (int w = 0; w < gs->n; w++)
        for (int64_t v = 0; v < NR; v += VEC) {
            LLVMValueRef x = gs->store[w] == LRC_WSTORE_Q8
                                 ? q8_load(e, gs->P[w], p, kk, v, NR, K, VEC)
                                 : panel_load(e, gs->P[w], gs->store[w], em_iadd(e, em_imul(e, em_iadd(e, em_imul(e, p, em_i64(e, K)), kk), em_i64(e, NR)), em_i64(e, v)), VEC);
            em_store(e, W[w], em_iadd(e, em_imul(e, kk, em_i64(e, NR)), em_i64(e, v)), x, VEC);
        }
    em_for_end(e, &lk, em_i64(e, 1));
}

/* matmul_tn's X (dy, [K, M]: row r of the product at X[kk * M + r]) for
 * the item's rows [m0, m1) and block [k0, k1), as row tiles of mr: tile t's
 * row r at kk at A[t * ts + (kk - k0) * mr + r], rows past M repeating
 * row M - 1. One vector of VEC >= mr rows per kk, stored in ascending kk so
 * that each overwrites the last one's VEC - mr excess; a tile's stream ts
 * has VEC floats of slack for its last. Row kk of dy is read whole (the
 * item's rows of it, contiguous) before the next: tile by tile, each read
 * one line from each of kc rows M floats apart, a page each for an LM
 * head's dW (4096 x 512 x 1024 on one thread: 16.1 ms against 18.0). */
static void pack_a_block(em_t *e, LLVMValueRef X, LLVMValueRef A, const k_block *kb, LLVMValueRef m0, LLVMValueRef m1,
                         int64_t M, int mr, int64_t ts, int VEC)
{
    em_loop lt, lk, lr;
    LLVMValueRef n_live = LLVMBuildSDiv(e->b, em_iadd(e, LLVMBuildSub(e->b, m1, m0, ""), em_i64(e, mr - 1)), em_i64(e, mr), "");
    LLVMValueRef kk = em_for_begin(e, &lk, kb->k0, kb->k1);
    LLVMValueRef src = em_iadd(e, em_imul(e, kk, em_i64(e, M)), m0);
    LLVMValueRef dst = em_imul(e, LLVMBuildSub(e->b, kk, kb->k0, ""), em_i64(e, mr));
    LLVMValueRef t = em_for_begin(e, &lt, em_i64(e, 0), n_live);
    LLVMValueRef r0 = em_iadd(e, m0, em_imul(e, t, em_i64(e, mr)));
    LLVMValueRef at = em_iadd(e, dst, em_imul(e, t, em_i64(e, ts)));
    LLVMBasicBlockRef vec, one, done;
    branch3(e, LLVMBuildICmp(e->b, LLVMIntSLE, em_iadd(e, r0, em_i64(e, VEC)), em_i64(e, M), ""), &vec, &one, &done);
    em_store(e, A, at, em_load(e, X, em_iadd(e, src, em_imul(e, t, em_i64(e, mr))), VEC), VEC);
    LLVMBuildBr(e->b, done);
    LLVMPositionBuilderAtEnd(e->b, one);
    LLVMValueRef r = em_for_begin(e, &lr, em_i64(e, 0), em_i64(e, mr));
    LLVMValueRef from = em_iadd(e, em_imul(e, kk, em_i64(e, M)), imin(e, em_iadd(e, r0, r), em_i64(e, M - 1)));
    em_store(e, A, em_iadd(e, at, r), em_load(e, X, from, 1), 1);
    em_for_end(e, &lr, em_i64(e, 1));
    LLVMBuildBr(e->b, done);
    LLVMPositionBuilderAtEnd(e->b, done);
    em_for_end(e, &lt, em_i64(e, 1));
    em_for_end(e, &lk, em_i64(e, 1));
}

/* An LM head's loss (fuse rule 8): the cross_entropy and its gradient of
 * the group, over the logits the tiles wrote into the gradient's buffer. */
typedef struct {
    int loss, grad;          /* the nodes */
    LLVMValueRef Y, sc, raw; /* labels (i32), the statistics' scratch as doubles, and as given */
    LLVMValueRef used;       /* the labels that count, of all rows */
} head_loss;

static void head_loss_begin(kgen *k, head_loss *h, int64_t rows)
{
    em_t *e = k->e;
    for (int j = 0; j < k->gr->n_nodes; j++) {
        int id = k->gr->nodes[j];
        if (k->g->nodes[id].op == LRC_OP_CROSS_ENTROPY) h->loss = id;
        if (k->g->nodes[id].op == LRC_OP_CROSS_ENTROPY_GRAD) h->grad = id;
    }
    h->raw = kg_scratch(k);
    assert(h->raw); /* program.c gives the kernel the loss's scratch */
    h->sc = LLVMBuildBitCast(e->b, h->raw, LLVMPointerType(e->f64, 0), "");
    h->Y = LLVMBuildBitCast(e->b, kg_ptr(k, k->g->nodes[h->loss].in[1]), e->i32p, "");
    h->used = kg_ce_used(k, h->Y, rows);
}

/* Rows [m0, m1) of the item, their logits all written: each row's
 * statistics (and logit at its label), then its gradient over the logits */
static void head_loss_rows(kgen *k, const head_loss *h, LLVMValueRef m0, LLVMValueRef m1, int64_t V)
{
    em_t *e = k->e;
    LLVMValueRef G = kg_ptr(k, h->grad);
    em_loop lr;
    LLVMValueRef r = em_for_begin(e, &lr, m0, m1);
    kg_ce_row_stats(k, G, h->Y, h->sc, r, V, G);
    kg_ce_grad_row(k, G, G, h->Y, h->raw, r, V, h->used);
    em_for_end(e, &lr, em_i64(e, 1));
}

/* Where block b of n begins, of `units` units of `unit` (the last one cut
 * at `len`): block b holds units [b * units / n, (b + 1) * units / n). */
static LLVMValueRef split_at(em_t *e, LLVMValueRef b, int64_t n, int64_t units, int64_t unit, int64_t len)
{
    LLVMValueRef u = LLVMBuildUDiv(e->b, em_imul(e, b, em_i64(e, units)), em_i64(e, n), "");
    return imin(e, em_imul(e, u, em_i64(e, unit)), em_i64(e, len));
}

/* The tile k's GEMM group uses for M rows: its matmuls and
 * their panels, rows and panels per tile. */
static gemm_shape tile_shape(kgen *k, int64_t M)
{
    const lrc_node *a = &k->g->nodes[k->gr->anchor];
    const lrc_gemm_tiling *t = &k->p->tiling;
    gemm_shape gs = {0};
    gs.a_trans = a->op == LRC_OP_MATMUL_TN;
    gs.head = lrc_group_is_loss_head(k->g, k->gr);
    for (int j = 0; j < k->gr->n_nodes && gs.n < 2; j++)
        if (lrc_is_gemm_op(k->g->nodes[k->gr->nodes[j]].op)) gs.mm[gs.n++] = k->gr->nodes[j];
    for (int w = 0; w < gs.n; w++) gs.P[w] = packed_arg(k, gs.mm[w], &gs.store[w]);
    gs.nv = gs.n == 2 ? 1 : t->nv;
    gs.NR = t->vec * gs.nv;
    /* fewer rows than a tile (one token a step): tiles of exactly M rows,
     * instead of tiles that compute rows past M and drop them */
    gs.mr = M < t->mr ? (int)M : t->mr;
    /* a few rows (decoding's one): each accumulator's FMAs wait on the one
     * before, so a tile of one panel runs at a quarter of the FMA rate;
     * four panels keep four times the chains in flight */
    gs.np = 1;
    while (gs.np < LRC_GEMM_MAX_PANELS && gs.mr * gs.nv * gs.n * gs.np * 2 <= t->mr * t->nv && t->nc % (gs.NR * gs.np * 2) == 0)
        gs.np *= 2; /* within the registers a full tile's accumulators take */
    return gs;
}

void kg_gemm(kgen *k)
{
    em_t *e = k->e;
    const lrc_node *a = &k->g->nodes[k->gr->anchor];
    const lrc_gemm_tiling *t = &k->p->tiling;
    int64_t N = last_dim(&a->shape), M = lrc_shape_numel(&a->shape) / N;
    int64_t cols, K;
    lrc_gemm_dims(k->g, a, &cols, &K);
    (void)cols; /* the output's last axis, as N below */
    gemm_shape gs = tile_shape(k, M);
    int64_t mc = gs.head ? t->mc_head : lrc_gemm_item_rows(t, gs.a_trans, M, N, K);
    int64_t nc = lrc_gemm_item_cols(t, gs.a_trans), NR = gs.NR, NRT = NR * gs.np, n_nb = (N + nc - 1) / nc;
    /* Many rows over q8 panels: each panel widened to f32 once per work
     * item, into a copy that stays in L2 while every row tile of the item
     * reads it, instead of once per row tile in registers (the converts and
     * scalings take FMA ports): a 256-token prompt of the 60m model ran 6%
     * faster. bf16's widening is one shift, cheaper than the copy's loads
     * and stores (4% slower that way). The values, and so the sums, are the
     * same either way. */
    gemm_shape gw = gs;
    bool widen = gs.np == 1 && M >= 2 * t->mr && K * NR * 4 * gs.n <= ((int64_t)256 << 10);
    for (int w = 0; w < gs.n; w++) widen = widen && gs.store[w] == LRC_WSTORE_Q8;
    if (widen) {
        gw.widened = true;
        for (int w = 0; w < gs.n; w++) {
            gw.store[w] = LRC_WSTORE_F32;
            gw.P[w] = LLVMBuildBitCast(e->b, em_alloca(e, LLVMArrayType(e->f32, (unsigned)(K * NR)), "widened"),
                                       LLVMPointerType(e->f32, 0), "");
        }
    }
    LLVMValueRef X = kg_ptr(k, a->in[0]);
    LLVMValueRef acc[256];
    for (int i = 0; i < t->mr * t->nv; i++) acc[i] = em_alloca(e, em_vty(e, t->vec), "acc");
    em_loop li, lp, lm;
    head_loss hl = {0};
    if (gs.head) head_loss_begin(k, &hl, M);
    LLVMValueRef item = em_for_begin(e, &li, e->begin, e->end);
    /* Consecutive items (one thread's chunk) share a block of X rows, so
     * each thread sweeps the same mix of full and partial column blocks (an
     * even split). A weight too large for the caches (an LM head) is swept
     * the other way instead: each block of its panels read from memory once. */
    int64_t n_mb = (M + mc - 1) / mc;
    bool w_major = lrc_gemm_panels_past_caches(N, K);
    LLVMValueRef mb = w_major ? LLVMBuildSRem(e->b, item, em_i64(e, n_mb), "") : LLVMBuildSDiv(e->b, item, em_i64(e, n_nb), "");
    LLVMValueRef nb = w_major ? LLVMBuildSDiv(e->b, item, em_i64(e, n_mb), "") : LLVMBuildSRem(e->b, item, em_i64(e, n_nb), "");
    if (gs.head) { /* an item is a block of rows: its column blocks in turn, then its rows' loss */
        mb = item;
        n_mb = lrc_loss_head_blocks(M, t->mc_head);
    }
    /* The items split the row tiles, and the panels, as evenly as they go
     * (a block at most mc rows, nc columns): fixed blocks of mc left a short
     * last one, and with few items a thread idle at the end (M = 512: one
     * thread had 24 row tiles, the other 19). */
    LLVMValueRef m0 = split_at(e, mb, n_mb, (M + gs.mr - 1) / gs.mr, gs.mr, M), m1 = split_at(e, em_iadd(e, mb, em_i64(e, 1)), n_mb, (M + gs.mr - 1) / gs.mr, gs.mr, M);
    em_loop lnb;
    if (gs.head) nb = em_for_begin(e, &lnb, em_i64(e, 0), em_i64(e, n_nb));
    LLVMValueRef n0 = split_at(e, nb, n_nb, (N + NRT - 1) / NRT, NRT, N), n1 = split_at(e, em_iadd(e, nb, em_i64(e, 1)), n_nb, (N + NRT - 1) / NRT, NRT, N);
    /* Sums longer than kc run in blocks of at most kc (as even as they
     * come), block by block over the whole item: a row tile's block of X
     * stays in L1 while the item's panels pass, and the item's panels' block
     * in L2 while its row tiles read it. The sums' order, and so their values, are the
     * blocked form's as the unblocked's. (widen's copy is of a whole panel:
     * a q8 weight's GEMM runs unblocked.) */
    int64_t n_kb = widen || K <= t->kc ? 1 : (K + t->kc - 1) / t->kc, KB = (K + n_kb - 1) / n_kb;
    k_block kb = {.k0 = em_i64(e, 0), .k1 = em_i64(e, K)};
    em_loop lkb;
    if (n_kb > 1) {
        /* each tile's accumulators in turn: MC x NC sums per matmul */
        kb.part = LLVMBuildBitCast(e->b, em_alloca(e, LLVMArrayType(e->f32, (unsigned)(mc * nc * gs.n)), "partial"),
                                   LLVMPointerType(e->f32, 0), "");
        LLVMValueRef b = em_for_begin(e, &lkb, em_i64(e, 0), em_i64(e, n_kb));
        kb.k0 = em_imul(e, b, em_i64(e, KB));
        kb.k1 = imin(e, em_iadd(e, kb.k0, em_i64(e, KB)), em_i64(e, K));
        kb.first = LLVMBuildICmp(e->b, LLVMIntEQ, b, em_i64(e, 0), "");
        kb.last = LLVMBuildICmp(e->b, LLVMIntEQ, b, em_i64(e, n_kb - 1), "");
    }
    /* matmul_tn's X, dy^T: the item's rows of the block copied tile by tile
     * into one stream (dW's GEMMs of the 60m step took 347 ms instead of
     * 374-413 ms: in dy a tile's rows at successive kk lie M floats apart) */
    assert(t->vec >= t->mr); /* pack_a_block's one vector per kk; micro_tile reads a transposed X only so */
    int a_tiles = (int)((mc + gs.mr - 1) / gs.mr);
    int64_t a_ts = KB * gs.mr + t->vec; /* a tile's stream, and the slack its last vector store overruns */
    LLVMValueRef A = NULL;
    if (gs.a_trans) {
        A = LLVMBuildBitCast(e->b, em_alloca(e, LLVMArrayType(e->f32, (unsigned)(a_tiles * a_ts)), "a_packed"),
                             LLVMPointerType(e->f32, 0), "");
        pack_a_block(e, X, A, &kb, m0, m1, M, gs.mr, a_ts, t->vec);
    }
    /* Row tiles outside, panels inside: the tile's rows of X stay in L1
     * while the panels stream from L2. The other way round the panel stays
     * in L1 and the rows stream, but rows K floats apart (K = 512: 2 KB)
     * fall in two of L1's sets, which the panel's lines fill too (the 60m
     * step's GEMMs 1039 against 1085 ms, medians of 8 alternated runs).
     * A q8 panel widened per item is the exception: it is read per tile. */
    LLVMValueRef p0, i0;
    if (widen) {
        p0 = em_for_begin(e, &lp, n0, n1);
        widen_panel(e, &gs, gw.P, p0, K, t->vec);
        i0 = em_for_begin(e, &lm, m0, m1);
    } else {
        i0 = em_for_begin(e, &lm, m0, m1);
        p0 = em_for_begin(e, &lp, n0, n1);
    }
    if (n_kb > 1) { /* tile (i0 - m0) / mr, (p0 - n0) / NRT of the item's, MR x NRT x matmuls sums each */
        LLVMValueRef ti = em_iadd(e, em_imul(e, LLVMBuildSDiv(e->b, LLVMBuildSub(e->b, i0, m0, ""), em_i64(e, gs.mr), ""), em_i64(e, nc / NRT)),
                                  LLVMBuildSDiv(e->b, LLVMBuildSub(e->b, p0, n0, ""), em_i64(e, NRT), ""));
        kb.at = em_imul(e, ti, em_i64(e, (int64_t)gs.mr * NRT * gs.n));
    }
    if (gs.a_trans)
        kb.a_at = LLVMBuildSub(e->b, em_imul(e, LLVMBuildSDiv(e->b, LLVMBuildSub(e->b, i0, m0, ""), em_i64(e, gs.mr), ""), em_i64(e, a_ts)),
                               em_imul(e, kb.k0, em_i64(e, gs.mr)), "");
    LLVMValueRef full = LLVMBuildAnd(e->b,
                                     LLVMBuildICmp(e->b, LLVMIntSLE, em_iadd(e, i0, em_i64(e, gs.mr)), m1, ""),
                                     LLVMBuildICmp(e->b, LLVMIntSLE, em_iadd(e, p0, em_i64(e, NRT)), n1, ""), "");
    LLVMBasicBlockRef bf = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "tile_full");
    LLVMBasicBlockRef be = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "tile_edge");
    LLVMBasicBlockRef bd = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "tile_done");
    LLVMBuildCondBr(e->b, full, bf, be);
    LLVMPositionBuilderAtEnd(e->b, bf);
    micro_tile(k, gs.a_trans ? A : X, widen ? &gw : &gs, &kb, i0, p0, m1, n1, M, N, K, acc, false);
    LLVMBuildBr(e->b, bd);
    LLVMPositionBuilderAtEnd(e->b, be);
    micro_tile(k, gs.a_trans ? A : X, widen ? &gw : &gs, &kb, i0, p0, m1, n1, M, N, K, acc, true);
    LLVMBuildBr(e->b, bd);
    LLVMPositionBuilderAtEnd(e->b, bd);
    if (widen) {
        em_for_end(e, &lm, em_i64(e, gs.mr));
        em_for_end(e, &lp, em_i64(e, NRT));
    } else {
        em_for_end(e, &lp, em_i64(e, NRT));
        em_for_end(e, &lm, em_i64(e, gs.mr));
    }
    if (n_kb > 1) em_for_end(e, &lkb, em_i64(e, 1));
    if (gs.head) {
        em_for_end(e, &lnb, em_i64(e, 1));
        head_loss_rows(k, &hl, m0, m1, N);
    }
    em_for_end(e, &li, em_i64(e, 1));
    if (gs.head) kg_ce_finish(k, hl.sc, M, LLVMBuildSub(e->b, e->end, e->begin, ""), lrc_loss_head_blocks(M, t->mc_head), kg_ptr(k, hl.loss));
}
