/* op_fixture.h — what test_ops (ref, cpu) and test_cuda_ops (cuda) share about
 * the op fixtures of tests/fixtures/ops: the op and its attributes from a
 * fixture's metadata, the one-op graph it makes, and the relative error the
 * results are judged by. */
#ifndef LRC_TEST_OP_FIXTURE_H
#define LRC_TEST_OP_FIXTURE_H

#include "ir/lrc_ew.h"
#include "ir/lrc_ir.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fixtures read per op, for the walk over the op table (op_fixture_walk). */
static int op_fixture_ran[LRC_OP_COUNT];

/* Fills proto's op and attributes from the fixture's metadata by op-table
 * names, and opname; -1 when the metadata names no known op. */
static int op_fixture_read(const char *meta, lrc_node *proto, char *opname, size_t n)
{
    cJSON *m = cJSON_Parse(meta);
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(m, "op");
    int rc = -1;
    if (cJSON_IsString(op) && !lrc_op_parse(op->valuestring, &proto->op)) {
        op_fixture_ran[proto->op]++;
        snprintf(opname, n, "%s", op->valuestring);
        const lrc_op_info *info = &lrc_op_table[proto->op];
        for (int a = 0; a < LRC_MAX_IATTR && info->iattr[a]; a++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, info->iattr[a]);
            if (cJSON_IsString(v)) proto->iattr[a] = strtoll(v->valuestring, NULL, 10);
        }
        for (int a = 0; a < LRC_MAX_FATTR && info->fattr[a]; a++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, info->fattr[a]);
            if (cJSON_IsString(v)) proto->fattr[a] = strtod(v->valuestring, NULL);
        }
        /* a list attribute (reshape's shape, transpose's perm, sum_to's shape):
         * comma-separated integers, "" for the empty list */
        const cJSON *l = info->ilist ? cJSON_GetObjectItemCaseSensitive(m, info->ilist) : NULL;
        for (const char *p = cJSON_IsString(l) ? l->valuestring : ""; *p && proto->n_iattr < LRC_MAX_IATTR;) {
            char *end;
            long long v = strtoll(p, &end, 10);
            if (end == p) break; /* not a number: the shape rule then sees the short list */
            proto->iattr[proto->n_iattr++] = v;
            p = *end == ',' ? end + 1 : end;
        }
        rc = 0;
    }
    cJSON_Delete(m);
    return rc;
}

/* Whether input k of op is a state buffer (kv_attention's caches): the
 * compiled targets keep states inside the plan and start them at zero, so
 * a fixture's state inputs must hold zeros. */
static bool op_fixture_is_state(lrc_op op, int k) { return op == LRC_OP_KV_ATTENTION && (k == 3 || k == 4); }

/* The fixture f as a one-op graph: its in0.. as inputs (states where the op
 * needs them) and the op with the metadata's attributes. Returns the op's
 * node id, or -1 with err set; *want is the fixture's "out". */
static int op_fixture_graph(const lrc_tensor_set *f, lrc_graph *g, char *opname, size_t n, const lrc_tensor **want,
                            lrc_err *err)
{
    lrc_node proto = {0};
    *want = lrc_tensor_set_find(f, "out");
    if (!f->metadata_json || !*want || op_fixture_read(f->metadata_json, &proto, opname, n))
        return lrc_err_set(err, "no op metadata or no 'out'"), -1;
    proto.n_in = lrc_op_table[proto.op].n_in;
    if (proto.n_in < 0) { /* 1 to LRC_MAX_INPUTS (concat): as many in0.. as the fixture holds */
        char name[16] = "in0";
        for (proto.n_in = 0; proto.n_in < LRC_MAX_INPUTS && lrc_tensor_set_find(f, name);)
            snprintf(name, sizeof name, "in%d", ++proto.n_in);
    }
    if (!lrc_op_table[proto.op].ref) /* sources: nothing to run */
        return lrc_err_set(err, "%s is not an op a one-op graph can run", opname), -1;
    for (int k = 0; k < proto.n_in; k++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", k);
        const lrc_tensor *t = lrc_tensor_set_find(f, name);
        if (!t) return lrc_err_set(err, "missing %s", name), -1;
        if (op_fixture_is_state(proto.op, k)) {
            for (size_t i = 0; i < t->nbytes; i++)
                if (((const unsigned char *)t->data)[i])
                    return lrc_err_set(err, "%s is a state buffer: it must hold zeros", name), -1;
            proto.in[k] = lrc_graph_add_state(g, name, &t->shape, NULL, err);
        } else {
            proto.in[k] = lrc_graph_add_input(g, name, t->dtype, &t->shape, NULL, err);
        }
        if (proto.in[k] < 0) return -1;
    }
    int id = lrc_graph_add(g, &proto, err);
    char b1[96], b2[96];
    if (id >= 0 && !lrc_shape_eq(&g->nodes[id].shape, &(*want)->shape))
        return lrc_err_set(err, "the shape rule gives %s, the fixture %s", lrc_shape_str(&g->nodes[id].shape, b1, sizeof b1),
                           lrc_shape_str(&(*want)->shape, b2, sizeof b2)), -1;
    return id;
}

/* The fixture at path read into f and built as a one-op graph in a new *g:
 * the op's node id, or -1 with err set (*g NULL where the file did not
 * load, for the caller to say so and stop). */
static int op_fixture_open(const char *path, lrc_tensor_set *f, lrc_graph **g, char *opname, size_t n,
                           const lrc_tensor **want, lrc_err *err)
{
    *g = NULL;
    if (lrc_safetensors_load(path, f, err)) return -1;
    *g = lrc_graph_new();
    return op_fixture_graph(f, *g, opname, n, want, err);
}

/* Each elementwise op's inputs where its constants decide its value
 * (test_ops.c says why): test_ops holds ref and cpu to each op's
 * definition there, test_cuda_ops the cuda target to ref. */
typedef struct op_fixture_range {
    lrc_op op;
    double lo, hi; /* in0 uniform over [lo, hi]; a gradient's dy over [0.5, 1.5] */
} op_fixture_range;

static const op_fixture_range op_fixture_ranges[] = {
    {LRC_OP_GELU_TANH, -4, -1.5}, {LRC_OP_GELU_TANH_GRAD, -4, -1.5}, {LRC_OP_GELU, -3, -0.5},     {LRC_OP_GELU_GRAD, -3, -0.5},
    {LRC_OP_SILU, -8, -1},        {LRC_OP_SILU_GRAD, -8, -1},        {LRC_OP_SIGMOID, -12, -2},   {LRC_OP_SIGMOID_GRAD, 0.05, 0.95},
    {LRC_OP_TANH, -0.6, 0.6},     {LRC_OP_TANH, 0.7, 4},             {LRC_OP_TANH_GRAD, -0.95, 0.95},
    {LRC_OP_EXP, -10, 10},        {LRC_OP_SOFTPLUS, -15, -2},        {LRC_OP_SOFTPLUS, 2, 15},
};

/* ---- every elementwise op on random shapes with broadcasting ------------ */

/* How many random cases each elementwise op gets (op_fixture_random_ew). */
#define OP_FIXTURE_RANDOM_CASES 3

static uint32_t op_fixture_rand(uint32_t *seed)
{
    *seed = *seed * 1664525u + 1013904223u;
    return *seed >> 8;
}

/* Values for case `c` of op: multiples of 1/8 in [-2, 2] (ties, zeros and
 * both signs, so comparisons, where, maximum, sign and floor meet their
 * edges); positive ones in [1/4, 9/4] where the op's value would not be
 * finite (log, sqrt, pow, a divisor) */
static float op_fixture_value(uint32_t *seed, bool positive)
{
    int q = (int)(op_fixture_rand(seed) % 33);
    return positive ? (float)(2 + q % 17) / 8.0f : (float)(q - 16) / 8.0f;
}

/* out, from the inputs by the op's expression over the reference's
 * algebra, each input's element found from the output's index by numpy's
 * rules here (not by the reference kernel's odometer); false where a value
 * is not finite */
static bool op_fixture_eval(const lrc_node *n, const lrc_tensor *const *in, lrc_tensor *out)
{
    lrc_ew_alg A = {lrc_ew_ref_const, lrc_ew_ref_prims, NULL};
    bool finite = true;
    for (int64_t i = 0; i < lrc_shape_numel(&out->shape); i++) {
        lrc_ew_val x[LRC_MAX_INPUTS];
        for (int k = 0; k < n->n_in; k++) {
            const lrc_shape *s = &in[k]->shape;
            int64_t rest = i, at = 0, stride = 1;
            for (int d = out->shape.ndim - 1; d >= 0; d--) {
                int64_t idx = rest % out->shape.dim[d];
                rest /= out->shape.dim[d];
                int dk = s->ndim - out->shape.ndim + d;
                if (dk < 0) continue;
                if (s->dim[dk] > 1) at += idx * stride;
                stride *= s->dim[dk];
            }
            x[k].d = ((const float *)in[k]->data)[at];
        }
        double v = lrc_ew_eval(&A, n, x).d;
        finite = finite && isfinite(v);
        ((float *)out->data)[i] = (float)v;
    }
    return finite;
}

/* Case c of elementwise op as a fixture: an output of 1 to 4 axes (the last
 * one 1 to 19 long: vector bodies and scalar tails), each input a suffix of
 * it with some axes 1 (broadcast on every side), out from op_fixture_eval;
 * scale's s and full's shape and value in the metadata. */
static int op_fixture_random_ew(lrc_op op, int c, lrc_tensor_set *f, lrc_err *err)
{
    uint32_t seed = 0x5eed0000u + 131u * (uint32_t)op + 17u * (uint32_t)c;
    lrc_shape o = {1 + (int)(op_fixture_rand(&seed) % 4), {0}};
    for (int d = 0; d < o.ndim; d++) o.dim[d] = 1 + (int64_t)(op_fixture_rand(&seed) % (d == o.ndim - 1 ? 19 : 5));
    const int n_in = lrc_op_table[op].n_in;
    lrc_tensor *in[LRC_MAX_INPUTS] = {NULL};
    lrc_shape out = n_in ? (lrc_shape){0, {0}} : o;
    for (int k = 0; k < n_in; k++) {
        lrc_shape s = {(int)(op_fixture_rand(&seed) % (unsigned)(o.ndim + 1)), {0}};
        if (k == 0) s.ndim = o.ndim; /* the output keeps o's rank */
        for (int d = 0; d < s.ndim; d++) {
            int64_t od = o.dim[o.ndim - s.ndim + d];
            s.dim[d] = op_fixture_rand(&seed) % 3 == 0 ? 1 : od;
        }
        if (k > 0 && (lrc_ew_flags(op) & LRC_EW_GRAD_OP)) s = in[0]->shape; /* x and dy: one shape */
        char name[16];
        snprintf(name, sizeof name, "in%d", k);
        in[k] = lrc_tensor_new(name, LRC_F32, &s, err);
        for (int d = 0; d < o.ndim; d++) { /* the broadcast shape */
            int dk = s.ndim - o.ndim + d;
            int64_t sd = dk >= 0 ? s.dim[dk] : 1;
            out.ndim = o.ndim;
            if (k == 0 || sd > out.dim[d]) out.dim[d] = sd;
        }
    }
    lrc_node n = {.op = op, .n_in = n_in, .fattr = {-0.375}};
    lrc_tensor *want = lrc_tensor_new("out", LRC_F32, &out, err);
    for (int positive = 0; positive < 2; positive++) {
        for (int k = 0; k < n_in; k++)
            for (int64_t e = 0; e < lrc_shape_numel(&in[k]->shape); e++) ((float *)in[k]->data)[e] = op_fixture_value(&seed, positive);
        if (op == LRC_OP_FULL) n.fattr[0] = 1.25;
        if (op_fixture_eval(&n, (const lrc_tensor *const *)in, want)) break;
    }
    for (int k = 0; k < n_in; k++) lrc_tensor_set_add(f, in[k], err);
    lrc_tensor_set_add(f, want, err);
    char meta[256], dims[96] = "";
    for (int d = 0; d < o.ndim; d++) snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%lld", d ? "," : "", (long long)o.dim[d]);
    if (op == LRC_OP_FULL) snprintf(meta, sizeof meta, "{\"op\":\"full\",\"shape\":\"%s\",\"value\":\"1.25\"}", dims);
    else if (op == LRC_OP_SCALE) snprintf(meta, sizeof meta, "{\"op\":\"scale\",\"s\":\"-0.375\"}");
    else snprintf(meta, sizeof meta, "{\"op\":\"%s\"}", lrc_op_name(op));
    f->metadata_json = lrc_strdup(meta);
    return LRC_OK;
}

/* What a target cannot run as a one-op graph, said out loud at every run:
 * the fixture must fail with exactly this error (any other failure, or a
 * pass, fails the test, so that the list stays true). */
typedef struct op_fixture_exception {
    const char *target, *op, *error, *why;
} op_fixture_exception;

static const op_fixture_exception op_fixture_exceptions[] = {
    {NULL, NULL, NULL, NULL},
};

static const op_fixture_exception *op_fixture_excepted(const char *target, const char *op)
{
    for (const op_fixture_exception *e = op_fixture_exceptions; e->target; e++)
        if (!strcmp(e->target, target) && !strcmp(e->op, op)) return e;
    return NULL;
}

/* Ops no one-op fixture tests, said at every run with the reason. */
typedef struct op_fixture_untested {
    const char *op, *why;
} op_fixture_untested;

static const op_fixture_untested op_fixture_untested_ops[] = {
    {"input", "a source: nothing to compute"},
    {"param", "a source: nothing to compute"},
    {"state", "a source: nothing to compute"},
    /* a loop_state without its loop_next is no loop, and the back edge is
     * the executors' copies: the Parcae parity and gradient tests run both */
    {"loop_state", "half of a loop region; parity_parcae_* and grads_parcae_* run loops"},
    {"loop_next", "half of a loop region; parity_parcae_* and grads_parcae_* run loops"},
    {NULL, NULL},
};

/* After the fixtures: walks the op table (as ggml's test-backend-ops walks
 * its ops) with the target's supports_op, so that an op is tested on every
 * target by its table row alone. Every op the target supports must have had
 * a fixture (which passed, or failed as a listed exception: the counts
 * above say which), or be listed as untested with its reason; an op the
 * target's table says it cannot run is named. Returns the failures. */
static int op_fixture_walk(const char *target, bool (*supports)(lrc_op op))
{
    int bad = 0, untested = 0, unsupported = 0;
    for (int i = 0; i < LRC_OP_COUNT; i++) {
        const char *name = lrc_op_name((lrc_op)i), *why = NULL;
        for (const op_fixture_untested *u = op_fixture_untested_ops; u->op; u++)
            if (!strcmp(u->op, name)) why = u->why;
        if (why && op_fixture_ran[i]) {
            printf("FAIL op %-18s is listed as untested (\"%s\") but has %d fixtures: remove it from op_fixture.h's list\n", name,
                   why, op_fixture_ran[i]);
            bad++;
        } else if (why) {
            printf("UNTESTED op %-18s on %s: %s\n", name, target, why);
            untested++;
        } else if (!supports((lrc_op)i)) {
            printf("UNSUPPORTED op %-18s on %s: its per-op table has no kernel (%d fixtures, which must be listed exceptions)\n",
                   name, target, op_fixture_ran[i]);
            unsupported++;
        } else if (!op_fixture_ran[i]) {
            printf("FAIL op %-18s is supported on %s but no fixture tests it (tests/reference/op_fixtures.py)\n", name, target);
            bad++;
        }
    }
    printf("op table: %d ops, %d untested (listed), %d unsupported on %s\n", (int)LRC_OP_COUNT, untested, unsupported, target);
    return bad;
}

/* ||got - want|| / ||want|| over n floats (against 1 when want is zero) */
static double op_fixture_rel_error(const float *got, const float *want, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)got[i] - want[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    return sqrt(num) / (den > 0 ? sqrt(den) : 1);
}

/* The random elementwise cases' error: relative where the outputs are of
 * the inputs' size (about 1, op_fixture_value), absolute where they are
 * smaller, since f32 rounds the op's intermediate terms, not its result: a
 * gradient near its zero (gelu_tanh_grad at x = -0.75) has a relative
 * error of f32's rounding divided by its own smallness. */
static double op_fixture_random_error(const float *got, const lrc_tensor *want)
{
    int64_t n = lrc_shape_numel(&want->shape);
    double den = 0;
    for (int64_t i = 0; i < n; i++) den += (double)((const float *)want->data)[i] * ((const float *)want->data)[i];
    double rel = op_fixture_rel_error(got, want->data, n);
    return den < (double)n ? rel * sqrt(den) / sqrt((double)n) : rel;
}

/* What a fixture's result is judged by: the relative error for floats; for
 * integer results (topk's ids) exactness, 0 where every element is equal
 * and 1 where one is not. */
static double op_fixture_error(const void *got, const lrc_tensor *want)
{
    int64_t n = lrc_shape_numel(&want->shape);
    if (want->dtype != LRC_I32) return op_fixture_rel_error(got, want->data, n);
    for (int64_t i = 0; i < n; i++)
        if (((const int32_t *)got)[i] != ((const int32_t *)want->data)[i]) {
            printf("  element %lld: got %d, want %d\n", (long long)i, ((const int32_t *)got)[i], ((const int32_t *)want->data)[i]);
            return 1.0;
        }
    return 0.0;
}

#endif
