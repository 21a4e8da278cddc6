/* cli_targets.c — the command line's table of targets and the ref entry:
 * what lrc forward of a model prints on the reference interpreter, and
 * what the entries share (cli_targets.h). */
#include "cli_targets.h"

#include <stdlib.h>
#include <string.h>

static const cli_target *const cli_targets[] = {&cli_target_ref, &cli_target_cpu, &cli_target_cuda};

const cli_target *cli_target_of(const lrc_target *t)
{
    for (size_t i = 0; t && i < sizeof cli_targets / sizeof cli_targets[0]; i++)
        if (cli_targets[i]->t == t) return cli_targets[i];
    return NULL;
}

static bool can(const lrc_target *t, lrc_target_can c)
{
    switch (c) {
    case LRC_TARGET_FORWARD_MODEL: return cli_target_of(t)->forward_model != NULL;
    case LRC_TARGET_PREPARE: return t->ex->create != NULL;
    case LRC_TARGET_TRAIN: return t->ex->train != NULL;
    case LRC_TARGET_COMPILE: return t->compile_package != NULL;
    default: return true;
    }
}

const char *cli_target_names(lrc_target_can c, const char *last, char *buf, size_t n)
{
    int total = 0, k = 0;
    for (int i = 0; i < lrc_n_targets; i++) total += can(lrc_targets[i], c);
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < lrc_n_targets && used < n; i++) {
        if (!can(lrc_targets[i], c)) continue;
        const char *sep = k == 0 ? "" : k == total - 1 ? last : ", ";
        used += (size_t)snprintf(buf + used, n - used, "%s%s", sep, lrc_targets[i]->name);
        k++;
    }
    return buf;
}

lrc_compile_opts cli_compile_opts(const cli_args *a)
{
    lrc_compile_opts o = {.arch = a->arch, .f32 = a->precision && !strcmp(a->precision, "f32"), .w_store = LRC_WSTORE_F32, .host = a->host};
    if (a->weights_dtype) lrc_wstore_parse(a->weights_dtype, &o.w_store); /* checked with the options */
    return o;
}

/* ---- ref ------------------------------------------------------------------ */

static void ref_report(void) { printf("target ref: available (the plain-C reference)\n"); }

/* lrc forward of a model on the interpreter: once, then --repeat timed
 * times (each a fresh set of outputs, kept only from the first run). */
static int ref_run_timed(const cli_args *a, lrc_target_plan *p, const lrc_tensor_set *in, lrc_tensor_set *outs, lrc_err *err)
{
    int rc = lrc_target_run(p, in, outs, err);
    if (rc || a->repeat <= 0) return rc;
    double *ms = lrc_xmalloc((size_t)a->repeat * sizeof(double));
    for (int64_t r = 0; r < a->repeat && !rc; r++) {
        lrc_tensor_set again;
        lrc_tensor_set_init(&again);
        double t0 = lrc_now_s();
        rc = lrc_target_run(p, in, &again, err);
        ms[r] = 1e3 * (lrc_now_s() - t0);
        lrc_tensor_set_clear(&again);
    }
    if (!rc) cli_print_times(a, ms, in, 1);
    free(ms);
    return rc;
}

static int ref_forward(const cli_args *a)
{
    lrc_err err;
    lrc_model m = {0};
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set in, wfile, params, outs;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&wfile);
    lrc_tensor_set_init(&params);
    lrc_tensor_set_init(&outs);
    lrc_target_plan p = {0};
    const lrc_tensor *tokens = NULL;
    lrc_plan_buf want[16];
    int64_t vocab = 0;
    int rc = EXIT_USER;
    if (cli_model_load("forward", &a->m, &m, &err) ||
        (m.task == LRC_TASK_LM && lrc_model_config_int(&m, "vocab", &vocab, &err)) || lrc_safetensors_load(a->input, &in, &err) ||
        lrc_tokens_check(&in, a->input, m.task == LRC_TASK_LM ? vocab : INT32_MAX, &tokens, &err) ||
        lrc_model_build(&m, tokens->shape.dim[0], tokens->dtype == LRC_I32 ? tokens->shape.dim[1] : 1, g, &err) ||
        lrc_model_complete_inputs(want, lrc_model_graph_inputs(g, want, 16), &m, &in, a->input, &err) ||
        lrc_safetensors_load(a->weights, &wfile, &err) || lrc_params_bind(g, &wfile, a->weights, &params, &err)) {
        cli_user_error(&err);
    } else {
        lrc_graph *taken = g; /* the plan's now */
        g = NULL;
        if (lrc_target_prepare(&lrc_target_ref, taken, &(lrc_target_opts){0}, &p, &err) || lrc_target_bind(&p, &params, &err) ||
            ref_run_timed(a, &p, &in, &outs, &err) || lrc_safetensors_save(a->out, &outs, &err))
            cli_user_error(&err);
        else rc = 0;
    }
    lrc_target_plan_free(&p);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&wfile);
    lrc_tensor_set_clear(&params);
    lrc_tensor_set_clear(&outs);
    lrc_graph_free(g);
    lrc_model_free(&m);
    return rc;
}

const cli_target cli_target_ref = {
    .t = &lrc_target_ref,
    .check = cli_target_f32_check,
    .report = ref_report,
    .forward_model = ref_forward,
    /* compiled code (lrc profile, lrc train) runs on the cpu in the default's place */
    .profile_command = cli_target_cpu_profile,
};
