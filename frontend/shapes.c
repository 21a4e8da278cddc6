/* shapes.c — which shorter shapes a package runs, decided at compile time:
 * an axis is free where every op keeps a prefix of it (ir/axes.c), and the
 * compiled shapes halve along it so that a short run costs what it
 * computes. */
#include "shapes.h"

#include <stdlib.h>
#include <string.h>

#define MAX_LEVELS 8 /* halvings per axis: 8 x 8 shapes at most */

/* Where each INPUT of g holds the axis that changes between g and the model
 * built for [Bp, Tp]: input_axis[i], or -1. *found: some input has it. */
static int probe_axis(lrc_model *m, const lrc_graph *g, int64_t Bp, int64_t Tp, int *input_axis, bool *found, char *why,
                      size_t n, lrc_err *err)
{
    lrc_graph *p = lrc_graph_new();
    int rc = lrc_model_build(m, Bp, Tp, p, err);
    *found = false;
    bool same = !rc && p->n_nodes == g->n_nodes;
    for (int i = 0; i < g->n_nodes && same; i++) same = p->nodes[i].op == g->nodes[i].op;
    if (!rc && !same) snprintf(why, n, "the model's graph for [%lld, %lld] is not that of [B, T] with other shapes", (long long)Bp, (long long)Tp);
    for (int i = 0; i < g->n_nodes && !rc && same; i++) {
        const lrc_node *a = &g->nodes[i], *b = &p->nodes[i];
        input_axis[i] = -1;
        if (a->op != LRC_OP_INPUT) continue;
        int changed = 0;
        for (int d = 0; d < a->shape.ndim && d < b->shape.ndim; d++)
            if (a->shape.dim[d] != b->shape.dim[d]) input_axis[i] = d, changed++;
        if (changed > 1 || a->shape.ndim != b->shape.ndim) {
            snprintf(why, n, "input '%s' changes in more than one axis", a->name);
            same = false;
        }
        *found |= changed == 1;
    }
    lrc_graph_free(p);
    return rc ? rc : same ? LRC_OK : 1; /* 1: the axis stays fixed (why says why) */
}

/* The inputs' and outputs' axes (of the batch: which 0, the sequence: 1) in out. */
static void record_axes(const lrc_graph *g, const int *axis, int which, cli_shapes *out)
{
    for (int i = 0; i < g->n_nodes + g->n_outputs; i++) {
        bool input = i < g->n_nodes;
        if (input && g->nodes[i].op != LRC_OP_INPUT) continue;
        const char *name = input ? g->nodes[i].name : g->output_names[i - g->n_nodes];
        int a = axis[input ? i : g->outputs[i - g->n_nodes]], k = 0;
        while (k < out->n_named && strcmp(out->name[k], name)) k++;
        if (k == out->n_named) {
            if (k == CLI_SHAPES_MAX_NAMED || strlen(name) >= sizeof out->name[k]) continue; /* then it runs only its own shape */
            snprintf(out->name[k], sizeof out->name[k], "%s", name);
            out->batch_axis[k] = out->seq_axis[k] = -1;
            out->n_named++;
        }
        (which ? out->seq_axis : out->batch_axis)[k] = a;
    }
}

/* Whether the axis that changes from [B, T] to [Bp, Tp] may run shorter. */
static int axis_free(lrc_model *m, const lrc_graph *g, int64_t Bp, int64_t Tp, int which, bool *free_, char *why, size_t n,
                     cli_shapes *out, lrc_err *err)
{
    const char *what = which ? "sequence" : "batch";
    int *input_axis = lrc_xcalloc((size_t)g->n_nodes, sizeof(int)), *axis = lrc_xcalloc((size_t)g->n_nodes, sizeof(int));
    bool found = false;
    int rc = probe_axis(m, g, Bp, Tp, input_axis, &found, why, n, err);
    *free_ = false;
    if (rc == 1) rc = LRC_OK;
    else if (!rc && !found) {
        snprintf(why, n, "no input has a %s axis", what);
        if (which) out->seq_axis_none = true;
    }
    else if (!rc) {
        lrc_err e;
        if (lrc_graph_track_axis(g, input_axis, what, axis, &e)) snprintf(why, n, "%.250s", e.msg);
        else *free_ = true, why[0] = 0, record_axes(g, axis, which, out);
    }
    free(input_axis);
    free(axis);
    return rc;
}

/* size, then halvings (rounded up) while at least lo, MAX_LEVELS at most */
static int levels(int64_t size, int64_t lo, bool free_, int64_t *out)
{
    int n = 0;
    out[n++] = size;
    for (int64_t v = (size + 1) / 2; free_ && v >= lo && v < out[n - 1] && n < MAX_LEVELS; v = (v + 1) / 2) out[n++] = v;
    return n;
}

int cli_shapes_plan(lrc_model *m, const lrc_graph *g, int64_t B, int64_t T, int64_t min_seq, cli_shapes *out, lrc_err *err)
{
    memset(out, 0, sizeof *out);
    snprintf(out->batch_fixed, sizeof out->batch_fixed, "it was compiled for a batch of 1");
    snprintf(out->seq_fixed, sizeof out->seq_fixed, "it was compiled for a sequence of 1");
    if (B > 1 && axis_free(m, g, (B + 1) / 2, T, 0, &out->batch_prefix, out->batch_fixed, sizeof out->batch_fixed, out, err))
        return LRC_EUSER;
    if (T > 1 && axis_free(m, g, B, (T + 1) / 2, 1, &out->seq_prefix, out->seq_fixed, sizeof out->seq_fixed, out, err))
        return LRC_EUSER;
    int64_t bs[MAX_LEVELS], ts[MAX_LEVELS];
    int nb = levels(B, 1, out->batch_prefix, bs), nt = levels(T, min_seq > 0 ? min_seq : 16, out->seq_prefix, ts);
    for (int i = 0; i < nb; i++)
        for (int j = 0; j < nt; j++)
            if (i || j) out->batch[out->n] = bs[i], out->seq[out->n++] = ts[j];
    return LRC_OK;
}
