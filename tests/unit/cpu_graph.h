/* cpu_graph.h — what the cpu kernel tests share: building a graph node by
 * node (inputs, parameters, ops, outputs), filling tensors from a seeded
 * generator, and the LM-head-with-loss graph that both the case table and
 * the fused-against-unfused check run. */
#ifndef LRC_TEST_CPU_GRAPH_H
#define LRC_TEST_CPU_GRAPH_H

#include "frontend/compile/lrc_compile.h"

#include <stdio.h>
#include <string.h>

static inline lrc_shape S(int nd, const int64_t *dims)
{
    lrc_shape s = {nd, {0}};
    for (int i = 0; i < nd; i++) s.dim[i] = dims[i];
    return s;
}

static inline int input(lrc_graph *g, const char *name, int nd, const int64_t *dims, lrc_dtype t)
{
    lrc_err err;
    lrc_shape s = S(nd, dims);
    return lrc_graph_add_input(g, name, t, &s, NULL, &err);
}

static inline int param(lrc_graph *g, const char *name, int nd, const int64_t *dims)
{
    lrc_err err;
    lrc_shape s = S(nd, dims);
    lrc_init init = {LRC_INIT_NORMAL, 0.5};
    return lrc_graph_add_param(g, name, &s, init, NULL, NULL, &err);
}

static inline int op(lrc_graph *g, lrc_op o, int a, int b, int c, double f0, int64_t i0)
{
    lrc_err err;
    lrc_node n = {.op = o, .n_in = lrc_op_table[o].n_in, .in = {a, b, c}, .fattr = {f0}, .iattr = {i0}};
    int id = lrc_graph_add(g, &n, &err);
    if (id < 0) printf("  build: %s\n", err.msg);
    return id;
}

static inline int reshape(lrc_graph *g, int x, int nd, const int64_t *dims)
{
    lrc_err err;
    lrc_node n = {.op = LRC_OP_RESHAPE, .n_in = 1, .in = {x}, .n_iattr = nd};
    for (int i = 0; i < nd; i++) n.iattr[i] = dims[i];
    return lrc_graph_add(g, &n, &err);
}

static inline int out(lrc_graph *g, const char *name, int id)
{
    lrc_err err;
    return id < 0 ? -1 : lrc_graph_add_output(g, name, id, &err);
}

/* Random values in [-1, 1) for f32; for i32 in [0, int_range), with every
 * fifth "labels" entry -100 (a row the loss ignores). */
static inline void fill(lrc_tensor *t, lrc_rng *r, int64_t int_range)
{
    int64_t n = lrc_shape_numel(&t->shape);
    for (int64_t i = 0; i < n; i++) {
        if (t->dtype == LRC_I32)
            ((int32_t *)t->data)[i] = (i % 5 == 3 && !strcmp(t->name, "labels")) ? -100 : (int32_t)(lrc_rng_next(r) % (uint64_t)int_range);
        else ((float *)t->data)[i] = (float)(2 * lrc_rng_uniform(r) - 1);
    }
}

static inline int b_loss_head(lrc_graph *g, const int64_t *d)
{ /* an LM head in training: logits = x W^T read only by the loss and its gradient (fuse rule 8 on the cpu);
   * with d[2], the logits an output too, which keeps them a buffer (unfused) */
    int64_t xs[3] = {d[0], d[1], d[3]}, ws[2] = {d[4], d[3]}, ids[2] = {d[0], d[1]};
    int x = input(g, "x", 3, xs, LRC_F32), w = param(g, "w", 2, ws), labels = input(g, "labels", 2, ids, LRC_I32);
    int logits = op(g, LRC_OP_MATMUL, x, w, 0, 0, 0);
    return out(g, "loss", op(g, LRC_OP_CROSS_ENTROPY, logits, labels, 0, 0, 0)) ||
           out(g, "loss_grad", op(g, LRC_OP_CROSS_ENTROPY_GRAD, logits, labels, 0, 0, 0)) || (d[2] && out(g, "logits", logits));
}

#endif
