/* fuse.c — grouping the graph into kernels. The rules, stated once:
 *
 *  1. A matmul, an attention, a row reduction (rmsnorm, layernorm, softmax)
 *     and every opaque op (gather, RoPE, depth_gain, loss, transpose, slice)
 *     anchors a group.
 *  2. An elementwise op joins the group of its latest producer when that
 *     group can take an epilogue (elementwise, row, gemm), the producer's
 *     value is used by nothing else, and the shapes agree; otherwise it
 *     anchors an elementwise group.
 *  3. An elementwise group of one op whose value has a single consumer is
 *     recomputed inside the consumer's group (a prologue of an elementwise
 *     or row group, or an input of a gemm epilogue), with matching shapes.
 *  4. RoPE whose value only feeds an attention's q or k runs inside it.
 *  5. A matmul whose result only feeds the epilogue of another matmul of
 *     the same input and weight shape runs in that kernel (SwiGLU's gate
 *     and up: both tiles at once, the gate never stored).
 *  6. The gradients of one op with respect to each of its inputs (ops
 *     marked share_by_which in the op table) run as one kernel, which
 *     computes what they have in common once.
 *  7. An attention_lse runs in the attention over the same inputs: the
 *     kernel writes each row's log-sum-exp beside the output.
 *  8. Where the target asks (cpu, LRC_CPU_LOSS_HEAD=1): a matmul read only by a cross_entropy
 *     and a cross_entropy_grad over the same labels, an LM head's loss in
 *     training, runs with both as one kernel. Each block of rows computes
 *     its logits into the gradient's buffer, then their statistics, the
 *     loss terms and the gradient in place: the logits are no buffer of
 *     their own (the matmul's buffer_of is the gradient).
 *  9. Where the target asks (cpu): a cross_entropy_grad over the same logits
 *     and labels as a cross_entropy, both alone (rule 8 took neither), runs
 *     in the loss's kernel: each row's gradient right after its statistics,
 *     while the row is in cache, instead of a second pass over the logits
 *     from memory.
 * 10. Where the target asks (cpu): a mul of two values of its own shape,
 *     read only by a sum_to over whole rows (a gain's gradient, the sum
 *     over rows of dy times the gain's input), runs in the sum's kernel:
 *     the product is never written out.
 * 11. Where the target asks (cpu, cuda): an elementwise group (or one elementwise
 *     op alone for its broadcast) of f32 values of the shape a sum, mean,
 *     amax or logsumexp reads, read by nothing but that reduction, runs in
 *     the reduction's kernel as its prologue: each element of the
 *     reduction's input is computed where it is loaded, never stored. Its
 *     inputs may broadcast along any axis (stride 0 where they have 1).
 *
 * Each rule is one function below (rule1_anchor ... rule11_prologue_into_reduce),
 * run in the order 1 and 2 (one walk), 3, 5, 4, 6, 7, 8, 9, 10, 11.
 *
 * A loop region (docs/architecture.md, rule 5) is loop_state's group, the body, then
 * loop_next's group, the back edge, whose value aliases the state's buffer:
 * the executors repeat the launches between them.
 *
 * Views (reshape) alias their input and belong to no group. Every input of
 * an elementwise member must have the member's shape, be a vector along the
 * last axis, or be a scalar — the indexing every renderer implements
 * (rule 11's prologue, which the reduction kernels index, excepted). */
#include "../lrc_ew.h"
#include "lrc_passes.h"

#include <stdlib.h>
#include <string.h>

static const char *kind_names[LRC_GROUP_KIND_COUNT] = {"elementwise", "row", "gemm", "attention", "opaque"};
const char *lrc_group_kind_name(lrc_group_kind k) { return kind_names[k]; }

bool lrc_op_is_row(lrc_op op) { return lrc_op_table[op].fusion == LRC_FUSE_ROW; }

static lrc_group_kind anchor_kind(const lrc_node *n)
{
    switch (lrc_op_table[n->op].fusion) {
    case LRC_FUSE_GEMM: return LRC_GROUP_GEMM;
    case LRC_FUSE_ATTENTION: return LRC_GROUP_ATTENTION;
    case LRC_FUSE_ELEMENTWISE: return LRC_GROUP_ELEMENTWISE;
    case LRC_FUSE_ROW: return LRC_GROUP_ROW;
    default: return LRC_GROUP_OPAQUE;
    }
}

/* The input shapes an elementwise member may read (see the header comment). */
static bool indexable_inputs(const lrc_graph *g, const lrc_node *n)
{
    for (int k = 0; k < n->n_in; k++) {
        const lrc_shape *s = &g->nodes[n->in[k]].shape;
        bool ok = lrc_shape_eq(s, &n->shape) || lrc_shape_numel(s) == 1;
        if (!ok && s->ndim >= 1 && n->shape.ndim >= 1 && s->dim[s->ndim - 1] == n->shape.dim[n->shape.ndim - 1]) {
            ok = true;
            for (int i = 0; i + 1 < s->ndim; i++) ok = ok && s->dim[i] == 1;
        }
        if (!ok) return false;
    }
    return true;
}

typedef struct {
    lrc_group_kind kind;
    int anchor, size;
    bool dead;
} proto_group;

/* What the rules share while the schedule is built. */
typedef struct fuse {
    const lrc_graph *g;
    lrc_schedule *s;
    proto_group *pg;
    int n_pg;
    int *n_uses, *only_user; /* per node: its users (a node reading a value twice counts once), the last one */
    bool *is_out;            /* per node: a graph output */
    char *mark;              /* scratch for reads_group */
    int *stack;
} fuse;

static int *resize_ints(int *p, int n) { return lrc_xrealloc(p, (size_t)(n > 0 ? n : 1) * sizeof(int)); }

/* Whether q's value is computed from any node already in group gi (walks
 * q's ancestors; mark is scratch of N bytes, cleared here). */
static bool reads_group(const lrc_graph *g, const int *group_of, int q, int gi, char *mark, int *stack)
{
    memset(mark, 0, (size_t)g->n_nodes);
    int top = 0;
    bool hit = false;
    stack[top++] = q;
    mark[q] = 1;
    while (top && !hit) {
        int x = stack[--top];
        if (group_of[x] == gi) hit = true;
        for (int k = 0; k < g->nodes[x].n_in; k++) {
            int y = g->nodes[x].in[k];
            if (!mark[y]) mark[y] = 1, stack[top++] = y;
        }
    }
    return hit;
}

/* Rule 1: the kind of group node n anchors when it joins none (an
 * elementwise op whose inputs no fused kernel can index runs alone). */
static lrc_group_kind rule1_anchor(const lrc_graph *g, const lrc_node *n)
{
    lrc_group_kind kind = anchor_kind(n);
    if (kind == LRC_GROUP_ELEMENTWISE && !indexable_inputs(g, n)) kind = LRC_GROUP_OPAQUE;
    return kind;
}

/* Rule 2: the group of elementwise node id's latest producer that can take
 * it as an epilogue, or -1. */
static int rule2_join_producer(fuse *fu, int id)
{
    const lrc_graph *g = fu->g;
    const lrc_schedule *s = fu->s;
    const proto_group *pg = fu->pg;
    const int *n_uses = fu->n_uses;
    const bool *is_out = fu->is_out;
    const lrc_node *n = &g->nodes[id];
    int join = -1;
    for (int k = 0; k < n->n_in; k++) {
        int p = n->in[k], gp = s->group_of[p];
        if (gp < 0 || gp <= join || is_out[p]) continue;
        if (pg[gp].kind == LRC_GROUP_ATTENTION || pg[gp].kind == LRC_GROUP_OPAQUE) continue;
        if (!lrc_shape_eq(&g->nodes[p].shape, &n->shape)) continue;
        /* a value read elsewhere too joins only a GEMM's epilogue (the
         * product is stored anyway: training keeps it for the
         * backward), and only when n's other inputs do not come from
         * the group, which would make a cycle */
        if (n_uses[p] != 1 && pg[gp].kind != LRC_GROUP_GEMM) continue;
        /* the same cycle when another input comes from a later group
         * that cannot take n (opaque: a transpose, a loop's back edge)
         * and reads gp, as a residual around a loop does */
        bool later = false, cycle = false;
        for (int q = 0; q < n->n_in; q++) later = later || s->group_of[n->in[q]] > gp;
        for (int q = 0; q < n->n_in && !cycle && (n_uses[p] != 1 || later); q++)
            if (n->in[q] != p) cycle = reads_group(g, s->group_of, n->in[q], gp, fu->mark, fu->stack);
        if (cycle) continue;
        join = gp;
    }
    return join;
}

/* Rules 1 and 2, in topological order: each node's buffer (views alias
 * their input, a loop's final state its state) and group. */
static void place_nodes(fuse *fu)
{
    const lrc_graph *g = fu->g;
    lrc_schedule *s = fu->s;
    for (int id = 0; id < g->n_nodes; id++) {
        const lrc_node *n = &g->nodes[id];
        s->group_of[id] = -1;
        s->buffer_of[id] = id;
        s->offset[id] = -1;
        lrc_fusion f = lrc_op_table[n->op].fusion;
        if (f == LRC_FUSE_SOURCE) continue;
        if (f == LRC_FUSE_VIEW) {
            s->buffer_of[id] = s->buffer_of[n->in[0]];
            continue;
        }
        if (n->op == LRC_OP_LOOP_NEXT) s->buffer_of[id] = s->buffer_of[n->in[0]]; /* the final state */
        lrc_group_kind kind = rule1_anchor(g, n);
        int join = kind == LRC_GROUP_ELEMENTWISE ? rule2_join_producer(fu, id) : -1;
        if (join < 0) {
            join = fu->n_pg++;
            fu->pg[join] = (proto_group){kind, id, 0, false};
        }
        s->group_of[id] = join;
        fu->pg[join].size++;
    }
}

/* Rule 3: single elementwise ops move into their consumer's group, last
 * first so that chains of them move together. */
static void rule3_into_consumer(fuse *fu)
{
    const lrc_graph *g = fu->g;
    lrc_schedule *s = fu->s;
    proto_group *pg = fu->pg;
    int N = g->n_nodes;
    const int *n_uses = fu->n_uses;
    const int *only_user = fu->only_user;
    const bool *is_out = fu->is_out;
    for (int id = N - 1; id >= 0; id--) {
        int gi = s->group_of[id];
        if (gi < 0 || pg[gi].kind != LRC_GROUP_ELEMENTWISE || pg[gi].size != 1 || n_uses[id] != 1 || is_out[id])
            continue;
        int c = only_user[id], gc = s->group_of[c];
        if (gc < 0 || gc == gi || !lrc_shape_eq(&g->nodes[c].shape, &g->nodes[id].shape)) continue;
        const lrc_node *cn = &g->nodes[c];
        bool ok = pg[gc].kind == LRC_GROUP_ELEMENTWISE ||
                  (pg[gc].kind == LRC_GROUP_ROW && (c != pg[gc].anchor || cn->in[0] == id)) ||
                  (pg[gc].kind == LRC_GROUP_GEMM && c != pg[gc].anchor);
        if (!ok) continue;
        s->group_of[id] = gc;
        pg[gc].size++;
        pg[gi].size = 0;
        pg[gi].dead = true;
    }
}

/* Rule 4: RoPE whose value only feeds an attention's q or k runs inside it. */
static void rule4_rope_into_attention(fuse *fu)
{
    const lrc_graph *g = fu->g;
    lrc_schedule *s = fu->s;
    proto_group *pg = fu->pg;
    int N = g->n_nodes;
    const int *n_uses = fu->n_uses;
    const bool *is_out = fu->is_out;
    for (int id = 0; id < N; id++) {
        const lrc_node *n = &g->nodes[id];
        if (n->op != LRC_OP_ATTENTION) continue;
        for (int k = 0; k < 2; k++) {
            int r = n->in[k], gr = s->group_of[r];
            if (g->nodes[r].op == LRC_OP_ROPE && n_uses[r] == 1 && !is_out[r] && pg[gr].size == 1) {
                pg[gr].dead = true;
                pg[gr].size = 0;
                s->group_of[r] = s->group_of[id];
                pg[s->group_of[id]].size++;
            }
        }
    }
}

/* Rule 5: two matmuls of the same input and weight shape, the first one's
 * value read only by the second one's epilogue (SwiGLU's gate and up), run
 * as one kernel that computes both tiles side by side. */
static void rule5_pair_gemms(fuse *fu)
{
    const lrc_graph *g = fu->g;
    lrc_schedule *s = fu->s;
    proto_group *pg = fu->pg;
    int N = g->n_nodes;
    int n_pg = fu->n_pg;
    const bool *is_out = fu->is_out;
    for (int gi = 0; gi < n_pg; gi++) {
        if (pg[gi].dead || pg[gi].kind != LRC_GROUP_GEMM || g->nodes[pg[gi].anchor].op != LRC_OP_MATMUL) continue;
        const lrc_node *m1 = &g->nodes[pg[gi].anchor];
        int target = -1, n_out = 0;
        bool ok = true;
        for (int id = 0; id < N && ok; id++) {
            if (s->group_of[id] != gi) continue;
            if (id != pg[gi].anchor && lrc_op_table[g->nodes[id].op].fusion != LRC_FUSE_ELEMENTWISE) ok = false;
            bool outside = is_out[id];
            for (int c = id + 1; c < N && ok; c++)
                for (int k = 0; k < g->nodes[c].n_in; k++) {
                    if (g->nodes[c].in[k] != id || s->group_of[c] == gi) continue;
                    int gc = s->group_of[c];
                    outside = true;
                    if (gc < 0 || pg[gc].kind != LRC_GROUP_GEMM || c == pg[gc].anchor || (target >= 0 && gc != target)) ok = false;
                    else target = gc;
                }
            n_out += outside;
        }
        if (!ok || target < 0 || n_out != 1) continue;
        const lrc_node *m2 = &g->nodes[pg[target].anchor];
        if (m2->op != LRC_OP_MATMUL || s->buffer_of[m1->in[0]] != s->buffer_of[m2->in[0]] ||
            !lrc_shape_eq(&g->nodes[m1->in[1]].shape, &g->nodes[m2->in[1]].shape))
            continue;
        for (int id = 0; id < N; id++)
            if (s->group_of[id] == gi) s->group_of[id] = target;
        pg[target].size += pg[gi].size;
        pg[gi].size = 0;
        pg[gi].dead = true;
    }
}

/* Rule 6: the gradients of one op with respect to each of its inputs run as
 * one kernel (ops marked share_by_which in the op table): attention's q, k
 * and v (the probabilities and dS once for all three), a LayerRoPE gain's
 * gamma and four scalars (the rotation once). */
static void rule6_share_gradients(fuse *fu)
{
    const lrc_graph *g = fu->g;
    lrc_schedule *s = fu->s;
    proto_group *pg = fu->pg;
    int N = g->n_nodes;
    for (int id = 0; id < N; id++) {
        const lrc_node *n = &g->nodes[id];
        if (!lrc_op_table[n->op].share_by_which || s->group_of[id] < 0 || pg[s->group_of[id]].dead) continue;
        for (int j = id + 1; j < N; j++) {
            const lrc_node *m = &g->nodes[j];
            if (m->op != n->op || s->group_of[j] == s->group_of[id] || pg[s->group_of[j]].size != 1) continue;
            /* attributes: all but `which` (iattr[1] of both ops) */
            bool same = m->n_in == n->n_in && !memcmp(m->fattr, n->fattr, sizeof m->fattr);
            for (int a = 0; a < LRC_MAX_IATTR; a++) same = same && (a == 1 || m->iattr[a] == n->iattr[a]);
            for (int k = 0; k < n->n_in; k++) same = same && s->buffer_of[m->in[k]] == s->buffer_of[n->in[k]];
            if (!same) continue;
            pg[s->group_of[j]].dead = true;
            pg[s->group_of[j]].size = 0;
            s->group_of[j] = s->group_of[id];
            pg[s->group_of[id]].size++;
        }
    }
}

/* Rule 7: an attention_lse runs in the attention over the same q, k and v
 * (and bias) with the same attributes, as that kernel's second output (the row
 * statistics it has anyway); the backward reads it. */
static void rule7_lse_into_attention(fuse *fu)
{
    const lrc_graph *g = fu->g;
    lrc_schedule *s = fu->s;
    proto_group *pg = fu->pg;
    for (int id = 0; id < g->n_nodes; id++) {
        const lrc_node *l = &g->nodes[id];
        if (l->op != LRC_OP_ATTENTION_LSE || pg[s->group_of[id]].size != 1) continue;
        for (int a = 0; a < g->n_nodes; a++) {
            const lrc_node *n = &g->nodes[a];
            /* the same bias too: two attentions over one q, k, v may differ only by their masks */
            if (n->op != LRC_OP_ATTENTION || n->n_in != l->n_in || memcmp(n->in, l->in, (size_t)n->n_in * sizeof *n->in) ||
                n->iattr[0] != l->iattr[0] || n->iattr[1] != l->iattr[1] || memcmp(n->fattr, l->fattr, 2 * sizeof *n->fattr))
                continue;
            pg[s->group_of[id]].dead = true;
            pg[s->group_of[id]].size = 0;
            s->group_of[id] = s->group_of[a];
            pg[s->group_of[a]].size++;
            break;
        }
    }
}

/* Whether node id's group has it alone */
static bool alone(const fuse *fu, int id) { return fu->s->group_of[id] >= 0 && fu->pg[fu->s->group_of[id]].size == 1; }

/* Node id, alone in its group, joins group gi; its own group dies. */
static void join_alone(fuse *fu, int id, int gi)
{
    fu->pg[fu->s->group_of[id]].dead = true;
    fu->pg[fu->s->group_of[id]].size = 0;
    fu->s->group_of[id] = gi;
    fu->pg[gi].size++;
}

/* Rule 8 (see the header comment). */
static void rule8_loss_head(fuse *fu)
{
    const lrc_graph *g = fu->g;
    lrc_schedule *s = fu->s;
    for (int d = 0; d < g->n_nodes; d++) {
        const lrc_node *dn = &g->nodes[d];
        int L = dn->in[0];
        if (dn->op != LRC_OP_CROSS_ENTROPY_GRAD || g->nodes[L].op != LRC_OP_MATMUL || fu->is_out[L] || fu->n_uses[L] != 2 ||
            !alone(fu, L) || !alone(fu, d))
            continue;
        int c = -1;
        for (int id = 0; id < g->n_nodes && c < 0; id++)
            if (g->nodes[id].op == LRC_OP_CROSS_ENTROPY && g->nodes[id].in[0] == L && g->nodes[id].in[1] == dn->in[1] && alone(fu, id))
                c = id;
        if (c < 0) continue;
        int gl = s->group_of[L];
        join_alone(fu, c, gl);
        join_alone(fu, d, gl);
        s->buffer_of[L] = d;
    }
}

/* Rule 9 (see the header comment). */
static void rule9_loss_pair(fuse *fu)
{
    const lrc_graph *g = fu->g;
    lrc_schedule *s = fu->s;
    for (int d = 0; d < g->n_nodes; d++) {
        const lrc_node *dn = &g->nodes[d];
        if (dn->op != LRC_OP_CROSS_ENTROPY_GRAD || !alone(fu, d)) continue;
        for (int c = 0; c < g->n_nodes; c++) {
            const lrc_node *cn = &g->nodes[c];
            if (cn->op != LRC_OP_CROSS_ENTROPY || cn->in[0] != dn->in[0] || cn->in[1] != dn->in[1] || !alone(fu, c)) continue;
            join_alone(fu, d, s->group_of[c]);
            break;
        }
    }
}

int64_t lrc_sum_to_columns(const lrc_graph *g, const lrc_node *n)
{
    const lrc_shape *x = &g->nodes[n->in[0]].shape, *o = &n->shape;
    int64_t D = x->ndim ? x->dim[x->ndim - 1] : 1;
    return n->op == LRC_OP_SUM_TO && lrc_shape_numel(o) == D && (o->ndim ? o->dim[o->ndim - 1] : 1) == D ? D : 0;
}

/* Rule 10 (see the header comment). */
static void rule10_product_into_sum(fuse *fu)
{
    const lrc_graph *g = fu->g;
    lrc_schedule *s = fu->s;
    for (int c = 0; c < g->n_nodes; c++) {
        const lrc_node *cn = &g->nodes[c];
        if (!lrc_sum_to_columns(g, cn) || !alone(fu, c)) continue;
        int id = cn->in[0];
        const lrc_node *m = &g->nodes[id];
        if (m->op != LRC_OP_MUL || m->dtype != LRC_F32 || fu->n_uses[id] != 1 || fu->is_out[id] || !alone(fu, id)) continue;
        bool same = true;
        for (int k = 0; k < 2; k++)
            same = same && g->nodes[m->in[k]].dtype == LRC_F32 && lrc_shape_eq(&g->nodes[m->in[k]].shape, &m->shape);
        if (!same) continue;
        join_alone(fu, id, s->group_of[c]);
    }
}

bool lrc_op_is_reduce(lrc_op op)
{
    return op == LRC_OP_SUM || op == LRC_OP_MEAN || op == LRC_OP_AMAX || op == LRC_OP_LOGSUMEXP;
}

bool lrc_broadcasts_to(const lrc_shape *x, const lrc_shape *to)
{
    if (x->ndim > to->ndim) return false;
    for (int d = 0; d < x->ndim; d++) {
        int64_t a = x->dim[x->ndim - 1 - d], b = to->dim[to->ndim - 1 - d];
        if (a != 1 && a != b) return false;
    }
    return true;
}

/* Whether member id of group gi may run in the prologue of reduction
 * group gc: an f32 elementwise op the renderers fuse, of the reduction's
 * input shape xs, read by nothing outside gi and gc, its inputs f32 and
 * broadcast to that shape. */
static bool prologue_member(const fuse *fu, int id, int gi, int gc, const lrc_shape *xs)
{
    const lrc_graph *g = fu->g;
    const lrc_node *n = &g->nodes[id];
    if (lrc_op_table[n->op].fusion != LRC_FUSE_ELEMENTWISE || (lrc_ew_flags(n->op) & (LRC_EW_ALONE | LRC_EW_F64)) ||
        n->dtype != LRC_F32 || fu->is_out[id] || !lrc_shape_eq(&n->shape, xs) || n->n_in < 1)
        return false;
    for (int k = 0; k < n->n_in; k++) {
        const lrc_node *in = &g->nodes[n->in[k]];
        if (in->dtype != LRC_F32 || !lrc_broadcasts_to(&in->shape, xs)) return false;
    }
    for (int j = 0; j < g->n_nodes; j++) /* its users: members of gi or of the reduction's group */
        for (int k = 0; k < g->nodes[j].n_in; k++)
            if (g->nodes[j].in[k] == id && fu->s->group_of[j] != gi && fu->s->group_of[j] != gc) return false;
    return true;
}

/* Group gi (an elementwise group, or one elementwise op alone for its
 * broadcast) moves into reduction group gc when all its members may. */
static bool try_prologue(fuse *fu, int gi, int gc, const lrc_shape *xs)
{
    const lrc_graph *g = fu->g;
    lrc_schedule *s = fu->s;
    if (gi < 0 || gi == gc || fu->pg[gi].dead) return false;
    const proto_group *p = &fu->pg[gi];
    if (p->kind != LRC_GROUP_ELEMENTWISE &&
        !(p->kind == LRC_GROUP_OPAQUE && p->size == 1 && lrc_op_table[g->nodes[p->anchor].op].fusion == LRC_FUSE_ELEMENTWISE))
        return false;
    for (int id = 0; id < g->n_nodes; id++)
        if (s->group_of[id] == gi && !prologue_member(fu, id, gi, gc, xs)) return false;
    for (int id = 0; id < g->n_nodes; id++)
        if (s->group_of[id] == gi) s->group_of[id] = gc, fu->pg[gc].size++;
    fu->pg[gi].size = 0;
    fu->pg[gi].dead = true;
    return true;
}

/* Rule 11 (see the header comment): the group feeding the reduction, then
 * the groups feeding that one's members, until none more moves in. */
static void rule11_prologue_into_reduce(fuse *fu)
{
    const lrc_graph *g = fu->g;
    lrc_schedule *s = fu->s;
    for (int c = 0; c < g->n_nodes; c++) {
        const lrc_node *cn = &g->nodes[c];
        if (!lrc_op_is_reduce(cn->op) || cn->dtype != LRC_F32 || !alone(fu, c)) continue;
        int gc = s->group_of[c];
        const lrc_shape *xs = &g->nodes[cn->in[0]].shape;
        for (bool moved = try_prologue(fu, s->group_of[cn->in[0]], gc, xs); moved;) {
            moved = false;
            for (int id = c - 1; id >= 0 && !moved; id--)
                if (s->group_of[id] == gc)
                    for (int k = 0; k < g->nodes[id].n_in && !moved; k++)
                        moved = try_prologue(fu, s->group_of[g->nodes[id].in[k]], gc, xs);
        }
    }
}

bool lrc_group_is_reduce_prologue(const lrc_graph *g, const lrc_group *gr)
{
    return gr->kind == LRC_GROUP_OPAQUE && lrc_op_is_reduce(g->nodes[gr->anchor].op) && gr->n_nodes > 1;
}

int lrc_group_sum_product(const lrc_graph *g, const lrc_group *gr)
{
    if (gr->kind != LRC_GROUP_OPAQUE || g->nodes[gr->anchor].op != LRC_OP_SUM_TO) return -1;
    for (int j = 0; j < gr->n_nodes; j++)
        if (g->nodes[gr->nodes[j]].op == LRC_OP_MUL) return gr->nodes[j];
    return -1;
}

int lrc_group_loss_pair_grad(const lrc_graph *g, const lrc_group *gr)
{
    if (gr->kind != LRC_GROUP_OPAQUE || g->nodes[gr->anchor].op != LRC_OP_CROSS_ENTROPY) return -1;
    for (int j = 0; j < gr->n_nodes; j++)
        if (g->nodes[gr->nodes[j]].op == LRC_OP_CROSS_ENTROPY_GRAD) return gr->nodes[j];
    return -1;
}

bool lrc_group_is_loss_head(const lrc_graph *g, const lrc_group *gr)
{
    if (gr->kind != LRC_GROUP_GEMM) return false;
    for (int j = 0; j < gr->n_nodes; j++)
        if (g->nodes[gr->nodes[j]].op == LRC_OP_CROSS_ENTROPY) return true;
    return false;
}

int lrc_schedule_build(const lrc_graph *g, bool loss_head, bool loss_pair, bool sum_product, bool reduce_prologue, lrc_schedule *s,
                       lrc_err *err)
{
    int N = g->n_nodes;
    memset(s, 0, sizeof *s);
    s->group_of = lrc_xmalloc((size_t)N * sizeof(int));
    s->buffer_of = lrc_xmalloc((size_t)N * sizeof(int));
    s->offset = lrc_xmalloc((size_t)N * sizeof(int64_t));
    int *n_uses = lrc_xcalloc((size_t)N, sizeof(int)), *only_user = lrc_xmalloc((size_t)N * sizeof(int));
    bool *is_out = lrc_xcalloc((size_t)N, sizeof(bool));
    for (int i = 0; i < g->n_outputs; i++) is_out[g->outputs[i]] = true;
    for (int i = 0; i < N; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int src = g->nodes[i].in[k];
            /* a node that reads the same value twice is still its only user */
            if (n_uses[src] == 0 || only_user[src] != i) n_uses[src]++;
            only_user[src] = i;
        }
    proto_group *pg = lrc_xcalloc((size_t)N + 1, sizeof *pg);
    char *mark = lrc_xmalloc((size_t)N + 1);
    int *stack = lrc_xmalloc((size_t)N * sizeof(int) + sizeof(int));

    fuse fu = {g, s, pg, 0, n_uses, only_user, is_out, mark, stack};
    place_nodes(&fu);
    rule3_into_consumer(&fu);
    rule5_pair_gemms(&fu);
    rule4_rope_into_attention(&fu);
    rule6_share_gradients(&fu);
    rule7_lse_into_attention(&fu);
    if (loss_head) rule8_loss_head(&fu);
    if (loss_pair) rule9_loss_pair(&fu);
    if (sum_product) rule10_product_into_sum(&fu);
    if (reduce_prologue) rule11_prologue_into_reduce(&fu);
    int n_pg = fu.n_pg;

    /* Renumber the live groups in an order that respects their dependencies
     * (Kahn's algorithm, ties broken by anchor, which keeps the graph's order). */
    int *renum = lrc_xmalloc((size_t)(n_pg + 1) * sizeof(int)), n_live = 0;
    for (int i = 0; i < n_pg; i++) renum[i] = pg[i].dead ? -1 : n_live++;
    int *indeg = lrc_xcalloc((size_t)n_live + 1, sizeof(int));
    char *edge = lrc_xcalloc((size_t)n_live * (size_t)n_live + 1, 1); /* groups are few: a matrix is fine */
    for (int id = 0; id < N; id++) {
        int gc = s->group_of[id] < 0 ? -1 : renum[s->group_of[id]];
        if (gc < 0) continue;
        for (int k = 0; k < g->nodes[id].n_in; k++) {
            /* a loop's final state is in the state's buffer, but after the back edge */
            int in = g->nodes[id].in[k];
            int src = g->nodes[in].op == LRC_OP_LOOP_NEXT ? in : s->buffer_of[in];
            int gs = s->group_of[src] < 0 ? -1 : renum[s->group_of[src]];
            if (gs >= 0 && gs != gc && !edge[(size_t)gs * (size_t)n_live + (size_t)gc]) {
                edge[(size_t)gs * (size_t)n_live + (size_t)gc] = 1;
                indeg[gc]++;
            }
        }
    }
    int *order = lrc_xmalloc((size_t)n_live * sizeof(int) + 1), *pos = lrc_xmalloc((size_t)n_live * sizeof(int) + 1);
    bool *done = lrc_xcalloc((size_t)n_live + 1, sizeof(bool));
    int n_done = 0;
    while (n_done < n_live) {
        int pick = -1;
        for (int i = 0; i < n_live && pick < 0; i++) /* live groups are numbered by anchor */
            if (!done[i] && indeg[i] == 0) pick = i;
        if (pick < 0) break;
        done[pick] = true;
        pos[pick] = n_done;
        order[n_done++] = pick;
        for (int j = 0; j < n_live; j++)
            if (edge[(size_t)pick * (size_t)n_live + (size_t)j]) indeg[j]--;
    }
    int rc = LRC_OK;
    if (n_done < n_live) rc = lrc_err_set(err, "internal error: kernel groups form a cycle");

    s->n_groups = n_live;
    s->groups = lrc_xcalloc((size_t)n_live + 1, sizeof(lrc_group));
    for (int i = 0; i < n_pg && !rc; i++) {
        if (pg[i].dead) continue;
        lrc_group *gr = &s->groups[pos[renum[i]]];
        gr->kind = pg[i].kind;
        gr->anchor = pg[i].anchor;
    }
    for (int id = 0; id < N; id++)
        if (s->group_of[id] >= 0) s->group_of[id] = rc ? -1 : pos[renum[s->group_of[id]]];
    for (int id = 0; id < N && !rc; id++) {
        int gi = s->group_of[id];
        if (gi < 0) continue;
        lrc_group *gr = &s->groups[gi];
        gr->nodes = resize_ints(gr->nodes, gr->n_nodes + 1);
        gr->nodes[gr->n_nodes++] = id;
        for (int k = 0; k < g->nodes[id].n_in; k++) {
            int src = s->buffer_of[g->nodes[id].in[k]];
            if (s->group_of[src] == gi) continue;
            bool seen = false;
            for (int j = 0; j < gr->n_inputs; j++) seen = seen || gr->inputs[j] == src;
            if (seen) continue;
            gr->inputs = resize_ints(gr->inputs, gr->n_inputs + 1);
            gr->inputs[gr->n_inputs++] = src;
        }
    }
    /* outputs: members read by another group or by the graph's outputs */
    bool *needed = lrc_xcalloc((size_t)N, sizeof(bool));
    for (int id = 0; id < N; id++)
        for (int k = 0; k < g->nodes[id].n_in; k++) {
            int src = s->buffer_of[g->nodes[id].in[k]];
            int gu = s->group_of[id];
            if (s->group_of[src] >= 0 && gu != s->group_of[src]) needed[src] = true;
        }
    for (int i = 0; i < g->n_outputs; i++) needed[s->buffer_of[g->outputs[i]]] = true;
    for (int id = 0; id < N && !rc; id++)
        if (needed[id] && s->group_of[id] >= 0) {
            lrc_group *gr = &s->groups[s->group_of[id]];
            gr->outputs = resize_ints(gr->outputs, gr->n_outputs + 1);
            gr->outputs[gr->n_outputs++] = id;
        }
    free(needed);
    free(order);
    free(pos);
    free(done);
    free(edge);
    free(indeg);
    free(renum);
    free(pg);
    free(mark);
    free(stack);
    free(n_uses);
    free(only_user);
    free(is_out);
    if (rc) lrc_schedule_free(s);
    return rc;
}

void lrc_schedule_free(lrc_schedule *s)
{
    for (int i = 0; i < s->n_groups; i++) {
        free(s->groups[i].nodes);
        free(s->groups[i].inputs);
        free(s->groups[i].outputs);
    }
    free(s->groups);
    free(s->group_of);
    free(s->buffer_of);
    free(s->offset);
    memset(s, 0, sizeof *s);
}

void lrc_schedule_print(const lrc_graph *g, const lrc_schedule *s, FILE *out)
{
    for (int i = 0; i < s->n_groups; i++) {
        const lrc_group *gr = &s->groups[i];
        fprintf(out, "kernel %d %s:", i, lrc_group_kind_name(gr->kind));
        for (int j = 0; j < gr->n_nodes; j++)
            fprintf(out, " %s%%%d=%s", gr->nodes[j] == gr->anchor ? "*" : "", gr->nodes[j],
                    lrc_op_name(g->nodes[gr->nodes[j]].op));
        fprintf(out, "  <-");
        for (int j = 0; j < gr->n_inputs; j++) fprintf(out, " %%%d", gr->inputs[j]);
        fprintf(out, "  ->");
        for (int j = 0; j < gr->n_outputs; j++) {
            int o = gr->outputs[j];
            if (s->offset[o] >= 0) fprintf(out, " %%%d@%lld", o, (long long)s->offset[o]);
            else fprintf(out, " %%%d", o);
        }
        fprintf(out, "\n");
    }
    fprintf(out, "kernels %d\n", s->n_groups);
    if (s->arena_bytes || s->peak_bytes)
        fprintf(out, "arena %lld bytes, peak of live intermediates %lld bytes (%.3fx)\n", (long long)s->arena_bytes,
                (long long)s->peak_bytes, s->peak_bytes ? (double)s->arena_bytes / (double)s->peak_bytes : 1.0);
}
