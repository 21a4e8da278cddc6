/* grad.c — the gradient rule of every differentiable op that is not
 * elementwise (the op table's `grad`; the elementwise ops' rules are in
 * ew.c): nodes that compute the gradients of an op's inputs from the
 * gradient of its output. Reverse mode over the graph is
 * ir/passes/autodiff.c. */
#include "ref_ops.h"

#include <stdlib.h>
#include <string.h>

static int add_op(lrc_graph *g, lrc_op op, int a, int b, lrc_err *err)
{
    lrc_node p = {.op = op, .n_in = lrc_op_table[op].n_in, .in = {a, b}};
    return lrc_graph_add(g, &p, err);
}

#define NODE lrc_node n = g->nodes[id] /* a copy: adding nodes moves the array */

int lrc_grad_matmul(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    NODE;
    dx[0] = add_op(g, LRC_OP_MATMUL_NN, dy, n.in[1], err);
    dx[1] = dx[0] < 0 ? -1 : add_op(g, LRC_OP_MATMUL_TN, dy, n.in[0], err);
    return dx[0] < 0 || dx[1] < 0 ? LRC_EUSER : LRC_OK;
}

int lrc_grad_embedding(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    NODE;
    lrc_node p = {.op = LRC_OP_EMBEDDING_GRAD, .n_in = 2, .in = {n.in[0], dy}, .iattr = {g->nodes[n.in[1]].shape.dim[0]}};
    dx[1] = lrc_graph_add(g, &p, err);
    return dx[1] < 0 ? LRC_EUSER : LRC_OK;
}

int lrc_grad_rmsnorm(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    NODE;
    lrc_node p = {.op = LRC_OP_RMSNORM_GRAD, .n_in = 2, .in = {n.in[0], dy}, .fattr = {n.fattr[0]}};
    dx[0] = lrc_graph_add(g, &p, err);
    return dx[0] < 0 ? LRC_EUSER : LRC_OK;
}

int lrc_grad_rope(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    NODE;
    lrc_node p = {.op = LRC_OP_ROPE_GRAD, .n_in = 1, .in = {dy}};
    memcpy(p.fattr, n.fattr, sizeof p.fattr); /* base and scaling */
    dx[0] = lrc_graph_add(g, &p, err);
    return dx[0] < 0 ? LRC_EUSER : LRC_OK;
}

/* The backward reads the forward's output and each row's log-sum-exp,
 * which the forward's kernel writes beside it (fuse rule 7), instead of
 * computing the softmax's statistics again (flash attention's backward). */
/* Whether node id depends on a parameter (into *reads): the gradient of a
 * bias made from run-time inputs alone (a mask) is never needed. Nodes
 * come after their inputs, so one pass over [0, id] decides it. */
static int reads_param(const lrc_graph *g, int id, bool *reads_out, lrc_err *err)
{
    bool *reads = lrc_malloc((size_t)(id + 1) * sizeof(bool));
    if (!reads) return lrc_err_nomem(err, "for the attention gradient's walk over %d nodes", id + 1);
    for (int i = 0; i <= id; i++) {
        const lrc_node *n = &g->nodes[i];
        reads[i] = n->op == LRC_OP_PARAM;
        for (int k = 0; k < n->n_in && !reads[i]; k++) reads[i] = reads[n->in[k]];
    }
    *reads_out = reads[id];
    free(reads);
    return LRC_OK;
}

int lrc_grad_attention(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    NODE;
    const lrc_shape *qs = &g->nodes[n.in[0]].shape, *ks = &g->nodes[n.in[1]].shape, *vs = &g->nodes[n.in[2]].shape;
    bool bias = n.n_in > 3, general = bias || qs->dim[1] != ks->dim[1] || vs->dim[3] != qs->dim[3];
    /* the general form's nodes carry the attention's line: the compiled targets refuse them (codegen/program.c) */
    char *loc = general ? n.loc : NULL;
    lrc_node l = {.op = LRC_OP_ATTENTION_LSE, .n_in = n.n_in, .in = {n.in[0], n.in[1], n.in[2], n.in[3]}, .iattr = {n.iattr[0], n.iattr[1]},
                  .fattr = {n.fattr[0], n.fattr[1]}, .loc = loc};
    int lse = lrc_graph_add(g, &l, err);
    if (lse < 0) return LRC_EUSER;
    bool learned = false;
    if (bias && reads_param(g, n.in[3], &learned, err)) return LRC_EUSER;
    int last = learned ? 3 : 2;
    for (int k = 0; k <= last; k++) {
        lrc_node p = {.op = LRC_OP_ATTENTION_GRAD, .n_in = bias ? 7 : 6, .in = {n.in[0], n.in[1], n.in[2], dy, id, lse, n.in[3]},
                      .iattr = {n.iattr[0], k, n.iattr[1]}, .fattr = {n.fattr[0], n.fattr[1]}, .loc = loc};
        if ((dx[k] = lrc_graph_add(g, &p, err)) < 0) return LRC_EUSER;
    }
    return LRC_OK;
}

int lrc_grad_softmax(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    dx[0] = add_op(g, LRC_OP_SOFTMAX_GRAD, id, dy, err);
    return dx[0] < 0 ? LRC_EUSER : LRC_OK;
}

int lrc_grad_reshape(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    NODE;
    const lrc_shape *s = &g->nodes[n.in[0]].shape;
    lrc_node p = {.op = LRC_OP_RESHAPE, .n_in = 1, .in = {dy}, .n_iattr = s->ndim};
    for (int i = 0; i < s->ndim; i++) p.iattr[i] = s->dim[i];
    dx[0] = lrc_graph_add(g, &p, err);
    return dx[0] < 0 ? LRC_EUSER : LRC_OK;
}

int lrc_grad_transpose(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    NODE;
    lrc_node p = {.op = LRC_OP_TRANSPOSE, .n_in = 1, .in = {dy}, .n_iattr = n.n_iattr};
    for (int i = 0; i < n.n_iattr; i++) p.iattr[n.iattr[i]] = i; /* the inverse permutation */
    dx[0] = lrc_graph_add(g, &p, err);
    return dx[0] < 0 ? LRC_EUSER : LRC_OK;
}

int lrc_grad_depth_gain(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    NODE;
    for (int k = 0; k < 5; k++) {
        lrc_node p = {.op = LRC_OP_DEPTH_GAIN_GRAD, .n_in = 6, .in = {n.in[0], n.in[1], n.in[2], n.in[3], n.in[4], dy},
                      .iattr = {n.iattr[0], k, n.iattr[1]}, .fattr = {n.fattr[0], n.fattr[1]}};
        if ((dx[k] = lrc_graph_add(g, &p, err)) < 0) return LRC_EUSER;
    }
    return LRC_OK;
}

int lrc_grad_cross_entropy(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    NODE;
    int d = add_op(g, LRC_OP_CROSS_ENTROPY_GRAD, n.in[0], n.in[1], err);
    dx[0] = d < 0 || dy < 0 ? d : add_op(g, LRC_OP_MUL, d, dy, err); /* dy < 0: the loss itself */
    return dx[0] < 0 ? LRC_EUSER : LRC_OK;
}

int lrc_grad_layernorm(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    NODE;
    lrc_node p = {.op = LRC_OP_LAYERNORM_GRAD, .n_in = 2, .in = {n.in[0], dy}, .fattr = {n.fattr[0]}};
    dx[0] = lrc_graph_add(g, &p, err);
    return dx[0] < 0 ? LRC_EUSER : LRC_OK;
}

/* the transpose of a slice is the slice that puts the values back */
int lrc_grad_slice(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    NODE;
    int axis = (int)n.iattr[0];
    lrc_node p = {.op = LRC_OP_SLICE, .n_in = 1, .in = {dy},
                  .iattr = {axis, -n.iattr[1], g->nodes[n.in[0]].shape.dim[axis]}};
    dx[0] = lrc_graph_add(g, &p, err);
    return dx[0] < 0 ? LRC_EUSER : LRC_OK;
}

/* a loop passes no gradient back: its iterations run without one (Parcae's
 * truncation); the iterations that need one are unrolled in the graph */
int lrc_grad_stop(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    (void)g, (void)id, (void)dy, (void)dx, (void)err;
    return LRC_OK;
}

int lrc_grad_loop_next(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    (void)dy, (void)dx;
    if (g->nodes[id].iattr[0])
        return lrc_err_set(err, "nn.scan: no gradient flows through nn.scan yet (its forward runs; backward and train need lrc.scan or an unrolled loop)");
    return LRC_OK;
}

