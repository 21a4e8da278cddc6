/* test_ops — every op fixture that PyTorch computed in f64
 * (tests/fixtures/ops, tests/reference/make_fixtures.py and op_fixtures.py)
 * as a one-op graph on a target, within 1e-5 relative (docs/architecture.md: f32 paths;
 * the fixture's inputs and output are f32), with guard regions after every
 * buffer to catch out-of-bounds writes (ggml's test-backend-ops pattern).
 *   ref: the reference backend's kernel, launched on guarded buffers;
 *   cpu: the graph compiled through the passes and LLVM (lrc_compile_graph)
 *        and run by the plan executor on guarded host tensors.
 * Then each elementwise op on inputs generated where its constants decide
 * its value, against its definition in double (run_generated), and every
 * elementwise op on random shapes with broadcasting against its expression
 * in double (run_random_ew: an op of LRC_EW_OPS needs no fixture file).
 * Then the op table is walked with the target's supports_op (ref: the
 * backend's; cpu: the LLVM renderer's table): every op it supports must
 * have been tested by a fixture (op_fixture_walk).
 * Usage: test_ops ref|cpu FIXTURE.safetensors...
 * A fixture holds in0, in1, ... and out, and "__metadata__" with the op name
 * and its attributes as strings. */
#include "check.h"
#include "codegen/llvm/lrc_llvm.h"
#include "frontend/compile/lrc_compile.h"
#include "op_fixture.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 64
#define GUARD_BYTE 0xA5

static int excepted;

/* the ref backend's supports_op, for the walk over the op table */
static lrc_backend *ref_backend;
static bool ref_supports(lrc_op op)
{
    lrc_graph *g = lrc_graph_new();
    lrc_node n = {.op = op, .n_in = lrc_op_table[op].n_in};
    bool yes = ref_backend->ops->supports_op(g, &n);
    lrc_graph_free(g);
    return yes;
}

/* ---- ref: the backend's kernel on guarded backend buffers -------------- */

/* A backend buffer of n bytes followed by GUARD bytes of a known pattern. */
static void *guarded(lrc_backend *be, const void *data, size_t n)
{
    lrc_err err;
    void *b = be->ops->alloc(be, n + GUARD, &err);
    uint8_t *host = malloc(n + GUARD);
    if (data) memcpy(host, data, n);
    else memset(host, 0, n);
    memset(host + n, GUARD_BYTE, GUARD);
    be->ops->write(be, b, host, n + GUARD, &err);
    free(host);
    return b;
}

static bool guard_ok(lrc_backend *be, void *b, size_t n, uint8_t *host)
{
    lrc_err err;
    be->ops->read(be, host, b, n + GUARD, &err);
    for (size_t i = n; i < n + GUARD; i++)
        if (host[i] != GUARD_BYTE) return false;
    return true;
}

/* Runs node id of g; *got (n floats, malloc'd) is the result. Returns 0, or
 * an error in err; *guards false when a guard byte changed. */
static int run_ref(lrc_backend *be, const lrc_graph *g, int id, const lrc_tensor_set *f, size_t out_bytes, float **got,
                   bool *guards, lrc_err *err)
{
    const lrc_node *n = &g->nodes[id];
    void *bufs[LRC_MAX_INPUTS];
    size_t sizes[LRC_MAX_INPUTS];
    for (int k = 0; k < n->n_in; k++) {
        const lrc_tensor *t = lrc_tensor_set_find(f, g->nodes[n->in[k]].name);
        sizes[k] = t->nbytes;
        bufs[k] = guarded(be, t->data, t->nbytes);
    }
    void *out = guarded(be, NULL, out_bytes);
    uint8_t *host = malloc(out_bytes + GUARD + 1);
    int rc = be->ops->launch(be, g, id, bufs, out, err);
    *guards = guard_ok(be, out, out_bytes, host);
    for (int k = 0; k < n->n_in; k++) {
        uint8_t *scratch = malloc(sizes[k] + GUARD);
        *guards = *guards && guard_ok(be, bufs[k], sizes[k], scratch);
        free(scratch);
        be->ops->free(be, bufs[k]);
    }
    be->ops->free(be, out);
    *got = (float *)host;
    return rc;
}

/* ---- cpu: the compiled graph on guarded host tensors -------------------- */

static lrc_tensor *guarded_tensor(const char *name, lrc_dtype t, const lrc_shape *s, const void *data)
{
    lrc_err err;
    lrc_tensor *x = lrc_tensor_new(name, t, s, &err);
    x->data = realloc(x->data, x->nbytes + GUARD);
    if (data) memcpy(x->data, data, x->nbytes);
    memset((char *)x->data + x->nbytes, GUARD_BYTE, GUARD);
    return x;
}

static bool tensor_guard_ok(const lrc_tensor *t)
{
    for (size_t i = 0; i < GUARD; i++)
        if (((const unsigned char *)t->data)[t->nbytes + i] != GUARD_BYTE) return false;
    return true;
}

/* Compiles g (taken over) with node id as its output "out" and runs it;
 * states (kv_attention's caches) live in the plan, zeroed, not in the inputs. */
static int run_cpu(lrc_graph *g, int id, const lrc_tensor_set *f, const lrc_tensor *want, float **got, bool *guards,
                   lrc_err *err)
{
    lrc_tensor_set in, outs;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&outs);
    const lrc_node *n = &g->nodes[id];
    for (int k = 0; k < n->n_in; k++) {
        const lrc_node *src = &g->nodes[n->in[k]];
        if (src->op != LRC_OP_INPUT) continue;
        const lrc_tensor *t = lrc_tensor_set_find(f, src->name);
        lrc_tensor_set_add(&in, guarded_tensor(src->name, t->dtype, &t->shape, t->data), err);
    }
    lrc_tensor_set_add(&outs, guarded_tensor("out", want->dtype, &want->shape, NULL), err);
    lrc_compiled c;
    memset(&c, 0, sizeof c);
    lrc_pool *pool = lrc_pool_new(2, err);
    lrc_exec *x = NULL;
    int rc = lrc_graph_add_output(g, "out", id, err) < 0 ? LRC_EUSER : LRC_OK;
    if (!rc) rc = lrc_compile_graph(g, NULL, &c, err); /* takes g */
    else lrc_graph_free(g);
    if (!rc) rc = lrc_exec_new(&c.plan, pool, &x, err);
    if (!rc) rc = lrc_exec_run_plan(x, &in, &outs, err);
    *guards = tensor_guard_ok(outs.items[0]);
    for (int i = 0; i < in.n; i++) *guards = *guards && tensor_guard_ok(in.items[i]);
    *got = malloc(want->nbytes + 1);
    memcpy(*got, outs.items[0]->data, want->nbytes);
    lrc_exec_free(x);
    lrc_pool_free(pool);
    if (c.g) lrc_compiled_free(&c);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&outs);
    return rc;
}

/* Node id of g (taken), the one-op graph of fixture f (a file's, or one
 * generated below; id < 0: it failed to build, with err), on target (be:
 * ref), judged within 1e-5 (the random cases by op_fixture_random_error); file names it in the lines. */
static void run_graph(const char *target, lrc_backend *be, const char *file, const lrc_tensor_set *f, lrc_graph *g, int id,
                      const lrc_tensor *want, const char *opname, bool random, lrc_err err)
{
    int rc = id < 0 ? LRC_EUSER : LRC_OK;
    float *got = NULL;
    bool guards = true;
    if (!rc && be) rc = run_ref(be, g, id, f, want->nbytes, &got, &guards, &err);
    else if (!rc) {
        rc = run_cpu(g, id, f, want, &got, &guards, &err); /* takes g */
        g = NULL;
    }
    double rel = rc ? 0 : random ? op_fixture_random_error(got, want) : op_fixture_error(got, want);
    bool ok = !rc && guards && rel <= 1e-5;
    const op_fixture_exception *ex = op_fixture_excepted(target, opname);
    if (ex && rc && strstr(err.msg, ex->error)) {
        printf("EXCEPTION %-23s %-18s not run on %s: %s (\"%s\")\n", file, opname, target, ex->why, err.msg);
        excepted++;
    } else if (ex) {
        printf("FAIL %-28s %-18s listed as an exception on %s (\"%s\") but got: %s\n", file, opname, target, ex->error,
               ok ? "a pass (remove it from op_fixture.h's list)" : rc ? err.msg : "a wrong result");
        failed++;
    } else if (!ok) {
        printf("FAIL %-28s %-18s %s relative error %.3e\n", file, opname,
               rc ? err.msg : !guards ? "guard bytes overwritten;" : "", rel);
        failed++;
    } else {
        printf("ok   %-28s %-18s relative error %.3e\n", file, opname, rel);
        passed++;
    }
    free(got);
    lrc_graph_free(g);
}

static void run_fixture(const char *target, lrc_backend *be, const char *path)
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
    run_graph(target, be, file, &f, g, id, want, opname, false, err);
    lrc_tensor_set_clear(&f);
}

/* ---- generated cases: inputs where each op's constants decide ----------- */

/* The fixtures above draw their inputs over wide ranges, where the largest
 * values (x itself, for gelu at x = 7) fill the norm and a constant of the
 * op's formula counts little: the LLVM renderer's gelu_tanh 0.044715
 * changed to 0.0447 erred by 9.8e-6 on gelu_tanh_1, inside the 1e-5
 * allowed. These cases draw each op's inputs where its constants decide
 * its value (for the GELUs the negative tail, where x Phi(x) is small and
 * Phi's relative error is its argument's times about x^2): that change errs
 * by 1.5e-4 (gelu_tanh) and 7.6e-5 (its gradient) here, sqrt(2/pi) as
 * 0.7979 by 6.1e-5, gelu's 1/sqrt(2) as 0.7072 by 2.6e-4, while the kernels
 * as they are stay within 7e-7. The expected values are each op's
 * definition (torch's), in double. test_cuda_ops draws the same ranges
 * (op_fixture.h) for the cuda target against ref. */
/* op at x (and dy), from its definition; for tanh_grad and sigmoid_grad x is
 * the forward's output, as their inputs are */
static double gen_value(lrc_op op, double x, double dy)
{
    const double beta = sqrt(2.0 / acos(-1.0)), kappa = 0.044715, phi = exp(-0.5 * x * x) / sqrt(2.0 * acos(-1.0));
    const double t = tanh(beta * (x + kappa * x * x * x)), s = 1.0 / (1.0 + exp(-x));
    switch (op) {
    case LRC_OP_GELU_TANH: return 0.5 * x * (1.0 + t);
    case LRC_OP_GELU_TANH_GRAD: return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * beta * (1.0 + 3.0 * kappa * x * x));
    case LRC_OP_GELU: return x * 0.5 * erfc(-x / sqrt(2.0));
    case LRC_OP_GELU_GRAD: return dy * (0.5 * erfc(-x / sqrt(2.0)) + x * phi);
    case LRC_OP_SILU: return x * s;
    case LRC_OP_SILU_GRAD: return dy * s * (1.0 + x * (1.0 - s));
    case LRC_OP_SIGMOID: return s;
    case LRC_OP_SIGMOID_GRAD: return dy * x * (1.0 - x);
    case LRC_OP_TANH: return tanh(x);
    case LRC_OP_TANH_GRAD: return dy * (1.0 - x * x);
    case LRC_OP_EXP: return exp(x);
    case LRC_OP_SOFTPLUS: return log1p(exp(x));
    default: return NAN;
    }
}

/* op_fixture_ranges[i] as a fixture: in0 (and dy as in1) [8, 67] from a fixed
 * seed, out from gen_value, and the op in the metadata */
static void gen_fixture(int i, lrc_tensor_set *f, lrc_err *err)
{
    const op_fixture_range *c = &op_fixture_ranges[i];
    const lrc_shape s = {2, {8, 67}};
    const int n_in = lrc_op_table[c->op].n_in;
    lrc_tensor *t[3] = {lrc_tensor_new("in0", LRC_F32, &s, err), n_in > 1 ? lrc_tensor_new("in1", LRC_F32, &s, err) : NULL,
                        lrc_tensor_new("out", LRC_F32, &s, err)};
    uint32_t seed = 12345u + 977u * (uint32_t)i;
    for (int64_t e = 0; e < lrc_shape_numel(&s); e++) {
        float v[2];
        for (int k = 0; k < 2; k++) {
            seed = seed * 1664525u + 1013904223u;
            double u = (double)(seed >> 8) / (double)(1u << 24);
            v[k] = (float)(k ? 0.5 + u : c->lo + (c->hi - c->lo) * u);
        }
        ((float *)t[0]->data)[e] = v[0];
        if (t[1]) ((float *)t[1]->data)[e] = v[1];
        ((float *)t[2]->data)[e] = (float)gen_value(c->op, v[0], v[1]);
    }
    for (int k = 0; k < 3; k++)
        if (t[k]) lrc_tensor_set_add(f, t[k], err);
    char meta[96];
    snprintf(meta, sizeof meta, "{\"op\":\"%s\"}", lrc_op_name(c->op));
    f->metadata_json = lrc_strdup(meta);
}

static void run_generated(const char *target, lrc_backend *be)
{
    for (int i = 0; i < (int)(sizeof op_fixture_ranges / sizeof *op_fixture_ranges); i++) {
        lrc_err err;
        lrc_tensor_set f;
        lrc_tensor_set_init(&f);
        gen_fixture(i, &f, &err);
        char label[64], opname[64] = "?";
        snprintf(label, sizeof label, "x in [%g, %g]", op_fixture_ranges[i].lo, op_fixture_ranges[i].hi);
        lrc_graph *g = lrc_graph_new();
        const lrc_tensor *want;
        int id = op_fixture_graph(&f, g, opname, sizeof opname, &want, &err);
        run_graph(target, be, label, &f, g, id, want, opname, false, err);
        lrc_tensor_set_clear(&f);
    }
}

/* Every elementwise op (its expression, ir/ew.c) on random shapes with
 * broadcasting on every side (op_fixture_random_ew), against its
 * expression evaluated in double here: an op added to LRC_EW_OPS is run on
 * each target with guard bytes without a fixture of its own. */
static void run_random_ew(const char *target, lrc_backend *be)
{
    for (int op = 0; op < LRC_OP_COUNT; op++)
        for (int c = 0; lrc_ew_is((lrc_op)op) && c < OP_FIXTURE_RANDOM_CASES; c++) {
            lrc_err err;
            lrc_tensor_set f;
            lrc_tensor_set_init(&f);
            op_fixture_random_ew((lrc_op)op, c, &f, &err);
            char label[64], opname[64] = "?";
            snprintf(label, sizeof label, "random %s %d", lrc_op_name((lrc_op)op), c);
            lrc_graph *g = lrc_graph_new();
            const lrc_tensor *want;
            int id = op_fixture_graph(&f, g, opname, sizeof opname, &want, &err);
            run_graph(target, be, label, &f, g, id, want, opname, true, err);
            lrc_tensor_set_clear(&f);
        }
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[1], "ref") && strcmp(argv[1], "cpu"))) {
        fprintf(stderr, "usage: test_ops ref|cpu FIXTURE...\n");
        return 2;
    }
    lrc_err err;
    lrc_backend *be = NULL;
    if (!strcmp(argv[1], "ref") && !(be = lrc_backend_open("ref", &err))) {
        fprintf(stderr, "test_ops: %s\n", err.msg);
        return 1;
    }
    for (int i = 2; i < argc; i++) run_fixture(argv[1], be, argv[i]);
    run_generated(argv[1], be);
    run_random_ew(argv[1], be);
    ref_backend = be;
    failed += op_fixture_walk(argv[1], be ? ref_supports : lrc_llvm_supports_op);
    lrc_backend_close(be);
    if (excepted) printf("%d listed exceptions on %s (see above)\n", excepted, argv[1]);
    return check_summary();
}
