/* render_route.c — the cuda kernels of a mixture of experts' ops
 * (ir/route.c): topk in torch.topk's order (the functions of
 * ir/topk_order.h, emitted once per source), gather and its gradient, and
 * the matmul of the rows routed to one expert, which computes those rows
 * only (a thread per output element; the others write zeros). */
#include "cugen.h"
#include "ir/topk_order.h"

#include <string.h>

#define BLOCK 256
#define OUT(buf) cu_arg(c, c->gr->anchor, buf, sizeof buf)
#define IN(k, buf) cu_arg(c, n->in[k], buf, sizeof buf)
#define STR_(...) #__VA_ARGS__
#define XSTR(...) STR_(__VA_ARGS__)

/* the one source of the order, expanded for the device over float */
static const char topk_source[] = XSTR(LRC_TOPK_ALGORITHM(__device__ static, float));

static int64_t last_of(const lrc_shape *s) { return s->ndim ? s->dim[s->ndim - 1] : 1; }

static void launch(cu_gen *c, int64_t count)
{
    c->launch->block = BLOCK;
    c->launch->grid[0] = (unsigned)((count + BLOCK - 1) / BLOCK);
}

/* a thread per row: the row into local arrays, ordered, the first k out */
static void op_topk(cu_gen *c, const lrc_node *n)
{
    char o[16], x[16];
    int64_t E = last_of(&c->g->nodes[n->in[0]].shape), K = n->iattr[0], rows = lrc_shape_numel(&n->shape) / K;
    if (!c->tables->s || !strstr(c->tables->s, "lrc_topk_order")) cu_printf(c->tables, "%s\n", topk_source);
    cu_kernel_begin(c, BLOCK);
    cu_printf(c->t, "    const long r = (long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (r >= %lldL) return;\n", (long long)rows);
    cu_printf(c->t, "    float v[%lld];\n    int ix[%lld];\n", (long long)E, (long long)E);
    cu_printf(c->t, "    for (int j = 0; j < %lld; j++) v[j] = ld(%s, r * %lldL + j), ix[j] = j;\n", (long long)E, IN(0, x), (long long)E);
    cu_printf(c->t, "    lrc_topk_order(v, ix, %lldL, %lldL);\n", (long long)E, (long long)K);
    cu_printf(c->t, "    for (int j = 0; j < %lld; j++) %s[r * %lldL + j] = ix[j];\n}\n\n", (long long)K, OUT(o), (long long)K);
    launch(c, rows);
}

/* out[i] = x[row of i, ids[i]]; ids from inputs were checked by the runtime */
static void op_gather(cu_gen *c, const lrc_node *n)
{
    char o[16], x[16], ids[16];
    int64_t E = last_of(&c->g->nodes[n->in[0]].shape), K = last_of(&n->shape), count = lrc_shape_numel(&n->shape);
    cu_kernel_begin(c, BLOCK);
    cu_printf(c->t, "    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (i >= %lldL) return;\n", (long long)count);
    cu_printf(c->t, "    st(%s, i, ld(%s, (i / %lldL) * %lldL + %s[i]));\n}\n\n", OUT(o), IN(0, x), (long long)K, (long long)E, IN(1, ids));
    launch(c, count);
}

/* out[r, e] = the sum of dy[r, j] over j with ids[r, j] == e, in order */
static void op_gather_grad(cu_gen *c, const lrc_node *n)
{
    char o[16], ids[16], dy[16];
    int64_t E = last_of(&n->shape), K = last_of(&c->g->nodes[n->in[0]].shape), count = lrc_shape_numel(&n->shape);
    cu_kernel_begin(c, BLOCK);
    cu_printf(c->t, "    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (i >= %lldL) return;\n", (long long)count);
    cu_printf(c->t, "    const long r = i / %lldL;\n    const int e = (int)(i %% %lldL);\n    float acc = 0.f;\n", (long long)E, (long long)E);
    cu_printf(c->t, "    for (long j = r * %lldL; j < (r + 1) * %lldL; j++)\n        if (%s[j] == e) acc += ld(%s, j);\n", (long long)K,
              (long long)K, IN(0, ids), IN(1, dy));
    cu_printf(c->t, "    st(%s, i, acc);\n}\n\n", OUT(o));
    launch(c, count);
}

/* "r" or "r / S": the row of input k (x[..., S|1, K]) slot row r reads */
static const char *routed_row(const cu_gen *c, const lrc_node *n, int k, char *buf, size_t len)
{
    const lrc_shape *x = &c->g->nodes[n->in[k]].shape;
    int64_t S = last_of(&c->g->nodes[n->in[2]].shape);
    if (x->dim[x->ndim - 2] == S) snprintf(buf, len, "r");
    else snprintf(buf, len, "(r / %lldL)", (long long)S);
    return buf;
}

/* a thread per output element (r, j): zero unless row r is routed here */
static void op_expert_matmul(cu_gen *c, const lrc_node *n)
{
    char o[16], x[16], w[16], ids[16], xr[32];
    bool nn = n->iattr[2] != 0;
    int64_t K = last_of(&c->g->nodes[n->in[0]].shape), N = last_of(&n->shape), count = lrc_shape_numel(&n->shape);
    cu_kernel_begin(c, BLOCK);
    cu_printf(c->t, "    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (i >= %lldL) return;\n", (long long)count);
    cu_printf(c->t, "    const long r = i / %lldL, j = i %% %lldL;\n    float acc = 0.f;\n", (long long)N, (long long)N);
    cu_printf(c->t, "    if (%s[r] == %lld) {\n        const long xr = %s * %lldL;\n", IN(2, ids), (long long)n->iattr[0],
              routed_row(c, n, 0, xr, sizeof xr), (long long)K);
    if (nn)
        cu_printf(c->t, "        for (long k = 0; k < %lldL; k++) acc += ld(%s, xr + k) * ld(%s, k * %lldL + j);\n", (long long)K, IN(0, x),
                  IN(1, w), (long long)N);
    else
        cu_printf(c->t, "        for (long k = 0; k < %lldL; k++) acc += ld(%s, xr + k) * ld(%s, j * %lldL + k);\n", (long long)K, IN(0, x),
                  IN(1, w), (long long)K);
    cu_printf(c->t, "    }\n    st(%s, i, acc);\n}\n\n", OUT(o));
    launch(c, count);
}

/* a thread per element (j, k) of out[N, K]: the routed rows' a[r, j] b[r, k], in order */
static void op_expert_matmul_tn(cu_gen *c, const lrc_node *n)
{
    char o[16], a[16], b[16], ids[16], ar[32], br[32];
    int64_t N = n->shape.dim[0], K = n->shape.dim[1], rows = lrc_shape_numel(&c->g->nodes[n->in[2]].shape), count = N * K;
    cu_kernel_begin(c, BLOCK);
    cu_printf(c->t, "    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (i >= %lldL) return;\n", (long long)count);
    cu_printf(c->t, "    const long j = i / %lldL, k = i %% %lldL;\n    float acc = 0.f;\n", (long long)K, (long long)K);
    cu_printf(c->t, "    for (long r = 0; r < %lldL; r++)\n        if (%s[r] == %lld) acc += ld(%s, %s * %lldL + j) * ld(%s, %s * %lldL + k);\n",
              (long long)rows, IN(2, ids), (long long)n->iattr[0], IN(0, a), routed_row(c, n, 0, ar, sizeof ar), (long long)N, IN(1, b),
              routed_row(c, n, 1, br, sizeof br), (long long)K);
    cu_printf(c->t, "    st(%s, i, acc);\n}\n\n", OUT(o));
    launch(c, count);
}

bool cu_render_route(cu_gen *c, const lrc_node *n)
{
    switch (n->op) {
    case LRC_OP_TOPK: op_topk(c, n); return true;
    case LRC_OP_GATHER: op_gather(c, n); return true;
    case LRC_OP_GATHER_GRAD: op_gather_grad(c, n); return true;
    case LRC_OP_EXPERT_MATMUL: op_expert_matmul(c, n); return true;
    case LRC_OP_EXPERT_MATMUL_TN: op_expert_matmul_tn(c, n); return true;
    default: return false;
    }
}
