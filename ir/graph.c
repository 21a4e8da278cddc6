/* graph.c — building the SSA graph, verifying it, printing it, counting it. */
#include "lrc_ir.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* lrc_graph_new is in xalloc.c: only the compile side makes graphs. */

void lrc_graph_free(lrc_graph *g)
{
    if (!g) return;
    for (int i = 0; i < g->n_nodes; i++) {
        free(g->nodes[i].name);
        free(g->nodes[i].group);
        free(g->nodes[i].loc);
    }
    for (int i = 0; i < g->n_outputs; i++) free(g->output_names[i]);
    free(g->nodes);
    free(g->outputs);
    free(g->output_names);
    free(g->src_index);
    free(g);
}

/* ---- source nodes by name: open addressing over node ids, -1 empty ----- */

static bool is_source_op(lrc_op op) { return (unsigned)op < LRC_OP_COUNT && lrc_op_table[op].fusion == LRC_FUSE_SOURCE; }

static size_t name_slot(const char *name, int cap)
{
    return (size_t)(lrc_fnv1a(LRC_FNV_SEED, name, strlen(name)) & (uint64_t)(cap - 1));
}

/* Probes in insertion order, so a name's first node comes first, as a scan
 * of the nodes would find it. */
static void index_put(int *slots, int cap, const lrc_graph *g, int id)
{
    size_t i = name_slot(g->nodes[id].name, cap);
    while (slots[i] >= 0) i = (i + 1) & (size_t)(cap - 1);
    slots[i] = id;
}

static int index_add(lrc_graph *g, int id, lrc_err *err)
{
    if (2 * (g->src_count + 1) > g->src_cap) { /* half full at most; rebuilt in id order */
        int cap = g->src_cap ? 2 * g->src_cap : 64;
        int *slots = lrc_calloc((size_t)cap, sizeof(int));
        if (!slots) return lrc_err_nomem(err, "for the graph's index of %d names", cap);
        for (int i = 0; i < cap; i++) slots[i] = -1;
        for (int j = 0; j < id; j++)
            if (is_source_op(g->nodes[j].op) && g->nodes[j].name) index_put(slots, cap, g, j);
        free(g->src_index);
        g->src_index = slots;
        g->src_cap = cap;
    }
    index_put(g->src_index, g->src_cap, g, id);
    g->src_count++;
    return LRC_OK;
}

/* The first source node called name, of op (or of any source op: -1). */
static int index_find(const lrc_graph *g, int op, const char *name)
{
    if (!g->src_cap) return -1;
    for (size_t i = name_slot(name, g->src_cap); g->src_index[i] >= 0; i = (i + 1) & (size_t)(g->src_cap - 1)) {
        const lrc_node *n = &g->nodes[g->src_index[i]];
        if ((op < 0 || (int)n->op == op) && !strcmp(n->name, name)) return g->src_index[i];
    }
    return -1;
}

static int node_where(lrc_err *err, const lrc_node *n)
{
    if (n->loc) return lrc_err_prefix(err, "%s", n->loc);
    return LRC_EUSER;
}

/* The checks that do not depend on the op's own shape rule. */
static int check_inputs(const lrc_graph *g, int id, const lrc_node *n, lrc_err *err)
{
    (void)g;
    if ((unsigned)n->op >= LRC_OP_COUNT) return lrc_err_set(err, "node %d: unknown op %d", id, (int)n->op);
    const lrc_op_info *info = &lrc_op_table[n->op];
    /* n_in -1: 1 to LRC_MAX_INPUTS (concat); opt_in: one more, optional */
    if (info->n_in < 0 ? n->n_in < 1 || n->n_in > LRC_MAX_INPUTS
                       : n->n_in != info->n_in && !(info->opt_in && n->n_in == info->n_in + 1))
        return info->n_in >= 0 ? lrc_err_set(err, "%s: expects %d inputs, got %d", info->name, info->n_in, n->n_in)
                               : lrc_err_set(err, "%s: expects 1 to %d inputs, got %d", info->name, LRC_MAX_INPUTS, n->n_in);
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] < 0 || n->in[k] >= id)
            return lrc_err_set(err, "%s: input %d refers to node %d, which does not come before node %d",
                               info->name, k + 1, n->in[k], id);
    if (info->ilist == NULL && n->n_iattr != 0)
        return lrc_err_set(err, "%s: has no list attribute", info->name);
    return LRC_OK;
}

/* Element counts stay far from int64 overflow, so every size computed from
 * them downstream is exact. */
static int check_size(const lrc_node *n, lrc_err *err)
{
    int64_t numel = 1;
    char b[160];
    for (int i = 0; i < n->shape.ndim; i++) {
        int64_t d = n->shape.dim[i];
        if (d > 0 && numel > LRC_MAX_ELEMENTS / d)
            return lrc_err_set(err, "%s%s%s is too large: shape %s has more than 2^40 elements", lrc_op_name(n->op),
                               n->name ? " " : "", n->name ? n->name : "", lrc_shape_str(&n->shape, b, sizeof b));
        numel *= d;
    }
    return LRC_OK;
}

int lrc_graph_add(lrc_graph *g, const lrc_node *proto, lrc_err *err)
{
    lrc_node n = *proto; /* the shape rule may name the node in its message */
    if (g->n_nodes >= LRC_MAX_NODES) {
        lrc_err_set(err, "the graph has more than %d nodes (a loop that never ends?)", LRC_MAX_NODES);
        if (proto->loc) lrc_err_prefix(err, "%s", proto->loc);
        return -1;
    }
    if (check_inputs(g, g->n_nodes, &n, err) || lrc_op_table[n.op].infer(g, &n, err) || check_size(&n, err)) {
        if (proto->loc) lrc_err_prefix(err, "%s", proto->loc);
        return -1;
    }
    if (g->n_nodes == g->cap) {
        int cap = g->cap ? 2 * g->cap : 64;
        lrc_node *nodes = lrc_reallocarray(g->nodes, (size_t)cap, sizeof *g->nodes);
        if (!nodes) return lrc_err_nomem(err, "for a graph of %d nodes", cap), -1;
        g->nodes = nodes, g->cap = cap;
    }
    n.name = lrc_strdup(proto->name);
    n.group = lrc_strdup(proto->group);
    n.loc = lrc_strdup(proto->loc);
    if ((proto->name && !n.name) || (proto->group && !n.group) || (proto->loc && !n.loc)) {
        free(n.name), free(n.group), free(n.loc);
        return lrc_err_nomem(err, "for the names of node %d", g->n_nodes), -1;
    }
    g->nodes[g->n_nodes] = n;
    if (is_source_op(n.op) && n.name && index_add(g, g->n_nodes, err)) {
        free(n.name), free(n.group), free(n.loc);
        return -1; /* the graph as it was: the node is not counted */
    }
    if (n.op == LRC_OP_PARAM) g->param_elems += lrc_shape_numel(&n.shape);
    return g->n_nodes++;
}

int lrc_graph_find(const lrc_graph *g, lrc_op op, const char *name)
{
    if (is_source_op(op)) return name ? index_find(g, op, name) : -1;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == op && g->nodes[i].name && !strcmp(g->nodes[i].name, name)) return i;
    return -1;
}

/* A parameter whose f32 elements, with the graph's others, exceed this
 * machine's memory is refused where it is made: a model that could never be
 * loaded (n_experts = 65536, a size typed with zeros too many) ends at once
 * in one line, not after minutes of building a graph for it. */
static int check_param_memory(const lrc_graph *g, const char *name, const lrc_shape *s, lrc_err *err)
{
    int64_t numel = 1;
    for (int i = 0; i < s->ndim; i++) {
        if (s->dim[i] <= 0 || numel > LRC_MAX_ELEMENTS / s->dim[i]) return LRC_OK; /* the shape checks say what is wrong */
        numel *= s->dim[i];
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    int64_t total = g->param_elems + numel, bytes = pages > 0 && page > 0 ? (int64_t)pages * page : INT64_MAX;
    if (total <= bytes / 4) return LRC_OK;
    char b[96];
    return lrc_err_set(err, "parameter '%s' %s: the model's parameters come to %lld elements so far, %.2f GB in f32, more than this machine's "
                            "%.2f GB of memory", name, lrc_shape_str(s, b, sizeof b), (long long)total, 4e-9 * (double)total, 1e-9 * (double)bytes);
}

static int add_source(lrc_graph *g, lrc_op op, const char *name, lrc_dtype t, const lrc_shape *s,
                      lrc_init init, const char *group, const char *loc, lrc_err *err)
{
    if (!name || !*name) {
        lrc_err_set(err, "%s names must not be empty", op == LRC_OP_PARAM ? "parameter" : op == LRC_OP_STATE ? "state" : "input");
        if (loc) lrc_err_prefix(err, "%s", loc);
        return -1;
    }
    if (lrc_graph_find(g, LRC_OP_PARAM, name) >= 0 || lrc_graph_find(g, LRC_OP_INPUT, name) >= 0 ||
        lrc_graph_find(g, LRC_OP_STATE, name) >= 0) {
        lrc_err_set(err, "'%s' is defined twice", name);
        if (loc) lrc_err_prefix(err, "%s", loc);
        return -1;
    }
    if (s->ndim < 0 || s->ndim > LRC_MAX_DIMS) {
        lrc_err_set(err, "'%s': %d axes, at most %d are supported", name, s->ndim, LRC_MAX_DIMS);
        if (loc) lrc_err_prefix(err, "%s", loc);
        return -1;
    }
    if (op == LRC_OP_PARAM && check_param_memory(g, name, s, err)) {
        if (loc) lrc_err_prefix(err, "%s", loc);
        return -1;
    }
    lrc_node n = {.op = op, .dtype = t, .shape = *s, .init = init};
    n.name = (char *)name;
    n.group = (char *)group;
    n.loc = (char *)loc;
    int id = lrc_graph_add(g, &n, err);
    return id;
}

int lrc_graph_add_input(lrc_graph *g, const char *name, lrc_dtype t, const lrc_shape *s,
                        const char *loc, lrc_err *err)
{
    lrc_init none = {LRC_INIT_ZEROS, 0};
    return add_source(g, LRC_OP_INPUT, name, t, s, none, NULL, loc, err);
}

int lrc_graph_add_param(lrc_graph *g, const char *name, const lrc_shape *s, lrc_init init,
                        const char *group, const char *loc, lrc_err *err)
{
    if (init.kind == LRC_INIT_XAVIER_NORMAL && s->ndim != 2) {
        lrc_err_set(err, "parameter '%s': xavier_normal needs a matrix, got %d axes", name, s->ndim);
        if (loc) lrc_err_prefix(err, "%s", loc);
        return -1;
    }
    if (init.kind == LRC_INIT_IDENTITY && (s->ndim != 2 || s->dim[0] != s->dim[1])) {
        lrc_err_set(err, "parameter '%s': identity needs a square matrix", name);
        if (loc) lrc_err_prefix(err, "%s", loc);
        return -1;
    }
    return add_source(g, LRC_OP_PARAM, name, LRC_F32, s, init, group, loc, err);
}

int lrc_graph_add_state(lrc_graph *g, const char *name, const lrc_shape *s, const char *loc, lrc_err *err)
{
    lrc_init none = {LRC_INIT_ZEROS, 0};
    return add_source(g, LRC_OP_STATE, name, LRC_F32, s, none, NULL, loc, err);
}

int lrc_graph_add_output(lrc_graph *g, const char *name, int node, lrc_err *err)
{
    if (node < 0 || node >= g->n_nodes) return lrc_err_set(err, "output '%s': no such node %d", name, node);
    for (int i = 0; i < g->n_outputs; i++)
        if (!strcmp(g->output_names[i], name)) return lrc_err_set(err, "output '%s' is defined twice", name);
    if (g->n_outputs == g->cap_outputs) {
        int cap = g->cap_outputs ? 2 * g->cap_outputs : 4;
        int *outputs = lrc_reallocarray(g->outputs, (size_t)cap, sizeof *g->outputs);
        if (outputs) g->outputs = outputs;
        char **names = outputs ? lrc_reallocarray(g->output_names, (size_t)cap, sizeof(char *)) : NULL;
        if (names) g->output_names = names;
        if (!names) return lrc_err_nomem(err, "for output '%s'", name);
        g->cap_outputs = cap;
    }
    char *copy = lrc_strdup(name);
    if (!copy) return lrc_err_nomem(err, "for output '%s'", name);
    g->outputs[g->n_outputs] = node;
    g->output_names[g->n_outputs++] = copy;
    return LRC_OK;
}

void lrc_graph_clear_outputs(lrc_graph *g)
{
    for (int i = 0; i < g->n_outputs; i++) free(g->output_names[i]);
    g->n_outputs = 0;
}

/* A loop's body (the nodes between loop_state and loop_next that read the
 * state) runs again at every iteration: after the loop only its final state
 * is defined, so nothing outside may read the state or a body value. */
static int verify_loops(const lrc_graph *g, lrc_err *err)
{
    char *body = NULL;
    int rc = LRC_OK;
    for (int next = 0; next < g->n_nodes && !rc; next++) {
        if (g->nodes[next].op != LRC_OP_LOOP_NEXT) continue;
        int st = g->nodes[next].in[0];
        if (!body && !(body = lrc_calloc((size_t)g->n_nodes, 1))) return lrc_err_nomem(err, "checking the loops of a graph of %d nodes", g->n_nodes);
        memset(body, 0, (size_t)g->n_nodes);
        body[st] = 1;
        for (int j = st + 1; j < next; j++)
            for (int k = 0; k < g->nodes[j].n_in && !body[j]; k++) body[j] = body[g->nodes[j].in[k]];
        for (int j = next + 1; j < g->n_nodes && !rc; j++)
            for (int k = 0; k < g->nodes[j].n_in && !rc; k++)
                if (body[g->nodes[j].in[k]]) {
                    lrc_err_set(err, "%s reads a value of a loop's body%s%s: after a loop only its final state is defined "
                                     "(return what is needed from the body through the state)",
                                lrc_op_name(g->nodes[j].op), g->nodes[next].loc ? " at " : "",
                                g->nodes[next].loc ? g->nodes[next].loc : "");
                    rc = node_where(err, &g->nodes[j]);
                }
        for (int i = 0; i < g->n_outputs && !rc; i++)
            if (g->outputs[i] >= 0 && g->outputs[i] < g->n_nodes && body[g->outputs[i]])
                rc = lrc_err_set(err, "output '%s' is a value of a loop's body: after a loop only its final state is defined",
                                 g->output_names[i]);
    }
    free(body);
    return rc;
}

int lrc_graph_verify(const lrc_graph *g, lrc_err *err)
{
    for (int id = 0; id < g->n_nodes; id++) {
        const lrc_node *n = &g->nodes[id];
        if (check_inputs(g, id, n, err)) return node_where(err, n);
        lrc_node again = *n;
        if (lrc_op_table[n->op].infer(g, &again, err)) return node_where(err, n);
        if (again.dtype != n->dtype || !lrc_shape_eq(&again.shape, &n->shape)) {
            char b1[96], b2[96];
            lrc_err_set(err, "node %d (%s) is %s %s but its inputs give %s %s", id, lrc_op_name(n->op),
                        lrc_dtype_name(n->dtype), lrc_shape_str(&n->shape, b1, sizeof b1),
                        lrc_dtype_name(again.dtype), lrc_shape_str(&again.shape, b2, sizeof b2));
            return node_where(err, n);
        }
        if (lrc_op_table[n->op].fusion == LRC_FUSE_SOURCE) {
            if (!n->name) return lrc_err_set(err, "node %d (%s) has no name", id, lrc_op_name(n->op));
            int j = index_find(g, -1, n->name); /* the first source of that name */
            if (j >= 0 && j < id) {
                lrc_err_set(err, "'%s' is defined twice (nodes %d and %d)", n->name, j, id);
                return node_where(err, n);
            }
        }
    }
    if (verify_loops(g, err)) return LRC_EUSER;
    if (g->n_outputs == 0) return lrc_err_set(err, "the graph has no outputs");
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] < 0 || g->outputs[i] >= g->n_nodes)
            return lrc_err_set(err, "output '%s' refers to no node", g->output_names[i]);
    return LRC_OK;
}

static const char *init_names[LRC_INIT_COUNT] = {"zeros", "ones", "const", "normal", "xavier_normal", "identity"};

void lrc_graph_print(const lrc_graph *g, FILE *out)
{
    char b[96];
    for (int id = 0; id < g->n_nodes; id++) {
        const lrc_node *n = &g->nodes[id];
        const lrc_op_info *info = &lrc_op_table[n->op];
        fprintf(out, "%%%d = %s", id, info->name);
        if (n->name) fprintf(out, " \"%s\"", n->name);
        for (int k = 0; k < n->n_in; k++) fprintf(out, "%s%%%d", k ? ", " : " ", n->in[k]);
        for (int a = 0; a < LRC_MAX_IATTR && info->iattr[a]; a++)
            fprintf(out, " %s=%lld", info->iattr[a], (long long)n->iattr[a]);
        for (int a = 0; a < LRC_MAX_FATTR && info->fattr[a]; a++)
            fprintf(out, " %s=%.9g", info->fattr[a], n->fattr[a]);
        if (info->ilist) {
            fprintf(out, " %s=(", info->ilist);
            for (int a = 0; a < n->n_iattr; a++) fprintf(out, "%s%lld", a ? "," : "", (long long)n->iattr[a]);
            fprintf(out, ")");
        }
        if (n->op == LRC_OP_PARAM && n->group && !strcmp(n->group, "folded")) {
            fprintf(out, " folded");
        } else if (n->op == LRC_OP_PARAM) {
            fprintf(out, " init=%s", init_names[n->init.kind]);
            if (n->init.kind >= LRC_INIT_CONST && n->init.kind != LRC_INIT_IDENTITY) fprintf(out, "(%.9g)", n->init.value);
        }
        fprintf(out, " : %s%s", lrc_dtype_name(n->dtype), lrc_shape_str(&n->shape, b, sizeof b));
        if (n->loc) fprintf(out, "  # %s", n->loc);
        fprintf(out, "\n");
    }
    for (int i = 0; i < g->n_outputs; i++)
        fprintf(out, "output \"%s\" = %%%d\n", g->output_names[i], g->outputs[i]);
}

int64_t lrc_graph_param_count(const lrc_graph *g)
{
    int64_t total = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == LRC_OP_PARAM) total += lrc_shape_numel(&g->nodes[i].shape);
    return total;
}

double lrc_graph_flops(const lrc_graph *g, double *bwd_flops)
{
    double fwd = 0, bwd = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const lrc_node *n = &g->nodes[i];
        double f = lrc_op_table[n->op].flops(g, n);
        fwd += f;
        bwd += f * lrc_op_table[n->op].bwd_flops_ratio;
    }
    if (bwd_flops) *bwd_flops = bwd;
    return fwd;
}
