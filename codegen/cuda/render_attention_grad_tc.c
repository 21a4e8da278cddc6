/* render_attention_grad_tc.c — the gradient of attention on the tensor
 * cores, for bf16 storage: render_attention_grad.c's three phases in one
 * block per (batch, key-value head), each tile product an mma.sync m16n8k16
 * (bf16 in, f32 accumulate). Four warps; a warp owns 16 rows of a 64-row
 * tile, whose q and dy (phases 1, 2) or k and v (phase 3) it keeps as A
 * fragments in registers, and streams tiles of 32 of the other side through
 * shared memory, both as stored ([32][D], the B operand of S = q k^T,
 * dP = dy v^T and their transposes) and transposed ([D][32], the B operand
 * of dq = dS k, dk = dS^T q, dv = P^T dy).
 *
 *   1. per query row, rowsum(dP o P) (which is dy . y, but y is stored
 *      bf16: from the products it is as exact as f32), into scratch, with
 *      P = exp(S - lse) from the forward's log-sum-exp (attention_lse, which
 *      the forward's kernel wrote: no running max and sum to find again);
 *   2. dq = scale dS k, dS = P o (dP - rd), a query tile at a time;
 *   3. dk = scale dS^T q and dv = P^T dy, a key tile at a time, over the
 *      G query heads of the key-value head.
 *
 * P and dS are rounded once to bf16 for their products, as P is in the
 * forward: the rounding a bf16 attention has anyway. The statistics and
 * every sum stay f32; sums run in a fixed order (no atomics), so a run
 * repeats bit for bit. (Locals never take the arguments' names, a0 ...:
 * the macros QA ... expand to those.) A window, the soft-cap, inputs stored as f32, or a
 * head dimension that is not a multiple of 16 up to 128 keep the f32 kernel. */
#include "cugen.h"

#define BQ 64 /* rows a block owns: 4 warps x 16 */
#define BS 32 /* rows of the streamed tile */

static const char BODY[] =
    "    __shared__ __align__(16) bf16 sm[2 * BS * (D_ + 8) + 2 * D_ * (BS + 8)];\n"
    "    __shared__ float st_m[BS], st_r[BS]; /* a query tile's log-sum-exp and rowsum(dP o P) */\n"
    "    bf16 (*A)[D_ + 8] = (bf16 (*)[D_ + 8])sm, (*Bt)[D_ + 8] = (bf16 (*)[D_ + 8])(sm + BS * (D_ + 8));\n"
    "    bf16 (*At)[BS + 8] = (bf16 (*)[BS + 8])(sm + 2 * BS * (D_ + 8)), (*Btt)[BS + 8] = (bf16 (*)[BS + 8])(sm + 2 * BS * (D_ + 8) + D_ * (BS + 8));\n"
    "    const long b = blockIdx.x / HKV, hk = blockIdx.x % HKV;\n"
    "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tq = lane & 3;\n"
    "    float *rdot = scratch + (long)blockIdx.x * G_ * T_;\n"
    "#define QROW(h, t) (((b * T_ + (t)) * H_ + (h)) * D_)\n"
    "#define KROW(t) (((b * T_ + (t)) * HKV + hk) * D_)\n"
    "#define SEES(t, j) ((t) < T_ && (j) < T_ && (!CAUSAL || (j) <= (t)))\n"
    /* rows [t0, t0 + BS) of src (row(t) its offsets) into S [BS][D_ + 8] as stored and, when ST, into ST [D_][BS + 8] transposed; zeros past T_ */
    "#define STREAM(S, ST, src, row, t0, TRANS) for (int e = threadIdx.x; e < BS * D_ / 2; e += 128) { \\\n"
    "        const int r = e / (D_ / 2), i = e % (D_ / 2) * 2; const long t = (t0) + r; \\\n"
    "        const unsigned w = t < T_ ? *(const unsigned *)(const void *)(src + row(t) + i) : 0u; \\\n"
    "        *(unsigned *)&S[r][i] = w; if (TRANS) { ST[i][r] = (bf16)w; ST[i + 1][r] = (bf16)(w >> 16); } }\n"
    /* A fragments of this warp's 16 rows (r0 = base + g, r1 = r0 + 8) of src: F[kk][r], two bf16 of row r0 or r1 */
    "#define FRAGS(F, src, row, base) { const long ra = (base) + g, rb = ra + 8; \\\n"
    "        for (int kk = 0; kk < D_ / 16; kk++) for (int r = 0; r < 4; r++) { \\\n"
    "            const long t = (r & 1) ? rb : ra; const int i = kk * 16 + 2 * tq + (r >= 2 ? 8 : 0); \\\n"
    "            F[kk][r] = t < T_ ? *(const unsigned *)(const void *)(src + row(t) + i) : 0u; } }\n"
    /* the products of a warp's 16 rows with the BS streamed rows: X = F1 A^T (S), Y = F2 Bt^T (dP) */
    "#define PRODUCTS(X, Y, F1, F2) for (int n = 0; n < BS / 8; n++) { \\\n"
    "        X[n][0] = X[n][1] = X[n][2] = X[n][3] = Y[n][0] = Y[n][1] = Y[n][2] = Y[n][3] = 0.f; \\\n"
    "        for (int kk = 0; kk < D_ / 16; kk++) { mma_bf16_row(X[n], F1[kk], &A[n * 8 + g][kk * 16]); \\\n"
    "                                               mma_bf16_row(Y[n], F2[kk], &Bt[n * 8 + g][kk * 16]); } }\n"
    /* accumulator tiles (16 rows by BS) as A fragments over k = the BS columns, rounded to bf16 */
    "#define TO_FRAGS(F, X) for (int n = 0; n < BS / 8; n++) { \\\n"
    "        F[n >> 1][(n & 1) * 2] = pack_bf16(X[n][0], X[n][1]); F[n >> 1][(n & 1) * 2 + 1] = pack_bf16(X[n][2], X[n][3]); }\n"
    "#define QR(t) QROW(h, t)\n"
    "    unsigned fa[D_ / 16][4], fb[D_ / 16][4];\n"
    "    float s[BS / 8][4], dp[BS / 8][4];\n"
    "#define LSE(h, t) ld(LSEA, (b * T_ + (t)) * H_ + (h))\n"
    "    /* 1 and 2, a query tile of BQ rows at a time: q and dy as fragments, key tiles streamed;\n"
    "     * P = exp(S - lse) from the forward's log-sum-exp */\n"
    "    for (int gh = 0; gh < G_; gh++) {\n"
    "        const long h = hk * G_ + gh;\n"
    "        for (long t0 = 0; t0 < T_; t0 += BQ) {\n"
    "            const long r0 = t0 + warp * 16 + g, r1 = r0 + 8;\n"
    "            FRAGS(fa, QA, QR, t0 + warp * 16)\n"
    "            FRAGS(fb, DYA, QR, t0 + warp * 16)\n"
    "            const long last = CAUSAL ? min(T_ - 1, t0 + BQ - 1) : T_ - 1;\n"
    "            const float ls0 = r0 < T_ ? LSE(h, r0) : 0.f, ls1 = r1 < T_ ? LSE(h, r1) : 0.f;\n"
    "            /* 1: rowsum(dP o P) of these rows (from the products in f32, not from the bf16 y) */\n"
    "            float rd0 = 0.f, rd1 = 0.f;\n"
    "            for (long j0 = 0; j0 <= last; j0 += BS) {\n"
    "                __syncthreads();\n"
    "                STREAM(A, At, KA, KROW, j0, 0)\n"
    "                STREAM(Bt, Btt, VA, KROW, j0, 0)\n"
    "                __syncthreads();\n"
    "                PRODUCTS(s, dp, fa, fb)\n"
    "                for (int n = 0; n < BS / 8; n++)\n"
    "                    for (int e = 0; e < 4; e++) {\n"
    "                        const long t = e < 2 ? r0 : r1, j = j0 + n * 8 + 2 * tq + (e & 1);\n"
    "                        const float pd = SEES(t, j) ? __expf(s[n][e] * SCALE - (e < 2 ? ls0 : ls1)) * dp[n][e] : 0.f;\n"
    "                        if (e < 2) rd0 += pd; else rd1 += pd;\n"
    "                    }\n"
    "            }\n"
    "            for (int o = 1; o < 4; o <<= 1) {\n"
    "                rd0 += __shfl_xor_sync(0xffffffffu, rd0, o);\n"
    "                rd1 += __shfl_xor_sync(0xffffffffu, rd1, o);\n"
    "            }\n"
    "            if (tq == 0 && r0 < T_) rdot[gh * T_ + r0] = rd0;\n"
    "            if (tq == 0 && r1 < T_) rdot[gh * T_ + r1] = rd1;\n"
    "#if HAS_DQ\n"
    "            /* 2: dq of these rows, the key tiles again (k transposed for dS k) */\n"
    "            float dq[D_ / 8][4];\n"
    "            for (int n = 0; n < D_ / 8; n++) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.f;\n"
    "            for (long j0 = 0; j0 <= last; j0 += BS) {\n"
    "                __syncthreads();\n"
    "                STREAM(A, At, KA, KROW, j0, 1)\n"
    "                STREAM(Bt, Btt, VA, KROW, j0, 0)\n"
    "                __syncthreads();\n"
    "                PRODUCTS(s, dp, fa, fb)\n"
    "                for (int n = 0; n < BS / 8; n++)\n"
    "                    for (int e = 0; e < 4; e++) {\n"
    "                        const long t = e < 2 ? r0 : r1, j = j0 + n * 8 + 2 * tq + (e & 1);\n"
    "                        const float p = SEES(t, j) ? __expf(s[n][e] * SCALE - (e < 2 ? ls0 : ls1)) : 0.f;\n"
    "                        s[n][e] = p * (dp[n][e] - (e < 2 ? rd0 : rd1));\n"
    "                    }\n"
    "                unsigned ds[BS / 16][4];\n"
    "                TO_FRAGS(ds, s)\n"
    "                for (int n = 0; n < D_ / 8; n++)\n"
    "                    for (int kk = 0; kk < BS / 16; kk++) mma_bf16_row(dq[n], ds[kk], &At[n * 8 + g][kk * 16]);\n"
    "            }\n"
    "            for (int n = 0; n < D_ / 8; n++)\n"
    "                for (int e = 0; e < 4; e++) {\n"
    "                    const long t = e < 2 ? r0 : r1;\n"
    "                    if (t < T_) st(DQA, QROW(h, t) + n * 8 + 2 * tq + (e & 1), dq[n][e] * SCALE);\n"
    "                }\n"
    "#endif\n"
    "        }\n"
    "    }\n"
    "    __syncthreads(); /* phase 3 reads other warps' rows of rdot */\n"
    "#if HAS_DK || HAS_DV\n"
    "    /* 3: dk and dv, a key tile of BQ rows at a time: k and v as fragments, query tiles of every head streamed */\n"
    "    for (long j0 = 0; j0 < T_; j0 += BQ) {\n"
    "        const long c0 = j0 + warp * 16 + g, c1 = c0 + 8;\n"
    "        FRAGS(fa, KA, KROW, j0 + warp * 16)\n"
    "        FRAGS(fb, VA, KROW, j0 + warp * 16)\n"
    "        float dk[D_ / 8][4], dv[D_ / 8][4];\n"
    "        for (int n = 0; n < D_ / 8; n++) dk[n][0] = dk[n][1] = dk[n][2] = dk[n][3] = dv[n][0] = dv[n][1] = dv[n][2] = dv[n][3] = 0.f;\n"
    "        for (int gh = 0; gh < G_; gh++) {\n"
    "            const long h = hk * G_ + gh;\n"
    "            for (long t0 = CAUSAL ? j0 / BS * BS : 0; t0 < T_; t0 += BS) {\n"
    "                __syncthreads();\n"
    "                STREAM(A, At, QA, QR, t0, 1)\n"
    "                STREAM(Bt, Btt, DYA, QR, t0, 1)\n"
    "                if (threadIdx.x < BS) {\n"
    "                    const long t = t0 + threadIdx.x;\n"
    "                    st_m[threadIdx.x] = t < T_ ? LSE(h, t) : 0.f;\n"
    "                    st_r[threadIdx.x] = t < T_ ? rdot[gh * T_ + t] : 0.f;\n"
    "                }\n"
    "                __syncthreads();\n"
    "                PRODUCTS(s, dp, fa, fb) /* S^T and dP^T: rows are keys, columns queries */\n"
    "                for (int n = 0; n < BS / 8; n++)\n"
    "                    for (int e = 0; e < 4; e++) {\n"
    "                        const int qq = n * 8 + 2 * tq + (e & 1);\n"
    "                        const long j = e < 2 ? c0 : c1, t = t0 + qq;\n"
    "                        const float p = SEES(t, j) ? __expf(s[n][e] * SCALE - st_m[qq]) : 0.f;\n"
    "                        s[n][e] = p * (dp[n][e] - st_r[qq]);\n"
    "                        dp[n][e] = p;\n"
    "                    }\n"
    "                unsigned pf[BS / 16][4], ds[BS / 16][4];\n"
    "                TO_FRAGS(pf, dp)\n"
    "                TO_FRAGS(ds, s)\n"
    "                for (int n = 0; n < D_ / 8; n++)\n"
    "                    for (int kk = 0; kk < BS / 16; kk++) {\n"
    "                        mma_bf16_row(dv[n], pf[kk], &Btt[n * 8 + g][kk * 16]);\n"
    "                        mma_bf16_row(dk[n], ds[kk], &At[n * 8 + g][kk * 16]);\n"
    "                    }\n"
    "            }\n"
    "        }\n"
    "        for (int n = 0; n < D_ / 8; n++)\n"
    "            for (int e = 0; e < 4; e++) {\n"
    "                const long j = e < 2 ? c0 : c1;\n"
    "                const int i = n * 8 + 2 * tq + (e & 1);\n"
    "                if (j >= T_) continue;\n"
    "#if HAS_DK\n"
    "                st(DKA, KROW(j) + i, dk[n][e] * SCALE);\n"
    "#endif\n"
    "#if HAS_DV\n"
    "                st(DVA, KROW(j) + i, dv[n][e]);\n"
    "#endif\n"
    "            }\n"
    "    }\n"
    "#endif\n"
    "#undef LSE\n"
    "}\n";

static const char *const NAMES[] = {"BS", "T_", "D_", "H_", "HKV", "G_", "CAUSAL", "SCALE", "HAS_DQ", "HAS_DK", "HAS_DV", "QA", "KA",
                                    "VA", "DYA", "DQA", "DKA", "DVA", "QROW", "KROW", "SEES", "STREAM", "FRAGS", "PRODUCTS",
                                    "TO_FRAGS", "QR", "BQ"};

bool cu_render_attention_grad_tc(cu_gen *c, const lrc_node *n, const int out_of[3])
{
    const lrc_shape *qs = &c->g->nodes[n->in[0]].shape;
    const int64_t B = qs->dim[0], T = qs->dim[1], H = qs->dim[2], D = qs->dim[3], Hkv = c->g->nodes[n->in[1]].shape.dim[2];
    if (lrc_env_is("LRC_CUDA_TC_ATTENTION", "0") || D % 16 || D > 128 || n->iattr[2] || n->fattr[1] > 0) return false;
    for (int i = 0; i < 4; i++) /* what a bf16 model's training graph has; outputs may be either (st writes both) */
        if (cu_storage(c, n->in[i]) != LRC_CUDA_BF16) return false;
    c->launch->scratch_bytes = B * H * T * 4; /* rowsum(dP o P) of every query row */
    cu_kernel_begin(c, 4 * 32);
    cu_printf(c->t, "#define BQ %d\n#define BS %d\n#define T_ %lldL\n#define D_ %lld\n#define H_ %lldL\n#define HKV %lldL\n#define G_ %lld\n", BQ,
              BS, (long long)T, (long long)D, (long long)H, (long long)Hkv, (long long)(H / Hkv));
    cu_printf(c->t, "#define CAUSAL %d\n#define SCALE %.9ef\n", n->iattr[0] != 0, n->fattr[0]);
    cu_attention_grad_body(c, n, out_of, BODY, NAMES, sizeof NAMES / sizeof *NAMES);
    c->launch->block = 4 * 32;
    c->launch->grid[0] = (unsigned)(B * Hkv);
    return true;
}
