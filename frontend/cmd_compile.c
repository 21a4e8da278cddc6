/* cmd_compile.c — lrc compile: a model compiled ahead of time into a
 * package (kernels.so, package.json with the plan, and the folded weights
 * when given) that lrc forward runs with no Lua, LLVM or compilation. */
#include "targets.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

void cli_package_remove(const char *dir) { lrc_package_remove(dir); }

static char *package_meta(lrc_model *m, const cli_args *a, const lrc_target *t, const lrc_compiled *c, int64_t vocab)
{
    char *cfg = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&cfg, &len);
    lrc_model_print_config(m, f);
    fclose(f);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", m->path);
    cJSON_AddStringToObject(o, "preset", a->m.preset ? a->m.preset : "");
    cJSON_AddStringToObject(o, "config", cfg);
    lrc_err ignored;
    int64_t loop_T = 0;
    if (lrc_model_config_int(m, "T", &loop_T, &ignored)) loop_T = 0;
    cJSON_AddStringToObject(o, "target", t->name);
    t->package_meta(o, c); /* what the target's loader reads: its CPU or GPU, its launch table */
    if (a->ctx > 0) { /* a decoder: one token a step, KV caches of ctx positions */
        cJSON_AddNumberToObject(o, "batch", 1);
        cJSON_AddNumberToObject(o, "seq", 1);
        cJSON_AddNumberToObject(o, "ctx", (double)a->ctx);
    } else {
        cJSON_AddNumberToObject(o, "batch", (double)a->batch);
        cJSON_AddNumberToObject(o, "seq", (double)a->seq);
    }
    cJSON_AddNumberToObject(o, "vocab", (double)vocab); /* an image model: its classes */
    if (lrc_graph_find(c->g, LRC_OP_INPUT, "iterations") >= 0 && loop_T > 0) /* a looped model's default count */
        cJSON_AddNumberToObject(o, "iterations", (double)loop_T);
    cJSON_AddNumberToObject(o, "kernels", c->sched.n_groups);
    cJSON_AddStringToObject(o, "compiled_by", "lrc " LRC_VERSION);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    free(cfg);
    return s;
}

int cli_compile_package(const cli_args *a)
{
    const lrc_target *target = lrc_target_find(a->target);
    lrc_err err;
    char names[128];
    if (!target || !target->compile_package) {
        lrc_err_set(&err, "--target %s: unknown target (lrc compiles for %s)", a->target,
                    lrc_target_names(LRC_TARGET_COMPILE, " and ", names, sizeof names));
        return cli_user_error(&err);
    }
    int bad = target->check("compile", a, &err); /* the options this target takes */
    if (bad) return bad == EXIT_USAGE ? cli_usage_error("compile", "%s", err.msg) : cli_user_error(&err);
    lrc_package_writer w;
    if (lrc_package_begin(&w, a->out, target->device_package, &err)) return cli_user_error(&err);
    lrc_model m = {0};
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set wfile, params, keep;
    int64_t kept_bytes = 0;
    int kept = 0;
    lrc_tensor_set_init(&wfile);
    lrc_tensor_set_init(&params);
    lrc_tensor_set_init(&keep);
    lrc_compiled c;
    memset(&c, 0, sizeof c);
    int64_t vocab = 0;
    int rc = EXIT_USER;
    lrc_pass_ctx decode = {.kv_cache_len = a->ctx};
    if (lrc_model_load(&m, a->m.model, a->m.preset, a->m.sets, a->m.n_sets, &err) ||
        lrc_model_config_int(&m, m.task == LRC_TASK_IMAGE ? "n_classes" : "vocab", &vocab, &err) ||
        lrc_model_build(&m, a->ctx > 0 ? 1 : a->batch, a->ctx > 0 ? 1 : a->seq, g, &err) ||
        lrc_passes_run(&g, &decode, "kv_cache", &err) || /* the pipeline's first step; compiling runs the rest */
        (a->weights && (lrc_safetensors_load(a->weights, &wfile, &err) ||
                        lrc_params_bind(g, &wfile, a->weights, &params, &err)))) {
        lrc_graph_free(g);
        cli_user_error(&err);
        goto done;
    }
    lrc_tensor_set_clear(&wfile); /* params holds its own f32 copies: a 1b's 5 GB less */
    if (target->compile_package(g, a->weights ? &params : NULL, a, &w, &c, &err)) { /* the kernels into the package */
        cli_user_error(&err);
        goto done;
    }
    rc = LRC_OK;
    if (a->weights) {
        /* only what the plan reads: the folded weights, not the originals;
         * keep borrows params' tensors (no copy of a 1b's gigabytes), each
         * as the target stores it */
        for (int i = 0; i < c.plan.n_bufs && !rc; i++)
            if (c.plan.bufs[i].kind == LRC_BUF_PARAM && !lrc_tensor_set_find(&keep, c.plan.bufs[i].name)) {
                lrc_tensor *t = lrc_tensor_set_find(&params, c.plan.bufs[i].name);
                if (target->package_weight) target->package_weight(&c, i, t);
                rc = lrc_tensor_set_add(&keep, t, &err);
            }
        if (!rc) rc = lrc_package_write_weights(&w, &keep, &err);
        for (int i = 0; i < keep.n; i++) kept_bytes += (int64_t)keep.items[i]->nbytes;
        kept = keep.n;
        keep.n = 0; /* borrowed: cleared without freeing the tensors */
    }
    char *meta = rc ? NULL : package_meta(&m, a, target, &c, vocab);
    if (!rc) rc = lrc_package_finish(&w, &c.plan, meta, &err); /* package.json, then the directory moved into place */
    free(meta);
    if (rc) {
        cli_user_error(&err);
        rc = EXIT_USER;
        goto done;
    }
    target->compile_report(&m, a, &c);
    printf("kernels %d\n", c.sched.n_groups);
    printf("functions %d (launches of equal structure share code)\n", target->functions(&c));
    printf("arena %lld bytes\n", (long long)c.sched.arena_bytes);
    printf("peak of live intermediates %lld bytes (arena / peak = %.3f)\n", (long long)c.sched.peak_bytes,
           c.sched.peak_bytes ? (double)c.sched.arena_bytes / (double)c.sched.peak_bytes : 1.0);
    if (a->weights) printf("weights %lld bytes (%d tensors, gains folded)\n", (long long)kept_bytes, kept);
    else printf("weights not included: give them with lrc forward %s --weights W\n", a->out);
    printf("package %s\n", a->out);
    rc = 0;
done:
    lrc_package_abort(&w); /* nothing once finished */
    lrc_compiled_free(&c);
    lrc_tensor_set_clear(&wfile);
    lrc_tensor_set_clear(&params);
    lrc_tensor_set_clear(&keep);
    lrc_model_free(&m);
    return rc;
}

int cmd_compile(int argc, char **argv)
{
    static const struct option opts[] = {MODEL_OPTS,
                                         {"target", required_argument, 0, OPT_TARGET},
                                         {"weights", required_argument, 0, OPT_WEIGHTS},
                                         {"batch", required_argument, 0, OPT_BATCH},
                                         {"seq", required_argument, 0, OPT_SEQ},
                                         {"ctx", required_argument, 0, OPT_CTX},
                                         {"arch", required_argument, 0, OPT_ARCH},
                                         {"precision", required_argument, 0, OPT_PRECISION},
                                         {0, 0, 0, 0}};
    static const char *help =
        "usage: lrc compile MODEL [--preset P] [--set KEY=VALUE]... --target cpu|cuda [--arch sm_XX] [--weights W]\n"
        "                   [--precision bf16|f32] [--batch B] [--seq T | --ctx C] -o PKG\n"
        "\n"
        "Compiles the model ahead of time for tokens [B, T] into the package directory\n"
        "PKG: kernels.so (native code for this CPU), package.json (the plan) and, with\n"
        "--weights, the weights with LayerRoPE gains and norm weights folded in.\n"
        "lrc forward PKG runs it with no Lua, LLVM or compilation.\n"
        "\n"
        "  --preset P        a preset of the model\n"
        "  --set KEY=VALUE   override one config key (repeatable; after the preset)\n"
        "  --target T        cpu (native code for this CPU, kernels.so) or cuda (CUDA C\n"
        "                    compiled by NVRTC: kernels.cu, kernels.cubin, kernels.ptx;\n"
        "                    no GPU needed)\n"
        "  --arch sm_XX      the GPU architecture for cuda (default sm_90)\n"
        "  --precision P     cuda: bf16 (default) or f32 storage of activations and\n"
        "                    weight matrices; both accumulate in f32\n"
        "  --weights FILE    freeze these weights into the package (folding gains)\n"
        "  --batch B         batch size (default 1)\n"
        "  --seq T           sequence length (default 256)\n"
        "  --ctx C           compile a decoder for lrc generate instead: one token a\n"
        "                    step with KV caches of C positions\n"
        "  -o PKG            the package directory to write (replaced if it is a package)\n";
    cli_args a;
    int rc = cli_parse_args("compile", argc, argv, opts, help, true, &a);
    if (a.batch == 0) a.batch = 1;
    if (rc < 0) {
        if (!a.out) rc = cli_usage_error("compile", "missing -o PKG");
        else rc = cli_compile_package(&a);
    }
    cli_model_opts_free(&a.m);
    return rc;
}
