/* render_attention_grad.c — the gradient of attention for CUDA: a block per
 * (batch, key-value head) and its G query heads, every product of the
 * backward through BT x BT tiles in shared memory.
 *
 *   1. for each query row, rowsum(dP o P) into scratch: dy . y (y = sum_j
 *      P v_j, the forward's output), a warp a row, where y is stored f32;
 *      where it is bf16, whose rounding would move every dS of the row,
 *      from the tiles' products as the phases below form them. The
 *      probabilities come from the forward's log-sum-exp (attention_lse,
 *      written by the forward's kernel): P = exp(S - lse), with no running
 *      max and sum to find again;
 *   2. dq: for each query tile, the key tiles again: dS = P o (dP - rd)
 *      (times the soft-cap's 1 - tanh^2), dq += dS k;
 *   3. dk, dv: for each key tile, the query tiles that see it, over the G
 *      heads: dv += P^T dy, dk += dS^T q.
 *
 * Each product entry is one thread's dot product over D from shared memory;
 * a thread's entries share a column (and its accumulated elements a column
 * of dq, dk, dv where D divides the block), so the operand they share is
 * read once for all of them. A warp reads one broadcast row and distinct
 * ones (rows padded by a float, so the distinct ones fall in distinct
 * banks); each accumulated element is one thread's register. Sums run in a fixed order (no
 * atomics): a run repeats bit for bit. The block's tiles and the phases'
 * __syncthreads keep the work of one (batch, head) inside one block, so
 * phase 1's sums need no second launch. */
#include "cugen.h"

#include <stdio.h>

#define THREADS 256
#define SMEM_BUDGET (46 * 1024) /* of the 48 KB a block may have without an opt-in */

/* the largest tile (32, 16, ... rows) whose six arrays fit the budget; 0 when none does */
static int tile_rows(int64_t D)
{
    for (int bt = 32; bt >= 2; bt /= 2)
        if ((4 * (int64_t)bt * (D + 1) + 2 * (int64_t)bt * (bt + 1)) * 4 <= SMEM_BUDGET) return bt;
    return 0;
}

/* The kernel's body: its shape and arguments are the macros
 * cu_render_attention_grad defines before it. */
static const char BODY[] =
    "    __shared__ float Qs[BT][D_ + 1], Ks[BT][D_ + 1], Vs[BT][D_ + 1], Os[BT][D_ + 1], Ss[BT][BT + 1], Ps[BT][BT + 1];\n"
    "    const long b = blockIdx.x / HKV, hk = blockIdx.x % HKV;\n"
    "    const int tid = threadIdx.x;\n"
    "    float *rdot = scratch + (long)blockIdx.x * G_ * T_;\n"
    "#define QROW(h, t) (((b * T_ + (t)) * H_ + (h)) * D_)\n"
    "#define KROW(t) (((b * T_ + (t)) * HKV + hk) * D_)\n"
    "#define VALID(t, j) ((t) < T_ && (j) < T_ && (!CAUSAL || (j) <= (t)) && (W_ == 0 || (j) > (t) - W_))\n"
    "#define LOAD(S, src, row, t0) for (int e = tid; e < BT * D_; e += NTHR) { const int r = e / D_, i = e % D_; \\\n"
    "        const long t = (t0) + r; S[r][i] = t < T_ ? ld(src, row(t) + i) : 0.f; }\n"
    "#define QR(t) QROW(h, t)\n"
    /* a query tile (t0's rows of q and dy) and a key tile (j0's of k and v), each after the block is done with the last */
    "#define LOAD_QUERY_TILE __syncthreads(); LOAD(Qs, QA, QR, t0) LOAD(Os, DYA, QR, t0)\n"
    "#define LOAD_KEY_TILE __syncthreads(); LOAD(Ks, KA, KROW, j0) LOAD(Vs, VA, KROW, j0)\n"
    /* the key tiles query tile qi sees, and the query tiles that see key tile kt */
    "#define KT_FIRST(qi) (W_ > 0 ? max(0L, (long)(qi) * BT - W_ + 1) / BT : 0L)\n"
    "#define KT_LAST(qi) (CAUSAL ? (long)(qi) : NT - 1L)\n"
    "#define QT_FIRST(kt) (CAUSAL ? (long)(kt) : 0L)\n"
    "#define QT_LAST(kt) (W_ > 0 ? min(NT - 1L, ((long)(kt) * BT + BT - 1 + W_ - 1) / BT) : NT - 1L)\n"
    /* this thread's entries of an S tile: (e / BT, e % BT), e = tid + k NTHR, all in one column (BT divides
     * NTHR): its key and value elements read once for its NS rows */
    "#define SCORES(t0, j0, BODY_) { float sv[NS], pv[NS]; const int c = tid % BT; \\\n"
    "        for (int k = 0; k < NS; k++) sv[k] = pv[k] = 0.f; \\\n"
    "        for (int i = 0; i < D_; i++) { const float kk = Ks[c][i], vv = Vs[c][i]; \\\n"
    "            for (int k = 0; k < NS; k++) { const int r = (tid + k * NTHR) / BT; \\\n"
    "                if (r < BT) { sv[k] = fmaf(Qs[r][i], kk, sv[k]); pv[k] = fmaf(Os[r][i], vv, pv[k]); } } } \\\n"
    "        for (int k = 0; k < NS; k++) { const int r = (tid + k * NTHR) / BT; if (r < BT) { \\\n"
    "            const long t = (t0) + r, j = (j0) + c; const float s = SC(sv[k] * SCALE), dp = pv[k]; BODY_ } } }\n"
    /* P and dS of an entry, from the forward's log-sum-exp and phase 1's sums */
    "#define DS_ENTRY { float p = 0.f, ds = 0.f; if (VALID(t, j)) { \\\n"
    "        p = __expf(s - ld(LSEA, (b * T_ + t) * H_ + h)); ds = p * (dp - rdot[gh * T_ + t]) * CAPD(s); } Ps[r][c] = p; Ss[r][c] = ds; }\n"
    "#if RD_FROM_Y\n"
    "    /* 1: each query row's rowsum(dP o P) = dy . y, a warp a row (lanes along D: coalesced) */\n"
    "    for (int gh = 0; gh < G_; gh++) {\n"
    "        const long h = hk * G_ + gh;\n"
    "        for (long t = tid / 32; t < T_; t += NTHR / 32) {\n"
    "            float a = 0.f;\n"
    "            for (int i = tid % 32; i < D_; i += 32) a = fmaf(ld(DYA, QROW(h, t) + i), ld(YA, QROW(h, t) + i), a);\n"
    "            for (int o = 16; o; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);\n"
    "            if (tid % 32 == 0) rdot[gh * T_ + t] = a;\n"
    "        }\n"
    "    }\n"
    "#else\n"
    "    /* 1: y is stored bf16, so rowsum(dP o P) from the products, tile by tile */\n"
    "    for (int gh = 0; gh < G_; gh++) {\n"
    "        const long h = hk * G_ + gh;\n"
    "        for (long qi = 0; qi < NT; qi++) {\n"
    "            const long t0 = qi * BT;\n"
    "            const float lse = tid < BT && t0 + tid < T_ ? ld(LSEA, (b * T_ + t0 + tid) * H_ + h) : 0.f;\n"
    "            float a = 0.f;\n"
    "            LOAD_QUERY_TILE\n"
    "            for (long kt = KT_FIRST(qi); kt <= KT_LAST(qi); kt++) {\n"
    "                const long j0 = kt * BT;\n"
    "                LOAD_KEY_TILE\n"
    "                __syncthreads();\n"
    "                SCORES(t0, j0, Ss[r][c] = s; Ps[r][c] = dp;)\n"
    "                __syncthreads();\n"
    "                if (tid < BT)\n"
    "                    for (int c = 0; c < BT; c++)\n"
    "                        if (VALID(t0 + tid, j0 + c)) a = fmaf(__expf(Ss[tid][c] - lse), Ps[tid][c], a);\n"
    "            }\n"
    "            if (tid < BT && t0 + tid < T_) rdot[gh * T_ + t0 + tid] = a;\n"
    "        }\n"
    "    }\n"
    "#endif\n"
    "    __syncthreads();\n"
    "#if HAS_DQ\n"
    "    /* 2: dq = scale dS k, a query tile at a time */\n"
    "    for (int gh = 0; gh < G_; gh++) {\n"
    "        const long h = hk * G_ + gh;\n"
    "        for (long qi = 0; qi < NT; qi++) {\n"
    "            const long t0 = qi * BT;\n"
    "            float acc[NA];\n"
    "            for (int k = 0; k < NA; k++) acc[k] = 0.f;\n"
    "            LOAD_QUERY_TILE\n"
    "            for (long kt = KT_FIRST(qi); kt <= KT_LAST(qi); kt++) {\n"
    "                const long j0 = kt * BT;\n"
    "                LOAD_KEY_TILE\n"
    "                __syncthreads();\n"
    "                SCORES(t0, j0, DS_ENTRY)\n"
    "                __syncthreads();\n"
    "#if NTHR % D_ == 0 /* a thread's elements share a column: each key element read once for them all */\n"
    "                for (int c = 0; c < BT; c++) {\n"
    "                    const float kk = Ks[c][tid % D_];\n"
    "#pragma unroll\n"
    "                    for (int k = 0; k < NA; k++) {\n"
    "                        const int r = tid / D_ + k * (NTHR / D_);\n"
    "                        if (r < BT) acc[k] = fmaf(Ss[r][c], kk, acc[k]);\n"
    "                    }\n"
    "                }\n"
    "#else\n"
    "#pragma unroll\n"
    "                for (int k = 0; k < NA; k++) {\n"
    "                    const int e = tid + k * NTHR, r = e / D_, i = e % D_;\n"
    "                    if (e < BT * D_)\n"
    "                        for (int c = 0; c < BT; c++) acc[k] = fmaf(Ss[r][c], Ks[c][i], acc[k]);\n"
    "                }\n"
    "#endif\n"
    "            }\n"
    "#pragma unroll\n"
    "            for (int k = 0; k < NA; k++) {\n"
    "                const int e = tid + k * NTHR, r = e / D_, i = e % D_;\n"
    "                if (e < BT * D_ && t0 + r < T_) st(DQA, QROW(h, t0 + r) + i, acc[k] * SCALE);\n"
    "            }\n"
    "        }\n"
    "    }\n"
    "#endif\n"
    "#if HAS_DK || HAS_DV\n"
    "    /* 3: dk = scale dS^T q and dv = P^T dy, a key tile at a time, summed over the G heads */\n"
    "    for (long kt = 0; kt < NT; kt++) {\n"
    "        const long j0 = kt * BT;\n"
    "        float acck[NA], accv[NA];\n"
    "        for (int k = 0; k < NA; k++) acck[k] = accv[k] = 0.f;\n"
    "        LOAD_KEY_TILE\n"
    "        for (int gh = 0; gh < G_; gh++) {\n"
    "            const long h = hk * G_ + gh;\n"
    "            for (long qi = QT_FIRST(kt); qi <= QT_LAST(kt); qi++) {\n"
    "                const long t0 = qi * BT;\n"
    "                LOAD_QUERY_TILE\n"
    "                __syncthreads();\n"
    "                SCORES(t0, j0, DS_ENTRY)\n"
    "                __syncthreads();\n"
    "#if NTHR % D_ == 0\n"
    "                for (int r = 0; r < BT; r++) {\n"
    "                    const float qq = Qs[r][tid % D_], oo = Os[r][tid % D_];\n"
    "#pragma unroll\n"
    "                    for (int k = 0; k < NA; k++) {\n"
    "                        const int c = tid / D_ + k * (NTHR / D_);\n"
    "                        if (c < BT) {\n"
    "                            acck[k] = fmaf(Ss[r][c], qq, acck[k]);\n"
    "                            accv[k] = fmaf(Ps[r][c], oo, accv[k]);\n"
    "                        }\n"
    "                    }\n"
    "                }\n"
    "#else\n"
    "#pragma unroll\n"
    "                for (int k = 0; k < NA; k++) {\n"
    "                    const int e = tid + k * NTHR, c = e / D_, i = e % D_;\n"
    "                    if (e < BT * D_)\n"
    "                        for (int r = 0; r < BT; r++) {\n"
    "                            acck[k] = fmaf(Ss[r][c], Qs[r][i], acck[k]);\n"
    "                            accv[k] = fmaf(Ps[r][c], Os[r][i], accv[k]);\n"
    "                        }\n"
    "                }\n"
    "#endif\n"
    "            }\n"
    "        }\n"
    "#pragma unroll\n"
    "        for (int k = 0; k < NA; k++) {\n"
    "            const int e = tid + k * NTHR, c = e / D_, i = e % D_;\n"
    "            if (e >= BT * D_ || j0 + c >= T_) continue;\n"
    "#if HAS_DK\n"
    "            st(DKA, KROW(j0 + c) + i, acck[k] * SCALE);\n"
    "#endif\n"
    "#if HAS_DV\n"
    "            st(DVA, KROW(j0 + c) + i, accv[k]);\n"
    "#endif\n"
    "        }\n"
    "    }\n"
    "#endif\n"
    "}\n";

static const char *const NAMES[] = {"BT", "NT", "NS", "NA", "NTHR", "T_", "D_", "H_", "HKV", "G_", "W_", "CAUSAL", "SCALE",
                                    "SC", "CAPD", "RD_FROM_Y", "HAS_DQ", "HAS_DK", "HAS_DV", "QA", "KA", "VA", "DYA", "DQA", "DKA", "DVA",
                                    "QROW", "KROW", "VALID", "LOAD", "QR", "LOAD_QUERY_TILE", "LOAD_KEY_TILE", "KT_FIRST", "KT_LAST", "QT_FIRST", "QT_LAST",
                                    "SCORES", "DS_ENTRY"};

void cu_attention_grad_body(cu_gen *c, const lrc_node *n, const int out_of[3], const char *body, const char *const *names,
                            size_t n_names)
{
    char arg[9][16] = {"0", "0", "0", "0", "0", "0", "0", "0", "0"}; /* q, k, v, dy, y, lse; dq, dk, dv */
    for (int i = 0; i < 6; i++) cu_arg(c, n->in[i], arg[i], sizeof arg[i]);
    for (int w = 0; w < 3; w++)
        if (out_of[w] >= 0) cu_arg(c, out_of[w], arg[6 + w], sizeof arg[6 + w]);
    cu_printf(c->t, "#define HAS_DQ %d\n#define HAS_DK %d\n#define HAS_DV %d\n", out_of[0] >= 0, out_of[1] >= 0, out_of[2] >= 0);
    cu_printf(c->t, "#define QA %s\n#define KA %s\n#define VA %s\n#define DYA %s\n#define YA %s\n#define LSEA %s\n", arg[0], arg[1], arg[2],
              arg[3], arg[4], arg[5]);
    cu_printf(c->t, "#define DQA %s\n#define DKA %s\n#define DVA %s\n", arg[6], arg[7], arg[8]);
    cu_printf(c->t, "%s", body);
    for (size_t i = 0; i < n_names; i++) cu_printf(c->t, "#undef %s\n", names[i]);
    cu_printf(c->t, "#undef YA\n#undef LSEA\n");
    cu_printf(c->t, "\n");
}

/* the group holds the gradient of q, k and/or v (and the bias) (fuse rule 6) */
bool cu_render_attention_grad(cu_gen *c, const lrc_node *n)
{
    const lrc_shape *qs = &c->g->nodes[n->in[0]].shape;
    int64_t B = qs->dim[0], T = qs->dim[1], H = qs->dim[2], D = qs->dim[3], Hkv = c->g->nodes[n->in[1]].shape.dim[2];
    int out_of[4] = {-1, -1, -1, -1}; /* dq, dk, dv, and the bias's gradient (the general form's) */
    for (int j = 0; j < c->gr->n_nodes; j++) {
        const lrc_node *m = &c->g->nodes[c->gr->nodes[j]];
        if (m->op != LRC_OP_ATTENTION_GRAD) return false;
        out_of[m->iattr[1]] = c->gr->nodes[j];
    }
    if (cu_render_attention_grad_general(c, n, out_of)) return true; /* a bias, Tq != Tk or Dv != Dqk */
    if (cu_render_attention_grad_tc(c, n, out_of)) return true; /* bf16 storage: the tensor cores */
    int bt = tile_rows(D);
    if (!bt) return false; /* a head too wide for a tile in shared memory: reported by the caller */
    double cap = n->fattr[1];
    c->launch->scratch_bytes = B * H * T * 4; /* rowsum(dP o P) of every query row */
    cu_kernel_begin(c, THREADS);
    cu_printf(c->t, "#define BT %d\n#define NT %lldL\n#define NS %d\n#define NA %d\n#define NTHR %d\n", bt,
              (long long)((T + bt - 1) / bt), (bt * bt + THREADS - 1) / THREADS, (int)((bt * D + THREADS - 1) / THREADS), THREADS);
    cu_printf(c->t, "#define T_ %lldL\n#define D_ %lld\n#define H_ %lldL\n#define HKV %lldL\n#define G_ %lld\n#define W_ %lldL\n",
              (long long)T, (long long)D, (long long)H, (long long)Hkv, (long long)(H / Hkv), (long long)n->iattr[2]);
    cu_printf(c->t, "#define CAUSAL %d\n#define SCALE %.9ef\n#define RD_FROM_Y %d\n", n->iattr[0] != 0, n->fattr[0],
              cu_storage(c, n->in[4]) == LRC_CUDA_F32);
    if (cap > 0) /* s is the capped score cap tanh(x / cap): its derivative 1 - tanh^2 is 1 - (s / cap)^2 */
        cu_printf(c->t, "#define SC(x) (%.9ef * tanhf((x) / %.9ef))\n#define CAPD(s) (1.f - ((s) / %.9ef) * ((s) / %.9ef))\n", cap, cap, cap,
                  cap);
    else cu_printf(c->t, "#define SC(x) (x)\n#define CAPD(s) 1.f\n");
    cu_attention_grad_body(c, n, out_of, BODY, NAMES, sizeof NAMES / sizeof *NAMES);
    c->launch->block = THREADS;
    c->launch->grid[0] = (unsigned)(B * Hkv);
    return true;
}
