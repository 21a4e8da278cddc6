/* axes.c — one axis (a batch's rows, a sequence's positions) followed
 * through a graph by each op's axes rule (lrc_op_info.axes), to tell
 * whether a graph compiled for a longer shape computes a shorter one as its
 * prefix: a package compiled for [B, T] then runs [B', T'] by padding. */
#include "lrc_ir.h"

#include <stdlib.h>
#include <string.h>

#define IN(k) (&g->nodes[n->in[k]])

static int mixes(const lrc_graph *g, const lrc_node *n, const char *what, const char *why, lrc_err *err)
{
    (void)g;
    return lrc_err_set(err, "%s%s%s %s %s", n->loc ? n->loc : "", n->loc ? ": " : "", lrc_op_name(n->op), why, what);
}

/* Each output element from the same leading indices of the inputs, numpy's
 * broadcasting aligned right; an op other than an elementwise one mixes
 * its last axis (a matmul's K, a norm's or softmax's row). */
static int axes_local(const lrc_graph *g, const lrc_node *n, const int *axis, const char *what, int *out, lrc_err *err)
{
    bool elementwise = lrc_op_table[n->op].fusion == LRC_FUSE_ELEMENTWISE || n->op == LRC_OP_CAST; /* cast: element by element */
    int r = n->shape.ndim, at = -1;
    for (int k = 0; k < n->n_in; k++) {
        int a = axis[n->in[k]], rk = IN(k)->shape.ndim;
        if (a < 0) continue;
        /* a GEMM's weight W[N, K]: its rows become the output's last axis */
        if (k > 0 && lrc_op_table[n->op].fusion == LRC_FUSE_GEMM) return mixes(g, n, what, "multiplies by a matrix that depends on the", err);
        if (a == rk - 1 && !elementwise) return mixes(g, n, what, "reduces over the last axis, which is the", err);
        int m = a + r - rk;
        if (m < 0 || IN(k)->shape.dim[a] != n->shape.dim[m] || (at >= 0 && at != m))
            return mixes(g, n, what, "broadcasts across the", err);
        at = m;
    }
    *out = at;
    return LRC_OK;
}

static int axes_gather(const lrc_graph *g, const lrc_node *n, const int *axis, const char *what, int *out, lrc_err *err)
{
    if (axis[n->in[1]] >= 0) return mixes(g, n, what, "looks rows up in a table that depends on the", err);
    *out = axis[n->in[0]];
    return LRC_OK;
}

static int axes_attention(const lrc_graph *g, const lrc_node *n, const int *axis, const char *what, int *out, lrc_err *err)
{
    int at = -1;
    for (int k = 0; k < n->n_in; k++) {
        int a = axis[n->in[k]];
        if (a < 0) continue;
        if ((at >= 0 && a != at) || a > 1) return mixes(g, n, what, "attends across the", err);
        if (a == 1 && !n->iattr[0]) return mixes(g, n, what, "has no causal mask: every position attends to the whole", err);
        at = a;
    }
    *out = at;
    return LRC_OK;
}

static int axes_reshape(const lrc_graph *g, const lrc_node *n, const int *axis, const char *what, int *out, lrc_err *err)
{
    int a = axis[n->in[0]];
    *out = a;
    if (a < 0) return LRC_OK;
    bool kept = n->shape.ndim > a;
    for (int d = 0; d <= a && kept; d++) kept = n->shape.dim[d] == IN(0)->shape.dim[d];
    return kept ? LRC_OK : mixes(g, n, what, "merges or splits the", err);
}

static int axes_transpose(const lrc_graph *g, const lrc_node *n, const int *axis, const char *what, int *out, lrc_err *err)
{
    (void)what, (void)err;
    int a = axis[n->in[0]];
    *out = -1;
    for (int i = 0; i < n->n_iattr && a >= 0; i++)
        if (n->iattr[i] == a) *out = i;
    (void)g;
    return LRC_OK;
}

static int axes_slice(const lrc_graph *g, const lrc_node *n, const int *axis, const char *what, int *out, lrc_err *err)
{
    int a = axis[n->in[0]];
    *out = a;
    if (a < 0 || n->iattr[0] != a) return LRC_OK;
    /* out[i] = x[i + start]: earlier positions only, and every one of them */
    if (n->iattr[1] > 0 || n->iattr[2] != IN(0)->shape.dim[a]) return mixes(g, n, what, "reads later positions of the", err);
    return LRC_OK;
}

static int axes_loop(const lrc_graph *g, const lrc_node *n, const int *axis, const char *what, int *out, lrc_err *err)
{
    int s = axis[n->in[0]], h = axis[n->in[1]], c = axis[n->in[2]];
    if (s >= 0 && h >= 0 && s != h) return mixes(g, n, what, "carries a state across the", err);
    int at = s >= 0 ? s : h;
    /* the counts are per row of axis 0: the batch */
    if (c >= 0 && (c != 0 || (at >= 0 && at != 0))) return mixes(g, n, what, "counts iterations across the", err);
    *out = at >= 0 ? at : c;
    return LRC_OK;
}

/* x[..., S|1, K], W, ids[..., S] -> [..., S, N]: the leading axes are the
 * output's, aligned left; the slot axis and K mix */
static int axes_routed(const lrc_graph *g, const lrc_node *n, const int *axis, const char *what, int *out, lrc_err *err)
{
    int x = axis[n->in[0]], ids = axis[n->in[2]], slot = IN(2)->shape.ndim - 1;
    if (axis[n->in[1]] >= 0) return mixes(g, n, what, "multiplies by a matrix that depends on the", err);
    if ((x >= 0 && ids >= 0 && x != ids) || x >= slot || ids >= slot) return mixes(g, n, what, "routes across the", err);
    *out = x >= 0 ? x : ids;
    return LRC_OK;
}

/* the ops along iattr[0] (reduce.c): the other axes stay, shifted where a
 * reduction drops its own; expand's aligned right, unless broadcast */
static int axes_along(const lrc_graph *g, const lrc_node *n, const int *axis, const char *what, int *out, lrc_err *err)
{
    *out = -1;
    for (int k = 0; k < n->n_in; k++) {
        int a = axis[n->in[k]], m = a;
        if (a < 0) continue;
        bool runs = n->op == LRC_OP_CUMSUM || n->op == LRC_OP_SCAN; /* along the axis, earlier positions only */
        if (n->op == LRC_OP_SCAN && k == 2) { /* init lacks the axis */
            m = a + (a >= n->iattr[0]);
        } else if (n->op == LRC_OP_EXPAND) {
            m = a + n->shape.ndim - IN(0)->shape.ndim;
            if (IN(0)->shape.dim[a] != n->shape.dim[m]) return mixes(g, n, what, "broadcasts across the", err);
        } else if (a == n->iattr[0] && n->op == LRC_OP_CONCAT) {
            return mixes(g, n, what, "joins its inputs along the", err);
        } else if (a == n->iattr[0] && runs) { /* forwards: earlier positions only */
            if (n->iattr[1]) return mixes(g, n, what, n->op == LRC_OP_SCAN ? "scans from the end of the" : "sums from the end of the", err);
        } else if (a == n->iattr[0]) {
            return mixes(g, n, what, "reduces over the", err);
        } else if (a > n->iattr[0] && !runs && n->op != LRC_OP_CONCAT && !n->iattr[1]) {
            m = a - 1; /* a reduction without keepdim drops its axis */
        }
        if (*out >= 0 && *out != m) return mixes(g, n, what, "joins inputs that hold it at other axes, the", err);
        *out = m;
    }
    return LRC_OK;
}

/* a [..., M, K] x b [..., K, N]: the batch axes aligned right as
 * broadcasting aligns them, a's rows and b's columns stay; K mixes */
static int axes_bmm(const lrc_graph *g, const lrc_node *n, const int *axis, const char *what, int *out, lrc_err *err)
{
    int r = n->shape.ndim, at = -1;
    for (int k = 0; k < 2; k++) {
        int a = axis[n->in[k]], rk = IN(k)->shape.ndim, m = a + r - rk;
        if (a < 0) continue;
        if (a == rk - 1 - k) return mixes(g, n, what, "sums over K, which is the", err);
        if (a < rk - 2 && IN(k)->shape.dim[a] != n->shape.dim[m]) return mixes(g, n, what, "broadcasts across the", err);
        if (at >= 0 && at != m) return mixes(g, n, what, "joins inputs that hold it at other axes, the", err);
        at = m;
    }
    *out = at;
    return LRC_OK;
}

/* In a decoding step each position is computed alone: attention reads the
 * earlier ones from its cache, but a slice shifting along the sequence (a
 * token shift, a causal convolution) or a cumsum or scan over it would
 * see none. */
static int reads_other_positions(const lrc_graph *g, const lrc_node *n, const int *axis, const char *what, lrc_err *err)
{
    int a = n->n_in ? axis[n->in[0]] : -1;
    if (n->op == LRC_OP_SCAN && a < 0) a = axis[n->in[1]]; /* b alone may carry it */
    if (a < 0 || n->iattr[0] != a) return LRC_OK;
    if (n->op == LRC_OP_SLICE && !n->iattr[3] && (n->iattr[1] != 0 || n->iattr[2] != IN(0)->shape.dim[a]))
        return mixes(g, n, what, "reads other positions (one a step when decoding) of the", err);
    if (n->op == LRC_OP_CUMSUM) return mixes(g, n, what, "sums (one position a step when decoding) along the", err);
    if (n->op == LRC_OP_SCAN) return mixes(g, n, what, "scans (one position a step when decoding) along the", err);
    return LRC_OK;
}

static int track(const lrc_graph *g, const int *input_axis, const char *what, bool stepwise, int *axis, lrc_err *err)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const lrc_node *n = &g->nodes[i];
        int rc = LRC_OK;
        axis[i] = -1;
        if (stepwise && (rc = reads_other_positions(g, n, axis, what, err))) return rc;
        switch (lrc_op_table[n->op].axes) {
        case LRC_AXES_SOURCE: axis[i] = n->op == LRC_OP_INPUT ? input_axis[i] : -1; break;
        case LRC_AXES_LOCAL: rc = axes_local(g, n, axis, what, &axis[i], err); break;
        case LRC_AXES_GATHER: rc = axes_gather(g, n, axis, what, &axis[i], err); break;
        case LRC_AXES_ATTENTION: rc = axes_attention(g, n, axis, what, &axis[i], err); break;
        case LRC_AXES_RESHAPE: rc = axes_reshape(g, n, axis, what, &axis[i], err); break;
        case LRC_AXES_TRANSPOSE: rc = axes_transpose(g, n, axis, what, &axis[i], err); break;
        case LRC_AXES_SLICE: rc = axes_slice(g, n, axis, what, &axis[i], err); break;
        case LRC_AXES_LOOP: rc = axes_loop(g, n, axis, what, &axis[i], err); break;
        case LRC_AXES_ROUTED: rc = axes_routed(g, n, axis, what, &axis[i], err); break;
        case LRC_AXES_ALONG: rc = axes_along(g, n, axis, what, &axis[i], err); break;
        case LRC_AXES_BMM: rc = axes_bmm(g, n, axis, what, &axis[i], err); break;
        case LRC_AXES_MIXED:
            for (int k = 0; k < n->n_in && !rc; k++)
                if (axis[n->in[k]] >= 0) rc = mixes(g, n, what, "mixes the whole", err);
            break;
        }
        if (rc) return rc;
    }
    return LRC_OK;
}

int lrc_graph_track_axis(const lrc_graph *g, const int *input_axis, const char *what, int *axis, lrc_err *err)
{
    return track(g, input_axis, what, false, axis, err);
}

int lrc_graph_check_stepwise(const lrc_graph *g, lrc_err *err)
{
    int *in = lrc_reallocarray(NULL, (size_t)g->n_nodes * 2, sizeof(int));
    if (!in) return lrc_err_nomem(err, "checking the graph for decoding");
    for (int i = 0; i < g->n_nodes; i++) in[i] = g->nodes[i].op == LRC_OP_INPUT && g->nodes[i].shape.ndim >= 2 ? 1 : -1;
    int rc = LRC_OK;
    /* an arange as long as the sequence counts its positions, from 0 in
     * every decoding step, whatever the step's position */
    for (int i = 0; i < g->n_nodes && !rc; i++)
        for (int j = 0; j < g->n_nodes && !rc && g->nodes[i].op == LRC_OP_ARANGE; j++)
            if (in[j] > 0 && g->nodes[j].shape.dim[1] == g->nodes[i].iattr[0])
                rc = mixes(g, &g->nodes[i], "sequence", "counts positions from 0 in every decoding step (one a step) of the", err);
    if (!rc) rc = track(g, in, "sequence", true, in + g->n_nodes, err);
    free(in);
    return rc;
}
