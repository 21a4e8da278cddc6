/* cmd_cuda.c — lrc forward of a cuda package: the device checked against
 * the package's architecture (its cubin, or its PTX on a newer GPU), the
 * weights uploaded once, the tokens run once and then --repeat timed times
 * with the same "forward: median X ms" line as the cpu target. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static void *read_file(const char *path, lrc_err *err)
{
    FILE *f = fopen(path, "rb");
    size_t len;
    char *buf = f ? lrc_read_all(f, &len) : NULL; /* 0-terminated: PTX is text */
    if (f) fclose(f);
    if (!buf) lrc_err_set(err, "%s: cannot read", path);
    return buf;
}

int cli_forward_cuda(const cli_args *a)
{
    lrc_err err;
    lrc_package pkg;
    lrc_tensor_set in, outs, wfile;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&outs);
    lrc_tensor_set_init(&wfile);
    lrc_cuda_exec *x = NULL;
    void *image = NULL;
    int rc = lrc_package_load(a->m.model, &pkg, &err);
    if (rc) return cli_user_error(&err);
    cJSON *meta = cJSON_Parse(pkg.meta_json);
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(meta, "arch");
    int sm = cJSON_IsString(arch) ? atoi(arch->valuestring + 3) : 0;
    lrc_cuda_device dev;
    char why[256], path[4200];
    if (lrc_cuda_probe(&dev, why, sizeof why))
        rc = lrc_err_set(&err, "%s is compiled for cuda (sm_%d) and this machine cannot run it: %s", a->m.model, sm, why);
    else if (dev.sm < sm)
        rc = lrc_err_set(&err, "%s is compiled for sm_%d, and %s is sm_%d: compile it again with --arch sm_%d", a->m.model, sm,
                         dev.name, dev.sm, dev.sm);
    if (!rc) { /* the cubin for its own architecture; PTX, compiled by the driver, for a newer one */
        snprintf(path, sizeof path, "%s/%s", a->m.model, dev.sm == sm ? "kernels.cubin" : "kernels.ptx");
        image = read_file(path, &err);
        if (!image) rc = LRC_EUSER;
    }
    if (!rc && pkg.has_weights && a->weights)
        rc = lrc_err_set(&err, "%s holds its weights (folded at compile time): leave out --weights", a->m.model);
    if (!rc && !pkg.has_weights && !a->weights)
        rc = lrc_err_set(&err, "%s was compiled without weights: give them with --weights W", a->m.model);
    if (!rc && a->weights) rc = lrc_safetensors_load(a->weights, &wfile, &err);
    if (!rc) rc = lrc_cuda_exec_new(&pkg.plan, pkg.meta_json, image, &x, &err);
    if (!rc) rc = lrc_cuda_exec_bind_params(x, a->weights ? &wfile : &pkg.weights, &err);
    if (!rc && (rc = lrc_safetensors_load(a->input, &in, &err)) == LRC_OK && !(rc = cli_package_inputs(&pkg, &in, a->input, &err)))
        rc = lrc_cuda_exec_run(x, &in, &outs, &err);
    double med = 0; /* on the device: the launches of one forward, inputs already there */
    if (!rc && a->repeat > 0 && !(rc = lrc_cuda_exec_time(x, a->repeat, &med, &err))) {
        const lrc_tensor *tok = lrc_tensor_set_find(&in, "tokens");
        printf("forward: median %.3f ms over %lld runs, %.0f tokens/s, on %s (sm_%d; device time, copies not included)\n", med,
               (long long)a->repeat, tok ? (double)lrc_shape_numel(&tok->shape) / (med / 1e3) : 0, dev.name, dev.sm);
    }
    if (!rc) rc = lrc_safetensors_save(a->out, &outs, &err);
    if (!rc) printf("wrote %s\n", a->out);
    lrc_cuda_exec_free(x);
    free(image);
    cJSON_Delete(meta);
    lrc_package_free(&pkg);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&outs);
    lrc_tensor_set_clear(&wfile);
    return rc ? cli_user_error(&err) : 0;
}
