/* classify.c — evaluation: image classification around the IDX loader
 * (checking that a model takes the data set's images, mean loss and
 * accuracy of a split with a forward plan compiled for this CPU), and
 * `lrc eval`, which also gives a language model's validation loss. */
#include "classify.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Cross-entropy of one row of K logits against label y, in double; *best
 * gets the arg max. */
static double row_loss(const float *z, int64_t K, int32_t y, int64_t *best)
{
    int64_t top = 0;
    double sum = 0;
    for (int64_t k = 1; k < K; k++)
        if (z[k] > z[top]) top = k;
    for (int64_t k = 0; k < K; k++) sum += exp((double)z[k] - z[top]);
    *best = top;
    return z[top] + log(sum) - z[y];
}

int cli_images_open(lrc_model *m, const char *dir, lrc_images *im, lrc_err *err)
{
    int64_t C, S, K;
    if (m->task != LRC_TASK_IMAGE)
        return lrc_err_set(err, "%s is a language model: image data needs an image model such as vit", m->path);
    if (lrc_model_config_int(m, "channels", &C, err) || lrc_model_config_int(m, "image_size", &S, err) ||
        lrc_model_config_int(m, "n_classes", &K, err) || lrc_images_load(im, dir, err))
        return LRC_EUSER;
    if (im->channels != C || im->height != S || im->width != S) {
        lrc_err_set(err, "%s takes %lldx%lldx%lld images (channels x image_size x image_size), the data set holds %lldx%lldx%lld",
                    m->path, (long long)C, (long long)S, (long long)S, (long long)im->channels, (long long)im->height,
                    (long long)im->width);
        lrc_images_free(im);
        return LRC_EUSER;
    }
    if (im->n_classes > K) {
        lrc_err_set(err, "%s predicts %lld classes (n_classes), the data set has %lld", m->path, (long long)K,
                    (long long)im->n_classes);
        lrc_images_free(im);
        return LRC_EUSER;
    }
    return LRC_OK;
}

int cli_classifier_open(lrc_model *m, int64_t B, lrc_pool *pool, const lrc_tensor_set *params, cli_classifier *cl,
                        lrc_err *err)
{
    memset(cl, 0, sizeof *cl);
    lrc_tensor_set_init(&cl->in);
    lrc_tensor_set_init(&cl->outs);
    cl->B = B;
    lrc_graph *g = lrc_graph_new();
    int rc = lrc_model_build(m, B, 1, g, err);
    if (rc) {
        lrc_graph_free(g);
        return rc;
    }
    const lrc_shape *is = &g->nodes[lrc_graph_find(g, LRC_OP_INPUT, "images")].shape;
    lrc_shape bs = {1, {B}};
    cl->images = lrc_tensor_new("images", LRC_F32, is, err);
    cl->labels = cl->images ? lrc_tensor_new("labels", LRC_I32, &bs, err) : NULL;
    if (!cl->labels || lrc_tensor_set_add(&cl->in, cl->images, err)) {
        lrc_tensor_free(cl->images);
        lrc_tensor_free(cl->labels);
        cl->images = cl->labels = NULL;
        lrc_graph_free(g);
        return LRC_EUSER;
    }
    char said[1024]; /* the model's other inputs (lrc.input): their defaults, as training fills them */
    if (lrc_model_fill_defaults(m, g, &cl->in, said, sizeof said, err)) {
        lrc_graph_free(g);
        return LRC_EUSER;
    }
    cl->have_comp = true;
    rc = lrc_compile_graph(g, NULL, &cl->c, err); /* parameters stay inputs: training changes them */
    if (!rc) rc = lrc_exec_new(&cl->c.plan, pool, &cl->x, err);
    if (!rc) rc = lrc_exec_bind_params(cl->x, params, err);
    return rc;
}

void cli_classifier_params_changed(cli_classifier *cl) { lrc_exec_params_changed(cl->x); }

int cli_classifier_eval(cli_classifier *cl, const lrc_images *im, int split, double *loss, double *acc, lrc_err *err)
{
    int64_t n = im->n[split], right = 0, used = 0;
    double total = 0;
    for (int64_t start = 0; start < n; start += cl->B) {
        lrc_images_range(im, split, start, cl->B, cl->images->data, cl->labels->data);
        int rc = lrc_exec_run_plan(cl->x, &cl->in, &cl->outs, err);
        if (rc) return rc;
        const lrc_tensor *lg = lrc_tensor_set_find(&cl->outs, "logits");
        int64_t K = lg->shape.dim[1];
        const int32_t *y = cl->labels->data;
        for (int64_t b = 0; b < cl->B; b++) {
            if (y[b] < 0) continue; /* padding after the last image */
            int64_t best;
            total += row_loss((const float *)lg->data + b * K, K, y[b], &best);
            right += best == y[b];
            used++;
        }
    }
    *loss = used ? total / (double)used : NAN;
    *acc = used ? (double)right / (double)used : NAN;
    return LRC_OK;
}

void cli_classifier_close(cli_classifier *cl)
{
    lrc_exec_free(cl->x);
    if (cl->have_comp) lrc_compiled_free(&cl->c);
    lrc_tensor_set_clear(&cl->in);
    lrc_tensor_set_clear(&cl->outs);
    lrc_tensor_free(cl->labels); /* not in `in`: the forward graph has no labels input */
    memset(cl, 0, sizeof *cl);
}

/* A language model's mean next-byte loss on fixed validation windows of
 * the text (those lrc train evaluates with the same seed), a looped model
 * at its config's T. */
static int eval_text(const cli_args *a, lrc_model *m, const lrc_tensor_set *params, lrc_pool *pool,
                     const lrc_tokenizer *tk, const char *tk_json, lrc_err *err)
{
    int64_t B = a->batch, T = a->seq, n = a->steps > 0 ? a->steps : 8, V = 0, iters = 0;
    lrc_text text;
    memset(&text, 0, sizeof text);
    lrc_tensor_set in, outs;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&outs);
    lrc_compiled c;
    memset(&c, 0, sizeof c);
    lrc_exec *x = NULL;
    lrc_shape bt = {2, {B, T}};
    lrc_tensor *tok = lrc_tensor_new("tokens", LRC_I32, &bt, err), *lab = tok ? lrc_tensor_new("labels", LRC_I32, &bt, err) : NULL;
    int rc = !lab || lrc_tensor_set_add(&in, tok, err) ? LRC_EUSER : LRC_OK;
    if (!rc) rc = lrc_model_config_int(m, "vocab", &V, err);
    if (!rc && tk && V < lrc_tokenizer_n_vocab(tk))
        rc = lrc_err_set(err, "the tokenizer has %lld tokens, more than the model's vocabulary of %lld",
                         (long long)lrc_tokenizer_n_vocab(tk), (long long)V);
    if (!rc) rc = cli_text_load(a->data, tk, tk_json, NULL, T, &text, err);
    lrc_graph *g = rc ? NULL : lrc_graph_new();
    if (!rc) rc = lrc_model_build(m, B, T, g, err);
    lrc_plan_buf want[16];
    if (!rc) rc = lrc_model_complete_inputs(want, lrc_model_graph_inputs(g, want, 16), m, &in, "the evaluation", err);
    if (!rc) {
        rc = lrc_compile_graph(g, NULL, &c, err);
        g = NULL;
    }
    if (!rc) rc = lrc_exec_new(&c.plan, pool, &x, err);
    if (!rc) rc = lrc_exec_bind_params(x, params, err);
    lrc_rng r;
    lrc_rng_seed(&r, (uint64_t)a->seed + 0x5eed); /* lrc train's validation windows */
    double total = 0, used = 0, bytes = 0;
    for (int64_t e = 0; e < n && !rc; e++) {
        lrc_text_batch(&text, true, B, T, &r, tok->data, lab->data);
        if ((rc = lrc_exec_run_plan(x, &in, &outs, err))) break;
        const float *z = lrc_tensor_set_find(&outs, "logits")->data;
        const int32_t *y = lab->data;
        bytes += cli_text_label_bytes(tk, y, B * T);
        for (int64_t i = 0; i < B * T; i++, z += V) {
            int64_t best;
            total += row_loss(z, V, y[i], &best);
            used++;
        }
    }
    const lrc_tensor *it = lrc_tensor_set_find(&in, "iterations");
    if (it) iters = ((const int32_t *)it->data)[0];
    char at[64] = "";
    if (it) snprintf(at, sizeof at, " at T = %lld", (long long)iters);
    if (!rc && tk)
        printf("validation loss %.4f nats/token, %.4f nats/byte%s (%lld batches of %lldx%lld tokens)\n", total / used,
               total / bytes, at, (long long)n, (long long)B, (long long)T);
    else if (!rc)
        printf("validation loss %.4f nats/byte%s (%lld batches of %lldx%lld)\n", total / used, at, (long long)n, (long long)B,
               (long long)T);
    lrc_tensor_free(lab);
    lrc_exec_free(x);
    if (c.g) lrc_compiled_free(&c);
    lrc_graph_free(g);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&outs);
    lrc_text_free(&text);
    return rc;
}

int cmd_eval(int argc, char **argv)
{
    static const struct option opts[] = {MODEL_OPTS,
                                         {"weights", required_argument, 0, OPT_WEIGHTS},
                                         {"data", required_argument, 0, OPT_DATA},
                                         {"batch", required_argument, 0, OPT_BATCH},
                                         {"threads", required_argument, 0, OPT_THREADS},
                                         {"seq", required_argument, 0, OPT_SEQ},
                                         {"seed", required_argument, 0, OPT_SEED},
                                         {"steps", required_argument, 0, OPT_STEPS},
                                         {"tokenizer", required_argument, 0, OPT_TOKENIZER},
                                         {0, 0, 0, 0}};
    static const char *help =
        "usage: lrc eval MODEL [--preset P] [--set KEY=VALUE]... --weights W.safetensors [--data DIR|FILE]\n"
        "                [--batch B] [--threads N] [--seq T] [--seed S] [--steps N] [--tokenizer T]\n"
        "\n"
        "An image model (vit): classifies the test images of the data set and prints\n"
        "the test accuracy and mean loss. A language model: the mean next-token loss\n"
        "(and with a tokenizer, per byte of text) on N fixed validation batches of the text (those lrc train --seed S\n"
        "evaluates); a looped model at its T (--set T=4). Compiled for this CPU.\n"
        "\n" MODEL_HELP
        "  --weights FILE    trained parameters (lrc train writes RUN_DIR/model.safetensors)\n"
        "  --data DIR|FILE   images: the four IDX files of Fashion-MNIST (default:\n"
        "                    Debian's /usr/share/datasets/fashion-mnist); text: a file\n"
        "                    (default: the King James Bible, as lrc train)\n"
        "  --batch B         images (default 256) or sequences (default 16) per run\n"
        "  --seq T           text: tokens per sequence (default 256)\n"
        "  --tokenizer T     text: a tokenizer.json (or a directory with one; a Hugging\n"
        "                    Face MODEL's own by default); without it, a token per byte\n"
        "  --seed S          text: the training run's seed (default 0)\n"
        "  --steps N         text: validation batches (default 8)\n"
        "  --threads N       threads (default: all cores)\n";
    cli_args a;
    int rc = cli_parse_args("eval", argc, argv, opts, help, true, &a);
    if (rc >= 0) goto out;
    char hf_tok[4200];
    struct stat st;
    if (lrc_hf_is_dir(a.m.model) && !a.tokenizer) { /* its text is its tokenizer's, not bytes */
        snprintf(hf_tok, sizeof hf_tok, "%s/tokenizer.json", a.m.model);
        if (stat(hf_tok, &st) != 0) {
            rc = cli_usage_error("eval", "%s has no tokenizer.json, and its text is not bytes: give --tokenizer", a.m.model);
            goto out;
        }
        a.tokenizer = hf_tok;
    }
    if (!a.weights) {
        rc = cli_usage_error("eval", "needs --weights");
        goto out;
    }
    lrc_err err;
    lrc_model m = {0};
    lrc_images im;
    memset(&im, 0, sizeof im);
    lrc_tensor_set wfile, params;
    lrc_tensor_set_init(&wfile);
    lrc_tensor_set_init(&params);
    lrc_pool *pool = NULL;
    cli_classifier cl;
    memset(&cl, 0, sizeof cl);
    bool have_im = false;
    double loss = 0, acc = 0;
    rc = cli_model_load("eval", &a.m, &m, &err);
    if (!rc && a.threads != -1 && a.threads < 1) rc = lrc_err_set(&err, "--threads %lld: the thread count must be at least 1", (long long)a.threads);
    if (a.batch == 0) a.batch = !rc && m.task == LRC_TASK_LM ? 16 : 256;
    if (!rc) { /* the weights first: names and shapes checked against a graph of the model */
        lrc_graph *g = lrc_graph_new();
        rc = lrc_model_build(&m, 1, 1, g, &err);
        if (!rc) rc = lrc_safetensors_load(a.weights, &wfile, &err);
        if (!rc) rc = lrc_params_bind(g, &wfile, a.weights, &params, &err);
        lrc_graph_free(g);
    }
    if (!rc && !(pool = lrc_pool_new(a.threads > 0 ? (int)a.threads : lrc_pool_default_threads(), &err))) rc = LRC_EUSER;
    lrc_tokenizer *tk = NULL;
    char *tk_json = NULL;
    size_t tk_len;
    if (!rc && m.task == LRC_TASK_LM) {
        if (a.tokenizer) rc = cli_tokenizer_open(a.tokenizer, &tk, &tk_json, &tk_len, &err);
        if (!rc) rc = eval_text(&a, &m, &params, pool, tk, tk_json, &err);
        lrc_tokenizer_free(tk);
        free(tk_json);
        goto done;
    }
    if (!rc) rc = cli_images_open(&m, a.data, &im, &err);
    have_im = !rc;
    if (!rc) rc = cli_classifier_open(&m, a.batch, pool, &params, &cl, &err);
    double t0 = lrc_now_s();
    if (!rc) rc = cli_classifier_eval(&cl, &im, LRC_SPLIT_TEST, &loss, &acc, &err);
    if (!rc)
        printf("test accuracy %.4f (%lld images), mean loss %.4f, %.1f s\n", acc, (long long)im.n[LRC_SPLIT_TEST], loss,
               lrc_now_s() - t0);
done:
    cli_classifier_close(&cl);
    lrc_pool_free(pool);
    if (have_im) lrc_images_free(&im);
    lrc_tensor_set_clear(&wfile);
    lrc_tensor_set_clear(&params);
    lrc_model_free(&m);
    rc = rc ? cli_user_error(&err) : 0;
out:
    cli_model_opts_free(&a.m);
    return rc;
}
