/* cmd_backward.c — lrc backward: the loss and the gradient of every
 * parameter for a batch, by reverse mode over the IR (ir/passes/autodiff.c),
 * on any target of the table that prepares plans. */
#include "cli_targets.h"

#include <stdlib.h>
#include <string.h>

/* tokens I32 [B, T], and labels I32 [B, T] (given, or the tokens shifted
 * left with the last position ignored). */
static int read_batch(const char *path, lrc_tensor_set *in, int64_t vocab, lrc_err *err)
{
    char b[96];
    if (lrc_safetensors_load(path, in, err)) return LRC_EUSER;
    /* other tensors are the model's other inputs (lrc.input), checked once it is built */
    const lrc_tensor *t = lrc_tensor_set_find(in, "tokens"), *l = lrc_tensor_set_find(in, "labels");
    if (!t || t->dtype != LRC_I32 || t->shape.ndim != 2 || t->shape.dim[0] < 1 || t->shape.dim[1] < 1)
        return lrc_err_set(err, "%s: needs 'tokens' I32 [B, T]", path);
    if (l && (l->dtype != LRC_I32 || !lrc_shape_eq(&l->shape, &t->shape)))
        return lrc_err_set(err, "%s: 'labels' is %s %s, expected I32 %s like 'tokens'", path, lrc_dtype_st_name(l->dtype),
                           lrc_shape_str(&l->shape, b, sizeof b), lrc_shape_str(&t->shape, (char[96]){0}, 96));
    int64_t B = t->shape.dim[0], T = t->shape.dim[1];
    for (int64_t i = 0; i < B * T; i++) {
        int32_t v = ((const int32_t *)t->data)[i], y = l ? ((const int32_t *)l->data)[i] : 0;
        if (v < 0 || v >= vocab)
            return lrc_err_set(err, "%s: tokens[%lld,%lld] = %d is outside the vocabulary [0, %lld)", path,
                               (long long)(i / T), (long long)(i % T), v, (long long)vocab);
        if (l && y != -100 && (y < 0 || y >= vocab))
            return lrc_err_set(err, "%s: labels[%lld,%lld] = %d is outside [0, %lld) and not -100", path,
                               (long long)(i / T), (long long)(i % T), y, (long long)vocab);
    }
    if (!l) {
        lrc_tensor *nl = lrc_tensor_new("labels", LRC_I32, &t->shape, err);
        if (!nl) return LRC_EUSER;
        for (int64_t i = 0; i < B * T; i++)
            ((int32_t *)nl->data)[i] = i % T == T - 1 ? -100 : ((const int32_t *)t->data)[i + 1];
        return lrc_tensor_set_add(in, nl, err);
    }
    return LRC_OK;
}

/* images F32 [B, C, H, W] and labels I32 [B] in [0, n_classes) or -100 */
static int read_image_batch(const char *path, lrc_tensor_set *in, int64_t n_classes, lrc_err *err)
{
    char b[96];
    if (lrc_safetensors_load(path, in, err)) return LRC_EUSER;
    const lrc_tensor *t = lrc_tensor_set_find(in, "images"), *l = lrc_tensor_set_find(in, "labels");
    if (!t || t->dtype != LRC_F32 || t->shape.ndim != 4)
        return lrc_err_set(err, "%s: needs 'images' F32 [B, C, H, W]", path);
    if (!l || l->dtype != LRC_I32 || l->shape.ndim != 1 || l->shape.dim[0] != t->shape.dim[0])
        return lrc_err_set(err, "%s: needs 'labels' I32 [%lld]%s%s", path, (long long)t->shape.dim[0], l ? ", got " : "",
                           l ? lrc_shape_str(&l->shape, b, sizeof b) : "");
    for (int64_t i = 0; i < l->shape.dim[0]; i++) {
        int32_t y = ((const int32_t *)l->data)[i];
        if (y != -100 && (y < 0 || y >= n_classes))
            return lrc_err_set(err, "%s: labels[%lld] = %d is outside [0, %lld) and not -100", path, (long long)i, y,
                               (long long)n_classes);
    }
    return LRC_OK;
}

int cmd_backward(int argc, char **argv)
{
    static const struct option opts[] = {MODEL_OPTS,
                                         {"weights", required_argument, 0, OPT_WEIGHTS},
                                         {"input", required_argument, 0, OPT_INPUT},
                                         {"target", required_argument, 0, OPT_TARGET},
                                         {"precision", required_argument, 0, OPT_PRECISION},
                                         {"threads", required_argument, 0, OPT_THREADS},
                                         {"repeat", required_argument, 0, OPT_REPEAT},
                                         {0, 0, 0, 0}};
    static const char *help =
        "usage: lrc backward MODEL [--preset P] [--set KEY=VALUE]... --weights W.safetensors\n"
        "                    --input IN.safetensors -o GRADS.safetensors [--target ref|cpu|cuda]\n"
        "                    [--precision bf16|f32] [--threads N] [--repeat N]\n"
        "\n"
        "The next-token cross-entropy of the batch and its gradient with respect to\n"
        "every parameter. IN holds 'tokens' (I32 [B, T]) and optionally 'labels'\n"
        "(I32 [B, T], -100 ignored; by default the tokens shifted left, the last\n"
        "position ignored); for an image model, 'images' (F32 [B, C, H, W]) and\n"
        "'labels' (I32 [B]), the loss then the classes' cross-entropy. IN also holds\n"
        "the model's other inputs (lrc.input); one with a declared default may be left out.\n"
        "GRADS receives 'loss' (F32 scalar) and one tensor per parameter, named as the\n"
        "parameter.\n"
        "\n" MODEL_HELP
        "  --target NAME     ref (default), cpu (the training graph compiled through LLVM)\n"
        "                    or cuda (the same graph as CUDA C through NVRTC, on GPU 0)\n"
        "  --precision P     cuda: bf16 (default) or f32 storage of activations and\n"
        "                    weight matrices; both accumulate in f32\n"
        "  --threads N       cpu: threads (default: all cores)\n"
        "  --repeat N        cuda: then time N runs of the kernels on the device\n";
    cli_args a;
    int rc = cli_parse_args("backward", argc, argv, opts, help, true, &a);
    if (rc >= 0) goto out;
    if (!a.weights || !a.input || !a.out) {
        rc = cli_usage_error("backward", "needs --weights, --input and -o");
        goto out;
    }
    lrc_err err;
    lrc_model m = {0};
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set in, wfile, params, outs;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&wfile);
    lrc_tensor_set_init(&params);
    lrc_tensor_set_init(&outs);
    int64_t vocab = 0;
    const lrc_tensor *tok = NULL;
    rc = LRC_OK;
    const lrc_target *t = lrc_target_find(a.target);
    char names[128];
    if (!t)
        rc = lrc_err_set(&err, "--target %s: gradients run on the %s targets", a.target,
                         cli_target_names(LRC_TARGET_PREPARE, " and ", names, sizeof names));
    if (!rc && cli_target_of(t)->check("backward", &a, &err)) rc = LRC_EUSER; /* its options, and the device it needs */
    if (a.threads == 0 || a.threads < -1) rc = lrc_err_set(&err, "--threads %lld: the thread count must be at least 1", (long long)a.threads);
    if (!rc) rc = lrc_model_load(&m, a.m.model, a.m.preset, a.m.sets, a.m.n_sets, &err);
    bool images = !rc && m.task == LRC_TASK_IMAGE;
    if (!rc) rc = lrc_model_config_int(&m, images ? "n_classes" : "vocab", &vocab, &err);
    if (!rc) rc = images ? read_image_batch(a.input, &in, vocab, &err) : read_batch(a.input, &in, vocab, &err);
    if (!rc) tok = lrc_tensor_set_find(&in, images ? "images" : "tokens");
    if (!rc) rc = lrc_model_build_training(&m, tok->shape.dim[0], images ? 1 : tok->shape.dim[1], g, &err);
    lrc_plan_buf want[16];
    if (!rc) rc = lrc_model_complete_inputs(want, lrc_model_graph_inputs(g, want, 16), &m, &in, a.input, &err);
    if (!rc) rc = lrc_safetensors_load(a.weights, &wfile, &err);
    if (!rc) rc = lrc_params_bind(g, &wfile, a.weights, &params, &err);
    /* the training graph prepared like any graph on the target (a device's
     * for its architecture); parameters stay variables */
    lrc_target_plan p = {0};
    if (!rc) {
        rc = lrc_target_prepare(t, g, &(lrc_target_opts){.threads = a.threads, .f32 = a.precision && !strcmp(a.precision, "f32")}, &p, &err);
        g = NULL;
    }
    if (!rc) rc = lrc_target_bind(&p, &params, &err);
    if (!rc) rc = lrc_target_run(&p, &in, &outs, &err);
    double ms = 0;
    if (!rc && a.repeat > 0 && p.ex->time && !(rc = lrc_target_time(&p, a.repeat, &ms, &err)))
        printf("backward: median %.3f ms over %lld runs (forward, loss and gradients on %s, sm_%d; device time)\n", ms,
               (long long)a.repeat, p.host.device, p.host.sm);
    if (!rc && a.repeat > 0 && p.ex->time && p.ex->profile && getenv("LRC_PROFILE")) { /* a developer's look at the step's kernels */
        double *ns = lrc_xcalloc((size_t)p.plan->n_launches + 1, sizeof(double));
        int64_t *calls = lrc_xcalloc((size_t)p.plan->n_launches + 1, sizeof(int64_t));
        p.ex->profile(p.x, ns, calls); /* events around every launch: timed apart from the median above */
        if (!(rc = lrc_target_time(&p, a.repeat, &ms, &err))) cli_print_quick_profile(p.plan, ns, calls);
        p.ex->profile(p.x, NULL, NULL);
        free(ns);
        free(calls);
    }
    if (!rc) rc = lrc_safetensors_save(a.out, &outs, &err);
    const lrc_tensor *loss = rc ? NULL : lrc_tensor_set_find(&outs, "loss");
    if (loss) printf("loss %.6f, gradients of %d parameters written to %s\n", ((float *)loss->data)[0], outs.n - 1, a.out);
    rc = rc ? cli_user_error(&err) : 0;
    lrc_target_plan_free(&p);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&wfile);
    lrc_tensor_set_clear(&params);
    lrc_tensor_set_clear(&outs);
    lrc_graph_free(g);
    lrc_model_free(&m);
out:
    cli_model_opts_free(&a.m);
    return rc;
}
