/* test_cpu_kernels — every op and every kind of fused kernel of the cpu
 * target against the reference executor, on random inputs with fixed seeds
 * and odd shapes (not multiples of the vector width, the GEMM micro-tile or
 * its blocks), with guard bytes after every input, parameter and output
 * buffer to catch out-of-bounds writes (ggml's test-backend-ops pattern).
 * The fused kernels against the same ops apart: test_cpu_fusions.c. */
#include "check.h"
#include "cpu_graph.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 256
#define GUARD_BYTE 0x5A

typedef int (*build_fn)(lrc_graph *g, const int64_t *d);

/* ---- the cases: d[] are the sizes of each case ------------------------- */

static int b_elementwise(lrc_graph *g, const int64_t *d)
{ /* y = silu(a * v + b) * 0.5 with v a vector along the last axis; z = a + s (scalar) */
    int64_t sh[2] = {d[0], d[1]}, vd[1] = {d[1]}, sd[1] = {1};
    int a = input(g, "a", 2, sh, LRC_F32), b = input(g, "b", 2, sh, LRC_F32);
    int v = input(g, "v", 1, vd, LRC_F32), s = input(g, "s", 1, sd, LRC_F32);
    int y = op(g, LRC_OP_SCALE, op(g, LRC_OP_SILU, op(g, LRC_OP_ADD, op(g, LRC_OP_MUL, a, v, 0, 0, 0), b, 0, 0, 0), 0, 0, 0, 0),
               0, 0, 0.5, 0);
    return out(g, "y", y) || out(g, "z", op(g, LRC_OP_ADD, a, s, 0, 0, 0));
}

static int b_rmsnorm(lrc_graph *g, const int64_t *d)
{ /* prologue (x + r), rmsnorm, epilogue (* w + x) */
    int64_t sh[3] = {d[0], d[1], d[2]}, wd[1] = {d[2]};
    int x = input(g, "x", 3, sh, LRC_F32), r = input(g, "r", 3, sh, LRC_F32), w = param(g, "w", 1, wd);
    int n = op(g, LRC_OP_RMSNORM, op(g, LRC_OP_ADD, x, r, 0, 0, 0), 0, 0, 1e-5, 0);
    return out(g, "y", op(g, LRC_OP_ADD, op(g, LRC_OP_MUL, n, w, 0, 0, 0), x, 0, 0, 0));
}

static int b_softmax(lrc_graph *g, const int64_t *d)
{
    int64_t sh[2] = {d[0], d[1]};
    int x = input(g, "x", 2, sh, LRC_F32);
    return out(g, "y", op(g, LRC_OP_SOFTMAX, op(g, LRC_OP_SCALE, x, 0, 0, 8.0, 0), 0, 0, 0, 0));
}

static int slice(lrc_graph *g, int x, int axis, int64_t start, int64_t size)
{
    lrc_err err;
    lrc_node n = {.op = LRC_OP_SLICE, .n_in = 1, .in = {x}, .iattr = {axis, start, size}};
    int id = lrc_graph_add(g, &n, &err);
    if (id < 0) printf("  build: %s\n", err.msg);
    return id;
}

static int b_vision(lrc_graph *g, const int64_t *d)
{ /* the ViT (and Parcae) ops: layernorm (prologue x + r, epilogue * w + b), gelu and
   * their gradients, slices that narrow and pad, broadcasts the fused
   * kernels cannot index ([1, T, D] over a batch; a column [B, T, 1]) */
    int64_t sh[3] = {d[0], d[1], d[2]}, wd[1] = {d[2]}, pos[3] = {1, d[1], d[2]}, col[3] = {d[0], d[1], 1};
    int x = input(g, "x", 3, sh, LRC_F32), r = input(g, "r", 3, sh, LRC_F32), dy = input(g, "dy", 3, sh, LRC_F32);
    int w = param(g, "w", 1, wd), b = param(g, "b", 1, wd), p = param(g, "pos", 3, pos), c = input(g, "c", 3, col, LRC_F32);
    /* rows with a large mean (a scalar of N(0, 0.5) times 30): the variance must not cancel */
    int64_t one[1] = {1};
    int shift = op(g, LRC_OP_SCALE, param(g, "shift", 1, one), 0, 0, 30.0, 0);
    int n = op(g, LRC_OP_LAYERNORM, op(g, LRC_OP_ADD, op(g, LRC_OP_ADD, x, r, 0, 0, 0), shift, 0, 0, 0), 0, 0, 1e-5, 0);
    return out(g, "ln", op(g, LRC_OP_ADD, op(g, LRC_OP_MUL, n, w, 0, 0, 0), b, 0, 0, 0)) ||
           out(g, "gelu", op(g, LRC_OP_GELU, op(g, LRC_OP_SCALE, x, 0, 0, 4.0, 0), 0, 0, 0, 0)) ||
           out(g, "gelu_grad", op(g, LRC_OP_GELU_GRAD, op(g, LRC_OP_SCALE, x, 0, 0, 4.0, 0), dy, 0, 0, 0)) ||
           out(g, "ln_grad", op(g, LRC_OP_LAYERNORM_GRAD, op(g, LRC_OP_ADD, x, op(g, LRC_OP_SCALE, w, 0, 0, 30.0, 0), 0, 0, 0), dy, 0, 1e-5, 0)) ||
           out(g, "narrow", slice(g, x, 1, d[1] > 1 ? 1 : 0, d[1] > 1 ? d[1] - 1 : 1)) ||
           out(g, "pad", slice(g, x, 1, -1, d[1] + 2)) ||
           out(g, "pad_last", slice(g, x, 2, -2, d[2] + 2)) ||
           out(g, "pos", op(g, LRC_OP_ADD, x, p, 0, 0, 0)) ||
           out(g, "col", op(g, LRC_OP_MUL, x, c, 0, 0, 0)) ||
           /* and Parcae's: relu^2 and its gradient, exp, softplus over a wide range */
           out(g, "relu2", op(g, LRC_OP_MUL, op(g, LRC_OP_RELU, x, 0, 0, 0, 0), op(g, LRC_OP_RELU, x, 0, 0, 0, 0), 0, 0, 0)) ||
           out(g, "relu_grad", op(g, LRC_OP_RELU_GRAD, x, dy, 0, 0, 0)) ||
           out(g, "exp", op(g, LRC_OP_EXP, op(g, LRC_OP_SCALE, x, 0, 0, 3.0, 0), 0, 0, 0, 0)) ||
           out(g, "softplus", op(g, LRC_OP_SOFTPLUS, op(g, LRC_OP_SCALE, x, 0, 0, 20.0, 0), 0, 0, 0, 0)) ||
           /* tanh, sigmoid into saturation, gelu_tanh, and their gradients (tanh's and sigmoid's from the output) */
           out(g, "tanh", op(g, LRC_OP_TANH, op(g, LRC_OP_SCALE, x, 0, 0, 6.0, 0), 0, 0, 0, 0)) ||
           out(g, "sigmoid", op(g, LRC_OP_SIGMOID, op(g, LRC_OP_SCALE, x, 0, 0, 12.0, 0), 0, 0, 0, 0)) ||
           out(g, "gelu_tanh", op(g, LRC_OP_GELU_TANH, op(g, LRC_OP_SCALE, x, 0, 0, 4.0, 0), 0, 0, 0, 0)) ||
           out(g, "tanh_grad", op(g, LRC_OP_TANH_GRAD, op(g, LRC_OP_TANH, op(g, LRC_OP_SCALE, x, 0, 0, 3.0, 0), 0, 0, 0, 0), dy, 0, 0, 0)) ||
           out(g, "sigmoid_grad", op(g, LRC_OP_SIGMOID_GRAD, op(g, LRC_OP_SIGMOID, op(g, LRC_OP_SCALE, x, 0, 0, 6.0, 0), 0, 0, 0, 0), dy, 0, 0, 0)) ||
           out(g, "gelu_tanh_grad", op(g, LRC_OP_GELU_TANH_GRAD, op(g, LRC_OP_SCALE, x, 0, 0, 4.0, 0), dy, 0, 0, 0));
}

static int b_gemm(lrc_graph *g, const int64_t *d)
{ /* Y = silu(X W1^T) * (X W2^T) + R: two GEMMs, epilogues reading the other's output */
    int64_t xs[3] = {d[0], d[1], d[3]}, ws[2] = {d[2], d[3]}, ys[3] = {d[0], d[1], d[2]};
    int x = input(g, "x", 3, xs, LRC_F32), r = input(g, "r", 3, ys, LRC_F32);
    int w1 = param(g, "w1", 2, ws), w2 = param(g, "w2", 2, ws);
    int a = op(g, LRC_OP_SILU, op(g, LRC_OP_MATMUL, x, w1, 0, 0, 0), 0, 0, 0, 0);
    int y = op(g, LRC_OP_ADD, op(g, LRC_OP_MUL, a, op(g, LRC_OP_MATMUL, x, w2, 0, 0, 0), 0, 0, 0), r, 0, 0, 0);
    return out(g, "y", y) || out(g, "plain", op(g, LRC_OP_MATMUL, r, param(g, "w3", 2, (int64_t[]){d[3], d[2]}), 0, 0, 0));
}

static int b_attention(lrc_graph *g, const int64_t *d)
{ /* causal attention with RoPE on q and k (fused), and a non-causal one without */
    int64_t B = d[0], T = d[1], H = d[2], D = d[3], sh[4] = {B, T, H, D}, flat[3] = {B, T, H * D};
    int q = input(g, "q", 4, sh, LRC_F32), k = input(g, "k", 4, sh, LRC_F32), v = input(g, "v", 4, sh, LRC_F32);
    int qf = input(g, "qf", 3, flat, LRC_F32);
    int q2 = reshape(g, qf, 4, sh);
    int a = op(g, LRC_OP_ATTENTION, op(g, LRC_OP_ROPE, q2, 0, 0, 500.0, 0), op(g, LRC_OP_ROPE, k, 0, 0, 10000.0, 0), v,
               1.0 / sqrt((double)D), 1);
    int b = op(g, LRC_OP_ATTENTION, q, k, v, 0.3, 0);
    return out(g, "causal", a) || out(g, "full", b) || out(g, "rope", op(g, LRC_OP_ROPE, q, 0, 0, 100.0, 0));
}

/* One attention node with every attribute (causal, window; scale, softcap). */
static int attn(lrc_graph *g, int q, int k, int v, int64_t causal, int64_t window, double scale, double cap)
{
    lrc_err err;
    lrc_node n = {.op = LRC_OP_ATTENTION, .n_in = 3, .in = {q, k, v}, .iattr = {causal, window}, .fattr = {scale, cap}};
    int id = lrc_graph_add(g, &n, &err);
    if (id < 0) printf("  build: %s\n", err.msg);
    return id;
}

static int b_attention_ext(lrc_graph *g, const int64_t *d)
{ /* k and v with d[4] heads (GQA), RoPE fused; sliding windows of 5 and 2 (of 3 and 5 with the soft-cap), non-causal GQA */
    int64_t B = d[0], T = d[1], H = d[2], D = d[3], sh[4] = {B, T, H, D}, kvs[4] = {B, T, d[4], D};
    int q = input(g, "q", 4, sh, LRC_F32), k = input(g, "k", 4, kvs, LRC_F32), v = input(g, "v", 4, kvs, LRC_F32);
    int rq = op(g, LRC_OP_ROPE, q, 0, 0, 500.0, 0), rk = op(g, LRC_OP_ROPE, k, 0, 0, 500.0, 0);
    return out(g, "gqa_win_cap", attn(g, rq, rk, v, 1, 3, 2.0 / sqrt((double)D), 1.5)) ||
           out(g, "gqa_win", attn(g, q, k, v, 1, 5, 1.0 / sqrt((double)D), 0)) ||
           /* kernels that differ in the window or the soft-cap alone must not share code (the signature) */
           out(g, "gqa_win2", attn(g, q, k, v, 1, 2, 1.0 / sqrt((double)D), 0)) ||
           out(g, "gqa_win5_cap", attn(g, q, k, v, 1, 5, 1.0 / sqrt((double)D), 1.5)) ||
           out(g, "gqa_full", attn(g, q, k, v, 0, 0, 0.3, 0));
}

/* attention's general form: an optional bias (-1: none) as the fourth input */
static int attn_bias(lrc_graph *g, int q, int k, int v, int bias, int64_t causal, int64_t window, double scale, double cap)
{
    lrc_err err;
    lrc_node n = {.op = LRC_OP_ATTENTION, .n_in = bias >= 0 ? 4 : 3, .in = {q, k, v, bias}, .iattr = {causal, window}, .fattr = {scale, cap}};
    int id = lrc_graph_add(g, &n, &err);
    if (id < 0) printf("  build: %s\n", err.msg);
    return id;
}

static int b_attention_general(lrc_graph *g, const int64_t *d)
{ /* d: B, Tq, Tk, Dqk, Dv; 4 query heads over 2 key-value heads; biases [1,1,Tq,Tk], [B,1,Tq,Tk] and
   * [B,4,Tq,Tk]; a padding mask ("mask", -inf entries and a whole row of them, pad_mask); RoPE fused */
    int64_t B = d[0], Tq = d[1], Tk = d[2], qs[4] = {B, Tq, 4, d[3]}, ks[4] = {B, Tk, 2, d[3]}, vs[4] = {B, Tk, 2, d[4]};
    int64_t b11[4] = {1, 1, Tq, Tk}, bb1[4] = {B, 1, Tq, Tk}, bbh[4] = {B, 4, Tq, Tk};
    int q = input(g, "q", 4, qs, LRC_F32), k = input(g, "k", 4, ks, LRC_F32), v = input(g, "v", 4, vs, LRC_F32);
    int x11 = input(g, "b11", 4, b11, LRC_F32), xb1 = input(g, "bb1", 4, bb1, LRC_F32), xbh = input(g, "bbh", 4, bbh, LRC_F32);
    int mask = input(g, "mask", 4, bb1, LRC_F32);
    int rq = op(g, LRC_OP_ROPE, q, 0, 0, 500.0, 0), rk = op(g, LRC_OP_ROPE, k, 0, 0, 500.0, 0);
    double sc = 1.0 / sqrt((double)d[3]);
    return out(g, "plain_full", attn_bias(g, q, k, v, -1, 0, 0, sc, 0)) || out(g, "plain_causal", attn_bias(g, q, k, v, -1, 1, 0, sc, 0)) ||
           out(g, "b11", attn_bias(g, q, k, v, x11, 0, 0, 0.4, 0)) ||
           out(g, "bb1_causal_cap", attn_bias(g, q, k, v, xb1, 1, 0, sc, 1.5)) ||
           out(g, "bbh_window", attn_bias(g, q, k, v, xbh, 1, 3, sc, 0)) ||
           out(g, "mask", attn_bias(g, q, k, v, mask, 0, 0, sc, 0)) ||
           out(g, "mask_causal", attn_bias(g, q, k, v, mask, 1, 0, sc, 0)) ||
           out(g, "rope_b11_causal", attn_bias(g, rq, rk, v, x11, 1, 0, sc, 0));
}

/* A padding mask [B,1,Tq,Tk] over its random values: batch b hides its last
 * b keys, and the last batch's last query row sees no key at all (zeros
 * out). */
static void pad_mask(lrc_tensor *t)
{
    const lrc_shape *s = &t->shape;
    int64_t B = s->dim[0], Tq = s->dim[2], Tk = s->dim[3];
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < Tq; i++)
            for (int64_t j = 0; j < Tk; j++)
                if (j >= Tk - b || (b == B - 1 && i == Tq - 1)) ((float *)t->data)[(b * Tq + i) * Tk + j] = -INFINITY;
}

static int b_misc(lrc_graph *g, const int64_t *d)
{ /* embedding, transpose, LayerRoPE depth_gain, cross-entropy and its gradient (which reads the loss's statistics) */
    int64_t ids[2] = {d[0], d[1]}, tab[2] = {d[2], d[3]}, gd[1] = {d[3]}, sc[1] = {1};
    int t = input(g, "tokens", 2, ids, LRC_I32), w = param(g, "table", 2, tab);
    int e = op(g, LRC_OP_EMBEDDING, t, w, 0, 0, 0);
    lrc_err err;
    lrc_node tr = {.op = LRC_OP_TRANSPOSE, .n_in = 1, .in = {e}, .n_iattr = 3, .iattr = {2, 0, 1}};
    int gam = param(g, "gamma", 1, gd), s1 = param(g, "a", 0, sc), s2 = param(g, "b", 0, sc);
    lrc_node dg = {.op = LRC_OP_DEPTH_GAIN, .n_in = 5, .in = {gam, s1, s2, s1, s2}, .iattr = {5}, .fattr = {100}};
    int64_t lg[3] = {d[0], d[1], d[4]};
    int logits = input(g, "logits", 3, lg, LRC_F32), labels = input(g, "labels", 2, ids, LRC_I32);
    return out(g, "emb", e) || out(g, "tr", lrc_graph_add(g, &tr, &err)) || out(g, "gain", lrc_graph_add(g, &dg, &err)) ||
           out(g, "loss", op(g, LRC_OP_CROSS_ENTROPY, logits, labels, 0, 0, 0)) ||
           out(g, "loss_grad", op(g, LRC_OP_CROSS_ENTROPY_GRAD, logits, labels, 0, 0, 0));
}


static int b_grads(lrc_graph *g, const int64_t *d)
{ /* the gradient ops the cpu target renders outside GEMMs and attention */
    lrc_err err;
    int64_t sh[3] = {d[0], d[1], d[2]}, r4[4] = {d[0], d[1], 2, d[3]}, ids[2] = {d[0], d[1]}, vd[1] = {d[2] - d[2] % 2}, sc[1] = {1};
    int x = input(g, "x", 3, sh, LRC_F32), dy = input(g, "dy", 3, sh, LRC_F32);
    int q = input(g, "q", 4, r4, LRC_F32), t = input(g, "tokens", 2, ids, LRC_I32), labels = input(g, "labels", 2, ids, LRC_I32);
    int rc = out(g, "silu_grad", op(g, LRC_OP_SILU_GRAD, x, dy, 0, 0, 0)) ||
             out(g, "rope_grad", op(g, LRC_OP_ROPE_GRAD, q, 0, 0, 321.0, 0)) ||
             out(g, "rmsnorm_grad", op(g, LRC_OP_RMSNORM_GRAD, x, dy, 0, 1e-3, 0)) ||
             out(g, "softmax_grad", op(g, LRC_OP_SOFTMAX_GRAD, op(g, LRC_OP_SOFTMAX, x, 0, 0, 0, 0), dy, 0, 0, 0)) ||
             out(g, "ce_grad", op(g, LRC_OP_CROSS_ENTROPY_GRAD, x, labels, 0, 0, 0));
    lrc_node st = {.op = LRC_OP_SUM_TO, .n_in = 1, .in = {dy}, .n_iattr = 1, .iattr = {d[2]}};
    lrc_node st2 = {.op = LRC_OP_SUM_TO, .n_in = 1, .in = {dy}, .n_iattr = 3, .iattr = {1, d[1], 1}};
    lrc_node eg = {.op = LRC_OP_EMBEDDING_GRAD, .n_in = 2, .in = {t, dy}, .iattr = {d[4]}};
    /* a gain's gradient: the rows of x dy summed, the product inside the sum's kernel (fuse rule 10) */
    lrc_node sp = {.op = LRC_OP_SUM_TO, .n_in = 1, .in = {op(g, LRC_OP_MUL, x, dy, 0, 0, 0)}, .n_iattr = 1, .iattr = {d[2]}};
    rc = rc || out(g, "sum_to", lrc_graph_add(g, &st, &err)) || out(g, "sum_to2", lrc_graph_add(g, &st2, &err)) ||
         out(g, "sum_product", lrc_graph_add(g, &sp, &err)) || out(g, "embedding_grad", lrc_graph_add(g, &eg, &err));
    int gam = param(g, "gamma", 1, vd), a1 = param(g, "a1", 0, sc), a2 = param(g, "a2", 0, sc), gy = input(g, "gy", 1, vd, LRC_F32);
    for (int w = 0; w < 5 && !rc; w++) {
        char name[32];
        snprintf(name, sizeof name, "depth_gain_grad%d", w);
        lrc_node dg = {.op = LRC_OP_DEPTH_GAIN_GRAD, .n_in = 6, .in = {gam, a1, a2, a2, a1, gy}, .iattr = {3, w}, .fattr = {100}};
        rc = out(g, name, lrc_graph_add(g, &dg, &err));
    }
    return rc;
}

static int b_gemm_grads(lrc_graph *g, const int64_t *d)
{ /* dx = dy W (+ another gradient), dW = dy^T x: the GEMMs of a backward pass */
    int64_t ys[3] = {d[0], d[1], d[2]}, xs[3] = {d[0], d[1], d[3]}, ws[2] = {d[2], d[3]};
    int dy = input(g, "dy", 3, ys, LRC_F32), x = input(g, "x", 3, xs, LRC_F32), r = input(g, "r", 3, xs, LRC_F32);
    int w = param(g, "w", 2, ws);
    /* the operand through a view whose buffer has another shape: packing
     * must use the view's sizes (a bug once wrote 4x past the packed buffer) */
    int64_t flat[2] = {d[0], d[1] * d[3]};
    int xf = input(g, "xflat", 2, flat, LRC_F32), xv = reshape(g, op(g, LRC_OP_SCALE, xf, 0, 0, 1.5, 0), 3, xs);
    return out(g, "dx", op(g, LRC_OP_ADD, op(g, LRC_OP_MATMUL_NN, dy, w, 0, 0, 0), r, 0, 0, 0)) ||
           out(g, "dw", op(g, LRC_OP_MATMUL_TN, dy, x, 0, 0, 0)) || out(g, "dw_view", op(g, LRC_OP_MATMUL_TN, dy, xv, 0, 0, 0));
}

/* dq, dk and dv (which 0, 1, 2) of an attention with these attributes, as
 * autodiff builds them: from the forward's output and its attention_lse,
 * which the forward's kernel writes (fuse rule 7); y and lse are outputs
 * too, so that the fused statistics are compared with ref's. */
static int attn_grads(lrc_graph *g, const char *tag, int q, int k, int v, int dy, int64_t causal, int64_t window, double scale,
                      double cap)
{
    lrc_err err;
    char name[40];
    int y = attn(g, q, k, v, causal, window, scale, cap);
    lrc_node l = {.op = LRC_OP_ATTENTION_LSE, .n_in = 3, .in = {q, k, v}, .iattr = {causal, window}, .fattr = {scale, cap}};
    int lse = lrc_graph_add(g, &l, &err);
    snprintf(name, sizeof name, "y_%s", tag);
    int rc = out(g, name, y);
    snprintf(name, sizeof name, "lse_%s", tag);
    rc = rc || out(g, name, lse);
    for (int w = 0; w < 3 && !rc; w++) {
        snprintf(name, sizeof name, "d%c_%s", "qkv"[w], tag);
        lrc_node n = {.op = LRC_OP_ATTENTION_GRAD, .n_in = 6, .in = {q, k, v, dy, y, lse}, .iattr = {causal, w, window},
                      .fattr = {scale, cap}};
        rc = out(g, name, lrc_graph_add(g, &n, &err));
    }
    return rc;
}

static int b_attention_grad_ext(lrc_graph *g, const int64_t *d)
{ /* dq, dk, dv (one kernel, fuse rule 6) with k and v of d[4] heads, a window (3; 37 on rows over
   * 40, so that it starts inside a block of keys) and the soft-cap; full GQA */
    int64_t sh[4] = {d[0], d[1], d[2], d[3]}, kvs[4] = {d[0], d[1], d[4], d[3]};
    int q = input(g, "q", 4, sh, LRC_F32), k = input(g, "k", 4, kvs, LRC_F32), v = input(g, "v", 4, kvs, LRC_F32);
    int dy = input(g, "dy", 4, sh, LRC_F32), rc = 0;
    for (int causal = 0; causal < 2 && !rc; causal++)
        rc = attn_grads(g, causal ? "window_cap" : "full", q, k, v, dy, causal, causal ? (d[1] > 40 ? 37 : 3) : 0, 0.9, causal ? 1.5 : 0);
    return rc;
}

static int b_attention_grad(lrc_graph *g, const int64_t *d)
{ /* dq, dk, dv of causal and of full attention */
    int64_t sh[4] = {d[0], d[1], d[2], d[3]};
    int q = input(g, "q", 4, sh, LRC_F32), k = input(g, "k", 4, sh, LRC_F32), v = input(g, "v", 4, sh, LRC_F32);
    int dy = input(g, "dy", 4, sh, LRC_F32), rc = 0;
    for (int causal = 0; causal < 2 && !rc; causal++) rc = attn_grads(g, causal ? "causal" : "full", q, k, v, dy, causal, 0, 0.37, 0);
    return rc;
}

/* dq, dk, dv and (where dbias) the bias's gradient of the general form as
 * autodiff builds them (bias -1: none), y an output too (not lse: a row
 * that sees no key has -inf, which a relative error cannot compare) */
static int attn_grads_general(lrc_graph *g, const char *tag, int q, int k, int v, int dy, int bias, bool dbias, int64_t causal,
                              int64_t window, double scale, double cap)
{
    lrc_err err;
    char name[48];
    int y = attn_bias(g, q, k, v, bias, causal, window, scale, cap);
    lrc_node l = {.op = LRC_OP_ATTENTION_LSE, .n_in = bias >= 0 ? 4 : 3, .in = {q, k, v, bias}, .iattr = {causal, window}, .fattr = {scale, cap}};
    int lse = lrc_graph_add(g, &l, &err);
    snprintf(name, sizeof name, "y_%s", tag);
    int rc = lse < 0 || out(g, name, y);
    for (int w = 0; w < (dbias ? 4 : 3) && !rc; w++) {
        snprintf(name, sizeof name, "d%s_%s", w == 3 ? "bias" : w == 0 ? "q" : w == 1 ? "k" : "v", tag);
        lrc_node n = {.op = LRC_OP_ATTENTION_GRAD, .n_in = bias >= 0 ? 7 : 6, .in = {q, k, v, dy, y, lse, bias},
                      .iattr = {causal, w, window}, .fattr = {scale, cap}};
        rc = out(g, name, lrc_graph_add(g, &n, &err));
    }
    return rc;
}

static int b_attention_grad_general(lrc_graph *g, const int64_t *d)
{ /* d: B, Tq, Tk, Dqk, Dv; 4 query heads over 2 key-value heads: no bias with Tq != Tk or Dv != Dqk; a
   * bias [1,1,Tq,Tk] with its gradient (summed over batch and heads: one work item), [B,4,Tq,Tk] with its
   * gradient (each item's own rows), causal with the soft-cap and a window; a padding mask (-inf
   * entries, a whole row of them) with no gradient of its own, full and causal */
    int64_t B = d[0], Tq = d[1], Tk = d[2], qs[4] = {B, Tq, 4, d[3]}, ks[4] = {B, Tk, 2, d[3]}, vs[4] = {B, Tk, 2, d[4]};
    int64_t ys[4] = {B, Tq, 4, d[4]}, b11[4] = {1, 1, Tq, Tk}, bb1[4] = {B, 1, Tq, Tk}, bbh[4] = {B, 4, Tq, Tk};
    int q = input(g, "q", 4, qs, LRC_F32), k = input(g, "k", 4, ks, LRC_F32), v = input(g, "v", 4, vs, LRC_F32);
    int dy = input(g, "dy", 4, ys, LRC_F32);
    int x11 = input(g, "b11", 4, b11, LRC_F32), xbh = input(g, "bbh", 4, bbh, LRC_F32), mask = input(g, "mask", 4, bb1, LRC_F32);
    double sc = 1.0 / sqrt((double)d[3]);
    return attn_grads_general(g, "plain", q, k, v, dy, -1, false, 0, 0, sc, 0) ||
           attn_grads_general(g, "plain_causal", q, k, v, dy, -1, false, 1, 0, sc, 0) ||
           attn_grads_general(g, "b11", q, k, v, dy, x11, true, 0, 0, 0.4, 0) ||
           attn_grads_general(g, "bbh_causal_cap_window", q, k, v, dy, xbh, true, 1, 3, sc, 1.5) ||
           attn_grads_general(g, "mask", q, k, v, dy, mask, false, 0, 0, sc, 0) ||
           attn_grads_general(g, "mask_causal", q, k, v, dy, mask, false, 1, 0, sc, 0);
}

/* ---- the harness ------------------------------------------------------- */

/* A tensor whose storage has GUARD pattern bytes after its data. */
static lrc_tensor *guarded(const char *name, lrc_dtype t, const lrc_shape *s)
{
    lrc_err err;
    lrc_tensor *x = lrc_tensor_new(name, t, s, &err);
    x->data = realloc(x->data, x->nbytes + GUARD);
    memset((char *)x->data + x->nbytes, GUARD_BYTE, GUARD);
    return x;
}

static bool guard_ok(const lrc_tensor *t)
{
    for (size_t i = 0; i < GUARD; i++)
        if (((const unsigned char *)t->data)[t->nbytes + i] != GUARD_BYTE) return false;
    return true;
}


static void run_case(const char *name, build_fn build, const int64_t *d, uint64_t seed)
{
    lrc_err err;
    char label[160];
    snprintf(label, sizeof label, "%s [%lld,%lld,%lld,%lld,%lld]", name, (long long)d[0], (long long)d[1],
             (long long)d[2], (long long)d[3], (long long)d[4]);
    lrc_graph *g = lrc_graph_new(), *g2 = lrc_graph_new();
    if (build(g, d) || build(g2, d) || lrc_graph_verify(g, &err)) {
        printf("FAIL %s: cannot build\n", label);
        failed++;
        lrc_graph_free(g);
        lrc_graph_free(g2);
        return;
    }
    lrc_rng r;
    lrc_rng_seed(&r, seed);
    lrc_tensor_set in, params, want, got;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&params);
    lrc_tensor_set_init(&want);
    lrc_tensor_set_init(&got);
    int64_t vocab = 1;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].op == LRC_OP_EMBEDDING) vocab = g->nodes[g->nodes[i].in[1]].shape.dim[0];
        if (g->nodes[i].op == LRC_OP_EMBEDDING_GRAD) vocab = g->nodes[i].iattr[0];
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const lrc_node *n = &g->nodes[i];
        if (n->op != LRC_OP_INPUT && n->op != LRC_OP_PARAM) continue;
        lrc_tensor *t = guarded(n->name, n->dtype, &n->shape);
        int64_t range = !strcmp(n->name, "labels") ? d[4] : vocab;
        fill(t, &r, range);
        if (!strcmp(n->name, "mask")) pad_mask(t);
        lrc_tensor_set_add(n->op == LRC_OP_INPUT ? &in : &params, t, &err);
    }
    for (int i = 0; i < g->n_outputs; i++)
        lrc_tensor_set_add(&got, guarded(g->output_names[i], LRC_F32, &g->nodes[g->outputs[i]].shape), &err);
    lrc_backend *ref = lrc_backend_ref_new();
    lrc_compiled c;
    lrc_pool *pool = lrc_pool_new(2, &err);
    lrc_exec *x = NULL;
    int rc = lrc_exec_run(ref, g, &in, &params, &want, &err);
    if (!rc) rc = lrc_compile_graph(g2, NULL, &c, &err);
    else memset(&c, 0, sizeof c), lrc_graph_free(g2);
    if (!rc) rc = lrc_exec_new(&c.plan, pool, &x, &err);
    if (!rc) rc = lrc_exec_bind_params(x, &params, &err);
    if (!rc) rc = lrc_exec_run_plan(x, &in, &got, &err);
    /* again, over outputs set to NaN: a kernel's state (the cross-entropy's
     * count of finished rows) must be ready for the next run */
    for (int i = 0; i < got.n && !rc; i++)
        for (int64_t j = 0; j < lrc_shape_numel(&got.items[i]->shape); j++) ((float *)got.items[i]->data)[j] = NAN;
    if (!rc) rc = lrc_exec_run_plan(x, &in, &got, &err);
    bool ok = !rc;
    if (rc) printf("FAIL %s: %s\n", label, err.msg);
    for (int i = 0; i < want.n && ok; i++) {
        const lrc_tensor *a = lrc_tensor_set_find(&got, want.items[i]->name), *b = want.items[i];
        double num = 0, den = 0;
        for (int64_t j = 0; j < lrc_shape_numel(&b->shape); j++) {
            double dlt = (double)((float *)a->data)[j] - ((float *)b->data)[j];
            num += dlt * dlt;
            den += (double)((float *)b->data)[j] * ((float *)b->data)[j];
        }
        double rel = sqrt(num) / (den > 0 ? sqrt(den) : 1);
        if (!(rel <= 1e-5)) {
            printf("FAIL %s: output %s relative error %.3e\n", label, b->name, rel);
            ok = false;
        }
    }
    for (int i = 0; i < in.n; i++) ok = ok && guard_ok(in.items[i]);
    for (int i = 0; i < params.n; i++) ok = ok && guard_ok(params.items[i]);
    for (int i = 0; i < got.n; i++)
        if (!guard_ok(got.items[i])) {
            printf("FAIL %s: wrote past the end of output %s\n", label, got.items[i]->name);
            ok = false;
        }
    /* the statistics the backward reads come from the forward's kernel
     * (fuse rule 7), never from a second pass over the scores */
    for (int i = 0; ok && c.g && i < c.g->n_nodes; i++)
        if (c.g->nodes[i].op == LRC_OP_ATTENTION_LSE && c.g->nodes[c.sched.groups[c.sched.group_of[i]].anchor].op != LRC_OP_ATTENTION) {
            printf("FAIL %s: attention_lse node %d runs in a kernel of its own, not in its attention's\n", label, i);
            ok = false;
        }
    /* an LM head's loss and its gradient run in the head's GEMM (fuse rule 8) unless the logits are an output */
    for (int i = 0; ok && c.g && i < c.g->n_nodes; i++) {
        const lrc_node *n = &c.g->nodes[i];
        bool logits_out = false;
        for (int o = 0; o < c.g->n_outputs; o++) logits_out = logits_out || c.g->outputs[o] == n->in[0];
        if (n->op == LRC_OP_CROSS_ENTROPY_GRAD && c.g->nodes[n->in[0]].op == LRC_OP_MATMUL &&
            lrc_group_is_loss_head(c.g, &c.sched.groups[c.sched.group_of[i]]) == logits_out) {
            printf("FAIL %s: the loss's gradient %s the head's GEMM\n", label, logits_out ? "runs in" : "does not run in");
            ok = false;
        }
    }
    /* elsewhere a loss's gradient over the loss's logits and labels runs in the loss's kernel (fuse rule 9) */
    for (int i = 0; ok && c.g && i < c.g->n_nodes; i++) {
        const lrc_node *n = &c.g->nodes[i];
        const lrc_group *gr = n->op == LRC_OP_CROSS_ENTROPY_GRAD ? &c.sched.groups[c.sched.group_of[i]] : NULL;
        bool paired = false;
        for (int j = 0; gr && j < c.g->n_nodes; j++)
            paired = paired || (c.g->nodes[j].op == LRC_OP_CROSS_ENTROPY && c.g->nodes[j].in[0] == n->in[0] && c.g->nodes[j].in[1] == n->in[1]);
        if (gr && !lrc_group_is_loss_head(c.g, gr) && paired != (lrc_group_loss_pair_grad(c.g, gr) == i)) {
            printf("FAIL %s: the loss's gradient %s the loss's kernel\n", label, paired ? "does not run in" : "runs in");
            ok = false;
        }
    }
    if (ok) {
        printf("ok   %s (%d kernels)\n", label, c.sched.n_groups);
        passed++;
    } else {
        failed++;
    }
    lrc_exec_free(x);
    lrc_pool_free(pool);
    if (c.g) lrc_compiled_free(&c);
    lrc_backend_close(ref);
    lrc_graph_free(g);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&params);
    lrc_tensor_set_clear(&want);
    lrc_tensor_set_clear(&got);
}

/* What the cpu target cannot generate is an error that names it, never a
 * silently wrong kernel: attention with heads wider than its registers. */
static void unsupported_is_an_error(void)
{
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    int64_t a[4] = {1, 2, 1, 1026};
    int q = input(g, "q", 4, a, LRC_F32);
    out(g, "z", op(g, LRC_OP_ATTENTION, q, q, q, 0.1, 0));
    lrc_compiled c;
    int rc = lrc_compile_graph(g, NULL, &c, &err);
    CHECK(rc != 0 && strstr(err.msg, "attention") && strstr(err.msg, "head dimension 1026"), "unsupported: rc %d, '%s'", rc,
          rc ? err.msg : "");
    lrc_compiled_free(&c);
}

/* ---- the cpu tanh and sigmoid against libm (emit.h states these bounds) -- */

/* The error |got - want| in units of the f32 spacing at want where want is
 * a normal f32, and absolute where it is subnormal or 0 (em_exp saturates
 * at e^-87.34 = FLT_MIN, so sigmoid's values below it are not resolved). */
static void accuracy_of(const char *what, const float *x, const float *got, int64_t n, double (*f)(double), double max_ulps)
{
    double worst = 0, worst_tiny = 0, at = 0;
    int64_t nan_wrong = 0;
    for (int64_t i = 0; i < n; i++) {
        double want = f((double)x[i]), d = fabs((double)got[i] - want);
        if (isnan(want) != isnan(got[i])) nan_wrong++;
        if (isnan(want)) continue;
        float wf = fabsf((float)want);
        if (wf < FLT_MIN) {
            if (!(d <= worst_tiny)) worst_tiny = d;
            continue;
        }
        double ulps = d / (double)(nextafterf(wf, INFINITY) - wf);
        if (!(ulps <= worst)) worst = ulps, at = x[i];
    }
    printf("     %s vs libm: at most %.2f ulp (at x = %.9g), %.3g where |%s| < FLT_MIN, over %lld values\n", what, worst, at,
           worst_tiny, what, (long long)n);
    CHECK(worst <= max_ulps && worst_tiny <= FLT_MIN && !nan_wrong, "%s: %.2f ulp (bound %.1f), %.3g below FLT_MIN, %lld NaN wrong",
          what, worst, max_ulps, worst_tiny, (long long)nan_wrong);
}

static double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }

/* every 512th f32 of each binade in +-[2^-24, 128), and the ends: 0, -0,
 * subnormals, the tails to 1e30, +-inf, NaN; through a vector width and its
 * scalar tail */
static void tanh_sigmoid_accuracy(void)
{
    enum { PER = 1 << 14, BINADES = 31 };
    static const float ends[] = {0.0f, -0.0f, 1e-45f, -1e-45f, 1e-40f, -1e-40f, 0.625f, -0.625f, 88.0f, -88.0f, 100.0f,
                                 -100.0f, 1e30f, -1e30f, INFINITY, -INFINITY, NAN};
    int64_t n = 2 * BINADES * PER + (int64_t)(sizeof ends / sizeof ends[0]), k = 0;
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    int x = input(g, "x", 1, &n, LRC_F32);
    out(g, "tanh", op(g, LRC_OP_TANH, x, 0, 0, 0, 0));
    out(g, "sigmoid", op(g, LRC_OP_SIGMOID, x, 0, 0, 0, 0));
    lrc_tensor_set in, params, got;
    lrc_tensor_set_init(&in), lrc_tensor_set_init(&params), lrc_tensor_set_init(&got);
    lrc_shape s = S(1, &n);
    lrc_tensor *xt = lrc_tensor_new("x", LRC_F32, &s, &err), *th = lrc_tensor_new("tanh", LRC_F32, &s, &err),
               *sg = lrc_tensor_new("sigmoid", LRC_F32, &s, &err);
    float *xs = xt->data;
    for (int b = 0; b < BINADES; b++)
        for (int i = 0; i < PER; i++) {
            float v = ldexpf(1.0f + (float)i / PER, b - 24);
            xs[k++] = v, xs[k++] = -v;
        }
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) xs[k++] = ends[i];
    lrc_tensor_set_add(&in, xt, &err), lrc_tensor_set_add(&got, th, &err), lrc_tensor_set_add(&got, sg, &err);
    lrc_compiled c;
    lrc_pool *pool = lrc_pool_new(2, &err);
    lrc_exec *ex = NULL;
    int rc = lrc_compile_graph(g, NULL, &c, &err);
    if (!rc) rc = lrc_exec_new(&c.plan, pool, &ex, &err);
    if (!rc) rc = lrc_exec_bind_params(ex, &params, &err);
    if (!rc) rc = lrc_exec_run_plan(ex, &in, &got, &err);
    CHECK(!rc, "tanh/sigmoid sweep: %s", rc ? err.msg : "");
    if (!rc) {
        accuracy_of("tanh", xs, th->data, n, tanh, 2.0);
        accuracy_of("sigmoid", xs, sg->data, n, sigmoid_d, 3.0);
    }
    lrc_exec_free(ex);
    lrc_pool_free(pool);
    lrc_compiled_free(&c);
    lrc_tensor_set_clear(&in), lrc_tensor_set_clear(&got), lrc_tensor_set_clear(&params);
}

/* Kernels that differ only in their op get code of their own: the kernel
 * signature (codegen/program.c) names each op, and equal structures share
 * one function (the control: tanh of two inputs of one shape). */
static void ops_distinguish_kernels(void)
{
    static const lrc_op ops[] = {LRC_OP_TANH, LRC_OP_SIGMOID, LRC_OP_GELU_TANH, LRC_OP_GELU, LRC_OP_SILU, LRC_OP_TANH};
    enum { N_OPS = sizeof ops / sizeof ops[0] };
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    int64_t sh[2] = {3, 37};
    for (int i = 0; i < N_OPS; i++) {
        char name[16];
        snprintf(name, sizeof name, "x%d", i);
        int x = input(g, name, 2, sh, LRC_F32);
        snprintf(name, sizeof name, "y%d", i);
        out(g, name, op(g, ops[i], x, 0, 0, 0, 0));
    }
    lrc_compiled c;
    int rc = lrc_compile_graph(g, NULL, &c, &err), impl[N_OPS];
    CHECK(!rc, "distinct kernels: %s", rc ? err.msg : "");
    for (int i = 0; i < N_OPS; i++) impl[i] = -1;
    for (int k = 0; !rc && k < c.prog.n_kernels; k++) {
        const lrc_kernel_desc *d = &c.prog.kernels[k];
        if (d->group < 0) continue;
        const lrc_node *a = &c.g->nodes[c.sched.groups[d->group].anchor];
        const char *src = c.g->nodes[a->in[0]].name;
        for (int i = 0; i < N_OPS; i++) {
            char name[16];
            snprintf(name, sizeof name, "x%d", i);
            if (a->op == ops[i] && src && !strcmp(src, name)) impl[i] = d->impl;
        }
    }
    for (int i = 0; !rc && i < N_OPS - 1; i++)
        for (int j = i + 1; j < N_OPS - 1; j++)
            CHECK(impl[i] >= 0 && impl[i] != impl[j], "%s and %s share kernel code (%d, %d)", lrc_op_name(ops[i]),
                  lrc_op_name(ops[j]), impl[i], impl[j]);
    CHECK(rc || (impl[0] >= 0 && impl[0] == impl[N_OPS - 1]), "two tanh kernels of one shape do not share code (%d, %d)",
          impl[0], impl[N_OPS - 1]);
    lrc_compiled_free(&c);
}

int main(void)
{
    setenv("LRC_CPU_LOSS_HEAD", "1", 1); /* fuse rule 8 is opt-in; its cases below check it ran */
    unsupported_is_an_error();
    tanh_sigmoid_accuracy();
    ops_distinguish_kernels();
    static const struct {
        const char *name;
        build_fn fn;
        int64_t d[5];
    } cases[] = {
        {"elementwise", b_elementwise, {1, 1, 0, 0, 0}},
        {"elementwise", b_elementwise, {7, 37, 0, 0, 0}},
        {"elementwise", b_elementwise, {3, 200, 0, 0, 0}},
        {"rmsnorm", b_rmsnorm, {1, 1, 1, 0, 0}},
        {"rmsnorm", b_rmsnorm, {2, 5, 23, 0, 0}},
        {"rmsnorm", b_rmsnorm, {1, 3, 515, 0, 0}},
        {"softmax", b_softmax, {4, 3, 0, 0, 0}},
        {"softmax", b_softmax, {9, 77, 0, 0, 0}},
        {"gemm", b_gemm, {1, 1, 1, 1, 0}},
        {"gemm", b_gemm, {1, 5, 7, 3, 0}},
        {"gemm", b_gemm, {2, 13, 33, 17, 0}},
        {"gemm", b_gemm, {1, 131, 291, 45, 0}},
        {"gemm", b_gemm, {3, 67, 257, 130, 0}},
        {"attention", b_attention, {1, 1, 1, 2, 0}},
        {"attention", b_attention, {2, 7, 3, 6, 0}},
        {"attention", b_attention, {1, 19, 2, 18, 0}},
        {"attention", b_attention, {1, 33, 1, 34, 0}},
        /* D = 82: the value loop in several passes of columns, the last with a tail (8 lanes: 10 vectors + 2; 16: 5 + 2) */
        {"attention", b_attention, {1, 19, 2, 82, 0}},
        {"attention_ext", b_attention_ext, {2, 7, 6, 8, 2}},
        {"attention_ext", b_attention_ext, {1, 33, 4, 18, 1}},
        {"attention_ext", b_attention_ext, {1, 19, 3, 6, 3}},
        {"misc", b_misc, {2, 3, 11, 6, 9}},
        {"misc", b_misc, {1, 13, 5, 10, 31}},
        {"gemm_grads", b_gemm_grads, {1, 1, 1, 1, 0}},
        {"gemm_grads", b_gemm_grads, {2, 13, 33, 17, 0}},
        {"gemm_grads", b_gemm_grads, {1, 131, 45, 291, 0}},
        {"gemm_grads", b_gemm_grads, {2, 37, 48, 64, 0}}, /* N whole panels: B read in place, unpacked */
        {"attention_grad", b_attention_grad, {1, 1, 1, 2, 0}},
        {"attention_grad", b_attention_grad, {2, 7, 3, 6, 0}},
        {"attention_grad", b_attention_grad, {1, 19, 2, 18, 0}},
        {"attention_grad", b_attention_grad, {2, 150, 2, 64, 0}}, /* whole blocks of keys, and a partial one */
        /* D = 146: the output rows in several passes of columns, the last with a tail (8 lanes: 18 vectors + 2; 16: 9 + 2) */
        {"attention_grad", b_attention_grad, {1, 19, 2, 146, 0}},
        {"attention_grad_ext", b_attention_grad_ext, {2, 7, 6, 8, 2}},
        {"attention_grad_ext", b_attention_grad_ext, {1, 19, 4, 6, 1}},
        {"attention_grad_ext", b_attention_grad_ext, {1, 9, 2, 8, 2}},
        {"attention_grad_ext", b_attention_grad_ext, {1, 150, 4, 24, 2}},
        {"vision", b_vision, {1, 1, 1, 0, 0}},
        {"vision", b_vision, {2, 5, 23, 0, 0}},
        {"vision", b_vision, {3, 50, 64, 0, 0}},
        {"grads", b_grads, {2, 3, 10, 6, 10}},
        {"grads", b_grads, {1, 7, 34, 10, 34}},
        {"grads", b_grads, {2, 5, 131, 10, 131}}, /* sums over rows in three column blocks, the last partial */
        /* (new cases go last: a case's seed is its index) sums over K in blocks (AVX-512's kc 256: three of
         * 200), with a partial last row tile and panel, and for few rows (tiles of four panels); rows
         * and panels shared out evenly over the items; dW's sum over 600 rows in blocks */
        {"gemm", b_gemm, {2, 151, 70, 600, 0}},
        {"gemm", b_gemm, {1, 3, 40, 700, 0}},
        {"gemm_grads", b_gemm_grads, {2, 300, 70, 45, 0}},
        /* an LM head's loss fused into its GEMM: partial panels; two row blocks, blocks of K and three column
         * blocks; one row; an even count of row blocks. And with the logits an output (unfused) */
        {"loss_head", b_loss_head, {2, 7, 0, 20, 45}},
        {"loss_head", b_loss_head, {1, 150, 0, 300, 700}},
        {"loss_head", b_loss_head, {1, 1, 0, 3, 1}},
        {"loss_head", b_loss_head, {2, 125, 0, 40, 90}}, /* 250 rows: four row blocks, not three */
        {"loss_head", b_loss_head, {1, 150, 1, 300, 700}},
        /* attention gradients with a head of 40 (two vectors of 8 or one of 16 and a tail) over rows
         * in padded blocks of keys; and grouped heads with a window */
        {"attention_grad", b_attention_grad, {1, 37, 2, 40, 0}},
        {"attention_grad_ext", b_attention_grad_ext, {1, 70, 4, 40, 2}},
        /* an item's rows (lrc_gemm_item_rows): dW over 800 rows and one column block, where mc_wide
         * leaves 3 items and is halved; dx over a 16.8 MB weight (past the caches), 100 rows in one
         * item; and dW over 800 rows and two column blocks (of 2 nc at most, lrc_gemm_item_cols), items
         * of mc_wide rows */
        {"gemm_grads", b_gemm_grads, {1, 300, 800, 40, 0}},
        {"gemm_grads", b_gemm_grads, {1, 100, 4200, 1000, 0}},
        {"gemm_grads", b_gemm_grads, {1, 300, 800, 600, 0}},
        /* dW of 1100 columns in three column blocks, the last partial, over two blocks of K */
        {"gemm_grads", b_gemm_grads, {2, 150, 200, 1100, 0}},
        /* sums over K past AVX2's kc (2048) in blocks too: x W^T over 4500 (three blocks), dW over
         * 2100 rows (two), and an LM head's over a hidden size of 2200 (two) */
        {"gemm", b_gemm, {1, 3, 40, 4500, 0}},
        {"gemm_grads", b_gemm_grads, {3, 700, 20, 30, 0}},
        {"loss_head", b_loss_head, {1, 10, 0, 2200, 50}},
        /* attention's general form: Tq below and above Tk, Dv below and above Dqk, one query row, Tq == Tk */
        {"attention_general", b_attention_general, {2, 5, 9, 6, 10}},
        {"attention_general", b_attention_general, {1, 19, 7, 18, 5}},
        {"attention_general", b_attention_general, {2, 33, 17, 8, 34}},
        {"attention_general", b_attention_general, {1, 1, 3, 2, 1}},
        {"attention_general", b_attention_general, {1, 12, 12, 16, 24}},
        /* its gradient: Tq below and above Tk, Dv below and above Dqk, Tq == Tk with a bias, one query row */
        {"attention_grad_general", b_attention_grad_general, {2, 5, 9, 6, 10}},
        {"attention_grad_general", b_attention_grad_general, {2, 19, 7, 18, 5}},
        {"attention_grad_general", b_attention_grad_general, {1, 12, 12, 16, 16}},
        {"attention_grad_general", b_attention_grad_general, {2, 1, 3, 2, 1}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(cases[i].name, cases[i].fn, cases[i].d, 1000 + i);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
