/* render_attention_grad_general.c — the gradient of attention's general
 * form for CUDA: an additive bias [B|1, H|1, Tq, Tk] (and its gradient
 * where the bias depends on a parameter), Tq != Tk, Dv != Dqk. A block per
 * (batch, key-value head), or one block for them all where the bias's
 * gradient sums over a broadcast axis (so that no two blocks add into the
 * same entries). For each of its G query heads, phases apart by
 * __syncthreads:
 *
 *   1. each query row's rowsum(dP o P) = dy_t . y_t (a thread a row);
 *   2. every entry (t, j): P = exp(s - lse) from the forward's log-sum-exp
 *      (0 where the row does not see the key or the bias is -inf), dS =
 *      P o (dP - rowsum) and the soft-cap's 1 - tanh^2, into the block's
 *      scratch (a thread an entry);
 *   3. the bias's gradient (dS before the soft-cap's factor), dq, dk and
 *      dv, a thread an output element, each a sum over scratch in a fixed
 *      order (no atomics: a run repeats bit for bit).
 *
 * Plain global-memory loops: render_attention_grad.c keeps the tiled
 * kernels for the forms with no bias, Tq == Tk and Dv == Dqk. */
#include "cugen.h"

#define THREADS 256

static const char BODY[] =
    "    const int tid = threadIdx.x;\n"
    "    float *P = scratch + (long)blockIdx.x * (3 * TQ * TK + TQ), *S = P + TQ * TK, *U = S + TQ * TK, *rd = U + TQ * TK;\n"
    "#define QROW(t, w) (((b * TQ + (t)) * H_ + h) * (w))\n"
    "#define KROW(j, w) (((b * TK + (j)) * HKV + hk) * (w))\n"
    "#define BROW(t) ((((BIAS_B ? b : 0L) * BH + (BIAS_H ? h : 0L)) * TQ + (t)) * TK)\n"
    "#define FIRST(t) (W_ > 0 ? max(0L, (t) + 1 - W_) : 0L)\n"
    "#define KEYS(t) (CAUSAL ? min((t) + 1, TK) : TK)\n"
    "#if BIAS_SUM\n"
    "    for (long x = tid; x < BN; x += NTHR) st(DBA, x, 0.f);\n"
    "    __syncthreads();\n"
    "#endif\n"
    "    for (long pair = BIAS_SUM ? 0L : (long)blockIdx.x; pair < (BIAS_SUM ? B_ * HKV : (long)blockIdx.x + 1); pair++) {\n"
    "        const long b = pair / HKV, hk = pair % HKV;\n"
    "#if G_ > 1 /* dk and dv of this pair: sums over its query heads, each element one thread's */\n"
    "#if HAS_DK\n"
    "        for (long x = tid; x < TK * D_; x += NTHR) st(DKA, KROW(x / D_, D_) + x % D_, 0.f);\n"
    "#endif\n"
    "#if HAS_DV\n"
    "        for (long x = tid; x < TK * DV; x += NTHR) st(DVA, KROW(x / DV, DV) + x % DV, 0.f);\n"
    "#endif\n"
    "#endif\n"
    "        for (long gh = 0; gh < G_; gh++) {\n"
    "            const long h = hk * G_ + gh;\n"
    "            for (long t = tid; t < TQ; t += NTHR) {\n"
    "                float a = 0.f;\n"
    "                for (int i = 0; i < DV; i++) a = fmaf(ld(DYA, QROW(t, DV) + i), ld(YA, QROW(t, DV) + i), a);\n"
    "                rd[t] = a;\n"
    "            }\n"
    "            __syncthreads();\n"
    "            for (long x = tid; x < TQ * TK; x += NTHR) {\n"
    "                const long t = x / TK, j = x % TK;\n"
    "                float p = 0.f, ds = 0.f, u = 1.f;\n"
    "                if (j >= FIRST(t) && j < KEYS(t)) {\n"
    "                    float s = 0.f;\n"
    "                    for (int i = 0; i < D_; i++) s = fmaf(ld(QA, QROW(t, D_) + i), ld(KA, KROW(j, D_) + i), s);\n"
    "                    s *= SCALE;\n"
    "#if HAS_CAP\n"
    "                    const float th = tanhf(s / CAP);\n"
    "                    s = CAP * th;\n"
    "                    u = 1.f - th * th;\n"
    "#endif\n"
    "#if HAS_BIAS\n"
    "                    s += ld(BA, BROW(t) + j);\n"
    "#endif\n"
    "                    if (s != -INFINITY) {\n"
    "                        float dp = 0.f;\n"
    "                        for (int i = 0; i < DV; i++) dp = fmaf(ld(DYA, QROW(t, DV) + i), ld(VA, KROW(j, DV) + i), dp);\n"
    "                        p = __expf(s - ld(LSEA, (b * TQ + t) * H_ + h));\n"
    "                        ds = p * (dp - rd[t]);\n"
    "                    }\n"
    "                }\n"
    "                P[x] = p;\n"
    "                S[x] = ds;\n"
    "                U[x] = u;\n"
    "            }\n"
    "            __syncthreads();\n"
    "#if HAS_DB\n"
    "            for (long x = tid; x < TQ * TK; x += NTHR) {\n"
    "                const long at = BROW(0) + x;\n"
    "                st(DBA, at, BIAS_SUM ? ld(DBA, at) + S[x] : S[x]);\n"
    "            }\n"
    "#endif\n"
    "#if HAS_DQ\n"
    "            for (long x = tid; x < TQ * D_; x += NTHR) {\n"
    "                const long t = x / D_, i = x % D_;\n"
    "                float a = 0.f;\n"
    "                for (long j = 0; j < TK; j++) a = fmaf(S[t * TK + j] * U[t * TK + j], ld(KA, KROW(j, D_) + i), a);\n"
    "                st(DQA, QROW(t, D_) + i, a * SCALE);\n"
    "            }\n"
    "#endif\n"
    "#if HAS_DK\n"
    "            for (long x = tid; x < TK * D_; x += NTHR) {\n"
    "                const long j = x / D_, i = x % D_;\n"
    "                float a = 0.f;\n"
    "                for (long t = 0; t < TQ; t++) a = fmaf(S[t * TK + j] * U[t * TK + j], ld(QA, QROW(t, D_) + i), a);\n"
    "                st(DKA, KROW(j, D_) + i, (G_ > 1 ? ld(DKA, KROW(j, D_) + i) : 0.f) + a * SCALE);\n"
    "            }\n"
    "#endif\n"
    "#if HAS_DV\n"
    "            for (long x = tid; x < TK * DV; x += NTHR) {\n"
    "                const long j = x / DV, i = x % DV;\n"
    "                float a = 0.f;\n"
    "                for (long t = 0; t < TQ; t++) a = fmaf(P[t * TK + j], ld(DYA, QROW(t, DV) + i), a);\n"
    "                st(DVA, KROW(j, DV) + i, (G_ > 1 ? ld(DVA, KROW(j, DV) + i) : 0.f) + a);\n"
    "            }\n"
    "#endif\n"
    "            __syncthreads();\n"
    "        }\n"
    "    }\n"
    "}\n";

static const char *const NAMES[] = {"QROW", "KROW", "BROW", "FIRST", "KEYS", "NTHR", "B_", "TQ", "TK", "H_", "HKV", "G_", "D_", "DV",
                                    "HAS_CAP", "BH", "BN", "BIAS_B", "BIAS_H", "BIAS_SUM", "W_", "CAUSAL", "SCALE", "CAP", "HAS_BIAS", "HAS_DB",
                                    "HAS_DQ", "HAS_DK", "HAS_DV", "QA", "KA", "VA", "DYA", "YA", "LSEA", "BA", "DQA", "DKA", "DVA", "DBA"};

bool cu_render_attention_grad_general(cu_gen *c, const lrc_node *n, const int out_of[4])
{
    const lrc_graph *g = c->g;
    const lrc_shape *qs = &g->nodes[n->in[0]].shape, *vs = &g->nodes[n->in[2]].shape;
    const lrc_shape *bs = n->n_in > 6 ? &g->nodes[n->in[6]].shape : NULL;
    if (!bs && vs->dim[1] == qs->dim[1] && vs->dim[3] == qs->dim[3]) return false; /* the tiled kernels' forms */
    int64_t B = qs->dim[0], Tq = qs->dim[1], H = qs->dim[2], D = qs->dim[3], Tk = vs->dim[1], Hkv = vs->dim[2], Dv = vs->dim[3];
    bool bias_sum = out_of[3] >= 0 && ((bs->dim[0] == 1 && B > 1) || (bs->dim[1] == 1 && H > 1));
    int64_t blocks = bias_sum ? 1 : B * Hkv;
    c->launch->scratch_bytes = blocks * (3 * Tq * Tk + Tq) * 4; /* P, dS, 1 - tanh^2 and the row sums */
    cu_kernel_begin(c, THREADS);
    cu_printf(c->t, "#define NTHR %d\n#define B_ %lldL\n#define TQ %lldL\n#define TK %lldL\n#define H_ %lldL\n#define HKV %lldL\n", THREADS,
              (long long)B, (long long)Tq, (long long)Tk, (long long)H, (long long)Hkv);
    cu_printf(c->t, "#define G_ %lld\n#define D_ %lld\n#define DV %lld\n#define W_ %lldL\n#define CAUSAL %d\n", (long long)(H / Hkv),
              (long long)D, (long long)Dv, (long long)n->iattr[2], n->iattr[0] != 0);
    cu_printf(c->t, "#define SCALE %.9ef\n#define CAP %.9ef\n#define HAS_CAP %d\n", n->fattr[0], n->fattr[1], n->fattr[1] > 0);
    cu_printf(c->t, "#define HAS_BIAS %d\n#define BH %lldL\n#define BN %lldL\n#define BIAS_B %d\n#define BIAS_H %d\n#define BIAS_SUM %d\n",
              bs != NULL, (long long)(bs ? bs->dim[1] : 1), (long long)(bs ? lrc_shape_numel(bs) : 0), bs && bs->dim[0] > 1,
              bs && bs->dim[1] > 1, bias_sum);
    char arg[11][16] = {"0", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0"}; /* q, k, v, dy, y, lse, bias; dq, dk, dv, dbias */
    for (int i = 0; i < n->n_in; i++) cu_arg(c, n->in[i], arg[i], sizeof arg[i]);
    for (int w = 0; w < 4; w++)
        if (out_of[w] >= 0) cu_arg(c, out_of[w], arg[7 + w], sizeof arg[7 + w]);
    cu_printf(c->t, "#define HAS_DQ %d\n#define HAS_DK %d\n#define HAS_DV %d\n#define HAS_DB %d\n", out_of[0] >= 0, out_of[1] >= 0,
              out_of[2] >= 0, out_of[3] >= 0);
    cu_printf(c->t, "#define QA %s\n#define KA %s\n#define VA %s\n#define DYA %s\n#define YA %s\n#define LSEA %s\n#define BA %s\n", arg[0],
              arg[1], arg[2], arg[3], arg[4], arg[5], arg[6]);
    cu_printf(c->t, "#define DQA %s\n#define DKA %s\n#define DVA %s\n#define DBA %s\n", arg[7], arg[8], arg[9], arg[10]);
    cu_printf(c->t, "%s", BODY);
    for (size_t i = 0; i < sizeof NAMES / sizeof *NAMES; i++) cu_printf(c->t, "#undef %s\n", NAMES[i]);
    cu_printf(c->t, "\n");
    c->launch->block = THREADS;
    c->launch->grid[0] = (unsigned)blocks;
    return true;
}
