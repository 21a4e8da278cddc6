/* targets.c — the table of targets, the ref entry (the reference
 * interpreter runs graphs as they are), and a graph prepared on any
 * target through its entry and its executor (runtime/executors.c):
 * compiled, then made ready on the host. */
#include "lrc_compile.h"

#include <stdlib.h>
#include <string.h>

/* ref first: it is the commands' default target */
const lrc_target *const lrc_targets[] = {&lrc_target_ref, &lrc_target_cpu, &lrc_target_cuda};
const int lrc_n_targets = (int)(sizeof lrc_targets / sizeof lrc_targets[0]);

const lrc_target *lrc_target_find(const char *name)
{
    for (int i = 0; name && i < lrc_n_targets; i++)
        if (!strcmp(lrc_targets[i]->name, name)) return lrc_targets[i];
    return NULL;
}

const lrc_target *lrc_target_compiled(const lrc_target *t)
{
    return t && t->compiled_by ? lrc_target_find(t->compiled_by) : t;
}

const lrc_target *lrc_target_of_package(const char *dir)
{
    char name[16] = "";
    lrc_package_target(dir, name, sizeof name);
    /* as the loader reads it: a package that names no target known here runs as a cpu one */
    const lrc_target *t = lrc_target_find(name);
    return t && t->ex->open_host ? t : lrc_target_compiled(lrc_targets[0]);
}

static bool ref_supports(lrc_op op) { return lrc_op_table[op].ref != NULL; }

const lrc_target lrc_target_ref = {
    .name = "ref",
    .ex = &lrc_executor_ref,
    .supports_op = ref_supports,
    /* compiled code (lrc profile, lrc train) runs on the cpu in the default's place */
    .compiled_by = "cpu",
};

/* ---- a graph prepared on a target ------------------------------------------ */

int lrc_target_prepare(const lrc_target *t, lrc_graph *g, const lrc_target_opts *o, lrc_target_plan *p, lrc_err *err)
{
    memset(p, 0, sizeof *p);
    p->target = t;
    p->ex = t->ex;
    if (t->ex->open_host &&
        t->ex->open_host(&(lrc_exec_host_opts){.threads = (int)o->threads, .pool = o->pool}, &p->host, err)) {
        lrc_graph_free(g);
        return lrc_err_prefix(err, "--target %s", t->name), LRC_EUSER;
    }
    lrc_exec_source src = {.g = g};
    if (t->compile) {
        p->have_c = true;
        if (t->compile(g, o->consts, &(lrc_compile_opts){.f32 = o->f32}, &p->host, &p->c, err)) return LRC_EUSER;
        p->plan = &p->c.plan;
        src = (lrc_exec_source){.plan = &p->c.plan, .table = &p->c.cuda.table, .image = p->c.cubin};
    } else {
        p->g = g; /* the interpreter's now; consts: it reads parameters as they are bound */
    }
    return t->ex->create(&src, &p->host, &p->x, err) ? LRC_EUSER : LRC_OK;
}

int lrc_target_bind(lrc_target_plan *p, const lrc_tensor_set *params, lrc_err *err)
{
    return p->ex->bind(p->x, params, err) ? LRC_EUSER : LRC_OK;
}

int lrc_target_run(lrc_target_plan *p, const lrc_tensor_set *in, lrc_tensor_set *out, lrc_err *err)
{
    return p->ex->run(p->x, in, out, err) ? LRC_EUSER : LRC_OK;
}

int lrc_target_time(lrc_target_plan *p, int64_t repeat, double *median_ms, lrc_err *err)
{
    return p->ex->time(p->x, repeat, median_ms, err) ? LRC_EUSER : LRC_OK;
}

int lrc_target_train(lrc_target_plan *p, lrc_trainer *tr, lrc_err *err)
{
    return p->ex->train(p->x, &p->host, tr, err) ? LRC_EUSER : LRC_OK;
}

void lrc_target_plan_free(lrc_target_plan *p)
{
    if (p->x) p->ex->destroy(p->x);
    if (p->ex) lrc_exec_host_close(p->ex, &p->host);
    if (p->have_c && p->c.g) lrc_compiled_free(&p->c);
    lrc_graph_free(p->g);
    memset(p, 0, sizeof *p);
}
