/* run64.c — a graph run in f64 on the reference kernels (lrc_run64): every
 * float in double, for lrc's diagnostics (lrc diagnose, analyze, export's
 * check) and the finite-difference gradient tests. Not part of liblrc, so
 * it allocates with ir/xalloc.c's exiting allocators. */
#include "lrc_runtime.h"

#include <stdlib.h>
#include <string.h>

int lrc_run64_exec(lrc_run64 *r, int first, int end, lrc_err *err)
{
    const lrc_graph *g = r->g;
    if (!r->iteration) r->iteration = lrc_xcalloc((size_t)g->n_nodes + 1, sizeof *r->iteration);
    for (int id = first; id < end; id++) {
        const lrc_node *n = &g->nodes[id];
        size_t count = (size_t)lrc_shape_numel(&n->shape);
        if (n->op == LRC_OP_PARAM) {
            r->buf[id] = r->param[id];
            continue;
        }
        /* a buffer per node, reused when a loop's body runs again */
        if (!r->buf[id]) r->buf[id] = lrc_xcalloc(count ? count : 1, n->dtype == LRC_I32 ? 4 : 8);
        if (n->op == LRC_OP_INPUT) {
            const lrc_tensor *t = lrc_tensor_set_find(r->inputs, n->name);
            if (!t || lrc_shape_numel(&t->shape) != (int64_t)count) return lrc_err_set(err, "missing input '%s'", n->name);
            if (t->dtype == LRC_F32) /* widened like the parameters */
                for (size_t i = 0; i < count; i++) ((double *)r->buf[id])[i] = ((const float *)t->data)[i];
            else memcpy(r->buf[id], t->data, count * 4);
            continue;
        }
        if (n->op == LRC_OP_LOOP_NEXT) { /* the back edge, as the executors run it */
            int st = n->in[0];
            bool again = lrc_loop_rows(r->buf[n->in[2]], n->shape.dim[0], r->iteration[id], r->buf[st], r->buf[n->in[1]],
                                       count / (size_t)n->shape.dim[0] * sizeof(double));
            if (r->on_iteration) r->on_iteration(r, id, r->iteration[id]);
            if (again && st >= first) { /* the body again */
                r->iteration[id]++;
                id = st;
                continue;
            }
            r->iteration[id] = 0;
            memcpy(r->buf[id], r->buf[st], count * sizeof(double));
            continue;
        }
        if (!lrc_op_table[n->op].ref64) return lrc_err_set(err, "op %s has no ref64 kernel", lrc_op_name(n->op));
        void *in[LRC_MAX_INPUTS];
        for (int k = 0; k < n->n_in; k++) in[k] = r->buf[n->in[k]];
        int rc = lrc_op_table[n->op].ref64(g, n, in, r->buf[id], err);
        if (rc) return n->loc ? lrc_err_prefix(err, "%s", n->loc) : rc;
    }
    return LRC_OK;
}

void lrc_run64_init(lrc_run64 *r, const lrc_graph *g, const lrc_tensor_set *inputs, const lrc_tensor_set *params)
{
    memset(r, 0, sizeof *r);
    r->g = g;
    r->inputs = inputs;
    r->param = lrc_xcalloc((size_t)g->n_nodes + 1, sizeof *r->param);
    r->buf = lrc_xcalloc((size_t)g->n_nodes + 1, sizeof *r->buf);
    for (int id = 0; id < g->n_nodes; id++) {
        if (g->nodes[id].op != LRC_OP_PARAM) continue;
        const lrc_tensor *t = lrc_tensor_set_find(params, g->nodes[id].name); /* bound: f32, the node's shape */
        int64_t count = lrc_shape_numel(&g->nodes[id].shape);
        r->param[id] = lrc_xmalloc((size_t)count * sizeof(double) + 8);
        for (int64_t i = 0; i < count; i++) r->param[id][i] = ((const float *)t->data)[i];
    }
}

void lrc_run64_free(lrc_run64 *r)
{
    for (int id = 0; r->buf && id < r->g->n_nodes; id++) {
        if (r->g->nodes[id].op != LRC_OP_PARAM) free(r->buf[id]);
        free(r->param[id]);
    }
    free(r->buf);
    free(r->param);
    free(r->iteration);
    r->buf = NULL;
    r->param = NULL;
    r->iteration = NULL;
}
