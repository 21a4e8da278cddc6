/* commands.c — lrc inspect, init, forward and demo. */
#include "cli.h"
#include "../compile/lrc_compile.h"
#include "engine.h"
#include "cli_session.h"
#include "cli_targets.h"


#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- inspect ----------------------------------------------------------- */

static void print_params(const lrc_graph *g)
{
    const char *groups[64];
    int64_t counts[64];
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const lrc_node *p = &g->nodes[i];
        if (p->op != LRC_OP_PARAM) continue;
        const char *grp = p->group ? p->group : "other";
        int k = 0;
        while (k < n && strcmp(groups[k], grp)) k++;
        if (k == n && n < 64) {
            groups[n] = grp;
            counts[n++] = 0;
        }
        if (k < n) counts[k] += lrc_shape_numel(&p->shape);
    }
    for (int k = 0; k < n; k++) printf("%-12s %12lld\n", groups[k], (long long)counts[k]);
    printf("total %lld\n", (long long)lrc_graph_param_count(g));
}

/* Runs the pipeline on g, up to `after` (all when NULL); the schedule's
 * passes build the kernel groups and the memory plan. With weights,
 * parameters are constants and gains fold. */
static int optimize(lrc_graph **g, lrc_tensor_set *consts, const lrc_target *t, int64_t kv_cache_len, bool last_rows,
                    const char *after, lrc_schedule *s, bool *have_schedule, lrc_err *err)
{
    lrc_pass_ctx ctx = {.consts = consts, .kv_cache_len = kv_cache_len, .last_rows = last_rows, .schedule = s};
    if (t->pass_rules) t->pass_rules(&ctx);
    int rc = lrc_passes_run(g, &ctx, after, err);
    *have_schedule = ctx.scheduled;
    return rc;
}

/* Forward and training FLOPs per token (per image for an image model). */
static void print_flops(lrc_model *m, const lrc_graph *g, int64_t B, int64_t T)
{
    double bwd, fwd = lrc_graph_flops(g, &bwd), tokens = (double)(B * T);
    if (m->task == LRC_TASK_IMAGE) {
        printf("forward_flops_per_image  %.6g\n", fwd / (double)B);
        printf("training_flops_per_image %.6g  (forward + backward)\n", (fwd + bwd) / (double)B);
    } else {
        /* a loop's body is in the graph once and runs T times */
        double body = 0;
        int64_t loop_T = 0;
        lrc_err ignored;
        for (int id = 0; id < g->n_nodes; id++)
            if (g->nodes[id].op == LRC_OP_LOOP_NEXT)
                for (int j = g->nodes[id].in[0] + 1; j < id; j++) body += lrc_op_table[g->nodes[j].op].flops(g, &g->nodes[j]);
        if (body > 0 && !lrc_model_config_int(m, "T", &loop_T, &ignored) && loop_T > 1) fwd += (double)(loop_T - 1) * body;
        printf("forward_flops_per_token  %.6g  (T=%lld)\n", fwd / tokens, (long long)T);
        printf("training_flops_per_token %.6g  (forward + backward)\n", (fwd + bwd) / tokens);
        if (body > 0)
            printf("loop_flops_per_token     %.6g  per iteration; the forward counts %lld iterations (config T)\n",
                   body / tokens, (long long)(loop_T > 0 ? loop_T : 1));
    }
}

int cmd_inspect(int argc, char **argv)
{
    static const struct option opts[] = {MODEL_OPTS,
                                         {"params", no_argument, 0, OPT_PARAMS},
                                         {"flops", no_argument, 0, OPT_FLOPS},
                                         {"ir", no_argument, 0, OPT_IR},
                                         {"after", required_argument, 0, OPT_AFTER},
                                         {"kernels", no_argument, 0, OPT_KERNELS},
                                         {"weights", required_argument, 0, OPT_WEIGHTS},
                                         {"target", required_argument, 0, OPT_TARGET},
                                         {"seq", required_argument, 0, OPT_SEQ},
                                         {"batch", required_argument, 0, OPT_BATCH},
                                         {"ctx", required_argument, 0, OPT_CTX},
                                         {"logits", required_argument, 0, OPT_LOGITS},
                                         {0, 0, 0, 0}};
    static const char *help =
        "usage: lrc inspect MODEL [--preset P] [--set KEY=VALUE]... [--params] [--flops] [--ir]\n"
        "                   [--after PASS] [--kernels] [--weights W.safetensors] [--target ref|cpu|cuda]\n"
        "                   [--seq T] [--batch B] [--ctx C | --logits all|last]\n"
        "\n"
        "Builds the model's graph and describes it. With no section flag, prints\n"
        "the configuration, FLOPs and parameters.\n"
        "\n" MODEL_HELP
        "  --params          parameters by group, then 'total N'\n"
        "  --flops           forward and training FLOPs per token\n"
        "  --ir              the graph, one node a line (as built, or after --after)\n"
        "  --after PASS      run the pass pipeline up to PASS and print the result:\n"
        "                    kv_cache (with --ctx), last_rows (with --logits last),\n"
        "                    autodiff (the training graph:\n"
        "                    loss and gradients), fold_gains, pad_hidden, cse, dce,\n"
        "                    fuse, plan_memory (the last two: the kernel groups)\n"
        "  --kernels         run every pass and print the kernel groups and memory plan\n"
        "  --weights FILE    frozen parameters: constant LayerRoPE gains and norm\n"
        "                    weights fold into the matmul weights\n"
        "  --target T        the passes as compiling for T runs them (default ref;\n"
        "                    cuda pads hidden widths to multiples of 8 with --weights)\n"
        "  --seq T           sequence length for the graph (default 256)\n"
        "  --batch B         batch size for the graph (default 1)\n"
        "  --ctx C           the decoder lrc compile --ctx C builds: one token a step,\n"
        "                    KV caches of C positions (the kv_cache pass)\n"
        "  --logits last     the package lrc compile --logits last builds: the logits\n"
        "                    at the last position only (the last_rows pass)\n";
    cli_args a;
    int rc = cli_parse_args("inspect", argc, argv, opts, help, true, &a);
    if (rc >= 0) goto out;
    const lrc_target *target = lrc_target_find(a.target);
    if (!target) {
        char names[128];
        rc = cli_usage_error("inspect", "unknown target '%s' (%s)", a.target, cli_target_names(LRC_TARGET_ANY, " or ", names, sizeof names));
        goto out;
    }
    if (a.batch == 0) a.batch = 1;
    bool training = a.after && !strcmp(a.after, "autodiff");
    if (a.after && !strcmp(a.after, "kv_cache") && a.ctx <= 0) {
        rc = cli_usage_error("inspect", "--after kv_cache needs --ctx C (the KV caches' length)");
        goto out;
    }
    if (training && a.ctx > 0) {
        rc = cli_usage_error("inspect", "--after autodiff shows the training graph, which has no KV cache: drop --ctx");
        goto out;
    }
    if (a.logits_last && (a.ctx > 0 || training)) {
        rc = cli_usage_error("inspect", "--logits last is for the forward graph of whole sequences: drop %s", a.ctx > 0 ? "--ctx" : "--after autodiff");
        goto out;
    }
    if (a.after && !strcmp(a.after, "last_rows") && !a.logits_last) {
        rc = cli_usage_error("inspect", "--after last_rows needs --logits last");
        goto out;
    }
    if (a.ctx > 0) a.batch = a.seq = 1; /* one new token a step */
    lrc_err err;
    lrc_model m;
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set wfile, consts;
    lrc_tensor_set_init(&wfile);
    lrc_tensor_set_init(&consts);
    lrc_schedule sched;
    bool have_sched = false;
    if (cli_model_load("inspect", &a.m, &m, &err) ||
        (training ? lrc_model_build_training(&m, a.batch, a.seq, g, &err) : lrc_model_build(&m, a.batch, a.seq, g, &err)) ||
        (a.weights && (lrc_safetensors_load(a.weights, &wfile, &err) ||
                       lrc_params_bind(g, &wfile, a.weights, &consts, &err)))) {
        rc = cli_user_error(&err);
    } else {
        bool all = !a.params && !a.flops && !a.ir && !a.after && !a.kernels;
        if (all) {
            if (m.hf_dir) printf("model %s (Hugging Face config.json)\nfamily: %s (model_type %s)\n", m.hf_dir, m.path,
                                 m.hf_type);
            else printf("model %s%s%s\n", m.path, a.m.preset ? " preset " : "", a.m.preset ? a.m.preset : "");
            lrc_model_print_config(&m, stdout);
        }
        if (a.flops || all) print_flops(&m, g, a.batch, a.seq);
        if (a.params || all) print_params(g);
        rc = 0;
        if (a.ir && !a.after) lrc_graph_print(g, stdout);
        if (a.after || a.kernels) {
            if (optimize(&g, a.weights ? &consts : NULL, target, a.ctx, a.logits_last, a.kernels ? NULL : a.after, &sched,
                         &have_sched, &err)) {
                rc = cli_user_error(&err);
            } else if (have_sched) {
                if (a.ir) lrc_graph_print(g, stdout);
                lrc_schedule_print(g, &sched, stdout);
            } else {
                lrc_graph_print(g, stdout);
            }
        }
    }
    if (have_sched) lrc_schedule_free(&sched);
    lrc_tensor_set_clear(&wfile);
    lrc_tensor_set_clear(&consts);
    lrc_graph_free(g);
    lrc_model_free(&m);
out:
    cli_model_opts_free(&a.m);
    return rc;
}

/* ---- init -------------------------------------------------------------- */

/* Records the model and its config in the file, for people and tools. */
static char *config_metadata(lrc_model *m, const char *preset)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    lrc_model_print_config(m, f);
    fclose(f);
    /* one JSON-safe line: "key value; key value" */
    for (char *p = buf; *p; p++)
        if (*p == '\n') *p = ';';
        else if (*p == '"' || *p == '\\') *p = '\'';
    size_t n = strlen(buf) + strlen(m->path) + 128;
    char *json = lrc_xmalloc(n);
    snprintf(json, n, "{\"format\":\"lrc\",\"model\":\"%s\",\"preset\":\"%s\",\"config\":\"%s\"}", m->path,
             preset ? preset : "", buf);
    free(buf);
    return json;
}

int cmd_init(int argc, char **argv)
{
    static const struct option opts[] = {MODEL_OPTS, {"seed", required_argument, 0, OPT_SEED},
                                         {"threads", required_argument, 0, OPT_THREADS}, {0, 0, 0, 0}};
    static const char *help =
        "usage: lrc init MODEL [--preset P] [--set KEY=VALUE]... [--seed N] [--threads N] -o W.safetensors\n"
        "\n"
        "Initialises every parameter by its init rule from the seed (default 0)\n"
        "and writes them, named as in Hugging Face checkpoints, as F32.\n"
        "\n" MODEL_HELP
        "  --seed N          random seed (default 0)\n"
        "  --threads N       threads filling the tensors (default: all cores; the\n"
        "                    values are the same for any count)\n"
        "  -o FILE           the safetensors file to write\n";
    cli_args a;
    int rc = cli_parse_args("init", argc, argv, opts, help, true, &a);
    if (rc >= 0) goto out;
    if (!a.out) {
        rc = cli_usage_error("init", "missing -o FILE");
        goto out;
    }
    lrc_err err;
    lrc_model m;
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set params;
    lrc_tensor_set_init(&params);
    lrc_pool *pool = NULL;
    if (cli_model_load("init", &a.m, &m, &err) || lrc_model_build(&m, 1, 1, g, &err) ||
        !(pool = lrc_pool_new(a.threads > 0 ? (int)a.threads : lrc_pool_default_threads(), &err)) ||
        lrc_params_init(g, (uint64_t)a.seed, pool, &params, &err)) {
        rc = cli_user_error(&err);
    } else {
        params.metadata_json = config_metadata(&m, a.m.preset);
        if (lrc_safetensors_save(a.out, &params, &err)) rc = cli_user_error(&err);
        else {
            printf("wrote %s: %d tensors, %lld parameters, seed %lld\n", a.out, params.n,
                   (long long)lrc_graph_param_count(g), (long long)a.seed);
            rc = 0;
        }
    }
    lrc_tensor_set_clear(&params);
    lrc_pool_free(pool);
    lrc_graph_free(g);
    lrc_model_free(&m);
out:
    cli_model_opts_free(&a.m);
    return rc;
}

/* ---- forward ----------------------------------------------------------- */

/* Drops backward's "labels" from a forward's inputs where the package has
 * no input of that name, as forward of a model does: one file serves both. */
static void drop_labels(lrc_session *s, lrc_tensor_set *in)
{
    lrc_session_info info;
    if (lrc_session_describe(s, &info)) return; /* the run says what is wrong */
    for (int i = 0; i < info.n_inputs; i++) {
        lrc_array x;
        if (!lrc_session_input(s, i, &x) && x.name && !strcmp(x.name, "labels")) return;
    }
    for (int i = 0; i < in->n; i++)
        if (!strcmp(in->items[i]->name, "labels")) {
            lrc_tensor_free(in->items[i]);
            memmove(in->items + i, in->items + i + 1, (size_t)(in->n - i - 1) * sizeof *in->items);
            in->n--;
            return;
        }
}

/* lrc forward of a package, compiled for target t, through the embedding API. */
static int forward_package(const cli_args *a, const cli_target *t)
{
    int usage = t->package_args ? t->package_args(a) : -1;
    if (usage >= 0) return usage;
    lrc_err err;
    lrc_tensor_set in, outs;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&outs);
    lrc_session *s = NULL;
    lrc_array *arr = NULL;
    double *prof_ns = NULL;
    int64_t *prof_calls = NULL;
    const lrc_plan *plan = NULL;
    const lrc_tensor *tok = NULL;
    int rc = cli_session_open(a, &s, &err);
    if (!rc) rc = lrc_safetensors_load(a->input, &in, &err);
    if (!rc) drop_labels(s, &in);
    if (!rc && t->package_host) rc = lrc_tokens_check(&in, a->input, INT32_MAX, &tok, &err); /* ids: checked against the plan */
    if (!rc && t->package_host && getenv("LRC_PROFILE")) { /* a developer's quick look; lrc profile is the tool */
        const lrc_executor_ops *ex;
        void *x = lrc_session_executor(s, &ex, &plan);
        prof_ns = lrc_xcalloc((size_t)plan->n_launches + 1, sizeof(double));
        prof_calls = lrc_xcalloc((size_t)plan->n_launches + 1, sizeof(int64_t));
        ex->profile(x, prof_ns, prof_calls);
    }
    if (!rc) {
        arr = cli_session_arrays(&in);
        if (lrc_session_run(s, arr, in.n)) {
            cli_session_error(s, &err);
            rc = lrc_err_prefix(&err, "%s", a->input); /* the file the inputs came from */
        }
    }
    if (!rc && a->repeat > 0) rc = t->time_session(a, s, arr, &in, &err);
    lrc_session_info info = {0};
    if (!rc && lrc_session_describe(s, &info)) rc = cli_session_error(s, &err);
    lrc_tensor *views = lrc_xcalloc((size_t)info.n_outputs + 1, sizeof *views);
    for (int i = 0; i < info.n_outputs && !rc; i++) { /* borrowed from the session: the set is emptied unfreed */
        lrc_array o;
        if (lrc_session_output_at(s, i, &o)) rc = cli_session_error(s, &err);
        else {
            views[i] = (lrc_tensor){.name = (char *)o.name, .dtype = o.elem == LRC_ELEM_I32 ? LRC_I32 : LRC_F32, .data = (void *)o.data};
            views[i].shape.ndim = o.ndim;
            for (int d = 0; d < o.ndim; d++) views[i].shape.dim[d] = o.shape[d];
            views[i].nbytes = (size_t)lrc_shape_numel(&views[i].shape) * 4;
            rc = lrc_tensor_set_add(&outs, &views[i], &err);
        }
    }
    if (!rc) rc = lrc_safetensors_save(a->out, &outs, &err);
    if (!rc && t->says_wrote) printf("wrote %s\n", a->out);
    if (prof_ns) cli_print_quick_profile(plan, prof_ns, prof_calls);
    outs.n = 0;
    free(views);
    free(prof_ns);
    free(prof_calls);
    free(arr);
    lrc_session_close(s);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&outs);
    return rc ? cli_user_error(&err) : 0;
}

int cmd_forward(int argc, char **argv)
{
    static const struct option opts[] = {MODEL_OPTS,
                                         {"weights", required_argument, 0, OPT_WEIGHTS},
                                         {"input", required_argument, 0, OPT_INPUT},
                                         {"target", required_argument, 0, OPT_TARGET},
                                         {"threads", required_argument, 0, OPT_THREADS},
                                         {"repeat", required_argument, 0, OPT_REPEAT},
                                         {0, 0, 0, 0}};
    static const char *help =
        "usage: lrc forward MODEL|PKG [--preset P] [--set KEY=VALUE]... [--weights W.safetensors]\n"
        "                   --input IN.safetensors -o OUT.safetensors [--target ref|cpu]\n"
        "                   [--threads N] [--repeat N]\n"
        "\n"
        "Runs the model on IN's 'tokens' (I32 [B, T]) and writes 'logits' (F32 [B, T, V]).\n"
        "\n" MODEL_HELP
        "  --weights FILE    parameters (F32, BF16 or F16), exactly the model's (a\n"
        "                    model needs them; a package may hold its own)\n"
        "  --input FILE      safetensors file holding 'tokens'\n"
        "  -o FILE           where to write 'logits'\n"
        "  --target NAME     ref (the plain-C reference, default) or cpu (compiled\n"
        "                    through LLVM for this CPU)\n"
        "  --threads N       cpu: threads (default: all cores)\n"
        "  --repeat N        after a warm-up run, time N runs and print the median\n"
        "\n"
        "A cuda package (lrc compile --target cuda) runs on GPU 0: its cubin when the GPU\n"
        "is of its architecture, its PTX on a newer one.\n";
    cli_args a;
    int rc = cli_parse_args("forward", argc, argv, opts, help, true, &a);
    if (rc >= 0) goto out;
    bool pkg = lrc_package_is(a.m.model);
    if ((!pkg && !a.weights) || !a.input || !a.out) {
        rc = cli_usage_error("forward", pkg ? "needs --input and -o" : "needs --weights, --input and -o");
        goto out;
    }
    if (pkg) {
        rc = forward_package(&a, cli_target_of(lrc_target_of_package(a.m.model)));
        goto out;
    }
    const lrc_target *t = lrc_target_find(a.target);
    if (!t || !cli_target_of(t)->forward_model) {
        lrc_err err;
        char names[128];
        lrc_err_set(&err, "unknown target '%s' (targets: %s; see lrc --version)", a.target,
                    cli_target_names(LRC_TARGET_FORWARD_MODEL, ", ", names, sizeof names));
        rc = cli_user_error(&err);
        goto out;
    }
    rc = cli_target_of(t)->forward_model(&a);
out:
    cli_model_opts_free(&a.m);
    return rc;
}

/* ---- demo: the README's main job --------------------------------------- */

/* What the demo measures of the compiled run, for its summary. */
typedef struct {
    double compile_s, forward_s;
    int kernels, threads;
} demo_compiled;

/* The same model compiled for this CPU, weights folded in, run on the
 * prompt: its logits into *outs (a first run packs the weights; the
 * second is timed). */
static int demo_run_compiled(lrc_model *m, int64_t T, const lrc_tensor_set *params, const lrc_tensor_set *in, lrc_tensor_set *outs,
                             demo_compiled *d, lrc_err *err)
{
    const lrc_target *t = &lrc_target_cpu; /* the demo is the reference against this CPU's code */
    lrc_graph *g2 = lrc_graph_new();
    lrc_tensor_set consts;
    lrc_tensor_set_init(&consts);
    lrc_target_plan p = {0};
    double t3 = lrc_now_s(), t4 = 0, t5 = 0;
    int crc = lrc_model_build(m, 1, T, g2, err);
    for (int i = 0; i < params->n && !crc; i++) {
        lrc_tensor *copy = lrc_tensor_new(params->items[i]->name, LRC_F32, &params->items[i]->shape, err);
        memcpy(copy->data, params->items[i]->data, copy->nbytes);
        crc = lrc_tensor_set_add(&consts, copy, err);
    }
    if (!crc) crc = lrc_target_prepare(t, g2, &(lrc_target_opts){.consts = &consts}, &p, err);
    else lrc_graph_free(g2);
    if (!crc) crc = lrc_target_bind(&p, &consts, err);
    if (!crc) crc = lrc_target_run(&p, in, outs, err); /* packs the weights */
    if (!crc) {
        t4 = lrc_now_s();
        crc = lrc_target_run(&p, in, outs, err);
        t5 = lrc_now_s();
    }
    if (!crc) *d = (demo_compiled){t4 - t3, t5 - t4, p.c.sched.n_groups, lrc_pool_threads(p.host.pool)};
    lrc_target_plan_free(&p);
    lrc_tensor_set_clear(&consts);
    return crc;
}

/* The summary: the compiled logits lc against the reference's lg, and the
 * untrained model's next-byte loss on the prompt. */
static void demo_report(const char *path, const char *preset, int64_t seed, const char *prompt, int64_t T, int64_t vocab, const float *lg,
                        const float *lc, int64_t n_params, int n_nodes, double fwd, const double ref_t[3], const demo_compiled *d)
{
    double loss = 0, num = 0, den = 0;
    int correct = 0;
    for (int64_t i = 0; i < T * vocab; i++) {
        num += ((double)lc[i] - lg[i]) * ((double)lc[i] - lg[i]);
        den += (double)lg[i] * lg[i];
    }
    for (int64_t t = 0; t + 1 < T; t++) {
        const float *row = lc + t * vocab;
        double mx = row[0], sum = 0;
        int64_t best = 0;
        for (int64_t v = 1; v < vocab; v++)
            if (row[v] > mx) { mx = row[v]; best = v; }
        for (int64_t v = 0; v < vocab; v++) sum += exp((double)row[v] - mx);
        loss += mx + log(sum) - row[(uint8_t)prompt[t + 1]];
        correct += best == (uint8_t)prompt[t + 1];
    }
    double t0 = ref_t[0], t1 = ref_t[1], t2 = ref_t[2];
    printf("lrc demo: %s, preset %s, norm layerrope, seed %lld\n", path, preset, (long long)seed);
    printf("  parameters        %lld\n", (long long)n_params);
    printf("  graph             %d nodes, built in %.1f ms\n", n_nodes, 1e3 * (t1 - t0));
    printf("  compiled (cpu)    %d kernels in %.1f ms, LayerRoPE gains folded into the weights\n", d->kernels, 1e3 * d->compile_s);
    printf("  forward (ref)     %lld tokens in %.2f ms, %.2f GFLOP/s\n", (long long)T, 1e3 * (t2 - t1), fwd / (t2 - t1) / 1e9);
    printf("  forward (cpu)     %lld tokens in %.2f ms, %.2f GFLOP/s, %d threads\n", (long long)T, 1e3 * d->forward_s,
           fwd / d->forward_s / 1e9, d->threads);
    printf("  cpu vs ref        relative difference %.2e\n", sqrt(num) / (den > 0 ? sqrt(den) : 1));
    printf("  next-byte loss    %.4f nats (untrained; ln %lld = %.4f)\n", loss / (double)(T - 1), (long long)vocab, log((double)vocab));
    printf("  argmax correct    %d of %lld\n", correct, (long long)(T - 1));
}

int cmd_demo(int argc, char **argv)
{
    static const struct option opts[] = {MODEL_OPTS,
                                         {"seed", required_argument, 0, OPT_SEED},
                                         {"prompt", required_argument, 0, OPT_PROMPT},
                                         {0, 0, 0, 0}};
    static const char *help =
        "usage: lrc demo [--preset P] [--set KEY=VALUE]... [--seed N] [--prompt TEXT]\n"
        "\n"
        "Builds the built-in LayerRoPE LLaMA (preset small unless given), initialises\n"
        "it from the seed, runs it on the prompt's bytes with the reference backend and\n"
        "compiled for this CPU, and prints a summary.\n"
        "\n" MODEL_HELP
        "  --seed N          random seed (default 0)\n"
        "  --prompt TEXT     input text, one token per byte\n";
    cli_args a;
    int rc = cli_parse_args("demo", argc, argv, opts, help, false, &a);
    if (rc >= 0) goto out;
    a.m.model = "llama";
    if (!a.m.preset) a.m.preset = "small";
    /* LayerRoPE unless the user chose a placement */
    char **sets = lrc_xmalloc((size_t)(a.m.n_sets + 1) * sizeof *sets);
    sets[0] = "norm=layerrope";
    if (a.m.n_sets) memcpy(sets + 1, a.m.sets, (size_t)a.m.n_sets * sizeof *sets);
    free(a.m.sets);
    a.m.sets = sets;
    a.m.n_sets++;
    const char *prompt = a.prompt ? a.prompt : "In the beginning God created the heaven and the earth.";
    int64_t T = (int64_t)strlen(prompt);
    if (T < 2) {
        rc = cli_usage_error("demo", "--prompt needs at least 2 bytes");
        goto out;
    }
    lrc_err err;
    lrc_model m = {0};
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set in, params, outs;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&params);
    lrc_tensor_set_init(&outs);
    lrc_backend *be = lrc_backend_ref_new();
    lrc_shape ts = {2, {1, T}};
    lrc_tensor *tok = lrc_tensor_new("tokens", LRC_I32, &ts, &err);
    for (int64_t i = 0; i < T; i++) ((int32_t *)tok->data)[i] = (uint8_t)prompt[i];
    lrc_tensor_set_add(&in, tok, &err);
    int64_t vocab = 0;
    rc = EXIT_USER;
    double t[3] = {lrc_now_s(), 0, 0}; /* built, initialised, run on the reference backend */
    if (cli_model_load("demo", &a.m, &m, &err) || lrc_model_config_int(&m, "vocab", &vocab, &err)) {
        cli_user_error(&err);
    } else if (vocab < 256) {
        fprintf(stderr, "lrc: demo: byte tokens need vocab >= 256, the model has %lld\n", (long long)vocab);
    } else if (lrc_model_build(&m, 1, T, g, &err) || (t[1] = lrc_now_s(), lrc_params_init(g, (uint64_t)a.seed, NULL, &params, &err)) ||
               lrc_exec_run(be, g, &in, &params, &outs, &err)) {
        cli_user_error(&err);
    } else {
        t[2] = lrc_now_s();
        double bwd, fwd = lrc_graph_flops(g, &bwd);
        lrc_tensor_set outs2;
        lrc_tensor_set_init(&outs2);
        demo_compiled d = {0};
        if (demo_run_compiled(&m, T, &params, &in, &outs2, &d, &err)) {
            cli_user_error(&err);
        } else {
            demo_report(m.path, a.m.preset, a.seed, prompt, T, vocab, outs.items[0]->data, outs2.items[0]->data, lrc_graph_param_count(g),
                        g->n_nodes, fwd, t, &d);
            rc = 0;
        }
        lrc_tensor_set_clear(&outs2);
    }
    lrc_backend_close(be);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&params);
    lrc_tensor_set_clear(&outs);
    lrc_graph_free(g);
    lrc_model_free(&m);
out:
    cli_model_opts_free(&a.m);
    return rc;
}
