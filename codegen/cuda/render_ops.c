/* render_ops.c — CUDA kernels of the ops that run alone (opaque groups):
 * gathers, RoPE, transposes, LayerRoPE's gains, the loss, and the gradient
 * ops; and the renderer's per-op table (cu_ops), which every kind of group
 * dispatches through. Every sum runs in a fixed order (no atomics), so a run repeats bit
 * for bit. One function per op, as ir/ref_ops.c has. */
#include "cugen.h"

#include <math.h>
#include <string.h>

#define BLOCK 256

static unsigned blocks_for(int64_t n, int block) { return (unsigned)((n + block - 1) / block); }

/* the anchor's output argument, and input k's */
#define OUT(buf) cu_arg(c, c->gr->anchor, buf, sizeof buf)
#define IN(k, buf) cu_arg(c, n->in[k], buf, sizeof buf)

const char *cu_rope_table(cu_gen *c, int64_t D, const lrc_rope *rope, char *buf, size_t n)
{
    char key[128];
    lrc_rope_name(rope, key, sizeof key);
    snprintf(buf, n, "rope_inv_%lld_%s", (long long)D, key);
    char probe[192];
    snprintf(probe, sizeof probe, "float %s[", buf);
    if (c->tables->s && strstr(c->tables->s, probe)) return buf;
    cu_printf(c->tables, "__device__ const float %s[%lld] = {", buf, (long long)(D / 2));
    for (int64_t i = 0; i < D / 2; i++) cu_printf(c->tables, "%s%.9ef", i ? ", " : "", lrc_rope_inv_freq(rope, i, D)); /* 0: no RoPE */
    cu_printf(c->tables, "};\n");
    return buf;
}

static void elementwise_launch(cu_gen *c, int64_t count)
{
    c->launch->block = BLOCK;
    c->launch->grid[0] = blocks_for(count, BLOCK);
}

static void op_embedding(cu_gen *c, const lrc_node *n)
{
    char o[16], ids[16], w[16];
    int64_t D = cu_last_dim(&n->shape), count = lrc_shape_numel(&n->shape);
    /* a thread copies 16 bytes of a row (of the narrower of table and
     * output) where D allows, as the elementwise kernels do */
    const int vw = cu_vector_width(c, cu_storage(c, n->in[1]) == LRC_CUDA_BF16 || cu_storage(c, c->gr->anchor) == LRC_CUDA_BF16,
                                   count, D);
    /* ids were checked against the vocabulary by the runtime before launch */
    cu_kernel_begin(c, BLOCK);
    cu_printf(c->t, "    const long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * %d;\n    if (i >= %lldL) return;\n", vw,
              (long long)count);
    cu_printf(c->t, "    float x[%d];\n    ldv(%s + (long)%s[i / %lldL] * %lldL + i %% %lldL, x, %d);\n", vw, IN(1, w), IN(0, ids),
              (long long)D, (long long)D, (long long)D, vw);
    cu_printf(c->t, "    stv(%s + i, x, %d);\n}\n\n", OUT(o), vw);
    elementwise_launch(c, count / vw);
}

/* x [B, T, H, D] rotated by +angle (rope) or -angle (its gradient) */
static void op_rope(cu_gen *c, const lrc_node *n, bool grad)
{
    char o[16], x[16], tab[192];
    int64_t T = n->shape.dim[1], H = n->shape.dim[2], D = n->shape.dim[3], half = D / 2;
    int64_t count = lrc_shape_numel(&n->shape) / 2;
    lrc_rope rope = lrc_rope_of(n);
    cu_rope_table(c, D, &rope, tab, sizeof tab);
    cu_kernel_begin(c, BLOCK);
    cu_printf(c->t, "    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (i >= %lldL) return;\n", (long long)count);
    cu_printf(c->t, "    const long r = i / %lld, j = i %% %lld, t = (r / %lld) %% %lld;\n", (long long)half, (long long)half,
              (long long)H, (long long)T);
    cu_printf(c->t, "    float s, co;\n    sincosf((float)t * %s[j], &s, &co);\n%s", tab, grad ? "    s = -s;\n" : "");
    cu_printf(c->t, "    const float x1 = ld(%s, r * %lld + j), x2 = ld(%s, r * %lld + j + %lld);\n", IN(0, x), (long long)D, x,
              (long long)D, (long long)half);
    cu_printf(c->t, "    st(%s, r * %lld + j, x1 * co - x2 * s);\n    st(%s, r * %lld + j + %lld, x2 * co + x1 * s);\n}\n\n", OUT(o),
              (long long)D, o, (long long)D, (long long)half);
    elementwise_launch(c, count);
}

/* output element i gathers input element sum_d idx_d * stride_d */
static void op_transpose(cu_gen *c, const lrc_node *n)
{
    char o[16], x[16];
    const lrc_shape *xs = &c->g->nodes[n->in[0]].shape;
    int64_t xst[LRC_MAX_DIMS], s = 1, count = lrc_shape_numel(&n->shape);
    for (int d = xs->ndim - 1; d >= 0; d--) xst[d] = s, s *= xs->dim[d];
    cu_kernel_begin(c, BLOCK);
    cu_printf(c->t, "    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (i >= %lldL) return;\n", (long long)count);
    cu_printf(c->t, "    long rest = i, src = 0;\n");
    for (int d = n->shape.ndim - 1; d >= 0; d--)
        cu_printf(c->t, "    src += (rest %% %lld) * %lldL; rest /= %lld;\n", (long long)n->shape.dim[d], (long long)xst[n->iattr[d]],
                  (long long)n->shape.dim[d]);
    cu_printf(c->t, "    st(%s, i, ld(%s, src));\n}\n\n", OUT(o), IN(0, x));
    elementwise_launch(c, count);
}

/* elementwise ops alone (a broadcast the fused kernels cannot index, an op
 * with no inputs, one computed in double): each input's element found
 * from the output index with its own strides */
static void op_broadcast(cu_gen *c, const lrc_node *n)
{
    char o[16], x[LRC_MAX_INPUTS][16], ld_[LRC_MAX_INPUTS][64], expr[64];
    const char *xs[LRC_MAX_INPUTS];
    int64_t count = lrc_shape_numel(&n->shape);
    bool f64 = (lrc_ew_flags(n->op) & LRC_EW_F64) != 0;
    cu_kernel_begin(c, BLOCK);
    cu_printf(c->t, "    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (i >= %lldL) return;\n", (long long)count);
    for (int k = 0; k < n->n_in; k++) {
        const lrc_shape *in = &c->g->nodes[n->in[k]].shape;
        int64_t st = 1, stride[LRC_MAX_DIMS] = {0};
        for (int d = in->ndim - 1; d >= 0; d--) stride[d] = in->dim[d] == 1 ? 0 : st, st *= in->dim[d];
        cu_printf(c->t, "    long at%d = 0;\n    { long rest = i;\n", k);
        for (int d = n->shape.ndim - 1; d >= 0; d--) {
            int id = in->ndim - n->shape.ndim + d;
            cu_printf(c->t, "      at%d += (rest %% %lld) * %lldL; rest /= %lld;\n", k, (long long)n->shape.dim[d],
                      (long long)(id >= 0 ? stride[id] : 0), (long long)n->shape.dim[d]);
        }
        cu_printf(c->t, "    }\n");
        snprintf(ld_[k], sizeof ld_[k], "ld(%s, at%d)", IN(k, x[k]), k);
        xs[k] = ld_[k];
    }
    cu_ew_emit(c->t, n, xs, "    ", "v", f64, expr, sizeof expr); /* the table sends elementwise ops only */
    cu_printf(c->t, "    st(%s, i, %s%s);\n}\n\n", OUT(o), f64 ? "(float)" : "", expr);
    elementwise_launch(c, count);
}

/* along one axis, out[.., i, ..] = x[.., i + start, ..], zero outside x */
static void op_slice(cu_gen *c, const lrc_node *n)
{
    char o[16], x[16];
    const lrc_shape *xs = &c->g->nodes[n->in[0]].shape;
    int axis = (int)n->iattr[0];
    int64_t size = n->shape.dim[axis], len = xs->dim[axis], inner = 1, count = lrc_shape_numel(&n->shape);
    for (int d = axis + 1; d < xs->ndim; d++) inner *= xs->dim[d];
    cu_kernel_begin(c, BLOCK);
    cu_printf(c->t, "    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (i >= %lldL) return;\n", (long long)count);
    cu_printf(c->t, "    const long in = i %% %lldL, pos = (i / %lldL) %% %lldL, outer = i / (%lldL * %lldL), j = pos + %lldL;\n",
              (long long)inner, (long long)inner, (long long)size, (long long)inner, (long long)size, (long long)n->iattr[1]);
    if (n->dtype == LRC_I32) /* ids: copied as integers */
        cu_printf(c->t, "    %s[i] = j >= 0 && j < %lldL ? %s[(outer * %lldL + j) * %lldL + in] : 0;\n}\n\n", OUT(o), (long long)len, IN(0, x),
                  (long long)len, (long long)inner);
    else
        cu_printf(c->t, "    st(%s, i, j >= 0 && j < %lldL ? ld(%s, (outer * %lldL + j) * %lldL + in) : 0.f);\n}\n\n", OUT(o),
                  (long long)len, IN(0, x), (long long)len, (long long)inner);
    elementwise_launch(c, count);
}

/* i32 -> f32 (in the output's storage); f32 -> i32 toward zero where it
 * fits, else INT32_MIN (NaN too), as the reference computes it */
static void op_cast(cu_gen *c, const lrc_node *n)
{
    char o[16], x[16];
    int64_t count = lrc_shape_numel(&n->shape);
    cu_kernel_begin(c, BLOCK);
    cu_printf(c->t, "    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (i >= %lldL) return;\n", (long long)count);
    if (n->dtype == LRC_F32) cu_printf(c->t, "    st(%s, i, (float)%s[i]);\n}\n\n", OUT(o), IN(0, x));
    else
        cu_printf(c->t, "    const float v = ld(%s, i);\n    %s[i] = v >= -2147483648.f && v < 2147483648.f ? (int)v : (int)0x80000000u;\n}\n\n",
                  IN(0, x), OUT(o));
    elementwise_launch(c, count);
}

static void op_arange(cu_gen *c, const lrc_node *n)
{
    char o[16];
    cu_kernel_begin(c, BLOCK);
    cu_printf(c->t, "    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < %lldL) %s[i] = (int)i;\n}\n\n",
              (long long)n->shape.dim[0], OUT(o));
    elementwise_launch(c, n->shape.dim[0]);
}

/* a loop's entry: the state starts as the initial value (in its storage) */
static void op_copy(cu_gen *c, const lrc_node *n)
{
    char o[16], x[16];
    int64_t count = lrc_shape_numel(&n->shape);
    cu_kernel_begin(c, BLOCK);
    cu_printf(c->t, "    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (i >= %lldL) return;\n", (long long)count);
    cu_printf(c->t, "    st(%s, i, ld(%s, i));\n}\n\n", OUT(o), IN(0, x));
    elementwise_launch(c, count);
}

/* LayerRoPE's gain for one layer, in double as the reference */
static void op_depth_gain(cu_gen *c, const lrc_node *n)
{
    char o[16], a[5][16];
    int64_t d = c->g->nodes[n->in[0]].shape.dim[0];
    for (int k = 0; k < 5; k++) IN(k, a[k]);
    cu_kernel_begin(c, BLOCK);
    cu_printf(c->t, "    const long j = (long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (j >= %lld) return;\n", (long long)(d / 2));
    cu_printf(c->t, "    const double u = %.17g;\n", log((double)n->iattr[0] + 1.0));
    cu_printf(c->t, "    const double mag = exp((double)ld(%s, 0) + (double)ld(%s, 0) * u);\n", a[1], a[2]);
    cu_printf(c->t, "    const double th = exp((double)ld(%s, 0) + (double)ld(%s, 0) * u) * pow(%.17g, -2.0 * (double)j / %lld.0);\n",
              a[3], a[4], n->fattr[0], (long long)d);
    cu_printf(c->t, "    const double co = cos(th), s = sin(th), g0 = ld(%s, 2 * j), g1 = ld(%s, 2 * j + 1);\n", a[0], a[0]);
    cu_printf(c->t, "    st(%s, 2 * j, (float)(mag * (g0 * co - g1 * s)));\n    st(%s, 2 * j + 1, (float)(mag * (g0 * s + g1 * co)));\n}\n\n",
              OUT(o), o);
    elementwise_launch(c, d / 2);
}

/* Its gradients, all those the group holds (fuse rule 6): gamma's through
 * the rotation's transpose, the four scalars' as block-wide sums in double
 * (fixed order). */
static void op_depth_gain_grad(cu_gen *c, const lrc_node *n)
{
    char a[6][16], out[5][16];
    int64_t d = c->g->nodes[n->in[0]].shape.dim[0];
    bool have[5] = {false}, scalars = false;
    for (int q = 0; q < c->gr->n_nodes; q++) {
        const lrc_node *m = &c->g->nodes[c->gr->nodes[q]];
        if (m->op != LRC_OP_DEPTH_GAIN_GRAD) continue;
        int w = (int)m->iattr[1];
        have[w] = true;
        scalars = scalars || w > 0;
        cu_arg(c, c->gr->nodes[q], out[w], sizeof out[w]);
    }
    for (int k = 0; k < 6; k++) IN(k, a[k]);
    cu_kernel_begin(c, 1024);
    cu_printf(c->t, "    __shared__ double red[32];\n    const double u = %.17g;\n", log((double)n->iattr[0] + 1.0));
    cu_printf(c->t, "    const double m = exp((double)ld(%s, 0) + (double)ld(%s, 0) * u);\n", a[1], a[2]);
    cu_printf(c->t, "    const double theta = exp((double)ld(%s, 0) + (double)ld(%s, 0) * u);\n", a[3], a[4]);
    cu_printf(c->t, "    double dmag = 0, dth = 0;\n    for (long j = threadIdx.x; j < %lld; j += blockDim.x) {\n", (long long)(d / 2));
    cu_printf(c->t, "        const double f = pow(%.17g, -2.0 * (double)j / %lld.0), ang = theta * f, co = cos(ang), s = sin(ang);\n",
              n->fattr[0], (long long)d);
    cu_printf(c->t, "        const double g0 = ld(%s, 2 * j), g1 = ld(%s, 2 * j + 1), dy0 = ld(%s, 2 * j), dy1 = ld(%s, 2 * j + 1);\n",
              a[0], a[0], a[5], a[5]);
    if (have[0])
        cu_printf(c->t, "        st(%s, 2 * j, (float)(m * (dy0 * co + dy1 * s)));\n        st(%s, 2 * j + 1, (float)(m * (dy1 * co - dy0 * s)));\n",
                  out[0], out[0]);
    cu_printf(c->t, "        const double o0 = m * (g0 * co - g1 * s), o1 = m * (g0 * s + g1 * co);\n");
    cu_printf(c->t, "        dmag += dy0 * o0 + dy1 * o1;\n        dth += f * (dy1 * o0 - dy0 * o1);\n    }\n");
    if (scalars) {
        static const char *value[5] = {NULL, "dm", "dm * u", "dt", "dt * u"};
        cu_printf(c->t, "    const double dm = block_sum_d(dmag, red), dt = block_sum_d(dth, red) * theta;\n");
        for (int w = 1; w < 5; w++)
            if (have[w]) cu_printf(c->t, "    if (threadIdx.x == 0) st(%s, 0, (float)(%s));\n", out[w], value[w]);
    }
    cu_printf(c->t, "}\n\n");
    c->launch->block = 1024;
}

/* the mean over labelled rows of logsumexp(x) - x[y]: a warp per row, 8
 * rows a block, each lane's max and sum online (one pass over the logits);
 * each block's sum and count into scratch, and the last block to finish
 * (a counter in the module's memory, zero when it loads, which that block
 * sets back to zero) adds the blocks' sums in block order, so a run repeats
 * bit for bit whichever block finishes last. */
#define CE_ROWS 8
static void op_cross_entropy(cu_gen *c, const lrc_node *n)
{
    char o[16], x[16], y[16];
    int64_t V = cu_last_dim(&c->g->nodes[n->in[0]].shape), rows = lrc_shape_numel(&c->g->nodes[n->in[1]].shape);
    int64_t nb = (rows + CE_ROWS - 1) / CE_ROWS;
    c->launch->scratch_bytes = nb * 16; /* a double sum and a count a block */
    cu_printf(c->t, "__device__ unsigned %s_done = 0;\n", c->k->name);
    cu_kernel_begin(c, 32 * CE_ROWS);
    cu_printf(c->t, "    __shared__ double part[%d];\n    __shared__ int cnt[%d];\n    __shared__ bool last;\n", CE_ROWS, CE_ROWS);
    cu_printf(c->t, "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n    double total = 0;\n    int used = 0;\n");
    cu_printf(c->t, "    const long r = (long)blockIdx.x * %d + warp;\n", CE_ROWS);
    cu_printf(c->t, "    const int y = r < %lldL ? %s[r] : -100;\n    if (y != -100) {\n", (long long)rows, IN(1, y));
    cu_printf(c->t, "        float mx = -INFINITY, s = 0.f;\n        for (long i = lane; i < %lldL; i += 32) {\n", (long long)V);
    cu_printf(c->t, "            const float v = ld(%s, r * %lldL + i);\n", IN(0, x), (long long)V);
    cu_printf(c->t, "            if (v > mx) s = s * __expf(mx - v) + 1.f, mx = v;\n            else s += __expf(v - mx);\n        }\n");
    cu_printf(c->t, "        const float m = warp_max(mx);\n        s = warp_sum(mx == -INFINITY ? 0.f : s * __expf(mx - m));\n");
    cu_printf(c->t, "        total = (double)m + log((double)s) - (double)ld(%s, r * %lldL + y);\n        used = 1;\n    }\n", x, (long long)V);
    cu_printf(c->t, "    if (lane == 0) part[warp] = total, cnt[warp] = used;\n    __syncthreads();\n");
    cu_printf(c->t, "    double *sums = (double *)scratch;\n    int *counts = (int *)(sums + %lld);\n", (long long)nb);
    cu_printf(c->t, "    if (threadIdx.x == 0) {\n        double t = 0;\n        int u = 0;\n");
    cu_printf(c->t, "        for (int w = 0; w < %d; w++) t += part[w], u += cnt[w];\n        sums[blockIdx.x] = t;\n        counts[blockIdx.x] = u;\n",
              CE_ROWS);
    cu_printf(c->t, "        __threadfence();\n        last = atomicAdd(&%s_done, 1u) == %lldu;\n    }\n    __syncthreads();\n", c->k->name,
              (long long)(nb - 1));
    cu_printf(c->t, "    if (last && threadIdx.x == 0) {\n        const volatile double *vs = sums;\n        const volatile int *vc = counts;\n");
    cu_printf(c->t, "        double t = 0;\n        long u = 0;\n        for (long b = 0; b < %lldL; b++) t += vs[b], u += vc[b];\n", (long long)nb);
    cu_printf(c->t, "        st(%s, 0, u ? (float)(t / (double)u) : NAN);\n        %s_done = 0;\n    }\n}\n\n", OUT(o), c->k->name);
    c->launch->block = 32 * CE_ROWS;
    c->launch->grid[0] = (unsigned)nb;
}

/* (softmax(x) - onehot(y)) / labelled rows, a block per row */
static void op_cross_entropy_grad(cu_gen *c, const lrc_node *n)
{
    char o[16], x[16], y[16];
    int64_t V = cu_last_dim(&n->shape), rows = cu_rows(&n->shape);
    cu_kernel_begin(c, BLOCK);
    cu_printf(c->t, "    __shared__ float red[32];\n    const long r = blockIdx.x;\n    float cnt = 0.f;\n");
    cu_printf(c->t, "    for (long i = threadIdx.x; i < %lldL; i += blockDim.x) cnt += %s[i] != -100;\n", (long long)rows, IN(1, y));
    cu_printf(c->t, "    const float used = block_sum(cnt, red);\n    const int y = %s[r];\n", y);
    cu_printf(c->t, "    if (y == -100) {\n        for (long i = threadIdx.x; i < %lldL; i += blockDim.x) st(%s, r * %lldL + i, 0.f);\n        return;\n    }\n",
              (long long)V, OUT(o), (long long)V);
    cu_printf(c->t, "    float mx = -INFINITY;\n    for (long i = threadIdx.x; i < %lldL; i += blockDim.x) mx = fmaxf(mx, ld(%s, r * %lldL + i));\n",
              (long long)V, IN(0, x), (long long)V);
    cu_printf(c->t, "    mx = block_max(mx, red);\n    float s = 0.f;\n");
    cu_printf(c->t, "    for (long i = threadIdx.x; i < %lldL; i += blockDim.x) s += __expf(ld(%s, r * %lldL + i) - mx);\n", (long long)V,
              x, (long long)V);
    cu_printf(c->t, "    const float inv = 1.f / block_sum(s, red);\n");
    cu_printf(c->t, "    for (long i = threadIdx.x; i < %lldL; i += blockDim.x)\n        st(%s, r * %lldL + i, (__expf(ld(%s, r * %lldL + i) - mx) * inv - (i == y)) / used);\n}\n\n",
              (long long)V, o, (long long)V, x, (long long)V);
    c->launch->block = BLOCK;
    c->launch->grid[0] = (unsigned)rows;
}

/* x summed over the axes it was broadcast along: a thread per output
 * element, the reduced elements in order, in double */
static void op_sum_to(cu_gen *c, const lrc_node *n)
{
    char o[16], x[16];
    const lrc_shape *xs = &c->g->nodes[n->in[0]].shape, *os = &n->shape;
    int64_t xst[LRC_MAX_DIMS], s = 1, count = lrc_shape_numel(os), reduced = lrc_shape_numel(xs) / (count ? count : 1);
    for (int d = xs->ndim - 1; d >= 0; d--) xst[d] = s, s *= xs->dim[d];
    cu_kernel_begin(c, BLOCK);
    cu_printf(c->t, "    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (i >= %lldL) return;\n", (long long)count);
    /* the kept axes' offset from i; the reduced axes' offset from r */
    cu_printf(c->t, "    long base = 0;\n    { long rest = i;\n");
    for (int d = xs->ndim - 1; d >= 0; d--) {
        int od = os->ndim - xs->ndim + d;
        if (od >= 0 && os->dim[od] == xs->dim[d] && xs->dim[d] > 1)
            cu_printf(c->t, "      base += (rest %% %lld) * %lldL; rest /= %lld;\n", (long long)xs->dim[d], (long long)xst[d],
                      (long long)xs->dim[d]);
    }
    cu_printf(c->t, "    }\n    double acc = 0;\n    for (long r = 0; r < %lldL; r++) {\n        long rest = r, at = base;\n",
              (long long)reduced);
    for (int d = xs->ndim - 1; d >= 0; d--) {
        int od = os->ndim - xs->ndim + d;
        if (!(od >= 0 && os->dim[od] == xs->dim[d] && xs->dim[d] > 1))
            cu_printf(c->t, "        at += (rest %% %lld) * %lldL; rest /= %lld;\n", (long long)xs->dim[d], (long long)xst[d],
                      (long long)xs->dim[d]);
    }
    cu_printf(c->t, "        acc += ld(%s, at);\n    }\n    st(%s, i, (float)acc);\n}\n\n", IN(0, x), OUT(o));
    elementwise_launch(c, count);
}

/* dW[v] = sum of dy rows whose id is v, in row order: a block per
 * vocabulary row. The block reads the ids BLOCK at a time and keeps the
 * rows that hold v, in order (a scan of the hits across its warps), then
 * adds those rows only: the ids once a block instead of once a column, and
 * a row of dy read only by the blocks of its id. */
static void op_embedding_grad(cu_gen *c, const lrc_node *n)
{
    char o[16], ids[16], dy[16];
    int64_t V = n->shape.dim[0], D = n->shape.dim[1], rows = lrc_shape_numel(&c->g->nodes[n->in[0]].shape);
    const int nc = (int)((D + BLOCK - 1) / BLOCK);
    cu_kernel_begin(c, BLOCK);
    cu_printf(c->t, "    __shared__ int hits[%d], warp_hits[%d];\n", BLOCK, BLOCK / 32);
    cu_printf(c->t, "    const long v = blockIdx.x;\n    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n");
    cu_printf(c->t, "    float acc[%d];\n#pragma unroll\n    for (int k = 0; k < %d; k++) acc[k] = 0.f;\n", nc, nc);
    cu_printf(c->t, "    for (long r0 = 0; r0 < %lldL; r0 += %d) {\n", (long long)rows, BLOCK);
    cu_printf(c->t, "        const long r = r0 + threadIdx.x;\n        const int hit = r < %lldL && %s[r] == v;\n", (long long)rows, IN(0, ids));
    /* an inclusive scan of the hits across the warp, then the warps' totals */
    cu_printf(c->t, "        int at = hit;\n        for (int o = 1; o < 32; o <<= 1) {\n");
    cu_printf(c->t, "            const int y = __shfl_sync(0xffffffffu, at, lane >= o ? lane - o : lane);\n");
    cu_printf(c->t, "            if (lane >= o) at += y;\n        }\n");
    cu_printf(c->t, "        if (lane == 31) warp_hits[warp] = at;\n        __syncthreads();\n");
    cu_printf(c->t, "        int before = 0, total = 0;\n        for (int w = 0; w < %d; w++) before += w < warp ? warp_hits[w] : 0, total += warp_hits[w];\n",
              BLOCK / 32);
    cu_printf(c->t, "        if (hit) hits[before + at - 1] = (int)(r - r0);\n        __syncthreads();\n");
    cu_printf(c->t, "        for (int h = 0; h < total; h++) {\n            const long row = (r0 + hits[h]) * %lldL;\n#pragma unroll\n",
              (long long)D);
    cu_printf(c->t, "            for (int k = 0; k < %d; k++) {\n                const long col = threadIdx.x + k * %d;\n", nc, BLOCK);
    cu_printf(c->t, "                if (col < %lldL) acc[k] += ld(%s, row + col);\n            }\n        }\n        __syncthreads();\n    }\n",
              (long long)D, IN(1, dy));
    cu_printf(c->t, "#pragma unroll\n    for (int k = 0; k < %d; k++) {\n        const long col = threadIdx.x + k * %d;\n", nc, BLOCK);
    cu_printf(c->t, "        if (col < %lldL) st(%s, v * %lldL + col, acc[k]);\n    }\n}\n\n", (long long)D, OUT(o), (long long)D);
    c->launch->block = BLOCK;
    c->launch->grid[0] = (unsigned)V;
}

/* a block per row: the gradients of rmsnorm, layernorm and softmax */
static void op_row_grad(cu_gen *c, const lrc_node *n)
{
    char o[16], x[16], dy[16];
    int64_t D = cu_last_dim(&n->shape), rows = cu_rows(&n->shape);
    cu_kernel_begin(c, BLOCK);
    bool ln = n->op == LRC_OP_LAYERNORM_GRAD;
    cu_printf(c->t, "    __shared__ float red[32];\n    const long r = blockIdx.x;\n    float dot = 0.f, ss = 0.f%s;\n", ln ? ", sx = 0.f, sdy = 0.f" : "");
    cu_printf(c->t, "    for (long i = threadIdx.x; i < %lldL; i += blockDim.x) {\n        const float x = ld(%s, r * %lldL + i), dy = ld(%s, r * %lldL + i);\n",
              (long long)D, IN(0, x), (long long)D, IN(1, dy), (long long)D);
    if (ln) { /* layernorm: the means first, then sums about the mean: no cancellation */
        cu_printf(c->t, "        sx += x;\n        sdy += dy;\n    }\n");
        cu_printf(c->t, "    const float mean = block_sum(sx, red) / %lld.f, mdy = block_sum(sdy, red) / %lld.f;\n", (long long)D, (long long)D);
        cu_printf(c->t, "    for (long i = threadIdx.x; i < %lldL; i += blockDim.x) {\n"
                        "        const float xc = ld(%s, r * %lldL + i) - mean;\n"
                        "        ss = fmaf(xc, xc, ss);\n        dot = fmaf(xc, ld(%s, r * %lldL + i), dot);\n    }\n",
                  (long long)D, x, (long long)D, dy, (long long)D);
        cu_printf(c->t, "    const float rs = rsqrtf(block_sum(ss, red) / %lld.f + %.9ef), mdyx = rs * block_sum(dot, red) / %lld.f;\n",
                  (long long)D, n->fattr[0], (long long)D);
        cu_printf(c->t, "    for (long i = threadIdx.x; i < %lldL; i += blockDim.x)\n"
                        "        st(%s, r * %lldL + i, rs * (ld(%s, r * %lldL + i) - mdy - (ld(%s, r * %lldL + i) - mean) * rs * mdyx));\n}\n\n",
                  (long long)D, OUT(o), (long long)D, dy, (long long)D, x, (long long)D);
        c->launch->block = BLOCK;
        c->launch->grid[0] = (unsigned)rows;
        return;
    }
    cu_printf(c->t, "        dot = fmaf(x, dy, dot);\n        ss = fmaf(x, x, ss);\n    }\n    dot = block_sum(dot, red);\n");
    if (n->op == LRC_OP_RMSNORM_GRAD) {
        cu_printf(c->t, "    const float rs = rsqrtf(block_sum(ss, red) / %lld.f + %.9ef), k = rs * rs * rs * dot / %lld.f;\n",
                  (long long)D, n->fattr[0], (long long)D);
        cu_printf(c->t, "    for (long i = threadIdx.x; i < %lldL; i += blockDim.x)\n        st(%s, r * %lldL + i, rs * ld(%s, r * %lldL + i) - ld(%s, r * %lldL + i) * k);\n}\n\n",
                  (long long)D, OUT(o), (long long)D, dy, (long long)D, x, (long long)D);
    } else { /* softmax: x is the output y; y (dy - y . dy) */
        cu_printf(c->t, "    for (long i = threadIdx.x; i < %lldL; i += blockDim.x)\n        st(%s, r * %lldL + i, ld(%s, r * %lldL + i) * (ld(%s, r * %lldL + i) - dot));\n}\n\n",
                  (long long)D, OUT(o), (long long)D, x, (long long)D, dy, (long long)D);
    }
    c->launch->block = BLOCK;
    c->launch->grid[0] = (unsigned)rows;
}


/* ---- the kernels of group anchors ------------------------------------------ */

static bool op_alone(cu_gen *c, const lrc_node *n) { op_broadcast(c, n); return true; }
#define KERNEL_FN(name, call) static bool name(cu_gen *c, const lrc_node *n) { (void)n; call; return true; }
KERNEL_FN(k_embedding, op_embedding(c, n))
KERNEL_FN(k_rope, op_rope(c, n, false))
KERNEL_FN(k_rope_grad, op_rope(c, n, true))
KERNEL_FN(k_transpose, op_transpose(c, n))
KERNEL_FN(k_slice, op_slice(c, n))
KERNEL_FN(k_cast, op_cast(c, n))
KERNEL_FN(k_arange, op_arange(c, n))
KERNEL_FN(k_loop_state, op_copy(c, n))
KERNEL_FN(k_depth_gain, op_depth_gain(c, n))
KERNEL_FN(k_depth_gain_grad, op_depth_gain_grad(c, n))
KERNEL_FN(k_cross_entropy, op_cross_entropy(c, n))
KERNEL_FN(k_cross_entropy_grad, op_cross_entropy_grad(c, n))
KERNEL_FN(k_sum_to, op_sum_to(c, n))
KERNEL_FN(k_embedding_grad, op_embedding_grad(c, n))
KERNEL_FN(k_row_grad, op_row_grad(c, n))
KERNEL_FN(k_row, cu_render_row(c))
KERNEL_FN(k_gemm, cu_render_gemm(c))
KERNEL_FN(k_attention, cu_render_attention(c))
KERNEL_FN(k_kv_attention, cu_render_kv_attention(c))
#undef KERNEL_FN

/* ---- the per-op table ------------------------------------------------------ */

/* What the cuda renderer does with an op: its expression inside fused
 * groups, a kernel of its own (an opaque group, or the anchor of a row,
 * GEMM or attention group), or nothing at all (sources, views, a loop's
 * back edge). */
typedef struct cu_op {
    bool elementwise; /* its expression (ir/ew.c) over the algebra of ew_cuda.c */
    bool (*kernel)(cu_gen *c, const lrc_node *n);
    bool no_kernel;
} cu_op;

/* CU_<op> for every op of LRC_OPS (ir/lrc_ir.h): an op without an entry
 * names an undefined CU_<op> and does not compile. NOT_RENDERED is what an
 * op this renderer has no code for would say, out loud. */
#define KERNEL(f) {.kernel = f}
#define NO_KERNEL {.no_kernel = true}
#define NOT_RENDERED {0}

#define CU_input NO_KERNEL /* sources and views: no computation */
#define CU_param NO_KERNEL
#define CU_state NO_KERNEL
#define CU_reshape NO_KERNEL
#define CU_loop_next NO_KERNEL /* the back edge: the executor's copies */
#define CU_embedding KERNEL(k_embedding)
#define CU_matmul KERNEL(k_gemm)
#define CU_matmul_nn KERNEL(k_gemm)
#define CU_matmul_tn KERNEL(k_gemm)
#define CU_rmsnorm KERNEL(k_row)
#define CU_layernorm KERNEL(k_row)
#define CU_softmax KERNEL(k_row)
#define CU_rope KERNEL(k_rope)
#define CU_rope_grad KERNEL(k_rope_grad)
#define CU_attention KERNEL(k_attention)
#define CU_kv_attention KERNEL(k_kv_attention)
#define CU_attention_lse KERNEL(k_attention) /* beside its output (fuse rule 7), or alone */
#define CU_attention_grad KERNEL(cu_render_attention_grad)
#define CU_transpose KERNEL(k_transpose)
#define CU_slice KERNEL(k_slice)
#define CU_loop_state KERNEL(k_loop_state)
#define CU_depth_gain KERNEL(k_depth_gain)
#define CU_depth_gain_grad KERNEL(k_depth_gain_grad)
#define CU_cross_entropy KERNEL(k_cross_entropy)
#define CU_cross_entropy_grad KERNEL(k_cross_entropy_grad)
#define CU_sum_to KERNEL(k_sum_to)
#define CU_embedding_grad KERNEL(k_embedding_grad)
#define CU_rmsnorm_grad KERNEL(k_row_grad)
#define CU_layernorm_grad KERNEL(k_row_grad)
#define CU_softmax_grad KERNEL(k_row_grad)
#define CU_topk KERNEL(cu_render_route)
#define CU_gather KERNEL(cu_render_route)
#define CU_gather_grad KERNEL(cu_render_route)
#define CU_expert_matmul KERNEL(cu_render_route)
#define CU_expert_matmul_tn KERNEL(cu_render_route)
#define CU_sum KERNEL(cu_render_along)
#define CU_mean KERNEL(cu_render_along)
#define CU_amax KERNEL(cu_render_along)
#define CU_logsumexp KERNEL(cu_render_along)
#define CU_cumsum KERNEL(cu_render_along)
#define CU_concat KERNEL(cu_render_along)
#define CU_expand KERNEL(cu_render_along)
#define CU_amax_grad KERNEL(cu_render_along)
#define CU_scan KERNEL(cu_render_along)
#define CU_bmm KERNEL(cu_render_bmm)
#define CU_cast KERNEL(k_cast)
#define CU_arange KERNEL(k_arange)

static const cu_op cu_ops[LRC_OP_COUNT] = {
#define CU_ENTRY(E, op) [LRC_OP_##E] = CU_##op,
    LRC_OPS(CU_ENTRY)
#undef CU_ENTRY
/* every elementwise op: its expression in a fused group, op_broadcast by itself */
#define CU_EW_ENTRY(E, ...) [LRC_OP_##E] = {.elementwise = true, .kernel = op_alone},
    LRC_EW_OPS(CU_EW_ENTRY)
#undef CU_EW_ENTRY
};

bool lrc_cuda_supports_op(lrc_op op)
{
    const cu_op *o = &cu_ops[op];
    return o->no_kernel || o->elementwise || o->kernel;
}

bool cu_elementwise_emit(cu_gen *c, const lrc_node *n, const char *const *x, const char *indent, const char *prefix, char *out,
                         size_t len)
{
    if (!cu_ops[n->op].elementwise) return false;
    cu_ew_emit(c->t, n, x, indent, prefix, false, out, len);
    return true;
}

bool cu_render_anchor(cu_gen *c, const lrc_node *n) { return cu_ops[n->op].kernel && cu_ops[n->op].kernel(c, n); }
