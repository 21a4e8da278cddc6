/* test_fusion_rules — each rule of the fuse pass (ir/passes/fuse.c, rules 1
 * to 11) seen in the kernels it makes: for every rule a small graph where it
 * applies, run through the whole pipeline with the pass rules of the target
 * (frontend/compile/compile.c: lrc_cpu_pass_rules, lrc_cuda_pass_rules), and the
 * schedule it must give: how many kernels, which nodes share one, of which
 * kind and anchor. Rules 1 to 7 hold on both targets; 8 to 10 where the cpu
 * target asks for them (8 with LRC_CPU_LOSS_HEAD=1) and not on cuda; 11
 * where each target asks (both do). Every
 * message names its rule. Each rule was switched off alone in a copy of
 * fuse.c (1: its opaque fallback for inputs no kernel indexes; 2: no
 * producer joined; 3 to 7: the call left out; 8 to 11: the target's flag
 * ignored) and failed the checks named for it: 1 the broadcast add's kind;
 * 2 both epilogues (and rule 3's GEMM case and rule 5, which build on it);
 * 3 both prologues; 4 the two ropes; 5 gate and up together; 6 the
 * attention's and the gain's gradients; 7 the lse; 8 to 11 the cpu's
 * fused kernel. */
#include "check.h"
#include "cpu_graph.h"
#include "ir/passes/lrc_passes.h"

#include <stdlib.h>

typedef enum { CPU, CUDA } target;
static const char *const target_names[] = {"cpu", "cuda"};

/* What the checks of one schedule print: the rule, the target, and on a
 * failure the schedule itself. */
static const char *cur_rule = "?";
static target cur_t;
static const lrc_graph *cur_g;
static const lrc_schedule *cur_s;

#define EXPECT(cond, ...)                                                   \
    do {                                                                    \
        if (cond) passed++;                                                 \
        else {                                                              \
            failed++;                                                       \
            printf("FAIL %s on %s: ", cur_rule, target_names[cur_t]);       \
            printf(__VA_ARGS__);                                            \
            printf("\n");                                                   \
            if (cur_s) lrc_schedule_print(cur_g, cur_s, stdout);            \
        }                                                                   \
    } while (0)

static int node(lrc_graph *g, lrc_node n)
{
    lrc_err err;
    int id = lrc_graph_add(g, &n, &err);
    if (id < 0) printf("  build: %s\n", err.msg);
    return id;
}

static int in(lrc_graph *g, const char *name, lrc_shape s)
{
    lrc_err err;
    return lrc_graph_add_input(g, name, LRC_F32, &s, NULL, &err);
}

static int par(lrc_graph *g, const char *name, lrc_shape s)
{
    lrc_err err;
    return lrc_graph_add_param(g, name, &s, (lrc_init){LRC_INIT_NORMAL, 0.5}, NULL, NULL, &err);
}

/* *g (replaced) through every pass with target t's rules into s; on
 * success the schedule the checks read (cur_*), which end_schedule frees. */
static bool schedule(lrc_graph **g, target t, lrc_schedule *s)
{
    lrc_err err = {0};
    lrc_pass_ctx ctx = {.schedule = s};
    if (t == CPU) lrc_cpu_pass_rules(&ctx);
    else lrc_cuda_pass_rules(&ctx);
    cur_t = t, cur_g = NULL, cur_s = NULL;
    int rc = lrc_passes_run(g, &ctx, NULL, &err);
    if (rc && ctx.scheduled) lrc_schedule_free(s);
    EXPECT(!rc && ctx.scheduled, "the passes failed: %s", err.msg);
    if (rc || !ctx.scheduled) return false;
    cur_g = *g, cur_s = s;
    return true;
}

static void end_schedule(lrc_graph *g, lrc_schedule *s, bool scheduled)
{
    if (scheduled) lrc_schedule_free(s);
    lrc_graph_free(g);
    cur_g = NULL, cur_s = NULL;
}

/* The k-th node of op in g (after the passes, which renumber), or -1. */
static int find(const lrc_graph *g, lrc_op op, int k)
{
    for (int id = 0; id < g->n_nodes; id++)
        if (g->nodes[id].op == op && k-- == 0) return id;
    return -1;
}

static bool same_group(const lrc_schedule *s, int a, int b) { return a >= 0 && b >= 0 && s->group_of[a] >= 0 && s->group_of[a] == s->group_of[b]; }

/* The kind of node id's group, as a name ("none" for no group). */
static const char *kind_of(const lrc_schedule *s, int id)
{
    return id >= 0 && s->group_of[id] >= 0 ? lrc_group_kind_name(s->groups[s->group_of[id]].kind) : "none";
}

static bool anchors(const lrc_schedule *s, int id) { return id >= 0 && s->group_of[id] >= 0 && s->groups[s->group_of[id]].anchor == id; }

/* ---- rule 1: what anchors a group, and of which kind ---------------------- */

static lrc_graph *g_anchors(void)
{ /* matmul -> rmsnorm -> softmax -> transpose, and an add whose [4, 1] input no fused kernel indexes */
    lrc_graph *g = lrc_graph_new();
    int x = in(g, "x", (lrc_shape){2, {4, 16}}), col = in(g, "col", (lrc_shape){2, {4, 1}}), w = par(g, "w", (lrc_shape){2, {8, 16}});
    int m = node(g, (lrc_node){.op = LRC_OP_MATMUL, .n_in = 2, .in = {x, w}});
    int r = node(g, (lrc_node){.op = LRC_OP_RMSNORM, .n_in = 1, .in = {m}, .fattr = {1e-5}});
    int sm = node(g, (lrc_node){.op = LRC_OP_SOFTMAX, .n_in = 1, .in = {r}});
    int t = node(g, (lrc_node){.op = LRC_OP_TRANSPOSE, .n_in = 1, .in = {sm}, .n_iattr = 2, .iattr = {1, 0}});
    int b = node(g, (lrc_node){.op = LRC_OP_ADD, .n_in = 2, .in = {x, col}});
    out(g, "t", t), out(g, "b", b);
    return g;
}

static void rule1(target t)
{
    cur_rule = "rule 1 (anchors)";
    lrc_graph *g = g_anchors();
    lrc_schedule s;
    bool ok = schedule(&g, t, &s);
    if (ok) {
        const lrc_op ops[] = {LRC_OP_MATMUL, LRC_OP_RMSNORM, LRC_OP_SOFTMAX, LRC_OP_TRANSPOSE};
        const char *kinds[] = {"gemm", "row", "row", "opaque"};
        for (int i = 0; i < 4; i++) {
            int id = find(g, ops[i], 0);
            EXPECT(anchors(&s, id) && !strcmp(kind_of(&s, id), kinds[i]), "%s anchors a %s group: got %s, anchor %s", lrc_op_name(ops[i]),
                   kinds[i], kind_of(&s, id), anchors(&s, id) ? "itself" : "another node");
        }
        int b = find(g, LRC_OP_ADD, 0);
        EXPECT(anchors(&s, b) && !strcmp(kind_of(&s, b), "opaque"),
               "an add of [4, 16] and [4, 1] (an input no fused kernel indexes) runs alone in an opaque group: got %s", kind_of(&s, b));
        EXPECT(s.n_groups == 5, "5 kernels, one per anchor: got %d", s.n_groups);
    }
    end_schedule(g, &s, ok);
}

/* ---- rule 2: an elementwise op joins its producer's group ------------------ */

static void rule2(target t)
{
    cur_rule = "rule 2 (epilogue joins its producer)";
    for (int row = 0; row < 2; row++) {
        /* matmul -> silu -> add bias (a GEMM's epilogue), or rmsnorm -> relu (a row group's) */
        lrc_graph *g = lrc_graph_new();
        int x = in(g, "x", (lrc_shape){2, {4, 16}}), w = par(g, "w", (lrc_shape){2, {8, 16}}), bias = par(g, "bias", (lrc_shape){1, {8}});
        int y;
        if (row) {
            int r = node(g, (lrc_node){.op = LRC_OP_RMSNORM, .n_in = 1, .in = {x}, .fattr = {1e-5}});
            y = node(g, (lrc_node){.op = LRC_OP_RELU, .n_in = 1, .in = {r}});
        } else {
            int m = node(g, (lrc_node){.op = LRC_OP_MATMUL, .n_in = 2, .in = {x, w}});
            int a = node(g, (lrc_node){.op = LRC_OP_SILU, .n_in = 1, .in = {m}});
            y = node(g, (lrc_node){.op = LRC_OP_ADD, .n_in = 2, .in = {a, bias}});
        }
        out(g, "y", y);
        lrc_schedule s;
        bool ok = schedule(&g, t, &s);
        if (ok && row) {
            int r = find(g, LRC_OP_RMSNORM, 0), e = find(g, LRC_OP_RELU, 0);
            EXPECT(s.n_groups == 1 && same_group(&s, r, e) && anchors(&s, r),
                   "rmsnorm -> relu (an output) is one row kernel: got %d kernels, relu %s rmsnorm's", s.n_groups,
                   same_group(&s, r, e) ? "in" : "not in");
        } else if (ok) {
            int m = find(g, LRC_OP_MATMUL, 0), a = find(g, LRC_OP_SILU, 0), b = find(g, LRC_OP_ADD, 0);
            EXPECT(s.n_groups == 1 && same_group(&s, m, a) && same_group(&s, m, b) && anchors(&s, m) && !strcmp(kind_of(&s, m), "gemm"),
                   "matmul -> silu -> add bias is one gemm kernel: got %d kernels, silu %s and the add %s the matmul's", s.n_groups,
                   same_group(&s, m, a) ? "in" : "not in", same_group(&s, m, b) ? "in" : "not in");
        }
        end_schedule(g, &s, ok);
    }
}

/* ---- rule 3: a lone elementwise op recomputed in its consumer's group ------ */

static void rule3(target t)
{
    cur_rule = "rule 3 (lone elementwise op into its consumer)";
    for (int gemm = 0; gemm < 2; gemm++) {
        /* silu(x) -> rmsnorm (a row group's prologue), or exp(y) added to a
         * matmul's product (an input of the GEMM's epilogue) */
        lrc_graph *g = lrc_graph_new();
        int x = in(g, "x", (lrc_shape){2, {4, 16}}), y = in(g, "y", (lrc_shape){2, {4, 8}}), w = par(g, "w", (lrc_shape){2, {8, 16}});
        int z;
        if (gemm) {
            /* exp before the matmul: the add joins the later group, the GEMM's (rule 2) */
            int e = node(g, (lrc_node){.op = LRC_OP_EXP, .n_in = 1, .in = {y}});
            int m = node(g, (lrc_node){.op = LRC_OP_MATMUL, .n_in = 2, .in = {x, w}});
            z = node(g, (lrc_node){.op = LRC_OP_ADD, .n_in = 2, .in = {m, e}});
        } else {
            int a = node(g, (lrc_node){.op = LRC_OP_SILU, .n_in = 1, .in = {x}});
            z = node(g, (lrc_node){.op = LRC_OP_RMSNORM, .n_in = 1, .in = {a}, .fattr = {1e-5}});
        }
        out(g, "z", z);
        lrc_schedule s;
        bool ok = schedule(&g, t, &s);
        if (ok && gemm) {
            int m = find(g, LRC_OP_MATMUL, 0), e = find(g, LRC_OP_EXP, 0);
            EXPECT(s.n_groups == 1 && same_group(&s, m, e) && anchors(&s, m),
                   "exp(y) read only by a matmul's epilogue runs in the gemm kernel: got %d kernels, exp %s the matmul's", s.n_groups,
                   same_group(&s, m, e) ? "in" : "not in");
        } else if (ok) {
            int a = find(g, LRC_OP_SILU, 0), r = find(g, LRC_OP_RMSNORM, 0);
            EXPECT(s.n_groups == 1 && same_group(&s, a, r) && anchors(&s, r) && !strcmp(kind_of(&s, r), "row"),
                   "silu(x) read only by rmsnorm is the row kernel's prologue: got %d kernels, silu %s rmsnorm's", s.n_groups,
                   same_group(&s, a, r) ? "in" : "not in");
        }
        end_schedule(g, &s, ok);
    }
}

/* ---- rule 4: RoPE on q and k inside the attention -------------------------- */

static void rule4(target t)
{
    cur_rule = "rule 4 (RoPE into attention)";
    lrc_graph *g = lrc_graph_new();
    const lrc_shape qs = {4, {1, 4, 2, 8}};
    int q = in(g, "q", qs), k = in(g, "k", qs), v = in(g, "v", qs);
    int rq = node(g, (lrc_node){.op = LRC_OP_ROPE, .n_in = 1, .in = {q}, .fattr = {10000}});
    int rk = node(g, (lrc_node){.op = LRC_OP_ROPE, .n_in = 1, .in = {k}, .fattr = {10000}});
    out(g, "y", node(g, (lrc_node){.op = LRC_OP_ATTENTION, .n_in = 3, .in = {rq, rk, v}, .iattr = {1}, .fattr = {0.35}}));
    lrc_schedule s;
    bool ok = schedule(&g, t, &s);
    if (ok) {
        int a = find(g, LRC_OP_ATTENTION, 0), r0 = find(g, LRC_OP_ROPE, 0), r1 = find(g, LRC_OP_ROPE, 1);
        EXPECT(s.n_groups == 1 && same_group(&s, a, r0) && same_group(&s, a, r1) && anchors(&s, a) && !strcmp(kind_of(&s, a), "attention"),
               "rope(q) and rope(k) run in the attention kernel: got %d kernels, ropes %s/%s the attention's", s.n_groups,
               same_group(&s, a, r0) ? "in" : "not in", same_group(&s, a, r1) ? "in" : "not in");
    }
    end_schedule(g, &s, ok);
}

/* ---- rule 5: SwiGLU's gate and up GEMMs as one kernel ---------------------- */

static void rule5(target t)
{
    cur_rule = "rule 5 (gate and up GEMMs paired)";
    for (int two_inputs = 0; two_inputs < 2; two_inputs++) {
        /* silu(x Wg^T) * (x Wu^T); with two inputs (x and x2), nothing to pair */
        lrc_graph *g = lrc_graph_new();
        int x = in(g, "x", (lrc_shape){2, {4, 16}}), x2 = two_inputs ? in(g, "x2", (lrc_shape){2, {4, 16}}) : x;
        int wg = par(g, "wg", (lrc_shape){2, {12, 16}}), wu = par(g, "wu", (lrc_shape){2, {12, 16}});
        int gate = node(g, (lrc_node){.op = LRC_OP_MATMUL, .n_in = 2, .in = {x, wg}});
        int up = node(g, (lrc_node){.op = LRC_OP_MATMUL, .n_in = 2, .in = {x2, wu}});
        int s1 = node(g, (lrc_node){.op = LRC_OP_SILU, .n_in = 1, .in = {gate}});
        out(g, "h", node(g, (lrc_node){.op = LRC_OP_MUL, .n_in = 2, .in = {s1, up}}));
        lrc_schedule s;
        bool ok = schedule(&g, t, &s);
        if (ok) {
            int m0 = find(g, LRC_OP_MATMUL, 0), m1 = find(g, LRC_OP_MATMUL, 1), h = find(g, LRC_OP_MUL, 0);
            if (two_inputs)
                EXPECT(s.n_groups == 2 && !same_group(&s, m0, m1),
                       "GEMMs of two different inputs are not paired: got %d kernels, the matmuls %s", s.n_groups,
                       same_group(&s, m0, m1) ? "together" : "apart");
            else
                EXPECT(s.n_groups == 1 && same_group(&s, m0, m1) && same_group(&s, m0, h) && !strcmp(kind_of(&s, m0), "gemm"),
                       "silu(x Wg^T) * (x Wu^T) is one gemm kernel: got %d kernels, gate and up %s", s.n_groups,
                       same_group(&s, m0, m1) ? "together" : "apart");
        }
        end_schedule(g, &s, ok);
    }
}

/* ---- rule 6: the gradients of one op in one kernel ------------------------- */

/* dq, dk and dv of an attention (with its output and log-sum-exp) */
static lrc_graph *g_attention_grads(void)
{
    lrc_graph *g = lrc_graph_new();
    const lrc_shape qs = {4, {1, 4, 2, 8}};
    int q = in(g, "q", qs), k = in(g, "k", qs), v = in(g, "v", qs), dy = in(g, "dy", qs);
    int y = node(g, (lrc_node){.op = LRC_OP_ATTENTION, .n_in = 3, .in = {q, k, v}, .iattr = {1}, .fattr = {0.35}});
    int lse = node(g, (lrc_node){.op = LRC_OP_ATTENTION_LSE, .n_in = 3, .in = {q, k, v}, .iattr = {1}, .fattr = {0.35}});
    out(g, "y", y);
    for (int w = 0; w < 3; w++)
        out(g, w == 0 ? "dq" : w == 1 ? "dk" : "dv",
            node(g, (lrc_node){.op = LRC_OP_ATTENTION_GRAD, .n_in = 6, .in = {q, k, v, dy, y, lse}, .iattr = {1, w, 0}, .fattr = {0.35}}));
    return g;
}

/* the gradients of a LayerRoPE gain with respect to gamma and its four scalars */
static lrc_graph *g_gain_grads(void)
{
    lrc_graph *g = lrc_graph_new();
    int gamma = par(g, "gamma", (lrc_shape){1, {8}}), dy = in(g, "dy", (lrc_shape){1, {8}}), sc[4];
    const char *names[4] = {"alpha", "beta", "alpha_rot", "beta_rot"}, *outs[5] = {"d_gamma", "d_alpha", "d_beta", "d_alpha_rot", "d_beta_rot"};
    for (int i = 0; i < 4; i++) sc[i] = par(g, names[i], (lrc_shape){1, {1}});
    for (int w = 0; w < 5; w++)
        out(g, outs[w],
            node(g, (lrc_node){.op = LRC_OP_DEPTH_GAIN_GRAD, .n_in = 6, .in = {gamma, sc[0], sc[1], sc[2], sc[3], dy}, .iattr = {2, w},
                               .fattr = {10000}}));
    return g;
}

static void rule6(target t)
{
    cur_rule = "rule 6 (gradients of one op share a kernel)";
    for (int gain = 0; gain < 2; gain++) {
        lrc_graph *g = gain ? g_gain_grads() : g_attention_grads();
        const lrc_op op = gain ? LRC_OP_DEPTH_GAIN_GRAD : LRC_OP_ATTENTION_GRAD;
        const int n = gain ? 5 : 3;
        lrc_schedule s;
        bool ok = schedule(&g, t, &s);
        int together = 0;
        for (int w = 0; ok && w < n; w++) together += same_group(&s, find(g, op, 0), find(g, op, w));
        EXPECT(!ok || together == n, "the %d %s nodes (which 0..%d) run as one kernel: %d of them in the first one's", n, lrc_op_name(op),
               n - 1, together);
        end_schedule(g, &s, ok);
    }
}

/* ---- rule 7: attention_lse in the attention's kernel ----------------------- */

static void rule7(target t)
{
    cur_rule = "rule 7 (attention_lse in the attention)";
    lrc_graph *g = lrc_graph_new();
    const lrc_shape qs = {4, {1, 4, 2, 8}};
    int q = in(g, "q", qs), k = in(g, "k", qs), v = in(g, "v", qs);
    out(g, "y", node(g, (lrc_node){.op = LRC_OP_ATTENTION, .n_in = 3, .in = {q, k, v}, .iattr = {1}, .fattr = {0.35}}));
    out(g, "lse", node(g, (lrc_node){.op = LRC_OP_ATTENTION_LSE, .n_in = 3, .in = {q, k, v}, .iattr = {1}, .fattr = {0.35}}));
    lrc_schedule s;
    bool ok = schedule(&g, t, &s);
    if (ok) {
        int a = find(g, LRC_OP_ATTENTION, 0), l = find(g, LRC_OP_ATTENTION_LSE, 0);
        EXPECT(s.n_groups == 1 && same_group(&s, a, l) && anchors(&s, a) && !strcmp(kind_of(&s, a), "attention"),
               "attention and its attention_lse are one attention kernel: got %d kernels, the lse %s the attention's", s.n_groups,
               same_group(&s, a, l) ? "in" : "not in");
    }
    end_schedule(g, &s, ok);
}

/* ---- rules 8 to 10: where the cpu target asks ------------------------------ */

/* Rule 8: an LM head's GEMM with its loss and the loss's gradient, the
 * logits in the gradient's buffer; on the cpu with LRC_CPU_LOSS_HEAD=1
 * (off by default: then rule 9 pairs the loss alone), never on cuda. */
static void rule8(target t, bool asked)
{
    cur_rule = "rule 8 (LM head's loss in its GEMM)";
    const int64_t d[5] = {2, 3, 0, 16, 10};
    lrc_graph *g = lrc_graph_new();
    b_loss_head(g, d);
    if (asked) setenv("LRC_CPU_LOSS_HEAD", "1", 1);
    else unsetenv("LRC_CPU_LOSS_HEAD");
    lrc_schedule s;
    bool ok = schedule(&g, t, &s);
    unsetenv("LRC_CPU_LOSS_HEAD");
    if (ok) {
        int m = find(g, LRC_OP_MATMUL, 0), c = find(g, LRC_OP_CROSS_ENTROPY, 0), dg = find(g, LRC_OP_CROSS_ENTROPY_GRAD, 0);
        bool fused = same_group(&s, m, c) && same_group(&s, m, dg);
        if (t == CPU && asked)
            EXPECT(fused && s.n_groups == 1 && anchors(&s, m) && lrc_group_is_loss_head(g, &s.groups[s.group_of[m]]) && s.buffer_of[m] == dg,
                   "with LRC_CPU_LOSS_HEAD=1 the head's matmul, the loss and its gradient are one gemm kernel, the logits in the "
                   "gradient's buffer: got %d kernels, %s, logits in %%%d's buffer",
                   s.n_groups, fused ? "together" : "apart", s.buffer_of[m]);
        else
            EXPECT(!fused && s.buffer_of[m] == m, "%s: the head's matmul keeps its own kernel and buffer: got %s",
                   t == CPU ? "LRC_CPU_LOSS_HEAD unset" : "not asked", fused ? "fused" : "its own buffer elsewhere");
    }
    end_schedule(g, &s, ok);
}

/* Rule 9: a loss and its gradient over the same logits as one kernel (cpu). */
static void rule9(target t)
{
    cur_rule = "rule 9 (loss and its gradient paired)";
    lrc_graph *g = lrc_graph_new();
    int logits = in(g, "logits", (lrc_shape){3, {2, 3, 10}}), labels = input(g, "labels", 2, (int64_t[]){2, 3}, LRC_I32);
    out(g, "loss", node(g, (lrc_node){.op = LRC_OP_CROSS_ENTROPY, .n_in = 2, .in = {logits, labels}}));
    out(g, "grad", node(g, (lrc_node){.op = LRC_OP_CROSS_ENTROPY_GRAD, .n_in = 2, .in = {logits, labels}}));
    lrc_schedule s;
    bool ok = schedule(&g, t, &s);
    if (ok) {
        int c = find(g, LRC_OP_CROSS_ENTROPY, 0), dg = find(g, LRC_OP_CROSS_ENTROPY_GRAD, 0);
        if (t == CPU)
            EXPECT(s.n_groups == 1 && same_group(&s, c, dg) && anchors(&s, c) && lrc_group_loss_pair_grad(g, &s.groups[s.group_of[c]]) == dg,
                   "cross_entropy and cross_entropy_grad over one logits are one kernel anchored by the loss: got %d kernels, %s",
                   s.n_groups, same_group(&s, c, dg) ? "together" : "apart");
        else
            EXPECT(s.n_groups == 2 && !same_group(&s, c, dg), "not asked: the loss and its gradient apart: got %d kernels", s.n_groups);
    }
    end_schedule(g, &s, ok);
}

/* Rule 10: a product of two [R, D] values summed over rows (a gain's
 * gradient) inside the sum's kernel (cpu). */
static void rule10(target t)
{
    cur_rule = "rule 10 (product into its row sum)";
    lrc_graph *g = lrc_graph_new();
    const lrc_shape rs = {2, {6, 8}};
    int a = in(g, "a", rs), b = in(g, "b", rs);
    int p = node(g, (lrc_node){.op = LRC_OP_MUL, .n_in = 2, .in = {a, b}});
    out(g, "dgain", node(g, (lrc_node){.op = LRC_OP_SUM_TO, .n_in = 1, .in = {p}, .n_iattr = 1, .iattr = {8}}));
    lrc_schedule s;
    bool ok = schedule(&g, t, &s);
    if (ok) {
        int m = find(g, LRC_OP_MUL, 0), sum = find(g, LRC_OP_SUM_TO, 0);
        if (t == CPU)
            EXPECT(s.n_groups == 1 && same_group(&s, m, sum) && anchors(&s, sum) && lrc_group_sum_product(g, &s.groups[s.group_of[sum]]) == m,
                   "mul -> sum_to over rows is one kernel anchored by the sum: got %d kernels, the product %s", s.n_groups,
                   same_group(&s, m, sum) ? "inside" : "apart");
        else
            EXPECT(s.n_groups == 2 && !same_group(&s, m, sum), "not asked: the product and its sum apart: got %d kernels", s.n_groups);
    }
    end_schedule(g, &s, ok);
}

/* Rule 11: exp(x) * b, b broadcast along two axes, inside the sum over
 * axis 1 that alone reads it (both targets ask); x * x, also an output,
 * stays apart from its amax. */
static void rule11(target t)
{
    cur_rule = "rule 11 (elementwise prologue into a reduction)";
    lrc_graph *g = lrc_graph_new();
    int x = in(g, "x", (lrc_shape){3, {2, 3, 5}}), b = in(g, "b", (lrc_shape){2, {3, 1}});
    int e = node(g, (lrc_node){.op = LRC_OP_EXP, .n_in = 1, .in = {x}});
    int p = node(g, (lrc_node){.op = LRC_OP_MUL, .n_in = 2, .in = {e, b}});
    out(g, "sum", node(g, (lrc_node){.op = LRC_OP_SUM, .n_in = 1, .in = {p}, .iattr = {1, 1}}));
    int q = node(g, (lrc_node){.op = LRC_OP_MUL, .n_in = 2, .in = {x, x}});
    out(g, "sq", q);
    out(g, "amax", node(g, (lrc_node){.op = LRC_OP_AMAX, .n_in = 1, .in = {q}, .iattr = {-1, 1}}));
    lrc_schedule s;
    bool ok = schedule(&g, t, &s);
    if (ok) {
        int ex = find(g, LRC_OP_EXP, 0), m = find(g, LRC_OP_MUL, 0), sum = find(g, LRC_OP_SUM, 0);
        int sq = find(g, LRC_OP_MUL, 1), amax = find(g, LRC_OP_AMAX, 0);
        bool in_sum = same_group(&s, ex, sum) && same_group(&s, m, sum) && anchors(&s, sum);
        EXPECT(s.n_groups == 3 && in_sum && lrc_group_is_reduce_prologue(g, &s.groups[s.group_of[sum]]) && !same_group(&s, sq, amax),
               "exp -> mul -> sum is one kernel anchored by the sum, x*x apart from its amax: got %d kernels, the chain %s", s.n_groups,
               in_sum ? "inside" : "apart");
    }
    end_schedule(g, &s, ok);
}

int main(void)
{
    for (int t = CPU; t <= CUDA; t++) {
        rule1((target)t);
        rule2((target)t);
        rule3((target)t);
        rule4((target)t);
        rule5((target)t);
        rule6((target)t);
        rule7((target)t);
        rule8((target)t, true);
        rule8((target)t, false);
        rule9((target)t);
        rule10((target)t);
        rule11((target)t);
    }
    return check_summary();
}
