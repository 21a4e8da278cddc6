/* cmd_cuda.c — lrc profile of a cuda package: the device checked against
 * the package's architecture (its cubin, or its PTX on a newer GPU), the
 * weights uploaded once, the inputs run once, then every launch timed with
 * CUDA events against the device's ceilings measured now. (lrc forward runs
 * packages through the embedding API, runtime/lrc.h.) */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

int cli_cuda_open(const cli_args *a, cli_cuda_run *c, lrc_err *err)
{
    memset(c, 0, sizeof *c);
    lrc_tensor_set_init(&c->in);
    lrc_tensor_set_init(&c->wfile);
    int rc = lrc_package_load(a->m.model, &c->pkg, err);
    if (rc) return rc;
    c->have_pkg = true;
    int sm = c->pkg.arch[0] ? atoi(c->pkg.arch + 3) : 0; /* "sm_90" */
    char why[256];
    void *image = NULL;
    if (lrc_cuda_probe(&c->dev, why, sizeof why))
        rc = lrc_err_set(err, "%s is compiled for cuda (sm_%d) and this machine cannot run it: %s", a->m.model, sm, why);
    else if (c->dev.sm < sm)
        rc = lrc_err_set(err, "%s is compiled for sm_%d, and %s is sm_%d: compile it again with --arch sm_%d", a->m.model, sm,
                         c->dev.name, c->dev.sm, c->dev.sm);
    /* the cubin for its own architecture; PTX, compiled by the driver, for a newer one */
    if (!rc && !(image = lrc_package_cuda_image(a->m.model, c->dev.sm == sm, err))) rc = LRC_EUSER;
    if (!rc && c->pkg.has_weights && a->weights)
        rc = lrc_err_set(err, "%s holds its weights (folded at compile time): leave out --weights", a->m.model);
    if (!rc && !c->pkg.has_weights && !a->weights)
        rc = lrc_err_set(err, "%s was compiled without weights: give them with --weights W", a->m.model);
    if (!rc && a->weights) rc = lrc_safetensors_load(a->weights, &c->wfile, err);
    if (!rc) rc = lrc_cuda_exec_new(&c->pkg.plan, c->pkg.meta_json, image, &c->x, err);
    free(image);
    if (!rc) rc = lrc_cuda_exec_bind_params(c->x, a->weights ? &c->wfile : &c->pkg.weights, err);
    if (!rc && a->input && !(rc = lrc_safetensors_load(a->input, &c->in, err)))
        rc = cli_package_inputs(&c->pkg, &c->in, a->input, err);
    return rc;
}

void cli_cuda_close(cli_cuda_run *c)
{
    lrc_cuda_exec_free(c->x);
    if (c->have_pkg) lrc_package_free(&c->pkg);
    lrc_tensor_set_clear(&c->in);
    lrc_tensor_set_clear(&c->wfile);
}

int cli_profile_cuda(const cli_args *a, int64_t repeat, const char *trace)
{
    lrc_err err;
    cli_cuda_run c;
    lrc_tensor_set outs;
    lrc_tensor_set_init(&outs);
    int rc = cli_cuda_open(a, &c, &err);
    if (!rc) rc = lrc_cuda_exec_run(c.x, &c.in, &outs, &err); /* warm-up: the driver loads the kernels */
    const lrc_plan *plan = &c.pkg.plan;
    int n_launch = rc ? 0 : plan->n_launches;
    double *ns = lrc_xcalloc((size_t)n_launch + 1, sizeof(double)), copy = 0, gemm = 0;
    int64_t *calls = lrc_xcalloc((size_t)n_launch + 1, sizeof(int64_t)), n_ev = 0;
    /* a loop's body may run more often than once a run: room for 4 times the launches */
    int64_t cap = 4 * (int64_t)n_launch * repeat + 1;
    lrc_trace_event *ev = lrc_xmalloc((size_t)cap * sizeof *ev);
    if (!rc) {
        lrc_cuda_exec_profile(c.x, ns, calls);
        lrc_cuda_exec_trace(c.x, ev, cap, &n_ev);
    }
    for (int64_t r = 0; r < repeat && !rc; r++) rc = lrc_cuda_exec_run(c.x, &c.in, &outs, &err);
    if (!rc) {
        lrc_cuda_exec_profile(c.x, NULL, NULL);
        lrc_cuda_exec_trace(c.x, NULL, 0, NULL);
        rc = lrc_cuda_measure_ceilings(c.x, c.dev.memory_bytes, &copy, &gemm, &err);
    }
    int64_t *blocks = lrc_xcalloc((size_t)n_launch + 1, sizeof(int64_t));
    int *threads = lrc_xcalloc((size_t)n_launch + 1, sizeof(int)), *access = lrc_xcalloc((size_t)n_launch + 1, sizeof(int));
    for (int i = 0; i < n_launch; i++) {
        /* bytes as stored on the device: the plan (ours, loaded for this run) counts f32 */
        c.pkg.plan.launches[i].bytes = lrc_cuda_exec_bytes(c.x, i);
        lrc_cuda_exec_launch_shape(c.x, i, &blocks[i], &threads[i], &access[i]);
    }
    const cli_gpu_shapes shapes = {blocks, threads, access, c.dev.sms};
    if (!rc) rc = lrc_trace_write(trace, plan, ev, n_ev, &err);
    if (!rc) {
        printf("profile of %s: %lld runs on %s (sm_%d, %d SMs), CUDA events around every launch\n", a->m.model, (long long)repeat,
               c.dev.name, c.dev.sm, c.dev.sms);
        printf("ceilings measured now: %.1f GFLOP/s (bf16 cuBLAS GEMM), %.1f GB/s (device-to-device copy)\n", gemm, copy);
        cli_print_profile(plan, ns, calls, repeat, gemm, copy, &shapes);
        printf("trace %s (%lld events)\n", trace, (long long)n_ev);
    }
    free(ns);
    free(calls);
    free(ev);
    free(blocks);
    free(threads);
    free(access);
    cli_cuda_close(&c);
    lrc_tensor_set_clear(&outs);
    return rc ? cli_user_error(&err) : 0;
}
