/* test_grad_fd — the gradient rules against finite differences: for every
 * PyTorch fixture (every placement), the training graph runs on the reference
 * kernels with f64 storage (the op table's ref64), and every parameter's
 * gradient is checked two ways against central differences of the loss:
 *   - along a random ±1 direction over all of its entries (g·v), relative
 *     to |g|, so that every entry takes part;
 *   - at its two largest entries, each relative to itself.
 * Independent of PyTorch: these are the rules of ir/grad.c and
 * ir/ref_grad.c, checked against the forward ops alone.
 * Usage: test_grad_fd MODEL.lua FIXTURE_DIR... */
#include "check.h"
#include "frontend/lrc_frontend.h"
#include "runtime/lrc_runtime.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-4
#define STEP 1e-5 /* f64: rounding ~1e-15/STEP, truncation ~STEP^2, both far below TOL */

typedef struct run64 {
    const lrc_graph *g;
    const lrc_tensor_set *inputs; /* tokens and labels, I32 */
    double **param;               /* per node id: the PARAM's f64 values, else NULL */
    void **buf;                   /* per node id, after lrc_run64 */
} run64;

/* Runs every node on its ref64 kernel; buffers stay until the next run (tiny graphs). */
static int run64_exec(run64 *r, lrc_err *err)
{
    const lrc_graph *g = r->g;
    for (int id = 0; id < g->n_nodes; id++) {
        const lrc_node *n = &g->nodes[id];
        if (n->op != LRC_OP_PARAM) free(r->buf[id]);
        r->buf[id] = NULL;
    }
    for (int id = 0; id < g->n_nodes; id++) {
        const lrc_node *n = &g->nodes[id];
        size_t count = (size_t)lrc_shape_numel(&n->shape);
        if (n->op == LRC_OP_PARAM) {
            r->buf[id] = r->param[id];
            continue;
        }
        r->buf[id] = calloc(count ? count : 1, n->dtype == LRC_I32 ? 4 : 8);
        if (n->op == LRC_OP_INPUT) {
            const lrc_tensor *t = lrc_tensor_set_find(r->inputs, n->name);
            if (!t) return lrc_err_set(err, "missing input '%s'", n->name);
            memcpy(r->buf[id], t->data, count * 4);
            continue;
        }
        if (!lrc_op_table[n->op].ref64) return lrc_err_set(err, "op %s has no ref64 kernel", lrc_op_name(n->op));
        void *in[LRC_MAX_INPUTS];
        for (int k = 0; k < n->n_in; k++) in[k] = r->buf[n->in[k]];
        int rc = lrc_op_table[n->op].ref64(g, n, in, r->buf[id], err);
        if (rc) return rc;
    }
    return LRC_OK;
}

static double run64_loss(run64 *r)
{
    lrc_err err;
    int rc = run64_exec(r, &err);
    CHECK(!rc, "%s", err.msg);
    return rc ? NAN : *(const double *)r->buf[r->g->outputs[0]];
}

/* (L(p + h v) - L(p - h v)) / 2h, p restored afterwards */
static double central_diff(run64 *r, double *p, const double *v, int64_t count)
{
    for (int64_t i = 0; i < count; i++) p[i] += STEP * v[i];
    double up = run64_loss(r);
    for (int64_t i = 0; i < count; i++) p[i] -= 2 * STEP * v[i];
    double down = run64_loss(r);
    for (int64_t i = 0; i < count; i++) p[i] += STEP * v[i];
    return (up - down) / (2 * STEP);
}

static void run_case(const char *model, const char *dir, double *worst)
{
    char sets[32][128], path[1024], *argv[32];
    int n_sets = read_config_sets(dir, sets, argv, 32);
    const char *label = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
    lrc_err err;
    lrc_model m = {0};
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set in, wfile, params;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&wfile);
    lrc_tensor_set_init(&params);
    snprintf(path, sizeof path, "%s/input.safetensors", dir);
    int rc = lrc_safetensors_load(path, &in, &err);
    const lrc_tensor *tokens = rc ? NULL : lrc_tensor_set_find(&in, "tokens");
    int64_t B = tokens ? tokens->shape.dim[0] : 0, T = tokens ? tokens->shape.dim[1] : 0;
    if (!rc) { /* the labels `lrc backward` uses by default: the tokens shifted left */
        lrc_tensor *l = lrc_tensor_new("labels", LRC_I32, &tokens->shape, &err);
        for (int64_t i = 0; i < B * T; i++)
            ((int32_t *)l->data)[i] = (i + 1) % T ? ((const int32_t *)tokens->data)[i + 1] : -100;
        rc = lrc_tensor_set_add(&in, l, &err);
    }
    if (!rc) rc = lrc_model_load(&m, model, NULL, argv, n_sets, &err);
    if (!rc) rc = lrc_model_build_training(&m, B, T, g, &err);
    snprintf(path, sizeof path, "%s/weights.safetensors", dir);
    if (!rc) rc = lrc_safetensors_load(path, &wfile, &err);
    if (!rc) rc = lrc_params_bind(g, &wfile, path, &params, &err);
    CHECK(!rc, "%s: %s", label, err.msg);
    if (rc) goto out;

    run64 r = {.g = g, .inputs = &in};
    r.param = calloc((size_t)g->n_nodes, sizeof *r.param);
    r.buf = calloc((size_t)g->n_nodes, sizeof *r.buf);
    for (int id = 0; id < g->n_nodes; id++)
        if (g->nodes[id].op == LRC_OP_PARAM) {
            const lrc_tensor *t = lrc_tensor_set_find(&params, g->nodes[id].name);
            int64_t count = lrc_shape_numel(&t->shape);
            r.param[id] = malloc((size_t)count * sizeof(double));
            for (int64_t i = 0; i < count; i++) r.param[id][i] = ((const float *)t->data)[i];
        }
    CHECK(!run64_exec(&r, &err), "%s: %s", label, err.msg);
    /* the analytic gradients, copied: every finite difference reruns the graph */
    int n_out = g->n_outputs, checked = 0;
    double **grad = calloc((size_t)n_out, sizeof *grad), case_worst = 0;
    for (int o = 1; o < n_out; o++) {
        int64_t count = lrc_shape_numel(&g->nodes[g->outputs[o]].shape);
        grad[o] = malloc((size_t)count * sizeof(double));
        memcpy(grad[o], r.buf[g->outputs[o]], (size_t)count * sizeof(double));
    }
    lrc_rng rng;
    lrc_rng_seed(&rng, 20261130);
    for (int o = 1; o < n_out; o++) {
        int pid = -1;
        for (int id = 0; id < g->n_nodes && pid < 0; id++)
            if (g->nodes[id].op == LRC_OP_PARAM && !strcmp(g->nodes[id].name, g->output_names[o])) pid = id;
        CHECK(pid >= 0, "%s: gradient '%s' names no parameter", label, g->output_names[o]);
        if (pid < 0) continue;
        int64_t count = lrc_shape_numel(&g->nodes[pid].shape);
        double *v = calloc((size_t)count, sizeof *v), norm = 0, dot = 0;
        for (int64_t i = 0; i < count; i++) {
            v[i] = lrc_rng_uniform(&rng) < 0.5 ? -1 : 1;
            norm += grad[o][i] * grad[o][i];
            dot += grad[o][i] * v[i];
        }
        norm = sqrt(norm);
        double fd = central_diff(&r, r.param[pid], v, count);
        double rel = norm > 0 ? fabs(fd - dot) / norm : fabs(fd);
        CHECK(rel <= TOL, "%s: %s along a random direction: finite difference %.10g, gradient %.10g (relative %.2e)",
              label, g->output_names[o], fd, dot, rel);
        if (rel > case_worst) case_worst = rel;
        /* the two largest entries, one at a time */
        int64_t top[2] = {-1, -1};
        for (int64_t i = 0; i < count; i++) {
            if (top[0] < 0 || fabs(grad[o][i]) > fabs(grad[o][top[0]])) top[1] = top[0], top[0] = i;
            else if (top[1] < 0 || fabs(grad[o][i]) > fabs(grad[o][top[1]])) top[1] = i;
        }
        memset(v, 0, (size_t)count * sizeof *v);
        for (int pick = 0; pick < 2 && top[pick] >= 0; pick++) {
            int64_t at = top[pick];
            v[at] = 1;
            fd = central_diff(&r, r.param[pid], v, count);
            v[at] = 0;
            double want = grad[o][at];
            rel = want != 0 ? fabs(fd - want) / fabs(want) : fabs(fd);
            CHECK(rel <= TOL, "%s: %s[%lld]: finite difference %.10g, gradient %.10g (relative %.2e)", label,
                  g->output_names[o], (long long)at, fd, want, rel);
            if (rel > case_worst) case_worst = rel;
        }
        checked++;
        free(v);
    }
    printf("%s: %d parameters, worst relative error against finite differences %.2e\n", label, checked, case_worst);
    if (case_worst > *worst) *worst = case_worst;
    for (int o = 1; o < n_out; o++) free(grad[o]);
    free(grad);
    for (int id = 0; id < g->n_nodes; id++) {
        if (g->nodes[id].op != LRC_OP_PARAM) free(r.buf[id]);
        free(r.param[id]);
    }
    free(r.buf);
    free(r.param);
out:
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&wfile);
    lrc_tensor_set_clear(&params);
    lrc_graph_free(g);
    lrc_model_free(&m);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_grad_fd MODEL.lua FIXTURE_DIR...\n");
        return 2;
    }
    double worst = 0;
    for (int i = 2; i < argc; i++) run_case(argv[1], argv[i], &worst);
    printf("worst relative error against finite differences over all cases: %.2e (tolerance %.0e)\n", worst, TOL);
    return check_summary();
}
