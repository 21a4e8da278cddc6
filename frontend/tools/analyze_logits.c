/* analyze_logits.c — lrc analyze --fit-layerrope of a Hugging Face
 * directory: the model's logits with its own per-layer gains and with the
 * LayerRoPE fit (--set norm=layerrope, the written file), side by side, so
 * that the fit's relative error per site is read as what it does to the
 * model's output.
 *
 * Both run every node on its f64 reference kernel (lrc_run64) on the same
 * tokens: POSITIONS ids drawn from a fixed seed, so the comparison needs no
 * tokenizer and is the same on every machine. Per position: each side's
 * top-1 token, the largest |difference| of the logits and KL(before || after)
 * of their softmaxes; overall the relative RMS difference and the top-1
 * agreement. */
#include "lrc_tools.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POSITIONS 32
#define SEED 1u

/* the logits [POSITIONS, V] of dir's model (with sets) on tokens, from weights; NULL on error */
static double *logits_of(const char *dir, char *const *sets, int n_sets, const char *weights, const lrc_tensor *tokens,
                         int64_t *vocab, lrc_err *err)
{
    lrc_model m = {0};
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set in, params;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&params);
    lrc_run64 r = {0};
    double *out = NULL;
    lrc_tensor *tok = lrc_tensor_new("tokens", LRC_I32, &tokens->shape, err);
    int rc = tok ? LRC_OK : LRC_EUSER;
    if (tok) memcpy(tok->data, tokens->data, POSITIONS * sizeof(int32_t)), rc = lrc_tensor_set_add(&in, tok, err);
    if (!rc) rc = lrc_model_load(&m, dir, NULL, sets, n_sets, err);
    if (!rc) rc = lrc_model_build(&m, 1, POSITIONS, g, err);
    if (!rc) rc = lrc_run64_weights(g, &in, weights, &params, &r, err);
    if (!rc) {
        const lrc_shape *s = &g->nodes[g->outputs[0]].shape; /* logits [1, T, V] */
        *vocab = s->dim[s->ndim - 1];
        out = lrc_xmalloc((size_t)(POSITIONS * *vocab) * sizeof(double));
        memcpy(out, r.buf[g->outputs[0]], (size_t)(POSITIONS * *vocab) * sizeof(double));
    }
    if (r.buf) lrc_run64_free(&r);
    if (m.L) lrc_model_free(&m);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&params);
    lrc_graph_free(g);
    return out;
}

static int64_t argmax(const double *x, int64_t n)
{
    int64_t k = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[k]) k = i;
    return k;
}

/* KL(softmax(p) || softmax(q)) */
static double kl(const double *p, const double *q, int64_t n)
{
    const double mp = p[argmax(p, n)], mq = q[argmax(q, n)];
    double zp = 0, zq = 0;
    for (int64_t i = 0; i < n; i++) zp += exp(p[i] - mp), zq += exp(q[i] - mq);
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        const double lp = p[i] - mp - log(zp), lq = q[i] - mq - log(zq);
        s += exp(lp) * (lp - lq);
    }
    return s;
}

int lrc_analyze_fit_logits(const char *dir, const char *fit_file, cJSON *out, lrc_err *err)
{
    int64_t vocab = 0, v2 = 0;
    lrc_model m = {0};
    int rc = lrc_model_load(&m, dir, NULL, NULL, 0, err) || lrc_model_config_int(&m, "vocab", &vocab, err) ? LRC_EUSER : LRC_OK;
    if (m.L) lrc_model_free(&m);
    if (rc) return rc;
    lrc_shape s = {2, {1, POSITIONS}};
    lrc_tensor *tokens = lrc_tensor_new("tokens", LRC_I32, &s, err);
    if (!tokens) return LRC_EUSER;
    uint64_t x = SEED;
    for (int i = 0; i < POSITIONS; i++) { /* splitmix64 */
        uint64_t z = (x += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull, z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        ((int32_t *)tokens->data)[i] = (int32_t)((z ^ (z >> 31)) % (uint64_t)vocab);
    }
    char *own = lrc_safetensors_dir_file(dir);
    if (!own) return lrc_tensor_free(tokens), lrc_err_nomem(err, "reading %s", dir);
    char *sets[] = {"norm=layerrope"};
    double *before = logits_of(dir, NULL, 0, own, tokens, &vocab, err);
    double *after = before ? logits_of(dir, sets, 1, fit_file, tokens, &v2, err) : NULL;
    free(own);
    if (!after) rc = lrc_err_prefix(err, "--fit-layerrope: the logits before and after");
    else {
        printf("\nlogits of %s with its gains and with the fit (%d tokens drawn with seed %u, f64)\n", dir, POSITIONS, SEED);
        printf("%5s  %6s  %12s  %12s  %12s  %12s\n", "pos", "token", "top-1 before", "top-1 after", "max |diff|", "KL");
        cJSON *o = cJSON_AddObjectToObject(out, "fit_logits"), *rows = cJSON_AddArrayToObject(o, "positions");
        double dd = 0, bb = 0, worst = 0, kl_sum = 0;
        int agree = 0;
        for (int t = 0; t < POSITIONS; t++) {
            const double *p = before + t * vocab, *q = after + t * vocab;
            double mx = 0;
            for (int64_t i = 0; i < vocab; i++) {
                const double d = q[i] - p[i];
                dd += d * d, bb += p[i] * p[i];
                if (fabs(d) > mx) mx = fabs(d);
            }
            const int64_t tb = argmax(p, vocab), ta = argmax(q, vocab);
            const double k = kl(p, q, vocab);
            agree += tb == ta, kl_sum += k, worst = mx > worst ? mx : worst;
            printf("%5d  %6d  %12lld  %12lld  %12.4e  %12.4e\n", t, ((int32_t *)tokens->data)[t], (long long)tb, (long long)ta, mx, k);
            cJSON *row = cJSON_CreateObject();
            cJSON_AddNumberToObject(row, "token", ((int32_t *)tokens->data)[t]);
            cJSON_AddNumberToObject(row, "top1_before", (double)tb);
            cJSON_AddNumberToObject(row, "top1_after", (double)ta);
            cJSON_AddNumberToObject(row, "max_abs_diff", mx);
            cJSON_AddNumberToObject(row, "kl", k);
            cJSON_AddItemToArray(rows, row);
        }
        const double rel = bb > 0 ? sqrt(dd / bb) : sqrt(dd);
        printf("top-1 agrees at %d of %d positions; relative RMS difference %.4e, largest %.4e, mean KL %.4e\n", agree, POSITIONS,
               rel, worst, kl_sum / POSITIONS);
        cJSON_AddNumberToObject(o, "top1_agree", agree);
        cJSON_AddNumberToObject(o, "relative_rms", rel);
        cJSON_AddNumberToObject(o, "max_abs_diff", worst);
        cJSON_AddNumberToObject(o, "mean_kl", kl_sum / POSITIONS);
    }
    free(before), free(after);
    lrc_tensor_free(tokens);
    return rc;
}
