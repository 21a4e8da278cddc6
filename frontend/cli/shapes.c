/* shapes.c — which shorter shapes a package runs, decided at compile time:
 * an axis is free where every op keeps a prefix of it (ir/axes.c), and the
 * compiled shapes halve along it so that a short run costs what it
 * computes. */
#include "shapes.h"

#include <stdlib.h>
#include <string.h>

#define MAX_LEVELS 8 /* halvings per axis: 8 x 8 shapes at most */

/* The axis along which a's shape differs from b's: -1 (none), or -2 (more
 * than one, or another rank). */
static int changed_axis(const lrc_shape *a, const lrc_shape *b)
{
    if (a->ndim != b->ndim) return -2;
    int at = -1;
    for (int d = 0; d < a->ndim; d++)
        if (a->dim[d] != b->dim[d]) at = at == -1 ? d : -2;
    return at;
}

/* The model built for [Bp, Tp] against g (built for [B, T]): the same ops,
 * parameters of the same shapes, and each input changed along one axis at
 * most (input_axis[i], or -1; *found: some input changed). Anything else,
 * a failed build included, keeps the axis fixed: 1, with why. *probe is
 * the graph (the caller frees it). */
static int probe_axis(lrc_model *m, const lrc_graph *g, int64_t Bp, int64_t Tp, int *input_axis, bool *found, lrc_graph **probe,
                      char *why, size_t n)
{
    lrc_graph *p = *probe = lrc_graph_new();
    lrc_err e;
    *found = false;
    if (lrc_model_build(m, Bp, Tp, p, &e)) {
        snprintf(why, n, "the model does not build for [%lld, %lld]: %.180s", (long long)Bp, (long long)Tp, e.msg);
        return 1;
    }
    bool same = p->n_nodes == g->n_nodes && p->n_outputs == g->n_outputs;
    for (int i = 0; i < g->n_nodes && same; i++) same = p->nodes[i].op == g->nodes[i].op;
    if (!same) {
        snprintf(why, n, "the model's graph for [%lld, %lld] is not that of [B, T] with other shapes", (long long)Bp, (long long)Tp);
        return 1;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const lrc_node *a = &g->nodes[i], *b = &p->nodes[i];
        input_axis[i] = -1;
        int at = a->op == LRC_OP_INPUT || a->op == LRC_OP_PARAM ? changed_axis(&a->shape, &b->shape) : -1;
        if (at == -1) continue;
        if (a->op == LRC_OP_PARAM || at == -2) {
            snprintf(why, n, "%s '%.100s' has a shape that depends on it", a->op == LRC_OP_PARAM ? "parameter" : "input", a->name);
            return 1;
        }
        input_axis[i] = at;
        *found = true;
    }
    return LRC_OK;
}

/* The inputs' and outputs' axes (of the batch: which 0, the sequence: 1)
 * in out; false when a name does not fit (then the axis stays fixed). */
static bool record_axes(const lrc_graph *g, const int *axis, int which, cli_shapes *out)
{
    for (int i = 0; i < g->n_nodes + g->n_outputs; i++) {
        bool input = i < g->n_nodes;
        if (input && g->nodes[i].op != LRC_OP_INPUT) continue;
        const char *name = input ? g->nodes[i].name : g->output_names[i - g->n_nodes];
        int a = axis[input ? i : g->outputs[i - g->n_nodes]], k = 0;
        while (k < out->n_named && strcmp(out->name[k], name)) k++;
        if (k == out->n_named) {
            if (k == CLI_SHAPES_MAX_NAMED || strlen(name) >= sizeof out->name[k]) return false;
            snprintf(out->name[k], sizeof out->name[k], "%s", name);
            out->batch_axis[k] = out->seq_axis[k] = -1;
            out->n_named++;
        }
        (which ? out->seq_axis : out->batch_axis)[k] = a;
    }
    return true;
}

/* Whether the axis that changes from [B, T] to [Bp, Tp] may run shorter:
 * every op keeps a prefix of it, and each output of the probe's graph
 * changed exactly where the walk says the axis is. */
static void axis_free(lrc_model *m, const lrc_graph *g, int64_t Bp, int64_t Tp, int which, cli_shapes *out)
{
    const char *what = which ? "sequence" : "batch";
    bool *free_ = which ? &out->seq_prefix : &out->batch_prefix;
    char *why = which ? out->seq_fixed : out->batch_fixed;
    size_t n = which ? sizeof out->seq_fixed : sizeof out->batch_fixed;
    int *input_axis = lrc_xcalloc((size_t)g->n_nodes, sizeof(int)), *axis = lrc_xcalloc((size_t)g->n_nodes, sizeof(int));
    bool found = false;
    lrc_graph *p = NULL;
    lrc_err e;
    *free_ = false;
    if (probe_axis(m, g, Bp, Tp, input_axis, &found, &p, why, n) == LRC_OK) {
        if (!found) {
            snprintf(why, n, "no input has a %s axis", what);
            if (which) out->seq_axis_none = true;
        } else if (lrc_graph_track_axis(g, input_axis, what, axis, &e)) {
            snprintf(why, n, "%.250s", e.msg);
        } else {
            bool agree = true;
            for (int o = 0; o < g->n_outputs && agree; o++) {
                int at = changed_axis(&g->nodes[g->outputs[o]].shape, &p->nodes[p->outputs[o]].shape);
                agree = at == axis[g->outputs[o]];
                if (!agree) snprintf(why, n, "output '%.100s' changes shape other than along its %s axis", g->output_names[o], what);
            }
            if (agree && !record_axes(g, axis, which, out)) snprintf(why, n, "more than %d inputs and outputs, or a name of 64 bytes or more", CLI_SHAPES_MAX_NAMED);
            else if (agree) *free_ = true, why[0] = 0;
        }
    }
    lrc_graph_free(p);
    free(input_axis);
    free(axis);
}

/* size, then halvings (rounded up) while at least lo, MAX_LEVELS at most */
static int levels(int64_t size, int64_t lo, bool free_, int64_t *out)
{
    int n = 0;
    out[n++] = size;
    for (int64_t v = (size + 1) / 2; free_ && v >= lo && v < out[n - 1] && n < MAX_LEVELS; v = (v + 1) / 2) out[n++] = v;
    return n;
}

void cli_shapes_plan(lrc_model *m, const lrc_graph *g, int64_t B, int64_t T, int64_t min_seq, cli_shapes *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->batch_fixed, sizeof out->batch_fixed, "it was compiled for a batch of 1");
    snprintf(out->seq_fixed, sizeof out->seq_fixed, "it was compiled for a sequence of 1");
    if (B > 1) axis_free(m, g, (B + 1) / 2, T, 0, out);
    if (T > 1) axis_free(m, g, B, (T + 1) / 2, 1, out);
    int64_t bs[MAX_LEVELS], ts[MAX_LEVELS];
    int nb = levels(B, 1, out->batch_prefix, bs), nt = levels(T, min_seq > 0 ? min_seq : 16, out->seq_prefix, ts);
    for (int i = 0; i < nb; i++)
        for (int j = 0; j < nt; j++)
            if (i || j) out->batch[out->n] = bs[i], out->seq[out->n++] = ts[j];
}

void cli_shapes_drop(cli_shapes *sh, int i)
{
    memmove(&sh->batch[i], &sh->batch[i + 1], (size_t)(sh->n - i - 1) * sizeof sh->batch[0]);
    memmove(&sh->seq[i], &sh->seq[i + 1], (size_t)(sh->n - i - 1) * sizeof sh->seq[0]);
    sh->n--;
}
