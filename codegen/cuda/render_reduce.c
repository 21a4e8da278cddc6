/* render_reduce.c — the cuda kernels of the ops along one axis
 * (ir/reduce.c): the reductions sum, mean, amax and logsumexp, cumsum, scan
 * (ir/scan.c) and amax's gradient run a thread per (outer, inner) pair that walks the axis
 * with a stride of inner (no transposed copy), in f32; concat and expand a
 * thread per output element; and bmm, a thread per output element. A
 * reduction with an elementwise prologue (fuse rule 11) computes each
 * input element where it would load it. */
#include "cugen.h"

#include <stdlib.h>

#define BLOCK 256
#define OUT(buf) cu_arg(c, c->gr->anchor, buf, sizeof buf)
#define IN(k, buf) cu_arg(c, n->in[k], buf, sizeof buf)
#define L(v) ((long long)(v))

static void launch(cu_gen *c, int64_t count)
{
    c->launch->block = BLOCK;
    c->launch->grid[0] = (unsigned)((count + BLOCK - 1) / BLOCK);
}

/* the thread's (o, i) and its first element base = o * len * inner + i */
static void begin_pairs(cu_gen *c, int64_t outer, int64_t len, int64_t inner)
{
    cu_kernel_begin(c, BLOCK);
    cu_printf(c->t, "    const long t = (long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (t >= %lldL) return;\n", L(outer * inner));
    cu_printf(c->t, "    const long base = (t / %lldL) * %lldL + t %% %lldL;\n", L(inner), L(len * inner), L(inner));
    launch(c, outer * inner);
}

/* Fuse rule 11's prologue: each element of the reduction's input computed
 * where it is loaded (p<id> for member id), the other values loaded at
 * their broadcast strides: lo<id>, their offset at (o, 0, i), once per
 * thread, and astride[id] along the axis. */
static void pro_offsets(cu_gen *c, int axis, int64_t inner, int64_t *astride)
{
    const lrc_graph *g = c->g;
    const lrc_shape *xs = &g->nodes[g->nodes[c->gr->anchor].in[0]].shape;
    bool *seen = lrc_xcalloc((size_t)g->n_nodes, 1);
    cu_printf(c->t, "    const long po = t / %lldL, pi = t %% %lldL;\n", L(inner), L(inner));
    for (int j = 0; j < c->gr->n_nodes; j++) {
        const lrc_node *m = &g->nodes[c->gr->nodes[j]];
        for (int q = 0; q < m->n_in && c->gr->nodes[j] != c->gr->anchor; q++) {
            int x = m->in[q];
            if (c->member[x] || seen[x]) continue;
            seen[x] = true;
            const lrc_shape *s = &g->nodes[x].shape;
            int64_t st[LRC_MAX_DIMS], run = 1;
            for (int d = xs->ndim - 1; d >= 0; d--) {
                int sd = s->ndim - xs->ndim + d;
                int64_t size = sd >= 0 ? s->dim[sd] : 1;
                st[d] = size == 1 ? 0 : run;
                run *= size;
            }
            astride[x] = st[axis];
            cu_printf(c->t, "    long lo%d = 0;\n", x);
            for (int half = 0; half < 2; half++) { /* the dims before the axis from po, after it from pi */
                int lo = half ? axis + 1 : 0, hi = half ? xs->ndim : axis;
                cu_printf(c->t, "    { long q = %s;", half ? "pi" : "po");
                for (int d = hi - 1; d >= lo; d--) {
                    if (st[d]) cu_printf(c->t, " lo%d += (q %% %lldL) * %lldL;", x, L(xs->dim[d]), L(st[d]));
                    cu_printf(c->t, " q /= %lldL;", L(xs->dim[d]));
                }
                cu_printf(c->t, " }\n");
            }
        }
    }
    free(seen);
}

/* `float v` = the reduction's input at r (an expression), loaded, or its
 * prologue computed (inside a scope of its own: the p<id> are per element) */
static void x_at(cu_gen *c, const lrc_node *n, const int64_t *astride, const char *r, int64_t inner, const char *indent)
{
    char x[16];
    if (!astride) {
        cu_printf(c->t, "%sconst float v = ld(%s, base + %s * %lldL);\n", indent, IN(0, x), r, L(inner));
        return;
    }
    for (int j = 0; j < c->gr->n_nodes; j++) {
        int id = c->gr->nodes[j];
        const lrc_node *m = &c->g->nodes[id];
        if (id == c->gr->anchor) continue;
        char ops[LRC_MAX_INPUTS][96], e[64], prefix[24];
        const char *xs[LRC_MAX_INPUTS];
        for (int q = 0; q < m->n_in; q++) {
            int in = m->in[q];
            if (c->member[in]) snprintf(ops[q], sizeof ops[q], "p%d", in);
            else snprintf(ops[q], sizeof ops[q], "ld(%s, lo%d + %s * %lldL)", cu_arg(c, in, x, sizeof x), in, r, L(astride[in]));
            xs[q] = ops[q];
        }
        snprintf(prefix, sizeof prefix, "e%d", id);
        cu_elementwise_emit(c, m, xs, indent, prefix, e, sizeof e); /* fuse rule 11 takes elementwise members only */
        cu_printf(c->t, "%sconst float p%d = %s;\n", indent, id, e);
    }
    cu_printf(c->t, "%sconst float v = p%d;\n", indent, n->in[0]);
}

static void op_reduce(cu_gen *c, const lrc_node *n)
{
    char o[16];
    int64_t outer, len, inner;
    lrc_axis_split(&c->g->nodes[n->in[0]].shape, (int)n->iattr[0], &outer, &len, &inner);
    begin_pairs(c, outer, len, inner);
    int64_t *astride = NULL;
    if (lrc_group_is_reduce_prologue(c->g, c->gr)) {
        astride = lrc_xcalloc((size_t)c->g->n_nodes, sizeof *astride);
        pro_offsets(c, (int)n->iattr[0], inner, astride);
    }
    const char *in = "        ";
    cu_printf(c->t, "    float m, s = 0.f;\n    {\n");
    x_at(c, n, astride, "0L", inner, in);
    cu_printf(c->t, "%sm = v;\n    }\n", in);
    if (n->op == LRC_OP_AMAX || n->op == LRC_OP_LOGSUMEXP) {
        cu_printf(c->t, "    for (long r = 1; r < %lldL; r++) {\n", L(len));
        x_at(c, n, astride, "r", inner, in);
        cu_printf(c->t, "%sif (v > m) m = v;\n    }\n", in);
    }
    if (n->op != LRC_OP_AMAX) {
        cu_printf(c->t, "    for (long r = 0; r < %lldL; r++) {\n", L(len));
        x_at(c, n, astride, "r", inner, in);
        cu_printf(c->t, "%ss += %s;\n    }\n", in, n->op == LRC_OP_LOGSUMEXP ? "expf(v - m)" : "v");
    }
    if (n->op == LRC_OP_LOGSUMEXP) cu_printf(c->t, "    s = m + logf(s);\n");
    else if (n->op == LRC_OP_AMAX) cu_printf(c->t, "    s = m;\n");
    if (n->op == LRC_OP_MEAN) cu_printf(c->t, "    s /= %lld.f;\n", L(len));
    cu_printf(c->t, "    st(%s, t, s);\n}\n\n", OUT(o));
    free(astride);
}

static void op_cumsum(cu_gen *c, const lrc_node *n)
{
    char o[16], x[16];
    int64_t outer, len, inner;
    lrc_axis_split(&n->shape, (int)n->iattr[0], &outer, &len, &inner);
    begin_pairs(c, outer, len, inner);
    cu_printf(c->t, "    float s = 0.f;\n    for (long j = 0; j < %lldL; j++) {\n", L(len));
    if (n->iattr[1]) cu_printf(c->t, "        const long at = base + (%lldL - j) * %lldL;\n", L(len - 1), L(inner));
    else cu_printf(c->t, "        const long at = base + j * %lldL;\n", L(inner));
    cu_printf(c->t, "        s += ld(%s, at);\n        st(%s, at, s);\n    }\n}\n\n", IN(0, x), OUT(o));
}

/* one thread per (outer, inner) lane, sequential along the axis, each step
 * in double from h as stored, as ref does (a chunked, associative kernel
 * that splits the axis over threads is later work) */
static void op_scan(cu_gen *c, const lrc_node *n)
{
    char o[16], a[16], b[16], h0[16];
    int64_t outer, len, inner;
    lrc_axis_split(&n->shape, (int)n->iattr[0], &outer, &len, &inner);
    begin_pairs(c, outer, len, inner);
    if (n->n_in == 3) cu_printf(c->t, "    float h = ld(%s, t);\n", IN(2, h0));
    else cu_printf(c->t, "    float h = 0.f;\n");
    cu_printf(c->t, "    for (long j = 0; j < %lldL; j++) {\n", L(len));
    if (n->iattr[1]) cu_printf(c->t, "        const long at = base + (%lldL - j) * %lldL;\n", L(len - 1), L(inner));
    else cu_printf(c->t, "        const long at = base + j * %lldL;\n", L(inner));
    cu_printf(c->t, "        h = (float)((double)ld(%s, at) * (double)h + (double)ld(%s, at));\n        st(%s, at, h);\n    }\n}\n\n", IN(0, a),
              IN(1, b), OUT(o));
}

static void op_amax_grad(cu_gen *c, const lrc_node *n)
{
    char o[16], x[16], y[16], dy[16];
    int64_t outer, len, inner;
    lrc_axis_split(&n->shape, (int)n->iattr[0], &outer, &len, &inner);
    begin_pairs(c, outer, len, inner);
    IN(0, x);
    cu_printf(c->t, "    const float m = ld(%s, t);\n    int ties = 0;\n", IN(1, y));
    cu_printf(c->t, "    for (long r = 0; r < %lldL; r++) ties += ld(%s, base + r * %lldL) == m;\n", L(len), x, L(inner));
    cu_printf(c->t, "    const float share = ld(%s, t) / (float)ties;\n", IN(2, dy));
    cu_printf(c->t, "    for (long r = 0; r < %lldL; r++) st(%s, base + r * %lldL, ld(%s, base + r * %lldL) == m ? share : 0.f);\n}\n\n",
              L(len), OUT(o), L(inner), x, L(inner));
}

/* output element i: which input's block of the axis it lies in */
static void op_concat(cu_gen *c, const lrc_node *n)
{
    char o[16], x[16];
    int axis = (int)n->iattr[0];
    int64_t outer, total, inner, at = 0, count = lrc_shape_numel(&n->shape);
    lrc_axis_split(&n->shape, axis, &outer, &total, &inner);
    cu_kernel_begin(c, BLOCK);
    cu_printf(c->t, "    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (i >= %lldL) return;\n", L(count));
    cu_printf(c->t, "    const long in = i %% %lldL, pos = (i / %lldL) %% %lldL, o = i / %lldL;\n", L(inner), L(inner), L(total),
              L(total * inner));
    for (int q = 0; q < n->n_in; q++) {
        int64_t len = c->g->nodes[n->in[q]].shape.dim[axis];
        cu_printf(c->t, "    %sif (pos < %lldL) st(%s, i, ld(%s, (o * %lldL + pos - %lldL) * %lldL + in));\n", q ? "else " : "", L(at + len),
                  OUT(o), IN(q, x), L(len), L(at), L(inner));
        at += len;
    }
    cu_printf(c->t, "}\n\n");
    launch(c, count);
}

static void op_expand(cu_gen *c, const lrc_node *n)
{
    char o[16], x[16];
    const lrc_shape *xs = &c->g->nodes[n->in[0]].shape, *os = &n->shape;
    int64_t stride[LRC_MAX_DIMS] = {0}, st = 1, count = lrc_shape_numel(os);
    for (int d = xs->ndim - 1; d >= 0; d--) {
        stride[d + os->ndim - xs->ndim] = xs->dim[d] == 1 ? 0 : st;
        st *= xs->dim[d];
    }
    cu_kernel_begin(c, BLOCK);
    cu_printf(c->t, "    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (i >= %lldL) return;\n", L(count));
    cu_printf(c->t, "    long at = 0, rest = i;\n");
    for (int d = os->ndim - 1; d >= 0; d--)
        cu_printf(c->t, "    at += (rest %% %lldL) * %lldL; rest /= %lldL;\n", L(os->dim[d]), L(stride[d]), L(os->dim[d]));
    cu_printf(c->t, "    st(%s, i, ld(%s, at));\n}\n\n", OUT(o), IN(0, x));
    launch(c, count);
}

/* bmm (ir/bmm.c): a thread per output element, its dot product summed in
 * f32 in the order of k; each batch index's matrices found by
 * lrc_bmm_strides (0 where an operand broadcasts) */
bool cu_render_bmm(cu_gen *c, const lrc_node *n)
{
    char o[16], a[16], b[16];
    const lrc_shape *os = &n->shape;
    int nb = os->ndim - 2;
    int64_t M = os->dim[nb], N = os->dim[nb + 1], K = c->g->nodes[n->in[0]].shape.dim[c->g->nodes[n->in[0]].shape.ndim - 1];
    int64_t sa[LRC_MAX_DIMS], sb[LRC_MAX_DIMS], count = lrc_shape_numel(os);
    lrc_bmm_strides(&c->g->nodes[n->in[0]].shape, &c->g->nodes[n->in[1]].shape, os, sa, sb);
    cu_kernel_begin(c, BLOCK);
    cu_printf(c->t, "    const long t = (long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (t >= %lldL) return;\n", L(count));
    cu_printf(c->t, "    const long j = t %% %lldL, m = (t / %lldL) %% %lldL;\n    long rest = t / %lldL, ia = 0, ib = 0;\n", L(N), L(N), L(M),
              L(M * N));
    for (int d = nb - 1; d >= 0; d--)
        cu_printf(c->t, "    ia += (rest %% %lldL) * %lldL; ib += (rest %% %lldL) * %lldL; rest /= %lldL;\n", L(os->dim[d]), L(sa[d]),
                  L(os->dim[d]), L(sb[d]), L(os->dim[d]));
    cu_printf(c->t, "    const long pa = ia * %lldL + m * %lldL, pb = ib * %lldL + j;\n    float s = 0.f;\n", L(M * K), L(K), L(K * N));
    cu_printf(c->t, "    for (long q = 0; q < %lldL; q++) s += ld(%s, pa + q) * ld(%s, pb + q * %lldL);\n", L(K), IN(0, a), IN(1, b), L(N));
    cu_printf(c->t, "    st(%s, t, s);\n}\n\n", OUT(o));
    launch(c, count);
    return true;
}

bool cu_render_along(cu_gen *c, const lrc_node *n)
{
    switch (n->op) {
    case LRC_OP_SUM:
    case LRC_OP_MEAN:
    case LRC_OP_AMAX:
    case LRC_OP_LOGSUMEXP: op_reduce(c, n); return true;
    case LRC_OP_CUMSUM: op_cumsum(c, n); return true;
    case LRC_OP_SCAN: op_scan(c, n); return true;
    case LRC_OP_AMAX_GRAD: op_amax_grad(c, n); return true;
    case LRC_OP_CONCAT: op_concat(c, n); return true;
    case LRC_OP_EXPAND: op_expand(c, n); return true;
    default: return false;
    }
}
