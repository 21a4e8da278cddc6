/* render_attention_tc.c — causal (or full) attention on the tensor cores,
 * for bf16 storage: the flash-attention forward of render_attention.c with
 * both products as mma.sync m16n8k16 (bf16 in, f32 accumulate). A block is
 * four warps and 64 query rows of one (batch, head); each warp owns 16 rows.
 * Per tile of 32 keys, K (rotated by RoPE when the group holds it) and V^T
 * pass through shared memory as bf16; S = Q K^T stays in the accumulator
 * registers, whose layout is the A operand's, so P = exp(S - m) feeds P V
 * without touching memory; the running max and sum live with the rows they
 * belong to (four lanes a row, combined by shuffles). Q is rotated in f32
 * and rounded once to bf16, as P is: the rounding a bf16 attention has
 * anyway, well inside the 2e-2 of bf16 storage; the scale multiplies S in
 * f32, as the backward's kernel scales it, so that the log-sum-exp written
 * for it (attention_lse, fuse rule 7) is of the scores it computes. f32
 * storage keeps the f32 kernel (its 1e-5 needs f32 products). */
#include "cugen.h"

#include <stdlib.h>
#include <string.h>

#define BQ 64 /* query rows a block: 4 warps x 16 */
#define BK 32 /* keys a tile */

bool cu_render_attention_tc(cu_gen *c)
{
    const lrc_node *a = &c->g->nodes[c->gr->anchor], *rq, *rk;
    if (a->op != LRC_OP_ATTENTION) return false; /* an attention_lse alone ([B,T,H]): the f32 kernel's */
    const int64_t B = a->shape.dim[0], T = a->shape.dim[1], H = a->shape.dim[2], D = a->shape.dim[3];
    const int q = cu_attention_source(c, a->in[0], &rq), k = cu_attention_source(c, a->in[1], &rk), v = a->in[2];
    if (lrc_env_is("LRC_CUDA_TC_ATTENTION", "0") || D % 16 || D > 128 || cu_storage(c, q) != LRC_CUDA_BF16 ||
        cu_storage(c, k) != LRC_CUDA_BF16 || cu_storage(c, v) != LRC_CUDA_BF16 || cu_storage(c, c->gr->anchor) != LRC_CUDA_BF16)
        return false;
    /* grouped key-value heads, a sliding window and the soft-cap are the f32
     * kernel's (render_attention.c) for now: this one reads k and v with q's
     * heads and masks only the causal triangle */
    if (c->g->nodes[a->in[1]].shape.dim[2] != H || a->iattr[1] || a->fattr[1]) return false;
    /* so is the general form: a bias, Tq != Tk, Dv != Dqk */
    if (a->n_in > 3 || c->g->nodes[a->in[1]].shape.dim[1] != T || c->g->nodes[a->in[0]].shape.dim[3] != D) return false;
    const int lse = cu_attention_lse_of(c);
    const bool causal = a->iattr[0] != 0;
    const long long TT = (long long)T, HH = (long long)H, DD = (long long)D;
    char va[16], o[16];
    cu_arg(c, v, va, sizeof va);
    cu_arg(c, c->gr->anchor, o, sizeof o);
    cu_kernel_begin(c, 4 * 32);
    /* 8 bf16 of padding a row: consecutive rows start 16 bytes apart in the
     * banks; aligned, as the mma operands are read two bf16 at a time (a
     * bf16 array alone is only promised 2-byte alignment) */
    cu_printf(c->t, "    __shared__ __align__(16) bf16 Ks[%d][%lld];\n    __shared__ __align__(16) bf16 Vt[%lld][%d];\n", BK, DD + 8, DD,
              BK + 8);
    cu_printf(c->t, "    const long b = blockIdx.x / %lld, h = blockIdx.x %% %lld;\n", HH, HH);
    cu_printf(c->t, "    const int lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;\n");
    cu_printf(c->t, "    const long r0 = (long)blockIdx.y * %d + (threadIdx.x >> 5) * 16 + g, r1 = r0 + 8;\n", BQ);
    /* Q as A fragments: register r holds row r0 (r even) or r1, columns 2 tq (+ 8 for r >= 2) and the next */
    cu_printf(c->t, "    unsigned qa[%lld][4];\n#pragma unroll\n    for (int kk = 0; kk < %lld; kk++)\n#pragma unroll\n        for (int r = 0; r < 4; r++) {\n", DD / 16,
              DD / 16);
    cu_printf(c->t, "            const long row = (r & 1) ? r1 : r0, off = ((b * %lldL + row) * %lld + h) * %lld;\n", TT, HH, DD);
    cu_printf(c->t, "            float x[2] = {0.f, 0.f};\n            if (row < %lldL)\n", TT);
    cu_printf(c->t, "#pragma unroll\n                for (int e = 0; e < 2; e++) {\n                    const int i = kk * 16 + 2 * tq + (r >= 2 ? 8 : 0) + e;\n");
    cu_attention_element(c, "                    ", "x[e]", q, rq, D, "off", "row", 1.0);
    cu_printf(c->t, "                }\n            qa[kk][r] = pack_bf16(x[0], x[1]);\n        }\n");
    cu_printf(c->t, "    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f, oacc[%lld][4];\n", DD / 8);
    cu_printf(c->t, "#pragma unroll\n    for (int n = 0; n < %lld; n++) oacc[n][0] = oacc[n][1] = oacc[n][2] = oacc[n][3] = 0.f;\n", DD / 8);
    if (causal) cu_printf(c->t, "    const long last = min(%lldL, (long)blockIdx.y * %d + %d);\n", TT - 1, BQ, BQ - 1);
    else cu_printf(c->t, "    const long last = %lldL;\n", TT - 1);
    cu_printf(c->t, "    for (long j0 = 0; j0 <= last; j0 += %d) {\n        __syncthreads(); /* the last tile is spent */\n", BK);
    /* A thread 8 pairs (i, i + D/2) of a key, i from i0: four 16-byte
     * loads, RoPE's sincos once a pair. A warp's threads take 32 keys at
     * one i0, so that their transposed stores into Vt fall in distinct
     * banks (keys at the same i0 are adjacent there). V goes as stored,
     * 16-bit words (a copy, no rounding), K is rotated in f32 and rounded
     * once: 96 registers at D = 64, where V through floats beside K took
     * 122 (ptxas, sm_90). */
    char ka[16], tab[192];
    const long long half = DD / 2;
    cu_arg(c, k, ka, sizeof ka);
    cu_printf(c->t, "        for (int idx = threadIdx.x; idx < %lld; idx += %d) {\n", (long long)BK * half / 8, 4 * 32);
    cu_printf(c->t, "            const int jj = idx %% %d, i0 = idx / %d * 8;\n            const long j = j0 + jj;\n", BK, BK);
    cu_printf(c->t, "            const long off = ((b * %lldL + j) * %lld + h) * %lld + i0;\n", TT, HH, DD);
    cu_printf(c->t, "            unsigned w1[4] = {0u, 0u, 0u, 0u}, w2[4] = {0u, 0u, 0u, 0u};\n");
    cu_printf(c->t, "            if (j < %lldL) ldv_bits(%s + off, w1), ldv_bits(%s + off + %lld, w2);\n", TT, va, va, half);
    cu_printf(c->t, "#pragma unroll\n            for (int e = 0; e < 4; e++) {\n");
    cu_printf(c->t, "                Vt[i0 + 2 * e][jj] = (bf16)w1[e], Vt[i0 + 2 * e + 1][jj] = (bf16)(w1[e] >> 16);\n");
    cu_printf(c->t, "                Vt[i0 + %lld + 2 * e][jj] = (bf16)w2[e], Vt[i0 + %lld + 2 * e + 1][jj] = (bf16)(w2[e] >> 16);\n            }\n",
              half, half);
    cu_printf(c->t, "            float x1[8], x2[8];\n#pragma unroll\n            for (int e = 0; e < 8; e++) x1[e] = x2[e] = 0.f;\n");
    cu_printf(c->t, "            if (j < %lldL) {\n                ldv(%s + off, x1, 8), ldv(%s + off + %lld, x2, 8);\n", TT, ka, ka, half);
    if (rk) {
        lrc_rope rope = lrc_rope_of(rk);
        cu_rope_table(c, D, &rope, tab, sizeof tab);
        cu_printf(c->t, "#pragma unroll\n                for (int e = 0; e < 8; e++) {\n");
        cu_printf(c->t, "                    float s, co;\n                    rope_sincos((float)j * %s[i0 + e], &s, &co);\n", tab);
        cu_printf(c->t, "                    const float k1 = x1[e];\n                    x1[e] = k1 * co - x2[e] * s, x2[e] = x2[e] * co + k1 * s;\n");
        cu_printf(c->t, "                }\n");
    }
    cu_printf(c->t, "            }\n            stv(&Ks[jj][i0], x1, 8), stv(&Ks[jj][i0 + %lld], x2, 8);\n", half);
    cu_printf(c->t, "        }\n        __syncthreads();\n");
    /* S = Q K^T: B operand (k = d, n = key) is a row of Ks, two bf16 in a register */
    cu_printf(c->t, "        float s[%d][4];\n#pragma unroll\n        for (int n = 0; n < %d; n++) {\n", BK / 8, BK / 8);
    cu_printf(c->t, "            s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;\n");
    cu_printf(c->t, "#pragma unroll\n            for (int kk = 0; kk < %lld; kk++) {\n", DD / 16);
    cu_printf(c->t, "                mma_bf16_row(s[n], qa[kk], &Ks[n * 8 + g][kk * 16]);\n            }\n        }\n");
    /* masks, then each row's max over its four lanes */
    cu_printf(c->t, "        float mx0 = m0, mx1 = m1;\n#pragma unroll\n        for (int n = 0; n < %d; n++)\n#pragma unroll\n            for (int e = 0; e < 2; e++) {\n",
              BK / 8);
    cu_printf(c->t, "                const long key = j0 + n * 8 + 2 * tq + e;\n");
    cu_printf(c->t, "                s[n][e] *= %.9ef, s[n][2 + e] *= %.9ef;\n", a->fattr[0], a->fattr[0]);
    cu_printf(c->t, "                if (key >= %lldL%s) s[n][e] = -INFINITY;\n", TT, causal ? " || key > r0" : "");
    cu_printf(c->t, "                if (key >= %lldL%s) s[n][2 + e] = -INFINITY;\n", TT, causal ? " || key > r1" : "");
    cu_printf(c->t, "                mx0 = fmaxf(mx0, s[n][e]);\n                mx1 = fmaxf(mx1, s[n][2 + e]);\n            }\n");
    cu_printf(c->t, "#pragma unroll\n        for (int o = 1; o < 4; o <<= 1) {\n            mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, o));\n");
    cu_printf(c->t, "            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, o));\n        }\n");
    /* a row with no key yet (max still -inf) keeps its zeros */
    cu_printf(c->t, "        const float c0 = mx0 == -INFINITY ? 1.f : __expf(m0 - mx0), c1 = mx1 == -INFINITY ? 1.f : __expf(m1 - mx1);\n");
    cu_printf(c->t, "        m0 = mx0, m1 = mx1, l0 *= c0, l1 *= c1;\n");
    cu_printf(c->t, "#pragma unroll\n        for (int n = 0; n < %lld; n++) oacc[n][0] *= c0, oacc[n][1] *= c0, oacc[n][2] *= c1, oacc[n][3] *= c1;\n",
              DD / 8);
    /* P in bf16, summed as rounded so that the weights P V uses sum to l */
    cu_printf(c->t, "        unsigned pa[%d][4];\n#pragma unroll\n        for (int n = 0; n < %d; n++) {\n", BK / 16, BK / 8);
    cu_printf(c->t, "            float p[4];\n#pragma unroll\n            for (int e = 0; e < 4; e++)\n");
    cu_printf(c->t, "                p[e] = s[n][e] == -INFINITY ? 0.f : bf16_round(__expf(s[n][e] - (e < 2 ? m0 : m1)));\n");
    cu_printf(c->t, "            l0 += p[0] + p[1], l1 += p[2] + p[3];\n");
    cu_printf(c->t, "            pa[n >> 1][(n & 1) * 2] = pack_bf16(p[0], p[1]);\n");
    cu_printf(c->t, "            pa[n >> 1][(n & 1) * 2 + 1] = pack_bf16(p[2], p[3]);\n        }\n");
    /* O += P V: B operand (k = key, n = d) is a row of V^T */
    cu_printf(c->t, "#pragma unroll\n        for (int n = 0; n < %lld; n++)\n#pragma unroll\n            for (int kk = 0; kk < %d; kk++) {\n", DD / 8, BK / 16);
    cu_printf(c->t, "                mma_bf16_row(oacc[n], pa[kk], &Vt[n * 8 + g][kk * 16]);\n            }\n    }\n");
    cu_printf(c->t, "#pragma unroll\n    for (int o = 1; o < 4; o <<= 1) {\n        l0 += __shfl_xor_sync(0xffffffffu, l0, o);\n");
    cu_printf(c->t, "        l1 += __shfl_xor_sync(0xffffffffu, l1, o);\n    }\n");
    cu_printf(c->t, "#pragma unroll\n    for (int n = 0; n < %lld; n++)\n#pragma unroll\n        for (int e = 0; e < 2; e++) {\n", DD / 8);
    cu_printf(c->t, "            const int i = n * 8 + 2 * tq + e;\n");
    cu_printf(c->t, "            if (r0 < %lldL) st(%s, ((b * %lldL + r0) * %lld + h) * %lld + i, oacc[n][e] / l0);\n", TT, o, TT, HH, DD);
    cu_printf(c->t, "            if (r1 < %lldL) st(%s, ((b * %lldL + r1) * %lld + h) * %lld + i, oacc[n][2 + e] / l1);\n", TT, o, TT, HH,
              DD);
    cu_printf(c->t, "        }\n");
    if (lse >= 0) { /* each row's log-sum-exp, [B,T,H], for the backward: one lane of the four a row has */
        char la[16];
        cu_arg(c, lse, la, sizeof la);
        cu_printf(c->t, "    if (tq == 0 && r0 < %lldL) st(%s, (b * %lldL + r0) * %lld + h, m0 + logf(l0));\n", TT, la, TT, HH);
        cu_printf(c->t, "    if (tq == 0 && r1 < %lldL) st(%s, (b * %lldL + r1) * %lld + h, m1 + logf(l1));\n", TT, la, TT, HH);
    }
    cu_printf(c->t, "}\n\n");
    c->launch->block = 4 * 32;
    /* (batch, head) on x, which has room for 2^31 - 1 of them; query blocks on y */
    c->launch->grid[0] = (unsigned)(B * H);
    c->launch->grid[1] = (unsigned)((T + BQ - 1) / BQ);
    return true;
}
