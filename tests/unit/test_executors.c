/* test_executors — the target seam: runtime/'s executor table and the
 * compile half's table of targets. Every executor has the hooks a caller
 * uses without asking (create, bind, run, destroy), names are unique, a
 * package of an unknown target runs on the first executor that runs
 * packages, and each target's entry names its executor. Then one graph,
 * prepared through lrc_target_prepare on every target this machine runs
 * (ref and cpu; cuda when a GPU answers), bound and run through the same
 * calls: the same values within 1e-6, and the failures of the seam (a
 * missing input; a cuda host without a GPU) are one-line errors. */
#include "check.h"
#include "frontend/compile/lrc_compile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_tables(void)
{
    for (int i = 0; i < lrc_n_executors; i++) {
        const lrc_executor_ops *e = lrc_executors[i];
        CHECK(e->name && e->create && e->bind && e->run && e->destroy, "executor %d lacks a hook every caller uses", i);
        CHECK(lrc_executor_find(e->name) == e, "executor '%s' found by its name", e->name);
        CHECK(!e->close_host || e->open_host, "executor '%s' closes a host it cannot open", e->name);
    }
    CHECK(lrc_executor_find("tpu") == NULL, "an unknown executor is NULL");
    CHECK(lrc_executor_for_package("cuda") == &lrc_executor_cuda, "a cuda package runs on cuda");
    CHECK(lrc_executor_for_package("cpu") == &lrc_executor_cpu, "a cpu package runs on cpu");
    /* as the loader reads a package.json without a target known here */
    CHECK(lrc_executor_for_package("tpu") == &lrc_executor_cpu, "an unknown package target runs on cpu");
    CHECK(lrc_executor_for_package("ref") == &lrc_executor_cpu, "ref runs no packages: cpu does");
    for (int i = 0; i < lrc_n_targets; i++) {
        const lrc_target *t = lrc_targets[i];
        CHECK(t->ex && !strcmp(t->ex->name, t->name), "target '%s' runs on its own executor", t->name);
        CHECK(lrc_target_find(t->name) == t, "target '%s' found by its name", t->name);
        CHECK(t->supports_op, "target '%s' says which ops it supports", t->name);
        CHECK(!t->compile_package || t->package_meta, "target '%s' writes packages with no meta", t->name);
        CHECK(!t->compile_package || t->ex->open_host, "target '%s' writes packages its executor cannot open", t->name);
    }
    CHECK(lrc_target_compiled(&lrc_target_ref) == &lrc_target_cpu, "ref's compiled code runs on cpu");
}

/* y = x * w + x, for x an input [2, 3] and w a parameter [3] */
static lrc_graph *small_graph(lrc_err *err)
{
    lrc_graph *g = lrc_graph_new();
    lrc_shape s = {2, {2, 3}}, sw = {1, {3}};
    int x = lrc_graph_add_input(g, "x", LRC_F32, &s, NULL, err);
    int w = lrc_graph_add_param(g, "w", &sw, (lrc_init){0}, NULL, NULL, err);
    lrc_node mul = {.op = LRC_OP_MUL, .n_in = 2, .in = {x, w}};
    int m = lrc_graph_add(g, &mul, err);
    lrc_node add = {.op = LRC_OP_ADD, .n_in = 2, .in = {m, x}};
    int y = m < 0 ? -1 : lrc_graph_add(g, &add, err);
    if (y < 0 || lrc_graph_add_output(g, "y", y, err) < 0) {
        lrc_graph_free(g);
        return NULL;
    }
    return g;
}

static lrc_tensor *filled(const char *name, lrc_shape s, float base)
{
    lrc_err err;
    lrc_tensor *t = lrc_tensor_new(name, LRC_F32, &s, &err);
    for (int64_t i = 0; i < lrc_shape_numel(&s); i++) ((float *)t->data)[i] = base + 0.25f * (float)i;
    return t;
}

static void test_prepare(void)
{
    lrc_err err;
    lrc_tensor_set in, params;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&params);
    lrc_tensor_set_add(&in, filled("x", (lrc_shape){2, {2, 3}}, -1.0f), &err);
    lrc_tensor_set_add(&params, filled("w", (lrc_shape){1, {3}}, 0.5f), &err);
    const float *x = in.items[0]->data, *w = params.items[0]->data;
    const lrc_target *ts[] = {&lrc_target_ref, &lrc_target_cpu};
    for (int k = 0; k < 2; k++) {
        lrc_target_plan p;
        lrc_tensor_set out;
        lrc_tensor_set_init(&out);
        lrc_graph *g = small_graph(&err);
        int rc = g ? lrc_target_prepare(ts[k], g, &(lrc_target_opts){.threads = 2}, &p, &err) : LRC_EUSER;
        CHECK(!rc, "%s: prepare: %s", ts[k]->name, err.msg);
        if (!rc) rc = lrc_target_bind(&p, &params, &err);
        if (!rc) rc = lrc_target_run(&p, &in, &out, &err);
        CHECK(!rc && out.n == 1, "%s: run: %s", ts[k]->name, rc ? err.msg : "");
        double worst = 0;
        for (int i = 0; !rc && out.n == 1 && i < 6; i++)
            worst = fmax(worst, fabs(((float *)out.items[0]->data)[i] - (x[i] * w[i % 3] + x[i])));
        CHECK(worst <= 1e-6, "%s: y off by %g", ts[k]->name, worst);
        CHECK(!p.host.device[0], "%s: runs on this CPU", ts[k]->name);
        CHECK((p.plan != NULL) == (ts[k]->compile != NULL), "%s: a plan exactly when compiled", ts[k]->name);
        /* a run without its input: one line naming it */
        lrc_tensor_set none;
        lrc_tensor_set_init(&none);
        rc = lrc_target_run(&p, &none, &out, &err);
        CHECK(rc && strstr(err.msg, "'x'") && !strchr(err.msg, '\n'), "%s: missing input: %s", ts[k]->name, err.msg);
        lrc_target_plan_free(&p);
        lrc_target_plan_free(&p); /* freed twice: zeroed, nothing left */
        lrc_tensor_set_clear(&out);
    }
    /* cuda: this machine's GPU, or one line saying why not */
    lrc_target_plan p;
    lrc_graph *g = small_graph(&err);
    int rc = lrc_target_prepare(&lrc_target_cuda, g, &(lrc_target_opts){0}, &p, &err);
    if (rc) CHECK(!strncmp(err.msg, "--target cuda: ", 15) && !strchr(err.msg, '\n'), "cuda without a GPU: %s", err.msg);
    else printf("cuda: a GPU answered (%s): prepared\n", p.host.device);
    lrc_target_plan_free(&p);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&params);
}

int main(void)
{
    test_tables();
    test_prepare();
    return check_summary();
}
