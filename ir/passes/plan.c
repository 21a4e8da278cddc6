/* plan.c — memory planning: every intermediate (a group's output that is
 * not a graph output) gets an offset in one arena, from its lifetime in the
 * kernel order. Placement is greedy by size into the lowest gap that fits
 * among the buffers live at the same time (as TFLite's arena planner does),
 * which lands close to the peak of simultaneously live bytes — the lower
 * bound any placement must meet. */
#include "lrc_passes.h"

#include <stdlib.h>
#include <string.h>

static int by_size_desc(const void *a, const void *b)
{
    const lrc_live_buf *x = *(lrc_live_buf *const *)a, *y = *(lrc_live_buf *const *)b;
    if (x->size != y->size) return x->size > y->size ? -1 : 1;
    return x->first - y->first;
}

static int by_offset(const void *a, const void *b)
{
    const lrc_live_buf *x = *(lrc_live_buf *const *)a, *y = *(lrc_live_buf *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

int64_t lrc_plan_offsets(lrc_live_buf *bufs, int n, int64_t align, int64_t *peak)
{
    lrc_live_buf **order = lrc_xmalloc((size_t)(n + 1) * sizeof *order);
    lrc_live_buf **placed = lrc_xmalloc((size_t)(n + 1) * sizeof *placed);
    int last_step = 0;
    for (int i = 0; i < n; i++) {
        order[i] = &bufs[i];
        bufs[i].size = (bufs[i].size + align - 1) / align * align;
        if (bufs[i].last > last_step) last_step = bufs[i].last;
    }
    qsort(order, (size_t)n, sizeof *order, by_size_desc);
    int64_t arena = 0;
    for (int i = 0; i < n; i++) {
        lrc_live_buf *b = order[i];
        int m = 0; /* the placed buffers whose lifetimes meet b's, by offset */
        for (int j = 0; j < i; j++)
            if (order[j]->first <= b->last && b->first <= order[j]->last) placed[m++] = order[j];
        qsort(placed, (size_t)m, sizeof *placed, by_offset);
        int64_t best = -1, best_gap = INT64_MAX, cursor = 0;
        for (int j = 0; j <= m; j++) {
            int64_t gap_end = j < m ? placed[j]->offset : INT64_MAX;
            if (gap_end - cursor >= b->size && (best < 0 || gap_end - cursor < best_gap)) {
                best = cursor;
                best_gap = gap_end - cursor;
            }
            if (j < m && placed[j]->offset + placed[j]->size > cursor) cursor = placed[j]->offset + placed[j]->size;
        }
        b->offset = best;
        if (best + b->size > arena) arena = best + b->size;
    }
    /* the lower bound: the most bytes live at any one step */
    int64_t most = 0;
    for (int t = 0; t <= last_step; t++) {
        int64_t live = 0;
        for (int i = 0; i < n; i++)
            if (bufs[i].first <= t && t <= bufs[i].last) live += bufs[i].size;
        if (live > most) most = live;
    }
    if (peak) *peak = most;
    free(order);
    free(placed);
    return arena;
}

void lrc_schedule_plan_memory(const lrc_graph *g, lrc_schedule *s)
{
    int N = g->n_nodes;
    int *last = lrc_xmalloc((size_t)N * sizeof(int) + 1);
    bool *external = lrc_xcalloc((size_t)N, sizeof(bool));
    for (int i = 0; i < g->n_outputs; i++) external[s->buffer_of[g->outputs[i]]] = true;
    for (int id = 0; id < N; id++) last[id] = -1;
    for (int id = 0; id < N; id++) {
        int gu = s->group_of[id];
        if (gu < 0) continue;
        for (int k = 0; k < g->nodes[id].n_in; k++) {
            int src = s->buffer_of[g->nodes[id].in[k]];
            if (gu > last[src]) last[src] = gu;
        }
    }
    /* a loop's body runs again: what it reads from before the loop (and the
     * state itself) must live until the back edge */
    for (int id = 0; id < N; id++) {
        if (g->nodes[id].op != LRC_OP_LOOP_NEXT || s->group_of[id] < 0) continue;
        int first = s->group_of[g->nodes[id].in[0]], end = s->group_of[id];
        for (int j = 0; j < N; j++) {
            int gj = s->group_of[j];
            if (gj < first || gj > end) continue;
            for (int k = 0; k < g->nodes[j].n_in; k++) {
                int src = s->buffer_of[g->nodes[j].in[k]];
                int gs = s->group_of[src];
                if ((gs < first || src == s->buffer_of[g->nodes[id].in[0]]) && last[src] < end) last[src] = end;
            }
        }
    }
    lrc_live_buf *bufs = lrc_xcalloc((size_t)N + 1, sizeof *bufs);
    int *node_of = lrc_xmalloc((size_t)N * sizeof(int) + 1), n = 0;
    for (int gi = 0; gi < s->n_groups; gi++)
        for (int j = 0; j < s->groups[gi].n_outputs; j++) {
            int o = s->groups[gi].outputs[j];
            s->offset[o] = -1;
            if (external[o] || s->buffer_of[o] != o) continue; /* a loop's final state is its state's buffer */
            bufs[n] = (lrc_live_buf){(int64_t)lrc_shape_numel(&g->nodes[o].shape) * 4, gi, last[o] < gi ? gi : last[o], 0};
            node_of[n++] = o;
        }
    s->arena_bytes = lrc_plan_offsets(bufs, n, 64, &s->peak_bytes);
    for (int i = 0; i < n; i++) s->offset[node_of[i]] = bufs[i].offset;
    free(bufs);
    free(node_of);
    free(last);
    free(external);
}
