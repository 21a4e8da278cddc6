/* test_cuda_ops — every op of the PyTorch fixtures (tests/fixtures/ops, the
 * ones test_ops runs on ref and cpu) as a one-op graph on the cuda target: compiled
 * by NVRTC for GPU 0, run with LRC_CUDA_CHECK's guard region after every
 * buffer (checked after every launch), the result within 1e-5 of PyTorch's
 * (f32 storage: a one-op graph's inputs and output are f32), its launch
 * table the same after a trip through package.json's format. On a machine
 * with no cuda device it says why in one line and exits 77, which ctest
 * counts as skipped; CI runs it on the host emulator (tests/cuemu). Then
 * graphs against the reference backend: each elementwise op where its
 * constants decide, every elementwise op on random broadcast shapes,
 * attention, its gradients, the loss, decoding.
 * Usage: test_cuda_ops FIXTURE.safetensors... */
#include "cuda_test.h"
#include "frontend/compile/lrc_compile.h"
#include "op_fixture.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed, excepted;

/* The launch table as a package stores it (runtime/package_cuda.c) and
 * read back: the same struct; and with a GEMM argument past its launch's,
 * refused by name. */
static int table_round_trip(const lrc_compiled *c, lrc_err *err)
{
    const lrc_cuda_table *t = &c->cuda.table;
    cJSON *meta = cJSON_CreateObject();
    cJSON_AddItemToObject(meta, "cuda", lrc_package_cuda_json(t));
    lrc_cuda_table back;
    int rc = lrc_package_cuda_read(meta, &c->plan, "package.json", &back, err);
    if (!rc && (back.n_launches != t->n_launches || back.n_storage != t->n_storage ||
                memcmp(back.storage, t->storage, (size_t)t->n_storage * sizeof *t->storage)))
        rc = lrc_err_set(err, "the launch table read back has other launches or storage");
    for (int i = 0; i < t->n_launches && !rc; i++) {
        const lrc_cuda_launch *a = &t->launches[i], *b = &back.launches[i];
        bool same = !strcmp(a->symbol, b->symbol) && !memcmp(a->grid, b->grid, sizeof a->grid) && a->block == b->block &&
                    a->scratch_bytes == b->scratch_bytes && (!a->scratch_bytes || a->scratch_storage == b->scratch_storage) &&
                    a->access_bytes == b->access_bytes && a->n_gemm == b->n_gemm;
        for (int j = 0; j < a->n_gemm && same; j++)
            same = a->gemm[j].op == b->gemm[j].op && a->gemm[j].m == b->gemm[j].m && a->gemm[j].n == b->gemm[j].n &&
                   a->gemm[j].k == b->gemm[j].k && a->gemm[j].a_arg == b->gemm[j].a_arg && a->gemm[j].b_arg == b->gemm[j].b_arg &&
                   a->gemm[j].c_arg == b->gemm[j].c_arg && a->gemm[j].bias_arg == b->gemm[j].bias_arg;
        if (!same) rc = lrc_err_set(err, "launch %d of the table read back differs", i);
    }
    if (!rc) lrc_cuda_table_free(&back);
    for (int i = 0; i < t->n_launches && !rc; i++) {
        if (!t->launches[i].n_gemm) continue;
        cJSON *ls = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(meta, "cuda"), "launches");
        cJSON *g = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ls, i), "gemm"), 0);
        cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(g, "a_arg"), c->plan.launches[i].n_args);
        lrc_err why;
        if (!lrc_package_cuda_read(meta, &c->plan, "package.json", &back, &why)) {
            lrc_cuda_table_free(&back);
            rc = lrc_err_set(err, "a GEMM argument past launch %d's was read", i);
        } else if (!strstr(why.msg, "is damaged")) rc = lrc_err_set(err, "a damaged GEMM refused with '%s'", why.msg);
        break;
    }
    cJSON_Delete(meta);
    return rc;
}

/* Node id of g (taken), the one-op graph of fixture f (a file's, or a
 * random elementwise case; id < 0: it failed, with err) on cuda; file
 * names it in the lines. */
static void run_set(const char *file, lrc_tensor_set *f, lrc_graph *g, int id, const lrc_tensor *want, const char *opname,
                    lrc_err err, const char *arch)
{
    lrc_tensor_set in, outs;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&outs);
    int rc = id < 0 ? LRC_EUSER : LRC_OK;
    /* the inputs, without the states (kv_attention's caches): the plan holds those, zeroed */
    for (int k = 0; !rc && k < g->nodes[id].n_in; k++) {
        const lrc_node *src = &g->nodes[g->nodes[id].in[k]];
        const lrc_tensor *t = lrc_tensor_set_find(f, src->name);
        lrc_tensor *copy = src->op == LRC_OP_INPUT ? lrc_tensor_new(src->name, t->dtype, &t->shape, &err) : NULL;
        if (copy) memcpy(copy->data, t->data, t->nbytes);
        if (copy && lrc_tensor_set_add(&in, copy, &err)) rc = LRC_EUSER;
    }
    if (!rc && (id < 0 || lrc_graph_add_output(g, "out", id, &err) < 0)) rc = LRC_EUSER;
    lrc_compiled c;
    memset(&c, 0, sizeof c);
    lrc_cuda_exec *x = NULL;
    bool compiled = false;
    if (!rc) {
        rc = lrc_compile_graph_cuda(g, NULL, arch, true, &c, &err); /* takes g */
        g = NULL;
        compiled = true;
    }
    if (!rc) rc = table_round_trip(&c, &err);
    if (!rc) rc = lrc_cuda_exec_new(&c.plan, &c.cuda.table, c.cubin, &x, &err);
    if (!rc) rc = lrc_cuda_exec_run(x, &in, &outs, &err);
    const lrc_tensor *got = rc ? NULL : lrc_tensor_set_find(&outs, "out");
    if (!rc && (!got || !lrc_shape_eq(&got->shape, &want->shape))) rc = lrc_err_set(&err, "no output 'out' of the fixture's shape");
    double rel = rc ? 0 : op_fixture_error(got->data, want);
    const op_fixture_exception *ex = op_fixture_excepted("cuda", opname);
    if (ex && rc && strstr(err.msg, ex->error)) {
        printf("EXCEPTION %-23s %-14s not run on cuda: %s (\"%s\")\n", file, opname, ex->why, err.msg);
        excepted++;
    } else if (ex) {
        printf("FAIL %-28s %-14s listed as an exception on cuda (\"%s\") but got: %s\n", file, opname, ex->error,
               !rc && rel <= 1e-5 ? "a pass (remove it from op_fixture.h's list)" : rc ? err.msg : "a wrong result");
        failed++;
    } else if (rc || !(rel <= 1e-5)) {
        printf("FAIL %-28s %-14s %s relative error %.3e\n", file, opname, rc ? err.msg : "", rel);
        failed++;
    } else {
        printf("ok   %-28s %-14s relative error %.3e\n", file, opname, rel);
        passed++;
    }
    lrc_cuda_exec_free(x);
    if (compiled) lrc_compiled_free(&c);
    lrc_graph_free(g);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&outs);
}

static void run_fixture(const char *path, const char *arch)
{
    lrc_err err;
    lrc_tensor_set f;
    char opname[64] = "?";
    const char *file = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    lrc_graph *g;
    const lrc_tensor *want;
    int id = op_fixture_open(path, &f, &g, opname, sizeof opname, &want, &err);
    if (!g) {
        printf("FAIL %s: %s\n", file, err.msg);
        failed++;
        return;
    }
    run_set(file, &f, g, id, want, opname, err, arch);
    lrc_tensor_set_clear(&f);
}

/* a copy of t named name, added to set */
static void add_copy(lrc_tensor_set *set, const char *name, const lrc_tensor *t, lrc_err *err)
{
    lrc_tensor *copy = lrc_tensor_new(name, t->dtype, &t->shape, err);
    if (copy) memcpy(copy->data, t->data, t->nbytes);
    if (copy) lrc_tensor_set_add(set, copy, err);
}

/* Every elementwise op on random shapes with broadcasting, against its
 * expression in double (op_fixture_random_ew, as test_ops runs them one
 * graph each on ref and cpu): case c of every op in one graph, an output
 * each, so that the emulator compiles one module a case. */
static void run_random_ew(const char *arch)
{
    for (int c = 0; c < OP_FIXTURE_RANDOM_CASES; c++) {
        lrc_err err;
        lrc_graph *g = lrc_graph_new();
        lrc_tensor_set in, wants, outs;
        lrc_tensor_set_init(&in);
        lrc_tensor_set_init(&wants);
        lrc_tensor_set_init(&outs);
        int rc = LRC_OK;
        for (int op = 0; op < LRC_OP_COUNT && !rc; op++) {
            if (!lrc_ew_is((lrc_op)op)) continue;
            lrc_tensor_set f;
            lrc_tensor_set_init(&f);
            op_fixture_random_ew((lrc_op)op, c, &f, &err);
            lrc_node proto = {0};
            char opname[64] = "?", name[80];
            op_fixture_read(f.metadata_json, &proto, opname, sizeof opname); /* counted for the walk */
            proto.n_in = lrc_op_table[op].n_in;
            for (int k = 0; k < proto.n_in && !rc; k++) {
                snprintf(name, sizeof name, "%s.in%d", opname, k);
                add_copy(&in, name, f.items[k], &err);
                rc = (proto.in[k] = lrc_graph_add_input(g, name, LRC_F32, &f.items[k]->shape, NULL, &err)) < 0;
            }
            if (!rc) rc = lrc_graph_add_output(g, opname, lrc_graph_add(g, &proto, &err), &err) < 0;
            add_copy(&wants, opname, lrc_tensor_set_find(&f, "out"), &err);
            lrc_tensor_set_clear(&f);
        }
        lrc_compiled cc;
        memset(&cc, 0, sizeof cc);
        lrc_cuda_exec *x = NULL;
        if (!rc) rc = lrc_compile_graph_cuda(g, NULL, arch, true, &cc, &err); /* takes g */
        else lrc_graph_free(g);
        if (!rc) rc = lrc_cuda_exec_new(&cc.plan, &cc.cuda.table, cc.cubin, &x, &err);
        if (!rc) rc = lrc_cuda_exec_run(x, &in, &outs, &err);
        for (int i = 0; i < wants.n; i++) {
            const lrc_tensor *want = wants.items[i], *got = rc ? NULL : lrc_tensor_set_find(&outs, want->name);
            double rel = got && lrc_shape_eq(&got->shape, &want->shape) ? op_fixture_random_error(got->data, want) : INFINITY;
            char label[96];
            snprintf(label, sizeof label, "random %s %d", want->name, c);
            if (rel <= 1e-5) {
                printf("ok   %-28s relative error %.3e\n", label, rel);
                passed++;
            } else {
                printf("FAIL %-28s %s relative error %.3e\n", label, rc ? err.msg : "", rel);
                failed++;
            }
        }
        if (rc && !wants.n) printf("FAIL random elementwise ops %d: %s\n", c, err.msg), failed++;
        lrc_cuda_exec_free(x);
        if (cc.g) lrc_compiled_free(&cc);
        lrc_tensor_set_clear(&in);
        lrc_tensor_set_clear(&wants);
        lrc_tensor_set_clear(&outs);
    }
}

/* ---- GQA attention with a window and the soft-cap, in kernels of more than one op ---- */

static lrc_tensor *random_input(lrc_graph *g, const char *name, lrc_shape s, uint32_t seed, int *id)
{
    lrc_err err;
    *id = lrc_graph_add_input(g, name, LRC_F32, &s, NULL, &err);
    lrc_tensor *t = lrc_tensor_new(name, LRC_F32, &s, &err);
    for (int64_t i = 0; i < lrc_shape_numel(&s); i++) {
        seed = seed * 1664525u + 1013904223u;
        ((float *)t->data)[i] = (float)((double)(seed >> 8) / (double)(1u << 24) * 4.0 - 2.0);
    }
    return t;
}

static lrc_tensor *ids_input(lrc_graph *g, const char *name, lrc_shape s, int32_t mod, int32_t every, int *id)
{
    lrc_err err;
    *id = lrc_graph_add_input(g, name, LRC_I32, &s, NULL, &err);
    lrc_tensor *t = lrc_tensor_new(name, LRC_I32, &s, &err);
    for (int64_t i = 0; i < lrc_shape_numel(&s); i++) /* every `every`-th id -100 (an ignored label) when every > 0 */
        ((int32_t *)t->data)[i] = every > 0 && i % every == every - 1 ? -100 : (int32_t)((i * 7919 + 13) % mod);
    return t;
}

/* Runs graph g (taken) on cuda and on the reference backend (which takes
 * the states, zeroed as the cuda plan holds them, in ref_in): the worst
 * relative error of its outputs, or -1 with the error printed. */
static double cuda_against_ref_at(lrc_graph *g, const lrc_tensor_set *in, const lrc_tensor_set *ref_in, const char *arch, bool f32,
                                  const char *must_have);

static double cuda_against_ref(lrc_graph *g, const lrc_tensor_set *in, const lrc_tensor_set *ref_in, const char *arch)
{
    return cuda_against_ref_at(g, in, ref_in, arch, true, NULL);
}

/* the same at f32 storage or (f32 false) bf16, the rendered source holding
 * must_have (when not NULL: the kernel the case is for) */
static double cuda_against_ref_at(lrc_graph *g, const lrc_tensor_set *in, const lrc_tensor_set *ref_in, const char *arch, bool f32,
                                  const char *must_have)
{
    lrc_err err;
    lrc_tensor_set want, outs, params;
    lrc_tensor_set_init(&want);
    lrc_tensor_set_init(&outs);
    lrc_tensor_set_init(&params);
    lrc_backend *ref = lrc_backend_ref_new();
    int rc = lrc_exec_run(ref, g, ref_in ? ref_in : in, &params, &want, &err);
    lrc_backend_close(ref);
    lrc_compiled c;
    memset(&c, 0, sizeof c);
    lrc_cuda_exec *x = NULL;
    if (!rc) {
        rc = lrc_compile_graph_cuda(g, NULL, arch, f32, &c, &err); /* takes g */
        g = NULL;
    }
    if (!rc && must_have && !strstr(c.cuda.source, must_have))
        rc = lrc_err_set(&err, "the rendered source has no '%s': not the kernel this case is for", must_have);
    if (!rc) rc = lrc_cuda_exec_new(&c.plan, &c.cuda.table, c.cubin, &x, &err);
    if (!rc) rc = lrc_cuda_exec_run(x, in, &outs, &err);
    double worst = 0;
    for (int i = 0; !rc && i < want.n; i++) {
        const lrc_tensor *got = lrc_tensor_set_find(&outs, want.items[i]->name);
        if (!got || !lrc_shape_eq(&got->shape, &want.items[i]->shape)) rc = lrc_err_set(&err, "no output '%s'", want.items[i]->name);
        double rel = rc ? 0 : op_fixture_rel_error(got->data, want.items[i]->data, lrc_shape_numel(&got->shape));
        if (!rc && !(rel <= worst)) worst = rel;
    }
    if (rc) printf("  %s\n", err.msg);
    lrc_cuda_exec_free(x);
    if (c.g) lrc_compiled_free(&c);
    lrc_graph_free(g);
    lrc_tensor_set_clear(&want);
    lrc_tensor_set_clear(&outs);
    lrc_tensor_set_clear(&params);
    return rc ? -1 : worst;
}

/* one line for a graph check: ok within 1e-5 of the reference, else FAIL (worst < 0: it did not run) */
static void graph_verdict(const char *what, double worst)
{
    if (!(worst >= 0 && worst <= 1e-5)) {
        printf("FAIL %s worst relative error %.3e\n", what, worst);
        failed++;
    } else {
        printf("ok   %s worst relative error %.3e\n", what, worst);
        passed++;
    }
}

/* Each elementwise op on inputs where its constants decide its value, the
 * ranges of test_ops.c's generated cases (which hold ref to each op's
 * definition there): the fixtures' wide ranges let prelude.c's gelu_tanh
 * 0.044715 changed to 0.0447 pass at 9.8e-6 (gelu_tanh_1 and
 * gelu_tanh_grad_0), and gelu's 0.70710678 as 0.7072 at 8.4e-6 (gelu_0);
 * here they err by 1.5e-4 and 1.8e-4, and 2.7e-4, and gelu_tanh_grad's
 * 0.107032224 as 0.1070 by 1.3e-4, while the kernels as they are stay
 * within 3e-7. [8, 67]: rows no block divides evenly. */
static void run_elementwise_ranges(const char *arch)
{
    const op_fixture_range *cases = op_fixture_ranges;
    for (size_t i = 0; i < sizeof op_fixture_ranges / sizeof *op_fixture_ranges; i++) {
        lrc_err err;
        lrc_graph *g = lrc_graph_new();
        lrc_tensor_set in;
        lrc_tensor_set_init(&in);
        const lrc_shape s = {2, {8, 67}};
        lrc_node n = {.op = cases[i].op, .n_in = lrc_op_table[cases[i].op].n_in};
        for (int k = 0; k < n.n_in; k++) {
            lrc_tensor *t = random_input(g, k ? "dy" : "x", s, 31u + 7u * (uint32_t)i + (uint32_t)k, &n.in[k]);
            const double lo = k ? 0.5 : cases[i].lo, hi = k ? 1.5 : cases[i].hi;
            for (int64_t e = 0; e < lrc_shape_numel(&s); e++) /* random_input's [-2, 2) onto [lo, hi) */
                ((float *)t->data)[e] = (float)(lo + (hi - lo) * (((float *)t->data)[e] + 2.0) / 4.0);
            lrc_tensor_set_add(&in, t, &err);
        }
        int rc = lrc_graph_add_output(g, "y", lrc_graph_add(g, &n, &err), &err) < 0;
        double worst = rc ? -1 : cuda_against_ref(g, &in, NULL, arch);
        if (rc) lrc_graph_free(g);
        char what[96];
        snprintf(what, sizeof what, "%s over x in [%g, %g]", lrc_op_name(cases[i].op), cases[i].lo, cases[i].hi);
        graph_verdict(what, worst);
        lrc_tensor_set_clear(&in);
    }
}

/* The loss over more rows than one block takes (the last block's sum of
 * the blocks' sums, ignored labels among them), and the embedding gradient
 * over more ids than one pass of a block reads, each id many times, rows
 * wider than a block: within 1e-5 of the reference backend. */
static void run_loss_embedding_graph(const char *arch)
{
    const int64_t B = 2, T = 77, V = 300, N = 300, VOC = 50, D = 300;
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set in;
    lrc_tensor_set_init(&in);
    int x, y, ids, dy;
    lrc_tensor_set_add(&in, random_input(g, "logits", (lrc_shape){3, {B, T, V}}, 5, &x), &err);
    lrc_tensor_set_add(&in, ids_input(g, "labels", (lrc_shape){2, {B, T}}, (int32_t)V, 9, &y), &err);
    lrc_tensor_set_add(&in, ids_input(g, "ids", (lrc_shape){2, {B, N}}, (int32_t)VOC, 0, &ids), &err);
    lrc_tensor_set_add(&in, random_input(g, "dy", (lrc_shape){3, {B, N, D}}, 6, &dy), &err);
    lrc_node ce = {.op = LRC_OP_CROSS_ENTROPY, .n_in = 2, .in = {x, y}};
    lrc_node eg = {.op = LRC_OP_EMBEDDING_GRAD, .n_in = 2, .in = {ids, dy}, .iattr = {VOC}};
    int rc = lrc_graph_add_output(g, "loss", lrc_graph_add(g, &ce, &err), &err) < 0 ||
             lrc_graph_add_output(g, "dW", lrc_graph_add(g, &eg, &err), &err) < 0;
    double worst = rc ? -1 : cuda_against_ref(g, &in, NULL, arch);
    if (rc) lrc_graph_free(g);
    graph_verdict("loss graph (154 rows of 300 logits, 1 in 9 ignored) and embedding_grad (600 ids of 50, rows of 300)", worst);
    lrc_tensor_set_clear(&in);
}

/* Decoding attention over a KV cache at head widths of one, two and three
 * warps' lanes (the last part full), over more cached positions than the
 * four warps split evenly (zero, as a fresh plan holds its caches), with
 * GQA, a window and the soft-cap: within 1e-5 of the reference backend. */
static void run_kv_attention_graph(const char *arch, int64_t D, int window, double cap)
{
    const int64_t B = 2, T = 2, H = 4, Hkv = 2, Tmax = 103;
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set in, ref_in;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&ref_in);
    int q, k, v, pos;
    lrc_tensor_set_add(&in, random_input(g, "q", (lrc_shape){4, {B, T, H, D}}, 7, &q), &err);
    lrc_tensor_set_add(&in, random_input(g, "k", (lrc_shape){4, {B, T, Hkv, D}}, 8, &k), &err);
    lrc_tensor_set_add(&in, random_input(g, "v", (lrc_shape){4, {B, T, Hkv, D}}, 9, &v), &err);
    lrc_tensor *p = ids_input(g, "pos", (lrc_shape){1, {1}}, 1, 0, &pos);
    ((int32_t *)p->data)[0] = 97; /* positions 97 and 98 new, 0 to 96 cached */
    lrc_tensor_set_add(&in, p, &err);
    const lrc_shape cs = {4, {B, Tmax, Hkv, D}};
    int kc = lrc_graph_add_state(g, "kc", &cs, NULL, &err), vc = lrc_graph_add_state(g, "vc", &cs, NULL, &err);
    for (int i = 0; i < in.n; i++) {
        lrc_tensor *t = lrc_tensor_new(in.items[i]->name, in.items[i]->dtype, &in.items[i]->shape, &err);
        memcpy(t->data, in.items[i]->data, in.items[i]->nbytes);
        lrc_tensor_set_add(&ref_in, t, &err);
    }
    lrc_tensor_set_add(&ref_in, lrc_tensor_new("kc", LRC_F32, &cs, &err), &err);
    lrc_tensor_set_add(&ref_in, lrc_tensor_new("vc", LRC_F32, &cs, &err), &err);
    lrc_node a = {.op = LRC_OP_KV_ATTENTION, .n_in = 6, .in = {q, k, v, kc, vc, pos}, .iattr = {window}, .fattr = {0.3, 500, cap}};
    int rc = kc < 0 || vc < 0 || lrc_graph_add_output(g, "y", lrc_graph_add(g, &a, &err), &err) < 0;
    double worst = rc ? -1 : cuda_against_ref(g, &in, &ref_in, arch);
    if (rc) lrc_graph_free(g);
    char what[128];
    snprintf(what, sizeof what, "kv_attention graph (GQA 4/2, D %lld, 99 positions, window %d, softcap %g)", (long long)D, window, cap);
    graph_verdict(what, worst);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&ref_in);
}

/* RoPE fused into GQA attention (6 query heads over 2) with a window and
 * the soft-cap, and dq, dk, dv in one kernel (fuse rule 6), on cuda against
 * the reference backend, each output within 1e-5. The gradient's kernel
 * (render_attention_grad.c) works in tiles of 32, 16, 8 ... rows by the head
 * dimension: lengths over one tile and not a multiple of it, windows
 * across tiles, and a tile's elements not a multiple of the block. */
typedef struct {
    int64_t T, D;
    int causal, window;
    double cap;
} attn_case;

/* Outputs dq, dk and dv of the attention over q, k and v with these
 * attributes, as autodiff builds them: from the forward's output and its
 * log-sum-exp (attention_lse, written by the forward's kernel, fuse rule
 * 7), which are outputs too (y_grad, lse). Non-zero on failure. */
static int attention_grads(lrc_graph *g, int q, int k, int v, int dy, int causal, int64_t window, double scale, double cap)
{
    lrc_err err;
    lrc_node a = {.op = LRC_OP_ATTENTION, .n_in = 3, .in = {q, k, v}, .iattr = {causal, window}, .fattr = {scale, cap}};
    lrc_node l = {.op = LRC_OP_ATTENTION_LSE, .n_in = 3, .in = {q, k, v}, .iattr = {causal, window}, .fattr = {scale, cap}};
    int y = lrc_graph_add(g, &a, &err), lse = lrc_graph_add(g, &l, &err);
    int rc = lrc_graph_add_output(g, "y_grad", y, &err) < 0 || lrc_graph_add_output(g, "lse", lse, &err) < 0;
    for (int w = 0; w < 3 && !rc; w++) {
        lrc_node d = {.op = LRC_OP_ATTENTION_GRAD, .n_in = 6, .in = {q, k, v, dy, y, lse}, .iattr = {causal, w, window}, .fattr = {scale, cap}};
        rc = lrc_graph_add_output(g, w == 0 ? "dq" : w == 1 ? "dk" : "dv", lrc_graph_add(g, &d, &err), &err) < 0;
    }
    return rc;
}

static void run_attention_graph(const char *arch, attn_case ac)
{
    const int64_t B = 2, T = ac.T, H = 6, Hkv = 2, D = ac.D;
    char what[128];
    snprintf(what, sizeof what, "attention graph (GQA 6/2, T %lld, D %lld, %s, window %d, softcap %g, RoPE, dq dk dv)", (long long)T,
             (long long)D, ac.causal ? "causal" : "full", ac.window, ac.cap);
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set in;
    lrc_tensor_set_init(&in);
    int q, k, v, dy;
    lrc_tensor_set_add(&in, random_input(g, "q", (lrc_shape){4, {B, T, H, D}}, 1, &q), &err);
    lrc_tensor_set_add(&in, random_input(g, "k", (lrc_shape){4, {B, T, Hkv, D}}, 2, &k), &err);
    lrc_tensor_set_add(&in, random_input(g, "v", (lrc_shape){4, {B, T, Hkv, D}}, 3, &v), &err);
    lrc_tensor_set_add(&in, random_input(g, "dy", (lrc_shape){4, {B, T, H, D}}, 4, &dy), &err);
    lrc_node rq = {.op = LRC_OP_ROPE, .n_in = 1, .in = {q}, .fattr = {500}}, rk = {.op = LRC_OP_ROPE, .n_in = 1, .in = {k}, .fattr = {500}};
    lrc_node a = {.op = LRC_OP_ATTENTION, .n_in = 3, .in = {lrc_graph_add(g, &rq, &err), lrc_graph_add(g, &rk, &err), v},
                  .iattr = {ac.causal, ac.window}, .fattr = {0.7, ac.cap}};
    int rc = lrc_graph_add_output(g, "y", lrc_graph_add(g, &a, &err), &err) < 0;
    rc = rc || attention_grads(g, q, k, v, dy, ac.causal, ac.window, 0.7, ac.cap);
    double worst = rc ? -1 : cuda_against_ref(g, &in, NULL, arch);
    if (rc) lrc_graph_free(g);
    graph_verdict(what, worst);
    lrc_tensor_set_clear(&in);
}

/* The gradient of attention on the tensor cores (render_attention_grad_tc.c):
 * bf16 storage, dq, dk, dv against the reference backend on the same
 * bf16-rounded inputs (doubled by an add, so that they are bf16
 * intermediates, as a training graph's are), within 2e-2 (P and dS are rounded to bf16 for their
 * products; the outputs are stored as bf16): lengths over one tile of 64
 * and not a multiple of 32, causal and full, G = 1 and 3 query heads a
 * key-value head, D 16 to 128. */
static void run_attention_grad_bf16(const char *arch, int64_t T, int64_t D, int causal, int64_t H, int64_t Hkv)
{
    const int64_t B = 2;
    char what[128];
    snprintf(what, sizeof what, "attention_grad on the tensor cores (bf16; %lld/%lld heads, T %lld, D %lld, %s)", (long long)H,
             (long long)Hkv, (long long)T, (long long)D, causal ? "causal" : "full");
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set in;
    lrc_tensor_set_init(&in);
    int id[4];
    const char *names[4] = {"q", "k", "v", "dy"};
    for (int i = 0; i < 4; i++) {
        lrc_tensor *t = random_input(g, names[i], (lrc_shape){4, {B, T, i == 1 || i == 2 ? Hkv : H, D}}, 11 + (uint32_t)i, &id[i]);
        for (int64_t e = 0; e < lrc_shape_numel(&t->shape); e++) { /* to bf16, nearest even: both sides read the same values */
            uint32_t u;
            memcpy(&u, (float *)t->data + e, 4);
            u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
            memcpy((float *)t->data + e, &u, 4);
        }
        lrc_tensor_set_add(&in, t, &err);
        lrc_node twice = {.op = LRC_OP_ADD, .n_in = 2, .in = {id[i], id[i]}}; /* exact: an intermediate, stored bf16 as in training */
        id[i] = lrc_graph_add(g, &twice, &err);
    }
    int rc = attention_grads(g, id[0], id[1], id[2], id[3], causal, 0, 1.0 / sqrt((double)D), 0);
    double worst = rc ? -1 : cuda_against_ref_at(g, &in, NULL, arch, false, "mma_bf16_row(dq[n]");
    if (rc) lrc_graph_free(g);
    const bool ok = worst >= 0 && worst <= 2e-2;
    printf("%s %s worst relative error %.3e (2e-2 allowed)\n", ok ? "ok  " : "FAIL", what, worst);
    ok ? passed++ : failed++;
    lrc_tensor_set_clear(&in);
}

/* Attention's general form (render_attention.c): Tq != Tk, Dv != Dqk, GQA
 * 4/2, biases [1,1,Tq,Tk], [B,1,Tq,Tk] and [B,4,Tq,Tk], and a padding mask
 * whose -inf entries hide batch b's last b + 1 keys and the whole of the
 * last batch's last query row (zeros out), with and without causal, the
 * soft-cap and a window; f32 within 1e-5 of the reference, and bf16 storage
 * (inputs rounded to bf16 on both sides, then doubled by an add so that the
 * attention reads bf16 intermediates) within 2e-2. */
static void run_attention_general(const char *arch, int64_t Tq, int64_t Tk, int64_t Dqk, int64_t Dv, bool f32)
{
    const int64_t B = 2, H = 4, Hkv = 2;
    char what[160];
    snprintf(what, sizeof what, "attention, general form (%s; Tq %lld, Tk %lld, Dqk %lld, Dv %lld, biases, a -inf mask)", f32 ? "f32" : "bf16",
             (long long)Tq, (long long)Tk, (long long)Dqk, (long long)Dv);
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set in;
    lrc_tensor_set_init(&in);
    int id[7];
    const char *names[7] = {"q", "k", "v", "b11", "bb1", "bbh", "mask"};
    const lrc_shape shapes[7] = {{4, {B, Tq, H, Dqk}}, {4, {B, Tk, Hkv, Dqk}}, {4, {B, Tk, Hkv, Dv}}, {4, {1, 1, Tq, Tk}},
                                 {4, {B, 1, Tq, Tk}},  {4, {B, H, Tq, Tk}},    {4, {B, 1, Tq, Tk}}};
    for (int i = 0; i < 7; i++) {
        lrc_tensor *t = random_input(g, names[i], shapes[i], 21 + (uint32_t)i, &id[i]);
        for (int64_t e = 0; e < lrc_shape_numel(&t->shape) && !f32; e++) { /* to bf16, nearest even */
            uint32_t u;
            memcpy(&u, (float *)t->data + e, 4);
            u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
            memcpy((float *)t->data + e, &u, 4);
        }
        if (i == 6)
            for (int64_t b = 0; b < B; b++)
                for (int64_t r = 0; r < Tq; r++)
                    for (int64_t j = 0; j < Tk; j++)
                        if (j >= Tk - 1 - b || (b == B - 1 && r == Tq - 1)) ((float *)t->data)[(b * Tq + r) * Tk + j] = -INFINITY;
        lrc_tensor_set_add(&in, t, &err);
        lrc_node twice = {.op = LRC_OP_ADD, .n_in = 2, .in = {id[i], id[i]}}; /* exact: an intermediate, stored bf16 when not f32 */
        id[i] = lrc_graph_add(g, &twice, &err);
    }
    const struct {
        const char *name;
        int bias, causal, window;
        double cap;
    } outs[] = {{"plain", -1, 0, 0, 0}, {"plain_causal", -1, 1, 0, 0}, {"b11", 3, 0, 0, 0}, {"bb1_causal_cap", 4, 1, 0, 1.5},
                {"bbh_window", 5, 1, 3, 0}, {"mask", 6, 0, 0, 0}, {"mask_causal", 6, 1, 0, 0}};
    int rc = 0;
    for (size_t i = 0; i < sizeof outs / sizeof *outs && !rc; i++) {
        lrc_node a = {.op = LRC_OP_ATTENTION, .n_in = outs[i].bias >= 0 ? 4 : 3, .in = {id[0], id[1], id[2], outs[i].bias >= 0 ? id[outs[i].bias] : 0},
                      .iattr = {outs[i].causal, outs[i].window}, .fattr = {1.0 / sqrt((double)Dqk), outs[i].cap}};
        rc = lrc_graph_add_output(g, outs[i].name, lrc_graph_add(g, &a, &err), &err) < 0;
    }
    if (rc) printf("  %s\n", err.msg);
    double worst = rc ? -1 : cuda_against_ref_at(g, &in, NULL, arch, f32, NULL);
    if (rc) lrc_graph_free(g);
    const double allowed = f32 ? 1e-5 : 2e-2;
    const bool ok = worst >= 0 && worst <= allowed;
    printf("%s %s worst relative error %.3e (%.0e allowed)\n", ok ? "ok  " : "FAIL", what, worst, allowed);
    ok ? passed++ : failed++;
    lrc_tensor_set_clear(&in);
}

/* The gradient of attention's general form (render_attention_grad_general.c),
 * f32 storage, against the reference backend within 1e-5: GQA 4/2, Tq !=
 * Tk, Dv != Dqk, no bias; a bias [1,1,Tq,Tk] with its gradient (summed over
 * batch and heads: one block), [B,4,Tq,Tk] with its gradient, causal with
 * the soft-cap and a window; a padding mask (-inf entries, a whole row of
 * them) with no gradient, full and causal. dq, dk, dv (and dbias) as
 * autodiff builds them, from the forward's y and lse (y an output; lse not:
 * a row that sees no key has -inf). */
static void run_attention_grad_general(const char *arch, int64_t Tq, int64_t Tk, int64_t Dqk, int64_t Dv)
{
    const int64_t B = 2, H = 4, Hkv = 2;
    char what[160];
    snprintf(what, sizeof what, "attention_grad, general form (f32; Tq %lld, Tk %lld, Dqk %lld, Dv %lld, biases and their gradients, a -inf mask)",
             (long long)Tq, (long long)Tk, (long long)Dqk, (long long)Dv);
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set in;
    lrc_tensor_set_init(&in);
    int id[7];
    const char *names[7] = {"q", "k", "v", "dy", "b11", "bbh", "mask"};
    const lrc_shape shapes[7] = {{4, {B, Tq, H, Dqk}}, {4, {B, Tk, Hkv, Dqk}}, {4, {B, Tk, Hkv, Dv}}, {4, {B, Tq, H, Dv}},
                                 {4, {1, 1, Tq, Tk}},  {4, {B, H, Tq, Tk}},    {4, {B, 1, Tq, Tk}}};
    for (int i = 0; i < 7; i++) {
        lrc_tensor *t = random_input(g, names[i], shapes[i], 41 + (uint32_t)i, &id[i]);
        if (i == 6)
            for (int64_t b = 0; b < B; b++)
                for (int64_t r = 0; r < Tq; r++)
                    for (int64_t j = 0; j < Tk; j++)
                        if (j >= Tk - 1 - b || (b == B - 1 && r == Tq - 1)) ((float *)t->data)[(b * Tq + r) * Tk + j] = -INFINITY;
        lrc_tensor_set_add(&in, t, &err);
    }
    const struct {
        const char *name;
        int bias, causal, window;
        bool dbias;
        double cap;
    } cases[] = {{"plain", -1, 0, 0, false, 0}, {"plain_causal", -1, 1, 0, false, 0}, {"b11", 4, 0, 0, true, 0},
                 {"bbh_causal_cap_window", 5, 1, 3, true, 1.5}, {"mask", 6, 0, 0, false, 0}, {"mask_causal", 6, 1, 0, false, 0}};
    int rc = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases && !rc; i++) {
        int nb = cases[i].bias >= 0, bias = nb ? id[cases[i].bias] : 0;
        lrc_node a = {.op = LRC_OP_ATTENTION, .n_in = 3 + nb, .in = {id[0], id[1], id[2], bias}, .iattr = {cases[i].causal, cases[i].window},
                      .fattr = {1.0 / sqrt((double)Dqk), cases[i].cap}};
        lrc_node l = a;
        l.op = LRC_OP_ATTENTION_LSE;
        int y = lrc_graph_add(g, &a, &err), lse = lrc_graph_add(g, &l, &err);
        char name[64];
        snprintf(name, sizeof name, "y_%s", cases[i].name);
        rc = y < 0 || lse < 0 || lrc_graph_add_output(g, name, y, &err) < 0;
        for (int w = 0; w < (cases[i].dbias ? 4 : 3) && !rc; w++) {
            lrc_node d = {.op = LRC_OP_ATTENTION_GRAD, .n_in = 6 + nb, .in = {id[0], id[1], id[2], id[3], y, lse, bias},
                          .iattr = {cases[i].causal, w, cases[i].window}};
            d.fattr[0] = a.fattr[0], d.fattr[1] = a.fattr[1];
            snprintf(name, sizeof name, "d%s_%s", w == 3 ? "bias" : w == 0 ? "q" : w == 1 ? "k" : "v", cases[i].name);
            rc = lrc_graph_add_output(g, name, lrc_graph_add(g, &d, &err), &err) < 0;
        }
    }
    if (rc) printf("  %s\n", err.msg);
    double worst = rc ? -1 : cuda_against_ref_at(g, &in, NULL, arch, true, NULL);
    if (rc) lrc_graph_free(g);
    const bool ok = worst >= 0 && worst <= 1e-5;
    printf("%s %s worst relative error %.3e (1e-5 allowed)\n", ok ? "ok  " : "FAIL", what, worst);
    ok ? passed++ : failed++;
    lrc_tensor_set_clear(&in);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_cuda_ops FIXTURE...\n");
        return 2;
    }
    char arch[16];
    cuda_test_device(arch, sizeof arch);
    for (int i = 1; i < argc; i++) run_fixture(argv[i], arch);
    run_random_ew(arch);
    const attn_case cases[] = {{37, 8, 1, 3, 1.5}, {77, 16, 1, 0, 0}, {50, 96, 0, 0, 0}, {45, 40, 1, 19, 1.5}, {20, 200, 1, 0, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_attention_graph(arch, cases[i]);
    run_attention_grad_bf16(arch, 77, 64, 1, 2, 2);
    run_attention_grad_bf16(arch, 40, 16, 0, 3, 1);
    run_attention_grad_bf16(arch, 130, 128, 1, 3, 1);
    run_elementwise_ranges(arch);
    run_loss_embedding_graph(arch);
    run_kv_attention_graph(arch, 32, 0, 0);
    run_kv_attention_graph(arch, 64, 0, 2.5);
    run_kv_attention_graph(arch, 80, 37, 0);
    run_attention_general(arch, 9, 70, 8, 12, true); /* keys over one tile of 32 and partial */
    run_attention_general(arch, 70, 5, 16, 6, true); /* query rows over one block of 64 */
    run_attention_general(arch, 9, 70, 16, 24, false);
    run_attention_general(arch, 70, 5, 16, 8, false);
    run_attention_grad_general(arch, 9, 5, 8, 12);  /* cross-attention: Tq over Tk, Dv over Dqk */
    run_attention_grad_general(arch, 5, 11, 12, 6); /* Tq under Tk, Dv under Dqk */
    run_attention_grad_general(arch, 7, 7, 8, 8);   /* Tq == Tk: the biases alone make it general */
    failed += op_fixture_walk("cuda", lrc_cuda_supports_op); /* every op the renderer's table has was tested */
    if (excepted) printf("%d listed exceptions on cuda (see above)\n", excepted);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
