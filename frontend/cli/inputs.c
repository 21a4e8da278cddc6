/* inputs.c — a run's inputs completed with what a package or a model adds
 * (a looped model's iterations and initial state); the model input itself
 * is checked by runtime/'s lrc_tokens_check. */
#include "cli_targets.h"
#include "engine.h"

#include <string.h>

/* The INPUT buffers of a plan, or of a graph's INPUT nodes, as cli_complete_inputs wants them. */
static int inputs_of_plan(const lrc_plan *p, lrc_plan_buf *out, int cap)
{
    int n = 0;
    for (int i = 0; i < p->n_bufs && n < cap; i++)
        if (p->bufs[i].kind == LRC_BUF_INPUT) out[n++] = p->bufs[i];
    return n;
}

int cli_package_inputs(const lrc_package *pkg, lrc_tensor_set *in, const char *path, lrc_err *err)
{
    lrc_plan_buf want[16];
    int n = 0, rc = LRC_OK;
    for (int i = 0; i < pkg->plan.n_bufs && n < 16; i++)
        if (pkg->plan.bufs[i].kind == LRC_BUF_INPUT) want[n++] = pkg->plan.bufs[i];
    /* a looped model runs its compile-time config's T unless the input gives "iterations" */
    for (int j = 0; j < n && pkg->iterations > 0 && !rc && !lrc_tensor_set_find(in, "iterations"); j++) {
        if (strcmp(want[j].name, "iterations") || want[j].shape.ndim != 1) continue;
        lrc_tensor *t = lrc_tensor_new("iterations", LRC_I32, &want[j].shape, err);
        if (!t) rc = LRC_EUSER;
        for (int64_t k = 0; t && k < want[j].shape.dim[0]; k++) ((int32_t *)t->data)[k] = (int32_t)pkg->iterations;
        if (t) rc = lrc_tensor_set_add(in, t, err);
    }
    return rc ? rc : lrc_model_complete_inputs(want, n, NULL, in, path, err);
}

int cli_engine_inputs(cli_engine *e, lrc_tensor_set *in, const char *path, lrc_err *err)
{
    if (e->is_package) return cli_package_inputs(&e->pkg, in, path, err);
    lrc_plan_buf want[16];
    return lrc_model_complete_inputs(want, inputs_of_plan(e->plan, want, 16), &e->model, in, path, err);
}

