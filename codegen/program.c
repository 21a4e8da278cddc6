/* program.c — from kernel groups to launch descriptions, shared by every
 * target: each group becomes one kernel with its argument buffers and its
 * work items; each GEMM's weight gets a packing kernel into an extra buffer
 * (run once when the weight is a parameter). */
#include "lrc_codegen.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t last_dim(const lrc_shape *s) { return s->ndim ? s->dim[s->ndim - 1] : 1; }
static int64_t rows_of(const lrc_shape *s) { return lrc_shape_numel(s) / (last_dim(s) ? last_dim(s) : 1); }

/* GEMM node a's rows per work item, as codegen/llvm/gemm.c tiles them */
static int64_t gemm_item_rows(const lrc_graph *g, const lrc_node *a, const lrc_gemm_tiling *t)
{
    int64_t cols, K;
    lrc_gemm_dims(g, a, &cols, &K);
    return lrc_gemm_item_rows(t, a->op == LRC_OP_MATMUL_TN, rows_of(&a->shape), last_dim(&a->shape), K);
}
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int lrc_program_packed_of(const lrc_program *p, int w, int panel, bool transposed)
{
    for (int i = 0; i < p->n_extra; i++)
        if (p->extra[i].of_node == w && p->extra[i].panel == panel && p->extra[i].transposed == transposed) return i;
    return -1;
}

bool lrc_is_gemm_op(lrc_op op) { return lrc_op_table[op].fusion == LRC_FUSE_GEMM; }

void lrc_gemm_dims(const lrc_graph *g, const lrc_node *n, int64_t *cols, int64_t *inner)
{
    const lrc_shape *w = &g->nodes[n->in[1]].shape;
    if (n->op == LRC_OP_MATMUL) *cols = w->dim[0], *inner = w->dim[1];
    else if (n->op == LRC_OP_MATMUL_NN) *cols = w->dim[1], *inner = w->dim[0];
    else *cols = w->dim[w->ndim - 1], *inner = lrc_shape_numel(w) / w->dim[w->ndim - 1];
}

/* ---- how an opaque kernel's work splits (a per-op table) ---------------- */

/* The work items of an op's kernel of its own, as both renderers write it:
 * ITEMS_<op> for every op of LRC_OPS (ir/lrc_ir.h), so an op without an
 * entry names an undefined ITEMS_<op> and does not compile. Ops that only
 * anchor other kinds of group take their group's split (GROUP); sums into
 * shared rows run as ONE item. */
typedef enum { GROUP, ONE, ROWS, INPUT_ROWS, HEADS, COLUMNS, SUMMED_COLUMNS, OUTER } item_rule;

#define ITEMS_input GROUP /* sources and views: no kernel */
#define ITEMS_param GROUP
#define ITEMS_state GROUP
#define ITEMS_reshape GROUP
#define ITEMS_matmul GROUP
#define ITEMS_matmul_nn GROUP
#define ITEMS_matmul_tn GROUP
#define ITEMS_attention GROUP
#define ITEMS_kv_attention GROUP
#define ITEMS_attention_lse GROUP /* the attention kernel's, beside its output (fuse rule 7) or alone */
#define ITEMS_rmsnorm GROUP
#define ITEMS_layernorm GROUP
#define ITEMS_softmax GROUP
#define ITEMS_embedding ROWS
#define ITEMS_rope ROWS
#define ITEMS_rope_grad ROWS
#define ITEMS_rmsnorm_grad ROWS
#define ITEMS_softmax_grad ROWS
#define ITEMS_layernorm_grad ROWS
#define ITEMS_cross_entropy_grad ROWS
#define ITEMS_attention_grad HEADS /* (batch, key-value head) pairs */
#define ITEMS_sum_to SUMMED_COLUMNS /* blocks of LRC_SUM_COLS columns where the sum is to a vector */
#define ITEMS_embedding_grad COLUMNS /* blocks of LRC_SUM_COLS columns */
#define ITEMS_transpose ONE
#define ITEMS_slice ONE
#define ITEMS_depth_gain ONE
#define ITEMS_depth_gain_grad ONE
#define ITEMS_cross_entropy INPUT_ROWS /* the logits' rows; on the cpu each row's term goes to scratch, summed in order by the last to finish */
#define ITEMS_loop_state ONE
#define ITEMS_loop_next ONE
#define ITEMS_topk ROWS
#define ITEMS_gather ROWS
#define ITEMS_gather_grad ROWS
#define ITEMS_expert_matmul COLUMNS /* blocks of LRC_SUM_COLS output columns, every row */
#define ITEMS_expert_matmul_tn COLUMNS
#define ITEMS_sum OUTER /* the ops along one axis: input 0 as [outer, len, inner] about the axis, an item per outer index */
#define ITEMS_mean OUTER
#define ITEMS_amax OUTER
#define ITEMS_logsumexp OUTER
#define ITEMS_cumsum OUTER
#define ITEMS_concat OUTER
#define ITEMS_expand ONE
#define ITEMS_amax_grad OUTER
#define ITEMS_scan OUTER
#define ITEMS_bmm ROWS /* an output row of one batch index's product */
#define ITEMS_cast ONE
#define ITEMS_arange ONE

static const item_rule items_of[LRC_OP_COUNT] = {
#define ITEMS_ENTRY(E, op) [LRC_OP_##E] = ITEMS_##op,
    LRC_OPS(ITEMS_ENTRY)
#undef ITEMS_ENTRY
#define ITEMS_EW_ENTRY(E, ...) [LRC_OP_##E] = ONE, /* an elementwise op alone: a broadcast, no inputs, or in double */
    LRC_EW_OPS(ITEMS_EW_ENTRY)
#undef ITEMS_EW_ENTRY
};

static int64_t opaque_items(const lrc_graph *g, const lrc_node *a)
{
    switch (items_of[a->op]) {
    case ROWS: return rows_of(&a->shape);
    case INPUT_ROWS: return rows_of(&g->nodes[a->in[0]].shape);
    /* (batch, key-value head) pairs: an item owns the rows of dk and dv it
     * sums over the query heads that share them (GQA) */
    case HEADS: return a->shape.dim[0] * g->nodes[a->in[1]].shape.dim[2];
    case COLUMNS: return cdiv(last_dim(&a->shape), LRC_SUM_COLS);
    case SUMMED_COLUMNS: return lrc_sum_to_columns(g, a) ? cdiv(lrc_sum_to_columns(g, a), LRC_SUM_COLS) : 1;
    case OUTER: {
        int64_t outer, len, inner;
        lrc_axis_split(&g->nodes[a->in[0]].shape, (int)a->iattr[0], &outer, &len, &inner);
        return outer;
    }
    default: return 1;
    }
}

/* (batch, key-value head) pairs, or one item where the group has the gradient
 * of a bias broadcast along batch or heads: the pairs add into the same
 * rows of it, in a fixed order (codegen/llvm/attention_grad_general.c) */
static int64_t attention_grad_items(const lrc_graph *g, const lrc_group *gr)
{
    const lrc_node *a = &g->nodes[gr->anchor];
    const lrc_shape *qs = &g->nodes[a->in[0]].shape;
    for (int j = 0; j < gr->n_nodes; j++) {
        const lrc_node *m = &g->nodes[gr->nodes[j]];
        if (m->op != LRC_OP_ATTENTION_GRAD || m->iattr[1] != 3) continue;
        const lrc_shape *bs = &m->shape;
        if ((bs->dim[0] == 1 && qs->dim[0] > 1) || (bs->dim[1] == 1 && qs->dim[2] > 1)) return 1;
    }
    return opaque_items(g, a);
}

static lrc_kernel_desc *new_kernel(lrc_program *p)
{
    p->kernels = lrc_xrealloc(p->kernels, (size_t)(p->n_kernels + 1) * sizeof *p->kernels);
    lrc_kernel_desc *k = &p->kernels[p->n_kernels++];
    memset(k, 0, sizeof *k);
    k->loop_to = -1;
    return k;
}

static void add_arg(lrc_kernel_desc *k, int buf)
{
    k->args = lrc_xrealloc(k->args, (size_t)(k->n_args + 1) * sizeof(int));
    k->args[k->n_args++] = buf;
}

static double buf_bytes(const lrc_graph *g, int id) { return (double)lrc_shape_numel(&g->nodes[id].shape) * 4; }

/* Which ops each group kind can render; anything else is a clear error. */
static bool renderable(const lrc_graph *g, const lrc_group *gr, const lrc_node *n, bool anchor)
{
    lrc_fusion f = lrc_op_table[n->op].fusion;
    switch (gr->kind) {
    case LRC_GROUP_ELEMENTWISE: return f == LRC_FUSE_ELEMENTWISE;
    case LRC_GROUP_ROW: return anchor ? lrc_op_is_row(n->op) : f == LRC_FUSE_ELEMENTWISE;
    case LRC_GROUP_GEMM: /* and an LM head's loss with its gradient (fuse rule 8) */
        return lrc_is_gemm_op(n->op) || (!anchor && f == LRC_FUSE_ELEMENTWISE) ||
               (!anchor && (n->op == LRC_OP_CROSS_ENTROPY || n->op == LRC_OP_CROSS_ENTROPY_GRAD) && lrc_group_is_loss_head(g, gr));
    case LRC_GROUP_ATTENTION: /* RoPE of q or k (fuse rule 4), the row statistics (rule 7) */
        return anchor ? f == LRC_FUSE_ATTENTION : n->op == LRC_OP_ROPE || n->op == LRC_OP_ATTENTION_LSE;
    case LRC_GROUP_OPAQUE: /* one op (or its nodes for each input, fuse rule 6; a loss's gradient, rule 9; a summed product, rule 10;
                            * a reduction's prologue, rule 11); the renderer says whether it can */
        return anchor || (n->op == g->nodes[gr->anchor].op && lrc_op_table[n->op].share_by_which) ||
               lrc_group_loss_pair_grad(g, gr) == (int)(n - g->nodes) || lrc_group_sum_product(g, gr) == (int)(n - g->nodes) ||
               (lrc_group_is_reduce_prologue(g, gr) && f == LRC_FUSE_ELEMENTWISE);
    default: return false;
    }
}

/* Appends printf-style text to a growing string. */
static void sig_add(char **s, size_t *len, size_t *cap, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void sig_add(char **s, size_t *len, size_t *cap, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(*s + *len, *cap - *len, fmt, ap);
        va_end(ap);
        if ((size_t)n < *cap - *len) {
            *len += (size_t)n;
            return;
        }
        *cap = 2 * *cap + (size_t)n;
        *s = lrc_xrealloc(*s, *cap);
    }
}

static void sig_shape(char **s, size_t *len, size_t *cap, const lrc_node *n)
{
    char b[160];
    sig_add(s, len, cap, "%s%s", lrc_dtype_name(n->dtype), lrc_shape_str(&n->shape, b, sizeof b));
}

/* Everything the generated code of k depends on, with buffers named by
 * argument position: two kernels with equal signatures have equal code. */
static char *signature(const lrc_graph *g, const lrc_schedule *s, const lrc_program *p, const lrc_kernel_desc *k)
{
    size_t len = 0, cap = 256;
    char *sig = lrc_xmalloc(cap);
    sig[0] = 0;
    sig_add(&sig, &len, &cap, "%s|", k->group < 0 ? "pack" : lrc_group_kind_name(k->kind));
    for (int a = 0; a < k->n_args; a++) {
        if (k->args[a] >= g->n_nodes)
            sig_add(&sig, &len, &cap, "x%lld/%d/%d/%lldx%lld/%s,", (long long)p->extra[k->args[a] - g->n_nodes].bytes,
                    p->extra[k->args[a] - g->n_nodes].panel, p->extra[k->args[a] - g->n_nodes].transposed,
                    (long long)p->extra[k->args[a] - g->n_nodes].cols, (long long)p->extra[k->args[a] - g->n_nodes].inner,
                    lrc_wstore_name(p->extra[k->args[a] - g->n_nodes].store));
        else sig_shape(&sig, &len, &cap, &g->nodes[k->args[a]]);
        sig_add(&sig, &len, &cap, ";");
    }
    if (k->group < 0) return sig;
    const lrc_group *gr = &s->groups[k->group];
    for (int j = 0; j < gr->n_nodes; j++) {
        const lrc_node *n = &g->nodes[gr->nodes[j]];
        sig_add(&sig, &len, &cap, "|%s%s:", gr->nodes[j] == gr->anchor ? "*" : "", lrc_op_name(n->op));
        sig_shape(&sig, &len, &cap, n);
        for (int a = 0; a < LRC_MAX_IATTR; a++) sig_add(&sig, &len, &cap, ",%lld", (long long)n->iattr[a]);
        for (int a = 0; a < LRC_MAX_FATTR; a++) sig_add(&sig, &len, &cap, ",%a", n->fattr[a]);
        sig_add(&sig, &len, &cap, ",n%d", n->n_iattr);
        for (int i = 0; i < n->n_in; i++) {
            int src = n->in[i], m = -1, arg = -1;
            for (int q = 0; q < gr->n_nodes; q++)
                if (gr->nodes[q] == src) m = q;
            for (int a = 0; a < k->n_args; a++)
                if (k->args[a] == s->buffer_of[src]) arg = a;
            if (arg < 0) /* a GEMM weight is passed packed */
                for (int a = 0; a < k->n_args; a++)
                    if (k->args[a] >= g->n_nodes && p->extra[k->args[a] - g->n_nodes].of_node == s->buffer_of[src]) arg = a;
            sig_add(&sig, &len, &cap, " %c%d:", m >= 0 ? 'm' : 'a', m >= 0 ? m : arg);
            sig_shape(&sig, &len, &cap, &g->nodes[src]);
        }
    }
    for (int j = 0; j < gr->n_outputs; j++)
        for (int q = 0; q < gr->n_nodes; q++)
            if (gr->nodes[q] == gr->outputs[j]) sig_add(&sig, &len, &cap, "|out m%d", q);
    return sig;
}

/* A kernel's scratch: an extra buffer of its own (panel 0, so never a
 * packed weight), its last argument, zero when the plan allocates it. */
static void add_scratch(lrc_program *p, lrc_kernel_desc *k, const lrc_graph *g, int node, int64_t bytes)
{
    p->extra = lrc_xrealloc(p->extra, (size_t)(p->n_extra + 1) * sizeof *p->extra);
    p->extra[p->n_extra] = (lrc_extra_buf){node, 0, false, 0, 0, bytes, LRC_WSTORE_F32};
    add_arg(k, g->n_nodes + p->n_extra++);
}

int lrc_program_build(const lrc_graph *g, const lrc_schedule *s, lrc_gemm_tiling t, lrc_program *p, lrc_err *err)
{
    memset(p, 0, sizeof *p);
    p->tiling = t;
    int NR = t.vec * t.nv;
    int *kernel_of = lrc_xmalloc((size_t)s->n_groups * sizeof(int) + 1); /* group -> its kernel */
    for (int gi = 0; gi < s->n_groups; gi++) {
        const lrc_group *gr = &s->groups[gi];
        const lrc_node *a = &g->nodes[gr->anchor];
        for (int j = 0; j < gr->n_nodes; j++) {
            const lrc_node *n = &g->nodes[gr->nodes[j]];
            if (!renderable(g, gr, n, gr->nodes[j] == gr->anchor)) {
                lrc_program_free(p);
                free(kernel_of);
                lrc_err_set(err, "op %s cannot be generated in a %s kernel", lrc_op_name(n->op), lrc_group_kind_name(gr->kind));
                return n->loc ? lrc_err_prefix(err, "%s", n->loc) : LRC_EUSER;
            }
        }
        int64_t head_dim = g->nodes[a->in[0]].shape.dim[3], vdim = a->n_in > 2 ? g->nodes[a->in[2]].shape.dim[3] : 0; /* Dqk, Dv */
        if (vdim > head_dim) head_dim = vdim;
        if ((gr->kind == LRC_GROUP_ATTENTION || (a->op == LRC_OP_ATTENTION_GRAD && t.vec > 0)) && head_dim > 1024) {
            lrc_program_free(p);
            free(kernel_of);
            lrc_err_set(err, "%s: head dimension %lld is over the 1024 the cpu kernels hold in registers",
                        lrc_op_name(a->op), (long long)head_dim);
            return a->loc ? lrc_err_prefix(err, "%s", a->loc) : LRC_EUSER;
        }
        /* GEMM weights: packed once (when parameters) into panels; a kernel
         * with two matmuls packs each in panels of one vector. A tiling
         * with no vectors (vec 0) means a GEMM library reads them as they are. */
        int packed[2] = {-1, -1}, wnode[2] = {-1, -1}, mnode[2] = {-1, -1}, n_mm = 0;
        if (gr->kind == LRC_GROUP_GEMM && t.vec > 0)
            for (int j = 0; j < gr->n_nodes; j++)
                if (lrc_is_gemm_op(g->nodes[gr->nodes[j]].op) && n_mm < 2) {
                    mnode[n_mm] = gr->nodes[j];
                    wnode[n_mm++] = s->buffer_of[g->nodes[gr->nodes[j]].in[1]];
                }
        int panel = n_mm == 2 ? t.vec : NR;
        for (int m = 0; m < n_mm; m++) {
            int w = wnode[m];
            bool transposed = g->nodes[mnode[m]].op != LRC_OP_MATMUL;
            packed[m] = lrc_program_packed_of(p, w, panel, transposed);
            int64_t N, K;
            lrc_gemm_dims(g, &g->nodes[mnode[m]], &N, &K);
            bool constant = g->nodes[w].op == LRC_OP_PARAM;
            if (packed[m] < 0 || !constant) {
                p->extra = lrc_xrealloc(p->extra, (size_t)(p->n_extra + 1) * sizeof *p->extra);
                /* a frozen weight: half (bf16) or about a quarter (q8) of the bytes the GEMM streams */
                lrc_wstore store = constant ? t.w_store : LRC_WSTORE_F32;
                int64_t bytes = store == LRC_WSTORE_Q8 ? cdiv(N, panel) * lrc_q8_panel_bytes(panel, K)
                                                       : cdiv(N, panel) * panel * K * (store == LRC_WSTORE_BF16 ? 2 : 4);
                p->extra[p->n_extra] = (lrc_extra_buf){w, panel, transposed, N, K, bytes, store};
                packed[m] = p->n_extra++;
                lrc_kernel_desc *k = new_kernel(p);
                snprintf(k->name, sizeof k->name, "pack%d", packed[m]);
                k->group = -1;
                k->kind = LRC_GROUP_OPAQUE;
                k->once = constant;
                add_arg(k, w);
                add_arg(k, g->n_nodes + packed[m]);
                k->n_items = cdiv(N, panel);
                k->any_split = true; /* an item a panel */
                k->bytes = 2 * buf_bytes(g, w);
            }
        }
        kernel_of[gi] = p->n_kernels;
        lrc_kernel_desc *k = new_kernel(p);
        snprintf(k->name, sizeof k->name, "k%d_%s", gi, lrc_group_kind_name(gr->kind));
        k->group = gi;
        if (a->op == LRC_OP_LOOP_NEXT) k->loop_to = kernel_of[s->group_of[a->in[0]]] + 1;
        k->kind = gr->kind;
        for (int j = 0; j < gr->n_inputs; j++) {
            int in = gr->inputs[j], m = in == wnode[0] ? 0 : in == wnode[1] ? 1 : -1;
            add_arg(k, m >= 0 ? g->n_nodes + packed[m] : in);
            k->bytes += buf_bytes(g, in);
        }
        for (int j = 0; j < gr->n_outputs; j++) {
            add_arg(k, gr->outputs[j]);
            k->bytes += buf_bytes(g, gr->outputs[j]);
        }
        if (k->loop_to >= 0) { /* the back edge's operands, in a fixed order */
            k->n_args = 0;
            for (int q = 0; q < 3; q++) add_arg(k, s->buffer_of[a->in[q]]);
        }
        for (int j = 0; j < gr->n_nodes; j++) k->flops += lrc_op_table[g->nodes[gr->nodes[j]].op].flops(g, &g->nodes[gr->nodes[j]]);
        /* an op whose traffic is not its whole buffers (a gather reads only its
         * rows) has its rule in the op table */
        if (lrc_op_table[a->op].bytes != LRC_BYTES_ALL) k->bytes = lrc_node_bytes(g, a);
        switch (gr->kind) {
        case LRC_GROUP_GEMM:
            k->n_items = cdiv(rows_of(&a->shape), gemm_item_rows(g, a, &t)) * cdiv(last_dim(&a->shape), lrc_gemm_item_cols(&t, a->op == LRC_OP_MATMUL_TN));
            k->any_split = true; /* an item a block of the output (its sums whole in it) */
            if (lrc_group_is_loss_head(g, gr)) { /* a block of rows, all the columns: each row's statistics at hand */
                assert(t.vec > 0); /* only the cpu target, which tiles its GEMMs, asks for fuse rule 8 */
                k->n_items = lrc_loss_head_blocks(rows_of(&a->shape), t.mc_head);
                k->any_split = false; /* the loss combines the chunks' partial sums */
                add_scratch(p, k, g, gr->anchor, 8 * LRC_CE_STATS * rows_of(&a->shape) + 64);
            }
            break;
        case LRC_GROUP_ATTENTION: /* (batch, head); decoding: (batch, key-value head), the cache rows it writes */
            k->n_items = a->shape.dim[0] * (a->op == LRC_OP_KV_ATTENTION ? g->nodes[a->in[1]].shape.dim[2] : a->shape.dim[2]);
            k->any_split = true; /* an item's rows of the output (and cache) its own */
            break;
        case LRC_GROUP_OPAQUE:
            k->n_items = a->op == LRC_OP_ATTENTION_GRAD ? attention_grad_items(g, gr) : opaque_items(g, a);
            k->any_split = items_of[a->op] == HEADS; /* an item owns its heads' rows of every output */
            if (a->op == LRC_OP_CROSS_ENTROPY && t.vec > 0) add_scratch(p, k, g, gr->anchor, 8 * LRC_CE_STATS * k->n_items + 64);
            break;
        default: k->n_items = rows_of(&a->shape); break;
        }
    }
    free(kernel_of);
    for (int i = 0; i < p->n_kernels; i++) {
        lrc_kernel_desc *k = &p->kernels[i];
        k->signature = signature(g, s, p, k);
        k->impl = i;
        for (int j = 0; j < i && k->impl == i; j++)
            if (p->kernels[j].impl == j && !strcmp(p->kernels[j].signature, k->signature)) k->impl = j;
    }
    return LRC_OK;
}

void lrc_program_free(lrc_program *p)
{
    for (int i = 0; i < p->n_kernels; i++) {
        free(p->kernels[i].args);
        free(p->kernels[i].signature);
    }
    free(p->kernels);
    free(p->extra);
    memset(p, 0, sizeof *p);
}
