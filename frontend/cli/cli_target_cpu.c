/* cli_target_cpu.c — the command line on the cpu target: lrc forward of a
 * model compiled now, lrc forward's rule for a cpu package, lrc profile on
 * this CPU, and lrc compile's summary line (the target itself:
 * frontend/compile/target_cpu.c). */
#include "engine.h"
#include "cli_targets.h"

#include "../../codegen/llvm/lrc_llvm.h"

#include <stdlib.h>
#include <string.h>

static int cpu_check(const char *cmd, const cli_args *a, lrc_err *err)
{
    if (!strcmp(cmd, "compile")) {
        if (a->arch) return lrc_err_set(err, "--arch is for --target cuda"), EXIT_USAGE;
        if (a->precision) return lrc_err_set(err, "--precision is for --target cuda (the cpu target computes in f32)"), EXIT_USAGE;
        return LRC_OK;
    }
    return cli_target_f32_check(cmd, a, err);
}

static void cpu_report(void)
{
    lrc_llvm_target t;
    lrc_err err;
    if (lrc_llvm_target_host(&t, &err)) printf("target cpu: not available: %s\n", err.msg);
    else printf("target cpu: available (%s, %d-float vectors, GEMM tile %dx%d)\n", t.triple, t.tiling.vec, t.tiling.mr,
                t.tiling.vec * t.tiling.nv);
}

/* ---- lrc forward --------------------------------------------------------- */

/* Runs plan x on in, once and then --repeat timed times; *outs gets the logits. */
static int run_timed(const cli_args *a, lrc_exec *x, lrc_pool *pool, const lrc_tensor_set *in, lrc_tensor_set *outs, lrc_err *err)
{
    int rc = lrc_exec_run_plan(x, in, outs, err);
    if (rc || a->repeat <= 0) return rc;
    double *ms = lrc_xmalloc((size_t)a->repeat * sizeof(double));
    /* steady state, as a serving loop runs: the outputs of one run are the
     * buffers of the next (every run still writes all of them) */
    for (int64_t r = 0; r < a->repeat && !rc; r++) {
        double t0 = lrc_now_s();
        rc = lrc_exec_run_plan(x, in, outs, err);
        ms[r] = 1e3 * (lrc_now_s() - t0);
    }
    if (!rc) cli_print_times(a, ms, in, lrc_pool_threads(pool));
    free(ms);
    return rc;
}

/* lrc forward of a MODEL compiled now (a package runs through the embedding API). */
static int cpu_forward(const cli_args *a)
{
    lrc_err err;
    lrc_tensor_set in, outs;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&outs);
    cli_engine e;
    memset(&e, 0, sizeof e);
    const lrc_tensor *tok = NULL;
    double *prof_ns = NULL;
    int64_t *prof_calls = NULL;
    int rc = lrc_safetensors_load(a->input, &in, &err);
    if (!rc) rc = lrc_tokens_check(&in, a->input, INT32_MAX, &tok, &err); /* ids: checked against the plan */
    if (!rc) rc = cli_engine_open(a, tok->shape.dim[0], tok->dtype == LRC_I32 ? tok->shape.dim[1] : 1, &e, &err);
    if (!rc) rc = cli_engine_inputs(&e, &in, a->input, &err);
    if (!rc) rc = lrc_plan_check_ids(e.plan, &in, &err); /* before anything is printed */
    if (!rc)
        printf("compile: %.1f ms (Lua to graph %.1f ms, passes %.1f ms, LLVM %.1f ms), kernels %d, arena %lld bytes\n"
               "llvm: %s\n",
               e.build_ms + e.comp.passes_ms + e.comp.codegen_ms, e.build_ms, e.comp.passes_ms, e.comp.codegen_ms,
               e.comp.sched.n_groups, (long long)e.comp.sched.arena_bytes,
               lrc_kcache_state_name((lrc_kcache_state)e.comp.kernel_cache));
    if (!rc && getenv("LRC_PROFILE")) { /* a developer's quick look; lrc profile is the tool */
        prof_ns = lrc_xcalloc((size_t)e.plan->n_launches + 1, sizeof(double));
        prof_calls = lrc_xcalloc((size_t)e.plan->n_launches + 1, sizeof(int64_t));
        lrc_exec_profile(e.x, prof_ns, prof_calls);
    }
    if (!rc && (rc = run_timed(a, e.x, e.pool, &in, &outs, &err))) lrc_err_prefix(&err, "%s", a->input);
    if (!rc) rc = lrc_safetensors_save(a->out, &outs, &err);
    if (prof_ns) cli_print_quick_profile(e.plan, prof_ns, prof_calls);
    free(prof_ns);
    free(prof_calls);
    cli_engine_close(&e);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&outs);
    return rc ? cli_user_error(&err) : 0;
}

/* A cpu package is compiled for its shapes and runs on this CPU alone. */
static int cpu_package_args(const cli_args *a)
{
    if (a->m.preset || a->m.n_sets)
        return cli_usage_error("forward", "%s is a compiled package: --preset and --set do not apply", a->m.model);
    const lrc_target *t = lrc_target_compiled(lrc_target_find(a->target));
    if (t != &lrc_target_cpu) return cli_usage_error("forward", "a package runs on the target it was compiled for (cpu)");
    return -1;
}

/* ---- lrc profile --------------------------------------------------------- */

int cli_target_cpu_profile(const cli_args *a, bool pkg, int64_t repeat, const char *trace)
{
    (void)pkg; /* the engine opens either */
    int rc = cli_check_run_args("profile", a, "--input", a->input != NULL);
    if (rc >= 0) return rc;
    lrc_err err;
    lrc_tensor_set in, outs;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&outs);
    cli_engine e;
    memset(&e, 0, sizeof e);
    const lrc_tensor *tok = NULL, *img = NULL;
    rc = lrc_safetensors_load(a->input, &in, &err);
    if (!rc && !(tok = lrc_tensor_set_find(&in, "tokens")) && !(img = lrc_tensor_set_find(&in, "images")))
        rc = lrc_err_set(&err, "%s: no tensor 'tokens' (I32 [B, T]) or 'images' (F32 [B, C, H, W])", a->input);
    if (!rc && tok && (tok->dtype != LRC_I32 || tok->shape.ndim != 2)) rc = lrc_err_set(&err, "%s: 'tokens' must be I32 [B, T]", a->input);
    if (!rc && img && (img->dtype != LRC_F32 || img->shape.ndim != 4))
        rc = lrc_err_set(&err, "%s: 'images' must be F32 [B, C, H, W]", a->input);
    if (!rc) rc = cli_engine_open(a, (tok ? tok : img)->shape.dim[0], tok ? tok->shape.dim[1] : 1, &e, &err);
    if (!rc) rc = cli_engine_inputs(&e, &in, a->input, &err);
    if (!rc && (rc = lrc_exec_run_plan(e.x, &in, &outs, &err))) lrc_err_prefix(&err, "%s", a->input); /* warm-up */
    int n_launch = rc ? 0 : e.plan->n_launches;
    double *ns = lrc_xcalloc((size_t)n_launch + 1, sizeof(double));
    int64_t *calls = lrc_xcalloc((size_t)n_launch + 1, sizeof(int64_t)), n_ev = 0;
    lrc_trace_event *ev = lrc_xmalloc(((size_t)n_launch * (size_t)repeat + 1) * sizeof *ev);
    if (!rc) {
        lrc_exec_profile(e.x, ns, calls);
        lrc_exec_trace(e.x, ev, (int64_t)n_launch * repeat, &n_ev);
    }
    for (int64_t r = 0; r < repeat && !rc; r++) rc = lrc_exec_run_plan(e.x, &in, &outs, &err); /* outputs reused */
    if (!rc) rc = lrc_trace_write(trace, e.plan, ev, n_ev, &err);
    if (!rc) {
        double fpi = cli_engine_peak_flops_per_item(&e);
        double peak = e.peak && fpi > 0 ? lrc_measure_peak_gflops(e.pool, e.peak, fpi) : 0;
        double bw = lrc_measure_copy_gbs(e.pool, (size_t)256 << 20);
        int per_run = 0;
        for (int i = 0; i < e.plan->n_launches; i++) per_run += !e.plan->launches[i].once;
        printf("profile of %s: %lld runs, %d threads, %d launches per run\n", a->m.model, (long long)repeat, lrc_pool_threads(e.pool),
               per_run);
        printf("ceilings measured now: %.1f GFLOP/s (FMA probe), %.1f GB/s (copy)\n", peak, bw);
        cli_print_profile(e.plan, ns, calls, repeat, peak, bw, NULL);
        printf("trace %s (%lld events)\n", trace, (long long)n_ev);
    }
    free(ns);
    free(calls);
    free(ev);
    cli_engine_close(&e);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&outs);
    return rc ? cli_user_error(&err) : 0;
}

static void cpu_compile_report(const lrc_model *m, const cli_args *a, const lrc_compiled *c)
{
    printf("llvm: %s\n", lrc_kcache_state_name((lrc_kcache_state)c->kernel_cache));
    if (a->ctx > 0)
        printf("compiled %s%s%s for cpu (%s, %s) as a decoder with a KV cache of %lld positions in %.0f ms\n", m->path,
               a->m.preset ? " preset " : "", a->m.preset ? a->m.preset : "", c->cpu_name, c->cpu_features, (long long)a->ctx,
               c->passes_ms + c->codegen_ms);
    else
        printf("compiled %s%s%s for cpu (%s, %s) at batch %lld x seq %lld in %.0f ms\n", m->path, a->m.preset ? " preset " : "",
               a->m.preset ? a->m.preset : "", c->cpu_name, c->cpu_features, (long long)a->batch, (long long)a->seq,
               c->passes_ms + c->codegen_ms);
}

const cli_target cli_target_cpu = {
    .t = &lrc_target_cpu,
    .check = cpu_check,
    .report = cpu_report,
    .forward_model = cpu_forward,
    .package_args = cpu_package_args,
    .package_host = true,
    .time_session = cli_target_host_time_session,
    .profile_command = cli_target_cpu_profile,
    .compile_report = cpu_compile_report,
};
