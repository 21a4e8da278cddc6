/* decode.c — the graph of one decoding step with a KV cache, from a model's
 * graph built for the new tokens only: every causal attention whose q and k
 * carry sequence RoPE (the LLaMA family's, and any model's built from
 * lrc.nn.attention) becomes kv_attention over two state buffers, the layer's
 * K and V caches, at the position given by a new input "pos"; so does one
 * with no RoPE at all (kv_attention's base 0), whose model reads learned
 * positions through slice{positions}, which becomes that table's row pos. */
#include "lrc_passes.h"

#include <stdlib.h>
#include <string.h>

int lrc_pass_kv_cache(lrc_graph **gp, int64_t max_len, lrc_err *err)
{
    lrc_graph *g = *gp;
    /* a model that mixes positions other than by causal attention has no
     * one-token step (its error names the node, its line first) */
    if (lrc_graph_check_stepwise(g, err)) return LRC_EUSER;
    lrc_graph *ng = lrc_graph_new();
    /* attention without RoPE decodes as kv_attention with base 0 only in a
     * model with no RoPE at all: a RoPE that reaches q or k other than
     * directly would stay in the one-token graph, rotating to position 0 */
    bool any_rope = false;
    for (int id = 0; id < g->n_nodes; id++) any_rope |= g->nodes[id].op == LRC_OP_ROPE;
    int *map = lrc_xmalloc((size_t)g->n_nodes * sizeof(int));
    lrc_shape one = {1, {1}};
    int pos = lrc_graph_add_input(ng, "pos", LRC_I32, &one, NULL, err), rc = pos < 0 ? LRC_EUSER : LRC_OK;
    int layer = 0;
    for (int id = 0; id < g->n_nodes && !rc; id++) {
        const lrc_node *n = &g->nodes[id];
        lrc_node p = *n;
        for (int k = 0; k < n->n_in; k++) p.in[k] = map[n->in[k]];
        if (n->op == LRC_OP_ATTENTION) {
            const lrc_node *q = &g->nodes[n->in[0]], *k = &g->nodes[n->in[1]];
            /* RoPE on both (kv_attention rotates them), or on neither (base 0) */
            bool roped = q->op == LRC_OP_ROPE && k->op == LRC_OP_ROPE;
            bool general = n->n_in > 3 || q->shape.dim[1] != k->shape.dim[1] || n->shape.dim[3] != q->shape.dim[3]; /* a bias, cross */
            if (!n->iattr[0] || general || (!roped && any_rope) || (roped && memcmp(q->fattr, k->fattr, sizeof q->fattr))) {
                rc = lrc_err_set(err, "decoding with a KV cache needs causal self-attention without a bias, "
                                      "with the same RoPE on q and k, or none");
                if (n->loc) lrc_err_prefix(err, "%s", n->loc);
                break;
            }
            lrc_shape cs = k->shape; /* the key-value heads only (GQA's cache is H / Hkv times smaller) */
            cs.dim[1] = max_len;
            char kn[64], vn[64];
            snprintf(kn, sizeof kn, "cache.%d.k", layer);
            snprintf(vn, sizeof vn, "cache.%d.v", layer++);
            int kc = lrc_graph_add_state(ng, kn, &cs, n->loc, err), vc = kc < 0 ? -1 : lrc_graph_add_state(ng, vn, &cs, n->loc, err);
            lrc_node kv = {.op = LRC_OP_KV_ATTENTION, .n_in = 6,
                           .in = {roped ? map[q->in[0]] : map[n->in[0]], roped ? map[k->in[0]] : map[n->in[1]], map[n->in[2]], kc, vc, pos},
                           .iattr = {n->iattr[1]}, .fattr = {n->fattr[0], 0, n->fattr[1]}, .loc = n->loc};
            if (roped) { /* q's rope, scaling included; base 0 (no RoPE) otherwise */
                lrc_rope r = lrc_rope_of(q);
                lrc_rope_set(&kv, &r);
            }
            map[id] = vc < 0 ? -1 : lrc_graph_add(ng, &kv, err);
        } else if (n->op == LRC_OP_SLICE && n->iattr[3]) {
            /* learned positions (lrc.slice{positions=true}: rows start.. of a
             * table): the new token's row is the table's row pos */
            if (n->iattr[0] != 0 || n->iattr[1] != 0 || n->iattr[2] != 1 || g->nodes[n->in[0]].shape.ndim != 2) {
                rc = lrc_err_set(err, "decoding with a KV cache reads learned positions one token a step: slice{positions} "
                                      "must take rows 0.. of a [positions, d] table");
                if (n->loc) lrc_err_prefix(err, "%s", n->loc);
                break;
            }
            lrc_node e = {.op = LRC_OP_EMBEDDING, .n_in = 2, .in = {pos, map[n->in[0]]}, .loc = n->loc};
            map[id] = lrc_graph_add(ng, &e, err);
        } else {
            map[id] = lrc_graph_add(ng, &p, err);
        }
        if (map[id] < 0) rc = LRC_EUSER;
    }
    for (int i = 0; i < g->n_outputs && !rc; i++) rc = lrc_graph_add_output(ng, g->output_names[i], map[g->outputs[i]], err);
    free(map);
    if (!rc && layer == 0) rc = lrc_err_set(err, "the model has no attention to cache");
    if (rc) {
        lrc_graph_free(ng);
        return rc;
    }
    lrc_graph_free(g);
    *gp = ng;
    return lrc_pass_dce(gp, NULL, err); /* the RoPE nodes now feed nothing */
}
