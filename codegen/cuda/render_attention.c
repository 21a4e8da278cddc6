/* render_attention.c — attention for CUDA. Forward: flash-attention style,
 * a block per (64 query rows, batch, head); key and value tiles (rotated by
 * RoPE when the group holds the RoPE of k) pass through shared memory and
 * each thread keeps its query row, running max, sum and output accumulator
 * in registers, so the T x T scores never exist in memory. Decoding with a
 * KV cache is a block-per-(batch, head) kernel; the gradient is
 * render_attention_grad.c's. */
#include "cugen.h"

#include <string.h>

#define BQ 64

int cu_attention_source(const cu_gen *c, int id, const lrc_node **rope)
{
    const lrc_node *n = &c->g->nodes[id];
    *rope = c->member[id] && n->op == LRC_OP_ROPE ? n : NULL;
    return *rope ? n->in[0] : id;
}

/* dst[0..D) = row `off` of src, rotated to position `pos` when rope */
static void emit_row(cu_gen *c, const char *dst, int src, const lrc_node *rope, int64_t D, const char *off, const char *pos,
                     double scale)
{
    char a[16], tab[192];
    cu_arg(c, src, a, sizeof a);
    if (!rope) {
        cu_printf(c->t, "        for (int i = 0; i < %lld; i++) %s[i] = ld(%s, %s + i) * %.9ef;\n", (long long)D, dst, a, off, scale);
        return;
    }
    lrc_rope r = lrc_rope_of(rope);
    cu_rope_table(c, D, &r, tab, sizeof tab);
    cu_printf(c->t, "        for (int i = 0; i < %lld; i++) {\n", (long long)(D / 2));
    cu_printf(c->t, "            float s, co;\n            sincosf((float)(%s) * %s[i], &s, &co);\n", pos, tab);
    cu_printf(c->t, "            const float x1 = ld(%s, %s + i), x2 = ld(%s, %s + i + %lld);\n", a, off, a, off, (long long)(D / 2));
    cu_printf(c->t, "            %s[i] = (x1 * co - x2 * s) * %.9ef;\n            %s[i + %lld] = (x2 * co + x1 * s) * %.9ef;\n        }\n",
              dst, scale, dst, (long long)(D / 2), scale);
}

void cu_attention_element(cu_gen *c, const char *indent, const char *dst, int src, const lrc_node *rope, int64_t D, const char *off,
                          const char *pos, double scale)
{
    char a[16], tab[192], times[32] = "";
    cu_arg(c, src, a, sizeof a);
    if (scale != 1.0) snprintf(times, sizeof times, " * %.9ef", scale);
    if (!rope) {
        cu_printf(c->t, "%s%s = ld(%s, %s + i)%s;\n", indent, dst, a, off, times);
        return;
    }
    const long long half = (long long)(D / 2);
    lrc_rope r = lrc_rope_of(rope);
    cu_rope_table(c, D, &r, tab, sizeof tab);
    cu_printf(c->t, "%s{\n%s    float s, co;\n%s    sincosf((float)(%s) * %s[i %% %lld], &s, &co);\n", indent, indent, indent, pos, tab,
              half);
    cu_printf(c->t, "%s    %s = (i < %lld ? ld(%s, %s + i) * co - ld(%s, %s + i + %lld) * s\n", indent, dst, half, a, off, a, off, half);
    cu_printf(c->t, "%s          : ld(%s, %s + i) * co + ld(%s, %s + i - %lld) * s)%s;\n%s}\n", indent, a, off, a, off, half, times,
              indent);
}

/* The group's attention_lse (fuse rule 7, or the anchor alone), or -1. */
int cu_attention_lse_of(const cu_gen *c)
{
    for (int j = 0; j < c->gr->n_nodes; j++)
        if (c->g->nodes[c->gr->nodes[j]].op == LRC_OP_ATTENTION_LSE) return c->gr->nodes[j];
    return -1;
}

void cu_render_attention(cu_gen *c)
{
    if (cu_render_attention_tc(c)) return; /* bf16 storage: the tensor cores */
    const lrc_node *a = &c->g->nodes[c->gr->anchor], *rq, *rk;
    /* the anchor is the attention, or an attention_lse alone (no output rows, no values) */
    /* q [B,T,H,D], k [B,Tk,Hkv,D], v [B,Tk,Hkv,Dv], the bias [B|1,H|1,T,Tk] (the general form's own lines only where it differs) */
    const lrc_shape *qs = &c->g->nodes[a->in[0]].shape, *vs = &c->g->nodes[a->in[2]].shape;
    const lrc_shape *bs = a->n_in > 3 ? &c->g->nodes[a->in[3]].shape : NULL;
    const bool rows = a->op == LRC_OP_ATTENTION;
    const int lse = cu_attention_lse_of(c);
    int64_t B = qs->dim[0], T = qs->dim[1], H = qs->dim[2], D = qs->dim[3], Tk = vs->dim[1], Dv = vs->dim[3];
    int q = cu_attention_source(c, a->in[0], &rq), k = cu_attention_source(c, a->in[1], &rk);
    bool causal = a->iattr[0] != 0;
    /* GQA: query head h reads key-value head h / G; a window of W keys
     * (attn_first_key, ir/ref_template.h); the soft-cap before the mask */
    int64_t Hkv = c->g->nodes[a->in[1]].shape.dim[2], G = H / Hkv, W = a->iattr[1];
    double cap = a->fattr[1];
    int64_t Dm = Dv > D ? Dv : D;
    int BK = Dm > 128 ? 8 : Dm > 64 ? 16 : 32; /* two tiles of BK x D floats fit in 48 KB */
    char va[16], o[16], la[16], ba[16];
    cu_arg(c, a->in[2], va, sizeof va);
    cu_arg(c, c->gr->anchor, o, sizeof o);
    if (lse >= 0) cu_arg(c, lse, la, sizeof la);
    if (bs) cu_arg(c, a->in[3], ba, sizeof ba);
    cu_kernel_begin(c, BQ);
    cu_printf(c->t, "    __shared__ float Ks[%d][%lld], Vs[%d][%lld];\n", BK, (long long)D, BK, (long long)Dv);
    /* (batch, head) on grid x, which takes 2^31 - 1, query blocks on y (65 535 at most, as z) */
    cu_printf(c->t, "    const long b = blockIdx.x / %lld, h = blockIdx.x %% %lld, t = (long)blockIdx.y * %d + threadIdx.x;\n",
              (long long)H, (long long)H, BQ);
    cu_printf(c->t, "    const bool active = t < %lld;\n    float q[%lld], acc[%lld], m = -INFINITY, l = 0.f;\n", (long long)T,
              (long long)D, (long long)Dv);
    cu_printf(c->t, "    if (active) {\n        const long off = ((b * %lld + t) * %lld + h) * %lld;\n", (long long)T, (long long)H,
              (long long)D);
    emit_row(c, "q", q, rq, D, "off", "t", 1.0); /* scaled after the product, as the gradient's kernel does: the same scores */
    cu_printf(c->t, "        for (int i = 0; i < %lld; i++) acc[i] = 0.f;\n    }\n", (long long)Dv);
    if (causal) cu_printf(c->t, "    const long last = min(%lldL, (long)blockIdx.y * %d + %d);\n", (long long)(Tk - 1), BQ, BQ - 1);
    else cu_printf(c->t, "    const long last = %lldL;\n", (long long)(Tk - 1));
    if (W > 0) cu_printf(c->t, "    const long j00 = max(0L, (long)blockIdx.y * %d - %lld);\n", BQ, (long long)(W - 1));
    cu_printf(c->t, "    for (long j0 = %s; j0 <= last; j0 += %d) {\n", W > 0 ? "j00" : "0", BK);
    if (Tk == T && Dv == D) {
        cu_printf(c->t, "        for (int idx = threadIdx.x; idx < %lld; idx += %d) {\n", (long long)(BK * D), BQ);
        cu_printf(c->t, "            const int jj = idx / %lld, i = idx %% %lld;\n            const long j = j0 + jj;\n", (long long)D,
                  (long long)D);
        cu_printf(c->t, "            float kv = 0.f, vv = 0.f;\n            if (j < %lld) {\n", (long long)T);
        cu_printf(c->t, "                const long off = ((b * %lld + j) * %lld + h / %lld) * %lld;\n", (long long)T, (long long)Hkv,
                  (long long)G, (long long)D);
        cu_attention_element(c, "                ", "kv", k, rk, D, "off", "j", 1.0);
        cu_printf(c->t, "                vv = ld(%s, off + i);\n            }\n            Ks[jj][i] = kv;\n            Vs[jj][i] = vv;\n        }\n",
                  va);
    } else { /* keys and values apart: Tk rows, Dqk and Dv wide */
        cu_printf(c->t, "        for (int idx = threadIdx.x; idx < %lld; idx += %d) {\n", (long long)(BK * D), BQ);
        cu_printf(c->t, "            const int jj = idx / %lld, i = idx %% %lld;\n            const long j = j0 + jj;\n", (long long)D,
                  (long long)D);
        cu_printf(c->t, "            float kv = 0.f;\n            if (j < %lld) {\n", (long long)Tk);
        cu_printf(c->t, "                const long off = ((b * %lld + j) * %lld + h / %lld) * %lld;\n", (long long)Tk, (long long)Hkv,
                  (long long)G, (long long)D);
        cu_attention_element(c, "                ", "kv", k, rk, D, "off", "j", 1.0);
        cu_printf(c->t, "            }\n            Ks[jj][i] = kv;\n        }\n");
        cu_printf(c->t, "        for (int idx = threadIdx.x; idx < %lld; idx += %d) {\n", (long long)(BK * Dv), BQ);
        cu_printf(c->t, "            const int jj = idx / %lld, i = idx %% %lld;\n            const long j = j0 + jj;\n", (long long)Dv,
                  (long long)Dv);
        cu_printf(c->t, "            Vs[jj][i] = j < %lld ? ld(%s, ((b * %lld + j) * %lld + h / %lld) * %lld + i) : 0.f;\n        }\n",
                  (long long)Tk, va, (long long)Tk, (long long)Hkv, (long long)G, (long long)Dv);
    }
    cu_printf(c->t, "        __syncthreads();\n        if (active)\n            for (int jj = 0; jj < %d; jj++) {\n", BK);
    cu_printf(c->t, "                const long j = j0 + jj;\n                if (j >= %lld%s) break;\n", (long long)Tk, causal ? " || j > t" : "");
    if (W > 0) cu_printf(c->t, "                if (j <= t - %lldL) continue;\n", (long long)W);
    cu_printf(c->t, "                float s = 0.f;\n#pragma unroll\n                for (int i = 0; i < %lld; i++) s = fmaf(q[i], Ks[jj][i], s);\n",
              (long long)D);
    cu_printf(c->t, "                s *= %.9ef;\n", a->fattr[0]);
    if (cap > 0) cu_printf(c->t, "                s = %.9ef * tanhf(s / %.9ef);\n", cap, cap);
    if (bs) { /* the bias, after the soft-cap; a -inf entry masks (a row all masked keeps m = -inf, l = 0: zeros out) */
        cu_printf(c->t, "                s += ld(%s, ((%s * %lld + %s) * %lld + t) * %lld + j);\n", ba, bs->dim[0] > 1 ? "b" : "0L",
                  (long long)bs->dim[1], bs->dim[1] > 1 ? "h" : "0L", (long long)T, (long long)Tk);
        cu_printf(c->t, "                if (s == -INFINITY) continue;\n");
    }
    cu_printf(c->t, "                const float mn = fmaxf(m, s), corr = __expf(m - mn), p = __expf(s - mn);\n");
    cu_printf(c->t, "                l = l * corr + p;\n");
    if (rows)
        cu_printf(c->t, "#pragma unroll\n                for (int i = 0; i < %lld; i++) acc[i] = fmaf(p, Vs[jj][i], acc[i] * corr);\n", (long long)Dv);
    cu_printf(c->t, "                m = mn;\n            }\n        __syncthreads();\n    }\n");
    cu_printf(c->t, "    if (active) {\n        const long off = ((b * %lld + t) * %lld + h) * %lld;\n        const float inv = %s;\n",
              (long long)T, (long long)H, (long long)Dv, bs ? "l > 0.f ? 1.f / l : 0.f" : "1.f / l");
    if (rows) cu_printf(c->t, "        for (int i = 0; i < %lld; i++) st(%s, off + i, acc[i] * inv);\n", (long long)Dv, o);
    if (lse >= 0) /* the row's log-sum-exp, [B,T,H]: what the backward reads (-inf for a row the bias masks whole) */
        cu_printf(c->t, "        st(%s, off / %lld, %s);\n", la, (long long)Dv, bs ? "l > 0.f ? m + logf(l) : -INFINITY" : "m + logf(l)");
    cu_printf(c->t, "    }\n}\n\n");
    c->launch->block = BQ;
    c->launch->grid[0] = (unsigned)(B * H);
    c->launch->grid[1] = (unsigned)((T + BQ - 1) / BQ);
}

/* A block per (batch, key-value head): the new positions' rotated keys and
 * values into its slice of the caches, then its G query heads' new rows. */
void cu_render_kv_attention(cu_gen *c)
{
    const lrc_node *a = &c->g->nodes[c->gr->anchor];
    int64_t B = a->shape.dim[0], T = a->shape.dim[1], H = a->shape.dim[2], D = a->shape.dim[3], half = D / 2;
    int64_t Tmax = c->g->nodes[a->in[3]].shape.dim[1], Hkv = c->g->nodes[a->in[1]].shape.dim[2], G = H / Hkv, W = a->iattr[0];
    double cap = a->fattr[2];
    char q[16], k[16], v[16], kc[16], vc[16], pos[16], o[16], tab[192];
    cu_arg(c, a->in[0], q, sizeof q);
    cu_arg(c, a->in[1], k, sizeof k);
    cu_arg(c, a->in[2], v, sizeof v);
    cu_arg(c, a->in[3], kc, sizeof kc);
    cu_arg(c, a->in[4], vc, sizeof vc);
    cu_arg(c, a->in[5], pos, sizeof pos);
    cu_arg(c, c->gr->anchor, o, sizeof o);
    lrc_rope rope = lrc_rope_of(a);
    cu_rope_table(c, D, &rope, tab, sizeof tab);
    cu_kernel_begin(c, 128);
    cu_printf(c->t, "    const long b = blockIdx.x / %lld, hk = blockIdx.x %% %lld, pos = %s[0];\n", (long long)Hkv, (long long)Hkv, pos);
    cu_printf(c->t, "    if (pos < 0 || pos + %lld > %lld) return; /* checked by the runtime before launch */\n", (long long)T,
              (long long)Tmax);
    /* the new positions' rotated keys and values into the caches */
    cu_printf(c->t, "    for (long idx = threadIdx.x; idx < %lld; idx += blockDim.x) {\n", (long long)(T * D));
    cu_printf(c->t, "        const long t = idx / %lld, i = idx %% %lld, src = ((b * %lld + t) * %lld + hk) * %lld;\n", (long long)D,
              (long long)D, (long long)T, (long long)Hkv, (long long)D);
    cu_printf(c->t, "        const long dst = ((b * %lld + pos + t) * %lld + hk) * %lld;\n", (long long)Tmax, (long long)Hkv, (long long)D);
    cu_printf(c->t, "        float s, co;\n        sincosf((float)(pos + t) * %s[i %% %lld], &s, &co);\n", tab, (long long)half);
    cu_printf(c->t, "        st(%s, dst + i, i < %lld ? ld(%s, src + i) * co - ld(%s, src + i + %lld) * s\n", kc, (long long)half, k, k,
              (long long)half);
    cu_printf(c->t, "                                 : ld(%s, src + i) * co + ld(%s, src + i - %lld) * s);\n", k, k, (long long)half);
    cu_printf(c->t, "        st(%s, dst + i, ld(%s, src + i));\n    }\n    __syncthreads();\n", vc, v);
    /* then each new query row in turn, its positions split among the warps
     * (split-K: warp w takes positions w, w + 4, ...) and its D elements
     * among a warp's lanes, so a cache row is one coalesced read; the
     * warps' maxima, sums and partial outputs meet in shared memory */
    const int nd = (int)((D + 31) / 32);
    cu_printf(c->t, "    __shared__ float wm[4], wl[4], wacc[4][%lld];\n", (long long)D);
    cu_printf(c->t, "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n");
    cu_printf(c->t, "    for (long x = 0; x < %lld; x++) {\n        float qr[%d], acc[%d], m = -INFINITY, l = 0.f;\n", (long long)(G * T), nd, nd);
    cu_printf(c->t, "        const long t = x %% %lld, h = hk * %lld + x / %lld;\n", (long long)T, (long long)G, (long long)T);
    cu_printf(c->t, "        const long off = ((b * %lld + t) * %lld + h) * %lld;\n", (long long)T, (long long)H, (long long)D);
    cu_printf(c->t, "#pragma unroll\n        for (int k = 0; k < %d; k++) {\n            const int i = lane + 32 * k;\n", nd);
    cu_printf(c->t, "            qr[k] = 0.f;\n            acc[k] = 0.f;\n            if (i >= %lld) continue;\n", (long long)D);
    cu_printf(c->t, "            float s, co;\n            sincosf((float)(pos + t) * %s[i %% %lld], &s, &co);\n", tab, (long long)half);
    cu_printf(c->t, "            qr[k] = (i < %lld ? ld(%s, off + i) * co - ld(%s, off + i + %lld) * s\n", (long long)half, q, q, (long long)half);
    cu_printf(c->t, "                           : ld(%s, off + i) * co + ld(%s, off + i - %lld) * s) * %.9ef;\n        }\n", q, q, (long long)half,
              a->fattr[0]);
    /* a window of W keys at absolute positions: from pos + t - W + 1 on */
    char first[64] = "0";
    if (W > 0) snprintf(first, sizeof first, "max(0L, pos + t - %lldL)", (long long)(W - 1));
    cu_printf(c->t, "        for (long j = %s + warp; j <= pos + t; j += 4) {\n", first);
    cu_printf(c->t, "            const long kv = ((b * %lld + j) * %lld + hk) * %lld;\n            float s = 0.f;\n", (long long)Tmax,
              (long long)Hkv, (long long)D);
    cu_printf(c->t, "#pragma unroll\n            for (int k = 0; k < %d; k++)\n                if (lane + 32 * k < %lld) s = fmaf(qr[k], ld(%s, kv + lane + 32 * k), s);\n",
              nd, (long long)D, kc);
    cu_printf(c->t, "            s = warp_sum(s);\n");
    if (cap > 0) cu_printf(c->t, "            s = %.9ef * tanhf(s / %.9ef);\n", cap, cap);
    cu_printf(c->t, "            const float mn = fmaxf(m, s), corr = __expf(m - mn), p = __expf(s - mn);\n            l = l * corr + p;\n");
    cu_printf(c->t, "#pragma unroll\n            for (int k = 0; k < %d; k++)\n", nd);
    cu_printf(c->t, "                acc[k] = lane + 32 * k < %lld ? fmaf(p, ld(%s, kv + lane + 32 * k), acc[k] * corr) : 0.f;\n", (long long)D, vc);
    cu_printf(c->t, "            m = mn;\n        }\n");
    cu_printf(c->t, "        if (lane == 0) wm[warp] = m, wl[warp] = l;\n");
    cu_printf(c->t, "#pragma unroll\n        for (int k = 0; k < %d; k++)\n            if (lane + 32 * k < %lld) wacc[warp][lane + 32 * k] = acc[k];\n",
              nd, (long long)D);
    cu_printf(c->t, "        __syncthreads();\n        for (long i = threadIdx.x; i < %lld; i += blockDim.x) {\n", (long long)D);
    cu_printf(c->t, "            const float M = fmaxf(fmaxf(wm[0], wm[1]), fmaxf(wm[2], wm[3]));\n            float L = 0.f, o = 0.f;\n");
    cu_printf(c->t, "            for (int w = 0; w < 4; w++) {\n                const float f = wl[w] > 0.f ? __expf(wm[w] - M) : 0.f;\n");
    cu_printf(c->t, "                L += wl[w] * f;\n                o += wacc[w][i] * f;\n            }\n");
    cu_printf(c->t, "            st(%s, off + i, o / L);\n        }\n        __syncthreads();\n    }\n}\n\n", o);
    c->launch->block = 128;
    c->launch->grid[0] = (unsigned)(B * Hkv);
}
