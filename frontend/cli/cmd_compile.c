/* cmd_compile.c — lrc compile: a model compiled ahead of time into a
 * package (kernels.so, package.json with the plan, and the folded weights
 * when given) that lrc forward runs with no Lua, LLVM or compilation. */
#include "shapes.h"
#include "cli_targets.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void cli_package_remove(const char *dir) { lrc_package_remove(dir); }

/* sh: the main shape's list of shorter shapes; NULL for one of them */
static char *package_meta(lrc_model *m, const cli_args *a, const lrc_target *t, const lrc_compiled *c, int64_t vocab, int64_t B,
                          int64_t T, const cli_shapes *sh)
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
        cJSON_AddNumberToObject(o, "batch", (double)B);
        cJSON_AddNumberToObject(o, "seq", (double)T);
        if (a->logits_last) cJSON_AddStringToObject(o, "logits", "last"); /* the output is [B, 1, V] */
    }
    if (sh) {
        cJSON *pre = cJSON_AddObjectToObject(o, "prefix");
        cJSON_AddBoolToObject(pre, "batch", sh->batch_prefix);
        cJSON_AddBoolToObject(pre, "seq", sh->seq_prefix);
        cJSON_AddStringToObject(pre, "batch_fixed", sh->batch_fixed);
        cJSON_AddStringToObject(pre, "seq_fixed", sh->seq_fixed);
        cJSON *axes = cJSON_AddObjectToObject(pre, "axes"); /* name: [batch axis, sequence axis] */
        for (int i = 0; i < sh->n_named; i++) {
            cJSON *e = cJSON_CreateArray();
            cJSON_AddItemToArray(e, cJSON_CreateNumber(sh->batch_axis[i]));
            cJSON_AddItemToArray(e, cJSON_CreateNumber(sh->seq_axis[i]));
            cJSON_AddItemToObject(axes, sh->name[i], e);
        }
        cJSON *list = cJSON_AddArrayToObject(o, "shapes");
        for (int i = 0; i < sh->n; i++) {
            cJSON *e = cJSON_CreateArray();
            cJSON_AddItemToArray(e, cJSON_CreateNumber((double)sh->batch[i]));
            cJSON_AddItemToArray(e, cJSON_CreateNumber((double)sh->seq[i]));
            cJSON_AddItemToArray(list, e);
        }
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

/* g (taken over) compiled for --target into w's directory, its kernels as
 * the target writes them. consts as lrc_compile_graph takes them. */
static int compile_into(const cli_args *a, lrc_graph *g, lrc_tensor_set *consts, lrc_package_writer *w, lrc_compiled *c,
                        lrc_err *err)
{
    lrc_compile_opts o = cli_compile_opts(a);
    return lrc_target_find(a->target)->compile_package(g, consts, &o, w, c, err);
}

/* A copy of every tensor of from, appended to to. */
static int copy_set(const lrc_tensor_set *from, lrc_tensor_set *to, lrc_err *err)
{
    for (int k = 0; k < from->n; k++) {
        const lrc_tensor *t = from->items[k];
        lrc_tensor *d = lrc_tensor_new_uninit(t->name, t->dtype, &t->shape, err);
        if (d) memcpy(d->data, t->data, t->nbytes);
        if (!d || lrc_tensor_set_add(to, d, err)) return LRC_EUSER;
    }
    return LRC_OK;
}

/* The parameters a shorter shape's plan reads: the main plan must read
 * each with the same shape (its weights are the package's). */
typedef struct shape_param {
    char *name;
    lrc_shape shape;
    int64_t batch, seq;
} shape_param;

/* The shorter shapes, before the main one (which folds params in place):
 * each a package in w's directory, compiled with a copy of params (folded
 * again to the same tensors); a shape the model does not build for is
 * dropped from sh. The parameters they read are appended to *reads. */
static int compile_shapes(const cli_args *a, lrc_model *m, cli_shapes *sh, const lrc_tensor_set *params, int64_t vocab,
                          lrc_package_writer *w, shape_param **reads, int *n_reads, lrc_err *err)
{
    int rc = LRC_OK;
    for (int i = 0; i < sh->n && !rc;) {
        lrc_package_writer sub;
        memset(&sub, 0, sizeof sub);
        lrc_compiled c;
        memset(&c, 0, sizeof c);
        lrc_tensor_set copy;
        lrc_tensor_set_init(&copy);
        lrc_graph *g = lrc_graph_new();
        lrc_err e;
        if (lrc_model_build(m, sh->batch[i], sh->seq[i], g, &e)) { /* not every length builds (a model that wants T % 64 == 0) */
            lrc_graph_free(g);
            cli_shapes_drop(sh, i);
            continue;
        }
        if (params) rc = copy_set(params, &copy, err);
        if (!rc) rc = lrc_package_begin_shape(w, sh->batch[i], sh->seq[i], &sub, err);
        if (rc) lrc_graph_free(g);
        else rc = compile_into(a, g, params ? &copy : NULL, &sub, &c, err) ? LRC_EUSER : LRC_OK;
        for (int b = 0; b < c.plan.n_bufs && !rc; b++)
            if (c.plan.bufs[b].kind == LRC_BUF_PARAM) {
                *reads = lrc_xrealloc(*reads, (size_t)(*n_reads + 1) * sizeof **reads);
                (*reads)[(*n_reads)++] = (shape_param){lrc_xstrdup(c.plan.bufs[b].name), c.plan.bufs[b].shape, sh->batch[i], sh->seq[i]};
            }
        char *meta = rc ? NULL : package_meta(m, a, lrc_target_find(a->target), &c, vocab, sh->batch[i], sh->seq[i], NULL);
        if (!rc) rc = lrc_package_finish(&sub, &c.plan, meta, err);
        free(meta);
        if (sub.started) lrc_package_abort(&sub);
        lrc_compiled_free(&c);
        lrc_tensor_set_clear(&copy);
        i++;
    }
    return rc;
}

/* Every parameter a shorter shape reads is one the main plan reads, of the same shape. */
static int check_shape_params(const lrc_model *m, const shape_param *reads, int n_reads, const lrc_plan *main, lrc_err *err)
{
    for (int r = 0; r < n_reads; r++) {
        int k = 0;
        while (k < main->n_bufs && (main->bufs[k].kind != LRC_BUF_PARAM || strcmp(main->bufs[k].name, reads[r].name))) k++;
        if (k == main->n_bufs || !lrc_shape_eq(&main->bufs[k].shape, &reads[r].shape))
            return lrc_err_set(err, "%s at [%lld, %lld] reads parameter '%s' %s: compile it with --min-seq equal to --seq and --batch 1", m->path,
                               (long long)reads[r].batch, (long long)reads[r].seq, reads[r].name,
                               k == main->n_bufs ? "that the full shape does not" : "with another shape than the full one");
    }
    return LRC_OK;
}

/* "batch 1..4, seq 1..256 (4 shapes compiled besides [4, 256])", or why an axis is fixed */
static void print_shapes(const cli_args *a, const cli_shapes *sh)
{
    const char *dims[2] = {"batch", "seq"};
    const int64_t size[2] = {a->batch, a->seq};
    const bool free_[2] = {sh->batch_prefix, sh->seq_prefix};
    const char *why[2] = {sh->batch_fixed, sh->seq_fixed};
    printf("runs");
    for (int k = 0; k < (sh->seq_axis_none ? 1 : 2); k++)
        if (free_[k]) printf("%s %s 1..%lld", k ? "," : "", dims[k], (long long)size[k]);
        else printf("%s %s %lld only (%s)", k ? "," : "", dims[k], (long long)size[k], why[k]);
    if (sh->seq_axis_none) printf(" (%d shapes compiled besides batch %lld)\n", sh->n, (long long)a->batch);
    else printf(" (%d shapes compiled besides [%lld, %lld])\n", sh->n, (long long)a->batch, (long long)a->seq);
}

/* A looped model's default iteration count (its config's T) as a package
 * may say it (runtime/package.c refuses more). */
static int check_loop_T(lrc_model *m, const lrc_graph *g, lrc_err *err)
{
    int64_t T = 0;
    lrc_err ignored;
    if (lrc_graph_find(g, LRC_OP_INPUT, "iterations") < 0 || lrc_model_config_int(m, "T", &T, &ignored) || T <= LRC_PACKAGE_MAX_ITERATIONS)
        return LRC_OK;
    return lrc_err_set(err, "T = %lld: a package runs at most %d iterations by default (give more at run time in the input 'iterations')",
                       (long long)T, LRC_PACKAGE_MAX_ITERATIONS);
}

int cli_compile_package(const cli_args *a)
{
    const lrc_target *target = lrc_target_find(a->target);
    lrc_err err;
    char names[128];
    if (!target || !target->compile_package) {
        lrc_err_set(&err, "--target %s: unknown target (lrc compiles for %s)", a->target,
                    cli_target_names(LRC_TARGET_COMPILE, " and ", names, sizeof names));
        return cli_user_error(&err);
    }
    int bad = cli_target_of(target)->check("compile", a, &err); /* the options this target takes */
    if (bad) return bad == EXIT_USAGE ? cli_usage_error("compile", "%s", err.msg) : cli_user_error(&err);
    lrc_package_writer w;
    if (a->min_seq && a->ctx > 0) return cli_usage_error("compile", "--min-seq is for whole sequences (a decoder takes one token a step)");
    if (a->logits_last && a->ctx > 0)
        return cli_usage_error("compile", "--logits last is for whole sequences (a decoder's logits are its one token's)");
    if (a->logits_last && a->min_seq)
        return cli_usage_error("compile", "--min-seq needs every position's logits: --logits last runs the sequence of --seq alone");
    if (lrc_package_begin(&w, a->out, target->device_package, &err)) return cli_user_error(&err);
    lrc_model m = {0};
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set wfile, params, keep, owned; /* owned: what package_weight added (keep borrows the rest) */
    shape_param *reads = NULL;
    int n_reads = 0;
    int64_t kept_bytes = 0;
    int kept = 0;
    lrc_tensor_set_init(&wfile);
    lrc_tensor_set_init(&params);
    lrc_tensor_set_init(&keep);
    lrc_tensor_set_init(&owned);
    lrc_compiled c;
    memset(&c, 0, sizeof c);
    int64_t vocab = 0;
    cli_shapes sh = {.n = 0};
    int rc = EXIT_USER;
    lrc_pass_ctx decode = {.kv_cache_len = a->ctx, .last_rows = a->logits_last};
    lrc_tokenizer *tok = NULL;
    char *tok_json = NULL, hf_tok[4200];
    size_t tok_len = 0;
    const char *tpath = a->tokenizer;
    struct stat tst;
    snprintf(hf_tok, sizeof hf_tok, "%s/tokenizer.json", a->m.model);
    if (!tpath && lrc_hf_is_dir(a->m.model) && stat(hf_tok, &tst) == 0) tpath = hf_tok;
    if ((tpath && cli_tokenizer_open(tpath, &tok, &tok_json, &tok_len, &err)) || lrc_model_load(&m, a->m.model, a->m.preset, a->m.sets, a->m.n_sets, &err) ||
        lrc_model_config_int(&m, m.task == LRC_TASK_IMAGE ? "n_classes" : "vocab", &vocab, &err) ||
        lrc_model_build(&m, a->ctx > 0 ? 1 : a->batch, a->ctx > 0 ? 1 : a->seq, g, &err) || check_loop_T(&m, g, &err) ||
        lrc_passes_run(&g, &decode, "last_rows", &err) || /* the pipeline's first steps; compiling runs the rest */
        (a->weights && (lrc_safetensors_load(a->weights, &wfile, &err) ||
                        lrc_params_bind(g, &wfile, a->weights, &params, &err)))) {
        lrc_graph_free(g);
        cli_user_error(&err);
        goto done;
    }
    lrc_tensor_set_clear(&wfile); /* params holds its own f32 copies: a 1b's 5 GB less */
    if (a->ctx == 0 && !a->one_shape && !a->logits_last) cli_shapes_plan(&m, g, a->batch, a->seq, a->min_seq, &sh);
    if (a->logits_last) { /* a shorter run padded to T would give the logits of a padding position */
        snprintf(sh.batch_fixed, sizeof sh.batch_fixed, "compiled with --logits last, for this shape alone");
        snprintf(sh.seq_fixed, sizeof sh.seq_fixed, "compiled with --logits last: its logits are the last of %lld positions", (long long)a->seq);
    }
    /* the shorter shapes first, each folding a copy of the weights as they are; then the main one folds them in place */
    if (compile_shapes(a, &m, &sh, a->weights ? &params : NULL, vocab, &w, &reads, &n_reads, &err)) {
        lrc_graph_free(g); /* not yet taken over by a compile */
        cli_user_error(&err);
        goto done;
    }
    if (compile_into(a, g, a->weights ? &params : NULL, &w, &c, &err) || check_shape_params(&m, reads, n_reads, &c.plan, &err)) {
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
                lrc_tensor *extra = NULL;
                if (target->package_weight) rc = target->package_weight(&c, i, t, &extra, &err);
                if (!rc) rc = lrc_tensor_set_add(&keep, t, &err);
                if (!rc && extra) rc = lrc_tensor_set_add(&keep, extra, &err) || lrc_tensor_set_add(&owned, extra, &err);
            }
        if (!rc) rc = lrc_package_write_weights(&w, &keep, &err);
    }
    if (!rc && tok_json) {
        rc = vocab < lrc_tokenizer_n_vocab(tok)
                 ? lrc_err_set(&err, "the tokenizer has %lld tokens, more than the model's vocabulary of %lld",
                               (long long)lrc_tokenizer_n_vocab(tok), (long long)vocab)
                 : lrc_package_write_tokenizer(&w, tok_json, tok_len, &err);
    }
    if (a->weights) {
        for (int i = 0; i < keep.n; i++) kept_bytes += (int64_t)keep.items[i]->nbytes;
        kept = keep.n - owned.n; /* q8 scales ride with their matrices */
        keep.n = 0; /* borrowed: cleared without freeing the tensors */
    }
    char *meta = rc ? NULL : package_meta(&m, a, target, &c, vocab, a->ctx > 0 ? 1 : a->batch, a->ctx > 0 ? 1 : a->seq, a->ctx > 0 ? NULL : &sh);
    if (!rc) rc = lrc_package_finish(&w, &c.plan, meta, &err); /* package.json, then the directory moved into place */
    free(meta);
    if (rc) {
        cli_user_error(&err);
        rc = EXIT_USER;
        goto done;
    }
    cli_target_of(target)->compile_report(&m, a, &c);
    if (a->ctx == 0) print_shapes(a, &sh);
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
    lrc_tensor_set_clear(&owned);
    for (int i = 0; i < n_reads; i++) free(reads[i].name);
    free(reads);
    lrc_model_free(&m);
    lrc_tokenizer_free(tok);
    free(tok_json);
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
                                         {"min-seq", required_argument, 0, OPT_MIN_SEQ},
                                         {"arch", required_argument, 0, OPT_ARCH},
                                         {"precision", required_argument, 0, OPT_PRECISION},
                                         {"weights-dtype", required_argument, 0, OPT_WEIGHTS_DTYPE},
                                         {"logits", required_argument, 0, OPT_LOGITS},
                                         {"tokenizer", required_argument, 0, OPT_TOKENIZER},
                                         {0, 0, 0, 0}};
    static const char *help =
        "usage: lrc compile MODEL [--preset P] [--set KEY=VALUE]... --target cpu|cuda [--arch sm_XX] [--weights W]\n"
        "                   [--precision bf16|f32] [--weights-dtype f32|bf16|q8] [--batch B]\n"
        "                   [--seq T [--min-seq M] [--logits all|last] | --ctx C] [--tokenizer T] -o PKG\n"
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
        "  --weights-dtype D cpu: f32 (default), bf16 or q8 storage of the weight\n"
        "                    matrices (the package's file and the GEMMs' packed panels):\n"
        "                    bf16 half the bytes; q8 about 0.27x, int8 values with one\n"
        "                    scale per block of 32 along the reduction axis, as\n"
        "                    llama.cpp's Q8_0; activations, norm gains and biases stay\n"
        "                    f32, and every product accumulates in f32\n"
        "  --weights FILE    freeze these weights into the package (folding gains)\n"
        "  --batch B         batch size (default 1)\n"
        "  --seq T           sequence length (default 256). The package also runs any\n"
        "                    batch B' <= B and sequence T' <= T, padded to one of the\n"
        "                    shapes compiled with it (B and T halved, rounded up),\n"
        "                    where the model computes a shorter one as a prefix (a\n"
        "                    causal one does); the logits are those of a package of\n"
        "                    exactly [B', T']\n"
        "  --min-seq M       the shortest of those sequences (default 16; T: none)\n"
        "  --logits last     a language model's logits at the last position only,\n"
        "                    [B, 1, V], as a prompt's processing needs them: the LM\n"
        "                    head and the last layer after its attention run for one\n"
        "                    row (the full forward's last row, bit for bit); the\n"
        "                    package then runs [B, T] alone (default all)\n"
        "  --ctx C           compile a decoder for lrc generate instead: one token a\n"
        "                    step with KV caches of C positions\n"
        "  --tokenizer T     a tokenizer.json (or a directory with one; a Hugging Face\n"
        "                    MODEL's own by default) that the package carries, for\n"
        "                    lrc generate and lrc.h's lrc_session_tokenize\n"
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
