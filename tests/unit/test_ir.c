/* test_ir — the op table, shape rules, the verifier and the printer. */
#include "check.h"
#include "ir/lrc_ir.h"

#include <stdlib.h>
#include <string.h>


static lrc_shape S(int nd, ...)
{
    lrc_shape s = {nd, {0}};
    va_list ap;
    va_start(ap, nd);
    for (int i = 0; i < nd; i++) s.dim[i] = va_arg(ap, int);
    va_end(ap);
    return s;
}

static int input(lrc_graph *g, const char *name, lrc_shape s)
{
    lrc_err err;
    return lrc_graph_add_input(g, name, LRC_F32, &s, NULL, &err);
}

/* Adds op(a, b, ...) and returns the id, or -1 with err filled. */
static int op(lrc_graph *g, lrc_op o, int a, int b, lrc_err *err)
{
    lrc_node n = {.op = o, .n_in = lrc_op_table[o].n_in};
    n.in[0] = a;
    n.in[1] = b;
    return lrc_graph_add(g, &n, err);
}

static void test_table(void)
{
    for (int i = 0; i < LRC_OP_COUNT; i++) {
        const lrc_op_info *info = &lrc_op_table[i];
        CHECK(info->name && info->infer && info->flops, "op %d has an incomplete row", i);
        lrc_op back;
        CHECK(lrc_op_parse(info->name, &back) == 0 && back == (lrc_op)i, "op name %s does not parse back", info->name);
        for (int j = 0; j < i; j++) CHECK(strcmp(info->name, lrc_op_table[j].name), "duplicate op name %s", info->name);
    }
    lrc_op o;
    CHECK(lrc_op_parse("no_such_op", &o) == -1, "unknown op name parsed");
    lrc_dtype t;
    CHECK(lrc_dtype_parse("BF16", &t) == 0 && t == LRC_BF16 && lrc_dtype_size(t) == 2, "bf16 dtype");
    CHECK(lrc_dtype_parse("F64", &t) == -1, "F64 must be unknown");
}

static void test_shapes(void)
{
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    int x = input(g, "x", S(3, 2, 5, 8)), w = input(g, "w", S(2, 6, 8)), wbad = input(g, "wbad", S(2, 6, 7));
    int y = op(g, LRC_OP_MATMUL, x, w, &err);
    CHECK(y >= 0 && lrc_shape_eq(&g->nodes[y].shape, &(lrc_shape){3, {2, 5, 6}}), "matmul shape");
    CHECK(op(g, LRC_OP_MATMUL, x, wbad, &err) < 0 && strstr(err.msg, "matmul") && strstr(err.msg, "[6,7]"),
          "matmul mismatch message: %s", err.msg);

    int v = input(g, "v", S(1, 8)), bad = input(g, "bad", S(2, 3, 7));
    int m = op(g, LRC_OP_MUL, x, v, &err);
    CHECK(m >= 0 && lrc_shape_eq(&g->nodes[m].shape, &g->nodes[x].shape), "broadcast [2,5,8]*[8]");
    CHECK(op(g, LRC_OP_ADD, x, bad, &err) < 0 && strstr(err.msg, "do not broadcast"), "broadcast error: %s", err.msg);

    /* rope needs rank 4 and an even head dimension */
    int r3 = input(g, "r3", S(4, 1, 4, 2, 3)), r4 = input(g, "r4", S(4, 1, 4, 2, 4));
    lrc_node rn = {.op = LRC_OP_ROPE, .n_in = 1, .in = {r3}, .fattr = {10000}};
    CHECK(lrc_graph_add(g, &rn, &err) < 0 && strstr(err.msg, "even"), "rope odd head dim: %s", err.msg);
    rn.in[0] = r4;
    CHECK(lrc_graph_add(g, &rn, &err) >= 0, "rope ok: %s", err.msg);
    rn.fattr[0] = 0;
    CHECK(lrc_graph_add(g, &rn, &err) < 0 && strstr(err.msg, "base"), "rope base 0: %s", err.msg);

    /* reshape with -1, and a wrong element count */
    lrc_node rs = {.op = LRC_OP_RESHAPE, .n_in = 1, .in = {x}, .n_iattr = 2, .iattr = {-1, 8}};
    int rsid = lrc_graph_add(g, &rs, &err);
    CHECK(rsid >= 0 && g->nodes[rsid].shape.dim[0] == 10, "reshape -1");
    rs.iattr[1] = 7;
    CHECK(lrc_graph_add(g, &rs, &err) < 0 && strstr(err.msg, "reshape"), "reshape bad: %s", err.msg);

    lrc_node tr = {.op = LRC_OP_TRANSPOSE, .n_in = 1, .in = {x}, .n_iattr = 3, .iattr = {2, 0, 1}};
    int trid = lrc_graph_add(g, &tr, &err);
    CHECK(trid >= 0 && lrc_shape_eq(&g->nodes[trid].shape, &(lrc_shape){3, {8, 2, 5}}), "transpose shape");
    tr.iattr[2] = 0;
    CHECK(lrc_graph_add(g, &tr, &err) < 0 && strstr(err.msg, "permutation"), "transpose bad perm: %s", err.msg);

    /* depth_gain: even width, scalar parameters */
    lrc_init one = {LRC_INIT_ONES, 0};
    int gam = lrc_graph_add_param(g, "gamma", &(lrc_shape){1, {7}}, one, NULL, NULL, &err);
    int sc = lrc_graph_add_param(g, "s", &(lrc_shape){0, {0}}, one, NULL, NULL, &err);
    lrc_node dg = {.op = LRC_OP_DEPTH_GAIN, .n_in = 5, .in = {gam, sc, sc, sc, sc}, .iattr = {3}, .fattr = {100}};
    CHECK(lrc_graph_add(g, &dg, &err) < 0 && strstr(err.msg, "even"), "depth_gain odd width: %s", err.msg);
    int gam8 = lrc_graph_add_param(g, "gamma8", &(lrc_shape){1, {8}}, one, NULL, NULL, &err);
    dg.in[0] = gam8;
    dg.in[2] = v; /* [8] is not a scalar */
    CHECK(lrc_graph_add(g, &dg, &err) < 0 && strstr(err.msg, "scalar"), "depth_gain scalar: %s", err.msg);
    dg.in[2] = sc;
    CHECK(lrc_graph_add(g, &dg, &err) >= 0, "depth_gain ok: %s", err.msg);
    /* its gradient: the same even width (kernels write pairs), which in 0..4 */
    lrc_node dgg = {.op = LRC_OP_DEPTH_GAIN_GRAD, .n_in = 6, .in = {gam, sc, sc, sc, sc, gam}, .iattr = {3, 0}, .fattr = {100}};
    CHECK(lrc_graph_add(g, &dgg, &err) < 0 && strstr(err.msg, "even"), "depth_gain_grad odd width: %s", err.msg);
    dgg.in[0] = dgg.in[5] = gam8;
    dgg.iattr[1] = 5;
    CHECK(lrc_graph_add(g, &dgg, &err) < 0 && strstr(err.msg, "which"), "depth_gain_grad which 5: %s", err.msg);
    dgg.iattr[1] = 0;
    CHECK(lrc_graph_add(g, &dgg, &err) >= 0, "depth_gain_grad ok: %s", err.msg);

    /* sources: positive sizes, unique names */
    CHECK(lrc_graph_add_param(g, "neg", &(lrc_shape){1, {-3}}, one, NULL, "m.lua:7", &err) < 0 &&
              strstr(err.msg, "m.lua:7:") && strstr(err.msg, "positive"),
          "negative size: %s", err.msg);
    CHECK(lrc_graph_add_param(g, "gamma", &(lrc_shape){1, {8}}, one, NULL, NULL, &err) < 0 &&
              strstr(err.msg, "twice"),
          "duplicate name: %s", err.msg);
    lrc_graph_free(g);
}

static void test_verify_and_print(void)
{
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    int ids = lrc_graph_add_input(g, "tokens", LRC_I32, &(lrc_shape){2, {2, 3}}, NULL, &err);
    lrc_init nrm = {LRC_INIT_NORMAL, 0.02};
    int emb = lrc_graph_add_param(g, "emb.weight", &(lrc_shape){2, {11, 4}}, nrm, "embedding", NULL, &err);
    int e = op(g, LRC_OP_EMBEDDING, ids, emb, &err);
    int w = lrc_graph_add_param(g, "head.weight", &(lrc_shape){2, {11, 4}}, nrm, "head", NULL, &err);
    int y = op(g, LRC_OP_MATMUL, e, w, &err);
    CHECK(lrc_graph_verify(g, &err) != 0 && strstr(err.msg, "no outputs"), "no outputs: %s", err.msg);
    lrc_graph_add_output(g, "logits", y, &err);
    CHECK(lrc_graph_verify(g, &err) == 0, "valid graph: %s", err.msg);
    CHECK(lrc_graph_param_count(g) == 88, "param count");
    double bwd, fwd = lrc_graph_flops(g, &bwd);
    CHECK(fwd == 2.0 * 6 * 11 * 4 && bwd == 2 * fwd, "flops %g %g", fwd, bwd);

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    lrc_graph_print(g, f);
    fclose(f);
    CHECK(strstr(buf, "%4 = matmul %2, %3 : f32[2,3,11]") != NULL, "printer: %s", buf);
    CHECK(strstr(buf, "output \"logits\" = %4") != NULL, "printer output line");
    free(buf);

    /* Corrupt the graph behind the builder's back: the verifier must notice. */
    g->nodes[y].shape.dim[2] = 12;
    CHECK(lrc_graph_verify(g, &err) != 0 && strstr(err.msg, "inputs give"), "shape tampering: %s", err.msg);
    g->nodes[y].shape.dim[2] = 11;
    g->nodes[y].in[0] = y + 1;
    CHECK(lrc_graph_verify(g, &err) != 0 && strstr(err.msg, "does not come before"), "order: %s", err.msg);
    g->nodes[y].in[0] = e;
    g->nodes[y].n_in = 1;
    CHECK(lrc_graph_verify(g, &err) != 0 && strstr(err.msg, "expects 2 inputs"), "arity: %s", err.msg);
    g->nodes[y].n_in = 2;
    CHECK(lrc_graph_verify(g, &err) == 0, "restored graph verifies: %s", err.msg);
    lrc_graph_free(g);
}

/* One axis followed through a small attention block: kept by causal
 * attention, a reshape that keeps the leading dims, a transpose; refused,
 * with the node named, by attention without its mask, a look-ahead slice,
 * a softmax over positions and a loss. */
static void test_axes(void)
{
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    lrc_shape ids = S(2, 2, 8), h4 = S(4, 2, 8, 2, 4);
    int tok = lrc_graph_add_input(g, "tokens", LRC_I32, &ids, NULL, &err);
    int x = input(g, "x", S(3, 2, 8, 8)), w = input(g, "w", S(2, 16, 8));
    lrc_node e = {.op = LRC_OP_EMBEDDING, .n_in = 2, .in = {tok, w}};
    int emb = lrc_graph_add(g, &e, &err);
    lrc_node r = {.op = LRC_OP_RESHAPE, .n_in = 1, .in = {emb}, .n_iattr = 4, .iattr = {2, 8, 2, 4}};
    int q = lrc_graph_add(g, &r, &err);
    lrc_node at = {.op = LRC_OP_ATTENTION, .n_in = 3, .in = {q, q, q}, .iattr = {1}, .fattr = {0.5}};
    int causal = lrc_graph_add(g, &at, &err);
    at.iattr[0] = 0;
    int full = lrc_graph_add(g, &at, &err);
    lrc_node sl = {.op = LRC_OP_SLICE, .n_in = 1, .in = {emb}, .iattr = {1, -1, 8}};
    int back = lrc_graph_add(g, &sl, &err);
    sl.iattr[1] = 1;
    int ahead = lrc_graph_add(g, &sl, &err);
    lrc_node tr = {.op = LRC_OP_TRANSPOSE, .n_in = 1, .in = {emb}, .n_iattr = 3, .iattr = {0, 2, 1}};
    int sm = op(g, LRC_OP_SOFTMAX, lrc_graph_add(g, &tr, &err), -1, &err);
    int added = op(g, LRC_OP_ADD, emb, x, &err);
    CHECK(q >= 0 && causal >= 0 && full >= 0 && back >= 0 && ahead >= 0 && sm >= 0 && added >= 0 && h4.ndim == 4,
          "the graph builds: %s", err.msg);
    int n = g->n_nodes, *in_axis = calloc((size_t)n, sizeof(int)), *axis = calloc((size_t)n, sizeof(int));
    for (int i = 0; i < n; i++) in_axis[i] = -1;
    in_axis[tok] = 1; /* the sequence */
    in_axis[x] = 1;
    /* each refusal in turn (the walk stops at the first), then what came before it */
    CHECK(lrc_graph_track_axis(g, in_axis, "sequence", axis, &err) &&
              strstr(err.msg, "attention has no causal mask: every position attends to the whole sequence"),
          "attention without its mask: '%s'", err.msg);
    g->nodes[full].iattr[0] = 1;
    CHECK(lrc_graph_track_axis(g, in_axis, "sequence", axis, &err) && strstr(err.msg, "slice reads later positions of the sequence"),
          "a slice ahead: '%s'", err.msg);
    g->nodes[ahead].iattr[1] = 0;
    CHECK(lrc_graph_track_axis(g, in_axis, "sequence", axis, &err) && strstr(err.msg, "softmax reduces over the last axis, which is the sequence"),
          "a softmax over positions: '%s'", err.msg);
    CHECK(axis[emb] == 1 && axis[q] == 1 && axis[causal] == 1 && axis[full] == 1 && axis[back] == 1 && axis[sm - 1] == 2,
          "kept: the embedding, reshape, causal attention and slice back at axis 1, the transpose moves it to 2");
    /* the batch axis passes all of it, attention without a mask included */
    g->nodes[full].iattr[0] = 0;
    for (int i = 0; i < n; i++) in_axis[i] = -1;
    in_axis[tok] = in_axis[x] = 0;
    CHECK(lrc_graph_track_axis(g, in_axis, "batch", axis, &err) == LRC_OK && axis[full] == 0 && axis[sm] == 0 && axis[added] == 0,
          "the batch: %s", err.msg);
    int labels = lrc_graph_add_input(g, "labels", LRC_I32, &ids, NULL, &err);
    int loss = op(g, LRC_OP_CROSS_ENTROPY, added, labels, &err);
    free(in_axis);
    free(axis);
    in_axis = calloc((size_t)g->n_nodes, sizeof(int));
    axis = calloc((size_t)g->n_nodes, sizeof(int));
    for (int i = 0; i < g->n_nodes; i++) in_axis[i] = -1;
    in_axis[tok] = in_axis[x] = in_axis[labels] = 0;
    CHECK(loss >= 0 && lrc_graph_track_axis(g, in_axis, "batch", axis, &err) && strstr(err.msg, "cross_entropy mixes the whole batch"),
          "a loss: '%s'", err.msg);
    free(in_axis);
    free(axis);
    lrc_graph_free(g);
    /* matmul(x, x): the weight's rows become the output's last axis, so the batch is mixed */
    g = lrc_graph_new();
    int x2 = input(g, "x", S(2, 4, 4));
    int mm = op(g, LRC_OP_MATMUL, x2, x2, &err);
    int in2[2] = {0, -1}, ax2[2];
    CHECK(mm == 1 && lrc_graph_track_axis(g, in2, "batch", ax2, &err) && strstr(err.msg, "matmul multiplies by a matrix that depends on the batch"),
          "matmul by a tracked matrix: '%s'", err.msg);
    lrc_graph_free(g);
}

/* Grouped key-value heads, the window and the soft-cap: shapes, gradient
 * shapes, FLOPs, and one-line errors for what does not fit. */
static void test_attention_heads(void)
{
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    int q = input(g, "q", S(4, 2, 7, 6, 8)), k = input(g, "k", S(4, 2, 7, 2, 8)), k1 = input(g, "k1", S(4, 2, 7, 1, 8));
    int k4 = input(g, "k4", S(4, 2, 7, 4, 8)), kd = input(g, "kd", S(4, 2, 7, 2, 6)), kt = input(g, "kt", S(4, 2, 5, 2, 8));
    lrc_node a = {.op = LRC_OP_ATTENTION, .n_in = 3, .in = {q, k, k}, .iattr = {1, 3}, .fattr = {0.5, 5.0}};
    int y = lrc_graph_add(g, &a, &err);
    CHECK(y >= 0 && lrc_shape_eq(&g->nodes[y].shape, &g->nodes[q].shape), "GQA 6 over 2: %s", y < 0 ? err.msg : "");
    /* 2 x 6 heads x (3*4/2 + 4*3 pairs for T = 7, W = 3) x (4 Dh + 5) */
    CHECK(y >= 0 && lrc_op_table[LRC_OP_ATTENTION].flops(g, &g->nodes[y]) == 2.0 * 6 * 18 * 37, "flops with a window");
    a.in[1] = a.in[2] = k1;
    CHECK(lrc_graph_add(g, &a, &err) >= 0, "MQA: %s", err.msg);
    a.in[1] = a.in[2] = k4;
    CHECK(lrc_graph_add(g, &a, &err) < 0 && strstr(err.msg, "attention: k and v have 4 heads, which do not divide q's 6 heads"),
          "4 heads for 6: '%s'", err.msg);
    a.in[1] = a.in[2] = kd;
    CHECK(lrc_graph_add(g, &a, &err) < 0 && strstr(err.msg, "q [2,7,6,8] and k [2,7,2,6] must agree in B and Dqk"), "Dqk differs: '%s'", err.msg);
    /* the general form: Tk != Tq (cross-attention), Dv != Dqk, and a bias [B|1,H|1,Tq,Tk] */
    a.in[1] = a.in[2] = kt;
    y = lrc_graph_add(g, &a, &err);
    CHECK(y >= 0 && lrc_shape_eq(&g->nodes[y].shape, &g->nodes[q].shape), "Tk 5 for Tq 7: %s", y < 0 ? err.msg : "");
    a.in[1] = k, a.in[2] = kd;
    y = lrc_graph_add(g, &a, &err);
    CHECK(y >= 0 && g->nodes[y].shape.dim[3] == 6 && g->nodes[y].shape.dim[1] == 7, "Dv 6 for Dqk 8: %s", y < 0 ? err.msg : "");
    a.in[2] = kt;
    CHECK(lrc_graph_add(g, &a, &err) < 0 && strstr(err.msg, "k [2,7,2,8] and v [2,5,2,8] must agree in B, Tk and Hkv"), "Tk of k, v: '%s'", err.msg);
    a.in[1] = k, a.in[2] = k1;
    CHECK(lrc_graph_add(g, &a, &err) < 0 && strstr(err.msg, "k [2,7,2,8] and v [2,7,1,8] must agree in B, Tk and Hkv"), "k, v: '%s'", err.msg);
    int bias_ok[3] = {input(g, "b11", S(4, 1, 1, 7, 7)), input(g, "bb1", S(4, 2, 1, 7, 7)), input(g, "bbh", S(4, 2, 6, 7, 7))};
    int bias_bad[3] = {input(g, "bt", S(4, 1, 1, 7, 5)), input(g, "bh", S(4, 1, 3, 7, 7)), input(g, "b3", S(3, 2, 7, 7))};
    a.in[2] = k, a.n_in = 4;
    for (int i = 0; i < 3; i++) {
        a.in[3] = bias_ok[i];
        y = lrc_graph_add(g, &a, &err);
        CHECK(y >= 0 && lrc_shape_eq(&g->nodes[y].shape, &g->nodes[q].shape), "bias %d: %s", i, y < 0 ? err.msg : "");
    }
    a.in[3] = bias_bad[0];
    CHECK(lrc_graph_add(g, &a, &err) < 0 && strstr(err.msg, "attention: bias [1,1,7,5] does not broadcast to [B, H, Tq, Tk] = [2, 6, 7, 7]"),
          "bias Tk: '%s'", err.msg);
    a.in[3] = bias_bad[1];
    CHECK(lrc_graph_add(g, &a, &err) < 0 && strstr(err.msg, "does not broadcast"), "bias H: '%s'", err.msg);
    a.in[3] = bias_bad[2];
    CHECK(lrc_graph_add(g, &a, &err) < 0 && strstr(err.msg, "attention"), "bias rank 3: '%s'", err.msg);
    a.n_in = 5;
    CHECK(lrc_graph_add(g, &a, &err) < 0 && strstr(err.msg, "attention: expects 3 inputs, got 5"), "5 inputs: '%s'", err.msg);
    a.n_in = 3;
    /* the gradient rule: dq, dk, dv, and dbias (which 3) only where the bias reads a parameter */
    int dyq = input(g, "dyq", S(4, 2, 7, 6, 8)), dx[LRC_MAX_INPUTS] = {-1, -1, -1, -1, -1, -1, -1};
    a.in[1] = a.in[2] = k, a.n_in = 4, a.in[3] = bias_ok[0];
    y = lrc_graph_add(g, &a, &err);
    CHECK(y >= 0 && lrc_op_table[LRC_OP_ATTENTION].grad(g, y, dyq, dx, &err) == 0 && dx[0] >= 0 && dx[2] >= 0 && dx[3] < 0 &&
              g->nodes[dx[0]].n_in == 7,
          "gradient with a mask (an input): %s", err.msg);
    int pb = lrc_graph_add_param(g, "alibi", &(lrc_shape){4, {1, 6, 7, 7}}, (lrc_init){LRC_INIT_NORMAL, 1}, NULL, NULL, &err);
    lrc_node twice = {.op = LRC_OP_ADD, .n_in = 2, .in = {pb, pb}};
    a.in[3] = lrc_graph_add(g, &twice, &err);
    y = lrc_graph_add(g, &a, &err);
    dx[3] = -1;
    CHECK(y >= 0 && lrc_op_table[LRC_OP_ATTENTION].grad(g, y, dyq, dx, &err) == 0 && dx[3] >= 0 &&
              lrc_shape_eq(&g->nodes[dx[3]].shape, &g->nodes[pb].shape),
          "gradient with a learned bias: %s", err.msg);
    a.n_in = 3, a.in[1] = a.in[2] = kt, dx[3] = -1;
    y = lrc_graph_add(g, &a, &err);
    CHECK(y >= 0 && lrc_op_table[LRC_OP_ATTENTION].grad(g, y, dyq, dx, &err) == 0 && lrc_shape_eq(&g->nodes[dx[1]].shape, &g->nodes[kt].shape) &&
              dx[3] < 0,
          "gradient, Tk != Tq: %s", err.msg);
    a.in[1] = k;
    a.in[2] = k, a.iattr[0] = 0;
    CHECK(lrc_graph_add(g, &a, &err) < 0 && strstr(err.msg, "a sliding window needs causal attention"), "window: '%s'", err.msg);
    a.iattr[0] = 1, a.iattr[1] = -1;
    CHECK(lrc_graph_add(g, &a, &err) < 0 && strstr(err.msg, "window must be >= 0"), "negative window: '%s'", err.msg);
    a.iattr[1] = 0, a.fattr[1] = -2;
    CHECK(lrc_graph_add(g, &a, &err) < 0 && strstr(err.msg, "softcap must be a finite number >= 0"), "softcap: '%s'", err.msg);
    /* the log-sum-exp the backward reads: [B,T,H], attention's checks */
    lrc_node ln = {.op = LRC_OP_ATTENTION_LSE, .n_in = 3, .in = {q, k, k}, .iattr = {1, 3}, .fattr = {0.5, 5.0}};
    int lse = lrc_graph_add(g, &ln, &err);
    lrc_shape lse_shape = S(3, 2, 7, 6);
    CHECK(lse >= 0 && lrc_shape_eq(&g->nodes[lse].shape, &lse_shape) && g->nodes[lse].dtype == LRC_F32, "attention_lse shape: %s",
          lse < 0 ? err.msg : "");
    ln.in[1] = ln.in[2] = k4;
    CHECK(lrc_graph_add(g, &ln, &err) < 0 && strstr(err.msg, "attention_lse: k and v have 4 heads, which do not divide q's 6 heads"),
          "attention_lse 4 heads for 6: '%s'", err.msg);
    /* the gradient of k and v has k's heads; y and lse must be q's forward's */
    for (int which = 0; which < 3; which++) {
        lrc_node d = {.op = LRC_OP_ATTENTION_GRAD, .n_in = 6, .in = {q, k, k, q, y, lse}, .iattr = {1, which, 3}, .fattr = {0.5, 5.0}};
        int id = lrc_graph_add(g, &d, &err);
        CHECK(id >= 0 && lrc_shape_eq(&g->nodes[id].shape, &g->nodes[which ? k : q].shape), "attention_grad %d shape: %s", which,
              id < 0 ? err.msg : "");
        d.in[5] = y;
        CHECK(lrc_graph_add(g, &d, &err) < 0 && strstr(err.msg, "attention_grad: input 6 must have 3 axes"), "attention_grad lse of rank 4: '%s'", err.msg);
        d.in[5] = lse, d.in[4] = k;
        CHECK(lrc_graph_add(g, &d, &err) < 0 && strstr(err.msg, "dy and y must have the forward's output shape"), "attention_grad y of k's shape: '%s'",
              err.msg);
        d.in[4] = y, d.in[1] = d.in[2] = k4;
        CHECK(lrc_graph_add(g, &d, &err) < 0 && strstr(err.msg, "attention_grad: k and v have 4 heads, which do not divide q's 6 heads"),
              "attention_grad 4 heads for 6: '%s'", err.msg);
    }
    /* kv_attention: caches of the key-value heads */
    lrc_shape one = S(1, 1), c2 = S(4, 2, 16, 2, 8), c6 = S(4, 2, 16, 6, 8);
    int pos = lrc_graph_add_input(g, "pos", LRC_I32, &one, NULL, &err);
    int kc = lrc_graph_add_state(g, "kc", &c2, NULL, &err), vc = lrc_graph_add_state(g, "vc", &c2, NULL, &err);
    int kc6 = lrc_graph_add_state(g, "kc6", &c6, NULL, &err), vc6 = lrc_graph_add_state(g, "vc6", &c6, NULL, &err);
    lrc_node kv = {.op = LRC_OP_KV_ATTENTION, .n_in = 6, .in = {q, k, k, kc, vc, pos}, .iattr = {3}, .fattr = {0.5, 1e4, 5.0}};
    CHECK(lrc_graph_add(g, &kv, &err) >= 0, "kv_attention GQA: %s", err.msg);
    kv.in[3] = kc6, kv.in[4] = vc6;
    CHECK(lrc_graph_add(g, &kv, &err) < 0 && strstr(err.msg, "do not hold [B, Tmax, Hkv, Dh]"), "kv caches of q's heads: '%s'", err.msg);
    kv.in[1] = kv.in[2] = k4;
    CHECK(lrc_graph_add(g, &kv, &err) < 0 && strstr(err.msg, "kv_attention: k and v have 4 heads, which do not divide q's 6 heads"),
          "kv_attention 4 heads for 6: '%s'", err.msg);
    lrc_graph_free(g);
}

int main(void)
{
    test_table();
    test_axes();
    test_shapes();
    test_attention_heads();
    test_verify_and_print();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
