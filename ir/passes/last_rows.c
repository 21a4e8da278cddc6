/* last_rows.c — a language model's logits at the last position only (lrc
 * compile --logits last), as a prompt's processing needs them: the output
 * "logits" [B, T, V] becomes [B, 1, V], and every node whose rows only that
 * row needs is computed for that row alone. The cut moves up from the
 * output through ops whose row t (axis 1) reads only row t of their
 * sequence operands (a matmul's x, norms over the last axis, elementwise
 * and broadcast ops, reshapes that keep the batch and sequence axes) and
 * stops where rows meet (attention), where a row's position matters (RoPE)
 * or where another consumer needs every row; there a slice takes the last
 * row. Which ops are row-wise is the op table's `rows` rule. In a LLaMA
 * that leaves the LM head and the last layer's output projection and MLP
 * (or mixture of experts) to one row: llama.cpp's prompt processing does
 * the same. Each remaining row is computed as before, so the logits are the
 * full forward's last row. */
#include "lrc_passes.h"

#include <stdlib.h>
#include <string.h>

static bool carries_seq(const lrc_node *n, int64_t T) { return n->shape.ndim >= 2 && n->shape.dim[1] == T; }

/* Input k of n carries the sequence at the output's rank: read row by row */
static bool same_rank_seq(const lrc_graph *g, const lrc_node *n, int k, int64_t T)
{
    return carries_seq(&g->nodes[n->in[k]], T) && g->nodes[n->in[k]].shape.ndim == n->shape.ndim;
}

/* Row t of node n (axis 1) reads only row t of each operand that carries the
 * sequence, and the other operands whole: its op's rows rule (the op
 * table's), for the shapes at hand. */
static bool rowwise(const lrc_graph *g, const lrc_node *n, int64_t T)
{
    if (!carries_seq(n, T) || n->shape.ndim < 3) return false; /* rows of [B, T, ...] only */
    const lrc_shape *x = &g->nodes[n->in[0]].shape;
    switch (lrc_op_table[n->op].rows) {
    case LRC_ROWS_FIRST: return same_rank_seq(g, n, 0, T);
    case LRC_ROWS_RESHAPE: return x->ndim >= 3 && x->dim[0] == n->shape.dim[0] && x->dim[1] == T;
    case LRC_ROWS_SLICE: return same_rank_seq(g, n, 0, T) && n->iattr[0] >= 2;
    case LRC_ROWS_ROUTED: { /* ids [B, T, S] beside x [B, T, S|1, K] */
        const lrc_shape *ids = &g->nodes[n->in[2]].shape;
        return same_rank_seq(g, n, 0, T) && ids->ndim == n->shape.ndim - 1 && ids->dim[0] == n->shape.dim[0] && ids->dim[1] == T;
    }
    case LRC_ROWS_SCAN: /* init [B, T, ...] too, as the axis is past the sequence */
        return n->iattr[0] >= 2 && same_rank_seq(g, n, 0, T) && same_rank_seq(g, n, 1, T) &&
               (n->n_in < 3 || carries_seq(&g->nodes[n->in[2]], T));
    case LRC_ROWS_EACH:
        for (int k = 0; k < n->n_in; k++) {
            const lrc_shape *s = &g->nodes[n->in[k]].shape;
            /* the same rank with the sequence, or broadcast over it: fewer axes than reach axis 1, or size 1 there */
            bool whole = s->ndim < n->shape.ndim - 1 || (s->ndim == n->shape.ndim && s->dim[1] == 1);
            if (!same_rank_seq(g, n, k, T) && !whole) return false;
        }
        return true;
    default: return false;
    }
}

/* Operand k of row-wise node n is read row by row (else whole) */
static bool seq_operand(const lrc_graph *g, const lrc_node *n, int k, int64_t T)
{
    switch (lrc_op_table[n->op].rows) {
    case LRC_ROWS_EACH: return same_rank_seq(g, n, k, T);
    case LRC_ROWS_ROUTED: return k == 0 || k == 2;
    case LRC_ROWS_SCAN: return true;
    default: return k == 0;
    }
}

typedef struct {
    const lrc_graph *g;
    lrc_graph *ng;
    int64_t T;
    int *full, *last; /* per old node: its new node over every row, and over the last row (-1: none yet) */
} cut_t;

/* The new node holding old node id's last row: its own last-row version, or a slice of the full one */
static int last_of(cut_t *c, int id, lrc_err *err)
{
    if (c->last[id] >= 0) return c->last[id];
    const lrc_node *n = &c->g->nodes[id];
    lrc_node s = {.op = LRC_OP_SLICE, .n_in = 1, .in = {c->full[id]}, .iattr = {1, c->T - 1, 1, 0}, .loc = n->loc};
    return c->last[id] = c->full[id] < 0 ? -1 : lrc_graph_add(c->ng, &s, err);
}

/* need[id]: every use of old node id reads only its last row (the output, or a row-wise consumer that needs only its own) */
static bool *needs_last(const lrc_graph *g, int logits, int64_t T)
{
    bool *need = lrc_xcalloc((size_t)g->n_nodes + 1, sizeof(bool));
    bool *full_use = lrc_xcalloc((size_t)g->n_nodes + 1, sizeof(bool)), *used = lrc_xcalloc((size_t)g->n_nodes + 1, sizeof(bool));
    for (int i = 0; i < g->n_outputs; i++) {
        used[g->outputs[i]] = true;
        if (g->outputs[i] != logits) full_use[g->outputs[i]] = true;
    }
    for (int id = g->n_nodes - 1; id >= 0; id--) { /* consumers come after their operands */
        const lrc_node *n = &g->nodes[id];
        need[id] = used[id] && !full_use[id] && carries_seq(n, T);
        bool rw = need[id] && rowwise(g, n, T);
        for (int k = 0; k < n->n_in; k++) {
            used[n->in[k]] = true;
            if (!rw || !seq_operand(g, n, k, T)) full_use[n->in[k]] = true;
        }
    }
    free(full_use);
    free(used);
    return need;
}

/* Old node id rebuilt over its last row from its operands' last rows */
static int add_last(cut_t *c, int id, lrc_err *err)
{
    const lrc_node *n = &c->g->nodes[id];
    lrc_node p = *n;
    for (int k = 0; k < n->n_in; k++) {
        p.in[k] = seq_operand(c->g, n, k, c->T) ? last_of(c, n->in[k], err) : c->full[n->in[k]];
        if (p.in[k] < 0) return -1;
    }
    if (n->op == LRC_OP_RESHAPE) { /* the same new shape with one row */
        p.n_iattr = n->shape.ndim;
        for (int d = 0; d < n->shape.ndim; d++) p.iattr[d] = d == 1 ? 1 : n->shape.dim[d];
    }
    return c->last[id] = lrc_graph_add(c->ng, &p, err);
}

int lrc_pass_last_rows(lrc_graph **gp, lrc_err *err)
{
    lrc_graph *g = *gp;
    int logits = -1;
    for (int i = 0; i < g->n_outputs; i++)
        if (!strcmp(g->output_names[i], "logits")) logits = g->outputs[i];
    if (logits < 0 || g->nodes[logits].shape.ndim != 3) {
        char has[256] = "", b[96];
        for (int i = 0, len = 0; i < g->n_outputs && len < (int)sizeof has; i++)
            len += snprintf(has + len, sizeof has - (size_t)len, "%s'%s' %s", i ? ", " : "", g->output_names[i],
                            lrc_shape_str(&g->nodes[g->outputs[i]].shape, b, sizeof b));
        return lrc_err_set(err, "--logits last needs a language model's output 'logits' [B, T, V]; this model's: %s", has);
    }
    cut_t c = {g, lrc_graph_new(), g->nodes[logits].shape.dim[1], NULL, NULL};
    c.full = lrc_xmalloc((size_t)g->n_nodes * sizeof(int) + 1);
    c.last = lrc_xmalloc((size_t)g->n_nodes * sizeof(int) + 1);
    bool *need = needs_last(g, logits, c.T);
    int rc = LRC_OK;
    for (int id = 0; id < g->n_nodes && !rc; id++) {
        const lrc_node *n = &g->nodes[id];
        c.full[id] = c.last[id] = -1;
        if (need[id] && rowwise(g, n, c.T)) {
            rc = add_last(&c, id, err) < 0 ? LRC_EUSER : LRC_OK;
            continue;
        }
        lrc_node p = *n; /* every row: its operands' every row */
        for (int k = 0; k < n->n_in; k++) p.in[k] = c.full[n->in[k]]; /* built: a node read whole is never cut */
        c.full[id] = lrc_graph_add(c.ng, &p, err);
        if (c.full[id] < 0) rc = LRC_EUSER;
    }
    for (int i = 0; i < g->n_outputs && !rc; i++) {
        int o = g->outputs[i] == logits ? last_of(&c, logits, err) : c.full[g->outputs[i]];
        rc = o < 0 || lrc_graph_add_output(c.ng, g->output_names[i], o, err) ? LRC_EUSER : LRC_OK;
    }
    free(need);
    free(c.full);
    free(c.last);
    if (rc) {
        lrc_graph_free(c.ng);
        return rc;
    }
    lrc_graph_free(g);
    *gp = c.ng;
    return lrc_pass_dce(gp, NULL, err); /* the full rows nothing reads any more */
}
