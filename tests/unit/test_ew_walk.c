/* test_ew_walk — the elementwise algebra (ir/lrc_ew.h) walked over every
 * renderer and every elementwise op: each algebra (ref, the graph builder,
 * the cpu's LLVM, cuda's C) has every primitive; each primitive is an op of
 * LRC_EW_OPS of its name; every elementwise op but the gradient ops has a
 * gradient rule, and it runs (a node of each op differentiated in a
 * graph); every op's expression evaluates on every algebra. Removing any
 * one algebra's primitive or any op's rule fails a check naming it. */
#include "check.h"
#include "codegen/cuda/cugen.h"
#include "codegen/llvm/ew_llvm.h"
#include "codegen/llvm/lrc_llvm.h"
#include "ir/lrc_ew.h"

#include <math.h>

/* Whether the algebra has every primitive (the expressions are evaluated
 * only on the ones that do: a missing one would be called) */
static bool walk_prims(const char *algebra, const lrc_ew_prim_fn *prims)
{
    bool all = true;
    for (int p = 0; p < LRC_PRIM_COUNT; p++) {
        CHECK(prims[p] != NULL, "the %s algebra lacks primitive %s", algebra, lrc_prim_name((lrc_prim)p));
        all = all && prims[p];
    }
    return all;
}

/* a node of op with inputs of shape [2, 3] (full: its shape) */
static int op_node(lrc_graph *g, lrc_op op)
{
    lrc_err err;
    lrc_shape s = {2, {2, 3}};
    lrc_node p = {.op = op, .n_in = lrc_op_table[op].n_in};
    for (int k = 0; k < p.n_in; k++) {
        char name[16];
        snprintf(name, sizeof name, "x%d", k);
        p.in[k] = lrc_graph_add_input(g, name, LRC_F32, &s, NULL, &err);
    }
    if (op == LRC_OP_FULL) p.n_iattr = 2, p.iattr[0] = 2, p.iattr[1] = 3;
    int id = lrc_graph_add(g, &p, &err);
    CHECK(id >= 0, "%s: a node of it: %s", lrc_op_name(op), id < 0 ? err.msg : "");
    return id;
}

/* every op's gradient rule runs and gives its float inputs a gradient
 * (or, for the ops whose gradient is zero, none) */
static void walk_grads(void)
{
    for (int op = 0; op < LRC_OP_COUNT; op++) {
        if (!lrc_ew_is((lrc_op)op)) continue;
        bool grad_op = (lrc_ew_flags((lrc_op)op) & LRC_EW_GRAD_OP) != 0;
        CHECK(grad_op || lrc_ew_has_grad((lrc_op)op), "elementwise op %s has no gradient rule", lrc_op_name((lrc_op)op));
        CHECK(grad_op == (lrc_op_table[op].grad == NULL), "%s: the op table's gradient is not the rule's", lrc_op_name((lrc_op)op));
        if (grad_op || !lrc_ew_has_grad((lrc_op)op)) continue;
        lrc_graph *g = lrc_graph_new();
        int id = op_node(g, (lrc_op)op);
        lrc_shape s = {2, {2, 3}};
        lrc_err err;
        int dy = lrc_graph_add_input(g, "dy", LRC_F32, &s, NULL, &err);
        int dx[LRC_MAX_INPUTS] = {-1, -1, -1, -1, -1, -1};
        int rc = id < 0 ? 1 : lrc_op_table[op].grad(g, id, dy, dx, &err);
        CHECK(rc == 0, "%s: its gradient rule failed: %s", lrc_op_name((lrc_op)op), rc ? err.msg : "");
        if (rc == 0) lrc_graph_add_output(g, "y", id, &err);
        for (int k = 0; k < lrc_op_table[op].n_in && rc == 0; k++) {
            char name[16];
            snprintf(name, sizeof name, "dx%d", k);
            if (dx[k] >= 0) lrc_graph_add_output(g, name, dx[k], &err);
        }
        CHECK(rc || lrc_graph_verify(g, &err) == 0, "%s: its gradient's graph: %s", lrc_op_name((lrc_op)op), err.msg);
        for (int k = 0; k < lrc_op_table[op].n_in && rc == 0; k++)
            if (dx[k] >= 0)
                CHECK(lrc_shape_eq(&g->nodes[dx[k]].shape, &s), "%s: input %d's gradient has another shape", lrc_op_name((lrc_op)op), k);
        lrc_graph_free(g);
    }
}

/* each primitive is the op of its name, elementwise, and that op's
 * expression is the primitive (evaluated in ref at a point) */
static void walk_prim_ops(void)
{
    lrc_ew_alg A = {lrc_ew_ref_const, lrc_ew_ref_prims, NULL};
    for (int p = 0; p < LRC_PRIM_COUNT; p++) {
        lrc_op op;
        const char *name = lrc_prim_name((lrc_prim)p);
        bool is = !lrc_op_parse(name, &op) && lrc_ew_is(op);
        CHECK(is, "primitive %s is no elementwise op", name);
        if (!is) continue;
        CHECK(lrc_op_table[op].n_in == lrc_prim_arity((lrc_prim)p), "op %s takes %d inputs, its primitive %d", name,
              lrc_op_table[op].n_in, lrc_prim_arity((lrc_prim)p));
        lrc_ew_val x[3] = {{.d = 0.75}, {.d = 1.5}, {.d = -2.0}};
        lrc_node n = {.op = op, .n_in = lrc_op_table[op].n_in};
        double by_op = lrc_ew_eval(&A, &n, x).d, by_prim = lrc_ew_ref_prims[p](&A, x).d;
        CHECK(by_op == by_prim || (isnan(by_op) && isnan(by_prim)), "op %s is not its primitive: %g, %g", name, by_op, by_prim);
    }
}

/* every elementwise op's expression on ref, the cpu's LLVM and cuda */
static void walk_exprs(bool ref, bool llvm, bool cuda)
{
    lrc_err err;
    lrc_llvm_target t;
    lrc_llvm_module *m = NULL;
    if (llvm && lrc_llvm_target_host(&t, &err) == 0) m = lrc_llvm_module_new("ew_walk", &t, &err);
    CHECK(!llvm || m != NULL, "an LLVM module: %s", err.msg);
    em_t *e = m ? lrc_llvm_module_emitter(m) : NULL;
    if (e) em_begin_kernel(e, "walk");
    lrc_ew_alg R = {lrc_ew_ref_const, lrc_ew_ref_prims, NULL};
    for (int op = 0; op < LRC_OP_COUNT; op++) {
        if (!lrc_ew_is((lrc_op)op)) continue;
        lrc_node n = {.op = (lrc_op)op, .n_in = lrc_op_table[op].n_in, .fattr = {0.5}};
        lrc_ew_val x[3] = {{.d = 0.25}, {.d = 0.5}, {.d = 0.75}};
        double v = ref ? lrc_ew_eval(&R, &n, x).d : 0;
        CHECK(isfinite(v), "%s on ref: %g at (0.25, 0.5, 0.75)", lrc_op_name((lrc_op)op), v);
        if (e)
            for (int f64 = 0; f64 < 2; f64++) {
                LLVMValueRef in[3];
                for (int k = 0; k < 3; k++) in[k] = f64 ? em_d64(e, 0.25 * (k + 1)) : em_fw(e, 0.25 * (k + 1), t.vec);
                CHECK(lrc_ew_llvm_eval(e, &n, in, f64 ? 1 : t.vec, f64) != NULL, "%s on the cpu: no value", lrc_op_name((lrc_op)op));
            }
        for (int f64 = 0; f64 < 2 && cuda; f64++) {
            cu_text text = {0};
            const char *xs[3] = {"a", "b", "c"};
            char out[64] = "";
            cu_ew_emit(&text, &n, xs, "  ", "v", f64, out, sizeof out);
            CHECK(out[0] && (!text.s || !strstr(text.s, "(null)")), "%s on cuda: %s", lrc_op_name((lrc_op)op), text.s ? text.s : out);
            free(text.s);
        }
    }
    if (e) em_finish_kernel(e);
    CHECK(!m || lrc_llvm_module_verify(m, &err) == 0, "the LLVM module of every expression: %s", err.msg);
    if (m) lrc_llvm_module_free(m);
}

int main(void)
{
    lrc_ew_prim_fn cuda[LRC_PRIM_COUNT];
    cu_ew_prims(cuda);
    bool ref = walk_prims("ref", lrc_ew_ref_prims), graph = walk_prims("graph builder", lrc_ew_graph_prims);
    bool llvm = walk_prims("cpu (LLVM)", lrc_ew_llvm_prims), cu = walk_prims("cuda", cuda);
    if (ref) walk_prim_ops();
    if (graph) walk_grads();
    walk_exprs(ref, llvm, cu);
    return check_summary();
}
