/* cmd_export.c — lrc export --hf: a model's weights (a run directory or a
 * safetensors file) as a Hugging Face directory that transformers'
 * from_pretrained loads unchanged. The model's to_hf (in its .lua file) says
 * which family it becomes and how its weights map (models/llama.lua): IR over
 * the parameters, evaluated in f64 on the ref kernels, so LayerRoPE's gains
 * fold into ordinary norm weights and matrix rows exactly as lrc computes them. */
#include "cli.h"

#include "../../ir/passes/lrc_passes.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A to_hf's constants are parameters named lrc.const.NAME with a const
 * init (the IR has no constant op): filled here, as no file holds them. */
static int add_constants(const lrc_graph *g, lrc_tensor_set *w, lrc_err *err)
{
    for (int id = 0; id < g->n_nodes; id++) {
        const lrc_node *n = &g->nodes[id];
        if (n->op != LRC_OP_PARAM || strncmp(n->name, "lrc.const.", 10)) continue;
        if (n->init.kind != LRC_INIT_CONST)
            return lrc_err_set(err, "to_hf's constant '%s' needs a {\"const\", value=} init", n->name);
        lrc_tensor *t = lrc_tensor_new(n->name, LRC_F32, &n->shape, err);
        if (!t) return LRC_EUSER;
        for (int64_t i = 0; i < lrc_shape_numel(&n->shape); i++) ((float *)t->data)[i] = (float)n->init.value;
        if (lrc_tensor_set_add(w, t, err)) return LRC_EUSER;
    }
    return LRC_OK;
}

/* Every output of g, evaluated on params, as f32 tensors named as the outputs. */
static int evaluate(const lrc_graph *g, const lrc_tensor_set *params, lrc_tensor_set *out, lrc_err *err)
{
    lrc_tensor_set in;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(out);
    int tok = lrc_graph_find(g, LRC_OP_INPUT, "tokens");
    int rc = LRC_OK;
    if (tok >= 0) { /* pruned away unless an exported tensor reads it */
        lrc_tensor *t = lrc_tensor_new("tokens", LRC_I32, &g->nodes[tok].shape, err);
        rc = !t || lrc_tensor_set_add(&in, t, err);
    }
    lrc_run64 r;
    lrc_run64_init(&r, g, &in, params);
    if (!rc) rc = lrc_run64_exec(&r, 0, g->n_nodes, err);
    for (int i = 0; i < g->n_outputs && !rc; i++) {
        const lrc_node *n = &g->nodes[g->outputs[i]];
        if (n->dtype == LRC_I32) {
            rc = lrc_err_set(err, "to_hf's '%s' is an integer tensor, not weights", g->output_names[i]);
            break;
        }
        lrc_tensor *t = lrc_tensor_new(g->output_names[i], LRC_F32, &n->shape, err);
        if (!t) rc = LRC_EUSER;
        for (int64_t k = 0; t && k < lrc_shape_numel(&n->shape); k++) ((float *)t->data)[k] = (float)((const double *)r.buf[g->outputs[i]])[k];
        if (t) rc = lrc_tensor_set_add(out, t, err);
    }
    lrc_run64_free(&r);
    lrc_tensor_set_clear(&in);
    if (rc) lrc_tensor_set_clear(out);
    return rc;
}

/* config.json, model.safetensors, tokenizer.json and tokenizer_config.json
 * into dir (new, empty). */
static int write_dir(lrc_model *m, int config_ref, const lrc_tensor_set *w, const char *dir, const char *tok, lrc_err *err)
{
    char path[4400];
    lua_State *L = m->L;
    lua_rawgeti(L, LUA_REGISTRYINDEX, config_ref);
    int64_t vocab = 0;
    lua_getfield(L, -1, "vocab_size");
    vocab = lua_tointeger(L, -1);
    lua_pop(L, 1);
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc = lrc_hf_write_json(L, lua_gettop(L), path, err);
    lua_pop(L, 1);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (!rc) rc = lrc_safetensors_save(path, w, err);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (!rc && tok) { /* the model's own tokenizer (a run of train --tokenizer keeps a copy) */
        lrc_tokenizer *t;
        char *json;
        size_t len;
        rc = cli_tokenizer_open(tok, &t, &json, &len, err);
        if (!rc && vocab < lrc_tokenizer_n_vocab(t))
            rc = lrc_err_set(err, "the tokenizer has %lld tokens, more than the model's vocabulary of %lld",
                             (long long)lrc_tokenizer_n_vocab(t), (long long)vocab);
        if (!rc) rc = lrc_write_atomic(path, json, len, err);
        if (json) lrc_tokenizer_free(t), free(json);
    } else if (!rc) {
        rc = vocab < 256 ? lrc_err_set(err, "the model's vocabulary has %lld ids: a byte tokenizer needs 256", (long long)vocab)
                         : lrc_hf_write_byte_tokenizer(path, vocab, err);
    }
    /* the fast tokenizer as it is, with no BOS, EOS or leading space added:
     * a family's own class would add special tokens a byte vocabulary lacks */
    static const char tcfg[] = "{\n  \"tokenizer_class\": \"PreTrainedTokenizerFast\",\n  \"add_bos_token\": false,\n"
                               "  \"add_eos_token\": false,\n  \"add_prefix_space\": false,\n"
                               "  \"clean_up_tokenization_spaces\": false\n}\n";
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (!rc) rc = lrc_write_atomic(path, tcfg, sizeof tcfg - 1, err);
    return rc;
}

static void remove_dir(const char *dir)
{
    static const char *files[] = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"};
    char path[4400];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* The model's export graph, its weights bound and evaluated, written into
 * a temporary directory beside out that is renamed to out at the end. */
static int export_hf(const cli_args *a, const char *weights, const char *out, lrc_err *err)
{
    lrc_model m;
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set wfile, params, tensors;
    lrc_tensor_set_init(&wfile);
    lrc_tensor_set_init(&params);
    lrc_tensor_set_init(&tensors);
    int config_ref = -1;
    int rc = lrc_model_load(&m, a->m.model, a->m.preset, a->m.sets, a->m.n_sets, err);
    if (!rc) rc = lrc_model_build_export(&m, &g, &config_ref, err);
    if (!rc) rc = lrc_safetensors_load(weights, &wfile, err);
    if (!rc) rc = add_constants(g, &wfile, err);
    if (!rc) rc = lrc_params_bind(g, &wfile, weights, &params, err);
    if (!rc) rc = evaluate(g, &params, &tensors, err);
    /* from_pretrained reads a safetensors file only with this mark */
    if (!rc) tensors.metadata_json = lrc_xstrdup("{\"format\":\"pt\"}");
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", out, (long)getpid());
    if (!rc && mkdir(tmp, 0777)) rc = lrc_err_set(err, "%s: cannot create: %s", tmp, strerror(errno));
    else if (!rc) {
        rc = write_dir(&m, config_ref, &tensors, tmp, a->tokenizer, err);
        if (!rc && rename(tmp, out)) rc = lrc_err_set(err, "%s: cannot create: %s", out, strerror(errno));
        if (rc) remove_dir(tmp);
    }
    if (!rc) printf("exported %d tensors of %s as a Hugging Face directory %s\n", tensors.n, m.path, out);
    lrc_tensor_set_clear(&wfile);
    lrc_tensor_set_clear(&params);
    lrc_tensor_set_clear(&tensors);
    lrc_graph_free(g);
    lrc_model_free(&m);
    return rc;
}

int cmd_export(int argc, char **argv)
{
    static const struct option opts[] = {MODEL_OPTS,
                                         {"hf", required_argument, 0, OPT_HF},
                                         {"tokenizer", required_argument, 0, OPT_TOKENIZER},
                                         {0, 0, 0, 0}};
    static const char *help =
        "usage: lrc export RUN_DIR|WEIGHTS [MODEL] [--preset P] [--set KEY=VALUE]... [--tokenizer T] --hf OUT_DIR\n"
        "\n"
        "Writes a model's weights as a Hugging Face directory (config.json,\n"
        "model.safetensors, a tokenizer.json: T, the run's own (lrc train\n"
        "--tokenizer), or else one whose tokens are the bytes) that transformers'\n"
        "AutoModelForCausalLM.from_pretrained loads unchanged: a run directory of\n"
        "lrc train (its run.json names the model), or a weights file with MODEL.\n"
        "LayerRoPE and LNS gains fold into a standard llama checkpoint; a placement\n"
        "that no family computes is refused. OUT_DIR must not exist.\n"
        "\n" MODEL_HELP
        "  --hf OUT_DIR      the directory to write\n";
    /* the operands come first: SRC, then MODEL unless SRC is a run */
    const char *src = argc > 1 && argv[1][0] != '-' ? argv[1] : NULL;
    bool run = false;
    char run_json[4200];
    struct stat st;
    if (src) {
        snprintf(run_json, sizeof run_json, "%s/run.json", src);
        run = stat(run_json, &st) == 0;
        argv[1] = argv[0];
        argv++, argc--;
    }
    cli_args a;
    bool model_given = argc > 1 && argv[1][0] != '-';
    int rc = cli_parse_args("export", argc, argv, opts, help, model_given || !run, &a);
    if (rc >= 0) goto out;
    if (!src || !a.out) {
        rc = cli_usage_error("export", src ? "needs --hf OUT_DIR" : "needs RUN_DIR or WEIGHTS");
        goto out;
    }
    if (run && !model_given && (a.m.preset || a.m.n_sets)) {
        rc = cli_usage_error("export", "%s: a run's run.json sets its model, preset and keys; give MODEL to override them",
                             src);
        goto out;
    }
    char out_dir[4096]; /* "out/" names out: the temporary directory goes beside it */
    snprintf(out_dir, sizeof out_dir, "%s", a.out);
    for (size_t n = strlen(out_dir); n > 1 && out_dir[n - 1] == '/'; n--) out_dir[n - 1] = 0;
    a.out = out_dir;
    if (stat(a.out, &st) == 0) {
        rc = cli_usage_error("export", "--hf %s: already exists (lrc export writes a new directory)", a.out);
        goto out;
    }
    lrc_err err;
    cJSON *keep = NULL;
    char weights[4200];
    snprintf(weights, sizeof weights, "%s%s", src, run ? "/model.safetensors" : "");
    cli_args r = a; /* a run's model, preset and sets, unless MODEL is given */
    r.m.sets = NULL;
    rc = run && !model_given ? cli_run_load(src, &r, &keep, &err) : LRC_OK;
    char run_tok[4300];
    snprintf(run_tok, sizeof run_tok, "%s/tokenizer.json", src);
    if (run && model_given && !a.tokenizer && stat(run_tok, &st) == 0) a.tokenizer = run_tok; /* the run's own */
    if (a.tokenizer) r.tokenizer = a.tokenizer;
    if (!rc) rc = export_hf(run && !model_given ? &r : &a, weights, a.out, &err);
    if (r.m.sets != a.m.sets) free(r.m.sets);
    cJSON_Delete(keep);
    rc = rc ? cli_user_error(&err) : 0;
out:
    cli_model_opts_free(&a.m);
    return rc;
}
