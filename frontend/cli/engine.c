/* engine.c — what forward, profile and generate share for the cpu target:
 * a model compiled just in time, or a package compiled ahead of time, with
 * its weights bound, a thread pool and a ready plan. */
#include "engine.h"
#include "cli_targets.h"

#include "../../codegen/llvm/lrc_llvm.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Weights given for a package: exactly its parameters, widened to f32
 * (shapes are checked when they are bound). */
static int package_weights(const char *pkg, const lrc_plan *plan, const char *path, lrc_tensor_set *w, lrc_err *err)
{
    int rc = lrc_safetensors_load(path, w, err);
    for (int i = 0; i < w->n && !rc; i++) {
        bool known = false;
        for (int b = 0; b < plan->n_bufs && !known; b++)
            known = plan->bufs[b].kind == LRC_BUF_PARAM && !strcmp(plan->bufs[b].name, w->items[i]->name);
        if (!known) rc = lrc_err_set(err, "%s: extra tensor '%s' that the package %s does not have", path, w->items[i]->name, pkg);
        else if (w->items[i]->dtype == LRC_I32)
            rc = lrc_err_set(err, "%s: tensor '%s' is I32, parameters are floats", path, w->items[i]->name);
        else if (w->items[i]->dtype != LRC_F32) {
            lrc_tensor *f = lrc_tensor_to_f32(w->items[i], err);
            if (!f) rc = LRC_EUSER;
            else {
                lrc_tensor_free(w->items[i]);
                w->items[i] = f;
            }
        }
    }
    return rc;
}

static int open_package(const cli_args *a, cli_engine *e, lrc_err *err)
{
    int rc = lrc_package_load(a->m.model, &e->pkg, err);
    if (rc) return rc;
    e->have_pkg = true;
    const lrc_target *t = lrc_target_find(e->pkg.target);
    if (t && t->device_package) /* the engine runs the host's plans; lrc forward takes device packages before they get here */
        return lrc_err_set(err, "%s is compiled for %s: only lrc forward runs %s packages yet", a->m.model, t->name, t->name);
    e->plan = &e->pkg.plan;
    e->vocab = e->pkg.vocab;
    rc = lrc_cpu_check_features(e->pkg.requires[0] ? e->pkg.requires : "avx2,fma", err);
    if (!rc && e->pkg.has_weights && a->weights)
        rc = lrc_err_set(err, "%s holds its weights (folded at compile time): leave out --weights", a->m.model);
    if (!rc && !e->pkg.has_weights && !a->weights)
        rc = lrc_err_set(err, "%s was compiled without weights: give them with --weights W", a->m.model);
    if (!rc && a->weights) rc = package_weights(a->m.model, e->plan, a->weights, &e->wfile, err);
    e->params = a->weights ? &e->wfile : &e->pkg.weights;
    if (!rc) {
        void *sym = lrc_package_symbol(&e->pkg, LRC_PEAK_SYMBOL);
        memcpy(&e->peak, &sym, sizeof sym);
    }
    return rc;
}

/* Builds the model for tokens [B, T] and compiles it with its weights. */
static int open_model(const cli_args *a, int64_t B, int64_t T, int64_t ctx, cli_engine *e, lrc_err *err)
{
    double t0 = (1e3 * lrc_now_s());
    lrc_graph *g = lrc_graph_new();
    int rc = lrc_model_load(&e->model, a->m.model, a->m.preset, a->m.sets, a->m.n_sets, err);
    e->have_model = true;
    if (!rc && ctx > 0 && e->model.task != LRC_TASK_LM)
        rc = lrc_err_set(err, "%s is an image model: lrc generate continues text with a language model", e->model.path);
    if (!rc && e->model.task == LRC_TASK_LM) rc = lrc_model_config_int(&e->model, "vocab", &e->vocab, err);
    if (!rc) rc = lrc_model_build(&e->model, B, T, g, err);
    lrc_pass_ctx decode = {.kv_cache_len = ctx}; /* the pipeline's first step; compiling runs the rest */
    if (!rc) rc = lrc_passes_run(&g, &decode, "kv_cache", err);
    e->build_ms = (1e3 * lrc_now_s()) - t0;
    if (!rc) rc = lrc_safetensors_load(a->weights, &e->wfile, err);
    if (!rc) rc = lrc_params_bind(g, &e->wfile, a->weights, &e->folded, err);
    if (rc) {
        lrc_graph_free(g);
        return rc;
    }
    lrc_tensor_set_clear(&e->wfile); /* bound copies in e->folded, which folding extends */
    e->have_comp = true;
    if ((rc = lrc_compile_graph(g, &e->folded, &e->comp, err))) return rc;
    e->plan = &e->comp.plan;
    e->params = &e->folded;
    e->peak = lrc_llvm_jit_lookup(e->comp.jit, LRC_PEAK_SYMBOL, err);
    return e->peak ? LRC_OK : LRC_EUSER;
}

static int engine_open(const cli_args *a, int64_t B, int64_t T, int64_t ctx, cli_engine *e, lrc_err *err);

int cli_engine_open(const cli_args *a, int64_t B, int64_t T, cli_engine *e, lrc_err *err)
{
    return engine_open(a, B, T, 0, e, err);
}

int cli_engine_open_decoder(const cli_args *a, int64_t T, int64_t ctx, cli_engine *e, lrc_err *err)
{
    return engine_open(a, 1, T, ctx, e, err);
}

static int engine_open(const cli_args *a, int64_t B, int64_t T, int64_t ctx, cli_engine *e, lrc_err *err)
{
    memset(e, 0, sizeof *e);
    lrc_tensor_set_init(&e->wfile);
    lrc_tensor_set_init(&e->folded);
    if (a->threads == 0 || a->threads < -1)
        return lrc_err_set(err, "--threads %lld: the thread count must be at least 1", (long long)a->threads);
    e->is_package = lrc_package_is(a->m.model);
    int rc = e->is_package ? open_package(a, e, err) : open_model(a, B, T, ctx, e, err);
    if (!rc) e->pool = lrc_pool_new(a->threads > 0 ? (int)a->threads : lrc_pool_default_threads(), err);
    if (!rc && !e->pool) rc = LRC_EUSER;
    if (!rc) rc = lrc_exec_new(e->plan, e->pool, &e->x, err);
    if (!rc) {
        rc = lrc_exec_bind_params(e->x, e->params, err);
        if (rc && a->weights) lrc_err_prefix(err, "%s", a->weights);
    }
    return rc;
}

void cli_engine_close(cli_engine *e)
{
    lrc_exec_free(e->x);
    lrc_pool_free(e->pool);
    if (e->have_comp) lrc_compiled_free(&e->comp);
    if (e->have_pkg) lrc_package_free(&e->pkg);
    if (e->have_model) lrc_model_free(&e->model);
    lrc_tensor_set_clear(&e->wfile);
    lrc_tensor_set_clear(&e->folded);
    memset(e, 0, sizeof *e);
}

double cli_engine_peak_flops_per_item(const cli_engine *e)
{
    /* packages record it in their plan's metadata; compiled models know it */
    return e->is_package ? e->pkg.peak_flops_per_item : lrc_peak_flops_per_item(&e->comp.prog.tiling);
}
