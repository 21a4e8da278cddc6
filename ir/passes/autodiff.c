/* autodiff.c — reverse mode over the graph: from a scalar loss node, each
 * node's gradient (the sum of what its consumers send back through their
 * op's gradient rule) is built as new nodes, last node first. The result
 * is one graph — forward, loss, backward — that the other passes, the
 * schedule and the code generators handle like any graph. */
#include "lrc_passes.h"

#include <stdlib.h>
#include <string.h>

int lrc_pass_autodiff(lrc_graph *g, int loss, lrc_err *err)
{
    /* the loss's own rule takes the seed gradient 1 as "no dy" */
    if (loss < 0 || loss >= g->n_nodes || g->nodes[loss].op != LRC_OP_CROSS_ENTROPY)
        return lrc_err_set(err, "autodiff: the loss must be a cross_entropy node");
    int N = loss + 1;
    int *grad = lrc_xmalloc((size_t)N * sizeof(int));
    for (int i = 0; i < N; i++) grad[i] = -1;
    grad[loss] = -2; /* the seed: d loss / d loss = 1, folded into the loss's own rule */
    int rc = LRC_OK;
    for (int id = loss; id >= 0 && !rc; id--) {
        if (grad[id] == -1) continue;
        lrc_node n = g->nodes[id];
        const lrc_op_info *info = &lrc_op_table[n.op];
        if (info->fusion == LRC_FUSE_SOURCE) continue;
        if (!info->grad) {
            rc = lrc_err_set(err, "autodiff: op %s has no gradient", info->name);
            if (n.loc) lrc_err_prefix(err, "%s", n.loc);
            break;
        }
        int dx[LRC_MAX_INPUTS];
        for (int k = 0; k < LRC_MAX_INPUTS; k++) dx[k] = -1;
        if ((rc = info->grad(g, id, grad[id] == -2 ? -1 : grad[id], dx, err))) {
            if (n.loc) lrc_err_prefix(err, "%s", n.loc);
            break;
        }
        for (int k = 0; k < n.n_in && !rc; k++) {
            int src = n.in[k];
            if (dx[k] < 0 || g->nodes[src].dtype == LRC_I32) continue;
            if (grad[src] < 0) {
                grad[src] = dx[k];
            } else {
                lrc_node sum = {.op = LRC_OP_ADD, .n_in = 2, .in = {grad[src], dx[k]}};
                if ((grad[src] = lrc_graph_add(g, &sum, err)) < 0) rc = LRC_EUSER;
            }
        }
    }
    /* outputs: the loss, then one gradient per parameter, named as it */
    for (int i = 0; i < g->n_outputs; i++) free(g->output_names[i]);
    g->n_outputs = 0;
    if (!rc) rc = lrc_graph_add_output(g, "loss", loss, err);
    for (int id = 0; id < N && !rc; id++) {
        if (g->nodes[id].op != LRC_OP_PARAM) continue;
        int d = grad[id];
        if (d < 0) { /* a parameter the loss does not depend on: zeros */
            lrc_node z = {.op = LRC_OP_SCALE, .n_in = 1, .in = {id}, .fattr = {0.0}};
            if ((d = lrc_graph_add(g, &z, err)) < 0) rc = LRC_EUSER;
        }
        if (!rc) rc = lrc_graph_add_output(g, g->nodes[id].name, d, err);
    }
    free(grad);
    return rc;
}
