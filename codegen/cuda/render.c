/* render.c — the CUDA renderer's driver and the kernel kinds built from the
 * shared elementwise evaluation: elementwise groups (several elements per
 * thread, 16-byte vector loads and stores), row groups (a block per row, warp
 * shuffles then shared memory, deterministic order) and GEMM epilogues
 * (cuBLAS writes the product to scratch, one elementwise kernel finishes).
 * Opaque ops are in render_ops.c, attention in render_attention.c, the
 * CUDA C every module begins with in prelude.c. */
#include "cugen.h"

#include <assert.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 256

void cu_printf(cu_text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (t->s && (size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        t->cap = 2 * t->cap + (size_t)n + 256;
        t->s = lrc_xrealloc(t->s, t->cap);
    }
}

int64_t cu_last_dim(const lrc_shape *s) { return s->ndim ? s->dim[s->ndim - 1] : 1; }
int64_t cu_rows(const lrc_shape *s) { return lrc_shape_numel(s) / (cu_last_dim(s) ? cu_last_dim(s) : 1); }

lrc_gemm_tiling lrc_cuda_tiling(void) { return (lrc_gemm_tiling){.mc = 1, .mc_wide = 1, .mc_min = 1, .mc_head = 1, .nc = 1, .kc = 1, .w_store = LRC_WSTORE_F32}; }

lrc_cuda_storage cu_storage(const cu_gen *c, int id) { return c->st[c->s->buffer_of[id]]; }

const char *cu_arg(const cu_gen *c, int id, char *buf, size_t n)
{
    snprintf(buf, n, "a%d", c->arg_of[c->s->buffer_of[id]]);
    return buf;
}

/* a buffer beyond the graph's nodes (a program's extra) is f32 */
static lrc_cuda_storage arg_storage(int n_nodes, const lrc_cuda_storage *st, int b) { return b < n_nodes ? st[b] : LRC_CUDA_F32; }

static const char *ctype(lrc_cuda_storage s) { return s == LRC_CUDA_BF16 ? "bf16" : s == LRC_CUDA_I32 ? "int" : "float"; }

void cu_kernel_begin(cu_gen *c, int block)
{
    const lrc_kernel_desc *k = c->k;
    cu_printf(c->t, "extern \"C\" __global__ void __launch_bounds__(%d) %s(", block, k->name);
    int first_out = k->n_args - (c->gr ? c->gr->n_outputs : 1);
    for (int a = 0; a < k->n_args; a++) {
        int b = k->args[a];
        /* inputs are read only, except KV caches, which decoding appends to */
        bool ro = a < first_out && !(b < c->g->n_nodes && c->g->nodes[b].op == LRC_OP_STATE);
        cu_printf(c->t, "%s%s%s *__restrict__ a%d", a ? ", " : "", ro ? "const " : "", ctype(arg_storage(c->g->n_nodes, c->st, b)), a);
    }
    if (c->launch->scratch_bytes) cu_printf(c->t, ", %s *__restrict__ scratch", ctype(c->launch->scratch_storage));
    cu_printf(c->t, ")\n{\n");
}

/* ---- elementwise evaluation ---------------------------------------------- */

const char *cu_value(cu_gen *c, int id, int64_t D, char *buf, size_t n)
{
    if (c->member[id]) {
        for (int m = 0; m < c->n_gemm; m++) /* a product cuBLAS left in scratch, loaded as a vector */
            if (id == c->gemm_node[m]) {
                assert(c->used);
                c->used[c->g->n_nodes + m] = true;
                snprintf(buf, n, "s%d[u]", m);
                return buf;
            }
        snprintf(buf, n, "m%d", id);
        return buf;
    }
    if (c->vec && c->vec[id]) {
        c->used[id] = true;
        snprintf(buf, n, "x%d[u]", id);
        return buf;
    }
    char a[16];
    const lrc_shape *s = &c->g->nodes[id].shape;
    cu_arg(c, id, a, sizeof a);
    if (c->vec) c->col_read = c->col_read || lrc_shape_numel(s) != 1;
    if (lrc_shape_numel(s) == 1) snprintf(buf, n, "ld(%s, 0)", a);
    else if (lrc_shape_numel(s) == cu_last_dim(s) && cu_last_dim(s) == D) snprintf(buf, n, "ld(%s, col)", a);
    else snprintf(buf, n, "ld(%s, row * %lldL + col)", a, (long long)D);
    return buf;
}

static void emit_member(cu_gen *c, const lrc_node *n, int id, int64_t D)
{
    char x[LRC_MAX_INPUTS][128], e[64], prefix[24];
    const char *xs[LRC_MAX_INPUTS];
    /* the operands a kernel's other members have always read (a member
     * that is not elementwise: its first two) */
    int nv = lrc_ew_is(n->op) ? n->n_in : n->n_in > 1 ? 2 : 1;
    for (int k = 0; k < nv; k++) xs[k] = cu_value(c, n->in[k], D, x[k], sizeof x[k]);
    snprintf(prefix, sizeof prefix, "m%d", id);
    /* the anchor of another kind of group is its kernel's to define */
    if (cu_elementwise_emit(c, n, xs, "        ", prefix, e, sizeof e)) cu_printf(c->t, "        float m%d = %s;\n", id, e);
}

void cu_emit_members(cu_gen *c, int64_t D, bool *done, int stop_at)
{
    for (int j = 0; j < c->gr->n_nodes; j++) {
        int id = c->gr->nodes[j];
        if (id == stop_at) return;
        /* a row or GEMM group's anchor is its kernel's to define */
        if (done[id] || (id == c->gr->anchor && c->gr->kind != LRC_GROUP_ELEMENTWISE)) continue;
        bool gemm = false;
        for (int m = 0; m < c->n_gemm; m++) gemm = gemm || id == c->gemm_node[m];
        if (!gemm) emit_member(c, &c->g->nodes[id], id, D);
        done[id] = true;
    }
}

/* ---- vector passes ---------------------------------------------------------- */

/* Read by the kernel: by a member other than the matmuls (their operands
 * are cuBLAS's). */
static bool read_by_kernel(const cu_gen *c, int id)
{
    for (int m = 0; m < c->gr->n_nodes; m++) {
        const lrc_node *n = &c->g->nodes[c->gr->nodes[m]];
        for (int q = 0; q < n->n_in && !lrc_is_gemm_op(n->op); q++)
            if (c->s->buffer_of[n->in[q]] == c->s->buffer_of[id]) return true;
    }
    return false;
}

/* A [D] vector read along the row (cu_value's rule), not the full shape */
static bool row_vector(const cu_gen *c, int id, int64_t D)
{
    const lrc_shape *s = &c->g->nodes[id].shape;
    return lrc_shape_numel(s) == cu_last_dim(s) && cu_last_dim(s) == D;
}

int cu_vector_width(cu_gen *c, bool bf16, int64_t n, int64_t row)
{
    int vw = bf16 ? 8 : 4;
    while (vw > 1 && (n % vw || (row > 0 && row % vw))) vw /= 2;
    c->launch->access_bytes = vw * (bf16 ? 2 : 4);
    return vw;
}

/* Chooses c->vw, the elements a thread handles at once, and c->vec, the
 * inputs read through vector loads: 16 bytes of the narrowest type stored
 * among the full-shape buffers read or written, halved until it divides the
 * elements, and D too where a [D] vector is read along the row or the
 * iteration is a row's (a chunk must not cross rows there). Elsewhere a
 * chunk may cross rows: a full-shape buffer is read flat. */
static void vector_begin(cu_gen *c, int64_t D, int64_t total, bool row_kernel)
{
    const lrc_graph *g = c->g;
    c->vec = lrc_xcalloc((size_t)g->n_nodes, 1);
    c->used = lrc_xcalloc((size_t)g->n_nodes + 2, 1);
    bool bf16 = false, along_row = row_kernel;
    for (int j = 0; j < c->gr->n_inputs; j++) {
        int in = c->gr->inputs[j];
        if (c->member[in] || lrc_shape_numel(&g->nodes[in].shape) == 1 || !read_by_kernel(c, in)) continue;
        bool vector = row_vector(c, in, D);
        along_row = along_row || vector;
        if (cu_storage(c, in) == LRC_CUDA_I32) continue; /* ld's scalar reads */
        c->vec[in] = true;
        bf16 = bf16 || (!vector && cu_storage(c, in) == LRC_CUDA_BF16);
    }
    for (int j = 0; j < c->gr->n_outputs; j++) bf16 = bf16 || cu_storage(c, c->gr->outputs[j]) == LRC_CUDA_BF16;
    c->vw = cu_vector_width(c, bf16, total, along_row ? D : 0);
}

static void vector_end(cu_gen *c)
{
    free(c->vec);
    free(c->used);
    c->vec = c->used = NULL;
}

/* A pass over a thread's vw elements (col = c0 + u) is rendered in two
 * steps: pass_begin collects its statements in body, then pass_end puts
 * before them one vector load of each buffer they read, and after them,
 * with stores, one vector store of each output. full: the flat index of
 * element c0 of a full-shape buffer. */
static cu_text *pass_begin(cu_gen *c, cu_text *body)
{
    cu_text *outer = c->t;
    memset(body, 0, sizeof *body);
    memset(c->used, 0, (size_t)c->g->n_nodes + 2);
    c->col_read = false;
    c->t = body;
    return outer;
}

static void pass_end(cu_gen *c, cu_text *outer, cu_text *body, bool stores, const char *full, const char *c0, int64_t D)
{
    char a[16], v[128];
    int vw = c->vw;
    c->t = outer;
    for (int id = 0; id < c->g->n_nodes; id++)
        if (c->used[id])
            cu_printf(outer, "        float x%d[%d];\n        ldv(%s + %s, x%d, %d);\n", id, vw, cu_arg(c, id, a, sizeof a),
                      row_vector(c, id, D) ? c0 : full, id, vw);
    for (int m = 0; m < c->n_gemm; m++)
        if (c->used[c->g->n_nodes + m])
            cu_printf(outer, "        float s%d[%d];\n        ldv(scratch + %lldL + %s, s%d, %d);\n", m, vw,
                      (long long)(m * cu_rows(&c->g->nodes[c->gemm_node[m]].shape) * D), full, m, vw);
    for (int j = 0; j < c->gr->n_outputs && stores; j++) cu_printf(outer, "        float y%d[%d];\n", j, vw);
    cu_printf(outer, "#pragma unroll\n        for (int u = 0; u < %d; u++) {\n", vw);
    if (c->col_read) cu_printf(outer, "            const long col = %s + u;\n", c0);
    cu_printf(outer, "%s", body->s ? body->s : "");
    for (int j = 0; j < c->gr->n_outputs && stores; j++)
        cu_printf(outer, "            y%d[u] = %s;\n", j, cu_value(c, c->gr->outputs[j], D, v, sizeof v));
    cu_printf(outer, "        }\n");
    for (int j = 0; j < c->gr->n_outputs && stores; j++)
        cu_printf(outer, "        stv(%s + %s, y%d, %d);\n", cu_arg(c, c->gr->outputs[j], a, sizeof a), full, j, vw);
    free(body->s);
}

/* ---- elementwise groups and GEMM epilogues ------------------------------- */

static void render_elementwise(cu_gen *c, int64_t rows, int64_t D)
{
    int64_t total = rows * D;
    vector_begin(c, D, total, false);
    cu_kernel_begin(c, BLOCK);
    cu_printf(c->t, "    const long i0 = ((long)blockIdx.x * blockDim.x + threadIdx.x) * %d;\n", c->vw);
    cu_printf(c->t, "    if (i0 >= %lldL) return;\n", (long long)total);
    bool *done = lrc_xcalloc((size_t)c->g->n_nodes, 1);
    cu_text body, *outer = pass_begin(c, &body);
    cu_emit_members(c, D, done, -1);
    bool at_col = c->col_read; /* a row and column only where something is read by them */
    for (int id = 0; id < c->g->n_nodes; id++) at_col = at_col || (c->used[id] && row_vector(c, id, D));
    if (at_col) cu_printf(outer, "    const long row = i0 / %lldL, col0 = i0 %% %lldL;\n", (long long)D, (long long)D);
    cu_printf(outer, "    {\n");
    pass_end(c, outer, &body, true, "i0", "col0", D);
    cu_printf(c->t, "    }\n}\n\n");
    free(done);
    c->launch->block = BLOCK;
    c->launch->grid[0] = (unsigned)((total / c->vw + BLOCK - 1) / BLOCK);
    vector_end(c);
}

/* ---- row groups ------------------------------------------------------------ */

/* A loop over a row's chunks of vw elements, one pass: the members before
 * the anchor, then `tail` (a format taking the anchor's input); the last
 * pass's tail defines the anchor, and the members after it and the stores
 * follow. */
static void row_pass(cu_gen *c, int64_t D, bool *done, const char *tail, const char *full, bool last)
{
    char x[128];
    int anchor = c->gr->anchor;
    cu_printf(c->t, "    for (long c0 = threadIdx.x * %dL; c0 < %lldL; c0 += blockDim.x * %dL) {\n", c->vw, (long long)D, c->vw);
    memset(done, 0, (size_t)c->g->n_nodes);
    cu_text body, *outer = pass_begin(c, &body);
    cu_emit_members(c, D, done, anchor);
    cu_printf(c->t, tail, cu_value(c, c->g->nodes[anchor].in[0], D, x, sizeof x));
    if (last) {
        done[anchor] = true;
        cu_emit_members(c, D, done, -1);
    }
    pass_end(c, outer, &body, last, full, "c0", D);
    cu_printf(c->t, "    }\n");
}

void cu_render_row(cu_gen *c)
{
    const lrc_node *a = &c->g->nodes[c->gr->anchor];
    int64_t D = cu_last_dim(&a->shape), rows = cu_rows(&a->shape);
    bool softmax = a->op == LRC_OP_SOFTMAX, layernorm = a->op == LRC_OP_LAYERNORM;
    vector_begin(c, D, rows * D, true);
    int block = 32; /* enough threads for a row's chunks, up to 256 */
    while (block < 256 && block * c->vw < D) block *= 2;
    char full[64], tail[128];
    snprintf(full, sizeof full, "row * %lldL + c0", (long long)D);
    cu_kernel_begin(c, block);
    cu_printf(c->t, "    __shared__ float red[32];\n    const long row = blockIdx.x;\n");
    bool *done = lrc_xcalloc((size_t)c->g->n_nodes, 1);
    int anchor = c->gr->anchor;
    /* pass 0: sum of squares, or the max */
    cu_printf(c->t, "    float acc = %s;\n", softmax ? "-INFINITY" : "0.f");
    snprintf(tail, sizeof tail, "            const float x = %%s;\n            acc = %s;\n",
             softmax ? "fmaxf(acc, x)" : layernorm ? "acc + x" : "fmaf(x, x, acc)");
    row_pass(c, D, done, tail, full, false);
    if (layernorm) { /* pass 1: squares about the mean (no cancellation) */
        cu_printf(c->t, "    const float mean = block_sum(acc, red) / %lld.f;\n    float var = 0.f;\n", (long long)D);
        row_pass(c, D, done, "            const float xc = %s - mean;\n            var = fmaf(xc, xc, var);\n", full, false);
        cu_printf(c->t, "    const float scale = rsqrtf(block_sum(var, red) / %lld.f + %.9ef);\n", (long long)D, a->fattr[0]);
    } else if (!softmax) {
        cu_printf(c->t, "    const float scale = rsqrtf(block_sum(acc, red) / %lld.f + %.9ef);\n", (long long)D, a->fattr[0]);
    } else {
        cu_printf(c->t, "    const float mx = block_max(acc, red);\n    float sum = 0.f;\n");
        row_pass(c, D, done, "            sum += __expf(%s - mx);\n", full, false);
        cu_printf(c->t, "    const float inv = 1.f / block_sum(sum, red);\n");
    }
    /* the last pass: the anchor, the members after it, the stores */
    snprintf(tail, sizeof tail, "            const float m%d = %s;\n", anchor,
             softmax ? "__expf(%s - mx) * inv" : layernorm ? "(%s - mean) * scale" : "%s * scale");
    row_pass(c, D, done, tail, full, true);
    cu_printf(c->t, "}\n\n");
    free(done);
    c->launch->block = (unsigned)block;
    c->launch->grid[0] = (unsigned)rows;
    vector_end(c);
}

/* ---- GEMM groups ------------------------------------------------------------ */

/* The other operand of node a when it adds x to something else, else -1 */
static int add_other(const lrc_node *a, int x)
{
    if (a->op != LRC_OP_ADD || (a->in[0] == x) == (a->in[1] == x)) return -1;
    return a->in[0] == x ? a->in[1] : a->in[0];
}

/* A group that is one GEMM and an add of a tensor of the product's shape,
 * stored as the sum is (a residual stream, a gradient summed into): that
 * argument, which cuBLASLt adds as C (beta = 1) while it writes the sum,
 * with no kernel and no f32 scratch; else -1. */
static int residual_arg(const cu_gen *c)
{
    const lrc_graph *g = c->g;
    if (c->n_gemm != 1 || c->gr->n_nodes != 2 || c->gr->n_outputs != 1) return -1;
    int mm = c->gemm_node[0], add = c->gr->nodes[0] == mm ? c->gr->nodes[1] : c->gr->nodes[0];
    const lrc_node *a = &g->nodes[add];
    const int r = add_other(a, mm);
    if (r < 0 || c->gr->outputs[0] != add) return -1;
    lrc_cuda_storage sr = c->st[c->s->buffer_of[r]], so = c->st[c->s->buffer_of[add]];
    if (!lrc_shape_eq(&g->nodes[r].shape, &a->shape) || lrc_shape_numel(&g->nodes[mm].shape) != lrc_shape_numel(&a->shape) ||
        sr != so || sr == LRC_CUDA_I32)
        return -1;
    return c->arg_of[c->s->buffer_of[r]];
}

/* A group that is one GEMM x W^T, an add of a vector [n] along its rows
 * (a bias) and at most one more add of a tensor of the output's shape (a
 * residual), all stored as the output is: the bias's argument, and the
 * residual's in *resid (-1 when none), for cuBLASLt's epilogue to add as it
 * writes the output; else -1. */
static int bias_arg(const cu_gen *c, int *resid)
{
    const lrc_graph *g = c->g;
    *resid = -1;
    if (c->n_gemm != 1 || c->gr->n_outputs != 1 || c->gr->n_nodes < 2 || c->gr->n_nodes > 3) return -1;
    const int mm = c->gemm_node[0], add = c->gr->nodes[1], out = c->gr->outputs[0];
    const lrc_node *m = &g->nodes[mm], *a = &g->nodes[add];
    const int b = add_other(a, mm);
    if (b < 0 || m->op != LRC_OP_MATMUL || c->gr->nodes[0] != mm || out != c->gr->nodes[c->gr->n_nodes - 1] ||
        !lrc_shape_eq(&a->shape, &m->shape))
        return -1;
    const lrc_shape *bs = &g->nodes[b].shape;
    const lrc_cuda_storage so = c->st[c->s->buffer_of[out]];
    if (bs->ndim != 1 || bs->dim[0] != m->shape.dim[m->shape.ndim - 1] || c->st[c->s->buffer_of[b]] != so || so == LRC_CUDA_I32)
        return -1;
    if (c->gr->n_nodes == 3) {
        const lrc_node *r = &g->nodes[out];
        const int rr = add_other(r, add);
        /* the product itself (x W^T + b + x W^T) is no argument of the launch: the kernel's work */
        if (rr < 0 || rr == mm || !lrc_shape_eq(&g->nodes[rr].shape, &r->shape) || c->st[c->s->buffer_of[rr]] != so ||
            (*resid = c->arg_of[c->s->buffer_of[rr]]) < 0)
            return *resid = -1;
    }
    return c->arg_of[c->s->buffer_of[b]];
}

void cu_render_gemm(cu_gen *c)
{
    const lrc_graph *g = c->g;
    c->n_gemm = 0;
    for (int j = 0; j < c->gr->n_nodes && c->n_gemm < 2; j++)
        if (lrc_is_gemm_op(g->nodes[c->gr->nodes[j]].op)) c->gemm_node[c->n_gemm++] = c->gr->nodes[j];
    lrc_cuda_launch *l = c->launch;
    l->n_gemm = c->n_gemm;
    for (int i = 0; i < c->n_gemm; i++) {
        const lrc_node *mm = &g->nodes[c->gemm_node[i]];
        lrc_cuda_gemm *gm = &l->gemm[i];
        lrc_gemm_dims(g, mm, &gm->n, &gm->k);
        gm->op = mm->op;
        gm->m = lrc_shape_numel(&mm->shape) / gm->n;
        gm->a_arg = c->arg_of[c->s->buffer_of[mm->in[0]]];
        gm->b_arg = c->arg_of[c->s->buffer_of[mm->in[1]]];
        gm->c_arg = gm->bias_arg = -1;
    }
    bool epilogue = c->gr->n_nodes > c->n_gemm;
    if (epilogue && (l->gemm[0].c_arg = residual_arg(c)) >= 0) epilogue = false;
    /* a bias (and residual) keeps the kernel: the run time's fallback */
    else if (epilogue && (l->gemm[0].bias_arg = bias_arg(c, &l->gemm[0].c_arg)) < 0) l->gemm[0].c_arg = -1;
    if (!epilogue) { /* cuBLAS writes the output: no kernel */
        l->symbol[0] = 0;
        return;
    }
    /* a gated unit's two products (2 d_ff a token, the largest
       intermediates) in bf16 where its outputs are; a lone product's
       epilogue in f32: Parcae's relu(x W)^2 doubles a rounding, and its loop
       compounds it (bf16 logits 5.6e-2 from PyTorch's, against 2.1e-2) */
    l->scratch_storage = c->n_gemm == 2 ? LRC_CUDA_BF16 : LRC_CUDA_F32;
    for (int j = 0; j < c->gr->n_outputs; j++)
        if (cu_storage(c, c->gr->outputs[j]) != LRC_CUDA_BF16) l->scratch_storage = LRC_CUDA_F32;
    l->scratch_bytes = (int64_t)c->n_gemm * l->gemm[0].m * l->gemm[0].n * (l->scratch_storage == LRC_CUDA_BF16 ? 2 : 4);
    render_elementwise(c, l->gemm[0].m, l->gemm[0].n);
}

/* ---- the driver ---------------------------------------------------------- */

/* A training graph: a loss, and gradients named as the parameters. */
static bool is_training(const lrc_graph *g)
{
    bool loss = false, grad = false;
    for (int i = 0; i < g->n_outputs; i++) {
        loss = loss || !strcmp(g->output_names[i], "loss");
        for (int j = 0; j < g->n_nodes && !grad; j++)
            grad = g->nodes[j].op == LRC_OP_PARAM && g->nodes[j].name && !strcmp(g->nodes[j].name, g->output_names[i]);
    }
    return loss && grad;
}

/* Marks in bias[] the vector parameters every use of which adds them to
 * the rows of a matmul's product: biases, which cuBLASLt's epilogue reads
 * stored as the product's output is. One sweep over the uses. */
static void mark_biases(const lrc_graph *g, bool *bias)
{
    bool *other_use = lrc_xcalloc((size_t)g->n_nodes + 1, 1);
    for (int j = 0; j < g->n_nodes; j++) {
        const lrc_node *a = &g->nodes[j];
        for (int k = 0; k < a->n_in; k++) {
            const int p = a->in[k], m = add_other(a, p);
            if (g->nodes[p].op != LRC_OP_PARAM || g->nodes[p].shape.ndim != 1) continue;
            const lrc_node *mm = m >= 0 ? &g->nodes[m] : NULL;
            if (mm && mm->op == LRC_OP_MATMUL && mm->shape.dim[mm->shape.ndim - 1] == g->nodes[p].shape.dim[0]) bias[p] = true;
            else other_use[p] = true;
        }
    }
    for (int i = 0; i < g->n_outputs; i++) other_use[g->outputs[i]] = true;
    for (int id = 0; id < g->n_nodes; id++) bias[id] = bias[id] && !other_use[id];
    free(other_use);
}

/* Storage of every buffer: f32 where precision or the user's files ask for
 * it, bulk (bf16, or f32 for --precision f32) for activations and weight
 * matrices, and in a forward graph for biases (bf16 as PyTorch's bf16
 * model keeps them, so that cuBLASLt adds them as it writes the product;
 * a training graph keeps its vectors in f32 for AdamW). */
static void choose_storage(const lrc_graph *g, const lrc_schedule *s, lrc_cuda_storage bulk, lrc_cuda_storage *st)
{
    bool *bias = lrc_xcalloc((size_t)g->n_nodes + 1, 1);
    if (!is_training(g)) mark_biases(g, bias);
    for (int id = 0; id < g->n_nodes; id++) {
        const lrc_node *n = &g->nodes[id];
        if (n->dtype == LRC_I32) st[id] = LRC_CUDA_I32;
        else if (n->op == LRC_OP_INPUT) st[id] = LRC_CUDA_F32;
        else if (n->op == LRC_OP_PARAM) st[id] = n->shape.ndim >= 2 || bias[id] ? bulk : LRC_CUDA_F32;
        /* vectors, not single rows: a decoder's [1, 1, d] activation is a
           GEMM operand beside bf16 weights */
        else if (n->shape.ndim <= 1 || n->op == LRC_OP_DEPTH_GAIN || n->op == LRC_OP_DEPTH_GAIN_GRAD ||
                 (n->op == LRC_OP_SUM_TO && lrc_shape_numel(&n->shape) == n->shape.dim[n->shape.ndim - 1]))
            st[id] = LRC_CUDA_F32; /* gains, scalars and their gradients (a [1, 1, d] gain's too);
                                      an expand's gradient [B, T, 1, d] is an activation, a GEMM operand */
        /* a log-sum-exp in bf16 would move every probability the backward
           takes from it by up to 2^-9 of its value times the exponent */
        else if (n->op == LRC_OP_ATTENTION_LSE) st[id] = LRC_CUDA_F32;
        else st[id] = bulk;
    }
    /* a run-time input a GEMM reads (Whisper's encoder states) stores as the
       activations beside it do: cuBLAS takes operands of one type, and the
       upload rounds the caller's f32 */
    for (int id = 0; id < g->n_nodes; id++) {
        const lrc_node *n = &g->nodes[id];
        for (int k = 0; k < 2 && lrc_is_gemm_op(n->op) && k < n->n_in; k++) {
            const int b = s->buffer_of[n->in[k]];
            if (b >= 0 && g->nodes[b].op == LRC_OP_INPUT && g->nodes[b].dtype == LRC_F32) st[b] = bulk;
        }
    }
    for (int i = 0; i < g->n_outputs; i++) /* outputs in f32, ids (topk's) as they are */
        if (g->nodes[g->outputs[i]].dtype != LRC_I32) st[s->buffer_of[g->outputs[i]]] = LRC_CUDA_F32;
    for (int id = 0; id < g->n_nodes; id++) { /* the loss reads f32 logits */
        const lrc_node *n = &g->nodes[id];
        if (n->op == LRC_OP_CROSS_ENTROPY || n->op == LRC_OP_CROSS_ENTROPY_GRAD) st[s->buffer_of[n->in[0]]] = LRC_CUDA_F32;
    }
    for (int id = 0; id < g->n_nodes; id++) st[id] = st[s->buffer_of[id]]; /* views store as what they view */
    free(bias);
}

/* The kernel whose code launch i runs: launches of one structure (one impl)
 * share code only when their arguments are stored alike (a gradient summed
 * into a bf16 intermediate in one place and into an f32 output in another
 * differs only there); the first such kernel, else i itself. */
static int code_owner(const lrc_program *p, int n_nodes, const lrc_cuda_storage *st, const int *owner, int i)
{
    const lrc_kernel_desc *k = &p->kernels[i];
    for (int j = k->impl; j < i; j++) {
        const lrc_kernel_desc *q = &p->kernels[j];
        if (q->impl != k->impl || owner[j] != j || q->n_args != k->n_args) continue;
        bool same = true;
        for (int a = 0; a < k->n_args && same; a++)
            same = arg_storage(n_nodes, st, q->args[a]) == arg_storage(n_nodes, st, k->args[a]);
        if (same) return j;
    }
    return i;
}

int lrc_cuda_render(const lrc_graph *g, const lrc_schedule *s, const lrc_program *p, lrc_cuda_storage bulk, lrc_cuda_program *out,
                    lrc_err *err)
{
    memset(out, 0, sizeof *out);
    out->table.storage = lrc_xcalloc((size_t)g->n_nodes + 1, sizeof *out->table.storage);
    choose_storage(g, s, bulk, out->table.storage);
    out->table.launches = lrc_xcalloc((size_t)p->n_kernels + 1, sizeof *out->table.launches);
    out->table.n_launches = p->n_kernels;
    out->table.n_storage = g->n_nodes;
    cu_text kernels = {0}, tables = {0};
    int rc = LRC_OK;
    bool *member = lrc_xcalloc((size_t)g->n_nodes, 1);
    int *arg_of = lrc_xmalloc((size_t)(g->n_nodes + p->n_extra + 1) * sizeof(int));
    int *owner = lrc_xmalloc((size_t)(p->n_kernels + 1) * sizeof(int));
    for (int i = 0; i < p->n_kernels && !rc; i++) {
        const lrc_kernel_desc *k = &p->kernels[i];
        lrc_cuda_launch *l = &out->table.launches[i];
        if (k->group < 0) {
            rc = lrc_err_set(err, "cuda: the program has a packing kernel (build it with lrc_cuda_tiling)");
            break;
        }
        const lrc_group *gr = &s->groups[k->group];
        memset(member, 0, (size_t)g->n_nodes);
        for (int j = 0; j < gr->n_nodes; j++) member[gr->nodes[j]] = true;
        for (int b = 0; b < g->n_nodes + p->n_extra; b++) arg_of[b] = -1;
        for (int a = 0; a < k->n_args; a++) arg_of[k->args[a]] = a;
        cu_gen c = {g, s, p, k, gr, out->table.storage, member, arg_of, &kernels, &tables, l, 0, {-1, -1}, 1, NULL, NULL, false};
        /* every launch of an owner shares its code, so shares its launch shape */
        owner[i] = code_owner(p, g->n_nodes, out->table.storage, owner, i);
        cu_text *keep = c.t, scratch_text = {0};
        if (owner[i] != i) c.t = &scratch_text;
        snprintf(l->symbol, sizeof l->symbol, "%s", p->kernels[owner[i]].name);
        l->grid[0] = l->grid[1] = l->grid[2] = 1;
        const lrc_node *a = &g->nodes[gr->anchor];
        bool ok = true;
        if (gr->kind == LRC_GROUP_ELEMENTWISE) render_elementwise(&c, cu_rows(&a->shape), cu_last_dim(&a->shape));
        else if (k->loop_to >= 0) l->symbol[0] = 0; /* a back edge: the executor's copies, no kernel */
        else ok = cu_render_anchor(&c, a); /* the anchor's kernel (fuse.c chose the group kind from the same op) */
        free(scratch_text.s);
        c.t = keep;
        if (!ok) {
            rc = lrc_err_set(err, "op %s cannot be generated for cuda", lrc_op_name(a->op));
            if (a->loc) lrc_err_prefix(err, "%s", a->loc);
        } else if (owner[i] == i && l->symbol[0]) {
            out->n_symbols++;
        }
    }
    free(member);
    free(arg_of);
    free(owner);
    if (rc) {
        free(kernels.s);
        free(tables.s);
        lrc_cuda_program_free(out);
        return rc;
    }
    cu_text src = {0};
    cu_printf(&src, "%s%s%s%s", cu_prelude, tables.s ? tables.s : "", kernels.s ? kernels.s : "", is_training(g) ? cu_optimizer : "");
    free(kernels.s);
    free(tables.s);
    out->source = src.s;
    return LRC_OK;
}

void lrc_cuda_program_free(lrc_cuda_program *cp)
{
    free(cp->source);
    free(cp->table.launches);
    free(cp->table.storage);
    memset(cp, 0, sizeof *cp);
}
